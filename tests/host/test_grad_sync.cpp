#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/train/grad_sync.hpp>


using namespace ringtree;

#include "../train_check.hpp"

using namespace rt_train;

namespace {

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > tol * (1 + std::abs(b[i]))) FAIL_CHECK("parameter " << i << ": " << a[i] << " vs " << b[i]);
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("grad_sync: data-parallel training on 2, 3, 4 ranks equals one rank on the whole batch") {
  const auto alone = train_alone();
  for (int n : {2, 3, 4})
    for (bool shuffled : {false, true}) {
      CAPTURE(n);
      CAPTURE(shuffled);
      grad_sync_options opt;
      opt.bucket_bytes = 200;  // several buckets even for this small model
      opt.last_bucket_bytes = 100;
      std::vector<std::vector<float>> params(n);
      local_world world(n);
      world.run([&](local_transport& t) {
        communicator comm(t);
        params[t.rank()] = train_parallel(comm, opt, shuffled);
      });
      for (int r = 0; r < n; ++r) {
        CHECK(params[r] == params[0]);  // bitwise equal replicas
        expect_close(params[r], alone, 1e-5f);
      }
    }
}

TEST_CASE("grad_sync: buckets in reverse parameter order, a small one for the first parameters") {
  local_world world(2);
  world.run([](local_transport& t) {
    communicator comm(t);
    std::vector<std::vector<float>> g = {std::vector<float>(100), std::vector<float>(100), std::vector<float>(300),
                                         std::vector<float>(300), std::vector<float>(300)};
    std::vector<std::span<float>> spans(g.begin(), g.end());
    grad_sync_options opt;
    opt.bucket_bytes = 2400;       // 600 floats
    opt.last_bucket_bytes = 800;   // 200 floats: gradients 0 and 1
    grad_sync sync(comm, spans, opt);
    if (sync.buckets() != 3) throw error("test", t.rank(), detail::cat("expected 3 buckets, got ", sync.buckets()));
    // The first bucket to run holds the last parameters: it completes with only 3 and 4 ready.
    for (std::size_t i = 0; i < g.size(); ++i) std::fill(g[i].begin(), g[i].end(), float(t.rank() + 1));
    for (int i = 4; i >= 0; --i) sync.mark_ready(i);
    sync.synchronize();
    for (auto& v : g)
      if (v.front() != 1.5f || v.back() != 1.5f) throw error("test", t.rank(), "bucketed mean wrong");
  });
}

TEST_CASE("grad_sync: views put the gradients inside the bucket storage, no copy") {
  local_world world(3);
  world.run([](local_transport& t) {
    communicator comm(t);
    grad_sync<communicator<local_transport>, double> sync(comm, std::vector<std::size_t>{5, 7, 11},
                                                           grad_sync_options{.bucket_bytes = 64, .last_bucket_bytes = 40});
    for (std::size_t i = 0; i < sync.size(); ++i) {
      auto g = sync.gradient(i);
      if (g.size() != std::vector<std::size_t>{5, 7, 11}[i]) throw error("test", t.rank(), "view size wrong");
      std::fill(g.begin(), g.end(), double(t.rank()) * (i + 1));
      sync.mark_ready(i);
    }
    sync.synchronize();
    for (std::size_t i = 0; i < sync.size(); ++i)
      for (double v : sync.gradient(i))
        if (v != 1.0 * (i + 1)) throw error("test", t.rank(), detail::cat("view ", i, " holds ", v));
  });
}

TEST_CASE("grad_sync: accumulation without communication, sum instead of mean, 16-bit wire") {
  local_world world(2);
  world.run([](local_transport& t) {
    communicator comm(t);
    std::vector<float> g(1000, 0.0f);
    grad_sync sync(comm, std::vector<std::span<float>>{std::span<float>(g)}, grad_sync_options{.average = false});
    {
      auto guard = sync.no_sync();
      for (int micro = 0; micro < 3; ++micro) {  // three backward passes add up locally
        for (auto& v : g) v += 1.0f + t.rank();
        sync.mark_ready(0);
        sync.synchronize();  // no-op while accumulating
      }
      if (g[0] != 3.0f * (1 + t.rank())) throw error("test", t.rank(), "accumulation communicated");
    }
    sync.mark_ready(0);
    sync.synchronize();
    if (g[999] != 9.0f) throw error("test", t.rank(), detail::cat("sum of accumulated gradients is ", g[999]));

    std::vector<float> c(4096);
    std::mt19937 gen(t.rank());
    for (auto& v : c) v = std::uniform_real_distribution<float>(-1, 1)(gen);
    std::vector<float> exact = c;
    comm.allreduce(std::span<float>(exact), op::avg);
    for (auto w : {grad_sync_options::wire::half, grad_sync_options::wire::bfloat16}) {
      std::vector<float> d = c;
      grad_sync z(comm, std::vector<std::span<float>>{std::span<float>(d)}, grad_sync_options{.compression = w});
      z.mark_ready(0);
      z.synchronize();
      const float tol = w == grad_sync_options::wire::half ? 2e-3f : 2e-2f;
      for (std::size_t i = 0; i < d.size(); ++i)
        if (std::abs(d[i] - exact[i]) > tol) throw error("test", t.rank(), detail::cat("compressed mean off by ", d[i] - exact[i]));
    }
  });
}

TEST_CASE("grad_sync: ranks that register different gradients raise on every rank, naming index and ranks") {
  std::vector<std::string> msgs(3);
  local_world world(3);
  world.run([&](local_transport& t) {
    communicator comm(t);
    std::vector<float> a(10), b(t.rank() == 2 ? 21 : 20);
    try {
      grad_sync sync(comm, std::vector<std::span<float>>{std::span<float>(a), std::span<float>(b)});
    } catch (const error& e) {
      msgs[t.rank()] = e.what();
    }
  });
  for (auto& m : msgs) CHECK(has(m, "gradient 1 has 20 elements on rank 0 but other sizes on ranks 2 (21)"));
}

TEST_CASE("grad_sync: a gradient never marked ready raises on every rank, or counts as zero") {
  for (bool zero : {false, true}) {
    CAPTURE(zero);
    std::vector<std::string> msgs(2);
    std::vector<float> result(2);
    local_world world(2);
    world.run([&](local_transport& t) {
      communicator comm(t);
      std::vector<float> a(8, 1.0f), b(8, 2.0f), c(8, 4.0f);
      grad_sync sync(comm, std::vector<std::span<float>>{std::span<float>(a), std::span<float>(b), std::span<float>(c)},
                     grad_sync_options{.missing_as_zero = zero});
      sync.mark_ready(0);
      sync.mark_ready(2);
      if (t.rank() == 0) sync.mark_ready(1);
      try {
        sync.synchronize();
      } catch (const error& e) {
        msgs[t.rank()] = e.what();
      }
      result[t.rank()] = b[0];
      // the next step works
      for (std::size_t i = 0; i < 3; ++i) sync.mark_ready(i);
      sync.synchronize();
    });
    for (int r = 0; r < 2; ++r) {
      if (zero) {
        CHECK(msgs[r].empty());
        CHECK(result[r] == 1.0f);  // (2 + 0) / 2
      } else {
        CHECK(has(msgs[r], "gradient 1 was never marked ready (on rank 1)"));
      }
    }
  }
}
