// shm_transport's start between real processes, started with fork(): the
// environment bootstrap, who may attach (one process per rank, one job per
// segment, this user only), segments left by crashed runs, and set-ups that
// fail without leaving anything in /dev/shm.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/shm.hpp>

#include "process_check.hpp"
#include "host_check.hpp"
#include "shm_check.hpp"

using namespace ringtree;
using namespace std::chrono_literals;
using rt_test::run_processes;

namespace {

using rt_test::exited_ok;
using rt_test::has;
using rt_test::unique_name;

}  // namespace

TEST_CASE("shm: a segment left by a crashed run does not break a new one") {
  const std::string name = unique_name("stale");
  // A crashed creator: a process that made the segment and died without unlinking it.
  auto crashed = run_processes(1, [&](int, FILE*) {
    new shm_transport(name, 0, 2, shm_options{.timeout = 0.2s});  // waits for rank 1, who never comes
    return 0;
  });
  CHECK_FALSE(exited_ok(crashed[0]));  // it timed out...
  int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) {  // ...and unlinked on the way out; make a stale one by hand then
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, nullptr, 0);
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, sizeof(detail::shm_header)) == 0);
    auto* h = static_cast<detail::shm_header*>(mmap(nullptr, sizeof(detail::shm_header), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    h->magic = detail::shm_magic;
    h->creator_pid = dead;
    munmap(h, sizeof(detail::shm_header));
  }
  close(fd);
  REQUIRE(shm_open(name.c_str(), O_RDONLY, 0) >= 0);  // the stale segment is there
  auto res = run_processes(2, [&](int rank, FILE* out) {
    shm_transport t(name, rank, 2, shm_options{.timeout = rt_test::scaled(10s)});
    communicator comm(t);
    std::vector<int> v(3, rank + 1);
    comm.allreduce(std::span<int>(v));
    std::fprintf(out, "%d", v[0]);
    return v[0] == 3 ? 0 : 1;
  });
  for (auto& o : res) CHECK_MESSAGE(exited_ok(o), o.text);
}

TEST_CASE("shm: the segment is created 0600 and another user cannot open it") {
  const std::string name = unique_name("perm");
  rt_test::shared_count looked;  // rank 1 has checked the segment
  // rank 0 alone creates the segment and waits for a rank 1 that never
  // comes, until the checks below are done (then it leaves the segment
  // behind, and the test removes it)
  auto res = run_processes(2, [&](int rank, FILE* out) {
    if (rank == 0) {
      std::thread([&] {
        try {
          shm_transport t(name, 0, 2, shm_options{.timeout = rt_test::scaled(4s)});
        } catch (const error&) {
        }
      }).detach();
      looked.sleep_until(1, rt_test::scaled(4s));
      std::_Exit(0);
    }
    const rt_test::shared_count::add_on_exit counted{looked};
    int fd = -1;  // wait for rank 0 to create it (a loaded machine may take a while)
    for (const auto until = std::chrono::steady_clock::now() + rt_test::scaled(3s); fd < 0 && std::chrono::steady_clock::now() < until;) {
      std::this_thread::sleep_for(10ms);
      fd = shm_open(name.c_str(), O_RDONLY, 0);
    }
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0) { std::fprintf(out, "segment not found"); return 4; }
    close(fd);
    if ((st.st_mode & 0777) != 0600) { std::fprintf(out, "mode %o", st.st_mode & 0777); return 5; }
    if (geteuid() == 0) {  // as root, become nobody and try to read it
      if (setgid(65534) != 0 || setuid(65534) != 0) { std::fprintf(out, "cannot drop privileges"); return 6; }
      const int other = shm_open(name.c_str(), O_RDONLY, 0);
      if (other >= 0) { std::fprintf(out, "another user opened it"); return 7; }
      std::fprintf(out, "refused: %s", std::strerror(errno));
    }
    return 0;
  });
  shm_unlink(name.c_str());
  CHECK_MESSAGE(exited_ok(res[1]), res[1].text);
  if (geteuid() == 0) CHECK(has(res[1].text, "Permission denied"));
}

