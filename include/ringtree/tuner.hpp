#pragma once
// Which algorithms each collective offers, what each costs, and which one
// runs when the caller says algorithm::automatic.
//
// The cost model (Hockney's, with a reduction term): a call that takes S
// latency steps, in which the busiest rank sends or receives W bytes and
// folds R bytes into its buffer, takes
//     alpha * S + beta * W + gamma * R
// seconds. alpha (per step), beta (per byte moved) and gamma (per byte
// reduced) are measured on the transport in use (calibration.hpp).
// Transports switch protocol at some message size (Open MPI's shared
// memory sends up to 4 KiB eagerly, larger ones after a handshake), so a
// step whose messages are larger than `knee` bytes costs `alpha_above`
// more, as NCCL's tuner has a latency per protocol. The
// counts S, W, R of every algorithm are functions of the rank count n and
// the buffer size here, and tests check them against what the traced
// transport records. automatic picks the algorithm with the least
// predicted time.
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <ringtree/algorithms/tree.hpp>

namespace ringtree {

enum class algorithm { automatic, ring, tree, binomial, linear, recursive_doubling, rabenseifner, scatter_allgather };

namespace detail {
inline constexpr std::string_view algorithm_names[] = {"automatic", "ring",   "tree",         "binomial",
                                                       "linear",    "recursive_doubling", "rabenseifner",
                                                       "scatter_allgather"};
}  // namespace detail

constexpr std::string_view to_string(algorithm a) noexcept { return detail::algorithm_names[static_cast<int>(a)]; }

// The algorithm called `name` (as to_string spells it), if any: one parser
// for RINGTREE_ALGO and the tools' flags.
constexpr std::optional<algorithm> algorithm_from_string(std::string_view name) noexcept {
  for (std::size_t k = 0; k < std::size(detail::algorithm_names); ++k)
    if (detail::algorithm_names[k] == name) return static_cast<algorithm>(k);
  return std::nullopt;
}

enum class collective { allreduce, broadcast, reduce, scatter, gather, reduce_scatter, allgather, barrier };

constexpr std::string_view to_string(collective c) noexcept {
  constexpr std::string_view names[] = {"allreduce", "broadcast",      "reduce",    "scatter",
                                        "gather",    "reduce_scatter", "allgather", "barrier"};
  return names[static_cast<int>(c)];
}

namespace detail {

// The algorithms each collective implements.
inline std::span<const algorithm> offered(collective c) noexcept {
  static constexpr algorithm all_reduce[] = {algorithm::ring, algorithm::tree, algorithm::recursive_doubling,
                                             algorithm::rabenseifner};
  static constexpr algorithm bcast[] = {algorithm::ring, algorithm::tree, algorithm::binomial, algorithm::scatter_allgather};
  static constexpr algorithm rooted[] = {algorithm::ring, algorithm::tree, algorithm::binomial};
  static constexpr algorithm fan[] = {algorithm::linear, algorithm::binomial};
  static constexpr algorithm ring_only[] = {algorithm::ring};
  static constexpr algorithm dissemination[] = {algorithm::tree};
  switch (c) {
    case collective::allreduce: return all_reduce;
    case collective::broadcast: return bcast;
    case collective::reduce: return rooted;
    case collective::scatter:
    case collective::gather: return fan;
    case collective::reduce_scatter:
    case collective::allgather: return ring_only;
    case collective::barrier: return dissemination;
  }
  return {};
}

inline bool offers(collective c, algorithm a) noexcept {
  for (auto x : offered(c))
    if (x == a) return true;
  return false;
}

inline std::string offered_names(collective c) {
  std::string s;
  for (auto x : offered(c)) s += (s.empty() ? "" : ", ") + std::string(to_string(x));
  return s;
}

}  // namespace detail

// The constants of the model, in seconds.
struct cost_model {
  double alpha = 5e-6;     // per latency step
  double beta = 1e-10;     // per byte sent or received by the busiest rank
  double gamma = 1e-10;    // per byte reduced by the busiest rank
  double knee = 0;         // messages above this many bytes (0: none) ...
  double alpha_above = 0;  // ... cost this much more per step
  std::string source = "built-in defaults";  // or the file it came from, or "measured"
};

// What one call costs in the model's units.
struct cost_counts {
  double steps = 0;    // latency steps: the longest chain of dependent messages
  double bytes = 0;    // the most bytes one rank sends, or receives, whichever is more
  double reduced = 0;  // the most bytes one rank reduces into its buffer
  double large_steps = 0;  // steps whose messages are larger than the model's knee
  double seconds(const cost_model& m) const noexcept {
    return m.alpha * steps + m.alpha_above * large_steps + m.beta * bytes + m.gamma * reduced;
  }
};

// The counts of every algorithm on n ranks. `bytes` is what the call
// moves: the whole buffer for allreduce, broadcast and reduce, the input
// for reduce_scatter, one rank's block for scatter, gather and allgather.
// Counts are exact when the buffer divides evenly into the algorithm's
// blocks and chunks, and within an element per block otherwise. The double
// binary tree's depend on its two trees' shapes, so they are computed once
// per n, when the tuner is made.
class tuner {
 public:
  explicit tuner(int ranks, cost_model model = {}, detail::tuning tun = {})
      : n_(ranks),
        lf_(std::bit_width(unsigned(ranks)) - 1),
        lc_(std::bit_width(unsigned(ranks - 1))),
        p_(double(1 << lf_)),
        odd_(ranks > (1 << lf_) ? 1 : 0),
        m_(std::move(model)),
        tun_(tun) {
    if (n_ > 1) shape_trees();
  }
  int ranks() const noexcept { return n_; }
  const cost_model& model() const noexcept { return m_; }

