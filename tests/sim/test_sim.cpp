// The simulator (include/ringtree/sim/): the real algorithms at rank counts
// no test machine has, checked element by element against a sequential
// reference; its virtual times against the closed form where the two must
// agree, and where contention must part them; determinism; deadlocks and
// bad schedules raise instead of hanging.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <ringtree/sim/collective.hpp>
#include <ringtree/trace/page.hpp>
#include <ringtree/teach/watch.hpp>

using namespace ringtree;

namespace {

constexpr collective checked[] = {collective::allreduce, collective::broadcast, collective::reduce, collective::reduce_scatter,
                                  collective::allgather};

sim::world make_world(std::vector<int> hosts, bool data = true) {
  sim::options o;
  o.hosts = std::move(hosts);
  o.data = data;
  return sim::world(o);
}

// Every row of the checked collectives that runs over messages on w, at
// each count; the first wrong result, or "".
std::string check_every_row(sim::world& w, const std::vector<std::size_t>& counts, int root) {
  for (collective c : checked)
    for (const auto& r : detail::rows) {
      if (r.what != c || !sim::runs(w, c, r.id, 1)) continue;
      for (std::size_t m : counts)
        if (auto bad = sim::check_call(w, {c, r.id, m, root}); !bad.empty()) return bad;
    }
  return {};
}

}  // namespace

TEST_CASE("every row is right at every rank count from 1 to 64") {
  for (int n = 1; n <= 64; ++n) {
    auto w = make_world({n});
    const std::size_t un = static_cast<std::size_t>(n);
    // one element, fewer than ranks, not divisible, larger than a chunk of some rows
    const std::vector<std::size_t> counts = n <= 8 ? std::vector<std::size_t>{0, 1, un > 1 ? un - 1 : 1, 3 * un + 1, 20000}
                                                   : std::vector<std::size_t>{1, un - 1, 3 * un + 1};
    const std::string bad = check_every_row(w, counts, (n * 5) / 7);
    CHECK_MESSAGE(bad.empty(), bad);
  }
}

TEST_CASE("every row is right on hosts, even and uneven, the hierarchical ones too") {
  const std::vector<std::vector<int>> layouts = {{1, 1}, {2, 2}, {3, 1}, {1, 7}, {4, 4, 4}, {8, 8, 3}, {5, 5, 5, 5, 4},
                                                 {2, 3, 5, 7}, std::vector<int>(16, 4), std::vector<int>(9, 7)};
  for (const auto& hosts : layouts) {
    auto w = make_world(hosts);
    const std::size_t un = static_cast<std::size_t>(w.size());
    const std::string bad = check_every_row(w, {1, un - 1, 2 * un + 3}, w.size() - 1);
    CHECK_MESSAGE(bad.empty(), w.layout().describe() << ": " << bad);
  }
}

TEST_CASE("rows are right at hundreds of ranks: primes, powers of two and one more, uneven hosts") {
  const std::vector<std::vector<int>> layouts = {{127}, {129}, {257}, {251}, std::vector<int>(64, 8), {509},
                                                 [] { auto v = std::vector<int>(63, 8); v.push_back(5); return v; }(),
                                                 std::vector<int>(128, 8)};
  for (const auto& hosts : layouts) {
    auto w = make_world(hosts);
    const std::size_t un = static_cast<std::size_t>(w.size());
    for (collective c : checked)
      for (algorithm a : {algorithm::ring, algorithm::tree, algorithm::rabenseifner, algorithm::hierarchical, algorithm::automatic})
        if ((a == algorithm::automatic || detail::offers(c, a)) && sim::runs(w, c, a, un)) {
          // more elements than ranks, not divisible; blocks of 3 where every rank holds n blocks
          const bool blocks = c == collective::reduce_scatter || c == collective::allgather;
          const std::string bad = sim::check_call(w, {c, a, blocks ? 3 : un + 3, w.size() / 3});
          CHECK_MESSAGE(bad.empty(), bad);
        }
  }
}

TEST_CASE("the same inputs give the same virtual times, bit for bit") {
  std::vector<sim::picoseconds> first;
  for (int k = 0; k < 3; ++k) {
    auto w = make_world({8, 8, 5}, k == 2);  // with data or without: the same schedule
    sim::time_call<float>(w, {collective::allreduce, algorithm::hierarchical, 100003});
    std::vector<sim::picoseconds> t;
    for (int r = 0; r < w.size(); ++r) t.push_back(w.finished_ps(r));
    if (k == 0) first = t;
    else CHECK(t == first);
  }
}

