#pragma once
// Settings read from the environment, parsed strictly: a value that does
// not parse is an error naming the variable, never silently ignored.
#include <chrono>
#include <cstdlib>
#include <string>

#include <ringtree/core/error.hpp>

namespace ringtree::detail {

// RINGTREE_TIMEOUT: seconds a collective may wait for a peer (default 300),
// from 1 ms (below that every wait would fail at once) to 1e9.
inline constexpr double min_timeout_seconds = 1e-3, max_timeout_seconds = 1e9;
inline std::chrono::duration<double> default_timeout() {
  const char* s = std::getenv("RINGTREE_TIMEOUT");
  if (s == nullptr || *s == '\0') return std::chrono::seconds(300);
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !(v >= min_timeout_seconds) || v > max_timeout_seconds)
    throw error("RINGTREE_TIMEOUT", -1, cat("expected a number of seconds from ", min_timeout_seconds, " to ",
                                            max_timeout_seconds, ", got '", s, "'"));
  return std::chrono::duration<double>(v);
}

// A boolean variable: unset, "", "0" are false; "1" is true; else an error.
inline bool env_flag(const char* name) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0' || std::string(s) == "0") return false;
  if (std::string(s) == "1") return true;
  throw error(name, -1, cat("expected 0 or 1, got '", s, "'"));
}

}  // namespace ringtree::detail