TEST_CASE("shm: bad bootstrap values raise clear errors") {
  unsetenv("RINGTREE_SHM_NAME");
  CHECK_THROWS_WITH_AS(shm_transport::from_env(), doctest::Contains("RINGTREE_SHM_NAME is not set"), error);
  setenv("RINGTREE_SHM_NAME", "/ringtree-x", 1);
  setenv("RINGTREE_RANK", "two", 1);
  setenv("RINGTREE_SIZE", "3", 1);
  CHECK_THROWS_WITH_AS(shm_transport::from_env(), doctest::Contains("RINGTREE_RANK: expected a whole number from 0 to 1048576, got 'two'"), error);
  unsetenv("RINGTREE_SHM_NAME");
  unsetenv("RINGTREE_RANK");
  unsetenv("RINGTREE_SIZE");
  CHECK_THROWS_WITH_AS(shm_transport("no-slash", 0, 1), doctest::Contains("must be '/' followed by"), error);
  CHECK_THROWS_WITH_AS(shm_transport("/ringtree-y", 3, 2), doctest::Contains("rank 3 and size 2 do not fit"), error);
}


namespace {

// A segment left by a crashed run: its creator (rank 0 of 2) made it, then
// was killed while it waited for rank 1, so the name was never unlinked.
void make_crashed_segment(const std::string& name) {
  const pid_t pid = fork();
  if (pid == 0) {
    try {
      shm_transport t(name, 0, 2, shm_options{.timeout = rt_test::scaled(30s)});
    } catch (...) {
    }
    _exit(0);
  }
  for (int i = 0; i < 500; ++i) {  // until the segment is there and ready
    const int fd = shm_open(name.c_str(), O_RDONLY, 0);
    if (fd >= 0) {
      auto* h = static_cast<detail::shm_header*>(mmap(nullptr, sizeof(detail::shm_header), PROT_READ, MAP_SHARED, fd, 0));
      close(fd);
      const bool ready = h != MAP_FAILED && h->ready.load() == 1;
      if (h != MAP_FAILED) munmap(h, sizeof(detail::shm_header));
      if (ready) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// One rank's allreduce of (base + rank): "<sum>" or the error's text.
int sum_job(const std::string& name, int rank, int size, int base, std::chrono::duration<double> timeout, FILE* out) {
  try {
    shm_transport t(name, rank, size, shm_options{.timeout = timeout});
    communicator comm(t);
    std::vector<int> v(5, base + rank);
    comm.allreduce(std::span<int>(v));
    std::fprintf(out, "%d", v[0]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(out, "%s", e.what());
    return 3;
  }
}
int sum_of(int base, int size) { return size * base + size * (size - 1) / 2; }

}  // namespace

TEST_CASE("shm: a segment left by a crashed run is replaced even when rank 1 comes first") {
  const std::string name = unique_name("stale-first");
  make_crashed_segment(name);
  REQUIRE(shm_open(name.c_str(), O_RDONLY, 0) >= 0);  // the stale, ready segment is there
  auto res = run_processes(2, [&](int rank, FILE* out) {
    if (rank == 0) std::this_thread::sleep_for(rt_test::scaled(300ms));  // rank 1 finds the stale segment first
    return sum_job(name, rank, 2, 1, rt_test::scaled(10s), out);
  });
  for (auto& o : res) {
    CHECK_MESSAGE(exited_ok(o), o.text);
    CHECK(o.text == std::to_string(sum_of(1, 2)));
  }
  CHECK(shm_open(name.c_str(), O_RDONLY, 0) < 0);
}

TEST_CASE("shm: a second process with the same rank gets an error naming the holder; the job goes on") {
  const std::string name = unique_name("dup");
  // processes: rank 0, rank 1, rank 1 again, rank 0 again (late), rank 2 (late: the
  // segment stays open to attachers until it comes)
  const int role[] = {0, 1, 1, 0, 2};
  auto res = run_processes(5, [&](int i, FILE* out) {
    if (i == 3) std::this_thread::sleep_for(rt_test::scaled(300ms));
    if (i == 4) std::this_thread::sleep_for(rt_test::scaled(1s));
    return sum_job(name, role[i], 3, 1, rt_test::scaled(5s), out);
  });
  int ok = 0, held1 = 0;
  for (int i : {0, 1, 2, 4}) {
    CAPTURE(i);
    if (exited_ok(res[i])) {
      ++ok;
      CHECK(res[i].text == std::to_string(sum_of(1, 3)));
    } else {
      CHECK_MESSAGE(has(res[i].text, "rank 1 of " + name + " is already held by pid"), res[i].text);
      ++held1;
    }
  }
  CHECK(ok == 3);
  CHECK(held1 == 1);
  CHECK_FALSE(exited_ok(res[3]));
  CHECK_MESSAGE(has(res[3].text, "rank 0 of " + name + " is already held by pid"), res[3].text);
  CHECK(shm_open(name.c_str(), O_RDONLY, 0) < 0);
}

TEST_CASE("shm: a process of another job with the same segment name is refused") {
  const std::string name = unique_name("foreign");
  // Job A: 3 ranks, rank 2 late. The foreigner is started by a launcher of
  // its own (another parent): job B's rank 1.
  auto res = run_processes(4, [&](int i, FILE* out) {
    if (i == 3) {  // the other job's launcher
      std::this_thread::sleep_for(rt_test::scaled(200ms));
      auto inner = run_processes(1, [&](int, FILE* o) { return sum_job(name, 1, 3, 100, rt_test::scaled(3s), o); });
      std::fprintf(out, "%s", inner[0].text.c_str());
      return exited_ok(inner[0]) ? 0 : 3;
    }
    if (i == 2) std::this_thread::sleep_for(rt_test::scaled(1s));
    return sum_job(name, i, 3, 1, rt_test::scaled(5s), out);
  });
  for (int i = 0; i < 3; ++i) {
    CHECK_MESSAGE(exited_ok(res[i]), res[i].text);
    CHECK(res[i].text == std::to_string(sum_of(1, 3)));
  }
  CHECK_FALSE(exited_ok(res[3]));
  CHECK_MESSAGE(has(res[3].text, "belongs to another job"), res[3].text);
  // RINGTREE_SHM_JOB is the identity when set: different values never join
  const std::string name2 = unique_name("foreign-env");
  auto env = run_processes(2, [&](int rank, FILE* out) {
    setenv("RINGTREE_SHM_JOB", rank == 0 ? "job-a" : "job-b", 1);
    return sum_job(name2, rank, 2, 1, 1s, out);
  });
  CHECK_FALSE(exited_ok(env[1]));
  CHECK_MESSAGE(has(env[1].text, "belongs to another job (made by pid"), env[1].text);
  CHECK_MESSAGE(has(env[1].text, "RINGTREE_SHM_JOB=job-a"), env[1].text);
}

TEST_CASE("shm: two jobs started at once with the same segment name never return a mixed result") {
  const std::string name = unique_name("twojobs");
  int good = 0, raised = 0;
  for (int rep = 0; rep < 6; ++rep) {
    CAPTURE(rep);
    // two launchers (two parents), each starting its 2 ranks with random delays
    auto jobs = run_processes(2, [&](int job, FILE* out) {
      auto ranks = run_processes(2, [&](int rank, FILE* o) {
        std::this_thread::sleep_for(std::chrono::milliseconds((getpid() * 37 + rank * 11) % 40));
        return sum_job(name, rank, 2, job == 0 ? 1 : 101, 1s, o);
      });
      for (auto& r : ranks) std::fprintf(out, "%d %s\n", exited_ok(r) ? 0 : 1, r.text.c_str());
      return 0;
    });
    for (int job = 0; job < 2; ++job) {
      const std::string want = std::to_string(sum_of(job == 0 ? 1 : 101, 2));
      std::size_t at = 0;
      for (std::size_t nl; (nl = jobs[job].text.find('\n', at)) != std::string::npos; at = nl + 1) {
        const std::string line = jobs[job].text.substr(at, nl - at);
        if (line.rfind("0 ", 0) == 0) {
          CHECK_MESSAGE(line.substr(2) == want, "job ", job, " returned ", line.substr(2), " instead of ", want);
          ++good;
        } else {
          ++raised;
        }
      }
    }
    shm_unlink(name.c_str());  // a rank that timed out as creator has removed it already; this is a no-op then
  }
  MESSAGE(good, " ranks returned their own job's sum, ", raised, " raised");
}

TEST_CASE("shm: a failed set-up leaves nothing in /dev/shm") {
  const std::string name = unique_name("setup");
  // Rank 0 of a segment, in a process of its own after `limit` ran: its error.
  auto create = [&](std::function<void()> limit, int size, shm_options opt) {
    return run_processes(1, [&](int, FILE* out) {
      limit();
      try {
        shm_transport t(name, 0, size, opt);
      } catch (const error& e) {
        std::fprintf(out, "%s", e.what());
        return 3;
      }
      return 0;
    })[0].text;
  };
  // ftruncate fails: a file size limit below the segment's size
  const std::string small = create([] {
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{4096, 4096};
    setrlimit(RLIMIT_FSIZE, &lim);
  }, 2, {});
  CHECK_MESSAGE(has(small, "cannot size " + name), small);
  CHECK(shm_open(name.c_str(), O_RDONLY, 0) < 0);
  // mmap fails: a segment larger than the address space (8 ranks, 4096 slots of 1 GiB per pair)
  const std::string huge = create([] {}, 8, shm_options{.slots = 4096, .slot_bytes = std::size_t{1} << 30});
  CHECK_MESSAGE(has(huge, "cannot map " + name), huge);
  CHECK(shm_open(name.c_str(), O_RDONLY, 0) < 0);
}

