#pragma once
// Ring algorithms. Rank r talks only to its neighbours r+1 (right) and r-1
// (left), and the buffer is cut into n blocks.
//
// reduce-scatter: n-1 steps; at step s rank r passes block r-s-1 to the
//   right and folds the left neighbour's copy of block r-s-2 into its own.
//   Afterwards rank r holds block r reduced over all ranks.
// all-gather:     n-1 steps; at step s rank r passes block r-s (complete)
//   to the right and receives block r-s-1 from the left.
// all-reduce:     reduce-scatter, then all-gather. Each rank sends and
//   receives 2(n-1)/n of the buffer, the least any algorithm can, in
//   2(n-1) latency steps: the choice for large messages.
// broadcast:      a pipelined chain root -> root+1 -> ... in chunks: about
//   (n-1) + chunks steps, each link carries the buffer once.
#include <vector>

#include <ringtree/algorithms/common.hpp>

namespace ringtree::ring {

// Where rank i's block lies: n even blocks (detail::block), or `parts`
// even blocks held by ranks 0..parts-1 while the ranks after them hold
// empty ones (a host with more ranks than the hierarchy's slices:
// hierarchical.hpp), or any sizes (`sizes`, one per rank, in rank order).
struct layout {
  int parts = 0;                          // 0: one block per rank
  std::span<const std::size_t> sizes{};  // if set: block i holds sizes[i] elements
  detail::range of(std::size_t count, int n, int i) const noexcept {
    if (!sizes.empty()) {
      std::size_t at = 0;
      for (int j = 0; j < i; ++j) at += sizes[j];
      return {at, sizes[i]};
    }
    const int p = parts > 0 ? parts : n;
    return i < p ? detail::block(count, p, i) : detail::range{count, 0};
  }
  template <class E>
  std::span<E> block(std::span<E> s, int n, int i) const noexcept {
    const auto b = of(s.size(), n, i);
    return s.subspan(b.begin, b.size);
  }
};

template <transport T, class E>
void reduce_scatter(T& t, std::span<E> data, op o, const chunk_sizes& chunks = {}, layout at = {}) {
  const int n = t.size(), r = t.rank();
  const int right = detail::mod(r + 1, n), left = detail::mod(r - 1, n);
  std::size_t largest = 1;
  for (int i = 0; i < n; ++i) largest = std::max(largest, at.of(data.size(), n, i).size);
  const std::size_t chunk = std::min(detail::chunk_elems(chunks.ring_chunk_bytes, sizeof(E)), largest);
  auto slots = t.memory().template scratch<E>(2 * chunk);
  for (int s = 0; s < n - 1; ++s) {
    auto out = at.block(data, n, detail::mod(r - s - 1, n));
    auto acc = at.block(data, n, detail::mod(r - s - 2, n));
    detail::sendrecv_reduce(t, o, right, std::span<const E>(out), left, acc, chunk, slots.span());
  }
}

template <transport T, class E>
void allgather(T& t, std::span<E> data, layout at = {}) {
  const int n = t.size(), r = t.rank();
  const int right = detail::mod(r + 1, n), left = detail::mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s)
    detail::sendrecv(t, right, std::span<const E>(at.block(data, n, detail::mod(r - s, n))), left,
                     at.block(data, n, detail::mod(r - s - 1, n)));
}

template <transport T, class E>
void allreduce(T& t, std::span<E> data, op o, const chunk_sizes& chunks = {}) {
  reduce_scatter(t, data, o, chunks);
  allgather(t, data);
}

