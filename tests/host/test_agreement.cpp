// What every rank must agree on, and what happens when they do not:
// settings that differ across ranks (options, model constants, the
// environment), checked mode's comparison of the row that runs, set-up
// exchanges that meet another call, uneven all-to-all in checked mode.
// Each case once returned wrong numbers, hung, crashed or refused a valid
// call; the expectations are computed apart from the code.
#include <doctest/doctest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <set>
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

namespace {

using rt_test::has;

using rt_test::errors_of;
using rt_test::shm_entries;

}  // namespace

TEST_CASE("agreement: ranks opened with different settings raise on every rank, naming the setting") {
  // what once ran ring on one rank and tree on the other: every sum wrong
  auto algo = errors_of(2, [](local_transport& t) {
    communicator comm(t, communicator_options{.algo = t.rank() == 0 ? algorithm::ring : algorithm::tree});
    std::vector<std::int64_t> v(1000, 1);
    comm.allreduce(v);
  });
  for (const auto& w : algo) {
    CHECK_MESSAGE(has(w, "communicator_options::algo (rank 0: ring, rank 1: tree)"), w);
    CHECK_MESSAGE(has(w, "different settings"), w);
  }
  auto chunks = errors_of(3, [](local_transport& t) {
    communicator_options o;
    if (t.rank() == 2) o.chunks.ring_chunk_bytes = 4096;
    communicator comm(t, o);
  });
  for (const auto& w : chunks) CHECK_MESSAGE(has(w, "ranks 2 differ from rank 0 in chunks.ring_chunk_bytes"), w);
  auto checked = errors_of(2, [](local_transport& t) { communicator comm(t, communicator_options{.checked = t.rank() == 1}); });
  for (const auto& w : checked) CHECK_MESSAGE(has(w, "checked mode"), w);
  // the same settings everywhere: nothing raised, and the sums are right
  auto fine = errors_of(3, [](local_transport& t) {
    communicator comm(t, communicator_options{.algo = algorithm::tree});
    std::vector<std::int64_t> v(1000, t.rank() + 1);
    comm.allreduce(v);
    if (v[999] != 6) throw error("test", t.rank(), "wrong sum");
  });
  for (const auto& w : fine) CHECK_MESSAGE(w.empty(), w);
}

TEST_CASE("agreement: every setting that decides what runs is agreed on, each differing on one rank") {
  // The list is the one table the communicator states (settings.hpp): an
  // entry that its word leaves out (say, a cost model constant) raises nothing here.
  const detail::opened_settings base{communicator_options{.model = cost_model{}}, config{}, false};
  std::set<std::string> names;
  for (const auto& setting : detail::decisive_settings) {
    CAPTURE(setting.name);
    CHECK_MESSAGE(names.insert(setting.name).second, "two entries named ", setting.name);
    for (int odd : {1, 2}) {
      auto what = errors_of(3, [&](local_transport& t) {
        auto mine = base;
        if (t.rank() == odd) setting.vary(mine);
        detail::agree_on_settings(t, t.rank(), mine);
      });
      const std::string expected = detail::cat("ranks ", odd, " differ from rank 0 in ", setting.name, " (");
      for (const auto& w : what) CHECK_MESSAGE(has(w, expected), w);
    }
  }
  // and alike everywhere: nothing raised
  for (const auto& w : errors_of(3, [&](local_transport& t) { detail::agree_on_settings(t, t.rank(), base); }))
    CHECK_MESSAGE(w.empty(), w);
  // a model on one rank only is named too (its first constant)
  auto model = errors_of(2, [](local_transport& t) {
    detail::opened_settings s{communicator_options{}, config{}, false};
    if (t.rank() == 1) s.opt.model = cost_model{};
    detail::agree_on_settings(t, t.rank(), s);
  });
  for (const auto& w : model) CHECK_MESSAGE(has(w, "communicator_options::model.alpha (rank 0: none, rank 1: 5e-06)"), w);
}

TEST_CASE("agreement: checked mode compares the row that runs, not the one asked for") {
  // rank 0 asks for ring, rank 1 for automatic, which the option makes ring: they agree, and the sums are right
  auto same = errors_of(2, [](local_transport& t) {
    communicator comm(t, communicator_options{.checked = true, .algo = algorithm::ring});
    std::vector<std::int64_t> v(1000, t.rank() + 1);
    comm.allreduce(std::span<std::int64_t>(v), op::sum, t.rank() == 0 ? algorithm::ring : algorithm::automatic);
    if (v[0] != 3 || v[999] != 3) throw error("test", t.rank(), "wrong sum");
  });
  for (const auto& w : same) CHECK_MESSAGE(w.empty(), w);
  // rank 0 asks for tree, rank 1's automatic resolves to ring: both raise, naming what would run
  auto differ = errors_of(2, [](local_transport& t) {
    communicator comm(t, communicator_options{.checked = true, .algo = algorithm::ring});
    std::vector<std::int64_t> v(1000, 1);
    comm.allreduce(std::span<std::int64_t>(v), op::sum, t.rank() == 0 ? algorithm::tree : algorithm::automatic);
  });
  for (const auto& w : differ) CHECK_MESSAGE(has(w, "differ from rank 0 in algorithm (rank 0: tree, rank 1: ring)"), w);
  // a first call that measures: compared before (automatic), and what it chose after; the sums are right
  auto measured = errors_of(3, [](local_transport& t) {
    communicator comm(t, communicator_options{.checked = true});
    for (std::size_t count : {std::size_t{3}, std::size_t{70000}, std::size_t{3}}) {
      std::vector<float> v(count, float(t.rank()));
      comm.allreduce(v);
      if (v.back() != 3.0f) throw error("test", t.rank(), "wrong sum");
    }
  });
  for (const auto& w : measured) CHECK_MESSAGE(w.empty(), w);
}