  cost_counts counts(collective c, algorithm a, std::size_t bytes) const {
    cost_counts k = base_counts(c, a, bytes);
    k.large_steps = large_steps(c, a, bytes, k.steps);
    return k;
  }

  double seconds(collective c, algorithm a, std::size_t bytes) const { return counts(c, a, bytes).seconds(m_); }

  // The offered algorithm with the least predicted time (the first listed
  // on a tie). Calls repeat their sizes, so the last answers are kept.
  algorithm choose(collective c, std::size_t bytes) const {
    auto& memo = memo_[(static_cast<std::size_t>(c) * 31 + bytes) % memo_.size()];
    if (memo.bytes == bytes && memo.what == c) return memo.pick;
    const auto offer = detail::offered(c);
    algorithm best = offer.front();
    double best_s = seconds(c, best, bytes);
    for (auto a : offer.subspan(1))
      if (const double s = seconds(c, a, bytes); s < best_s) best = a, best_s = s;
    memo = {bytes, c, best};
    return best;
  }

 private:
  cost_counts base_counts(collective c, algorithm a, std::size_t bytes) const {
    const double n = n_, B = static_cast<double>(bytes), p = p_, odd = odd_;
    const int lf = lf_, lc = lc_;
    if (n_ == 1 || (bytes == 0 && c != collective::barrier)) return {};
    switch (c) {
      case collective::allreduce:
        switch (a) {
          case algorithm::ring: return {2 * (n - 1), 2 * (n - 1) / n * B, (n - 1) / n * B};
          case algorithm::recursive_doubling:
            // Folding the extra ranks in overlaps the first rounds; handing
            // the result back adds a step only if the folded ranks reach
            // into the upper half of the p, whose chains it then extends.
            return {lf + odd + (n - p > p / 2 ? 1 : 0), (lf + odd) * B, (lf + odd) * B};
          case algorithm::rabenseifner:
            return {2 * lf + 2 * odd, (2 * (p - 1) / p + odd) * B, ((p - 1) / p + odd) * B};
          case algorithm::tree: {
            const std::size_t chunks = (bytes / 2 + tun_.tree_chunk_bytes - 1) / tun_.tree_chunk_bytes;
            return {double(chunks > 1 ? tree_steps_many_ : tree_steps_one_), tree_moved_ * B / 2, tree_reduced_ * B / 2};
          }
          default: break;
        }
        break;
      case collective::broadcast:
        switch (a) {
          case algorithm::ring: return {n - 1, B, 0};
          case algorithm::tree: return {double(lf), (n_ > 2 ? 2 : 1) * B, 0};
          case algorithm::binomial: return {double(lf), lc * B, 0};
          case algorithm::scatter_allgather: return {n, 2 * (n - 1) / n * B, 0};
          default: break;
        }
        break;
      case collective::reduce:
        switch (a) {
          case algorithm::ring: return {n, 2 * (n - 1) / n * B, (n - 1) / n * B};  // the root receives every block
          case algorithm::tree: return {double(lf), (n_ > 2 ? 2 : 1) * B, (n_ > 2 ? 2 : 1) * B};
          case algorithm::binomial: return {double(lf), lc * B, lc * B};
          default: break;
        }
        break;
      case collective::scatter:
      case collective::gather:  // the root sends (receives) every other rank's block
        if (a == algorithm::linear) return {1, (n - 1) * B, 0};
        if (a == algorithm::binomial) return {double(lf), (n - 1) * B, 0};
        break;
      case collective::reduce_scatter: return {n - 1, (n - 1) / n * B, (n - 1) / n * B};
      case collective::allgather: return {n - 1, (n - 1) * B, 0};
      case collective::barrier: return {double(lc), double(lc), 0};
    }
    return {};
  }

