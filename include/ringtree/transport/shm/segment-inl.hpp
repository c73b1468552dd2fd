#pragma once
// segment.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <ringtree/transport/shm/segment.hpp>

namespace ringtree::detail {

RINGTREE_FUNC std::string shm_peer_problem(const shm_segment& seg, int r) {
  const int pid = seg.rank_line(r)->pid.load();
  if (pid != 0 && !process_alive(pid)) return cat("rank ", r, " (pid ", pid, ") has died");
  if (seg.rank_line(r)->left.load() != 0)
    return cat("rank ", r, " (pid ", pid, ") failed or left the communicator (its transport raised, or was destroyed) before this message");
  return {};
}

}  // namespace ringtree::detail
