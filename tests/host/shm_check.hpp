#pragma once
// What the shared-memory test files share: forked ranks' outcomes, segment
// names of their own, and what is in /dev/shm.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include <ringtree/core/error.hpp>

#include "../process_check.hpp"

namespace rt_test {

inline bool exited_ok(const outcome& o) { return WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0; }
// A segment name no other test (or run of this one) uses.
inline std::string unique_name(const char* what) { return ringtree::detail::cat("/ringtree-test-", what, "-", getpid()); }

// ringtree's entries in /dev/shm now.
inline std::set<std::string> shm_entries() {
  std::set<std::string> s;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    if (e.path().filename().string().rfind("ringtree-", 0) == 0) s.insert(e.path().filename().string());
  return s;
}

}  // namespace rt_test