TEST_CASE("agreement: a set-up exchange that meets another call raises on every rank, never crashes") {
  // rank 0's first two_shot maps its staging while rank 1 is a call ahead, in an 8-byte broadcast
  auto calls = errors_of(2, [](local_transport& t) {
    communicator comm(t);
    std::vector<float> v(1 << 16, 1.0f);  // streamed through staging, which this call maps
    std::vector<double> one(1, 1.0);
    comm.broadcast(one, 0);  // both ranks: the control memory is mapped here
    if (t.rank() == 1) comm.broadcast(one, 0);
    comm.allreduce(std::span<float>(v), op::sum, algorithm::two_shot);
  }, rt_test::scaled(5s));
  for (const auto& w : calls) CHECK_MESSAGE(!w.empty(), "a rank raised nothing");
  const std::string both = calls[0] + " | " + calls[1];
  CHECK_MESSAGE(has(both, "mismatched"), both);
  // the transport alone, meeting a message of another call: one word (what
  // an address was), and one as long as the exchange's message now is
  for (std::size_t words : {1, 3}) {
    auto raw = errors_of(2, [words](local_transport& t) {
      if (t.rank() == 0) {
        (void)t.map_shared(4096);
      } else {
        std::vector<std::uint64_t> garbage(words, 0x1234);
        auto s = t.isend(0, std::as_bytes(std::span(garbage)));
        t.wait(s);
        auto q = t.irecv(0, std::as_writable_bytes(std::span(garbage)));
        t.wait(q);
      }
    }, rt_test::scaled(5s));
    CHECK_MESSAGE(has(raw[0], words == 1 ? "mismatched collective calls?" : "sent something other than this step's"), raw[0]);
  }
}

TEST_CASE("agreement: checked mode takes an all-to-all of uneven blocks, and names a pair that disagrees") {
  for (int n : {2, 3, 4}) {
    CAPTURE(n);
    auto fine = errors_of(n, [n](local_transport& t) {
      communicator comm(t, communicator_options{.checked = true});
      const int r = comm.rank();
      // MoE-style: rank r sends (r * 3 + j) % 5 elements to rank j; totals differ by rank
      std::vector<std::size_t> sends(n), recvs(n);
      for (int j = 0; j < n; ++j) sends[j] = std::size_t(r * 3 + j) % 5, recvs[j] = std::size_t(j * 3 + r) % 5;
      std::vector<std::int32_t> in, out(std::accumulate(recvs.begin(), recvs.end(), std::size_t{0}), -1);
      for (int j = 0; j < n; ++j)
        for (std::size_t i = 0; i < sends[j]; ++i) in.push_back(1000 * r + 10 * j + std::int32_t(i));
      comm.alltoall(in, std::span<const std::size_t>(sends), out, std::span<const std::size_t>(recvs));
      std::size_t at = 0;
      for (int j = 0; j < n; ++j)
        for (std::size_t i = 0; i < recvs[j]; ++i)
          if (out[at++] != 1000 * j + 10 * r + std::int32_t(i)) throw error("test", r, "wrong element");
    });
    for (const auto& w : fine) CHECK_MESSAGE(w.empty(), w);
    auto bad = errors_of(n, [n](local_transport& t) {
      communicator comm(t, communicator_options{.checked = true});
      const int r = comm.rank();
      std::vector<std::size_t> sends(n, 2), recvs(n, 2);
      if (r == 1) sends[0] = 3;  // rank 0 expects 2 from rank 1
      std::vector<float> in(std::accumulate(sends.begin(), sends.end(), std::size_t{0})), out(2 * n);
      comm.alltoall(in, std::span<const std::size_t>(sends), out, std::span<const std::size_t>(recvs));
    });
    for (const auto& w : bad) CHECK_MESSAGE(has(w, "rank 1 sends rank 0 3 elements but rank 0 receives 2"), w);
  }
}

TEST_CASE("shm: ranks whose environments differ (RINGTREE_ALGO, RINGTREE_TRACE on one rank) raise at once") {
  const std::string name = detail::cat("/ringtree-test-settings-", getpid());
  for (const char* var : {"RINGTREE_ALGO", "RINGTREE_TRACE"}) {
    CAPTURE(var);
    auto res = rt_test::run_processes(2, [&](int rank, FILE* out) {
      const std::string trace = detail::cat("/tmp/ringtree-test-trace-", getpid(), ".json");
      if (std::string(var) == "RINGTREE_ALGO") setenv(var, rank == 0 ? "ring" : "recursive_doubling", 1);
      else if (rank == 0) setenv(var, trace.c_str(), 1);
      shm_transport t(name + var, rank, 2, shm_options{.timeout = rt_test::scaled(20s)});
      try {
        communicator comm(t);
        std::vector<std::int64_t> v(1, 1);
        comm.allreduce(v);
        std::fprintf(out, "no error, sum %lld", static_cast<long long>(v[0]));
      } catch (const error& e) {
        std::fprintf(out, "%s", e.what());
      }
      std::remove(trace.c_str());
      std::remove(detail::cat("/tmp/ringtree-test-trace-", getpid(), ".rank0.json").c_str());  // (the sink writes one file per rank)
      return 0;
    });
    for (const auto& o : res) {
      CHECK(WIFEXITED(o.status));
      CHECK_MESSAGE(has(o.text, std::string("differ from rank 0 in ") + (std::string(var) == "RINGTREE_ALGO" ? "RINGTREE_ALGO" : "tracing")),
                    o.text);
    }
  }
}

