// shm_transport between real processes, started with fork(): the protocol
// (every collective, slot policies' cards, mismatched messages, symmetric
// buffers). Starting and attaching (bootstrap, stale segments, permissions,
// other jobs): test_shm_bootstrap.cpp. Peers that die, stall or leave:
// test_shm_peers.cpp. The collectives over shm are also in the MPI-launched
// suite.
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
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/shm.hpp>

#include "tools/collective_check.hpp"
#include "process_check.hpp"
#include "host_check.hpp"
#include "shm_check.hpp"

using namespace ringtree;
using namespace std::chrono_literals;
using rt_test::run_processes;

namespace {

using rt_test::exited_ok;
using rt_test::has;
using rt_test::shm_entries;
using rt_test::unique_name;

}  // namespace

// Two suites side by side (two CI jobs on one runner) must not call each
// other's live segments leaks: the check skips a test segment whose
// creating process still runs, and reports this process's own.
TEST_CASE("left_behind: a live test process's segment is not this test's leak; this process's and a dead one's are") {
  const auto before = rt_test::shm_entries();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  const std::string theirs = "/ringtree-test-beside-" + std::to_string(child), mine = unique_name("beside");
  for (const auto& nm : {theirs, mine}) {
    const int fd = shm_open(nm.c_str(), O_CREAT | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    ::close(fd);
  }
  auto left = rt_test::left_behind(before);
  CHECK(left.count(theirs.substr(1)) == 0);
  CHECK(left.count(mine.substr(1)) == 1);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  CHECK(rt_test::left_behind(before).count(theirs.substr(1)) == 1);  // its creator is gone: a leak
  shm_unlink(theirs.c_str());
  shm_unlink(mine.c_str());
}

TEST_CASE("shm: every collective between forked processes, bootstrapped from the environment") {
  for (int n : {1, 2, 3, 4}) {
    CAPTURE(n);
    const std::string name = unique_name("env");
    auto res = run_processes(n, [&](int rank, FILE* out) {
      setenv("RINGTREE_SHM_NAME", name.c_str(), 1);
      setenv("RINGTREE_RANK", std::to_string(rank).c_str(), 1);
      setenv("RINGTREE_SIZE", std::to_string(n).c_str(), 1);
      // The built-in cost model, unless the cache has one: calibrating
      // through these slots (1024 hand-offs for each 256 KiB message, and on
      // a loaded machine each may wait out a scheduler slice) took minutes
      // beside two busy loops per core while the other ranks waited, past
      // their timeout. Calibration is test_model.cpp's.
      setenv("RINGTREE_CALIBRATE", "0", 1);
      shm_options opt;
      opt.slot_bytes = 256;  // many chunks per message even at small counts
      opt.slots = 3;
      opt.timeout = rt_test::scaled(20s);  // a hang guard
      auto t = shm_transport::from_env(opt);
      communicator comm(t, communicator_options{.checked = true});
      std::string first;
      for (const auto& c : rt_test::all_cases(n, {0, 1, 5, 1000}))
        for (auto f : {rt_test::check<float>(comm, c), rt_test::check<std::int32_t>(comm, c)})
          if (first.empty()) first = f;
      if (auto f = rt_test::check_alltoallv(comm); first.empty()) first = f;
      std::fprintf(out, "%s", first.c_str());
      return first.empty() ? 0 : 1;
    });
    for (auto& o : res) {
      CHECK_MESSAGE(exited_ok(o), o.text);
    }
    CHECK(shm_open(name.c_str(), O_RDONLY, 0) < 0);  // unlinked once everyone attached
  }
}

namespace {
// A slot policy that, like the CUDA one, publishes a card (here: a number
// standing for an IPC handle) and reads every other rank's before use.
struct card_slots : detail::host_slots {
  static constexpr bool maps_in_calls = false;  // as the CUDA policy: control memory only from allocate
  void setup(const context& c) {
    const std::int64_t mine = 1000 + c.rank;
    std::memcpy(c.policy_data(c.rank).data(), &mine, sizeof mine);
    c.publish();
    c.wait_all_published();
    for (int r = 0; r < c.size; ++r) {
      std::int64_t theirs = 0;
      std::memcpy(&theirs, c.policy_data(r).data(), sizeof theirs);
      if (theirs != 1000 + r) throw error("card_slots", c.rank, detail::cat("rank ", r, "'s card says ", theirs));
    }
  }
};
}  // namespace

TEST_CASE("shm: slot policies exchange their cards (the CUDA IPC handle path) before the first message") {
  const std::string name = unique_name("card");
  auto res = run_processes(4, [&](int rank, FILE* out) {
    slot_transport<card_slots> t(name, rank, 4, shm_options{.timeout = rt_test::scaled(10s)});
    communicator comm(t);
    std::vector<int> v(100, rank);
    comm.allreduce(std::span<int>(v));
    std::fprintf(out, "%d", v[99]);
    return v[99] == 6 ? 0 : 1;
  });
  for (auto& o : res) CHECK_MESSAGE(exited_ok(o), o.text);
}

TEST_CASE("shm: a message of another length than the receiver posted is refused, not copied") {
  const std::string name = unique_name("len");
  auto res = run_processes(2, [&](int rank, FILE* out) {
    shm_transport t(name, rank, 2, shm_options{.timeout = rt_test::scaled(3s)});
    std::vector<std::byte> buf(rank == 0 ? 100 : 60);
    try {
      if (rank == 0) {
        auto s = t.isend(1, buf);
        t.wait(s);
      } else {
        std::vector<std::byte> next(40);
        auto r = t.irecv(0, buf);
        auto r2 = t.irecv(0, next);  // posted behind it: must not complete as if received
        try {
          t.wait(r);
        } catch (const error& e) {
          std::fprintf(out, "%s\n", e.what());
        }
        t.wait(r2);
      }
    } catch (const error& e) {
      std::fprintf(out, "%s", e.what());
      return 7;
    }
    return 0;
  });
  CHECK_MESSAGE(WEXITSTATUS(res[1].status) == 7, res[1].text);
  CHECK(has(res[1].text, "rank 0 sent a message of 100 bytes to rank 1, which expected 60"));
  // the receive behind it raises too: the transport is broken after the refusal
  CHECK(has(res[1].text, "failed earlier and cannot be used again"));
}

// What communicator::send promises for a send whose type or count the
// receiver does not expect: the receive raises, naming the sender and
// both; the send, which shared memory buffers, returns (it cannot know).
TEST_CASE("shm: point to point of another count or type: the receive raises naming both, the send returns") {
  for (bool other_type : {false, true}) {
    CAPTURE(other_type);
    const std::string name = unique_name("p2p");
    auto res = run_processes(2, [&](int rank, FILE* out) {
      shm_transport t(name, rank, 2, shm_options{.timeout = rt_test::scaled(30s)});
      communicator comm(t);
      try {
        if (rank == 0) {
          comm.send(std::vector<std::int32_t>(4, 1), 1, 3);
          return 0;
        }
        if (other_type) {
          std::vector<float> w(4);
          comm.recv(w, 0, 3);
        } else {
          std::vector<std::int32_t> w(5);
          comm.recv(w, 0, 3);
        }
      } catch (const error& e) {
        std::fprintf(out, "%s", e.what());
        return 7;
      }
      return 0;
    });
    CHECK_MESSAGE(exited_ok(res[0]), res[0].text);
    CHECK_MESSAGE((WIFEXITED(res[1].status) && WEXITSTATUS(res[1].status) == 7), res[1].text);
    CHECK_MESSAGE(has(res[1].text, other_type ? "rank 0 sent 4 elements of int32 with tag 3, but this rank receives 4 elements of float"
                                              : "rank 0 sent 4 elements of int32 with tag 3, but this rank receives 5 elements of int32"),
                  res[1].text);
  }
}

TEST_CASE("shm: symmetric buffers between forked processes: every direct algorithm, segments 0600 and unlinked") {
  const auto before = shm_entries();
  for (int n : {1, 2, 3, 4}) {
    CAPTURE(n);
    const std::string name = unique_name("sym");
    auto res = run_processes(n, [&](int rank, FILE* out) {
      shm_options opt;
      opt.timeout = rt_test::scaled(20s);  // a hang guard
      shm_transport t(name, rank, n, opt);
      communicator_options o;
      o.checked = true;
      o.chunks.direct_chunk_bytes = 256;  // two-shot in many steps
      communicator comm(t, o);
      std::string first;
      for (const auto& c : rt_test::symmetric_cases(n, {0, 1, 5, 1000, 3000}))
        for (auto f : {rt_test::check_symmetric<float>(comm, c), rt_test::check_symmetric<std::int32_t>(comm, c)})
          if (first.empty()) first = f;
      auto buf = comm.allocate<double>(1000);
      if (n > 1 && !buf.shared()) first += "a buffer between processes of one host is not shared; ";
      std::fprintf(out, "%s", first.c_str());
      return first.empty() ? 0 : 1;
    });
    for (auto& o : res) CHECK_MESSAGE(exited_ok(o), o.text);
  }
  for (const auto& e : rt_test::left_behind(before)) FAIL_CHECK("left behind in /dev/shm: " << e);
}
