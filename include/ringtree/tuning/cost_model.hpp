#pragma once
// The cost model: what each algorithm would cost, for teaching
// (ringtree-model, ringtree-perf --model), for explaining automatic's
// choices, and for choosing where nothing was measured (RINGTREE_TUNE=0).
//
// Hockney's model with a reduction term: a call that takes S latency steps,
// in which the busiest rank sends or receives W bytes and folds R bytes
// into its buffer, takes
//     alpha * S + beta * W + gamma * R
// seconds. alpha (per step), beta (per byte moved) and gamma (per byte
// reduced) are measured on the transport in use (tuning/calibration.hpp).
// Transports switch protocol at some message size (Open MPI's shared
// memory sends up to 4 KiB eagerly, larger ones after a handshake), so a
// step whose messages are larger than `knee` bytes costs `alpha_above`
// more, as NCCL's tuner has a latency per protocol. The counts S, W, R of
// every algorithm are its row's (table.hpp), functions of the rank count
// and the buffer size; tests check them against what the traced transport
// records.
#include <array>
#include <bit>
#include <cstddef>
#include <string>
#include <vector>

#include <ringtree/algorithms/table.hpp>
#include <ringtree/transport/topology.hpp>
#include <ringtree/tuning/tree_shape.hpp>

namespace ringtree {

// The constants of the model, in seconds.
struct cost_model {
  double alpha = 5e-6;     // per latency step
  double beta = 1e-10;     // per byte sent or received by the busiest rank
  double gamma = 1e-10;    // per byte reduced by the busiest rank
  double knee = 0;         // messages above this many bytes (0: none) ...
  double alpha_above = 0;  // ... cost this much more per step
  // Between hosts (ranks on several hosts): per step and per byte one
  // host's link carries; negative: as within a host (alpha, beta).
  double alpha_net = -1, beta_net = -1;
  std::string source = "built-in defaults";  // or the file it came from, or "measured"
  double seconds(const cost_counts& k) const noexcept {
    return alpha * k.steps + alpha_above * k.large_steps + beta * k.bytes + gamma * k.reduced +
           (alpha_net < 0 ? alpha : alpha_net) * k.net_steps + (beta_net < 0 ? beta : beta_net) * k.net_bytes;
  }
};

// The shape of the hosts for the model: how many, ranks on each, and how
// many of a host's ranks have their ring neighbour on another host (the
// ranks in rank order: 1 where each host's ranks are contiguous, all of
// them where ranks go round-robin over the hosts).
// The hypercube algorithms (recursive doubling, Rabenseifner) exchange at
// distances 1, 2, 4, ...: `cube[k]` is how many of one host's ranks send
// across hosts at once at distance 2^k (the busiest host's count): with
// hosts of 8 ranks numbered host by host, 0 below distance 8 and 8 from
// there on, all of a host's ranks on its one link.
// The double binary tree's edges between hosts carry half the buffer each
// way: `tree_cross` is how many halves the busiest host's link carries in
// one direction (both trees, up and down, pipelined: all at once).
struct host_shape {
  int hosts = 1, per_host = 1, slices = 1, net_share = 1;
  std::array<int, 32> cube{};
  int tree_cross = 0;
  static host_shape of(const host_layout& l) {
    host_shape h{l.hosts(), l.most_per_host(), l.slices(), 0};
    std::vector<int> crossing(l.hosts(), 0);
    for (int r = 0; r < l.ranks(); ++r)
      if (l.host_of(r) != l.host_of((r + 1) % l.ranks())) h.net_share = std::max(h.net_share, ++crossing[l.host_of(r)]);
    h.net_share = std::max(1, h.net_share);
    h.count_cube([&](int r) { return l.host_of(r); }, l.ranks(), l.hosts());
    h.count_tree([&](int r) { return l.host_of(r); }, l.ranks(), l.hosts());
    return h;
  }
  // `hosts` hosts of `per_host` ranks each, numbered host by host.
  static host_shape even(int hosts, int per_host) {
    host_shape h{hosts, per_host, per_host, 1};
    h.count_cube([per_host](int r) { return r / per_host; }, hosts * per_host, hosts);
    h.count_tree([per_host](int r) { return r / per_host; }, hosts * per_host, hosts);
    return h;
  }

