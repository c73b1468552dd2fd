#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/train/grad_sync.hpp>
#include <ringtree/transport/shm.hpp>

#include "process_check.hpp"


using namespace ringtree;
using namespace std::chrono_literals;

#include "train_check.hpp"
#include "host_check.hpp"

using namespace rt_test::train;

namespace {

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > tol * (1 + std::abs(b[i]))) FAIL_CHECK("parameter " << i << ": " << a[i] << " vs " << b[i]);
}
using rt_test::has;

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

// ---- Nothing silent: failed steps, a rank a step behind, a second
// synchronize, buckets of several pieces. Every step on every rank must
// either raise or give the exact mean; a normal return with other numbers
// is the failure these tests exist for.
namespace {

// Fails (throws, before posting anything) the first post after arm(): a
// clean failure at a chosen step.
template <class T>
class failing_transport {
 public:
  using request = typename T::request;
  using memory_type = memory_of<T>;
  static constexpr const char* name = detail::transport_name<T>();
  static constexpr bool in_process = detail::transport_in_process<T>();
  explicit failing_transport(T& inner) : inner_(&inner) {}
  int rank() const noexcept { return inner_->rank(); }
  int size() const noexcept { return inner_->size(); }
  memory_type memory() const noexcept { return inner_->memory(); }
  request isend(int peer, std::span<const std::byte> d) { trip(); return inner_->isend(peer, d); }
  request irecv(int peer, std::span<std::byte> d) { trip(); return inner_->irecv(peer, d); }
  void wait(request& r) { inner_->wait(r); }
  void arm() { armed_ = true; }

 private:
  void trip() {
    if (armed_.exchange(false)) throw std::runtime_error("injected failure before any message");
  }
  T* inner_;
  std::atomic<bool> armed_{false};
};

// Gradients that straddle pieces of 16 bytes (4 floats) and buckets of
// several pieces: sizes 5, 7, 3, 6 floats.
const std::vector<std::size_t> grad_sizes = {5, 7, 3, 6};
float grad_value(int rank, int step, std::size_t k, std::size_t i) {
  return static_cast<float>(1000 * (step + 1) + 100 * k + i + 2 * rank);
}

// Runs `steps` steps of grad_sync on `t`; at the steps listed for this rank,
// its first post fails. Returns one word per step: "ok", "raised: ...", or
// "WRONG: ..." (a normal return with a wrong mean).
// `many_buckets`: 64 gradients in 64 buckets, all ready at once, so that
// after a failure the worker has a long walk over the rest of the step
// while synchronize() runs (the window in which a reset used to race it).
template <class T>
std::vector<std::string> run_steps(T& t, int steps, const std::vector<int>& fail_at, bool second_sync = false,
                                   bool many_buckets = false) {
  failing_transport<T> ft(t);
  communicator comm(ft, communicator_options{.model = cost_model{}});
  const int n = comm.size();
  std::vector<std::vector<float>> g;
  std::vector<std::span<float>> spans;
  for (auto sz : many_buckets ? std::vector<std::size_t>(64, 3) : grad_sizes) g.emplace_back(sz);
  for (auto& v : g) spans.emplace_back(v);
  grad_sync sync(comm, spans, many_buckets ? grad_sync_options{.bucket_bytes = 12, .last_bucket_bytes = 12}
                                           : grad_sync_options{.bucket_bytes = 48, .last_bucket_bytes = 20, .piece_bytes = 16});
  std::vector<std::string> out;
  for (int s = 0; s < steps; ++s) {
    for (std::size_t k = 0; k < g.size(); ++k)
      for (std::size_t i = 0; i < g[k].size(); ++i) g[k][i] = grad_value(comm.rank(), s, k, i);
    if (std::find(fail_at.begin(), fail_at.end(), s) != fail_at.end()) ft.arm();
    try {
      // many_buckets: marked first to last, so that every bucket becomes
      // ready at the last mark and the worker's walk overlaps synchronize()
      if (many_buckets) for (std::size_t k = 0; k < g.size(); ++k) sync.mark_ready(k);
      else for (std::size_t k = g.size(); k-- > 0;) sync.mark_ready(k);
      sync.synchronize();
      if (second_sync) {
        try {
          sync.synchronize();
          out.push_back("WRONG: a second synchronize returned normally");
          continue;
        } catch (const error& e) {
          if (!has(e.what(), "call it once per step")) throw;
        }
      }
      std::string verdict = "ok";
      for (std::size_t k = 0; k < g.size() && verdict == "ok"; ++k)
        for (std::size_t i = 0; i < g[k].size(); ++i) {
          const float want = static_cast<float>(1000 * (s + 1) + 100 * k + i + (n - 1));
          if (g[k][i] != want) {
            verdict = detail::cat("WRONG: step ", s, " gradient ", k, "[", i, "] = ", g[k][i], ", expected ", want);
            break;
          }
        }
      out.push_back(verdict);
    } catch (const std::exception& e) {
      out.push_back(std::string("raised: ") + e.what());
    }
  }
  return out;
}

// The same on n forked processes over shared memory; each rank's words,
// one per line.
std::vector<std::vector<std::string>> run_steps_shm(int n, int steps, const std::vector<std::vector<int>>& fail_at) {
  const std::string name = detail::cat("/ringtree-test-gsync-", getpid());
  auto res = rt_test::run_processes(n, [&](int rank, FILE* out) {
    shm_options opt;
    opt.timeout = rt_test::scaled(10s);  // a hang guard
    shm_transport t(name, rank, n, opt);
    for (auto& w : run_steps(t, steps, fail_at[rank])) std::fprintf(out, "%s\n", w.substr(0, 300).c_str());
    return 0;
  });
  std::vector<std::vector<std::string>> words(n);
  for (int r = 0; r < n; ++r) {
    CHECK_MESSAGE((WIFEXITED(res[r].status) && WEXITSTATUS(res[r].status) == 0), res[r].text);
    std::size_t at = 0;
    for (std::size_t nl; (nl = res[r].text.find('\n', at)) != std::string::npos; at = nl + 1)
      words[r].push_back(res[r].text.substr(at, nl - at));
  }
  return words;
}

std::vector<std::vector<std::string>> run_steps_threads(int n, int steps, const std::vector<std::vector<int>>& fail_at,
                                                        bool second_sync = false, bool many_buckets = false) {
  std::vector<std::vector<std::string>> words(n);
  local_world world(n, rt_test::scaled(5s));
  world.run([&](local_transport& t) {
    words[t.rank()] = run_steps(t, steps, fail_at[t.rank()], second_sync, many_buckets);
  });
  return words;
}

void never_wrong(const std::vector<std::vector<std::string>>& words) {
  for (std::size_t r = 0; r < words.size(); ++r)
    for (std::size_t s = 0; s < words[r].size(); ++s) {
      CAPTURE(r);
      CAPTURE(s);
      CHECK_MESSAGE(words[r][s].rfind("WRONG", 0) != 0, words[r][s]);
    }
}

}  // namespace

