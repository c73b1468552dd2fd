#pragma once
// POSIX shared-memory regions for map_shared (memory/shared_mapping.hpp), usable by
// any transport whose ranks may share a host: every rank makes a segment of
// its own (0600, an unguessable name, first touched by its owner, huge pages
// where the system gives them to shared memory), the names go round over the
// transport's own messages (so under its timeout), every rank maps every
// segment, and each name is unlinked once all have mapped it. A segment's
// pages live as long as anyone maps them, so a reader never faults on a dead
// peer's, and freeing needs no peer.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <ringtree/core/error.hpp>
#include <ringtree/core/posix.hpp>
#include <ringtree/memory/shared_mapping.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree::detail {

// The names ringtree gives its segments say who made them, so that what a
// crashed run left can be found and removed (sweep_stale_segments):
//   /ringtree-<pid namespace>-<pid>-<start time>-<128 random bits>
// The random part makes a name nobody can guess; the maker is the process
// that creates the segment (every caller of random_shm_name does).
inline constexpr std::size_t shm_name_max = 96;  // with the '/' and the final '\0'
inline std::uint64_t pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}
inline std::string random_shm_name() {
  std::random_device rd;
  const int pid = static_cast<int>(getpid());
  char s[shm_name_max];
  std::snprintf(s, sizeof s, "/ringtree-%llx-%d-%llu-%08x%08x%08x%08x", static_cast<unsigned long long>(pid_namespace()), pid,
                static_cast<unsigned long long>(read_proc_stat(pid).start), static_cast<unsigned>(rd()),
                static_cast<unsigned>(rd()), static_cast<unsigned>(rd()), static_cast<unsigned>(rd()));
  return s;
}
// Removes the segments of this user that a dead process of this pid
// namespace made (named as above): what a run killed before it could
// unlink them left. Processes elsewhere (another pid namespace sharing
// /dev/shm) are never judged. Called where segments are made, and by a
// rank whose set-up failed (its peer may have died holding one).
inline void sweep_stale_segments() {
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return;
  const std::uint64_t ns = pid_namespace();
  while (const dirent* e = ::readdir(d)) {
    unsigned long long their_ns = 0, start = 0;
    int pid = 0, used = 0;
    if (std::sscanf(e->d_name, "ringtree-%llx-%d-%llu-%n", &their_ns, &pid, &start, &used) != 3 || used == 0) continue;
    if (their_ns != ns || process_alive(pid, start)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid()) continue;
    ::shm_unlink((std::string("/") + e->d_name).c_str());
  }
  ::closedir(d);
}

// One rank's views of a symmetric mapping's regions (each rank's own
// segment): unmapped together; its own segment's name is unlinked as soon
// as every peer has mapped it, or here if set-up failed before that.
struct shm_views {
  explicit shm_views(int n, std::size_t len) : at(n, nullptr), bytes(len) {}
  shm_views(const shm_views&) = delete;
  ~shm_views() {
    for (void* p : at)
      if (p != nullptr) munmap(p, bytes);
    if (!own_name.empty()) shm_unlink(own_name.c_str());
  }
  std::vector<void*> at;
  std::size_t bytes;
  std::string own_name;
};

// How map_segments treats ranks that cannot map each other's segments.
enum class sharing {
  required,  // they are one host by construction (shm_transport): raise
  if_one_host,  // they may be on several hosts (MPI): every rank returns nothing
};

// The collective set-up described above; `peer_problem(q)` explains a
// peer whose segment cannot be opened (it gave up). With
// sharing::if_one_host (for ranks the caller knows share a host), ranks
// that cannot open each other's segments (one host, separate /dev/shm:
// containers) all agree on std::nullopt.
template <transport T>
std::optional<shared_mapping> map_segments(T& t, std::size_t bytes, std::function<std::string(int)> peer_problem,
                                           std::chrono::duration<double> timeout, sharing mode) {
  const int me = t.rank(), n = t.size();
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t len = std::max(page, (bytes + page - 1) / page * page);
  auto views = std::make_shared<shm_views>(n, len);
  auto fail = [&](const std::string& what) { return error("symmetric memory", me, cat(what, ": ", std::strerror(errno))); };
  struct segment_name {
    char name[shm_name_max] = {};
  } mine;
  sweep_stale_segments();
  std::snprintf(mine.name, sizeof mine.name, "%s", random_shm_name().c_str());
  const int fd = shm_open(mine.name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw fail(cat("cannot create shared memory ", mine.name));
  views->own_name = mine.name;
  if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
    const error e = fail(cat("cannot size ", mine.name, " to ", len, " bytes"));
    close(fd);
    throw e;
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) throw fail(cat("cannot map ", len, " bytes of ", mine.name));
  views->at[me] = p;
  madvise(p, len, MADV_HUGEPAGE);  // a hint: refused where shared memory gets no huge pages
  std::memset(p, 0, len);          // the owner touches its pages first: they are local to it
  std::vector<segment_name> all(n);
  const bool optional = mode == sharing::if_one_host;
  bool ok = true;
  try {  // a peer that dies from here on may leave its segment: sweep it on the way out
  exchange_all(t, "symmetric memory", std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(all)));
  for (int q = 0; q < n && ok; ++q) {
    if (q == me) continue;
    const char* name = all[q].name;
    if (strnlen(name, sizeof mine.name) == sizeof mine.name)
      throw error("symmetric memory", me, cat("rank ", q, " sent no segment name (mismatched allocate calls?)"));
    const int qfd = shm_open(name, O_RDWR, 0);
    if (qfd < 0) {
      if (optional) { ok = false; break; }  // another /dev/shm: tell the peers below
      if (auto why = peer_problem(q); !why.empty()) throw error("symmetric memory", me, why);  // most likely it gave up
      throw fail(cat("cannot open rank ", q, "'s segment ", name));
    }
    struct stat st {};
    if (fstat(qfd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 0077) != 0 ||
        st.st_size != static_cast<off_t>(len)) {
      close(qfd);
      throw error("symmetric memory", me, cat("rank ", q, "'s segment ", name, " is not ", len,
                                              " bytes of this user's private memory (allocate called with "
                                              "different counts?)"));
    }
    void* qp = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, qfd, 0);
    close(qfd);
    if (qp == MAP_FAILED) throw fail(cat("cannot map rank ", q, "'s segment ", name));
    views->at[q] = qp;
  }
  // Every rank has tried every segment before any name goes away.
  if (first_failed(t, ok) >= 0) return std::nullopt;  // (only if_one_host gets here failing)
  } catch (...) {
    sweep_stale_segments();
    throw;
  }
  shm_unlink(views->own_name.c_str());
  views->own_name.clear();
  shared_mapping m;
  for (void* v : views->at) m.bases.push_back(static_cast<std::byte*>(v));
  m.bytes = len;
  m.keep = views;
  m.peer_problem = std::move(peer_problem);
  m.timeout = timeout;
  return m;
}

}  // namespace ringtree::detail
