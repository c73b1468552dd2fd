// Symmetric buffers (comm.allocate) and the direct algorithms on them,
// between threads (local_world); the same checks between processes are in
// test_shm.cpp and the MPI suite.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>

#include "tools/collective_check.hpp"
#include "host_check.hpp"

using namespace ringtree;

namespace {

using rt_test::expect_none;

template <class... Es>
std::vector<std::string> run_symmetric(int n, const std::vector<std::size_t>& counts, communicator_options opt) {
  return rt_test::run_world<Es...>(n, counts, opt, true);
}

communicator_options small_steps() {
  communicator_options o;
  o.checked = true;
  o.chunks.direct_chunk_bytes = 64;  // two-shot in many steps even at small counts
  return o;
}

}  // namespace

// Every count to 8, then odd, even and power-of-two ones to 16: the direct
// algorithms' rank arithmetic is blocks and rank order, and every count
// from 1 to 16 took a minute of the suite's 3 (CI has 30 minutes).
TEST_CASE("symmetric buffers: every direct algorithm matches the reference at 1..8, 11, 12 and 16 ranks") {
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 16}) {
    if (n > rt_test::max_ranks(16)) break;
    CAPTURE(n);
    expect_none(run_symmetric<float, std::int32_t, half, std::uint8_t>(n, rt_test::edge_counts(n), small_steps()));
  }
}

