#pragma once
// Tree algorithms: latency of O(log n) steps, for small messages and many
// ranks.
//
// binomial tree (reduce, broadcast): in round k, ranks whose (virtual) rank
//   differs in bit k exchange the whole buffer; ceil(log2 n) rounds. Best for
//   small messages: no chunking overhead, fewest steps.
// binary tree, pipelined (reduce, broadcast): an in-order binary tree of
//   depth about log2 n; the buffer moves in chunks, so all levels work at
//   once: about depth + chunks steps, each link carries the buffer once.
// double binary tree all-reduce: two binary trees, the second the first
//   shifted by one rank so that most leaves of one are inner nodes of the
//   other; each tree reduces then broadcasts half of the buffer, so every
//   rank sends and receives in both directions. About 2 log2 n + chunks
//   steps: the choice for small and medium messages.
#include <vector>

#include <ringtree/algorithms/common.hpp>

namespace ringtree::tree {

struct links {
  int parent = -1;
  int child[2] = {-1, -1};
};

// In-order binary tree over positions 0..n-1: the root of [lo, hi) is its
// middle, the left and right halves are its subtrees.
inline links binary_tree(int n, int v) noexcept {
  links l;
  int lo = 0, hi = n;
  while (true) {
    const int mid = lo + (hi - lo) / 2;
    if (v == mid) {
      if (lo < mid) l.child[0] = lo + (mid - lo) / 2;
      if (mid + 1 < hi) l.child[1] = mid + 1 + (hi - mid - 1) / 2;
      return l;
    }
    l.parent = mid;
    if (v < mid) hi = mid;
    else lo = mid + 1;
  }
}

// The same tree with its positions laid on the ranks so that position p is
// rank (p + shift) mod n.
inline links binary_tree_shifted(int n, int rank, int shift) noexcept {
  links l = binary_tree(n, detail::mod(rank - shift, n));
  auto phys = [&](int p) { return p < 0 ? -1 : detail::mod(p + shift, n); };
  return {phys(l.parent), {phys(l.child[0]), phys(l.child[1])}};
}
// The binary tree whose root (position n/2) is `root`.
inline links binary_tree_rooted(int n, int rank, int root) noexcept {
  return binary_tree_shifted(n, rank, detail::mod(root - n / 2, n));
}

namespace pipeline {  // one chunk up or down a tree
using namespace ringtree::detail;

// One chunk up the tree: fold in the children's chunks, pass it to the parent.
template <transport T, class E>
void up(T& t, op o, const links& l, std::span<E> chunk, std::span<E> slots,
        std::vector<typename T::request>& sends) {
  typename T::request rq[2];
  for (int k = 0; k < 2; ++k)
    if (l.child[k] >= 0) rq[k] = post_recv(t, l.child[k], slots.subspan(k * chunk.size(), chunk.size()));
  for (int k = 0; k < 2; ++k)
    if (l.child[k] >= 0) {
      t.wait(rq[k]);
      t.memory().reduce(o, chunk, std::span<const E>(slots.subspan(k * chunk.size(), chunk.size())));
    }
  if (l.parent >= 0) sends.push_back(post_send(t, l.parent, std::span<const E>(chunk)));
}

// One chunk down the tree: take it from the parent, pass it to the children.
template <transport T, class E>
void down(T& t, const links& l, std::span<E> chunk, std::vector<typename T::request>& sends) {
  if (l.parent >= 0) {
    auto r = post_recv(t, l.parent, chunk);
    t.wait(r);
  }
  for (int k = 0; k < 2; ++k)
    if (l.child[k] >= 0) sends.push_back(post_send(t, l.child[k], std::span<const E>(chunk)));
}

}  // namespace pipeline

template <transport T, class E>
void reduce(T& t, std::span<E> data, op o, int root, const chunk_sizes& chunks = {}) {
  const links l = binary_tree_rooted(t.size(), t.rank(), root);
  const std::size_t chunk = std::min(detail::chunk_elems(chunks.tree_chunk_bytes, sizeof(E)), std::max<std::size_t>(1, data.size()));
  auto slots = t.memory().template scratch<E>(2 * chunk);
  std::vector<typename T::request> sends;
  for (std::size_t j = 0; j < detail::chunk_count(data.size(), chunk); ++j)
    pipeline::up(t, o, l, detail::chunk_of(data, chunk, j), slots.span(), sends);
  detail::wait_all(t, sends);
}

template <transport T, class E>
void broadcast(T& t, std::span<E> data, int root, const chunk_sizes& chunks = {}) {
  const links l = binary_tree_rooted(t.size(), t.rank(), root);
  const std::size_t chunk = detail::chunk_elems(chunks.tree_chunk_bytes, sizeof(E));
  std::vector<typename T::request> sends;
  for (std::size_t j = 0; j < detail::chunk_count(data.size(), chunk); ++j)
    pipeline::down(t, l, detail::chunk_of(data, chunk, j), sends);
  detail::wait_all(t, sends);
}

// Double binary tree all-reduce: half h of the buffer is reduced up tree h
// and broadcast down it; the two trees' chunks are interleaved so that both
// are in flight at once. Every rank takes the (tree, chunk) pairs in the
// same order, so the waits cannot form a cycle. In a tree where a rank is
// a leaf it has nothing to wait for, so it posts all its chunks of that
// tree at once: otherwise its sends would wait on its work in the other
// tree, and chunk after chunk would chain the two trees' depths (steps
// growing with the chunk count instead of the pipeline's depth + chunks).
// Messages of one pair must keep their order, so a rank whose parent is the
// same in both trees (their chunks interleave on one channel) does not.
template <transport T, class E>
void allreduce(T& t, std::span<E> data, op o, const chunk_sizes& chunks = {}) {
  const int n = t.size();
  if (n == 1) return;
  const links l[2] = {binary_tree_shifted(n, t.rank(), 0), binary_tree_shifted(n, t.rank(), 1)};
  const std::span<E> half[2] = {detail::block_of(data, 2, 0), detail::block_of(data, 2, 1)};
  const std::size_t chunk = std::min(detail::chunk_elems(chunks.tree_chunk_bytes, sizeof(E)), std::max<std::size_t>(1, half[0].size()));
  const std::size_t pieces = detail::chunk_count(half[0].size(), chunk);  // half[0] is the longer
  auto slots = t.memory().template scratch<E>(2 * chunk);
  std::vector<typename T::request> reqs;
  auto has = [&](int h, std::size_t j) { return j < detail::chunk_count(half[h].size(), chunk); };
  bool early[2];
  for (int h = 0; h < 2; ++h)
    early[h] = l[h].child[0] < 0 && l[h].child[1] < 0 && l[h].parent != l[1 - h].parent;
  for (int h = 0; h < 2; ++h)  // up: leaves send everything at once
    for (std::size_t j = 0; early[h] && has(h, j); ++j)
      reqs.push_back(detail::post_send(t, l[h].parent, std::span<const E>(detail::chunk_of(half[h], chunk, j))));
  for (std::size_t j = 0; j < pieces; ++j)
    for (int h = 0; h < 2; ++h)
      if (!early[h] && has(h, j)) pipeline::up(t, o, l[h], detail::chunk_of(half[h], chunk, j), slots.span(), reqs);
  detail::wait_all(t, reqs);
  for (int h = 0; h < 2; ++h)  // down: leaves take everything at once
    for (std::size_t j = 0; early[h] && has(h, j); ++j)
      reqs.push_back(detail::post_recv(t, l[h].parent, detail::chunk_of(half[h], chunk, j)));
  for (std::size_t j = 0; j < pieces; ++j)
    for (int h = 0; h < 2; ++h)
      if (!early[h] && has(h, j)) pipeline::down(t, l[h], detail::chunk_of(half[h], chunk, j), reqs);
  detail::wait_all(t, reqs);
}

// Binomial tree, positions relative to the root: position v receives from
// v - lowbit(v) and sends to v + 2^k for every 2^k below lowbit(v).
template <transport T, class E>
void binomial_broadcast(T& t, std::span<E> data, int root) {
  const int n = t.size(), v = detail::mod(t.rank() - root, n);
  auto phys = [&](int p) { return detail::mod(p + root, n); };
  int mask = 1;
  while (mask < n && !(v & mask)) mask <<= 1;
  if (v != 0) {
    auto r = detail::post_recv(t, phys(v - mask), data);
    t.wait(r);
  }
  std::vector<typename T::request> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < n) sends.push_back(detail::post_send(t, phys(v + mask), std::span<const E>(data)));
  detail::wait_all(t, sends);
}