  // How many of the `steps` steps send messages larger than the knee: each
  // algorithm's message size per step (chunked ones send chunks).
  double large_steps(collective c, algorithm a, std::size_t bytes, double steps) const {
    if (m_.knee <= 0 || steps == 0) return 0;
    const double n = n_, B = static_cast<double>(bytes), knee = m_.knee;
    const double ring_chunk = double(tun_.ring_chunk_bytes), tree_chunk = double(tun_.tree_chunk_bytes);
    const double p = p_, odd = odd_;
    const int lf = lf_;
    auto all_if = [&](double msg) { return msg > knee ? steps : 0.0; };
    switch (c) {
      case collective::allreduce:
        switch (a) {
          case algorithm::ring: return all_if(std::min(B / n, ring_chunk));
          case algorithm::recursive_doubling: return all_if(B);
          case algorithm::tree: return all_if(std::min(B / 2, tree_chunk));
          case algorithm::rabenseifner: {  // halves, quarters, ... each way; whole buffers to fold in and out
            double k = B > knee ? 2 * odd : 0;
            for (double part = B / 2; part >= B / p; part /= 2) k += std::min(part, ring_chunk) > knee ? 2 : 0;
            return k;
          }
          default: return 0;
        }
      case collective::broadcast:
        switch (a) {
          case algorithm::ring: return all_if(std::min(B, double(tun_.chain_chunk_bytes)));
          case algorithm::tree: return all_if(std::min(B, tree_chunk));
          case algorithm::scatter_allgather: return all_if(B / n);
          default: return all_if(B);
        }
      case collective::reduce:
        switch (a) {
          case algorithm::ring: return all_if(B / n);
          case algorithm::tree: return all_if(std::min(B, tree_chunk));
          default: return all_if(B);
        }
      case collective::scatter:
      case collective::gather:
        if (a == algorithm::linear) return all_if(B);
        {  // binomial: subtrees of 1, 2, 4, ... blocks
          double k = 0;
          for (int j = 0; j < lf; ++j) k += B * double(1 << j) > knee ? 1 : 0;
          return k;
        }
      case collective::reduce_scatter: return all_if(B / n);
      case collective::allgather: return all_if(B);
      case collective::barrier: return 0;
    }
    return 0;
  }

