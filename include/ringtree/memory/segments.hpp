#pragma once
// POSIX shared-memory segments: their names, which say who made them, the
// views a rank keeps of every rank's segment, and the sweep of what crashed
// runs left. transport/shared_segments.hpp maps them in a collective call.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <ringtree/core/compiled.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/core/posix.hpp>

namespace ringtree::detail {

// The names ringtree gives its segments say who made them, so that what a
// crashed run left can be found and removed (sweep_stale_segments):
//   /ringtree-<pid namespace>-<pid>-<start time>-<128 random bits>
// The random part makes a name nobody can guess; the maker is the process
// that creates the segment (every caller of random_shm_name does).
inline constexpr std::size_t shm_name_max = 96;  // with the '/' and the final '\0'
std::uint64_t pid_namespace();
std::string random_shm_name();
// Removes the segments of this user that a dead process of this pid
// namespace made (named as above): what a run killed before it could
// unlink them left. Processes elsewhere (another pid namespace sharing
// /dev/shm) are never judged. Called where segments are made, and by a
// rank whose set-up failed (its peer may have died holding one).
void sweep_stale_segments();

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

}  // namespace ringtree::detail

#if RINGTREE_DEFINES
#include <ringtree/memory/segments-inl.hpp>
#endif
