// The network transport (UCX) and the bootstraps without MPI, between
// real processes started with fork() on this host, over TCP (UCX_TLS=tcp:
// UCX would otherwise take shared memory between processes of one host).
// Across emulated hosts: tests/net/hosts_*.sh.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/net.hpp>
#include <ringtree/transport/net_cluster.hpp>
#include <ringtree/transport/root_bootstrap.hpp>

#include "tools/collective_check.hpp"
#include "host_check.hpp"
#include "process_check.hpp"
#include "shm_check.hpp"
#include "test_time.hpp"

using namespace ringtree;
using namespace std::chrono_literals;
using rt_test::exited_ok;
using rt_test::run_processes;

namespace {

// A port nobody listens on now (the kernel's pick, released at once).
int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}
std::string local_root() { return "127.0.0.1:" + std::to_string(free_port()); }

root_options quick(double seconds) {
  root_options o;
  o.timeout = rt_test::scaled(std::chrono::duration<double>(seconds));
  o.job = "test-job";
  return o;
}

// Rank `rank` of n's transport over UCX's TCP, bootstrapped at `root`.
std::unique_ptr<net_transport> tcp_transport(const std::string& root, int rank, int n, std::chrono::duration<double> timeout) {
  setenv("UCX_TLS", "tcp", 1);
  root_bootstrap b(root, rank, n, quick(20));
  net_options opt;
  opt.timeout = timeout;
  return std::make_unique<net_transport>(b, opt);
}

// Every rank's bytes: rank r sends r + 1 copies of a byte naming r and the round.
std::vector<std::byte> blob(int r, int round) {
  return std::vector<std::byte>(static_cast<std::size_t>(r + 1), static_cast<std::byte>(16 * r + round));
}

std::string texts(const std::vector<rt_test::outcome>& res) {
  std::string s;
  for (std::size_t r = 0; r < res.size(); ++r) s += detail::cat("[rank ", r, "] ", res[r].text, "\n");
  return s;
}

// Runs `call` (collectives a peer's failure must interrupt) and writes how
// it ended to `out`: 0 where it raised within a quarter of `timeout` (the
// failure noticed at once, not by the timeout), 2 where later, `none`
// where it did not raise.
template <class F>
int raises_soon(F call, std::chrono::duration<double> timeout, FILE* out, int none) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    call();
  } catch (const error& e) {
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(out, "after %.2f s: %s", took, e.what());
    return took < timeout.count() / 4 ? 0 : 2;
  }
  std::fprintf(out, "no error");
  return none;
}

}  // namespace

TEST_CASE("root_bootstrap: every rank's bytes reach every rank, round after round") {
  for (int n : {1, 2, 3, 5}) {
    CAPTURE(n);
    const std::string root = local_root();
    auto res = run_processes(n, [&](int rank, FILE* out) {
      root_bootstrap b(root, rank, n, quick(20));
      for (int round = 0; round < 3; ++round) {
        const auto mine = blob(rank, round);
        const auto all = b.allgather("round", mine);
        for (int q = 0; q < n; ++q)
          if (all[q] != blob(q, round)) {
            std::fprintf(out, "round %d: rank %d's bytes are wrong", round, q);
            return 1;
          }
      }
      return 0;
    });
    for (auto& o : res) CHECK_MESSAGE(exited_ok(o), texts(res));
  }
}

