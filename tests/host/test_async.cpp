// Asynchronous calls (communicator/work.hpp), point to point and all-to-all with
// blocks of any size. (all_cases in collective_check.hpp runs the equal-
// block all-to-all against its reference with the other collectives.)
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <numeric>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/train/grad_sync.hpp>

#include "host_check.hpp"
#include "process_check.hpp"

using namespace ringtree;
using namespace std::chrono_literals;

TEST_CASE("async: calls run in order, overlap the caller, and give the same results as synchronous ones") {
  for (int n : {1, 2, 3, 4}) {
    local_world world(n);
    world.run([n](local_transport& t) {
      communicator comm(t);
      const int r = comm.rank();
      std::vector<float> a(100000, r + 1.0f), b(33, float(r));
      std::vector<std::int64_t> c(n * 5), d(5);
      std::iota(c.begin(), c.end(), std::int64_t(r) * 1000);
      auto wa = comm.allreduce_async(a);
      auto wb = comm.allreduce_async(b, op::max);
      auto wc = comm.reduce_scatter_async(c, d);
      std::vector<int> g(n), one{r * 7};
      auto wg = comm.allgather_async(one, g);
      auto bar = comm.barrier_async();
      // waits in any order: each runs the queue up to itself
      wg.wait();
      wc.wait();
      wb.wait();
      wa.wait();
      bar.wait();
      CHECK(wa.test());
      CHECK(wa.exception() == nullptr);
      CHECK(a[99999] == float(n * (n + 1) / 2));
      CHECK(b[32] == float(n - 1));
      for (int i = 0; i < 5; ++i) {
        std::int64_t want = 0;
        for (int q = 0; q < n; ++q) want += q * 1000 + r * 5 + i;
        CHECK(d[i] == want);
      }
      for (int q = 0; q < n; ++q) CHECK(g[q] == q * 7);
      // a synchronous call after queued ones waits for them first
      std::vector<double> e(10, 1.0), f(10, 2.0);
      auto we = comm.allreduce_async(e);
      comm.allreduce(f);
      CHECK(we.test());
      CHECK(e[0] == double(n));
      CHECK(f[0] == 2.0 * n);
      // nobody waits: the progress thread completes it, and on_done runs
      std::atomic<bool> called{false};
      std::vector<int> h(4, 1);
      auto wh = comm.submit([&] { comm.allreduce(h); }, [&](std::exception_ptr ex) { called = ex == nullptr; });
      for (int spin = 0; spin < 100000 && !wh.test(); ++spin) std::this_thread::sleep_for(std::chrono::microseconds(50));
      CHECK(wh.test());
      CHECK(called.load());
      CHECK(h[3] == n);
    });
  }
}

TEST_CASE("async: an error stays with its call; later calls still run") {
  local_world world(2);
  world.run([](local_transport& t) {
    communicator comm(t);
    std::vector<float> in(4), out(5), ok(3, 1.0f);
    auto bad = comm.allreduce_async(in, out);  // sizes differ: raised before any message
    auto good = comm.allreduce_async(ok);
    good.wait();
    CHECK(ok[0] == 2.0f);
    CHECK(bad.test());
    CHECK(bad.exception() != nullptr);
    CHECK_THROWS_WITH_AS(bad.wait(), doctest::Contains("out.size() = 5 but in.size() = 4"), error);
  });
}

TEST_CASE("async: grad_sync's buckets and the caller's own calls share one progress thread") {
  local_world world(3);
  world.run([](local_transport& t) {
    communicator comm(t);
    std::vector<std::vector<float>> g = {std::vector<float>(1000), std::vector<float>(10), std::vector<float>(5000)};
    std::vector<std::span<float>> spans(g.begin(), g.end());
    grad_sync_options o;
    o.bucket_bytes = 4096;
    o.last_bucket_bytes = 64;
    grad_sync sync(comm, spans, o);
    for (int step = 0; step < 3; ++step) {
      for (auto& v : g) std::fill(v.begin(), v.end(), float(comm.rank() + step));
      for (std::size_t i = g.size(); i-- > 0;) sync.mark_ready(i);
      std::vector<int> x(2, 1);
      auto w = comm.allreduce_async(x);  // queued behind the buckets
      sync.synchronize();
      w.wait();
      CHECK(x[0] == 3);
      for (auto& v : g) CHECK(v.back() == doctest::Approx(1.0f + step));
    }
  });
}

TEST_CASE("send/recv: in order per pair, tags and counts checked, exchanges posted together never deadlock") {
  for (int n : {2, 3, 5}) {
    local_world world(n);
    world.run([n](local_transport& t) {
      communicator comm(t);
      const int r = comm.rank(), right = (r + 1) % n, left = (r + n - 1) % n;
      // a ring exchange of large messages, both sides posted before either waits
      std::vector<double> out(300000, r), got(300000, -1);
      auto s = comm.send_async(out, right, 9);
      auto q = comm.recv_async(got, left, 9);
      s.wait();
      q.wait();
      CHECK(got[299999] == double(left));
      // blocking, along a chain; empty messages too
      std::vector<std::int16_t> v(7, std::int16_t(r)), empty;
      if (r > 0) {
        comm.recv(v, r - 1, 1);
        CHECK(v[6] == std::int16_t(r - 1));
        comm.recv(empty, r - 1, 2);
      }
      v.assign(7, std::int16_t(r));
      if (r + 1 < n) {
        comm.send(v, r + 1, 1);
        comm.send(empty, r + 1, 2);
      }
      comm.barrier();
    });
  }
}

