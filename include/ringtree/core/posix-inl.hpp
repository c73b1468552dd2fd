#pragma once
// posix.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <ringtree/core/posix.hpp>

namespace ringtree::detail {

RINGTREE_FUNC proc_stat read_proc_stat(int pid) {
  proc_stat st;
  if (pid <= 0) return st;
  char path[64], buf[1024];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return st;
  const ssize_t k = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (k <= 0) return st;
  buf[k] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces and parentheses
  if (p == nullptr) return st;
  // fields from 3 on: state ppid pgrp session tty tpgid flags minflt cminflt
  // majflt cmajflt utime stime cutime cstime priority nice threads itreal starttime
  unsigned long long start = 0;
  if (std::sscanf(p + 1, " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                  &st.state, &st.ppid, &start) == 3) {
    st.start = start;
    st.ok = true;
  }
  return st;
}

RINGTREE_FUNC bool process_alive(int pid, std::uint64_t start) {
  if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) return false;
  const proc_stat st = read_proc_stat(pid);
  if (!st.ok) return true;
  if (st.state == 'Z' || st.state == 'X') return false;
  return start == 0 || st.start == start;
}

RINGTREE_FUNC bool is_ancestor(int ancestor, int pid) {
  for (int i = 0; i < 64 && pid > 1; ++i) {
    pid = read_proc_stat(pid).ppid;
    if (pid == ancestor) return true;
  }
  return false;
}

}  // namespace ringtree::detail
