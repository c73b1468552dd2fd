// The cost model: its step and byte counts against what the traced
// transport records, automatic against the model, calibration and its file.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <ringtree/communicator-inl.hpp>
#include <ringtree/ringtree.hpp>

#include "tools/collective_check.hpp"
#include "json_check.hpp"
#include "test_time.hpp"

using namespace ringtree;

namespace {

communicator_options fixed_options(chunk_sizes tun = {}) {
  communicator_options o;
  o.checked = false;
  o.chunks = tun;
  o.model = cost_model{};
  return o;
}

// One call of `c` with `a` on n ranks, checked against the reference, and
// what the busiest rank did, as the traced transport saw it.
cost_counts traced_counts(int n, collective c, algorithm a, std::size_t count, chunk_sizes tun) {
  trace_recorder rec(n);
  local_world world(n);
  world.run([&](local_transport& t) {
    traced_transport<local_transport> tt(t, rec);
    communicator comm(tt, fixed_options(tun));
    const std::string wrong = rt_test::check<float>(comm, {c, a, op::sum, count, n / 3, 0});
    if (!wrong.empty()) throw std::runtime_error(wrong);
  });
  cost_counts got{double(rec.steps()), 0, 0};
  for (int r = 0; r < n; ++r) {
    got.bytes = std::max(got.bytes, double(std::max(rec.bytes_sent(r), rec.bytes_received(r))));
    got.reduced = std::max(got.reduced, double(rec.bytes_reduced(r)));
  }
  return got;
}

cost_model model(double alpha, double beta, double gamma, const char* name, double knee = 0, double above = 0) {
  cost_model m;
  m.alpha = alpha, m.beta = beta, m.gamma = gamma, m.knee = knee, m.alpha_above = above, m.source = name;
  return m;
}

bool same(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// The bytes the tuner is asked about for a call of m elements per rank (or block).
std::size_t model_bytes(collective c, std::size_t m, int n) {
  return (c == collective::reduce_scatter ? m * n : m) * sizeof(float);
}

}  // namespace

TEST_CASE("the model's steps, bytes and reduced bytes equal the traced ones for every algorithm, n = 1..64") {
  const collective all[] = {collective::allreduce, collective::broadcast,      collective::reduce,    collective::scatter,
                            collective::gather,    collective::reduce_scatter, collective::allgather, collective::barrier};
  for (int n = 1; n <= rt_test::max_ranks(64); ++n) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    const std::size_t m = 2 * std::size_t(n) * p;  // divides into n blocks, p blocks, two halves
    for (collective c : all)
      for (algorithm a : detail::offered(c)) {
        std::vector<chunk_sizes> tunings = {chunk_sizes{}};
        if (c == collective::allreduce && a == algorithm::tree)  // one chunk per tree, two, four
          for (std::size_t per : {2, 4}) {
            chunk_sizes t;
            t.tree_chunk_bytes = m / 2 * sizeof(float) / per;
            tunings.push_back(t);
          }
        for (const auto& tun : tunings) {
          CAPTURE(n);
          CAPTURE(to_string(c));
          CAPTURE(to_string(a));
          CAPTURE(tun.tree_chunk_bytes);
          const cost_counts want = tuner(n, {}, tun).counts(c, a, model_bytes(c, m, n));
          const cost_counts got = traced_counts(n, c, a, m, tun);
          CHECK(same(got.steps, want.steps));
          CHECK(same(got.bytes, want.bytes));
          CHECK(same(got.reduced, want.reduced));
        }
      }
  }
}

