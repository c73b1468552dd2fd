#pragma once
// What the tuning caches share: reading and writing their small text files
// safely (a cache that cannot be used costs measurements, never the run),
// and the keys they are filed under: the transport and its layout
// (cache_name), the CPU (cpu_model) and when and where a measurement was
// made (measured_stamp). The model file (tuning/model_file.hpp) and the
// choice cache (tuning/choice_cache.hpp) are both made of these.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringtree/core/error.hpp>
#include <ringtree/transport/topology.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree {
namespace detail {

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
// One lock for every loaded_files of this process (models and choices).
inline std::mutex& loaded_models_mutex() {
  static std::mutex m;
  return m;
}

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

}  // namespace detail
}  // namespace ringtree
