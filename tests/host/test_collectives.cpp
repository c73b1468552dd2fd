#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>

#include "tools/collective_check.hpp"
#include "host_check.hpp"

using namespace ringtree;

namespace {

// Small chunks, so that a few hundred elements already run the pipelines
// through many chunks and their partial last chunk.
communicator_options tiny_chunks() {
  communicator_options o;
  o.checked = true;  // also exercises checked mode on every call
  o.chunks.ring_chunk_bytes = 64;
  o.chunks.tree_chunk_bytes = 24;
  o.chunks.chain_chunk_bytes = 40;
  o.chunks.stream_bytes = 256;  // streamed two-shot: segments of 128 bytes, both halves in turn
  return o;
}

template <class... Es>
std::vector<std::string> run_all(int n, const std::vector<std::size_t>& counts, communicator_options opt) {
  return rt_test::run_world<Es...>(n, counts, opt);
}

using rt_test::expect_none;

}  // namespace

TEST_CASE("every collective, algorithm and op matches the sequential reference at 1..16 ranks") {
  for (int n = 1; n <= rt_test::max_ranks(16); ++n) {
    CAPTURE(n);
    expect_none(run_all<float, std::int32_t, half, std::uint8_t>(n, rt_test::edge_counts(n), tiny_chunks()));
  }
}

TEST_CASE("the other element types, at rank counts 3 and 5") {
  for (int n : {3, 5}) {
    CAPTURE(n);
    expect_none(run_all<double, std::int64_t, bfloat16, std::int8_t, std::int16_t, std::uint16_t, std::uint32_t,
                        std::uint64_t>(n, {0, 1, 7, 200}, tiny_chunks()));
  }
}

TEST_CASE("default pipeline sizes with buffers of several chunks") {
  communicator_options opt;
  for (int n : {2, 3, 4}) {
    if (rt_test::max_ranks(16) < 16 && n != 3) continue;  // sanitizer runs: the odd count only
    CAPTURE(n);
    expect_none(run_all<float>(n, {300'001}, opt));
  }
}

TEST_CASE("allreduce is bitwise identical on every rank and on every run, for every algorithm") {
  for (int n : {2, 3, 7}) {
    for (algorithm a : {algorithm::ring, algorithm::tree, algorithm::recursive_doubling, algorithm::rabenseifner}) {
      CAPTURE(n);
      CAPTURE(to_string(a));
      std::vector<std::vector<float>> results(n);
      for (int run = 0; run < 2; ++run) {
        local_world world(n);
        world.run([&](local_transport& t) {
          communicator comm(t, tiny_chunks());
          std::mt19937 g(1234 + t.rank());
          std::vector<float> v(1001);
          for (auto& x : v) x = std::uniform_real_distribution<float>(-1, 1)(g);  // rounding depends on order
          comm.allreduce(std::span<float>(v), op::sum, a);
          if (run == 0) results[t.rank()] = v;
          else if (std::memcmp(v.data(), results[t.rank()].data(), v.size() * sizeof(float)) != 0)
            throw std::runtime_error("second run differs on rank " + std::to_string(t.rank()));
        });
      }
      for (int r = 1; r < n; ++r)
        CHECK(std::memcmp(results[r].data(), results[0].data(), results[0].size() * sizeof(float)) == 0);
      // and it is the sum, up to rounding
      double want = 0;
      for (int r = 0; r < n; ++r) {
        std::mt19937 g(1234 + r);
        want += std::uniform_real_distribution<float>(-1, 1)(g);
      }
      CHECK(results[0][0] == doctest::Approx(want).epsilon(1e-5));
    }
  }
}

TEST_CASE("in-place and out-of-place allreduce agree; allgather accepts its own block in place") {
  local_world world(4);
  world.run([](local_transport& t) {
    communicator comm(t);
    std::vector<int> a(10, t.rank() + 1), b(10, 0);
    comm.allreduce(std::span<const int>(a), std::span<int>(b));
    comm.allreduce(std::span<int>(a));
    if (a != b || a[0] != 10) throw std::runtime_error("in-place differs");
    std::vector<int> all(8, -1);
    all[2 * t.rank()] = t.rank();
    all[2 * t.rank() + 1] = 10 * t.rank();
    comm.allgather(std::span<const int>(all).subspan(2 * t.rank(), 2), std::span<int>(all));
    for (int r = 0; r < 4; ++r)
      if (all[2 * r] != r || all[2 * r + 1] != 10 * r) throw std::runtime_error("in-place allgather wrong");
  });
}