// `data` is clobbered on ranks other than the root.
template <transport T, class E>
void binomial_reduce(T& t, std::span<E> data, op o, int root) {
  const int n = t.size(), v = detail::mod(t.rank() - root, n);
  auto phys = [&](int p) { return detail::mod(p + root, n); };
  auto tmp = t.memory().template scratch<E>(data.size());
  for (int mask = 1; mask < n; mask <<= 1) {
    if (v & mask) {
      auto s = detail::post_send(t, phys(v - mask), std::span<const E>(data));
      t.wait(s);
      return;
    }
    if (v + mask < n) {
      auto r = detail::post_recv(t, phys(v + mask), tmp.span());
      t.wait(r);
      t.memory().reduce(o, data, std::span<const E>(tmp.span()));
    }
  }
}

// Rows of the algorithm table (table.hpp).
struct allreduce_row : detail::row<collective::allreduce, algorithm::tree> {
  static constexpr std::string_view about = "double binary tree (as NCCL's): reduce up and broadcast down two trees that split the buffer, pipelined";
  static constexpr std::string_view name = "tree";
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    const double chunk = double(s.chunks.tree_chunk_bytes);
    const bool many = static_cast<double>(static_cast<std::size_t>(B / 2)) > chunk;  // each half in several chunks
    return s.uniform(many ? s.tree_steps_many : s.tree_steps_one, s.tree_moved * B / 2, s.tree_reduced * B / 2,
                     std::min(B / 2, chunk));
  }
  // Across hosts: every half that crosses a host's link, all pipelined at once.
  static constexpr double net_bytes_of(const shape& s, double B) noexcept { return std::max(s.tree_moved, s.tree_cross) * B / 2; }
  static constexpr double (*net_bytes)(const shape&, double) noexcept = &net_bytes_of;
  template <transport T, class E>
  static void run(T& t, const chunk_sizes& c, std::span<E> data, op o) { allreduce(t, data, o, c); }
};
struct broadcast_row : detail::row<collective::broadcast, algorithm::tree> {
  static constexpr std::string_view about = "pipelined binary tree from the root: log2 n depth, chunks in flight";
  static constexpr std::string_view name = "tree";
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    return s.uniform(s.lf, (s.n > 2 ? 2 : 1) * B, 0, std::min(B, double(s.chunks.tree_chunk_bytes)));
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes& c, std::span<E> data, int root) { broadcast(t, data, root, c); }
};
struct reduce_row : detail::row<collective::reduce, algorithm::tree> {
  static constexpr std::string_view about = "pipelined binary tree toward the root";
  static constexpr std::string_view name = "tree";
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    const double k = s.n > 2 ? 2 : 1;
    return s.uniform(s.lf, k * B, k * B, std::min(B, double(s.chunks.tree_chunk_bytes)));
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes& c, std::span<E> data, op o, int root) { reduce(t, data, o, root, c); }
};
struct binomial_broadcast_row : detail::row<collective::broadcast, algorithm::binomial> {
  static constexpr std::string_view about = "binomial tree: log2 n rounds of the whole message (small messages)";
  static constexpr std::string_view name = "binomial";
  static constexpr cost_counts counts(const shape& s, double B) noexcept { return s.uniform(s.lf, s.lc * B, 0, B); }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<E> data, int root) { binomial_broadcast(t, data, root); }
};
struct binomial_reduce_row : detail::row<collective::reduce, algorithm::binomial> {
  static constexpr std::string_view about = "binomial tree toward the root: log2 n rounds of the whole message (small messages)";
  static constexpr std::string_view name = "binomial";
  static constexpr cost_counts counts(const shape& s, double B) noexcept { return s.uniform(s.lf, s.lc * B, s.lc * B, B); }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<E> data, op o, int root) { binomial_reduce(t, data, o, root); }
};

}  // namespace ringtree::tree
