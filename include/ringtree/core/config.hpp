#pragma once
// Every RINGTREE_* environment variable, parsed in one place into one
// struct. A value that does not parse is an error naming the variable,
// never silently ignored. config::from_env() reads them when it is called
// (a communicator or transport calls it once, when it is made), so a
// program may set them before it makes one; options passed in code are
// never overridden by a default read here.
//
//   RINGTREE_TIMEOUT      seconds a wait on a peer may take (default 300; 1e-3 .. 1e9)
//   RINGTREE_CHECK        1: checked mode (ranks compare every call first)
//   RINGTREE_ALGO         an algorithm name: replaces `automatic` where offered
//   RINGTREE_TUNE         1 (default): automatic measures the algorithms per size
//                         bin; 0: the cost model chooses; fresh: measure again;
//                         cached: what the cache measured, the model elsewhere
//                         (never measures in the run: libringtree-mpi's default)
//   RINGTREE_CALIBRATE    1: measure the cost model's constants again; 0: never
//   RINGTREE_CACHE_DIR    where measurements are kept (default
//                         ${XDG_CACHE_HOME:-$HOME/.cache}/ringtree)
//   RINGTREE_MODEL_FILE   the cost model's file (default in the cache directory)
//   RINGTREE_TRACE        FILE.json: record every call as a Chrome trace
//   RINGTREE_SHM_NAME, RINGTREE_RANK, RINGTREE_SIZE, RINGTREE_SHM_JOB
//                         shm_transport::from_env (see transport/shm/bootstrap.hpp)
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

#include <ringtree/core/error.hpp>

namespace ringtree {

// This version of ringtree, as meson.build says (cached measurements are
// only trusted by the version that made them; a test checks they agree).
inline constexpr const char* version_string = "0.2.0";

struct config {
  std::chrono::duration<double> timeout{300.0};
  bool check = false;
  std::string algo;  // "" or a name; the algorithm table resolves it (communicator.hpp)
  enum class tuning { measure, model, fresh, cached } tune = tuning::measure;
  std::optional<bool> calibrate;  // unset: measure if no file
  std::string cache_dir, model_file, trace;
  std::string shm_name, shm_job;
  std::optional<int> rank, size;  // RINGTREE_RANK, RINGTREE_SIZE

  static constexpr double min_timeout_seconds = 1e-3, max_timeout_seconds = 1e9;

  static config from_env() {
    config c;
    if (const char* s = get("RINGTREE_TIMEOUT")) {
      char* end = nullptr;
      const double v = std::strtod(s, &end);
      if (end == s || *end != '\0' || !(v >= min_timeout_seconds) || v > max_timeout_seconds)
        throw error("RINGTREE_TIMEOUT", -1, detail::cat("expected a number of seconds from ", min_timeout_seconds, " to ",
                                                        max_timeout_seconds, ", got '", s, "'"));
      c.timeout = std::chrono::duration<double>(v);
    }
    c.check = flag("RINGTREE_CHECK").value_or(false);
    c.calibrate = flag("RINGTREE_CALIBRATE");
    if (const char* s = get("RINGTREE_ALGO")) c.algo = s;
    if (const char* s = get("RINGTREE_TUNE")) {
      const std::string v = s;
      if (v == "1") c.tune = tuning::measure;
      else if (v == "0") c.tune = tuning::model;
      else if (v == "fresh") c.tune = tuning::fresh;
      else if (v == "cached") c.tune = tuning::cached;
      else throw error("RINGTREE_TUNE", -1, detail::cat("expected 1, 0, fresh or cached, got '", s, "'"));
    }
    if (const char* d = get("RINGTREE_CACHE_DIR")) c.cache_dir = d;
    else if (const char* x = get("XDG_CACHE_HOME")) c.cache_dir = std::string(x) + "/ringtree";
    else if (const char* h = get("HOME")) c.cache_dir = std::string(h) + "/.cache/ringtree";
    else c.cache_dir = "/tmp/ringtree";
    if (const char* f = get("RINGTREE_MODEL_FILE")) c.model_file = f;
    if (const char* f = get("RINGTREE_TRACE")) c.trace = f;
    if (const char* f = get("RINGTREE_SHM_NAME")) c.shm_name = f;
    if (const char* f = get("RINGTREE_SHM_JOB")) c.shm_job = f;
    c.rank = count("RINGTREE_RANK");
    c.size = count("RINGTREE_SIZE");
    return c;
  }

  // A variable's value; unset and "" are the same.
  static const char* get(const char* name) {
    const char* s = std::getenv(name);
    return s == nullptr || *s == '\0' ? nullptr : s;
  }
  // 0 or 1.
  static std::optional<bool> flag(const char* name) {
    const char* s = get(name);
    if (s == nullptr) return std::nullopt;
    if (std::string(s) == "0") return false;
    if (std::string(s) == "1") return true;
    throw error(name, -1, detail::cat("expected 0 or 1, got '", s, "'"));
  }
  // A rank or a rank count: 0 .. 2^20.
  static std::optional<int> count(const char* name) {
    const char* s = get(name);
    if (s == nullptr) return std::nullopt;
    char* end = nullptr;
    const long x = std::strtol(s, &end, 10);
    if (end == s || *end != '\0' || x < 0 || x > 1 << 20)
      throw error(name, -1, detail::cat("expected a whole number from 0 to ", 1 << 20, ", got '", s, "'"));
    return static_cast<int>(x);
  }
};

namespace detail {
// The timeout for transports made without one.
inline std::chrono::duration<double> default_timeout() { return config::from_env().timeout; }
}  // namespace detail

}  // namespace ringtree
