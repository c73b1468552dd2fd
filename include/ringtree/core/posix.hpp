#pragma once
// What the POSIX parts ask of the system about processes: whether one is
// alive (and still the same one: pids are reused), and who started whom.
#include <ringtree/core/compiled.hpp>
#include <ringtree/core/cxx20.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace ringtree::detail {

// What /proc/PID/stat says of a process: its state, parent and start time
// (clock ticks since boot). ok is false where it cannot be read.
struct proc_stat {
  bool ok = false;
  char state = 0;
  int ppid = 0;
  std::uint64_t start = 0;
};
proc_stat read_proc_stat(int pid);
// Alive: exists and is not a zombie (a dead child its parent has not
// reaped); with `start` (non-zero), also the same process, not a later one
// that got its pid.
bool process_alive(int pid, std::uint64_t start = 0);
// Whether `ancestor` is a parent, grandparent, ... of `pid`.
bool is_ancestor(int ancestor, int pid);

}  // namespace ringtree::detail

#if RINGTREE_DEFINES
#include <ringtree/core/posix-inl.hpp>
#endif
