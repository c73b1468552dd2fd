#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/ringtree.hpp>
#include "host_check.hpp"

using namespace ringtree;
using namespace std::chrono_literals;

namespace {
// Runs body on every rank; returns each rank's error message ("" if none).
template <class F>
std::vector<std::string> errors(int n, F body, std::chrono::duration<double> timeout = 30s) {
  std::vector<std::string> msgs(n);
  local_world world(n, timeout);
  world.run([&](local_transport& t) {
    try {
      body(t);
    } catch (const error& e) {
      msgs[t.rank()] = e.what();
    }
  });
  return msgs;
}
using rt_test::has;

// The communicator still works: a correct allreduce after the error.
void still_works(communicator<local_transport>& comm) {
  std::vector<int> v(5, 1);
  comm.allreduce(std::span<int>(v));
  if (v[4] != comm.size()) throw std::runtime_error("allreduce after an error is wrong");
}
}  // namespace

TEST_CASE("a root out of range raises on every rank, naming call, rank and values; the communicator still works") {
  auto msgs = errors(4, [](local_transport& t) {
    communicator comm(t);
    std::vector<float> v(3);
    try {
      comm.broadcast(std::span<float>(v), 5);
    } catch (const error& e) {
      CHECK(e.call() == "broadcast");
      CHECK(e.rank() == t.rank());
      still_works(comm);
      throw;
    }
  });
  for (int r = 0; r < 4; ++r) {
    CHECK(has(msgs[r], "broadcast on rank " + std::to_string(r)));
    CHECK(has(msgs[r], "root 5 is out of range for 4 ranks"));
  }
}

TEST_CASE("wrong span lengths and overlapping buffers raise before any message") {
  // CHECK_THROWS_WITH: a call that returns instead of raising fails the test.
  auto msgs = errors(3, [](local_transport& t) {
    communicator comm(t);
    std::vector<int> a(10), b(9);
    CHECK_THROWS_WITH_AS(comm.allreduce(std::span<const int>(a), std::span<int>(b)),
                         doctest::Contains("out.size() = 9 but in.size() = 10"), error);
    CHECK_THROWS_WITH_AS(comm.allreduce(std::span<const int>(a).first(6), std::span<int>(a).subspan(3, 6)),
                         doctest::Contains("overlap"), error);
    std::vector<int> all(5);
    CHECK_THROWS_WITH_AS(comm.allgather(std::span<const int>(a).first(2), std::span<int>(all)),
                         doctest::Contains("out.size() = 5 but size() * in.size() = 3 * 2 = 6"), error);
    CHECK_THROWS_WITH_AS(comm.reduce_scatter(std::span<const int>(a), std::span<int>(b).first(3)),
                         doctest::Contains("in.size() = 10 but size() * out.size() = 3 * 3 = 9"), error);
    std::vector<int> root_out(9);
    if (t.rank() == 1)
      CHECK_THROWS_WITH_AS(comm.reduce(std::span<const int>(a), std::span<int>(root_out), 1),
                           doctest::Contains("out.size() = 9 on the root but in.size() = 10"), error);
    still_works(comm);
    throw error("test", t.rank(), "done");
  });
  for (auto& m : msgs) CHECK(has(m, "done"));  // every rank reached the end
}

TEST_CASE("scatter input of the wrong size on the root raises there, before anything is sent") {
  auto msgs = errors(4, [](local_transport& t) {
    communicator comm(t);
    std::vector<int> in(4 * 3 - 1), out(3);
    if (t.rank() == 2) {
      CHECK_THROWS_WITH_AS(comm.scatter(std::span<const int>(in), std::span<int>(out), 2),
                           doctest::Contains("scatter on rank 2: in.size() = 11 on the root but size() * out.size() = 4 * 3 = 12"),
                           error);
    }
    in.resize(12);
    for (int i = 0; i < 12; ++i) in[i] = i;
    comm.scatter(std::span<const int>(in), std::span<int>(out), 2);  // a good call right after
    if (out[0] != 3 * t.rank()) throw error("test", t.rank(), "scatter after error wrong");
  });
  for (auto& m : msgs) CHECK(m.empty());
}

TEST_CASE("an algorithm a collective does not offer is refused") {
  auto msgs = errors(2, [](local_transport& t) {
    communicator comm(t);
    std::vector<int> in(4), out(2);
    comm.scatter(std::span<const int>(in), std::span<int>(out), 0, algorithm::ring);
  });
  for (auto& m : msgs) CHECK(has(m, "algorithm ring is not available for scatter of 8 bytes on 2 ranks (available: linear, binomial)"));
}

