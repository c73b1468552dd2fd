#pragma once
// Calibration: measure the cost model's constants on the transport in use,
// and keep them in a file the user can read and edit.
//
//   a ping-pong sweep between ranks 0 and 1, both directions at once as
//   the algorithms exchange, 8 bytes to 1 MiB:
//     alpha  the time of the 8-byte exchange: one step;
//     beta   the slope between 256 KiB and 1 MiB: time per byte;
//     knee   the size after which the time jumps by more than beta
//            explains (a protocol switch), and alpha_above that jump;
//   gamma  the same exchanges of 64 KiB, 256 KiB and 1 MiB followed by a
//          float sum of what arrived, as the algorithms reduce it: the
//          extra time per byte (the median of the three). Summing data that
//          just arrived costs more than a sum in a warm loop would show
//          (3-4x more with Open MPI's single-copy receives here).
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

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

// The constants in a model file's text; `path` names it in errors.
inline constexpr std::size_t max_model_line = 1024;
inline cost_model parse_model(std::istream& in, const std::string& path, int rank) {
  cost_model m;
  m.source = path;
  bool have[3] = {false, false, false};
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (line.size() > max_model_line)
      throw error("cost model", rank, cat(path, ":", no, ": line of ", line.size(), " characters (at most ", max_model_line, ")"));
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
    else if (key == "knee_bytes") m.knee = v;
    else if (key == "alpha_above_knee_us") m.alpha_above = v * 1e-6;
    else throw error("cost model", rank, cat(path, ":", no, ": unknown name '", key,
                                             "' (alpha_us, beta_ns_per_byte, gamma_ns_per_byte, knee_bytes, alpha_above_knee_us)"));
  }
  if (!(have[0] && have[1] && have[2]))
    throw error("cost model", rank, cat(path, ": needs alpha_us, beta_ns_per_byte and gamma_ns_per_byte"));
  return m;
}

// The file's constants, if it exists; a file that does not parse is an
// error naming the file and line, never silently replaced. Only a regular
// file of at most max_model_file_bytes is read (a FIFO would block, a
// device like /dev/zero never ends), opened without blocking.
inline constexpr std::size_t max_model_file_bytes = 64 * 1024;
inline std::optional<cost_model> read_model(const std::string& path, int rank) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw error("cost model", rank, cat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::string text;
  struct stat st {};
  const char* problem = nullptr;
  if (::fstat(fd, &st) != 0) problem = "cannot stat it";
  else if (S_ISDIR(st.st_mode)) problem = "is a directory, not a model file";
  else if (!S_ISREG(st.st_mode)) problem = "is not a regular file (a FIFO, device or socket); refusing to read it";
  else if (static_cast<std::size_t>(st.st_size) > max_model_file_bytes) problem = "is too large for a model file";
  else {
    char buf[4096];
    for (ssize_t k; text.size() <= max_model_file_bytes && (k = ::read(fd, buf, sizeof buf)) != 0;) {
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) { problem = "cannot be read"; break; }
      text.append(buf, static_cast<std::size_t>(k));
    }
    if (text.size() > max_model_file_bytes) problem = "is too large for a model file";  // it grew while read
  }
  ::close(fd);
  if (problem != nullptr)
    throw error("cost model", rank, cat(path, " ", problem, " (at most ", max_model_file_bytes, " bytes of 'name = value' lines)"));
  std::istringstream in(text);
  return parse_model(in, path, rank);
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
        << "\n# steps whose messages are larger than knee_bytes cost alpha_above_knee_us more (0: no knee)"
        << "\nknee_bytes = " << m.knee << "\nalpha_above_knee_us = " << m.alpha_above * 1e6 << "\n";
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
  constexpr int lo = 3, hi = 20;  // exchanges of 2^lo .. 2^hi bytes
  const std::size_t big = std::size_t{1} << hi;
  double figures[5] = {0, 0, 0, 0, 0};
  if (t.rank() < 2) {
    const int peer = 1 - t.rank();
    auto out = mem.template scratch<std::byte>(big), in = mem.template scratch<std::byte>(big);
    auto exchange = [&](std::size_t bytes) {
      detail::sendrecv(t, peer, std::span<const std::byte>(out.span().first(bytes)), peer, in.span().first(bytes));
    };
    for (int i = 0; i < 50; ++i) exchange(8);  // warm up: connections, pages, caches
    exchange(big);
    double time[hi + 1] = {};
    for (int k = lo; k <= hi; ++k) {
      const std::size_t s = std::size_t{1} << k;
      time[k] = median_seconds(5, s <= (std::size_t{64} << 10) ? 20 : 4, [&] { exchange(s); });
    }
    const double beta = std::max(0.0, (time[hi] - time[hi - 2]) / double(big - (big >> 2)));
    // The protocol switch: the doubling whose time grows most beyond beta's
    // share, if that is more than half a step (less is noise).
    double knee = 0, jump = 0;
    for (int k = lo; k < hi - 2; ++k)
      if (const double excess = time[k + 1] - time[k] - beta * double(std::size_t{1} << k); excess > jump)
        jump = excess, knee = double(std::size_t{1} << k);
    if (jump < 0.5 * time[lo]) knee = 0, jump = 0;
    double gamma[3];
    for (int k : {16, 18, 20}) {
      const std::size_t s = std::size_t{1} << k, e = s / sizeof(float);
      auto acc = mem.template scratch<float>(e), got = mem.template scratch<float>(e);
      const auto* a = reinterpret_cast<const std::byte*>(acc.span().data());
      auto exchange_reduce = [&] {
        detail::sendrecv(t, peer, std::span<const std::byte>(a, s), peer, std::as_writable_bytes(got.span()));
        mem.reduce(op::sum, acc.span(), std::span<const float>(got.span()));
      };
      exchange_reduce();
      gamma[(k - 16) / 2] = std::max(0.0, median_seconds(5, k < 20 ? 10 : 4, exchange_reduce) - time[k]) / double(s);
    }
    std::sort(gamma, gamma + 3);
    figures[0] = time[lo];
    figures[1] = beta;
    figures[2] = gamma[1];
    figures[3] = knee;
    figures[4] = jump;
  }
  tree::binomial_broadcast(t, std::span<double>(figures), 0);
  m.alpha = figures[0];
  m.beta = figures[1];
  m.gamma = figures[2];
  m.knee = figures[3];
  m.alpha_above = figures[4];
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
  // {state, alpha, beta, gamma, knee, alpha_above}; state 1: found, 0:
  // measure, 2: use the built-in constants, -1: rank 0 failed to read the file.
  double msg[6] = {0, 0, 0, 0, 0, 0};
  std::optional<error> failed;
  cost_model m;
  if (t.rank() == 0) {
    std::lock_guard lk(loaded_models_mutex());
    try {
      std::optional<cost_model> found;  // RINGTREE_CALIBRATE=1: measured once per process
      if (auto it = loaded_models().find(path); it != loaded_models().end()) found = it->second;
      else if (mode != "1") found = read_model(path, 0);
      if (found) {
        msg[0] = 1, msg[1] = found->alpha, msg[2] = found->beta, msg[3] = found->gamma;
        msg[4] = found->knee, msg[5] = found->alpha_above, m.source = found->source;
      }
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
    m.alpha = msg[1], m.beta = msg[2], m.gamma = msg[3], m.knee = msg[4], m.alpha_above = msg[5];
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
