#pragma once
// Every RINGTREE_* variable of the library, in one declarative table
// (env_variables, below): its name, its default, what it means and how its
// value is read into a `config`. A value that does not parse is an error
// naming the variable, never silently ignored. config::from_env() reads
// the table when it is called (a communicator or transport calls it once,
// when it is made), so a program may set them before it makes one; options
// passed in code are never overridden by a default read here. README's
// table of variables and the tools' --help are printed from the table
// (ringtree-model --variables; docs/figures.sh keeps README's current).
// libringtree-mpi's RINGTREE_MPI* variables and the torch backend's
// RINGTREE_TORCH_* belong to those components and are listed with them.
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

#include <ringtree/core/compiled.hpp>
#include <ringtree/core/error.hpp>

namespace ringtree {

// This version of ringtree, as meson.build says (cached measurements are
// only trusted by the version that made them; a test checks they agree).
inline constexpr const char* version_string = "0.2.0";

struct config {
  std::chrono::duration<double> timeout{300.0};
  bool check = false;
  std::string algo;  // "", a name, or one per collective; the chooser resolves it (communicator/chooser.hpp)
  enum class tuning { measure, model, fresh, cached } tune = tuning::measure;
  std::optional<bool> calibrate;  // unset: measure if no file
  std::string cache_dir, model_file, trace;
  std::string shm_name, shm_job;
  std::string root;               // RINGTREE_ROOT
  std::optional<int> rank, size;  // RINGTREE_RANK, RINGTREE_SIZE

  static constexpr double min_timeout_seconds = 1e-3, max_timeout_seconds = 1e9;

  static config from_env();

  // A variable's value; unset and "" are the same.
  static const char* get(const char* name) {
    const char* s = std::getenv(name);
    return s == nullptr || *s == '\0' ? nullptr : s;
  }
  // 0 or 1.
  static std::optional<bool> flag(const char* name) {
    const char* s = get(name);
    if (s == nullptr) return std::nullopt;
    return parse_flag(name, s);
  }
  static bool parse_flag(const char* name, const char* s);
  // A rank or a rank count: 0 .. 2^20.
  static std::optional<int> count(const char* name) {
    const char* s = get(name);
    if (s == nullptr) return std::nullopt;
    return parse_count(name, s);
  }
  static int parse_count(const char* name, const char* s);
  static std::chrono::duration<double> parse_timeout(const char* s);
  static tuning parse_tune(const char* s);
  // ${XDG_CACHE_HOME:-$HOME/.cache}/ringtree, else /tmp/ringtree.
  static std::string default_cache_dir();
};

// One row per variable: what README's table, the tools' --help and
// config::from_env() all read.
struct env_variable {
  const char* name;
  const char* fallback;  // the default, in words
  const char* meaning;   // one line
  void (*read)(config&, const char* value);  // a set, non-empty value into the config
};

inline constexpr env_variable env_variables[] = {
    {"RINGTREE_TIMEOUT", "300", "seconds a wait on a peer may take before `timeout_error` (0.001 to 1e9)",
     [](config& c, const char* v) { c.timeout = config::parse_timeout(v); }},
    {"RINGTREE_CHECK", "0", "`1`: checked mode (ranks compare every call first)",
     [](config& c, const char* v) { c.check = config::parse_flag("RINGTREE_CHECK", v); }},
    {"RINGTREE_ALGO", "automatic",
     "an algorithm name, or one per collective (`allreduce:ring;broadcast:tree`, as NCCL_ALGO): replaces "
     "`automatic` where offered",
     [](config& c, const char* v) { c.algo = v; }},
    {"RINGTREE_TUNE", "1",
     "`1`: automatic measures; `0`: the cost model chooses; `fresh`: measure again, ignoring the cache; `cached`: "
     "what the cache holds, the cost model elsewhere, never measuring in the run (libringtree-mpi's default)",
     [](config& c, const char* v) { c.tune = config::parse_tune(v); }},
    {"RINGTREE_CALIBRATE", "measure if no model file",
     "`1`: measure the cost model's constants again; `0`: never (file or built-in constants)",
     [](config& c, const char* v) { c.calibrate = config::parse_flag("RINGTREE_CALIBRATE", v); }},
    {"RINGTREE_CACHE_DIR", "`${XDG_CACHE_HOME:-$HOME/.cache}/ringtree`",
     "where measurements are kept; the test suite points it at a temporary directory",
     [](config& c, const char* v) { c.cache_dir = v; }},
    {"RINGTREE_MODEL_FILE", "in the cache directory", "the cost model's file",
     [](config& c, const char* v) { c.model_file = v; }},
    {"RINGTREE_TRACE", "off", "`FILE.json`: record every call as a Chrome trace; `FILE.html`: as the teaching page",
     [](config& c, const char* v) { c.trace = v; }},
    {"RINGTREE_SHM_NAME", "none", "`shm_transport::from_env()`: the segment's name, `/` and a word",
     [](config& c, const char* v) { c.shm_name = v; }},
    {"RINGTREE_RANK", "none", "`from_env()` of `shm_transport` and `root_bootstrap`: this process's rank (else the launcher's variable)",
     [](config& c, const char* v) { c.rank = config::parse_count("RINGTREE_RANK", v); }},
    {"RINGTREE_SIZE", "none", "`from_env()` of `shm_transport` and `root_bootstrap`: the number of ranks (else the launcher's variable)",
     [](config& c, const char* v) { c.size = config::parse_count("RINGTREE_SIZE", v); }},
    {"RINGTREE_SHM_JOB", "none", "`shm_transport::from_env()`: the job's identity, which every rank must share",
     [](config& c, const char* v) { c.shm_job = v; }},
    {"RINGTREE_ROOT", "none",
     "`root_bootstrap::from_env()`: `host:port` where rank 0 listens for the others, the same on every rank (as NCCL_COMM_ID)",
     [](config& c, const char* v) { c.root = v; }},
};

namespace detail {
// The timeout for transports made without one.
std::chrono::duration<double> default_timeout();
// The table as the tools' --help prints it: "  NAME  meaning (default: ...)".
std::string environment_help();
}  // namespace detail

}  // namespace ringtree

#if RINGTREE_DEFINES
#include <ringtree/core/config-inl.hpp>
#endif