// Calls of no elements return before they are built (the fast path of
// communicator::empty_call): what can be wrong with them must still raise,
// and a queued asynchronous call must still be waited for first.
TEST_CASE("calls of no elements return at once, but bad ones raise and queued calls are waited for") {
  auto msgs = errors(3, [](local_transport& t) {
    communicator comm(t);
    std::vector<int> none, three(3);
    auto in = std::span<const int>(none);
    auto out = std::span<int>(none);
    comm.allreduce(in, out);  // every collective, empty on every rank: nothing to do
    comm.broadcast(out, 2);
    comm.reduce(in, out, 1);
    comm.scatter(in, out, 0);
    comm.gather(in, out, 0);
    comm.reduce_scatter(in, out);
    comm.allgather(in, out);
    comm.alltoall(in, out);
    CHECK_THROWS_WITH_AS(comm.broadcast(out, 3), doctest::Contains("root 3 is out of range for 3 ranks"), error);
    CHECK_THROWS_WITH_AS(comm.reduce(in, out, -1), doctest::Contains("root -1 is out of range for 3 ranks"), error);
    CHECK_THROWS_WITH_AS(comm.gather(in, out, 7), doctest::Contains("root 7 is out of range"), error);
    CHECK_THROWS_WITH_AS(comm.scatter(in, out, 0, algorithm::ring), doctest::Contains("algorithm ring is not available for scatter"),
                         error);
    CHECK_THROWS_WITH_AS(comm.allreduce(in, std::span<int>(three)), doctest::Contains("out.size() = 3 but in.size() = 0"), error);
    CHECK_THROWS_WITH_AS(comm.allgather(in, std::span<int>(three)), doctest::Contains("out.size() = 3 but size() * in.size() = 3 * 0 = 0"),
                         error);
    if (t.rank() == 1)
      CHECK_THROWS_WITH_AS(comm.reduce(in, std::span<int>(three), 1), doctest::Contains("out.size() = 3 on the root but in.size() = 0"),
                           error);
    // An empty call after an asynchronous one returns only once that has
    // run (a synchronous call waits for the queue): rank 0 queues first,
    // its peers a moment later, so that call cannot have run before.
    std::vector<float> big(1 << 16, 1.0f);
    if (t.rank() != 0) std::this_thread::sleep_for(50ms);
    auto w = comm.allreduce_async(std::span<float>(big));
    comm.allreduce(in, out);
    CHECK(w.test());
    w.wait();
    CHECK(big[0] == 3.0f);
    still_works(comm);
    throw error("test", t.rank(), "done");
  });
  for (auto& m : msgs) CHECK(has(m, "done"));
}

TEST_CASE("checked mode: mismatched counts, roots or calls raise on every rank, naming the ranks") {
  communicator_options checked;
  checked.checked = true;
  auto counts = errors(4, [&](local_transport& t) {
    communicator comm(t, checked);
    std::vector<float> v(t.rank() == 3 ? 12 : 10);
    comm.allreduce(std::span<float>(v));
  });
  for (int r = 0; r < 4; ++r) {
    CHECK(has(counts[r], "allreduce on rank " + std::to_string(r)));
    CHECK(has(counts[r], "ranks 3 differ from rank 0 in count"));
    CHECK(has(counts[r], "rank 3: 12"));
  }
  auto roots = errors(3, [&](local_transport& t) {
    communicator comm(t, checked);
    std::vector<int> v(4);
    comm.broadcast(std::span<int>(v), t.rank() == 0 ? 1 : 0);
  });
  for (auto& m : roots) CHECK(has(m, "ranks 1, 2 differ from rank 0 in root"));
  auto calls = errors(2, [&](local_transport& t) {
    communicator comm(t, checked);
    std::vector<int> v(4);
    if (t.rank() == 0) comm.allreduce(std::span<int>(v));
    else comm.broadcast(std::span<int>(v), 0);
  });
  for (auto& m : calls) CHECK(has(m, "differ from rank 0 in call (rank 0: allreduce, rank 1: broadcast)"));
  auto types = errors(2, [&](local_transport& t) {
    communicator comm(t, checked);
    std::vector<int> v(4);
    std::vector<float> f(4);
    if (t.rank() == 0) comm.allreduce(std::span<int>(v));
    else comm.allreduce(std::span<float>(f));
  });
  for (auto& m : types) CHECK(has(m, "element type (rank 0: int32, rank 1: float)"));
}