TEST_CASE("grad_sync: buckets of several pieces, gradients straddling them, give the exact mean") {
  for (int n : {2, 3}) {
    CAPTURE(n);
    const auto words = run_steps_threads(n, 3, std::vector<std::vector<int>>(n));
    for (auto& w : words) CHECK(w == std::vector<std::string>(3, "ok"));
  }
}

TEST_CASE("grad_sync: good steps after steps that failed on every rank are exact (threads, many times)") {
  const std::vector<std::string> want = {"ok", "raised", "raised", "ok", "raised", "ok", "ok"};
  for (int rep = 0; rep < 100; ++rep) {
    CAPTURE(rep);
    const auto words = run_steps_threads(2, 7, {{1, 2, 4}, {1, 2, 4}}, false, rep % 2 == 1);
    never_wrong(words);
    for (auto& w : words)
      for (std::size_t s = 0; s < want.size(); ++s) CHECK(w[s].rfind(want[s], 0) == 0);
  }
}

TEST_CASE("shm: grad_sync: good steps after steps that failed on every rank are exact") {
  const std::vector<std::string> want = {"ok", "raised", "ok", "raised", "ok"};
  for (int rep = 0; rep < 4; ++rep) {
    CAPTURE(rep);
    const auto words = run_steps_shm(2, 5, {{1, 3}, {1, 3}});
    never_wrong(words);
    for (auto& w : words) {
      REQUIRE(w.size() == want.size());
      for (std::size_t s = 0; s < want.size(); ++s) CHECK(w[s].rfind(want[s], 0) == 0);
    }
  }
}

// Rank 1's step 1 fails, it goes on: rank 0's step 1 pairs with its step 2.
void expect_step_mismatch_raised(const std::vector<std::vector<std::string>>& words) {
  never_wrong(words);
  CHECK(words[0][0] == "ok");
  CHECK(words[1][0] == "ok");
  CHECK(words[1][1].rfind("raised: injected", 0) == 0);  // its own failure
  CHECK_MESSAGE(has(words[0][1], "ranks are at different steps"), words[0][1]);
}

TEST_CASE("grad_sync: a rank that goes on after a failed step makes every rank raise, never average across steps") {
  expect_step_mismatch_raised(run_steps_threads(2, 4, {{}, {1}}));
}

TEST_CASE("shm: grad_sync: a rank that goes on after a failed step makes every rank raise") {
  expect_step_mismatch_raised(run_steps_shm(2, 4, {{}, {1}}));
}

TEST_CASE("grad_sync: a second synchronize in one step raises instead of zeroing the mean") {
  const auto words = run_steps_threads(2, 3, {{}, {}}, true);
  never_wrong(words);
  for (auto& w : words) CHECK(w == std::vector<std::string>(3, "ok"));
  // with missing_as_zero too (it used to zero the gradients silently)
  local_world world(2);
  world.run([](local_transport& t) {
    communicator comm(t);
    std::vector<float> a(4, 1.0f + t.rank());
    grad_sync sync(comm, std::vector<std::span<float>>{std::span<float>(a)}, grad_sync_options{.missing_as_zero = true});
    sync.mark_ready(0);
    sync.synchronize();
    CHECK(a[0] == 1.5f);
    CHECK_THROWS_WITH_AS(sync.synchronize(), doctest::Contains("called again in step 0"), error);
    CHECK(a[0] == 1.5f);
    sync.mark_ready(0);  // the next step works
    sync.synchronize();
    CHECK(a[0] == 1.5f);
  });
}
