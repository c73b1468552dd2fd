#pragma once
// The words every row of the algorithm table (table.hpp) is made of: the
// names of collectives and algorithms, the chunk sizes, the cost counts
// and what they depend on (shape), where a call runs (placement), and the
// row every algorithm's row starts from. No transport code: the cost model
// and the tools use these without running anything.
#include <array>
#include <cstddef>
#include <string_view>

#include <ringtree/core/reduce.hpp>
#include <ringtree/transport/transport.hpp>  // memory_kind

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
  std::size_t bytes;  // what the call moves (see tuning/cost_model.hpp)
  memory_kind memory;
  bool symmetric = false;  // the call's buffers lie in symmetric memory (memory/symmetric.hpp)
  bool staging = false;    // private buffers may stream through the ranks' shared staging memory (ditto)
  int hosts = 1;           // the hosts the ranks span (a hierarchical_transport, transport/topology.hpp)
  std::size_t stage_bytes = 0;  // what one rank may stage in a small call (0: no staging; memory/symmetric.hpp)
};

// What a row's cost counts depend on besides the buffer size: the rank
// count n, floor and ceil of log2 n, the largest power of two p <= n (and
// whether ranks are folded into it), the chunk sizes, the model's knee,
// and the double binary tree's shape (tuning/tree_shape.hpp). Made once per rank count.
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
  // And of the hypercube algorithms: at distance 2^k, how many of a host's
  // ranks send across hosts at once (tuning/cost_model.hpp's host_shape).
  std::array<int, 32> cube{};
  // And of the double binary tree: the half-buffers the busiest host's link carries one way.
  int tree_cross = 0;
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
  // Across hosts: the bytes the busiest host's link carries, where the row
  // counts them itself (nullptr: its bytes times shape::net_share).
  static constexpr double (*net_bytes)(const shape&, double) noexcept = nullptr;
};

}  // namespace ringtree::detail
