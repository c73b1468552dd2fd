#pragma once
// Calibration: measure the cost model's constants on the transport in use,
// and keep them in a file the user can read and edit.
//
//   alpha  a ping-pong of 8 bytes between ranks 0 and 1, both directions
//          at once as the algorithms exchange: the time of one step;
//   beta   the same with 1 MiB: the time per byte beyond alpha;
//   gamma  a float sum of 1 MiB into 1 MiB on ranks 0 and 1: time per byte.
// Medians of several batches, so one noisy batch does not decide; well
// under a second. Rank 0's figures are broadcast, so every rank holds the
// same constants and picks the same algorithm.
//
// The file: RINGTREE_MODEL_FILE, else
//   ${RINGTREE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ringtree}/model-<transport>-<n>ranks.txt
// RINGTREE_CALIBRATE=1 measures again (and rewrites the file); =0 never
// measures (the file if there is one, else the built-in constants).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <ringtree/algorithms/tree.hpp>
#include <ringtree/core/config.hpp>
#include <ringtree/tuner.hpp>

namespace ringtree {
namespace detail {

inline std::string model_path(const std::string& transport, int ranks) {
  if (const char* f = std::getenv("RINGTREE_MODEL_FILE"); f != nullptr && *f != '\0') return f;
  std::string dir;
  if (const char* d = std::getenv("RINGTREE_CACHE_DIR"); d != nullptr && *d != '\0') dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') dir = std::string(x) + "/ringtree";
  else if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') dir = std::string(h) + "/.cache/ringtree";
  else dir = "/tmp/ringtree";
  return cat(dir, "/model-", transport, "-", ranks, "ranks.txt");
}

// The file's constants, if it exists; a file that does not parse is an
// error naming the file and line, never silently replaced.
inline std::optional<cost_model> read_model(const std::string& path, int rank) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  cost_model m;
  m.source = path;
  bool have[3] = {false, false, false};
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream ls(line);
    std::string key, eq, rest;
    double v = 0;
    if (!(ls >> key >> eq >> v) || eq != "=" || (ls >> rest) || !(v >= 0) || v > 1e9)
      throw error("cost model", rank, cat(path, ":", no, ": expected 'name = number >= 0', got '", line, "'"));
    if (key == "alpha_us") m.alpha = v * 1e-6, have[0] = true;
    else if (key == "beta_ns_per_byte") m.beta = v * 1e-9, have[1] = true;
    else if (key == "gamma_ns_per_byte") m.gamma = v * 1e-9, have[2] = true;
    else throw error("cost model", rank, cat(path, ":", no, ": unknown name '", key, "' (alpha_us, beta_ns_per_byte, gamma_ns_per_byte)"));
  }
  if (!(have[0] && have[1] && have[2]))
    throw error("cost model", rank, cat(path, ": needs alpha_us, beta_ns_per_byte and gamma_ns_per_byte"));
  return m;
}

