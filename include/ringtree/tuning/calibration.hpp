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
//          extra time per byte (the median of the three), and never less
//          than the sum alone takes. Summing data that
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
#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <ringtree/algorithms/tree.hpp>
#include <ringtree/core/config.hpp>
#include <ringtree/tuning/cost_model.hpp>

namespace ringtree {
namespace detail {

inline std::string model_path(const std::string& transport, int ranks) {
  const config c = config::from_env();
  if (!c.model_file.empty()) return c.model_file;
  return cat(c.cache_dir, "/model-", transport, "-", ranks, "ranks.txt");
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
    else if (key == "alpha_net_us") m.alpha_net = v * 1e-6;
    else if (key == "beta_net_ns_per_byte") m.beta_net = v * 1e-9;
    else throw error("cost model", rank, cat(path, ":", no, ": unknown name '", key,
                                             "' (alpha_us, beta_ns_per_byte, gamma_ns_per_byte, knee_bytes, alpha_above_knee_us, ",
                                             "alpha_net_us, beta_net_ns_per_byte)"));
  }
  if (!(have[0] && have[1] && have[2]))
    throw error("cost model", rank, cat(path, ": needs alpha_us, beta_ns_per_byte and gamma_ns_per_byte"));
  return m;
}

// A cache that cannot be used is no error: tuning goes on in memory. One
// warning per directory and process says where and why (the errno), so
// that a HOME without a usable ~/.cache costs measurements, not the run.
inline void cache_unusable(const std::string& path, const char* doing, int err) {
  static std::mutex m;
  static std::vector<std::string> warned;
  const std::string dir = path.substr(0, path.find_last_of('/'));
  std::lock_guard lk(m);
  if (std::find(warned.begin(), warned.end(), dir) != warned.end()) return;
  warned.push_back(dir);
  std::fprintf(stderr, "ringtree: warning: cannot %s %s: %s; measurements stay in memory (set RINGTREE_CACHE_DIR to a "
                       "writable directory to keep them)\n", doing, path.c_str(), std::strerror(err));
}

// A small text file's contents, if it exists and can be opened (else a
// warning, above); `what` names it in errors. Only a regular file of at
// most max_model_file_bytes is read (a FIFO would block, a device like
// /dev/zero never ends), opened without blocking.
inline constexpr std::size_t max_model_file_bytes = 64 * 1024;
// Errors are raised as `call`'s, naming the file a `what` ("model") file.
inline std::optional<std::string> read_text_file(const std::string& path, const char* call, const char* what, int rank) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) cache_unusable(path, "read", errno);
    return std::nullopt;
  }
  std::string text;
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) problem = "cannot stat it";
  else if (S_ISDIR(st.st_mode)) problem = cat("is a directory, not a ", what, " file");
  else if (!S_ISREG(st.st_mode)) problem = "is not a regular file (a FIFO, device or socket); refusing to read it";
  else if (static_cast<std::size_t>(st.st_size) > max_model_file_bytes) problem = cat("is too large for a ", what, " file");
  else {
    char buf[4096];
    for (ssize_t k; text.size() <= max_model_file_bytes && (k = ::read(fd, buf, sizeof buf)) != 0;) {
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) { problem = "cannot be read"; break; }
      text.append(buf, static_cast<std::size_t>(k));
    }
    if (text.size() > max_model_file_bytes) problem = cat("is too large for a ", what, " file");  // it grew while read
  }
  ::close(fd);
  if (!problem.empty())
    throw error(call, rank, cat(path, " ", problem, " (at most ", max_model_file_bytes, " bytes of 'name = value' lines)"));
  return text;
}

// The file's constants, if it exists; a file that does not parse is an
// error naming the file and line, never silently replaced.
inline std::optional<cost_model> read_model(const std::string& path, int rank) {
  const auto text = read_text_file(path, "cost model", "model", rank);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  return parse_model(in, path, rank);
}