TEST_CASE("symmetric buffers: the other element types, and default steps with large buffers") {
  for (int n : {3, 5}) {
    CAPTURE(n);
    expect_none(run_symmetric<double, std::int64_t, bfloat16, std::int8_t, std::int16_t, std::uint16_t, std::uint32_t,
                              std::uint64_t>(n, {0, 1, 7, 200}, small_steps()));
  }
  for (int n : {2, 3, 4}) {
    CAPTURE(n);
    expect_none(run_symmetric<float>(n, {300'001}, communicator_options{}));
  }
}

TEST_CASE("symmetric buffers: allreduce is bitwise identical on every rank, one-shot and two-shot") {
  for (int n : {2, 3, 7}) {
    CAPTURE(n);
    const std::size_t count = 10'007;
    std::vector<std::vector<float>> got(n);
    local_world(n).run([&](local_transport& t) {
      communicator comm(t, small_steps());
      auto buf = comm.allocate<float>(count);
      CHECK(buf.shared());
      for (algorithm a : {algorithm::one_shot, algorithm::two_shot}) {
        std::uint32_t x = 12345u + 77u * t.rank();
        for (auto& v : buf) {  // values whose sums round differently in different orders
          x = x * 1664525u + 1013904223u;
          v = static_cast<float>(x) / 4294967296.0f * 1e3f + 1e-3f * static_cast<float>(x % 97);
        }
        comm.allreduce(buf, op::sum, a);
        got[t.rank()].assign(buf.begin(), buf.end());
        comm.barrier();
        for (int r = 1; r < n; ++r) CHECK(std::memcmp(got[r].data(), got[0].data(), count * sizeof(float)) == 0);
        comm.barrier();
      }
    });
  }
}

TEST_CASE("symmetric buffers: spans inside a buffer, automatic, and the plain algorithms on it") {
  local_world(4).run([](local_transport& t) {
    communicator comm(t, communicator_options{.checked = true});
    auto buf = comm.allocate<int>(1000);
    CHECK(buf.size() == 1000);
    CHECK(buf.data() == buf.span().data());
    auto part = buf.span().subspan(100, 301);  // any span inside the buffer
    for (algorithm a : {algorithm::automatic, algorithm::ring, algorithm::tree, algorithm::two_shot}) {
      for (auto& v : part) v = t.rank() + 1;
      comm.allreduce(part, op::sum, a);
      for (int v : part) CHECK(v == 10);
    }
    // a private buffer runs direct only where it fits the staging slots; two-shot streams it through staging
    std::vector<int> priv(2100, 1);
    CHECK_THROWS_WITH_AS(comm.broadcast(std::span<int>(priv), 0, algorithm::direct),
                         doctest::Contains("algorithm direct is not available for broadcast of 8400 bytes"), error);
    std::vector<int> small(10, t.rank() == 2 ? 7 : 0);
    comm.broadcast(std::span<int>(small), 2, algorithm::direct);
    for (int v : small) CHECK(v == 7);
    comm.allreduce(priv, op::sum, algorithm::two_shot);
    for (int v : priv) CHECK(v == 4);
  });
}

TEST_CASE("symmetric buffers: mismatched calls raise instead of reading the wrong memory") {
  SUBCASE("different counts to allocate") {
    local_world(3).run([](local_transport& t) {
      communicator comm(t);
      CHECK_THROWS_WITH_AS(comm.allocate<float>(t.rank() == 2 ? 5 : 4),
                           doctest::Contains("every rank must allocate the same count; rank 0 asked for 4, but rank 2: 5"), error);
    });
  }
  SUBCASE("checked mode names a rank that passed private memory") {
    local_world(3).run([](local_transport& t) {
      communicator comm(t, communicator_options{.checked = true});
      auto buf = comm.allocate<float>(16);
      std::vector<float> priv(16);
      CHECK_THROWS_WITH_AS(comm.allreduce(t.rank() == 1 ? std::span<float>(priv) : buf.span()),
                           doctest::Contains("differ from rank 0 in symmetric buffer"), error);
    });
  }
  // Both ranks raise; the second may learn first that the other failed.
  // At least one must name the mismatch.
  // 64: both stage; 4096: rank 0's 4 KiB stages, rank 1's 8 KiB does not
  // (each waits on a count the other never moves); 8192: epoch lines
  for (std::size_t count : {std::size_t{64}, std::size_t{4096}, std::size_t{8192}}) {
    CAPTURE(count);
    std::vector<std::string> said(2);
    local_world(2).run([&](local_transport& t) {
      communicator comm(t);
      auto buf = comm.allocate<float>(2 * count);
      try {
        comm.allreduce(buf.span().first(t.rank() == 0 ? count / 4 : count / 2), op::sum, algorithm::one_shot);
      } catch (const error& e) {
        said[t.rank()] = e.what();
      }
    });
    for (auto& m : said) CHECK_MESSAGE((m.find("called a different collective") != std::string::npos ||
                                        m.find("failed in a direct call") != std::string::npos), m);
    CHECK((said[0].find("called a different collective") != std::string::npos ||
           said[1].find("called a different collective") != std::string::npos));
  }
}

TEST_CASE("symmetric buffers: a rank that fails is named by the ranks that wait for it, at once") {
  local_world world(3, std::chrono::seconds(30));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(world.run([](local_transport& t) {
    communicator comm(t);
    auto buf = comm.allocate<float>(1 << 16);
    comm.allreduce(buf);
    if (t.rank() == 2) throw error("test", 2, "rank 2 gives up");
    comm.allreduce(buf);  // the others wait for rank 2 here
  }), doctest::Contains("rank 2"), error);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
}

// A peer that reaches the awaited phase and then leaves (its last call
// done, its transport gone) between two looks of a waiting rank: the rank
// saw the old phase, then finds the peer gone. The peer did its part, so
// the wait returns. (Between processes this made a slower rank raise
// "rank r left the communicator" about once in 150 short jobs under load.)
TEST_CASE("symmetric buffers: a peer that reaches the phase and leaves between two looks is not a failure; the first look at it comes check_every into the wait") {
  constexpr std::uint64_t target = (std::uint64_t{7} << 24) | 3;
  // each rank's control memory: its epoch line, then its staging slots (zeros: no staged call yet)
  struct alignas(64) control_memory { std::byte bytes[detail::control_bytes]; };
  std::vector<control_memory> memory(2);
  detail::epoch_line* lines[2] = {new (memory[0].bytes) detail::epoch_line{}, new (memory[1].bytes) detail::epoch_line{}};
  shared_mapping control;
  control.bases = {memory[0].bytes, memory[1].bytes};
  control.bytes = detail::control_bytes;
  control.timeout = std::chrono::seconds(10);
  int asked = 0;
  std::chrono::steady_clock::duration asked_after{};
  const auto began = std::chrono::steady_clock::now();
  control.peer_problem = [&](int q) -> std::string {
    if (++asked == 1) asked_after = std::chrono::steady_clock::now() - began;
    lines[q]->seq.store(target, std::memory_order_release);  // its last phase, then it leaves
    return "rank 1 left the communicator";
  };
  detail::symmetric_heap heap(0, 2, std::move(control), 2);
  CHECK_NOTHROW(heap.wait("allreduce", 1, target));
  CHECK(asked == 1);
  // The peer is looked at check_every into the long wait, not at its
  // start: a look reads /proc, and where ranks outnumber the cores most
  // waits of a small call get that far (one such read a wait made a small
  // broadcast at 4 ranks on 2 cores 3x slower).
  CHECK(asked_after >= detail::patience::check_every);

  // A peer that is gone without reaching the phase is still named.
  lines[1]->seq.store(0);
  CHECK_THROWS_WITH_AS(heap.wait("allreduce", 1, target + 1), doctest::Contains("rank 1 left"), error);
}

// Staged calls (private buffers up to the slot's capacity): a rank that
// reads nothing returns without waiting for anyone, and a slot is never
// written again before every peer has read it.
TEST_CASE("staged calls: a broadcast's root runs stage_slots calls ahead, and never overwrites what a peer has yet to read") {
  local_world(3, std::chrono::seconds(60)).run([](local_transport& t) {
    static std::atomic<bool> root_ahead{false};
    root_ahead = false;
    communicator comm(t);
    std::vector<int> warm(4, 1);
    comm.allreduce(warm, op::sum, algorithm::ring);  // maps the control memory (every rank takes part); stages nothing
    auto bcast = [&](int k) {
      std::vector<int> v(8, t.rank() == 0 ? k : -1);
      comm.broadcast(std::span<int>(v), 0, algorithm::direct);
      for (int x : v) CHECK(x == k);
    };
    // The root's first stage_slots broadcasts finish before rank 2 has
    // started any: were the root waiting for its readers, this would hang
    // (60 s: the timeout).
    constexpr int ahead = static_cast<int>(detail::stage_slots);
    if (t.rank() == 2)
      for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(50); !root_ahead;)
        REQUIRE(std::chrono::steady_clock::now() < until);
    for (int k = 1; k <= ahead; ++k) bcast(k);
    if (t.rank() == 0) root_ahead = true;
    // The root's next call reuses the first call's slot: it waits for
    // rank 2's read. Slow readers, many calls: every value arrives.
    for (int k = ahead + 1; k < ahead + 40; ++k) {
      if (t.rank() == 2 && k % 8 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      bcast(k);
      std::vector<int> in(5, k + t.rank()), out(5, -1);
      comm.reduce(std::span<const int>(in), std::span<int>(out), 1, op::sum, algorithm::direct);  // ranks 0 and 2 return at once
      if (t.rank() == 1)
        for (int x : out) CHECK(x == 3 * k + 3);
    }
  });
}