TEST_CASE("root_bootstrap: strays at the port are refused and named, the job still forms") {
  const std::string root = local_root();
  const int port = std::stoi(root.substr(root.find(':') + 1));
  auto res = run_processes(3, [&](int rank, FILE* out) {
    if (rank == 2) {
      // Not a rank: first a connection that speaks no ringtree, then one
      // that claims rank 1 of another job; then the real rank 1 joins.
      std::this_thread::sleep_for(200ms);
      for (int i = 0; i < 2; ++i) {
        const int s = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        for (int k = 0; k < 100 && ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0; ++k) std::this_thread::sleep_for(20ms);
        if (i == 0) {
          const char junk[] = "GET / HTTP/1.0\r\n\r\n";
          (void)::send(s, junk, sizeof junk, MSG_NOSIGNAL);
        } else {
          struct {
            char g[8];
            std::uint32_t size, rank, job_bytes;
          } h{{'R', 'T', 'R', 'O', 'O', 'T', '1', '\n'}, 2, 1, 5};
          (void)::send(s, &h, sizeof h, MSG_NOSIGNAL);
          (void)::send(s, "other", 5, MSG_NOSIGNAL);
        }
        char answer[4];
        (void)::recv(s, answer, sizeof answer, 0);  // the root closes it
        ::close(s);
      }
      std::fprintf(out, "strays done");
      return 0;
    }
    if (rank == 1) std::this_thread::sleep_for(600ms);
    root_bootstrap b(root, rank, 2, quick(20));
    const auto all = b.allgather("hello", blob(rank, 0));
    return all[0] == blob(0, 0) && all[1] == blob(1, 0) ? 0 : 1;
  });
  for (auto& o : res) CHECK_MESSAGE(exited_ok(o), texts(res));

  // With rank 1 missing, the timeout names the refused strangers.
  const std::string root2 = local_root();
  const int port2 = std::stoi(root2.substr(root2.find(':') + 1));
  auto res2 = run_processes(2, [&](int rank, FILE* out) {
    if (rank == 1) {
      std::this_thread::sleep_for(100ms);
      const int s = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<std::uint16_t>(port2));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      for (int k = 0; k < 100 && ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0; ++k) std::this_thread::sleep_for(20ms);
      (void)::send(s, "xxxxxxxxxxxxxxxxxxxxxxxx", 20, MSG_NOSIGNAL);
      char answer[4];
      (void)::recv(s, answer, sizeof answer, 0);
      ::close(s);
      return 0;
    }
    try {
      root_bootstrap b(root2, 0, 2, quick(1.5));
    } catch (const timeout_error& e) {
      std::fprintf(out, "%s", e.what());
      return e.peer() == 1 ? 0 : 1;
    }
    return 2;
  });
  CHECK_MESSAGE(exited_ok(res2[0]), texts(res2));
  CHECK_MESSAGE(rt_test::has(res2[0].text, "for rank(s) 1 of 2 to connect"), res2[0].text);
  CHECK_MESSAGE(rt_test::has(res2[0].text, "refused 127.0.0.1:"), res2[0].text);
  CHECK_MESSAGE(rt_test::has(res2[0].text, "not a ringtree rank"), res2[0].text);
}