TEST_CASE("checked mode: invalid arguments on one rank raise on every rank") {
  communicator_options checked;
  checked.checked = true;
  auto msgs = errors(3, [&](local_transport& t) {
    communicator comm(t, checked);
    std::vector<int> in(t.rank() == 1 ? 5 : 6), out(2);
    comm.scatter(std::span<const int>(in), std::span<int>(out), 1);
  });
  CHECK(has(msgs[1], "in.size() = 5 on the root"));
  CHECK(has(msgs[0], "ranks 1 passed invalid arguments"));
  CHECK(has(msgs[2], "ranks 1 passed invalid arguments"));
}

TEST_CASE("without checked mode, mismatched sizes are refused by the receiver instead of corrupting memory") {
  auto msgs = errors(2, [](local_transport& t) {
    communicator comm(t);
    std::vector<int> v(t.rank() == 0 ? 4 : 8);
    comm.allreduce(std::span<int>(v), op::sum, algorithm::ring);
  });
  bool refused = false;
  for (auto& m : msgs) refused = refused || has(m, "expected");
  CHECK(refused);
  for (auto& m : msgs) CHECK(!m.empty());
}

TEST_CASE("a stalled peer raises a timeout error naming it; a peer that returned early is named at once") {
  const auto timeout = rt_test::scaled(0.2s);
  auto t0 = std::chrono::steady_clock::now();
  auto stalled = errors(3, [&](local_transport& t) {
    communicator comm(t);
    if (t.rank() == 1) {
      std::this_thread::sleep_for(4 * timeout);
      return;
    }
    std::vector<int> v(4);
    comm.allreduce(std::span<int>(v), op::sum, algorithm::ring);
  }, timeout);
  CHECK(std::chrono::steady_clock::now() - t0 < rt_test::scaled(5s));
  bool named = false;
  for (int r : {0, 2}) named = named || has(stalled[r], "for rank 1, the whole timeout (RINGTREE_TIMEOUT)");
  CHECK(named);
  CHECK(has(stalled[0] + stalled[2], detail::cat("waited ", timeout.count(), " s")));

  auto early = errors(2, [](local_transport& t) {
    communicator comm(t);
    if (t.rank() == 1) return;
    std::vector<int> v(4);
    comm.allreduce(std::span<int>(v));
  });
  CHECK(has(early[0], "rank 1 returned from run()"));
}

TEST_CASE("a rank that throws wakes the others; run() rethrows the original error") {
  local_world world(4, 30s);
  std::atomic<int> raised{0};
  try {
    world.run([&](local_transport& t) {
      communicator comm(t);
      if (t.rank() == 2) throw std::runtime_error("boom on 2");
      std::vector<int> v(8);
      try {
        comm.allreduce(std::span<int>(v));
      } catch (const error& e) {
        if (has(e.what(), "rank 2 failed")) ++raised;
        throw;
      }
    });
    FAIL("run() did not rethrow");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "boom on 2");
  }
  CHECK(raised >= 1);
}

TEST_CASE("RINGTREE_TIMEOUT and RINGTREE_CHECK are parsed strictly") {
  setenv("RINGTREE_TIMEOUT", "abc", 1);
  CHECK_THROWS_WITH_AS(detail::default_timeout(), doctest::Contains("expected a number of seconds from 0.001 to 1e+09, got 'abc'"), error);
  // Below a millisecond every wait would fail at once (1e-300 used to become 0 ns).
  for (const char* tiny : {"1e-300", "0.0009", "0", "-1", "1e10", "nan", "inf"}) {
    CAPTURE(tiny);
    setenv("RINGTREE_TIMEOUT", tiny, 1);
    CHECK_THROWS_WITH_AS(detail::default_timeout(), doctest::Contains((std::string("got '") + tiny + "'").c_str()), error);
  }
  setenv("RINGTREE_TIMEOUT", "0.001", 1);
  CHECK(detail::default_timeout().count() == 0.001);
  setenv("RINGTREE_TIMEOUT", "2.5", 1);
  CHECK(detail::default_timeout().count() == 2.5);
  unsetenv("RINGTREE_TIMEOUT");
  CHECK(detail::default_timeout().count() == 300);
  setenv("RINGTREE_CHECK", "yes", 1);
  CHECK_THROWS_WITH_AS(config::from_env(), doctest::Contains("RINGTREE_CHECK: expected 0 or 1, got 'yes'"), error);
  setenv("RINGTREE_CHECK", "1", 1);
  CHECK(config::from_env().check);
  CHECK_FALSE(communicator_options{}.checked);  // options never read the environment; the communicator does
  local_world(1).run([](local_transport& t) { CHECK(communicator<local_transport>(t).checked()); });
  unsetenv("RINGTREE_CHECK");
  local_world(1).run([](local_transport& t) { CHECK_FALSE(communicator<local_transport>(t).checked()); });
  setenv("RINGTREE_TUNE", "sometimes", 1);
  CHECK_THROWS_WITH_AS(config::from_env(), doctest::Contains("RINGTREE_TUNE: expected 1, 0, fresh or cached, got 'sometimes'"), error);
  setenv("RINGTREE_TUNE", "0", 1);  // back to the suite's default (main.cpp), not unset (which measures)
  CHECK_THROWS_WITH_AS(local_world(0), doctest::Contains("size must be at least 1, got 0"), error);
}