TEST_CASE("send/recv: tags matched as in MPI: a message that comes before its receive waits for it, in order per tag") {
  for (const bool async : {false, true}) {
    local_world world(3);
    world.run([async](local_transport& t) {
      communicator comm(t);
      const int r = comm.rank();
      std::vector<double> big1(300000, 1.5), big2(300000, 2.5), small(5, 7.0);
      if (r == 0) {
        // tag 1 twice (large), then tag 2; the receiver asks for tag 2 first
        comm.send(big1, 1, 1);
        comm.send(big2, 1, 1);
        comm.send(small, 1, 2);
        comm.send(small, 2, 5);
      } else if (r == 1) {
        std::vector<double> a(300000, -1), b(300000, -1), c(5, -1);
        if (async) {
          auto wc = comm.recv_async(c, 0, 2);
          auto wa = comm.recv_async(a, 0, 1);
          auto wb = comm.recv_async(b, 0, 1);
          wc.wait();
          wb.wait();
          wa.wait();
        } else {
          comm.recv(c, 0, 2);
          comm.recv(a, 0, 1);
          comm.recv(b, 0, 1);
        }
        CHECK(c == small);
        CHECK(a == big1);  // the first message of tag 1 goes to the first receive of tag 1
        CHECK(b == big2);
      } else {
        std::vector<double> c(5, -1);
        comm.recv(c, 0, 5);
        CHECK(c == small);
      }
      comm.barrier();
    });
  }
}

TEST_CASE("send/recv: from any source, with its tag; recv says who sent") {
  for (const bool async : {false, true}) {
    local_world world(4);
    world.run([async](local_transport& t) {
      communicator comm(t, {.point_to_point_only = true});
      const int r = comm.rank();
      if (r != 0) {
        std::vector<int> v(1000 * r, r);
        comm.send(std::vector<int>(3, -r), 0, 8);
        comm.send(v, 0, 7);
      } else {
        // three tag-8 messages from any source, in whatever order they come,
        // then each sender's tag-7 message (sent after its tag-8 one)
        std::vector<bool> seen(4, false);
        for (int k = 0; k < 3; ++k) {
          std::vector<int> first(3);
          int from = -1;
          if (async) comm.recv_async(first, any_source, 8, {}, &from).wait();
          else from = comm.recv(first, any_source, 8);
          REQUIRE(from >= 1);
          REQUIRE(from <= 3);
          CHECK(!seen[from]);
          seen[from] = true;
          CHECK(first == std::vector<int>(3, -from));
          std::vector<int> got(1000 * from, -1);
          CHECK(comm.recv(got, from, 7) == from);
          CHECK(got == std::vector<int>(1000 * from, from));
        }
      }
    });
  }
  // Only there: elsewhere a peer's collective messages share the stream.
  local_world world(2);
  world.run([](local_transport& t) {
    std::vector<int> v(3);
    {
      communicator comm(t);
      CHECK_THROWS_WITH_AS(comm.recv(v, any_source, 1), doctest::Contains("needs a communicator for point to point only"), error);
    }
    communicator p2p(t, {.point_to_point_only = true});
    CHECK_THROWS_WITH_AS(p2p.barrier(), doctest::Contains("barrier on rank"), error);
    CHECK_THROWS_WITH_AS(p2p.allreduce(v), doctest::Contains("for point to point only"), error);
  });
}

TEST_CASE("send/recv: from any source times out when no rank sends") {
  // Nothing is posted on any transport while no peer has a message, so the
  // receive keeps the timeout itself: silent peers raise, never hang.
  for (const bool async : {false, true}) {
    local_world world(3, std::chrono::milliseconds(200));
    std::string what;
    double waited = 0;
    rt_test::shared_count done;  // rank 0 has raised: the silent peers may leave
    world.run([&](local_transport& t) {
      communicator comm(t, {.point_to_point_only = true});
      if (comm.rank() != 0) {
        done.sleep_until(1, rt_test::scaled(std::chrono::milliseconds(1500)));
        return;
      }
      std::vector<int> v(4);
      const auto start = std::chrono::steady_clock::now();
      try {
        if (async) comm.recv_async(v, any_source, 5).wait();
        else comm.recv(v, any_source, 5);
      } catch (const timeout_error& e) {
        what = e.what();
      }
      waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      done.add();
    });
    CHECK_MESSAGE(what.find("tag 5 from any rank, the whole timeout") != std::string::npos, what);
    CHECK(waited >= 0.2);
    CHECK(waited < rt_test::scaled(std::chrono::milliseconds(1400)).count());  // raised by the timeout, not by the peers leaving
  }
}