 private:
  // Over the largest power of two p <= n ranks (those the hypercube runs on).
  template <class HostOf>
  void count_cube(HostOf host_of, int n, int hosts) {
    const int p = n < 1 ? 1 : 1 << (std::bit_width(unsigned(n)) - 1);
    std::vector<int> crossing;
    for (int k = 0; (1 << k) < p; ++k) {
      crossing.assign(static_cast<std::size_t>(hosts), 0);
      for (int r = 0; r < p; ++r)
        if (host_of(r) != host_of(r ^ (1 << k))) cube[k] = std::max(cube[k], ++crossing[host_of(r)]);
    }
  }
  template <class HostOf>
  void count_tree(HostOf host_of, int n, int hosts) {
    std::vector<int> out(static_cast<std::size_t>(hosts), 0), in(static_cast<std::size_t>(hosts), 0);
    for (int t = 0; t < 2 && n > 1; ++t)
      for (int r = 0; r < n; ++r)
        if (const int p = tree::binary_tree_shifted(n, r, t).parent; p >= 0 && host_of(p) != host_of(r)) {
          ++out[host_of(r)], ++in[host_of(p)];  // up
          ++out[host_of(p)], ++in[host_of(r)];  // down
        }
    for (int h = 0; h < hosts; ++h) tree_cross = std::max({tree_cross, out[h], in[h]});
  }
};

// The model on n ranks. `bytes` is what the call moves: the whole buffer
// for allreduce, broadcast and reduce, the input for reduce_scatter, one
// rank's block for scatter, gather and allgather. Counts are exact when the
// buffer divides evenly into the algorithm's blocks and chunks, and within
// an element per block otherwise.
class tuner {
 public:
  explicit tuner(int ranks, cost_model model = {}, chunk_sizes chunks = {}, memory_kind memory = memory_kind::host,
                 host_shape hosts = {})
      : m_(std::move(model)), memory_(memory) {
    s_.hosts = hosts.hosts;
    s_.per_host = hosts.per_host;
    s_.slices = hosts.slices;
    s_.net_share = hosts.net_share;
    s_.cube = hosts.cube;
    s_.tree_cross = hosts.tree_cross;
    s_.n = ranks;
    s_.lf = std::bit_width(unsigned(ranks)) - 1;
    s_.lc = std::bit_width(unsigned(ranks - 1));
    s_.p = double(1 << s_.lf);
    s_.odd = ranks > (1 << s_.lf) ? 1 : 0;
    s_.chunks = chunks;
    s_.knee = m_.knee;
    tree::double_tree_shape(s_);
  }
  int ranks() const noexcept { return s_.n; }
  const cost_model& model() const noexcept { return m_; }

  cost_counts counts(collective c, algorithm a, std::size_t bytes) const {
    const auto* row = detail::find_row(c, a);
    if (row == nullptr)
      throw error("cost model", -1, detail::cat(to_string(c), " has no algorithm ", to_string(a), " (it has: ",
                                                detail::offered_names(c), ")"));
    if (s_.n == 1 || (bytes == 0 && c != collective::barrier)) return {};
    cost_counts k = row->counts(s_, static_cast<double>(bytes));
    if (s_.hosts > 1 && a != algorithm::hierarchical) {
      // A flat algorithm across hosts: each of its steps waits on a message
      // over the network, and net_share of a host's ranks send at once (a
      // row whose sharing changes from step to step counts it itself).
      k.net_steps = k.steps;
      k.net_bytes = row->net_bytes != nullptr ? row->net_bytes(s_, static_cast<double>(bytes)) : k.bytes * s_.net_share;
      k.steps = k.large_steps = k.bytes = 0;
    }
    return k;
  }
  const shape& counted_shape() const noexcept { return s_; }
  double seconds(collective c, algorithm a, std::size_t bytes) const { return m_.seconds(counts(c, a, bytes)); }

  // The offered algorithm with the least predicted time (the first in the
  // table on a tie). Calls repeat their sizes, so the last answers are kept.
  algorithm choose(collective c, std::size_t bytes) const {
    auto& memo = memo_[(static_cast<std::size_t>(c) * 31 + bytes) % memo_.size()];
    if (memo.bytes == bytes && memo.what == c) return memo.pick;
    const placement at{s_.n, bytes, memory_, false, false, s_.hosts};
    algorithm best = algorithm::automatic;
    double best_s = 0;
    for (const auto& r : detail::rows)
      if (r.what == c && r.offered(at))
        if (const double s = seconds(c, r.id, bytes); best == algorithm::automatic || s < best_s) best = r.id, best_s = s;
    memo = {bytes, c, best};
    return best;
  }

 private:
  cost_model m_;
  memory_kind memory_;
  shape s_;
  struct memo_entry {
    std::size_t bytes = ~std::size_t{0};
    collective what = collective::barrier;
    algorithm pick = algorithm::automatic;
  };
  mutable std::array<memo_entry, 16> memo_{};
};

}  // namespace ringtree
