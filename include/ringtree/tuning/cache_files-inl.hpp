#pragma once
// cache_files.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <ringtree/tuning/cache_files.hpp>

namespace ringtree::detail {

RINGTREE_FUNC void cache_unusable(const std::string& path, const char* doing, int err) {
  static std::mutex m;
  static std::vector<std::string> warned;
  const std::string dir = path.substr(0, path.find_last_of('/'));
  std::lock_guard lk(m);
  if (std::find(warned.begin(), warned.end(), dir) != warned.end()) return;
  warned.push_back(dir);
  std::fprintf(stderr, "ringtree: warning: cannot %s %s: %s; measurements stay in memory (set RINGTREE_CACHE_DIR to a "
                       "writable directory to keep them)\n", doing, path.c_str(), std::strerror(err));
}

RINGTREE_FUNC std::optional<std::string> read_text_file(const std::string& path, const char* call, const char* what, int rank) {
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

RINGTREE_FUNC void write_text_file(const std::string& path, const std::string& text) {
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

RINGTREE_FUNC std::string measured_stamp() {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char when[64] = "?";
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", ::localtime_r(&now, &tm));
  return cat(when, " on ", host);
}

RINGTREE_FUNC std::mutex& loaded_models_mutex() {
  static std::mutex m;
  return m;
}

RINGTREE_FUNC std::string cpu_model() {
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

}  // namespace ringtree::detail
