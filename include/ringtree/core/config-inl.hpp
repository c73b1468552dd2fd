#pragma once
// config.hpp's cold part (core/compiled.hpp): reading and parsing the
// variables.
#include <chrono>
#include <cstdlib>
#include <string>

#include <ringtree/core/config.hpp>

namespace ringtree {

RINGTREE_FUNC bool config::parse_flag(const char* name, const char* s) {
  if (std::string(s) == "0") return false;
  if (std::string(s) == "1") return true;
  throw error(name, -1, detail::cat("expected 0 or 1, got '", s, "'"));
}

RINGTREE_FUNC int config::parse_count(const char* name, const char* s) {
  char* end = nullptr;
  const long x = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || x < 0 || x > 1 << 20)
    throw error(name, -1, detail::cat("expected a whole number from 0 to ", 1 << 20, ", got '", s, "'"));
  return static_cast<int>(x);
}

RINGTREE_FUNC std::chrono::duration<double> config::parse_timeout(const char* s) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !(v >= min_timeout_seconds) || v > max_timeout_seconds)
    throw error("RINGTREE_TIMEOUT", -1, detail::cat("expected a number of seconds from ", min_timeout_seconds, " to ",
                                                    max_timeout_seconds, ", got '", s, "'"));
  return std::chrono::duration<double>(v);
}

RINGTREE_FUNC config::tuning config::parse_tune(const char* s) {
  const std::string v = s;
  if (v == "1") return tuning::measure;
  if (v == "0") return tuning::model;
  if (v == "fresh") return tuning::fresh;
  if (v == "cached") return tuning::cached;
  throw error("RINGTREE_TUNE", -1, detail::cat("expected 1, 0, fresh or cached, got '", s, "'"));
}

RINGTREE_FUNC std::string config::default_cache_dir() {
  if (const char* x = get("XDG_CACHE_HOME")) return std::string(x) + "/ringtree";
  if (const char* h = get("HOME")) return std::string(h) + "/.cache/ringtree";
  return "/tmp/ringtree";
}

RINGTREE_FUNC config config::from_env() {
  config c;
  c.cache_dir = default_cache_dir();
  for (const auto& v : env_variables)
    if (const char* s = get(v.name)) v.read(c, s);
  return c;
}

namespace detail {
// The timeout for transports made without one.
RINGTREE_FUNC std::chrono::duration<double> default_timeout() { return config::from_env().timeout; }

// The table as the tools' --help prints it: "  NAME  meaning (default: ...)".
RINGTREE_FUNC std::string environment_help() {
  std::string s = "Environment (every RINGTREE_* variable the library reads):\n";
  for (const auto& v : env_variables) s += cat("  ", v.name, "  ", v.meaning, " (default: ", v.fallback, ")\n");
  return s;
}
}  // namespace detail

}  // namespace ringtree