TEST_CASE("RINGTREE_ALGO replaces automatic where offered; an explicit algorithm wins over it") {
  setenv("RINGTREE_ALGO", "magic", 1);
  local_world(1).run([](local_transport& t) {
    CHECK_THROWS_WITH_AS((void)communicator<local_transport>(t), doctest::Contains("unknown algorithm 'magic' (one of: ring, tree"), error);
  });
  setenv("RINGTREE_ALGO", "rabenseifner", 1);
  // The first message of each run: Rabenseifner's first is half the buffer, the ring's a quarter.
  auto first_message = [](std::optional<algorithm> in_options, algorithm in_call) {
    trace_recorder rec(4);
    local_world(4).run([&](local_transport& t) {
      traced_transport<local_transport> tt(t, rec);
      communicator_options o;
      o.algo = in_options;
      communicator comm(tt, o);
      std::vector<float> v(64, 1.0f);
      comm.allreduce(v, op::sum, in_call);
      if (v[0] != 4.0f) throw error("test", t.rank(), "allreduce wrong");
      std::vector<int> in(8), out(2);
      comm.scatter(in, out, 0);  // scatter has no rabenseifner: the usual choice
    });
    return rec.events().front().bytes / sizeof(float);
  };
  CHECK(first_message(std::nullopt, algorithm::automatic) == 32);  // RINGTREE_ALGO
  CHECK(first_message(std::nullopt, algorithm::ring) == 16);       // the call's own choice
  CHECK(first_message(algorithm::ring, algorithm::automatic) == 16);  // options in code beat the environment
  unsetenv("RINGTREE_ALGO");
}

TEST_CASE("RINGTREE_ALGO takes one algorithm per collective; the others stay automatic; bad specs are refused") {
  auto chosen = [](const char* spec) {
    setenv("RINGTREE_ALGO", spec, 1);
    std::vector<algorithm> got;
    local_world(4).run([&](local_transport& t) {
      communicator comm(t);
      const auto a = comm.choose(collective::allreduce, 1024), b = comm.choose(collective::broadcast, 1024),
                 r = comm.choose(collective::reduce, 1024);
      if (t.rank() == 0) got = {a, b, r};
    });
    unsetenv("RINGTREE_ALGO");
    return got;
  };
  const char* tune = std::getenv("RINGTREE_TUNE");
  const std::string was = tune ? tune : "";
  setenv("RINGTREE_TUNE", "0", 1);  // automatic by the model: the same choice every run
  const auto plain = chosen("");
  const auto picked = chosen("allreduce:rabenseifner;broadcast:binomial");
  REQUIRE(picked.size() == 3);
  CHECK(picked[0] == algorithm::rabenseifner);
  CHECK(picked[1] == algorithm::binomial);
  CHECK(picked[2] == plain[2]);  // reduce was not named: automatic, as without the variable
  CHECK(chosen(";reduce:tree;")[2] == algorithm::tree);  // empty items are skipped
  if (was.empty()) unsetenv("RINGTREE_TUNE");
  else setenv("RINGTREE_TUNE", was.c_str(), 1);
  for (const auto& bad : std::vector<std::pair<const char*, const char*>>{
           {"allreduc:ring", "unknown collective 'allreduc'"},
           {"allreduce:magic", "unknown algorithm 'magic'"},
           {"allreduce:ring;allreduce:tree", "'allreduce' is named twice"},
           {"broadcast:rabenseifner", "broadcast has no algorithm 'rabenseifner' (its algorithms: ring, tree"},
           {"allreduce:ring;tree", "'tree' in 'allreduce:ring;tree' names no collective"}}) {
    const char* spec = bad.first;  // (not a structured binding: clang 14 cannot capture one)
    const char* says = bad.second;
    CAPTURE(spec);
    setenv("RINGTREE_ALGO", spec, 1);
    local_world(1).run([&](local_transport& t) {
      CHECK_THROWS_WITH_AS((void)communicator<local_transport>(t), doctest::Contains(says), error);
    });
    unsetenv("RINGTREE_ALGO");
  }
}