TEST_CASE("a ring on one host takes exactly the closed form's time") {
  // One chunk per block and nothing to wait for: every step is alpha +
  // block * beta, then the block's reduction, as the model adds them.
  for (int n : {2, 5, 8}) {
    sim::options o;
    o.hosts = {n};
    o.data = false;
    o.net = {2e-6, 0.1e-9, -1, -1, 0.03e-9, 1, 8192, 1.5e-6};  // (blocks of 16 KiB: above the knee)
    sim::world w(o);
    const std::size_t count = 4096 * static_cast<std::size_t>(n);
    const double s = sim::time_call<float>(w, {collective::allreduce, algorithm::ring, count});
    const double model = sim::model_of(w).seconds(collective::allreduce, algorithm::ring, count * 4);
    CHECK(s == doctest::Approx(model).epsilon(1e-9));
    CHECK(w.stats().messages == 2u * n * (n - 1));
  }
}

TEST_CASE("ranks of a host that cross to other hosts at once share its link") {
  // Recursive doubling on 2 hosts of 4: in the last step all 4 ranks of a
  // host send over its one link. Hierarchical sends each byte once.
  sim::options o;
  o.hosts = {4, 4};
  o.data = false;
  o.net = {1e-6, 0.01e-9, 10e-6, 1e-9, 0, 1, 0, 0};
  sim::world w(o);
  const std::size_t count = std::size_t{1} << 22;
  const auto model = sim::model_of(w);
  const double rd = sim::time_call<float>(w, {collective::allreduce, algorithm::recursive_doubling, count});
  // distances 1 and 2 within the host, then 4 messages of B one after the other on the link
  const double B = count * 4.0;
  CHECK(rd == doctest::Approx(2 * (1e-6 + B * 0.01e-9) + 4 * B * 1e-9 + 10e-6).epsilon(1e-6));
  // the closed form counts the 4 ranks on the link too (and prices the
  // steps within a host at the link's rate: never more hopeful than this)
  CHECK(model.seconds(collective::allreduce, algorithm::recursive_doubling, count * 4) >= rd);
  const double h = sim::time_call<float>(w, {collective::allreduce, algorithm::hierarchical, count});
  CHECK(h == doctest::Approx(model.seconds(collective::allreduce, algorithm::hierarchical, count * 4)).epsilon(0.1));
  // with the ranks' links shared 4 ways, the flat ring crosses hosts on 1 link
  CHECK(rd > 2 * h);
}

TEST_CASE("two hosts sending to a third at once share its receiving link") {
  // Hosts of one rank each: ranks 0 and 1 each send B bytes to rank 2 at
  // time 0. Their sending links are separate, so only host 2's receiving
  // link can order them: one message crosses in B * beta_net, the other
  // after it, and rank 2 has both 2 B beta_net + alpha_net after the start.
  // (A receiving link that took both at once would give B beta_net + alpha_net.)
  sim::options o;
  o.hosts = {1, 1, 1};
  o.data = false;
  const double alpha_net = 10e-6, beta_net = 1e-9;
  o.net = {1e-6, 0.01e-9, alpha_net, beta_net, 0, 1, 0, 0};
  sim::world w(o);
  const std::size_t B = std::size_t{1} << 20;
  w.run([&](auto& t) {
    auto buffer = w.nowhere<std::byte>(B);
    if (t.rank() < 2) {
      auto r = t.isend(2, buffer);
      t.wait(r);
    } else {
      auto a = t.irecv(0, buffer);
      auto b = t.irecv(1, buffer);
      t.wait(a);
      t.wait(b);
    }
  });
  const double cross = static_cast<double>(B) * beta_net;
  CHECK(sim::seconds(w.finished_ps(2)) == doctest::Approx(2 * cross + alpha_net).epsilon(1e-6));
  // the senders: one crossed at once, the other waited for the link
  const double s0 = sim::seconds(w.finished_ps(0)), s1 = sim::seconds(w.finished_ps(1));
  CHECK(std::min(s0, s1) == doctest::Approx(cross).epsilon(1e-6));
  CHECK(std::max(s0, s1) == doctest::Approx(2 * cross).epsilon(1e-6));
  CHECK(w.stats().messages == 2u);
}

TEST_CASE("a schedule that can never finish raises, naming who waits for what") {
  auto w = make_world({3});
  std::vector<int> v(4);
  try {
    w.run([&](sim::transport& t) {
      if (t.rank() == 2) return;
      std::vector<int> mine(4);
      auto r = t.irecv(1 - t.rank(), std::as_writable_bytes(std::span<int>(mine)));
      auto s = t.irecv(2, std::as_writable_bytes(std::span<int>(mine)));  // rank 2 never sends
      t.wait(r);
      t.wait(s);
    });
    FAIL("no deadlock reported");
  } catch (const error& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find("deadlock") != std::string::npos, what);
    CHECK_MESSAGE(what.find("rank 0 waits to receive 16 bytes from rank 1") != std::string::npos, what);
  }
  // the world is usable after it
  CHECK(sim::check_call(w, {collective::allreduce, algorithm::ring, 7, 0}).empty());
}