TEST_CASE("automatic never picks an algorithm the model ranks more than 10% slower than another") {
  std::vector<cost_model> models = {cost_model{},
                                    model(1e-6, 1e-10, 1e-10, "shm-like"),
                                    model(2e-6, 8e-11, 3e-10, "slow reduce"),
                                    model(0.3e-6, 7e-11, 2e-11, "mpi-like, eager up to 2 KiB", 2048, 2.4e-6),
                                    model(20e-6, 8e-11, 5e-11, "network"),
                                    model(1e-4, 1e-9, 1e-11, "slow network")};
  // ... and the constants this machine measures for threads
  local_world(2).run([&](local_transport& t) {
    communicator comm(t);
    const auto m = comm.model().model();
    if (comm.rank() == 0) models.push_back(m);
  });
  const collective choosing[] = {collective::allreduce, collective::broadcast, collective::reduce, collective::scatter,
                                 collective::gather};
  for (const auto& m : models)
    for (int n : {1, 2, 3, 4, 5, 7, 8, 9, 16, 31, 64, 100, 1024, 65536}) {
      const tuner tu(n, m);
      for (collective c : choosing)
        for (std::size_t bytes = 1; bytes <= (std::size_t{1} << 30); bytes *= 4) {
          double best = 1e300;
          for (algorithm a : detail::offered(c)) best = std::min(best, tu.seconds(c, a, bytes));
          const algorithm pick = tu.choose(c, bytes);
          CAPTURE(m.source);
          CAPTURE(n);
          CAPTURE(to_string(c));
          CAPTURE(bytes);
          CAPTURE(to_string(pick));
          CHECK(detail::offers(c, pick));
          CHECK(tu.seconds(c, pick, bytes) <= 1.1 * best);
        }
    }
}

TEST_CASE("automatic runs the model's pick: latency-bound constants pick one-shot (one step), reduction-bound ones the ring") {
  const int n = 6;  // not a power of two: Rabenseifner would tie with the ring on bytes
  for (const auto& [model_, want_] : {std::pair{model(1e-3, 0, 1e-12, "latency"), algorithm::one_shot},
                                      std::pair{model(1e-12, 0, 1e-3, "reduction"), algorithm::ring}}) {
    const auto m = model_;  // (clang 14 cannot capture structured bindings)
    const algorithm want = want_;
    CAPTURE(m.source);
    trace_recorder rec(n);
    local_world world(n);
    world.run([&](local_transport& t) {
      traced_transport<local_transport> tt(t, rec);
      auto o = fixed_options();
      o.model = m;
      communicator comm(tt, o);
      if (comm.choose(collective::allreduce, 4096) != want) throw std::runtime_error("choose disagrees with the model");
      std::vector<float> v(1024, 1.0f);
      comm.allreduce(std::span<float>(v));
    });
    CHECK(rec.steps() == tuner(n, m).counts(collective::allreduce, want, 4096).steps);
  }
}

namespace {
struct scoped_env {
  std::string name;
  scoped_env(const char* n, const std::string& v) : name(n) { ::setenv(n, v.c_str(), 1); }
  ~scoped_env() { ::unsetenv(name.c_str()); }
};
std::string temp_file(const char* tag) {
  return std::string(std::getenv("RINGTREE_CACHE_DIR") ? std::getenv("RINGTREE_CACHE_DIR") : "/tmp") + "/" + tag + "-" +
         std::to_string(::getpid()) + ".txt";
}
}  // namespace

