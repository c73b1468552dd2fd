// The algorithm table, the communicator's scratch pool, and automatic by
// measurement.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include <ringtree/communicator-inl.hpp>
#include <ringtree/ringtree.hpp>

#include "fault_transport.hpp"
#include "test_time.hpp"

using namespace ringtree;

namespace {

struct scoped_env {
  std::string name;
  std::string old;
  bool had;
  scoped_env(const char* n, const std::string& v) : name(n), had(std::getenv(n) != nullptr) {
    if (had) old = std::getenv(n);
    ::setenv(n, v.c_str(), 1);
  }
  ~scoped_env() {
    if (had) ::setenv(name.c_str(), old.c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

std::string temp_dir() {
  char d[] = "/tmp/ringtree-table-test-XXXXXX";
  REQUIRE(::mkdtemp(d) != nullptr);
  return d;
}
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Host memory that counts the scratch buffers it makes.
std::atomic<int> scratch_made{0};
struct counting_memory : host_memory {
  template <class E>
  buffer<E> scratch(std::size_t n) const {
    ++scratch_made;
    return host_memory::scratch<E>(n);
  }
};
// local_transport with that memory.
struct counting_transport {
  using request = local_transport::request;
  using memory_type = counting_memory;
  static constexpr const char* name = "counting";
  static constexpr bool in_process = true;
  local_transport* inner;
  int rank() const noexcept { return inner->rank(); }
  int size() const noexcept { return inner->size(); }
  request isend(int peer, std::span<const std::byte> b) { return inner->isend(peer, b); }
  request irecv(int peer, std::span<std::byte> b) { return inner->irecv(peer, b); }
  void wait(request& r) { inner->wait(r); }
  counting_memory memory() const noexcept { return {}; }
};

}  // namespace

TEST_CASE("algorithm table: names, parsing and offers come from the rows") {
  for (const auto& r : detail::rows) {
    CAPTURE(r.name);
    CHECK(to_string(r.id) == r.name);
    CHECK(algorithm_from_string(r.name) == r.id);
    CHECK(detail::offers(r.what, r.id));
  }
  CHECK_FALSE(algorithm_from_string("magic").has_value());
  CHECK(algorithm_from_string("automatic") == algorithm::automatic);
  for (collective c : all_collectives) CHECK_FALSE(detail::offered(c).empty());
  // one_shot is a row of allreduce only, offered while n-1 buffers fit in 64 MiB
  CHECK(detail::offers(collective::allreduce, algorithm::one_shot, {4, 1 << 20, memory_kind::host}));
  CHECK_FALSE(detail::offers(collective::allreduce, algorithm::one_shot, {4, 32 << 20, memory_kind::host}));
  CHECK_FALSE(detail::offers(collective::broadcast, algorithm::one_shot));
  local_world(4).run([](local_transport& t) {
    communicator comm(t);
    std::vector<float> v(8u << 20, 1.0f);  // 32 MiB: one_shot would receive 96 MiB
    CHECK_THROWS_WITH_AS(comm.allreduce(v, op::sum, algorithm::one_shot),
                         doctest::Contains("algorithm one_shot is not available for allreduce of 33554432 bytes on 4 ranks"), error);
    std::vector<float> w(3, float(t.rank()));
    comm.allreduce(w, op::sum, algorithm::one_shot);
    CHECK(w == std::vector<float>(3, 6.0f));
  });
}

TEST_CASE("collectives take any contiguous range") {
  local_world(3).run([](local_transport& t) {
    communicator comm(t);
    std::vector<int> v(5, t.rank() + 1);
    comm.allreduce(v);
    CHECK(v == std::vector<int>(5, 6));
    const std::array<double, 2> in{1.0 * t.rank(), 2.0};
    std::vector<double> all(6);
    comm.allgather(in, all);
    CHECK(all == std::vector<double>{0, 2, 1, 2, 2, 2});
    int raw[3] = {t.rank(), t.rank(), t.rank()};
    comm.broadcast(raw, 2);
    CHECK(raw[0] == 2);
  });
  static_assert(!std::is_copy_constructible_v<communicator<local_transport>>);
  static_assert(std::is_move_constructible_v<communicator<local_transport>>);
}

TEST_CASE("a warmed-up collective allocates no scratch") {
  const int n = 4;
  for (std::size_t count : {std::size_t{5}, std::size_t{1000}, std::size_t{300000}}) {
    CAPTURE(count);
    std::vector<int> made(2, -1);
    local_world(n).run([&](local_transport& lt) {
      counting_transport t{&lt};
      communicator_options o;
      o.model = cost_model{};  // automatic by the model: no measuring here
      o.chunks.ring_chunk_bytes = 4096;  // several chunks in flight
      communicator comm(t, o);
      std::vector<float> x(count), y(count), blocks(count * n), block(count);
      std::vector<std::int32_t> ints(count);
      auto round = [&] {
        for (algorithm a : detail::offered(collective::allreduce, nullptr))
          if (detail::offers(collective::allreduce, a, {n, count * 4, memory_kind::host})) comm.allreduce(x, y, op::sum, a);
        comm.allreduce(ints, op::avg);  // exact integer avg: a remainder buffer
        for (algorithm a : detail::offered(collective::broadcast)) comm.broadcast(x, 1, a);
        for (algorithm a : detail::offered(collective::reduce)) comm.reduce(x, y, 2, op::sum, a);
        for (algorithm a : detail::offered(collective::scatter)) comm.scatter(blocks, block, 0, a);
        for (algorithm a : detail::offered(collective::gather)) comm.gather(block, blocks, 3, a);
        comm.reduce_scatter(blocks, block);
        comm.allgather(block, blocks);
        comm.barrier();
      };
      round();
      comm.barrier();
      if (t.rank() == 0) made[0] = scratch_made.exchange(0);
      comm.barrier();
      round();
      comm.barrier();
      if (t.rank() == 0) made[1] = scratch_made.exchange(0);
    });
    CHECK(made[0] > 0);   // the first round did make scratch (the count can see it)
    CHECK(made[1] == 0);  // the second, at the same sizes, took it all from the pools
  }
}

TEST_CASE("automatic by measurement: agreed on every rank, cached, and never touching the caller's buffers") {
  const std::string dir = temp_dir();
  scoped_env cache("RINGTREE_CACHE_DIR", dir);
  scoped_env tune("RINGTREE_TUNE", "1");
  const int n = 3;
  const std::string file = dir + "/tuned-local-3ranks.txt";
  std::vector<algorithm> picked(n);
  local_world(n).run([&](local_transport& t) {
    communicator comm(t);
    std::vector<float> in(4096), out(4096);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = float(i % 7) + t.rank();
    const auto before = in;
    comm.allreduce(in, out);  // measures the 16 KiB bin first
    CHECK(in == before);
    for (std::size_t i = 0; i < in.size(); ++i) CHECK(out[i] == float(3 * (i % 7) + 3));
    picked[t.rank()] = comm.choose(collective::allreduce, 16384);
  });
  CHECK(picked[0] == picked[1]);
  CHECK(picked[1] == picked[2]);
  CHECK(detail::offers(collective::allreduce, picked[0]));
  const std::string text = slurp(file);
  CHECK(text.find("allreduce 16384 = " + std::string(to_string(picked[0]))) != std::string::npos);
  CHECK(text.find("cpu = " + detail::cpu_model()) != std::string::npos);
  CHECK(text.find(std::string("version = ") + version_string) != std::string::npos);

  // Known now: a new communicator (in this process) asks nobody and writes nothing.
  struct stat st0 {}, st1 {};
  ::stat(file.c_str(), &st0);
  local_world(n).run([&](local_transport& t) {
    communicator comm(t);
    CHECK(comm.choose(collective::allreduce, 10000) == picked[0]);  // the same bin
  });
  ::stat(file.c_str(), &st1);
  CHECK(st0.st_mtim.tv_nsec == st1.st_mtim.tv_nsec);
  CHECK(st0.st_mtim.tv_sec == st1.st_mtim.tv_sec);

  // A file of this CPU and version is trusted (another rank count: not loaded yet).
  {
    std::ofstream(dir + "/tuned-local-5ranks.txt") << "cpu = " << detail::cpu_model() << "\nversion = " << version_string
                                                   << "\nallreduce 1024 = recursive_doubling\n";
    local_world(5).run([&](local_transport& t) { CHECK(communicator<local_transport>(t).choose(collective::allreduce, 1000) == algorithm::recursive_doubling); });
  }
  // ... one from another CPU is not: measured again, and rewritten.
  {
    std::ofstream(dir + "/tuned-local-6ranks.txt") << "cpu = some other CPU\nversion = " << version_string
                                                   << "\nallreduce 1024 = recursive_doubling\n";
    local_world(6).run([&](local_transport& t) { (void)communicator<local_transport>(t).choose(collective::allreduce, 1000); });
    CHECK(slurp(dir + "/tuned-local-6ranks.txt").find("cpu = " + detail::cpu_model()) != std::string::npos);
  }
  // A line that does not parse is an error naming the file and line.
  {
    std::ofstream(dir + "/tuned-local-7ranks.txt") << "cpu = x\nallreduce 1000 = ring\n";  // not a power of two
    local_world(7).run([&](local_transport& t) {
      communicator comm(t);
      CHECK_THROWS_WITH_AS(comm.choose(collective::allreduce, 1000),
                           doctest::Contains(t.rank() == 0 ? "tuned-local-7ranks.txt:2: expected" : "rank 0 could not read"), error);
    });
  }
  // RINGTREE_TUNE=fresh measures again.
  {
    scoped_env fresh("RINGTREE_TUNE", "fresh");
    local_world(n).run([&](local_transport& t) { (void)communicator<local_transport>(t).choose(collective::broadcast, 1 << 20); });
    CHECK(slurp(file).find("broadcast 1048576 = ") != std::string::npos);
  }
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("automatic by measurement does not pick an algorithm made clearly slower, on every rank alike") {
  // The cost model (constants from a file, so the same on every machine)
  // picks ring for a 1 MiB broadcast on 4 ranks. Every message to the next
  // rank (ring's only peer) then waits 2 ms: ring's broadcast sends several
  // chunks down the chain, binomial's two of its messages, so measuring
  // must turn away from ring. A chooser that falls back to the model here
  // picks ring and fails.
  const std::string dir = temp_dir();
  scoped_env cache("RINGTREE_CACHE_DIR", dir);
  const std::string model = dir + "/model.txt";
  std::ofstream(model) << "alpha_us = 5\nbeta_ns_per_byte = 0.1\ngamma_ns_per_byte = 0.1\n";
  scoped_env file("RINGTREE_MODEL_FILE", model);
  const int n = 4;
  const std::size_t bytes = 1 << 20;
  auto choices = [&](config::tuning tune) {
    std::vector<algorithm> picked(n);
    local_world(n).run([&](local_transport& t) {
      rt_test::faulty_transport<local_transport> slow(t, -1, rt_test::fault::slow_to_next, 0, std::chrono::milliseconds(2));
      communicator comm(slow, communicator_options{.tune = tune});
      slow.arm();
      picked[t.rank()] = comm.choose(collective::broadcast, bytes);
    });
    return picked;
  };
  const auto by_model = choices(config::tuning::model);
  REQUIRE(by_model[0] == algorithm::ring);  // else this case tests nothing
  const auto measured = choices(config::tuning::fresh);
  MESSAGE("broadcast of 1 MiB, ring's messages slowed: measured ", to_string(measured[0]));
  CHECK(measured[0] != algorithm::ring);
  CHECK(detail::offers(collective::broadcast, measured[0]));
  for (int r = 1; r < n; ++r) CHECK(measured[r] == measured[0]);
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("tuning is bounded: every allreduce bin to 1 MiB on 2 ranks in well under a minute") {
  const std::string dir = temp_dir();
  scoped_env cache("RINGTREE_CACHE_DIR", dir);
  scoped_env tune("RINGTREE_TUNE", "1");
  const auto t0 = std::chrono::steady_clock::now();
  local_world(2).run([&](local_transport& t) { communicator<local_transport>(t).tune(collective::allreduce, 1 << 20); });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("tuning 21 allreduce bins on 2 threads took " << s << " s");
  CHECK(s < rt_test::scaled(std::chrono::seconds(30)).count());  // (ASan beside burners: 33 s unscaled)
  CHECK(slurp(dir + "/tuned-local-2ranks.txt").find("allreduce 1048576 = ") != std::string::npos);
  std::system(("rm -rf '" + dir + "'").c_str());
}
