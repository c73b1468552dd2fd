#pragma once
// partition_layers: split a model's layers into pipeline stages, contiguous
// and non-empty, so that the most expensive stage is as cheap as possible:
// exactly, by dynamic programming over (stage, first layer), not by the
// greedy heuristics that miss the optimum (or leave stages empty).
//
// best[s][i] = the smallest possible largest-stage cost when layers
// [i, n) are cut into stages s..p-1; O(p n^2) time, fine for thousands of
// layers. With a memory cost per layer and a cap per stage, segments over
// the cap are simply not allowed; if no split fits, the error says which
// layer or how many stages are missing.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include <ringtree/core/error.hpp>

namespace ringtree {

class partition {
 public:
  int stages() const noexcept { return static_cast<int>(first_.size()) - 1; }
  int layers_count() const noexcept { return static_cast<int>(stage_of_.size()); }
  int stage_of(int layer) const { return stage_of_.at(layer); }
  // [first, last) layers of `stage`.
  std::pair<int, int> layers(int stage) const { return {first_.at(stage), first_.at(stage + 1)}; }
  double max_cost() const noexcept { return max_cost_; }
  double cost(int stage) const { return cost_.at(stage); }
  // Largest stage cost over the mean stage cost (1 is perfect balance).
  double imbalance() const noexcept {
    double total = 0;
    for (double c : cost_) total += c;
    return total > 0 ? max_cost_ / (total / stages()) : 1.0;
  }

 private:
  friend partition partition_layers(std::span<const double>, int, std::span<const double>, double);
  std::vector<int> first_, stage_of_;
  std::vector<double> cost_;
  double max_cost_ = 0;
};

// costs[i]: layer i's cost (time, parameters, FLOPs...). memory/cap: optional
// memory per layer and the most one stage may hold.
inline partition partition_layers(std::span<const double> costs, int stages, std::span<const double> memory = {},
                                  double cap = std::numeric_limits<double>::infinity()) {
  const int n = static_cast<int>(costs.size());
  const char* call = "partition_layers";
  if (n == 0) throw error(call, -1, "no layers to partition");
  if (stages < 1) throw error(call, -1, detail::cat("stages must be at least 1, got ", stages));
  if (stages > n) throw error(call, -1, detail::cat(stages, " stages for ", n, " layers: every stage needs a layer"));
  for (int i = 0; i < n; ++i)
    if (!(costs[i] >= 0) || std::isinf(costs[i])) throw error(call, -1, detail::cat("layer ", i, " has cost ", costs[i], "; costs must be finite and >= 0"));
  if (!memory.empty() && static_cast<int>(memory.size()) != n)
    throw error(call, -1, detail::cat(memory.size(), " memory costs for ", n, " layers"));
  for (int i = 0; i < static_cast<int>(memory.size()); ++i) {
    if (!(memory[i] >= 0)) throw error(call, -1, detail::cat("layer ", i, " has memory ", memory[i], "; must be >= 0"));
    if (memory[i] > cap)
      throw error(call, -1, detail::cat("layer ", i, " needs ", memory[i], " of memory, more than the cap of ", cap, " per stage"));
  }
  const double inf = std::numeric_limits<double>::infinity();
  // best[s][i]: layers [i, n) in stages s..stages-1; cut[s][i]: where stage s ends.
  // A stage's cost and memory are summed layer by layer as it grows, not as
  // differences of prefix sums, which lose small layers next to huge ones.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages, std::vector<int>(n + 1, -1));
  best[stages][n] = 0;
  for (int s = stages - 1; s >= 0; --s)
    for (int i = n - (stages - s); i >= s; --i) {  // leave a layer for each later stage
      double cost = 0, held = 0;
      for (int j = i + 1; j <= n - (stages - s - 1); ++j) {
        cost += costs[j - 1];
        held += memory.empty() ? 0 : memory[j - 1];
        if (!(held <= cap)) break;  // longer segments only hold more
        const double v = std::max(cost, best[s + 1][j]);
        if (v < best[s][i]) best[s][i] = v, cut[s][i] = j;
      }
    }
  if (!(best[0][0] < inf)) {
    double total = 0;
    for (double m : memory) total += m;
    throw error(call, -1, detail::cat("the layers need ", total, " of memory in all, or their costs overflow; ", stages,
                                      " stages with a cap of ", cap, " cannot hold them in contiguous stages"));
  }
  partition p;
  p.first_.push_back(0);
  for (int s = 0, i = 0; s < stages; ++s) p.first_.push_back(i = cut[s][i]);
  p.stage_of_.resize(n);
  for (int s = 0; s < stages; ++s) {
    double cost = 0;
    for (int l = p.first_[s]; l < p.first_[s + 1]; ++l) p.stage_of_[l] = s, cost += costs[l];
    p.cost_.push_back(cost);
  }
  p.max_cost_ = best[0][0];
  return p;
}

// Costs from parameter counts (a common proxy for time and memory).
inline std::vector<double> costs_from_counts(std::span<const std::size_t> counts) {
  return std::vector<double>(counts.begin(), counts.end());
}

// Costs from measured time: the median of `reps` runs of each layer's callable, in seconds.
inline std::vector<double> measure_costs(const std::vector<std::function<void()>>& layers, int reps = 5) {
  std::vector<double> out;
  for (const auto& f : layers) {
    std::vector<double> t;
    for (int r = 0; r < std::max(1, reps); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    out.push_back(t[t.size() / 2]);
  }
  return out;
}

// The idle share of a pipeline of p stages over m micro-batches, for GPipe
// (fill-drain) and 1F1B alike: (p - 1) / (m + p - 1).
inline double bubble_fraction(int stages, int micro_batches) {
  if (stages < 1 || micro_batches < 1)
    throw error("bubble_fraction", -1, detail::cat("stages and micro-batches must be at least 1, got ", stages, " and ", micro_batches));
  return double(stages - 1) / double(micro_batches + stages - 1);
}

}  // namespace ringtree
