#pragma once
// Building blocks every algorithm family shares: how a buffer is cut into
// per-rank blocks and pipeline chunks, and the two exchanges the textbook
// algorithms are made of (send one span while receiving another, with or
// without reducing what arrives). Written only against the transport
// concept and its memory object, so host and device buffers share them.
//
// Also what every row of the algorithm table (table.hpp) is made of: the
// names of collectives and algorithms, the cost counts and what they
// depend on.
#include <algorithm>
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include <ringtree/core/reduce.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree {

// Every algorithm any collective offers; table.hpp says which collective
// offers which, and how each is spelled.
enum class algorithm { automatic, ring, tree, binomial, linear, recursive_doubling, rabenseifner, scatter_allgather, one_shot, dissemination,
                       two_shot, direct, pairwise, hierarchical };

enum class collective { allreduce, broadcast, reduce, scatter, gather, reduce_scatter, allgather, barrier, alltoall };
inline constexpr collective all_collectives[] = {collective::allreduce, collective::broadcast,      collective::reduce,
                                                 collective::scatter,   collective::gather,         collective::reduce_scatter,
                                                 collective::allgather, collective::barrier,        collective::alltoall};

constexpr std::string_view to_string(collective c) noexcept {
  constexpr std::string_view names[] = {"allreduce", "broadcast",      "reduce",    "scatter",
                                        "gather",    "reduce_scatter", "allgather", "barrier", "alltoall"};
  return names[static_cast<int>(c)];
}

// Pipeline granularity (communicator_options::chunks): one table, not
// constants scattered through headers.
struct chunk_sizes {
  std::size_t ring_chunk_bytes = std::size_t{1} << 19;  // overlap reduce with the next receive
  std::size_t tree_chunk_bytes = std::size_t{1} << 16;  // keep every tree level busy
  std::size_t chain_chunk_bytes = std::size_t{1} << 18; // pipelined chain broadcast
  std::size_t direct_chunk_bytes = std::size_t{1} << 18; // a reader of symmetric memory follows its writer
  std::size_t stream_bytes = std::size_t{1} << 20;       // each rank's staging for private calls that stream: two segments the caches hold
};

// What one call costs in the cost model's units (tuning/cost_model.hpp).
struct cost_counts {
  double steps = 0;        // latency steps: the longest chain of dependent messages
  double bytes = 0;        // the most bytes one rank sends, or receives, whichever is more
  double reduced = 0;      // the most bytes one rank reduces into its buffer
  double large_steps = 0;  // steps whose messages are larger than the model's knee
  double net_steps = 0;    // of a hierarchical algorithm: the steps between hosts (priced at the network's alpha) ...
  double net_bytes = 0;    // ... and the most bytes one host sends or receives over the network
};

// Where a call would run: what decides whether a row is offered.
struct placement {
  int ranks;
  std::size_t bytes;  // what the call moves (see tuner.hpp)
  memory_kind memory;
  bool symmetric = false;  // the call's buffers lie in symmetric memory (memory/symmetric.hpp)
  bool staging = false;    // private buffers may stream through the ranks' shared staging memory (ditto)
  int hosts = 1;           // the hosts the ranks span (a hierarchical transport, transport/hosts.hpp)
};

// What a row's cost counts depend on besides the buffer size: the rank
// count n, floor and ceil of log2 n, the largest power of two p <= n (and
// whether ranks are folded into it), the chunk sizes, the model's knee,
// and the double binary tree's shape (tree.hpp). Made once per rank count.
struct shape {
  int n = 1, lf = 0, lc = 0;
  double p = 1, odd = 0;
  chunk_sizes chunks{};
  double knee = 0;  // 0: no knee
  int tree_moved = 0, tree_reduced = 0, tree_steps_one = 0, tree_steps_many = 0;
  // Across hosts (1 host: everything is local): the hosts, the most ranks
  // one has, the slices of a hierarchical call (the fewest ranks one has),
  // and how many of a host's ranks send over its link at once in a flat
  // ring (its rank order's neighbours on other hosts).
  int hosts = 1, per_host = 1, slices = 1, net_share = 1;
  // Counts of an algorithm whose steps all send `message` bytes.
  constexpr cost_counts uniform(double steps, double bytes, double reduced, double message) const noexcept {
    return {steps, bytes, reduced, large(message) ? steps : 0};
  }
  constexpr bool large(double message) const noexcept { return knee > 0 && message > knee; }
};

}  // namespace ringtree