template <transport T, class E>
void broadcast(T& t, std::span<E> data, int root, const chunk_sizes& chunks = {}) {
  const int n = t.size(), v = detail::mod(t.rank() - root, n);  // position in the chain
  const int next = detail::mod(t.rank() + 1, n), prev = detail::mod(t.rank() - 1, n);
  const std::size_t chunk = detail::chunk_elems(chunks.chain_chunk_bytes, sizeof(E));
  const std::size_t pieces = detail::chunk_count(data.size(), chunk);
  std::vector<typename T::request> recvs, sends;
  if (v > 0)
    for (std::size_t j = 0; j < pieces; ++j) recvs.push_back(detail::post_recv(t, prev, detail::chunk_of(data, chunk, j)));
  for (std::size_t j = 0; j < pieces; ++j) {
    if (v > 0) t.wait(recvs[j]);
    if (v < n - 1) sends.push_back(detail::post_send(t, next, std::span<const E>(detail::chunk_of(data, chunk, j))));
  }
  detail::wait_all(t, sends);
}

// Reduce to one rank: reduce-scatter, then every block travels to the root.
// Bandwidth-optimal like all-reduce; `data` is clobbered on other ranks.
template <transport T, class E>
void reduce(T& t, std::span<E> data, op o, int root, const chunk_sizes& chunks = {}) {
  const int n = t.size(), r = t.rank();
  reduce_scatter(t, data, o, chunks);
  if (r != root) {
    if (auto mine = detail::block_of(data, n, r); !mine.empty()) {
      auto req = detail::post_send(t, root, std::span<const E>(mine));
      t.wait(req);
    }
    return;
  }
  std::vector<typename T::request> recvs;
  for (int i = 0; i < n; ++i)
    if (i != root && detail::block(data.size(), n, i).size != 0)
      recvs.push_back(detail::post_recv(t, i, detail::block_of(data, n, i)));
  detail::wait_all(t, recvs);
}

// Rows of the algorithm table (table.hpp): what each collective's ring
// costs, and how it runs.
struct allreduce_row : detail::row<collective::allreduce, algorithm::ring> {
  static constexpr std::string_view about = "reduce-scatter then all-gather around a ring, in pipelined chunks: each rank sends 2(n-1)/n of the buffer (bandwidth-optimal)";
  static constexpr std::string_view name = "ring";
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    const double n = s.n;
    return s.uniform(2 * (n - 1), 2 * (n - 1) / n * B, (n - 1) / n * B, std::min(B / n, double(s.chunks.ring_chunk_bytes)));
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes& c, std::span<E> data, op o) { allreduce(t, data, o, c); }
};
struct broadcast_row : detail::row<collective::broadcast, algorithm::ring> {
  static constexpr std::string_view about = "a pipelined chain from the root: chunks flow down n-1 links at once";
  static constexpr std::string_view name = "ring";
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    return s.uniform(s.n - 1, B, 0, std::min(B, double(s.chunks.chain_chunk_bytes)));
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes& c, std::span<E> data, int root) { broadcast(t, data, root, c); }
};
struct reduce_row : detail::row<collective::reduce, algorithm::ring> {
  static constexpr std::string_view about = "a pipelined chain toward the root, each rank adding its part to the chunks that pass";
  static constexpr std::string_view name = "ring";
  static constexpr cost_counts counts(const shape& s, double B) noexcept {  // the root receives every block
    const double n = s.n;
    return s.uniform(n, 2 * (n - 1) / n * B, (n - 1) / n * B, B / n);
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes& c, std::span<E> data, op o, int root) { reduce(t, data, o, root, c); }
};
struct reduce_scatter_row : detail::row<collective::reduce_scatter, algorithm::ring> {
  static constexpr std::string_view about = "n-1 steps around a ring; each rank ends with its block reduced over all ranks";
  static constexpr std::string_view name = "ring";
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    const double n = s.n;
    return s.uniform(n - 1, (n - 1) / n * B, (n - 1) / n * B, B / n);
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes& c, std::span<E> data, op o) { reduce_scatter(t, data, o, c); }
};
struct allgather_row : detail::row<collective::allgather, algorithm::ring> {
  static constexpr std::string_view about = "n-1 steps around a ring, each rank passing on the block it received last";
  static constexpr std::string_view name = "ring";
  static constexpr cost_counts counts(const shape& s, double B) noexcept { return s.uniform(s.n - 1, (s.n - 1) * B, 0, B); }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<E> data) { allgather(t, data); }
};

}  // namespace ringtree::ring