TEST_CASE("send/recv: a wrong count or type raises; bad peers are refused before sending") {
  local_world world(2);
  std::vector<std::string> what(2);
  try {
    world.run([&](local_transport& t) {
      communicator comm(t);
      CHECK_THROWS_WITH_AS(comm.send(std::vector<int>(2), 2), doctest::Contains("peer 2 is not another rank of 2"), error);
      CHECK_THROWS_WITH_AS(comm.send(std::vector<int>(2), comm.rank()), doctest::Contains("is not another rank"), error);
      std::vector<int> v(4, 1);
      try {
        std::vector<int> w(5);
        if (comm.rank() == 0) comm.send(v, 1, 3);
        else comm.recv(w, 0, 3);
      } catch (const error& e) {
        what[comm.rank()] = e.what();
        throw;
      }
    });
  } catch (const error&) {
  }
  CHECK(rt_test::has(what[1], "rank 0 sent 4 elements of int32 with tag 3, but this rank receives 5 elements of int32 with tag 3"));
  CHECK(!what[0].empty());  // the sender learns its receiver gave up
}

TEST_CASE("alltoall: blocks of any size, against the reference; bad counts are refused") {
  for (int n : {1, 2, 3, 4}) {
    local_world world(n);
    world.run([n](local_transport& t) {
      communicator comm(t);
      const int r = comm.rank();
      // rank r sends (r + j) % 3 elements to rank j (some empty), valued 1000 r + 10 j + i
      std::vector<std::size_t> sends(n), recvs(n);
      for (int j = 0; j < n; ++j) sends[j] = (r + j) % 3, recvs[j] = (j + r) % 3;
      std::vector<std::uint16_t> in, out(std::accumulate(recvs.begin(), recvs.end(), std::size_t{0}), 9999);
      for (int j = 0; j < n; ++j)
        for (std::size_t i = 0; i < sends[j]; ++i) in.push_back(std::uint16_t(1000 * r + 10 * j + i));
      comm.alltoall(in, std::span<const std::size_t>(sends), out, std::span<const std::size_t>(recvs));
      std::size_t at = 0;
      for (int j = 0; j < n; ++j)
        for (std::size_t i = 0; i < recvs[j]; ++i) CHECK(out[at++] == std::uint16_t(1000 * j + 10 * r + i));
      // equal blocks, asynchronously
      std::vector<int> a(2 * n), b(2 * n);
      for (int i = 0; i < 2 * n; ++i) a[i] = 100 * r + i;
      comm.alltoall_async(a, b).wait();
      for (int j = 0; j < n; ++j) CHECK(b[2 * j + 1] == 100 * j + 2 * r + 1);
      if (n > 1) {
        CHECK_THROWS_WITH_AS(comm.alltoall(in, std::span<const std::size_t>(sends), out, std::span<const std::size_t>(recvs), algorithm::direct),
                             doctest::Contains("algorithm direct takes equal blocks only"), error);
        std::vector<std::size_t> short_counts(n - 1, 0);
        CHECK_THROWS_WITH_AS(comm.alltoall(in, std::span<const std::size_t>(short_counts), out, std::span<const std::size_t>(recvs)),
                             doctest::Contains("must both be size()"), error);
        CHECK_THROWS_WITH_AS(comm.alltoall(std::vector<int>(2 * n + 1), std::vector<int>(2 * n + 1)),
                             doctest::Contains("out.size() = "), error);
      }
    });
  }
}

TEST_CASE("send/recv: point to point moves while other calls are pending and while the caller polls") {
  auto what = rt_test::errors_of(3, [](local_transport& t) {
    communicator comm(t);
    const int n = comm.size(), r = comm.rank(), right = (r + 1) % n, left = (r + n - 1) % n;
    // MPI's classic exchange: post the receive, send blocking, then wait
    std::vector<double> in(200000, -1), out(200000, r);
    auto q = comm.recv_async(in, left, 1);
    comm.send(out, right, 1);
    q.wait();
    if (in[199999] != left) throw error("test", r, "recv_async + send: wrong data");
    // an MPI-style polling loop never waits, yet both complete
    auto s = comm.send_async(out, right, 2);
    auto g = comm.recv_async(in, left, 2);
    const auto until = std::chrono::steady_clock::now() + rt_test::scaled(20s);
    while (!(s.test() && g.test()))
      if (std::chrono::steady_clock::now() > until) throw error("test", r, "polled send/recv did not complete in 20 s");
    // a pending send beside a collective on another communicator (as the torch
    // group keeps collectives and point to point apart)
    auto coll = comm.split(0, r);
    std::vector<int> sum(4, 1);
    if (r == 0) {
      auto w = comm.send_async(out, 1, 3);
      coll.allreduce(sum);
      w.wait();
    } else if (r == 1) {
      comm.recv(in, 0, 3);
      coll.allreduce(sum);
    } else {
      coll.allreduce(sum);
    }
    if (sum[3] != n) throw error("test", r, "wrong sum");
    comm.barrier();
  }, rt_test::scaled(10s));
  for (const auto& w : what) CHECK_MESSAGE(w.empty(), w);
}

