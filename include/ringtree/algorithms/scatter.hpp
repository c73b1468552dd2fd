#pragma once
// Scatter and gather: the root holds n blocks of m elements, rank i's block
// is the i-th.
//
// linear:   the root exchanges one block with every other rank directly:
//   n-1 messages from one rank, no forwarding. Best for large blocks.
// binomial: position v (relative to the root) handles the blocks of its
//   subtree [v, v + lowbit(v)); each round halves what is forwarded, so
//   ceil(log2 n) steps, at the cost of moving some blocks twice or more.
//   Best for small blocks.
#include <algorithm>
#include <vector>

#include <ringtree/algorithms/common.hpp>

namespace ringtree {
namespace detail {

// Positions in a binomial tree rooted at position 0.
inline int lowbit(int v) noexcept { return v & -v; }
inline int top_bit_below(int n) noexcept {  // largest power of two < n (n > 1)
  int m = 1;
  while (m * 2 < n) m *= 2;
  return m;
}
inline int subtree(int n, int v) noexcept { return v == 0 ? n : std::min(lowbit(v), n - v); }
inline int first_child_gap(int n, int v) noexcept { return v == 0 ? (n > 1 ? top_bit_below(n) : 0) : lowbit(v) / 2; }

// Blocks laid out by position (root first) vs. by rank: rotate by `root`.
template <class M, class E>
void rotate_blocks(const M& mem, std::span<E> dst, std::span<const E> src, std::size_t m, int n, int by) {
  const std::size_t split = static_cast<std::size_t>(mod(by, n)) * m;
  mem.copy(dst.first(src.size() - split), src.subspan(split));
  mem.copy(dst.subspan(src.size() - split), src.first(split));
}

}  // namespace detail

namespace linear {

template <transport T, class E>
void scatter(T& t, std::span<const E> in, std::span<E> out, int root) {
  const int n = t.size(), r = t.rank();
  const std::size_t m = out.size();
  if (r != root) {
    if (m != 0) { auto q = detail::post_recv(t, root, out); t.wait(q); }
    return;
  }
  std::vector<typename T::request> sends;
  for (int i = 0; i < n && m != 0; ++i)
    if (i != root) sends.push_back(detail::post_send(t, i, in.subspan(i * m, m)));
  t.memory().copy(out, in.subspan(r * m, m));
  detail::wait_all(t, sends);
}

template <transport T, class E>
void gather(T& t, std::span<const E> in, std::span<E> out, int root) {
  const int n = t.size(), r = t.rank();
  const std::size_t m = in.size();
  if (r != root) {
    if (m != 0) { auto q = detail::post_send(t, root, in); t.wait(q); }
    return;
  }
  std::vector<typename T::request> recvs;
  for (int i = 0; i < n && m != 0; ++i)
    if (i != root) recvs.push_back(detail::post_recv(t, i, out.subspan(i * m, m)));
  t.memory().copy(out.subspan(r * m, m), in);
  detail::wait_all(t, recvs);
}

// Rows of the algorithm table (table.hpp): the root sends (receives)
// every other rank's block.
struct scatter_row : detail::row<collective::scatter, algorithm::linear> {
  static constexpr std::string_view about = "the root sends every rank its block directly";
  static constexpr std::string_view name = "linear";
  static constexpr cost_counts counts(const shape& s, double B) noexcept { return s.uniform(1, (s.n - 1) * B, 0, B); }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<const E> in, std::span<E> out, int root) { scatter(t, in, out, root); }
};
struct gather_row : detail::row<collective::gather, algorithm::linear> {
  static constexpr std::string_view about = "every rank sends its block directly to the root";
  static constexpr std::string_view name = "linear";
  static constexpr cost_counts counts(const shape& s, double B) noexcept { return scatter_row::counts(s, B); }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<const E> in, std::span<E> out, int root) { gather(t, in, out, root); }
};

}  // namespace linear

namespace binomial {

template <transport T, class E>
void scatter(T& t, std::span<const E> in, std::span<E> out, int root) {
  const int n = t.size(), v = detail::mod(t.rank() - root, n);
  const std::size_t m = out.size();
  if (m == 0) return;
  auto phys = [&](int p) { return detail::mod(p + root, n); };
  auto mem = t.memory();
  // `mine` holds the blocks of this subtree, in position order.
  auto tmp = mem.template scratch<E>(static_cast<std::size_t>(detail::subtree(n, v)) * m);
  if (v == 0) {
    detail::rotate_blocks(mem, tmp.span(), in, m, n, root);
  } else {
    auto q = detail::post_recv(t, phys(v - detail::lowbit(v)), tmp.span());
    t.wait(q);
  }
  std::span<const E> mine = tmp.span();
  std::vector<typename T::request> sends;
  for (int gap = detail::first_child_gap(n, v); gap > 0; gap /= 2)
    if (v + gap < n)
      sends.push_back(detail::post_send(t, phys(v + gap), mine.subspan(gap * m, detail::subtree(n, v + gap) * m)));
  mem.copy(out, mine.first(m));
  detail::wait_all(t, sends);
}

template <transport T, class E>
void gather(T& t, std::span<const E> in, std::span<E> out, int root) {
  const int n = t.size(), v = detail::mod(t.rank() - root, n);
  const std::size_t m = in.size();
  if (m == 0) return;
  auto phys = [&](int p) { return detail::mod(p + root, n); };
  auto mem = t.memory();
  auto tmp = mem.template scratch<E>(static_cast<std::size_t>(detail::subtree(n, v)) * m);
  auto mine = tmp.span();
  mem.copy(mine.first(m), in);
  std::vector<typename T::request> recvs;
  for (int gap = detail::first_child_gap(n, v); gap > 0; gap /= 2)
    if (v + gap < n)
      recvs.push_back(detail::post_recv(t, phys(v + gap), mine.subspan(gap * m, detail::subtree(n, v + gap) * m)));
  detail::wait_all(t, recvs);
  if (v == 0) {
    detail::rotate_blocks(mem, out, std::span<const E>(mine), m, n, -root);
  } else {
    auto q = detail::post_send(t, phys(v - detail::lowbit(v)), std::span<const E>(mine));
    t.wait(q);
  }
}


// Rows of the algorithm table (table.hpp): subtrees of 1, 2, 4, ... blocks
// travel in the rounds.
struct scatter_row : detail::row<collective::scatter, algorithm::binomial> {
  static constexpr std::string_view about = "binomial tree: each level hands half of its blocks down, log2 n rounds";
  static constexpr std::string_view name = "binomial";
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    cost_counts k{double(s.lf), (s.n - 1) * B, 0, 0};
    for (int j = 0; j < s.lf; ++j) k.large_steps += s.large(B * double(1 << j)) ? 1 : 0;
    return k;
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<const E> in, std::span<E> out, int root) { scatter(t, in, out, root); }
};
struct gather_row : detail::row<collective::gather, algorithm::binomial> {
  static constexpr std::string_view about = "binomial tree: blocks are gathered up in log2 n rounds";
  static constexpr std::string_view name = "binomial";
  static constexpr cost_counts counts(const shape& s, double B) noexcept { return scatter_row::counts(s, B); }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<const E> in, std::span<E> out, int root) { gather(t, in, out, root); }
};

}  // namespace binomial
}  // namespace ringtree
