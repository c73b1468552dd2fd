#pragma once
// One-shot all-reduce: every rank sends its whole buffer to every other
// rank and folds the n buffers locally, in rank order: x0 op x1 op ... op
// x(n-1), the same expression on every rank, so every rank ends with the
// same bits. One latency step, the fewest of any all-reduce, but n-1 whole
// buffers in and out of every rank: for small buffers, where latency is
// all that counts.
#include <vector>

#include <ringtree/algorithms/common.hpp>
#include <ringtree/algorithms/direct.hpp>

namespace ringtree::one_shot {

template <transport T, class E>
void allreduce(T& t, std::span<E> data, op o) {
  const int n = t.size(), r = t.rank();
  if (n == 1 || data.empty()) return;
  auto mem = t.memory();
  const std::size_t m = data.size();
  auto peers = mem.template scratch<E>((n - 1) * m);  // rank k's buffer at slot k (k < r) or k - 1 (k > r)
  auto from = [&](int k) { return peers.span().subspan(static_cast<std::size_t>(k < r ? k : k - 1) * m, m); };
  std::vector<typename T::request> reqs;
  for (int k = 0; k < n; ++k)
    if (k != r) reqs.push_back(detail::post_recv(t, k, from(k)));
  for (int k = 0; k < n; ++k)
    if (k != r) reqs.push_back(detail::post_send(t, k, std::span<const E>(data)));
  detail::wait_all(t, reqs);
  // Fold left to right into rank 0's buffer (this rank's own, or the copy
  // that came from rank 0), then keep the result.
  std::span<E> acc = r == 0 ? data : from(0);
  for (int k = 1; k < n; ++k) mem.reduce(o, acc, std::span<const E>(k == r ? data : from(k)));
  mem.copy(data, std::span<const E>(acc));
}

// The row of the algorithm table (table.hpp). Offered while what one rank
// receives, (n-1) buffers, stays within 64 MiB: beyond that its traffic
// alone (n-1 times the buffer, where the ring moves 2) rules it out, and
// its scratch would be as large. Where ranks share memory (a
// symmetric_window) it moves no messages: up to the window's staging
// capacity the peers read a staged copy, on any memory; beyond it, on
// symmetric memory, they read the buffers themselves (direct.hpp).
struct allreduce_row : detail::row<collective::allreduce, algorithm::one_shot> {
  static constexpr std::string_view about = "symmetric memory: each rank reads every peer's whole buffer and reduces it (small buffers)";
  static constexpr std::string_view name = "one_shot";
  static constexpr bool direct = true, stages = true;
  static constexpr std::size_t max_received_bytes = std::size_t{64} << 20;
  static constexpr bool offered(const placement& p) noexcept {
    return p.bytes <= max_received_bytes / static_cast<std::size_t>(std::max(1, p.ranks - 1));
  }
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    return s.uniform(1, (s.n - 1) * B, (s.n - 1) * B, B);
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<E> data, op o) { allreduce(t, data, o); }
  template <class W, class E>
    requires(!transport<W>)
  static void run(W& w, const chunk_sizes&, std::span<E> data, op o) {
    if (direct::staged_call<W>(data.size_bytes())) direct::allreduce_staged(w, data, o);
    else direct::allreduce_one_shot(w, data, o);
  }
};

}  // namespace ringtree::one_shot