TEST_CASE("root_bootstrap: a root that never listens is a timeout naming its address; bad addresses are errors") {
  const std::string root = local_root();
  try {
    root_bootstrap b(root, 1, 2, quick(0.5));
    FAIL("no error");
  } catch (const timeout_error& e) {
    CHECK(e.peer() == 0);
    CHECK_MESSAGE(rt_test::has(e.what(), "cannot reach the root (rank 0) at " + root), e.what());
    CHECK_MESSAGE(rt_test::has(e.what(), "Connection refused"), e.what());
  }
  for (const char* bad : {"localhost", "localhost:0", "localhost:99999", ":80", "localhost:8x"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(root_bootstrap(bad, 0, 2, quick(0.5)), doctest::Contains("expected host:port"), error);
  }
  CHECK_THROWS_WITH_AS(root_bootstrap("127.0.0.1:1", 2, 2, quick(0.5)), doctest::Contains("rank 2 of 2 ranks"), error);
  CHECK_THROWS_WITH_AS(root_bootstrap("no-such-host.invalid:80", 1, 2, quick(0.5)), doctest::Contains("cannot resolve"), error);
}

TEST_CASE("file_bootstrap: rounds through a directory; a missing rank and a different step are named") {
  auto fresh_dir = [] {
    char d[] = "/tmp/ringtree-test-files-XXXXXX";
    REQUIRE(::mkdtemp(d) != nullptr);
    return std::string(d);
  };
  std::string dir = fresh_dir();
  auto res = run_processes(3, [&](int rank, FILE* out) {
    file_bootstrap b(dir, rank, 3, rt_test::scaled(20s));
    for (int round = 0; round < 3; ++round) {
      const auto all = b.allgather("round", blob(rank, round));
      for (int q = 0; q < 3; ++q)
        if (all[q] != blob(q, round)) {
          std::fprintf(out, "round %d: rank %d's bytes are wrong", round, q);
          return 1;
        }
    }
    return 0;
  });
  for (auto& o : res) CHECK_MESSAGE(exited_ok(o), texts(res));
  std::filesystem::remove_all(dir);

  // rank 2 never comes; then ranks 0 and 1 in different steps
  dir = fresh_dir();
  auto res2 = run_processes(2, [&](int rank, FILE* out) {
    file_bootstrap b(dir, rank, 3, std::chrono::duration<double>(0.5));
    try {
      (void)b.allgather("hello", blob(rank, 0));
    } catch (const timeout_error& e) {
      std::fprintf(out, "%s", e.what());
      return e.peer() == 2 ? 0 : 1;
    }
    return 2;
  });
  for (auto& o : res2) {
    CHECK_MESSAGE(exited_ok(o), texts(res2));
    CHECK_MESSAGE(rt_test::has(o.text, "for rank(s) 2 to publish 'hello'"), o.text);
  }
  std::filesystem::remove_all(dir);
  dir = fresh_dir();
  auto res3 = run_processes(2, [&](int rank, FILE* out) {
    file_bootstrap b(dir, rank, 2, rt_test::scaled(20s));
    try {
      (void)b.allgather(rank == 0 ? "addresses" : "hosts", blob(rank, 0));
    } catch (const error& e) {
      std::fprintf(out, "%s", e.what());
      return 0;
    }
    return 2;
  });
  for (auto& o : res3) CHECK_MESSAGE(exited_ok(o), texts(res3));
  CHECK_MESSAGE(rt_test::has(res3[0].text, "rank 1 published 'hosts' where this rank published 'addresses'"), texts(res3));
  std::filesystem::remove_all(dir);
}

TEST_CASE("net: every collective between forked processes over UCX's TCP, bootstrapped at a root") {
  for (int n : {1, 2, 3, 4}) {
    CAPTURE(n);
    const std::string root = local_root();
    auto res = run_processes(n, [&](int rank, FILE* out) {
      auto tp = tcp_transport(root, rank, n, rt_test::scaled(30s));  // a hang guard
      net_transport& t = *tp;
      communicator comm(t, communicator_options{.checked = true});
      std::string first;
      for (const auto& c : rt_test::all_cases(n, {0, 1, 5, 1000, 70000}))
        for (auto f : {rt_test::check<float>(comm, c), rt_test::check<std::int32_t>(comm, c)})
          if (first.empty()) first = f;
      if (auto f = rt_test::check_alltoallv(comm); first.empty()) first = f;
      if (n > 1) {  // a split: the halves run on their own numbers
        auto half = comm.split(rank % 2, rank);
        for (const auto& c : rt_test::all_cases(half.size(), {3, 1000}))
          if (auto f = rt_test::check<double>(half, c); first.empty()) first = f;
      }
      std::fprintf(out, "%s", first.c_str());
      return first.empty() ? 0 : 1;
    });
    for (auto& o : res) CHECK_MESSAGE(exited_ok(o), texts(res));
  }
}

TEST_CASE("net: a peer that dies is named by every survivor at once, not after the timeout") {
  const std::string root = local_root();
  const auto timeout = rt_test::scaled(60s);
  auto res = run_processes(3, [&](int rank, FILE* out) {
    auto tp = tcp_transport(root, rank, 3, timeout);
    net_transport& t = *tp;
    communicator comm(t);
    std::vector<float> v(1000, 1.0f);
    if (rank == 2) {  // (its peers may still be in their first call when it dies)
      comm.allreduce(std::span(v));
      ::kill(::getpid(), SIGKILL);
    }
    return raises_soon([&] { for (int i = 0; i < 101; ++i) comm.allreduce(std::span(v)); }, timeout, out, 1);
  });
  CHECK(WIFSIGNALED(res[2].status));
  for (int r : {0, 1}) {
    CHECK_MESSAGE(exited_ok(res[r]), texts(res));
    CHECK_MESSAGE(rt_test::has(res[r].text, "failed or left"), texts(res));
  }
  // At least one survivor names the dead rank itself (the other may name
  // the survivor that gave up first and closed its connections).
  CHECK_MESSAGE((rt_test::has(res[0].text, "rank 2 (pid") || rt_test::has(res[1].text, "rank 2 (pid")), texts(res));
}

// A rank that waits long must leave its core to the ranks beside it and
// to the kernel's TCP, which moves the bytes it waits for (2 cores, 4
// ranks: a yielding loop took what the link needed). CPU time, not wall
// time: a sleeping process uses little of it however busy the machine.
TEST_CASE("net: a rank that waits long sleeps on UCX's events: its core stays free, and the message still wakes it") {
  const std::string root = local_root();
  auto res = run_processes(2, [&](int rank, FILE* out) {
    auto tp = tcp_transport(root, rank, 2, rt_test::scaled(30s));
    net_transport& t = *tp;
    std::vector<std::byte> buf(1000, std::byte{7});
    if (rank == 1) {
      std::this_thread::sleep_for(1s);
      auto r = t.isend(0, std::span<const std::byte>(buf));
      t.wait(r);
      return 0;
    }
    std::fill(buf.begin(), buf.end(), std::byte{0});
    auto cpu_now = [] {
      timespec ts{};
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    };
    const double cpu0 = cpu_now();
    const auto t0 = std::chrono::steady_clock::now();
    auto r = t.irecv(1, std::span(buf));
    t.wait(r);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = cpu_now() - cpu0;
    std::fprintf(out, "waited %.2f s, using %.3f s of CPU", wall, cpu);
    if (std::any_of(buf.begin(), buf.end(), [](std::byte x) { return x != std::byte{7}; })) return 1;
    return wall > 0.5 && cpu < 0.1 * wall ? 0 : 2;
  });
  CHECK_MESSAGE(exited_ok(res[1]), texts(res));
  CHECK_MESSAGE(exited_ok(res[0]), texts(res));  // 1: wrong bytes; 2: the wait was short or took a tenth of a core
}

TEST_CASE("net: a message of another length than posted is refused, naming the peer") {
  const std::string root = local_root();
  auto res = run_processes(2, [&](int rank, FILE* out) {
    auto tp = tcp_transport(root, rank, 2, rt_test::scaled(20s));
    net_transport& t = *tp;
    std::vector<std::byte> buf(rank == 0 ? 100 : 64);
    try {
      for (std::size_t len : {std::size_t{64}, std::size_t{100}}) {
        if (rank == 0) {
          auto r = t.isend(1, std::span<const std::byte>(buf).first(len == 64 ? 50 : 100));
          t.wait(r);
        } else {
          auto r = t.irecv(0, std::span(buf));
          t.wait(r);
        }
      }
    } catch (const error& e) {
      std::fprintf(out, "%s", e.what());
      return rank == 1 ? 0 : 1;
    }
    return rank == 0 ? 0 : 1;
  });
  CHECK_MESSAGE(exited_ok(res[1]), texts(res));
  CHECK_MESSAGE(rt_test::has(res[1].text, "rank 0 sent 50 bytes where 64 were expected"), texts(res));
}

TEST_CASE("net_cluster: hosts found by name, shared memory within, UCX between; every row incl. the hierarchical ones") {
  // Emulated hosts: each process takes a UTS namespace of its own and the
  // host name of its layout entry (root may; elsewhere the case is skipped).
  struct layout {
    std::vector<const char*> hosts;
    bool shared_memory;
  };
  for (const layout& l : {layout{{"a", "a", "b", "b"}, true}, layout{{"a", "b", "c", "c"}, true}, layout{{"a", "a", "a"}, true},
                          layout{{"a", "a", "b"}, false}}) {
    const int n = static_cast<int>(l.hosts.size());
    std::string shape;
    for (auto h : l.hosts) shape += h;
    CAPTURE(shape);
    CAPTURE(l.shared_memory);
    const std::string root = local_root();
    const auto before = rt_test::shm_entries();
    auto res = run_processes(n, [&](int rank, FILE* out) {
      if (::unshare(CLONE_NEWUTS) != 0 || ::sethostname(l.hosts[rank], std::strlen(l.hosts[rank])) != 0) {
        std::fprintf(out, "skip: no UTS namespace (%s)", std::strerror(errno));
        return 77;
      }
      setenv("UCX_TLS", "tcp", 1);
      root_bootstrap b(root, rank, n, quick(20));
      net_cluster_options opt;
      opt.timeout = rt_test::scaled(30s);
      opt.shared_memory = l.shared_memory;
      net_cluster t(b, opt);
      communicator comm(t, communicator_options{.checked = true});
      const int hosts = t.layout().hosts();
      const int expected = l.shared_memory ? static_cast<int>(std::set<std::string>(l.hosts.begin(), l.hosts.end()).size()) : n;
      if (hosts != expected) {
        std::fprintf(out, "%d hosts found, %d expected", hosts, expected);
        return 1;
      }
      std::string first;
      // (sizes past the slots and the pipeline chunks: the flat case above runs them)
      for (const auto& c : rt_test::all_cases(n, {0, 1, 5, 1000}, 0, false, false, hosts))
        for (auto f : {rt_test::check<float>(comm, c), rt_test::check<std::int32_t>(comm, c)})
          if (first.empty()) first = f;
      auto half = comm.split(rank % 2, rank);
      for (const auto& c : rt_test::all_cases(half.size(), {3, 1000}))
        if (auto f = rt_test::check<double>(half, c); first.empty()) first = f;
      std::fprintf(out, "%s", first.c_str());
      return first.empty() ? 0 : 1;
    });
    if (WIFEXITED(res[0].status) && WEXITSTATUS(res[0].status) == 77) {
      MESSAGE("skipped: ", res[0].text);
      return;
    }
    for (auto& o : res) CHECK_MESSAGE(exited_ok(o), texts(res));
    const auto left = rt_test::left_behind(before);
    CHECK_MESSAGE(left.empty(), "left in /dev/shm: ", left.size(), " entries, the first ", left.empty() ? "" : *left.begin());
  }
}

TEST_CASE("net: abort() on one rank makes every peer's wait raise at once, naming it") {
  const std::string root = local_root();
  const auto timeout = rt_test::scaled(20s);
  auto res = run_processes(3, [&](int rank, FILE* out) {
    auto tp = tcp_transport(root, rank, 3, timeout);
    net_transport& t = *tp;
    communicator comm(t);
    std::vector<float> v(100, 1.0f);
    if (rank != 1)  // (rank 1's note may end their first call already: rank 1 can finish it first)
      return raises_soon([&] { for (int i = 0; i < 2; ++i) comm.allreduce(std::span(v)); }, timeout, out, 3);
    comm.allreduce(std::span(v));  // the connections are up
    t.abort();
    try {
      comm.allreduce(std::span(v));
    } catch (const error& e) {
      std::fprintf(out, "%s", e.what());
      // alive (its transport too) past the time the peers have to raise
      // in: they learn from abort(), not from this process's exit
      std::this_thread::sleep_for(std::chrono::duration<double>(timeout.count() / 4 + 1));
      return rt_test::has(e.what(), "called abort()") ? 0 : 1;
    }
    return 2;
  });
  for (auto& o : res) CHECK_MESSAGE(exited_ok(o), texts(res));
  CHECK_MESSAGE((rt_test::has(res[0].text, "rank 1 (pid") || rt_test::has(res[2].text, "rank 1 (pid")), texts(res));
  // by its note (cause, not timing: UCX's own keepalive names it too, as
  // "Endpoint timeout", about 6 s later, inside a loaded machine's bound)
  CHECK_MESSAGE((rt_test::has(res[0].text, "it failed: rank 1 called abort()") ||
                 rt_test::has(res[2].text, "it failed: rank 1 called abort()")), texts(res));
}