// Best effort: written to a temporary file, then renamed over the old one,
// so readers never see half a file. A cache that cannot be written costs a
// measurement next time (and a warning, once).
inline void write_text_file(const std::string& path, const std::string& text) {
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1))
    ::mkdir(path.substr(0, slash).c_str(), 0755);  // the directories above it (EEXIST is fine)
  const std::string tmp = cat(path, ".", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return cache_unusable(path, "write", errno);
  std::size_t done = 0;
  int err = 0;
  while (done < text.size()) {
    const ssize_t k = ::write(fd, text.data() + done, text.size() - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      err = k < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<std::size_t>(k);
  }
  ::close(fd);
  if (done == text.size() && ::rename(tmp.c_str(), path.c_str()) == 0) return;
  if (err == 0) err = errno;
  ::unlink(tmp.c_str());
  cache_unusable(path, "write", err);
}

// "2026-11-30 14:00:00 on host": when and where a measurement was made.
inline std::string measured_stamp() {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char when[64] = "?";
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", ::localtime_r(&now, &tm));
  return cat(when, " on ", host);
}

inline void write_model(const std::string& path, const cost_model& m, const std::string& transport, int ranks) {
  write_text_file(path, cat("# ringtree cost model: transport ", transport, ", ", ranks, " ranks, measured ", measured_stamp(),
                            "\n# a call's time = alpha * steps + beta * bytes moved + gamma * bytes reduced (see docs/algorithms.md)",
                            "\n# edit to override; delete (or RINGTREE_CALIBRATE=1) to measure again\n",
                            "alpha_us = ", m.alpha * 1e6, "\nbeta_ns_per_byte = ", m.beta * 1e9, "\ngamma_ns_per_byte = ", m.gamma * 1e9,
                            "\n# steps whose messages are larger than knee_bytes cost alpha_above_knee_us more (0: no knee)",
                            "\nknee_bytes = ", m.knee, "\nalpha_above_knee_us = ", m.alpha_above * 1e6, "\n",
                            m.alpha_net < 0 ? std::string() :
                            cat("# between hosts: per step, and per byte over one host's link\nalpha_net_us = ", m.alpha_net * 1e6,
                                "\nbeta_net_ns_per_byte = ", std::max(0.0, m.beta_net) * 1e9, "\n")));
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

// Measure alpha, beta, gamma between ranks a and b (every rank calls
// this); a's figures {alpha, beta, gamma, knee, alpha_above} reach every rank.
template <transport T>
std::array<double, 5> calibrate_pair(T& t, int a, int b) {
  auto mem = t.memory();
  constexpr int lo = 3, hi = 20;  // exchanges of 2^lo .. 2^hi bytes
  const std::size_t big = std::size_t{1} << hi;
  std::array<double, 5> figures{};
  if (t.rank() == a || t.rank() == b) {
    const int peer = t.rank() == a ? b : a;
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
      // The reduction alone is a floor: on a busy machine the difference of
      // two noisy medians can come out at nothing, and a sum is never free.
      const double alone = median_seconds(5, k < 20 ? 10 : 4, [&] {
        mem.reduce(op::sum, acc.span(), std::span<const float>(got.span()));
      });
      gamma[(k - 16) / 2] = std::max(alone, median_seconds(5, k < 20 ? 10 : 4, exchange_reduce) - time[k]) / double(s);
    }
    std::sort(gamma, gamma + 3);
    figures[0] = time[lo];
    figures[1] = beta;
    figures[2] = gamma[1];
    figures[3] = knee;
    figures[4] = jump;
  }
  tree::binomial_broadcast(t, std::span<double>(figures), a);
  return figures;
}

// Measure the model's constants (every rank calls this): between ranks 0
// and 1; on ranks that span hosts, within rank 0's host (if it has two
// ranks) and between the first ranks of hosts 0 and 1, for the network's.
template <transport T>
cost_model calibrate(T& t) {
  cost_model m;
  m.source = "measured";
  if (t.size() == 1) return m;
  auto take = [&m](const std::array<double, 5>& f) {
    m.alpha = f[0], m.beta = f[1], m.gamma = f[2], m.knee = f[3], m.alpha_above = f[4];
  };
  if constexpr (hierarchical_transport<T>) {
    if (const auto& l = t.layout(); l.hosts() > 1) {
      const auto net = calibrate_pair(t, l.members(0)[0], l.members(1)[0]);
      take(net);  // the local constants too, unless rank 0's host has a pair to measure them
      m.alpha_net = net[0], m.beta_net = net[1];
      if (l.members(0).size() > 1) take(calibrate_pair(t, l.members(0)[0], l.members(0)[1]));
      return m;
    }
  }
  take(calibrate_pair(t, 0, 1));
  return m;
}

// The name a transport's cache files go by: its name, and where its ranks
// span hosts, their layout ("cluster-2x2-<hash of who is where>"): the
// fastest algorithm depends on it.
template <transport T>
std::string cache_name(const T& t) {
  std::string name = transport_name<T>();
  if constexpr (hierarchical_transport<T>) {
    const auto& l = t.layout();
    if (l.hosts() > 1) {
      std::uint32_t h = 2166136261u;  // FNV-1a of the host of every rank
      for (int r = 0; r < l.ranks(); ++r) h = (h ^ static_cast<std::uint32_t>(l.host_of(r))) * 16777619u;
      char tag[16];
      std::snprintf(tag, sizeof tag, "%06x", h & 0xffffffu);
      name += cat("-", l.describe(), "-", tag);
    }
  }
  return name;
}

// What this process already loaded or measured, by file.
template <class V>
struct loaded_files {
  std::vector<std::pair<std::string, V>> entries;
  V* find(const std::string& path) {
    for (auto& [p, v] : entries)
      if (p == path) return &v;
    return nullptr;
  }
  void put(const std::string& path, V v) {
    if (V* old = find(path)) *old = std::move(v);
    else entries.emplace_back(path, std::move(v));
  }
};
inline loaded_files<cost_model>& loaded_models() {
  static loaded_files<cost_model> models;
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
  const std::string name = cache_name(t), path = model_path(name, t.size());
  const auto cal = config::from_env().calibrate;
  const std::string mode = !cal ? "" : *cal ? "1" : "0";
  // {state, alpha, beta, gamma, knee, alpha_above, alpha_net, beta_net};
  // state 1: found, 0: measure, 2: use the built-in constants, -1: rank 0
  // failed to read the file.
  double msg[8] = {0, 0, 0, 0, 0, 0, -1, -1};
  std::optional<error> failed;
  cost_model m;
  if (t.rank() == 0) {
    std::lock_guard lk(loaded_models_mutex());
    try {
      std::optional<cost_model> found;  // RINGTREE_CALIBRATE=1: measured once per process
      if (const cost_model* done = loaded_models().find(path)) found = *done;
      else if (mode != "1") found = read_model(path, 0);
      if (found) {
        msg[0] = 1, msg[1] = found->alpha, msg[2] = found->beta, msg[3] = found->gamma;
        msg[4] = found->knee, msg[5] = found->alpha_above, msg[6] = found->alpha_net, msg[7] = found->beta_net;
        m.source = found->source;
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
    m.alpha_net = msg[6], m.beta_net = msg[7];
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
    loaded_models().put(path, m);
  }
  return m;
}

// What automatic picked in each size bin, by measurement (communicator.hpp
// measures; this keeps the choices). Bin b holds the sizes in
// (2^(b-1), 2^b] bytes and is measured at 2^b; calls above 2^max_bin
// (64 MiB) use that bin's choice. algorithm::automatic: not measured yet.
struct tuning_table {
  static constexpr int max_bin = 26;
  static constexpr std::size_t collectives = std::size(all_collectives);
  static int bin_of(std::size_t bytes) noexcept {
    return bytes <= 1 ? 0 : std::min(static_cast<int>(std::bit_width(bytes - 1)), max_bin);
  }
  std::array<std::uint8_t, collectives*(max_bin + 1)> pick{};  // algorithm values
  algorithm get(collective c, int bin) const noexcept { return algorithm(pick[std::size_t(c) * (max_bin + 1) + bin]); }
  void set(collective c, int bin, algorithm a) noexcept { pick[std::size_t(c) * (max_bin + 1) + bin] = std::uint8_t(a); }
};

// The CPU this runs on (a cached choice is only trusted on the same one).
inline std::string cpu_model() {
  std::string text(8192, '\0');
  const int fd = ::open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "unknown";
  const ssize_t k = ::read(fd, text.data(), text.size());
  ::close(fd);
  text.resize(k > 0 ? static_cast<std::size_t>(k) : 0);
  for (const char* key : {"model name", "Model", "cpu model", "uarch"})
    if (auto at = text.find(std::string("\n") + key); at != std::string::npos || text.starts_with(key)) {
      at = text.find(':', at == std::string::npos ? 0 : at);
      if (at == std::string::npos) break;
      const auto end = text.find('\n', at);
      std::string v = text.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v.empty() ? "unknown" : v;
    }
  return "unknown";
}

// The cache of choices: one file per transport and rank count, valid for
// one CPU model and one version of ringtree (a newer version may have
// other algorithms, or faster ones).
inline std::string tuning_path(const std::string& transport, int ranks) {
  return cat(config::from_env().cache_dir, "/tuned-", transport, "-", ranks, "ranks.txt");
}
inline loaded_files<tuning_table>& loaded_tunings() {
  static loaded_files<tuning_table> tables;
  return tables;
}

// The table in a cache file's text, or nothing if it was made on another
// CPU or by another version. Lines: "cpu = ...", "version = ...",
// "<collective> <bytes> = <algorithm>"; a line that does not parse is an
// error naming the file, never silently ignored.
inline std::optional<tuning_table> parse_tuning(const std::string& text, const std::string& path, int rank) {
  tuning_table t;
  std::string cpu, ver;
  std::istringstream in(text);
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto eq = line.find('=');
    auto trim = [](std::string x) {
      x.erase(0, x.find_first_not_of(" \t\r"));
      x.erase(x.find_last_not_of(" \t\r") + 1);
      return x;
    };
    const std::string key = trim(line.substr(0, eq == std::string::npos ? 0 : eq)), value = trim(eq == std::string::npos ? "" : line.substr(eq + 1));
    auto bad = [&] { return error("tuning", rank, cat(path, ":", no, ": expected 'cpu = ...', 'version = ...' or '<collective> <bytes> = <algorithm>', got '", line, "'")); };
    if (eq == std::string::npos) throw bad();
    if (key == "cpu") { cpu = value; continue; }
    if (key == "version") { ver = value; continue; }
    std::istringstream ks(key);
    std::string name, rest;
    std::size_t bytes = 0;
    if (!(ks >> name >> bytes) || (ks >> rest) || !std::has_single_bit(bytes) || tuning_table::bin_of(bytes) != std::countr_zero(bytes)) throw bad();
    const auto a = algorithm_from_string(value);
    bool known = false;
    for (collective c : all_collectives)
      if (to_string(c) == name && a && offers(c, *a)) t.set(c, tuning_table::bin_of(bytes), *a), known = true;
    if (!known) throw bad();
  }
  if (cpu != cpu_model() || ver != version_string) return std::nullopt;
  return t;
}

// Every rank calls this: rank 0 finds the table (this process's, or the
// cache file's unless `fresh`) and every rank ends with rank 0's.
template <transport T>
void load_tuning(T t, tuning_table& table, bool fresh) {
  const std::string path = tuning_path(cache_name(t), t.size());
  std::uint8_t state = 0;  // 1: rank 0 failed
  std::optional<error> failed;
  if (t.rank() == 0) {
    std::lock_guard lk(loaded_models_mutex());
    try {
      if (const tuning_table* done = fresh ? nullptr : loaded_tunings().find(path)) table = *done;
      else if (!fresh)
        if (auto text = read_text_file(path, "tuning", "tuning", 0))
          if (auto found = parse_tuning(*text, path, 0)) table = *found;
    } catch (const error& e) {
      failed = e;
      state = 1;
    }
  }
  std::array<std::uint8_t, sizeof(table.pick) + 1> msg{};
  std::copy(table.pick.begin(), table.pick.end(), msg.begin());
  msg.back() = state;
  if (t.size() > 1) tree::binomial_broadcast(t, std::span<std::uint8_t>(msg), 0);
  if (failed) throw *failed;
  if (msg.back() != 0) throw error("tuning", t.rank(), cat("rank 0 could not read ", path));
  std::copy(msg.begin(), msg.end() - 1, table.pick.begin());
}

// Rank 0 keeps the table for this process and writes the cache file.
template <transport T>
void save_tuning(T t, const tuning_table& table) {
  if (t.rank() != 0) return;
  const std::string name = cache_name(t), path = tuning_path(name, t.size());
  std::string text = cat("# ringtree: what automatic runs, measured on this transport (", name, ", ", t.size(), " ranks), ",
                         measured_stamp(), "\n# delete this file (or RINGTREE_TUNE=fresh) to measure again\ncpu = ", cpu_model(),
                         "\nversion = ", version_string, "\n");
  for (collective c : all_collectives)
    for (int b = 0; b <= tuning_table::max_bin; ++b)
      if (table.get(c, b) != algorithm::automatic) text += cat(to_string(c), " ", std::size_t{1} << b, " = ", to_string(table.get(c, b)), "\n");
  std::lock_guard lk(loaded_models_mutex());
  loaded_tunings().put(path, table);
  write_text_file(path, text);
}

}  // namespace detail
}  // namespace ringtree
