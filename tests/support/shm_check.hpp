#pragma once
// What the shared-memory test files share: forked ranks' outcomes, segment
// names of their own, and what is in /dev/shm.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include <ringtree/core/error.hpp>
#include <ringtree/core/posix.hpp>

#include "process_check.hpp"

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

// The pid in a name from unique_name ("ringtree-test-<what>-<pid>"), or 0.
inline int unique_name_pid(const std::string& e) {
  if (e.rfind("ringtree-test-", 0) != 0) return 0;
  const auto dash = e.rfind('-');
  const std::string digits = e.substr(dash + 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::atoi(digits.c_str());
}

// What a test left in /dev/shm: the entries that are new since `before`,
// except those whose creator still runs: the library's own maps (named
// /ringtree-<ns>-<pid>-<start>-..., judged as its sweep of stale segments
// judges them) and another test process's named segments (unique_name).
// A suite running beside this one is not a leak of this test's.
inline std::set<std::string> left_behind(const std::set<std::string>& before) {
  std::set<std::string> left;
  for (const auto& e : shm_entries()) {
    if (before.count(e)) continue;
    unsigned long long ns = 0, start = 0;
    int pid = 0;
    if (std::sscanf(e.c_str(), "ringtree-%llx-%d-%llu-", &ns, &pid, &start) == 3 && pid != ::getpid() &&
        ringtree::detail::process_alive(pid, start))
      continue;
    if (const int other = unique_name_pid(e); other > 0 && other != ::getpid() && ringtree::detail::process_alive(other)) continue;
    left.insert(e);
  }
  return left;
}

}  // namespace rt_test
