// libFuzzer: partition_layers on arbitrary costs, stage counts, memory and
// caps. It must return a valid partition (contiguous, covering every layer,
// within the cap, its reported costs adding up) or raise ringtree::error;
// nothing else.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_check.hpp"

#include <ringtree/train/partition.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const int stages = data[0] % 17 - 1;  // -1..15, some invalid
  const bool with_memory = data[1] & 1;
  const bool raw_doubles = data[1] & 2;  // any bit pattern: NaN, inf, negatives, huge
  std::vector<double> costs, memory;
  double cap = std::numeric_limits<double>::infinity();
  std::size_t at = 2;
  auto next = [&]() -> double {
    if (raw_doubles) {
      double d = 0;
      if (at + 8 > size) return -1;
      std::memcpy(&d, data + at, 8);
      at += 8;
      return d;
    }
    if (at + 2 > size) return -1;
    const double v = (data[at] | (data[at + 1] << 8)) / 16.0;
    at += 2;
    return v;
  };
  if (with_memory) cap = next();
  while (at < size && costs.size() < 40) {
    costs.push_back(next());
    if (with_memory) memory.push_back(next());
  }
  if (with_memory && memory.size() != costs.size()) memory.resize(costs.size(), 0);
  try {
    const auto p = ringtree::partition_layers(costs, stages, memory, cap);
    const int n = static_cast<int>(costs.size());
    FUZZ_CHECK(!(p.stages() != stages || p.layers_count() != n));
    int expect_first = 0;
    double worst = 0;
    for (int s = 0; s < stages; ++s) {
      auto [a, b] = p.layers(s);
      FUZZ_CHECK(!(a != expect_first || b <= a || b > n));  // contiguous, non-empty, in range
      double c = 0, m = 0;
      for (int l = a; l < b; ++l) {
        FUZZ_CHECK(!(p.stage_of(l) != s));
        c += costs[l];
        if (!memory.empty()) m += memory[l];
      }
      FUZZ_CHECK(!(!memory.empty() && m > cap * (1 + 1e-12)));  // the cap holds
      FUZZ_CHECK(!(std::abs(c - p.cost(s)) > 1e-9 * std::max(1.0, std::abs(c))));
      worst = std::max(worst, p.cost(s));
      expect_first = b;
    }
    FUZZ_CHECK(!(expect_first != n || p.max_cost() != worst));
  } catch (const ringtree::error&) {
    // refused with a reason: fine
  }
  return 0;
}