TEST_CASE("mismatched sizes and a rank's error stop the run and name it") {
  auto w = make_world({2});
  CHECK_THROWS_WITH_AS(w.run([](sim::transport& t) {
    std::vector<int> v(t.rank() == 0 ? 3 : 4);
    if (t.rank() == 0) {
      auto s = t.isend(1, std::as_bytes(std::span<int>(v)));
      t.wait(s);
    } else {
      auto r = t.irecv(0, std::as_writable_bytes(std::span<int>(v)));
      t.wait(r);
    }
  }), doctest::Contains("rank 0 sends 12 bytes to rank 1, which receives 16"), error);
  CHECK_THROWS_WITH_AS(w.run([](sim::transport& t) {
    if (t.rank() == 1) throw error("test", 1, "rank 1 gives up");
    std::vector<int> v(2);
    auto r = t.irecv(1, std::as_writable_bytes(std::span<int>(v)));
    t.wait(r);
  }), doctest::Contains("rank 1 gives up"), error);
  CHECK_THROWS_WITH_AS(w.run([](sim::transport& t) { (void)t.isend(t.rank(), {}); }), doctest::Contains("is not another rank of 2"), error);
}

TEST_CASE("without data nothing is touched: a thousand ranks and a gigabyte") {
  auto w = make_world(std::vector<int>(128, 8), false);
  const double s = sim::time_call<float>(w, {collective::allreduce, algorithm::hierarchical, std::size_t{1} << 28});
  CHECK(s > 0);
  CHECK(w.stats().bytes > (std::uint64_t{1} << 30));
  CHECK_THROWS_WITH_AS(sim::check_call(w, {collective::allreduce, algorithm::ring, 4, 0}), doctest::Contains("needs a world with data"), error);
}

TEST_CASE("the closed form counts a host's ranks that cross at once in the hypercube algorithms") {
  // Hosts of 8 numbered host by host: distances 1, 2, 4 stay in the host,
  // from 8 on all 8 ranks of a host use its link; round-robin hosts cross at 1.
  const auto even = host_shape::even(4, 8);
  CHECK(even.cube[0] == 0);
  CHECK(even.cube[2] == 0);
  CHECK(even.cube[3] == 8);
  CHECK(even.cube[4] == 8);
  const std::vector<std::uint64_t> round_robin = {0, 1, 0, 1, 0, 1};
  const auto rr = host_shape::of(host_layout(round_robin));
  CHECK(rr.cube[0] == 2);  // of the 4 ranks a hypercube runs on, host 0 has 0 and 2
  CHECK(rr.cube[1] == 0);
  // The closed form now within 25% of the simulator across hosts, where it
  // was 3 to 6 times too hopeful; and automatic no longer picks them there.
  for (int hosts : {2, 4, 16}) {
    sim::options o;
    o.hosts = std::vector<int>(hosts, 8);
    o.data = false;
    o.net = {1e-6, 0.05e-9, 5e-6, 0.08e-9, 0.05e-9, 1, 0, 0};
    sim::world w(o);
    const auto model = sim::model_of(w);
    const std::size_t count = std::size_t{4} << 20;  // 16 MiB of floats
    for (algorithm a : {algorithm::recursive_doubling, algorithm::rabenseifner}) {
      const double s = sim::time_call<float>(w, {collective::allreduce, a, count});
      CAPTURE(hosts);
      CAPTURE(to_string(a));
      CHECK(s == doctest::Approx(model.seconds(collective::allreduce, a, count * 4)).epsilon(0.25));
    }
    const algorithm pick = model.choose(collective::allreduce, count * 4);
    CHECK(pick != algorithm::rabenseifner);
    CHECK(pick != algorithm::recursive_doubling);
  }
}

TEST_CASE("a simulated teaching run tells the story threads tell") {
  for (auto [what, algo, hosts] : {std::tuple{collective::allreduce, algorithm::ring, 1}, std::tuple{collective::allreduce, algorithm::hierarchical, 3},
                                   std::tuple{collective::reduce_scatter, algorithm::ring, 1}, std::tuple{collective::broadcast, algorithm::tree, 2}}) {
    watch_options o;
    o.what = what;
    o.algo = algo;
    o.ranks = 9;
    o.root = 4;
    o.count = 5;
    o.hosts = hosts;
    const trace_story threads = watch(o);
    o.simulate = true;
    const trace_story simulated = watch(o);
    std::ostringstream a, b;
    write_json(a, threads);
    write_json(b, simulated);
    CHECK_MESSAGE(a.str() == b.str(), to_string(what), " ", to_string(algo));
  }
}
