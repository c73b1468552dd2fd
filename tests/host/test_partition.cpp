#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <ringtree/train/partition.hpp>

using namespace ringtree;

namespace {
// Every way to cut n layers into p non-empty contiguous stages.
double exhaustive(const std::vector<double>& c, int p, const std::vector<double>& mem, double cap) {
  const int n = static_cast<int>(c.size());
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> cuts(p - 1);
  std::function<void(int, int)> rec = [&](int k, int from) {
    if (k == p - 1) {
      double worst = 0;
      int a = 0;
      for (int s = 0; s < p; ++s) {
        const int b = s + 1 < p ? cuts[s] : n;
        double sum = 0, m = 0;
        for (int i = a; i < b; ++i) sum += c[i], m += mem.empty() ? 0 : mem[i];
        if (m > cap) return;
        worst = std::max(worst, sum);
        a = b;
      }
      best = std::min(best, worst);
      return;
    }
    for (int j = from; j <= n - (p - 1 - k); ++j) cuts[k] = j, rec(k + 1, j + 1);
  };
  rec(0, 1);
  return best;
}
}  // namespace

TEST_CASE("partition_layers is exact: it matches an exhaustive search on thousands of random cases") {
  std::mt19937 g(5);
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = 1 + static_cast<int>(g() % 11), p = 1 + static_cast<int>(g() % n);
    std::vector<double> c(n), mem;
    for (auto& x : c) x = (g() % 4 == 0) ? 0.0 : std::uniform_real_distribution<double>(0, 10)(g);  // zeros too
    double cap = std::numeric_limits<double>::infinity();
    if (trial % 3 == 0) {
      mem.resize(n);
      for (auto& m : mem) m = std::uniform_real_distribution<double>(0, 5)(g);
      cap = *std::max_element(mem.begin(), mem.end()) + std::uniform_real_distribution<double>(0, 6)(g);
    }
    const double want = exhaustive(c, p, mem, cap);
    CAPTURE(trial);
    if (want == std::numeric_limits<double>::infinity()) {
      CHECK_THROWS_AS(partition_layers(c, p, mem, cap), error);
      continue;
    }
    const auto part = partition_layers(c, p, mem, cap);
    REQUIRE(part.max_cost() == doctest::Approx(want).epsilon(1e-12));
    // a real partition: contiguous, non-empty, covering, consistent
    REQUIRE(part.stages() == p);
    int next = 0;
    double worst = 0;
    for (int s = 0; s < p; ++s) {
      auto [a, b] = part.layers(s);
      REQUIRE(a == next);
      REQUIRE(b > a);
      double sum = 0, m = 0;
      for (int l = a; l < b; ++l) {
        REQUIRE(part.stage_of(l) == s);
        sum += c[l];
        m += mem.empty() ? 0 : mem[l];
      }
      REQUIRE(m <= cap);
      worst = std::max(worst, sum);
      next = b;
    }
    REQUIRE(next == n);
    REQUIRE(worst == doctest::Approx(part.max_cost()));
    ++checked;
  }
  CHECK(checked > 2000);
}

TEST_CASE("partition_layers: a case greedy splitting gets wrong, and the imbalance") {
  // Greedy "fill each stage up to total/p" gives [5,5] [1,1,1,1] [5] -> 10;
  // the optimum is [5] [5,1,1] [1,1,5] -> 7.
  const std::vector<double> c = {5, 5, 1, 1, 1, 1, 5};
  const auto part = partition_layers(c, 3);
  CHECK(part.max_cost() == 7);
  CHECK(part.imbalance() == doctest::Approx(7.0 / (19.0 / 3)));
  CHECK(part.layers(0) == std::pair{0, 1});
}

TEST_CASE("partition_layers: bad inputs raise clear errors") {
  const std::vector<double> c = {1, 2, 3};
  CHECK_THROWS_WITH_AS(partition_layers(std::vector<double>{}, 1), doctest::Contains("no layers to partition"), error);
  CHECK_THROWS_WITH_AS(partition_layers(c, 4), doctest::Contains("4 stages for 3 layers"), error);
  CHECK_THROWS_WITH_AS(partition_layers(c, 0), doctest::Contains("stages must be at least 1"), error);
  CHECK_THROWS_WITH_AS(partition_layers(std::vector<double>{1, -2}, 1), doctest::Contains("layer 1 has cost -2"), error);
  const std::vector<double> mem = {1, 9, 1};
  CHECK_THROWS_WITH_AS(partition_layers(c, 2, mem, 5), doctest::Contains("layer 1 needs 9 of memory, more than the cap of 5"), error);
  CHECK_THROWS_WITH_AS(partition_layers(c, 1, std::vector<double>{3, 3, 3}, 5), doctest::Contains("cannot hold them"), error);
  CHECK_THROWS_WITH_AS(partition_layers(c, 2, std::vector<double>{1}, 5), doctest::Contains("1 memory costs for 3 layers"), error);
}

TEST_CASE("costs from parameter counts and from measured time; the pipeline bubble") {
  const std::vector<std::size_t> counts = {100, 10, 1000};
  CHECK(costs_from_counts(counts) == std::vector<double>{100, 10, 1000});
  volatile double sink = 0;
  auto work = [&](int k) { return [&, k] { for (int i = 0; i < k * 20000; ++i) sink = sink + i; }; };
  const auto t = measure_costs({work(1), work(20)}, 3);
  CHECK(t.size() == 2);
  CHECK(t[1] > t[0]);
  CHECK(bubble_fraction(4, 8) == doctest::Approx(3.0 / 11));
  CHECK(bubble_fraction(1, 5) == 0);
  CHECK_THROWS_AS(bubble_fraction(0, 5), error);
}
