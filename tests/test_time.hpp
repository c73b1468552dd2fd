#pragma once
// How long a test may wait: one factor for every time bound the suites
// set (hang guards, timeouts, "quickly"), so that a verdict does not
// depend on an idle machine. Tests assert on causes and order; where a
// bound must stay (a fault noticed quickly), it is stated on an idle
// machine and scaled here, so it still fails when detection really
// becomes slow.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace rt_test {

// RINGTREE_TEST_SLOWDOWN if set (a number >= 1), else 4 under a sanitizer
// (everything runs 2-10x slower), times the load per core above 1 (a busy
// laptop or CI runner; the load average when the suite asks first), at most 20.
inline double slowdown() {
  static const double factor = [] {
    if (const char* s = std::getenv("RINGTREE_TEST_SLOWDOWN"); s != nullptr && *s != '\0') return std::max(1.0, std::atof(s));
    double f = 1;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    f = 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    f = 4;
#endif
#endif
    double load = 0;
    if (getloadavg(&load, 1) == 1) f *= std::max(1.0, load / std::max(1u, std::thread::hardware_concurrency()));
    return std::min(f, 20.0);
  }();
  return factor;
}
// A time bound stated for an idle machine, scaled by slowdown().
inline std::chrono::duration<double> scaled(std::chrono::duration<double> idle) { return idle * slowdown(); }

}  // namespace rt_test