TEST_CASE("calibration measures alpha, beta and gamma in well under a second and caches them in a readable file") {
  const std::string path = temp_file("calibrated");
  std::remove(path.c_str());
  scoped_env file("RINGTREE_MODEL_FILE", path);
  cost_model got[2];
  double seconds = 0;
  local_world(2).run([&](local_transport& t) {
    communicator comm(t);
    const auto t0 = std::chrono::steady_clock::now();
    got[t.rank()] = comm.model().model();
    if (t.rank() == 0) seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  MESSAGE("calibration on 2 threads: ", seconds, " s; alpha ", got[0].alpha * 1e6, " us, beta ", got[0].beta * 1e9,
          " ns/B, gamma ", got[0].gamma * 1e9, " ns/B");
  CHECK(seconds < rt_test::scaled(std::chrono::seconds(1)).count());
  CHECK(got[0].alpha > 0);
  CHECK(got[0].alpha < 1e-3);
  CHECK(got[0].beta >= 0);
  CHECK(got[0].gamma > 0);
  CHECK(got[1].alpha == got[0].alpha);  // every rank has rank 0's figures
  CHECK(got[1].gamma == got[0].gamma);
  const auto read = detail::read_model(path, 0);
  REQUIRE(read.has_value());
  CHECK(std::abs(read->alpha - got[0].alpha) <= 1e-5 * got[0].alpha);
  CHECK(std::abs(read->gamma - got[0].gamma) <= 1e-5 * got[0].gamma);
}

TEST_CASE("a model file the user wrote overrides calibration; a bad one is an error on every rank") {
  const std::string path = temp_file("user-model");
  scoped_env file("RINGTREE_MODEL_FILE", path);
  {
    std::ofstream(path) << "# mine\nalpha_us = 250   # a slow network\nbeta_ns_per_byte = 0.5\ngamma_ns_per_byte = 0.25\n"
                        << "knee_bytes = 4096\nalpha_above_knee_us = 100\n";
    local_world(3).run([&](local_transport& t) {
      communicator comm(t);
      const auto& m = comm.model().model();
      if (std::abs(m.alpha - 250e-6) > 1e-12 || std::abs(m.beta - 0.5e-9) > 1e-18 || std::abs(m.gamma - 0.25e-9) > 1e-18 ||
          m.knee != 4096 || std::abs(m.alpha_above - 100e-6) > 1e-12)
        throw std::runtime_error("the file's constants were not used");
      if (comm.choose(collective::allreduce, 64) != comm.model().choose(collective::allreduce, 64) ||
          comm.choose(collective::allreduce, 64) == algorithm::ring)
        throw std::runtime_error("a 250 us step should make small all-reduces avoid the ring's 2(n-1) steps");
    });
  }
  const std::string bad = temp_file("bad-model");
  scoped_env file2("RINGTREE_MODEL_FILE", bad);
  std::ofstream(bad) << "alpha_us = 3\nbeta_ns_per_byte = fast\n";
  std::string msg[3];
  local_world(3).run([&](local_transport& t) {
    communicator comm(t);
    try {
      comm.model();
    } catch (const error& e) {
      msg[t.rank()] = e.what();
    }
  });
  CHECK(msg[0].find(bad + ":2") != std::string::npos);
  CHECK(msg[1].find("rank 0 could not read") != std::string::npos);
  CHECK(msg[2].find("rank 0 could not read") != std::string::npos);
}

TEST_CASE("RINGTREE_CALIBRATE=0 without a file uses the built-in constants") {
  scoped_env file("RINGTREE_MODEL_FILE", temp_file("absent"));
  scoped_env cal("RINGTREE_CALIBRATE", "0");
  local_world(2).run([&](local_transport& t) {
    communicator comm(t);
    if (comm.model().model().source != cost_model{}.source) throw std::runtime_error("expected the built-in model");
  });
}

TEST_CASE("a Chrome trace is valid JSON with one send and one receive event per message") {
  for (auto a : {algorithm::ring, algorithm::tree, algorithm::rabenseifner}) {
    trace_recorder rec(5);
    local_world world(5);
    world.run([&](local_transport& t) {
      traced_transport<local_transport> tt(t, rec);
      communicator comm(tt, fixed_options());
      std::vector<float> v(1000, 1.0f);
      comm.allreduce(std::span<float>(v), op::sum, a);
    });
    std::ostringstream os;
    rec.write_chrome(os);
    const std::string json = os.str();
    rt_test::json_reader r(json);
    CHECK_NOTHROW(r.parse());
    CHECK(r.categories["send"] == int(rec.messages()));
    CHECK(r.categories["recv"] == int(rec.messages()));
    CHECK(r.categories["reduce"] > 0);
  }
  const std::string bad = "{\"traceEvents\": [{\"cat\": \"send\",}]}";
  rt_test::json_reader broken(bad);
  CHECK_THROWS(broken.parse());  // the checker itself can fail
}

TEST_CASE("a Chrome trace's labels are escaped: quotes, control characters and </script> stay inside the string") {
  trace_recorder rec(2);
  local_world(2).run([&](local_transport& t) {
    traced_transport<local_transport> tt(t, rec);
    communicator comm(tt, fixed_options());
    std::vector<int> v(4, 1);
    comm.allreduce(v);
  });
  std::ostringstream os;
  os << "{\"traceEvents\": [\n";
  bool first = true;
  rec.write_chrome_events(os, 7, first, "a \"quoted\" \\ label\n\t</script>");
  os << "\n]}";
  const std::string json = os.str();
  rt_test::json_reader r(json);
  CHECK_NOTHROW(r.parse());
  CHECK(json.find("</script>") == std::string::npos);
  CHECK(json.find("\\\"quoted\\\"") != std::string::npos);
  CHECK(detail::json_quoted("x\x01<") == "\"x\\u0001\\u003c\"");
}

TEST_CASE("steps whose messages pass the knee are counted per algorithm") {
  const cost_model m = model(1e-6, 0, 0, "knee at 4 KiB", 4096, 1e-6);
  const tuner t8(8, m);
  // ring all-reduce of 64 KiB on 8 ranks: 8 KiB blocks, all 14 steps above
  CHECK(t8.counts(collective::allreduce, algorithm::ring, 64 << 10).large_steps == 14);
  CHECK(t8.counts(collective::allreduce, algorithm::ring, 16 << 10).large_steps == 0);  // 2 KiB blocks
  // recursive doubling sends the whole buffer every step
  CHECK(t8.counts(collective::allreduce, algorithm::recursive_doubling, 8 << 10).large_steps == 3);
  // Rabenseifner's halves: 32, 16, 8 KiB each way; at 16 KiB total only the first halving and last doubling
  CHECK(t8.counts(collective::allreduce, algorithm::rabenseifner, 64 << 10).large_steps == 6);
  CHECK(t8.counts(collective::allreduce, algorithm::rabenseifner, 16 << 10).large_steps == 2);
  CHECK(t8.seconds(collective::allreduce, algorithm::recursive_doubling, 8 << 10) == doctest::Approx(6e-6));
  CHECK(tuner(8, model(1e-6, 0, 0, "no knee")).counts(collective::allreduce, algorithm::ring, 1 << 30).large_steps == 0);
}

TEST_CASE("RINGTREE_MODEL_FILE: only a regular file of bounded size and line length is read") {
  const std::string dir = temp_file("model-dir");
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  const std::string fifo = dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  // a FIFO would block forever; /dev/zero never ends
  CHECK_THROWS_WITH_AS(detail::read_model(fifo, 0), doctest::Contains("is not a regular file"), error);
  CHECK_THROWS_WITH_AS(detail::read_model("/dev/zero", 0), doctest::Contains("/dev/zero is not a regular file"), error);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  CHECK_THROWS_WITH_AS(detail::read_model(dir, 0), doctest::Contains((dir + " is a directory, not a model file").c_str()), error);
  const std::string big = dir + "/big.txt";
  {
    std::ofstream out(big);
    for (int i = 0; i < 20000; ++i) out << "# padding padding padding\n";
  }
  CHECK_THROWS_WITH_AS(detail::read_model(big, 0), doctest::Contains("is too large for a model file"), error);
  const std::string longline = dir + "/long.txt";
  std::ofstream(longline) << "alpha_us = 1" << std::string(5000, ' ') << "\nbeta_ns_per_byte = 1\ngamma_ns_per_byte = 1\n";
  CHECK_THROWS_WITH_AS(detail::read_model(longline, 0), doctest::Contains((longline + ":1: line of 5012 characters").c_str()), error);
  CHECK_FALSE(detail::read_model(dir + "/missing.txt", 0).has_value());
  // through the communicator: the same error on every rank, no hang
  {
    scoped_env file("RINGTREE_MODEL_FILE", fifo);
    std::vector<std::string> msgs(2);
    local_world(2, std::chrono::seconds(10)).run([&](local_transport& t) {
      communicator comm(t);
      try {
        comm.model();
      } catch (const error& e) {
        msgs[t.rank()] = e.what();
      }
    });
    CHECK_MESSAGE(msgs[0].find("not a regular file") != std::string::npos, msgs[0]);
    CHECK_MESSAGE(msgs[1].find("rank 0 could not read " + fifo) != std::string::npos, msgs[1]);
  }
  std::remove(fifo.c_str());
  std::remove(big.c_str());
  std::remove(longline.c_str());
  ::rmdir(dir.c_str());
}