namespace ringtree::detail {

// What every row of the algorithm table starts from: its collective, its
// algorithm, and where it is offered (everywhere, unless the row says).
// A row adds its name, its counts(shape, bytes) and run(transport, chunks, ...).
template <collective C, algorithm A>
struct row {
  static constexpr collective what = C;
  static constexpr algorithm id = A;
  static constexpr bool offered(const placement&) noexcept { return true; }
  static constexpr bool direct = false;          // true: runs on a symmetric_window (algorithms/direct.hpp) too
  static constexpr bool window_only = false;  // true: runs only on a symmetric_window, never over messages
  static constexpr bool stages = false;       // true: its window form also runs small calls on private memory
  static constexpr bool streams = false;      // true: its window form also runs on private memory, through staging
  static constexpr bool across_hosts = false; // true: offered only where the ranks span hosts (hierarchical.hpp)
};

// Rank i's block when `count` elements are dealt to n ranks: the first
// count % n blocks hold one element more.
struct range { std::size_t begin, size; };
constexpr range block(std::size_t count, int n, int i) noexcept {
  const std::size_t q = count / n, r = count % n, u = static_cast<std::size_t>(i);
  return {u * q + std::min(u, r), q + (u < r ? 1 : 0)};
}
template <class E> std::span<E> block_of(std::span<E> s, int n, int i) noexcept {
  const auto b = block(s.size(), n, i);
  return s.subspan(b.begin, b.size);
}
constexpr int mod(int a, int n) noexcept { return ((a % n) + n) % n; }

constexpr std::size_t chunk_elems(std::size_t bytes, std::size_t elem) noexcept {
  return std::max<std::size_t>(1, bytes / elem);
}
constexpr std::size_t chunk_count(std::size_t size, std::size_t chunk) noexcept {
  return (size + chunk - 1) / chunk;
}
template <class E> std::span<E> chunk_of(std::span<E> s, std::size_t chunk, std::size_t j) noexcept {
  const std::size_t b = j * chunk;
  return s.subspan(b, std::min(chunk, s.size() - b));
}

template <transport T, class E>
typename T::request post_send(T& t, int peer, std::span<const E> s) {
  return t.isend(peer, std::as_bytes(s));
}
template <transport T, class E>
typename T::request post_recv(T& t, int peer, std::span<E> s) {
  return t.irecv(peer, std::as_writable_bytes(s));
}
template <transport T>
void wait_all(T& t, std::vector<typename T::request>& reqs) {
  for (auto& r : reqs) t.wait(r);
  reqs.clear();
}

// Send `out` to `to` while receiving `in` from `from`. Empty spans are not
// sent: both ends compute the same sizes, so they skip the same messages.
template <transport T, class E>
void sendrecv(T& t, int to, std::span<const E> out, int from, std::span<E> in) {
  typename T::request r, s;
  if (!in.empty()) r = post_recv(t, from, in);
  if (!out.empty()) s = post_send(t, to, out);
  t.wait(r);
  t.wait(s);
}

// Send `out` to `to` while receiving a span as long as `acc` from `from`
// and reducing it into `acc`. Both travel in chunks; two receive slots let
// the reduction of one chunk overlap the arrival of the next.
template <transport T, class E>
void sendrecv_reduce(T& t, op o, int to, std::span<const E> out, int from, std::span<E> acc,
                     std::size_t chunk, std::span<E> slots /* 2 * chunk */, operands order = operands::acc_first) {
  auto mem = t.memory();
  std::vector<typename T::request> sends;
  const std::size_t nout = chunk_count(out.size(), chunk), nin = chunk_count(acc.size(), chunk);
  typename T::request recv[2];
  auto slot = [&](std::size_t j) { return slots.subspan((j % 2) * chunk, chunk_of(acc, chunk, j).size()); };
  for (std::size_t j = 0; j < std::min<std::size_t>(2, nin); ++j) recv[j % 2] = post_recv(t, from, slot(j));
  sends.reserve(nout);
  for (std::size_t j = 0; j < nout; ++j) sends.push_back(post_send(t, to, chunk_of(out, chunk, j)));
  for (std::size_t j = 0; j < nin; ++j) {
    t.wait(recv[j % 2]);
    mem.reduce(o, chunk_of(acc, chunk, j), std::span<const E>(slot(j)), order);
    if (j + 2 < nin) recv[j % 2] = post_recv(t, from, slot(j + 2));
  }
  wait_all(t, sends);
}

}  // namespace ringtree::detail
