#pragma once
// map_shared from POSIX segments (memory/segments.hpp), usable by any
// transport whose ranks may share a host: every rank makes a segment of
// its own (0600, an unguessable name, first touched by its owner, huge pages
// where the system gives them to shared memory), the names go round over the
// transport's own messages (so under its timeout), every rank maps every
// segment, and each name is unlinked once all have mapped it. A segment's
// pages live as long as anyone maps them, so a reader never faults on a dead
// peer's, and freeing needs no peer.
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
#include <span>
#include <string>
#include <vector>

#include <ringtree/core/error.hpp>
#include <ringtree/memory/segments.hpp>
#include <ringtree/memory/shared_mapping.hpp>
#include <ringtree/transport/exchange.hpp>

namespace ringtree::detail {

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