  // The double binary tree: the most halves one rank moves and reduces,
  // and the longest chain of dependent messages when each half travels in
  // one chunk or in several. For the chain, the ranks' program order is
  // followed as tree::allreduce runs it (Lamport clocks, as the traced
  // transport counts): tree by tree, chunk by chunk, up the tree from the
  // leaves, then down from the root, where leaves post all their chunks
  // at once. With several chunks the chain no longer grows: two chunks
  // give its length.
  void shape_trees() {
    std::vector<tree::links> l[2];
    std::vector<int> depth[2];
    for (int h = 0; h < 2; ++h)
      for (int r = 0; r < n_; ++r) l[h].push_back(tree::binary_tree_shifted(n_, r, h));
    for (int h = 0; h < 2; ++h)
      for (int r = 0; r < n_; ++r) {
        int d = 0;
        for (int x = r; l[h][x].parent >= 0; x = l[h][x].parent) ++d;
        depth[h].push_back(d);
      }
    auto children = [&](int h, int r) { return int(l[h][r].child[0] >= 0) + int(l[h][r].child[1] >= 0); };
    for (int r = 0; r < n_; ++r) {
      int moved = 0, reduced = 0;
      for (int h = 0; h < 2; ++h) moved += children(h, r) + (l[h][r].parent >= 0), reduced += children(h, r);
      tree_moved_ = std::max(tree_moved_, moved);
      tree_reduced_ = std::max(tree_reduced_, reduced);
    }
    // Ranks by depth: deepest first for the way up, the root first down.
    std::vector<int> order[2];
    for (int h = 0; h < 2; ++h) {
      for (int r = 0; r < n_; ++r) order[h].push_back(r);
      std::stable_sort(order[h].begin(), order[h].end(), [&](int a, int b) { return depth[h][a] > depth[h][b]; });
    }
    for (int chunks : {1, 2}) {
      std::vector<int> clock(n_, 0), sent(n_);
      int steps = 0;
      auto early = [&](int h, int r) { return children(h, r) == 0 && l[h][r].parent != l[1 - h][r].parent; };
      for (int h = 0; h < 2; ++h)
        for (int r = 0; r < n_; ++r)
          if (early(h, r)) steps = std::max(steps, 1);  // sent at clock 0
      std::vector<std::vector<int>> up_sent(2, std::vector<int>(n_, 0));
      for (int j = 0; j < chunks; ++j)
        for (int h = 0; h < 2; ++h) {
          for (int r : order[h]) {
            if (early(h, r)) continue;
            for (int c : l[h][r].child)
              if (c >= 0) clock[r] = std::max(clock[r], up_sent[h][c] + 1);
            if (l[h][r].parent >= 0) up_sent[h][r] = clock[r], steps = std::max(steps, clock[r] + 1);
          }
        }
      std::vector<std::vector<int>> down_sent(2, std::vector<int>(n_, 0));
      for (int j = 0; j < chunks; ++j)
        for (int h = 0; h < 2; ++h)
          for (auto it = order[h].rbegin(); it != order[h].rend(); ++it) {
            const int r = *it;
            if (early(h, r)) continue;
            if (l[h][r].parent >= 0) clock[r] = std::max(clock[r], down_sent[h][l[h][r].parent] + 1);
            down_sent[h][r] = clock[r];
            if (children(h, r) > 0) steps = std::max(steps, clock[r] + 1);
          }
      (chunks == 1 ? tree_steps_one_ : tree_steps_many_) = steps;
    }
  }

  int n_;
  int lf_, lc_;      // floor(log2 n), ceil(log2 n)
  double p_, odd_;   // the largest power of two <= n; 1 if ranks are folded into it
  cost_model m_;
  detail::tuning tun_;
  int tree_moved_ = 0, tree_reduced_ = 0, tree_steps_one_ = 0, tree_steps_many_ = 0;
  struct memo_entry {
    std::size_t bytes = ~std::size_t{0};
    collective what = collective::barrier;
    algorithm pick = algorithm::automatic;
  };
  mutable std::array<memo_entry, 16> memo_{};
};

}  // namespace ringtree