// Best effort: a cache that cannot be written costs a calibration next time.
inline void write_model(const std::string& path, const cost_model& m, const std::string& transport, int ranks) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = cat(path, ".", ::getpid());
  {
    std::ofstream out(tmp);
    if (!out) return;
    char host[256] = "?";
    ::gethostname(host, sizeof host - 1);
    char when[64] = "?";
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
    out << "# ringtree cost model: transport " << transport << ", " << ranks << " ranks, measured " << when << " on " << host
        << "\n# a call's time = alpha * steps + beta * bytes moved + gamma * bytes reduced (see docs/algorithms.md)"
        << "\n# edit to override; delete (or RINGTREE_CALIBRATE=1) to measure again\n"
        << "alpha_us = " << m.alpha * 1e6 << "\nbeta_ns_per_byte = " << m.beta * 1e9 << "\ngamma_ns_per_byte = " << m.gamma * 1e9
        << "\n";
    if (!out) return;
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

// Seconds of `body`, the median of `batches` batches of `reps` calls.
template <class F>
double median_seconds(int batches, int reps, F body) {
  std::vector<double> t;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) body();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

// Measure alpha, beta, gamma (every rank calls this). Ranks 0 and 1 measure;
// rank 0's figures reach every rank.
template <transport T>
cost_model calibrate(T& t) {
  cost_model m;
  m.source = "measured";
  if (t.size() == 1) return m;
  auto mem = t.memory();
  const std::size_t big = std::size_t{1} << 20;
  double figures[3] = {0, 0, 0};
  if (t.rank() < 2) {
    const int peer = 1 - t.rank();
    auto out = mem.template scratch<std::byte>(big), in = mem.template scratch<std::byte>(big);
    auto exchange = [&](std::size_t bytes) {
      detail::sendrecv(t, peer, std::span<const std::byte>(out.span().first(bytes)), peer, in.span().first(bytes));
    };
    for (int i = 0; i < 50; ++i) exchange(8);  // warm up: connections, pages, caches
    const double small = median_seconds(9, 40, [&] { exchange(8); });
    exchange(big);
    const double large = median_seconds(5, 4, [&] { exchange(big); });
    auto acc = mem.template scratch<float>(big / sizeof(float)), add = mem.template scratch<float>(big / sizeof(float));
    mem.reduce(op::sum, acc.span(), std::span<const float>(add.span()));
    const double reduce = median_seconds(5, 4, [&] { mem.reduce(op::sum, acc.span(), std::span<const float>(add.span())); });
    figures[0] = small;
    figures[1] = std::max(0.0, large - small) / big;
    figures[2] = reduce / big;
  }
  tree::binomial_broadcast(t, std::span<double>(figures), 0);
  m.alpha = figures[0];
  m.beta = figures[1];
  m.gamma = figures[2];
  return m;
}

// Models already loaded or measured by this process, by file.
inline std::map<std::string, cost_model>& loaded_models() {
  static std::map<std::string, cost_model> models;
  return models;
}
inline std::mutex& loaded_models_mutex() {
  static std::mutex m;
  return m;
}

// The model for this communicator (every rank calls this, collectively):
// rank 0 finds it (already loaded, or in the file) or asks everyone to
// measure, and every rank ends with rank 0's constants.
template <transport T>
cost_model load_or_calibrate(T& t) {
  const std::string name = transport_name<T>(), path = model_path(name, t.size());
  const char* cal = std::getenv("RINGTREE_CALIBRATE");
  const std::string mode = cal == nullptr ? "" : cal;
  if (!mode.empty() && mode != "0" && mode != "1")
    throw error("RINGTREE_CALIBRATE", t.rank(), cat("expected 0 or 1, got '", mode, "'"));
  // {state, alpha, beta, gamma}; state 1: found, 0: measure, 2: use the
  // built-in constants, -1: rank 0 failed to read the file.
  double msg[4] = {0, 0, 0, 0};
  std::optional<error> failed;
  cost_model m;
  if (t.rank() == 0) {
    std::lock_guard lk(loaded_models_mutex());
    try {
      std::optional<cost_model> found;  // RINGTREE_CALIBRATE=1: measured once per process
      if (auto it = loaded_models().find(path); it != loaded_models().end()) found = it->second;
      else if (mode != "1") found = read_model(path, 0);
      if (found) msg[0] = 1, msg[1] = found->alpha, msg[2] = found->beta, msg[3] = found->gamma, m.source = found->source;
      else if (mode == "0") msg[0] = 2;
    } catch (const error& e) {
      failed = e;
      msg[0] = -1;
    }
  }
  if (t.size() > 1) tree::binomial_broadcast(t, std::span<double>(msg), 0);
  if (failed) throw *failed;
  if (msg[0] < 0) throw error("cost model", t.rank(), cat("rank 0 could not read ", path));
  if (msg[0] == 2) return cost_model{};
  if (msg[0] == 1) {
    m.alpha = msg[1], m.beta = msg[2], m.gamma = msg[3];
    if (t.rank() != 0) m.source = path + " (rank 0's)";
  } else {
    m = calibrate(t);
    if (t.rank() == 0) {
      write_model(path, m, name, t.size());
      m.source = "measured, saved in " + path;
    }
  }
  if (t.rank() == 0) {
    std::lock_guard lk(loaded_models_mutex());
    loaded_models()[path] = m;
  }
  return m;
}

}  // namespace detail
}  // namespace ringtree
