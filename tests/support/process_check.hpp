#pragma once
// Runs a test body in forked processes, one per rank, and collects how
// each ended: what the shared-memory and fault tests need to kill, stall
// or lose a rank for real.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_time.hpp"

namespace rt_test {

struct outcome {
  int status;         // as from waitpid
  std::string text;   // what the process wrote to its pipe
};

// A count that the processes forked after it share (an anonymous shared
// page; threads share it too): how a rank that only has to stay away or
// keep something open learns that the others are done, instead of
// sleeping out a bound set for a loaded machine.
class shared_count {
 public:
  shared_count() {
    page_ = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page_ == MAP_FAILED) throw std::runtime_error("mmap of a shared page failed");
    count_ = new (page_) std::atomic<int>(0);
  }
  ~shared_count() { munmap(page_, sizeof(std::atomic<int>)); }
  shared_count(const shared_count&) = delete;
  shared_count& operator=(const shared_count&) = delete;
  static_assert(std::atomic<int>::is_always_lock_free, "between processes, the atomic must not need a lock");

  void add() noexcept { count_->fetch_add(1); }
  int get() const noexcept { return count_->load(); }
  // Adds one when it goes out of scope: "this rank is done", on every way out.
  struct add_on_exit {
    shared_count& count;
    ~add_on_exit() { count.add(); }
  };
  // Sleeps until the count reaches `n`, or `most` has passed.
  void sleep_until(int n, std::chrono::duration<double> most) const {
    rt_test::sleep_until([&] { return get() >= n; }, most);
  }

 private:
  void* page_;
  std::atomic<int>* count_;
};

// How long run_processes waits for its children before it kills them: a
// backstop far above what any case takes (seconds), so that a hang fails
// that case with every rank's output instead of stalling the whole suite
// until Meson's timeout kills it silently.
inline constexpr std::chrono::seconds children_deadline{300};

// Runs body(rank) in n forked processes; each returns an exit code and may
// write a line to `out`. A child still running at children_deadline is
// killed (SIGKILL: its status says so, and its text ends with a note).
inline std::vector<outcome> run_processes(int n, const std::function<int(int rank, FILE* out)>& body) {
  std::vector<pid_t> pids(n);
  std::vector<int> fds(n);
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (pipe(p) != 0) throw std::runtime_error("pipe failed");
    std::fflush(nullptr);  // or every child would print the parent's pending output again
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      close(p[0]);
      FILE* out = fdopen(p[1], "w");
      int rc = 99;
      try {
        rc = body(r, out);
      } catch (const std::exception& e) {
        std::fprintf(out, "%s", e.what());
        rc = 3;
      }
      std::fflush(out);
      _exit(rc);
    }
    close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  std::vector<outcome> res(n);
  std::vector<bool> reaped(n, false);
  const auto deadline = std::chrono::steady_clock::now() + children_deadline;
  for (int left = n; left > 0;) {  // reap each child as it ends (the texts are short: no pipe fills up)
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == 0) {
      if (std::chrono::steady_clock::now() < deadline) {
        usleep(2000);
        continue;
      }
      for (int r = 0; r < n; ++r)
        if (!reaped[r]) kill(pids[r], SIGKILL), res[r].text = "[killed by run_processes: still running after 300 s] ";
      continue;  // reaped below, as killed
    }
    if (pid < 0) throw std::runtime_error("waitpid failed");
    for (int r = 0; r < n; ++r)
      if (pids[r] == pid) res[r].status = status, reaped[r] = true, --left;
  }
  for (int r = 0; r < n; ++r) {
    char buf[4096];
    ssize_t k;
    while ((k = read(fds[r], buf, sizeof buf)) > 0) res[r].text.append(buf, static_cast<std::size_t>(k));
    close(fds[r]);
  }
  return res;
}

}  // namespace rt_test
