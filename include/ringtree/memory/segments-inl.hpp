#pragma once
// segments.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <ringtree/memory/segments.hpp>

namespace ringtree::detail {

RINGTREE_FUNC std::uint64_t pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

RINGTREE_FUNC std::string random_shm_name() {
  std::random_device rd;
  const int pid = static_cast<int>(getpid());
  char s[shm_name_max];
  std::snprintf(s, sizeof s, "/ringtree-%llx-%d-%llu-%08x%08x%08x%08x", static_cast<unsigned long long>(pid_namespace()), pid,
                static_cast<unsigned long long>(read_proc_stat(pid).start), static_cast<unsigned>(rd()),
                static_cast<unsigned>(rd()), static_cast<unsigned>(rd()), static_cast<unsigned>(rd()));
  return s;
}

RINGTREE_FUNC void sweep_stale_segments() {
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

}  // namespace ringtree::detail
