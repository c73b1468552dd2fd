#pragma once
// How long a test may wait: one factor for every time bound the suites
// set (hang guards, timeouts, "quickly"), so that a verdict does not
// depend on an idle machine. Tests assert on causes and order; where a
// bound must stay (a fault noticed quickly), it is stated on an idle
// machine and scaled here, so it still fails when detection really
// becomes slow. (Meson's per-test timeouts, the backstop above these,
// are stretched by scripts/ringtree's slowdown(): the same
// RINGTREE_TEST_SLOWDOWN, else the load per core.)
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace rt_test {

// The share of a core this thread gets now (1 on an idle machine, 1/3
// beside two busy loops per core): its CPU time over the wall time of a
// 30 ms busy loop. Unlike the load average, it sees load that began a
// moment ago.
inline double cpu_share() {
  using clock = std::chrono::steady_clock;
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  const auto w0 = clock::now();
  const double c0 = cpu_now();
  volatile unsigned spin = 0;
  while (clock::now() - w0 < std::chrono::milliseconds(30)) spin = spin + 1;
  const double wall = std::chrono::duration<double>(clock::now() - w0).count();
  return std::clamp((cpu_now() - c0) / wall, 0.01, 1.0);
}

// RINGTREE_TEST_SLOWDOWN if set (a number >= 1), else 4 under a sanitizer
// (everything runs 2-10x slower), times how busy the machine is: the more
// of the load per core (the last minute's) and the inverse of cpu_share()
// (now). At most 20. Measured again when last measured over 5 s ago, so
// that a long suite follows the load as it changes.
inline double slowdown() {
  if (const char* s = std::getenv("RINGTREE_TEST_SLOWDOWN"); s != nullptr && *s != '\0') return std::max(1.0, std::atof(s));
  static std::mutex m;
  static double factor = 0;
  static std::chrono::steady_clock::time_point when{};
  std::lock_guard lk(m);
  const auto now = std::chrono::steady_clock::now();
  if (factor > 0 && now - when < std::chrono::seconds(5)) return factor;
  double f = 1;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  f = 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  f = 4;
#endif
#endif
  double load = 0;
  if (getloadavg(&load, 1) != 1) load = 0;
  const double busy = std::max({1.0, load / std::max(1u, std::thread::hardware_concurrency()), 1.0 / cpu_share()});
  factor = std::min(f * busy, 20.0);
  when = now;
  return factor;
}
// A time bound stated for an idle machine, scaled by slowdown().
inline std::chrono::duration<double> scaled(std::chrono::duration<double> idle) { return idle * slowdown(); }

// Sleeps until done() or `most` has passed: a rank that only waits for
// the others' sake, leaving once their verdict is in.
template <class Done>
void sleep_until(Done done, std::chrono::duration<double> most) {
  const auto until = std::chrono::steady_clock::now() + most;
  while (!done() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace rt_test
