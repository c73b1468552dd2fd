#pragma once
// All-to-all: rank r's block j goes to rank j.
//
// pairwise: in step k = 1..n-1 rank r sends its block for r+k while it
//   receives the block rank r-k holds for it, so every rank talks to one
//   peer at a time and each pair meets exactly once: n-1 steps, (n-1)/n of
//   the buffer sent and received per rank (what MPI libraries run for
//   large all-to-alls).
// linear: every receive and every send posted at once, then all waited
//   for: one step, n-1 messages in flight per rank (what MPI libraries run
//   for small all-to-alls, where pairwise's n-1 round trips dominate).
//
// Blocks may differ in size (MPI_Alltoallv): `sends[j]` elements of `in`
// go to rank j, `recvs[j]` of `out` come from rank j, laid out in rank
// order. Every pair's message is sent even when it is empty, so a count
// that rank j does not expect raises there (the transport checks lengths)
// instead of lingering in the channel.
#include <numeric>
#include <vector>

#include <ringtree/algorithms/common.hpp>

namespace ringtree::pairwise {

// Where each rank's block starts, from the blocks' sizes.
inline std::vector<std::size_t> offsets(std::span<const std::size_t> counts) {
  std::vector<std::size_t> at(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), at.begin() + 1);
  return at;
}

template <transport T, class E>
void alltoall(T& t, std::span<const E> in, std::span<const std::size_t> sends, std::span<E> out,
              std::span<const std::size_t> recvs) {
  const int n = t.size(), r = t.rank();
  const auto si = offsets(sends), ri = offsets(recvs);
  auto to = [&](int j) { return in.subspan(si[j], sends[j]); };
  auto from = [&](int j) { return out.subspan(ri[j], recvs[j]); };
  t.memory().copy(from(r), to(r));
  for (int k = 1; k < n; ++k) {
    const int dst = detail::mod(r + k, n), src = detail::mod(r - k, n);
    auto rq = detail::post_recv(t, src, from(src));
    auto sq = detail::post_send(t, dst, to(dst));
    t.wait(rq);
    t.wait(sq);
  }
}

// Equal blocks: out.size() / n elements to and from every rank.
template <transport T, class E>
void alltoall(T& t, std::span<const E> in, std::span<E> out) {
  const std::vector<std::size_t> counts(t.size(), out.size() / t.size());
  alltoall(t, in, std::span<const std::size_t>(counts), out, std::span<const std::size_t>(counts));
}

// The row of the algorithm table (table.hpp). Its bytes are one rank's
// whole input: n-1 of its n blocks leave, one message per step.
struct alltoall_row : detail::row<collective::alltoall, algorithm::pairwise> {
  static constexpr std::string_view about = "n-1 rounds; in round k rank r sends to r+k and receives from r-k (blocks of any size)";
  static constexpr std::string_view name = "pairwise";
  static constexpr cost_counts counts(const shape& s, double bytes) noexcept {
    const double moved = s.n > 1 ? bytes * (s.n - 1) / s.n : 0;
    return s.uniform(s.n - 1, moved, 0, s.n > 0 ? bytes / s.n : 0);
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<const E> in, std::span<const std::size_t> sends, std::span<E> out,
                  std::span<const std::size_t> recvs) {
    alltoall(t, in, sends, out, recvs);
  }
};

}  // namespace ringtree::pairwise

namespace ringtree::linear {

template <transport T, class E>
void alltoall(T& t, std::span<const E> in, std::span<const std::size_t> sends, std::span<E> out,
              std::span<const std::size_t> recvs) {
  const int n = t.size(), r = t.rank();
  const auto si = pairwise::offsets(sends), ri = pairwise::offsets(recvs);
  std::vector<typename T::request> all;
  all.reserve(2 * static_cast<std::size_t>(n));
  // Receives first, so that no message waits for its buffer; rank r starts
  // with r+1, so that the n ranks do not all send to rank 0 first.
  for (int k = 1; k < n; ++k) {
    const int src = detail::mod(r - k, n);
    all.push_back(detail::post_recv(t, src, out.subspan(ri[src], recvs[src])));
  }
  for (int k = 1; k < n; ++k) {
    const int dst = detail::mod(r + k, n);
    all.push_back(detail::post_send(t, dst, in.subspan(si[dst], sends[dst])));
  }
  t.memory().copy(out.subspan(ri[r], recvs[r]), in.subspan(si[r], sends[r]));
  detail::wait_all(t, all);
}

// The row of the algorithm table (table.hpp): the bytes of pairwise's row
// in one step.
struct alltoall_row : detail::row<collective::alltoall, algorithm::linear> {
  static constexpr std::string_view about = "every rank posts all its n-1 receives and sends at once, then waits (blocks of any size)";
  static constexpr std::string_view name = "linear";
  static constexpr cost_counts counts(const shape& s, double bytes) noexcept {
    const double moved = s.n > 1 ? bytes * (s.n - 1) / s.n : 0;
    return s.uniform(s.n > 1 ? 1 : 0, moved, 0, s.n > 0 ? bytes / s.n : 0);
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<const E> in, std::span<const std::size_t> sends, std::span<E> out,
                  std::span<const std::size_t> recvs) {
    alltoall(t, in, sends, out, recvs);
  }
};

}  // namespace ringtree::linear
