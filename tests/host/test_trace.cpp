#include <doctest/doctest.h>

#include <bit>
#include <sstream>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>

using namespace ringtree;

namespace {
int ceil_log2(int n) { return n <= 1 ? 0 : std::bit_width(static_cast<unsigned>(n - 1)); }

// Runs `body(comm)` on n ranks through a traced transport.
template <class F>
void traced_run(int n, trace_recorder& rec, F body) {
  local_world world(n);
  world.run([&](local_transport& t) {
    traced_transport<local_transport> tt(t, rec);
    communicator comm(tt);
    body(comm);
  });
}
}  // namespace

TEST_CASE("ring all-reduce sends 2(n-1)/n of the buffer per rank in 2(n-1) steps") {
  for (int n = 2; n <= 64; ++n) {
    CAPTURE(n);
    const std::size_t count = 1000 + n / 2;  // not divisible by most n
    trace_recorder rec(n);
    traced_run(n, rec, [&](auto& comm) {
      std::vector<float> v(count, 1.0f);
      comm.allreduce(std::span<float>(v), op::sum, algorithm::ring);
    });
    const std::size_t q = count / n, e = sizeof(float);
    std::size_t total = 0;
    for (int r = 0; r < n; ++r) {
      const std::size_t sent = rec.bytes_sent(r);
      CHECK(sent >= 2 * (n - 1) * q * e);        // 2(n-1) blocks of at least floor(count/n)
      CHECK(sent <= 2 * (n - 1) * (q + 1) * e);  // ... and at most ceil(count/n)
      total += sent;
    }
    CHECK(total == 2 * std::size_t(n - 1) * count * e);  // exactly: every step moves n distinct blocks
    CHECK(rec.steps() == 2 * (n - 1));
    CHECK(rec.messages() == std::size_t(2 * n * (n - 1)));
  }
}

TEST_CASE("tree all-reduce takes O(log n) steps; binomial broadcast and barrier take log2 n") {
  for (int n = 2; n <= 64; ++n) {
    CAPTURE(n);
    trace_recorder tree_rec(n), bcast_rec(n), barrier_rec(n);
    traced_run(n, tree_rec, [&](auto& comm) {
      std::vector<float> v(4, 1.0f);  // one chunk per tree: pure latency
      comm.allreduce(std::span<float>(v), op::sum, algorithm::tree);
    });
    traced_run(n, bcast_rec, [&](auto& comm) {
      std::vector<float> v(4, 1.0f);
      comm.broadcast(std::span<float>(v), n / 3, algorithm::binomial);
    });
    traced_run(n, barrier_rec, [&](auto& comm) { comm.barrier(); });
    const int depth = std::bit_width(static_cast<unsigned>(n)) - 1;  // floor(log2 n)
    // Up a tree of depth floor(log2 n) and back down; a rank serves tree 0
    // before tree 1, which the step count sees as a dependency too.
    CHECK(tree_rec.steps() >= 2 * depth);
    CHECK(tree_rec.steps() <= 3 * depth + 2);
    // Binomial: the longest chain ends at the position with most one bits.
    CHECK(bcast_rec.steps() == depth);
    CHECK(bcast_rec.messages() == std::size_t(n - 1));
    CHECK(barrier_rec.steps() == ceil_log2(n));
  }
}

TEST_CASE("pipelined chain broadcast: each link carries the buffer once") {
  const int n = 5;
  trace_recorder rec(n);
  const std::size_t count = 1 << 20;
  traced_run(n, rec, [&](auto& comm) {
    std::vector<std::uint8_t> v(count, comm.rank() == 2 ? 7 : 0);
    comm.broadcast(std::span<std::uint8_t>(v), 2, algorithm::ring);
    if (v[count - 1] != 7) throw std::runtime_error("broadcast wrong");
  });
  for (int r = 0; r < n; ++r) CHECK(rec.bytes_sent(r) == (r == 1 ? 0 : count));  // rank 1 ends the chain 2,3,4,0,1
  // Chunks travel independently: the longest chain is the n-1 links, and
  // every link carries every chunk once.
  const std::size_t chunks = count / chunk_sizes{}.chain_chunk_bytes;
  CHECK(rec.steps() == n - 1);
  CHECK(rec.messages() == chunks * (n - 1));
}

TEST_CASE("trace events are ordered and name sender, receiver and size") {
  trace_recorder rec(3);
  traced_run(3, rec, [&](auto& comm) {
    std::vector<int> v(6, 1);
    comm.allreduce(std::span<int>(v), op::sum, algorithm::ring);
  });
  auto ev = rec.events();
  REQUIRE(ev.size() == 12);
  CHECK(ev.front().step == 0);
  CHECK(ev.back().step == 3);
  for (auto& e : ev) {
    CHECK(e.to == (e.from + 1) % 3);
    CHECK(e.bytes == 2 * sizeof(int));
  }
}

TEST_CASE("Rabenseifner moves 2(n-1)/n of the buffer per rank in 2 log2 n steps; scatter-allgather broadcast in n steps") {
  for (int n : {2, 4, 8, 16, 32, 64}) {
    CAPTURE(n);
    const std::size_t count = 64 * 5;  // divisible by every n here
    trace_recorder rec(n), bc(n);
    traced_run(n, rec, [&](auto& comm) {
      std::vector<float> v(count, 1.0f);
      comm.allreduce(std::span<float>(v), op::sum, algorithm::rabenseifner);
      if (v[count - 1] != float(n)) throw std::runtime_error("rabenseifner sum wrong");
    });
    for (int r = 0; r < n; ++r) CHECK(rec.bytes_sent(r) == 2 * (n - 1) * count / n * sizeof(float));
    CHECK(rec.steps() == 2 * ceil_log2(n));
    traced_run(n, bc, [&](auto& comm) {
      std::vector<float> v(count, comm.rank() == 1 % n ? 3.0f : 0.0f);
      comm.broadcast(std::span<float>(v), 1 % n, algorithm::scatter_allgather);
      if (v[0] != 3.0f || v[count - 1] != 3.0f) throw std::runtime_error("scatter_allgather wrong");
    });
    CHECK(bc.steps() == n);  // the scatter, then n-1 ring steps
  }
}

TEST_CASE("Chrome trace: one slice per send and receive, one per reduction, a track per rank") {
  trace_recorder rec(3);
  traced_run(3, rec, [&](auto& comm) {
    std::vector<int> v(9, 1);
    comm.allreduce(std::span<int>(v), op::sum, algorithm::ring);
  });
  std::ostringstream os;
  rec.write_chrome(os);
  const std::string json = os.str();
  auto count = [&](const std::string& what) {
    std::size_t k = 0;
    for (std::size_t at = json.find(what); at != std::string::npos; at = json.find(what, at + 1)) ++k;
    return k;
  };
  CHECK(count("\"cat\": \"send\", \"ph\": \"b\"") == rec.messages());  // async slices: a begin and an end each
  CHECK(count("\"cat\": \"send\", \"ph\": \"e\"") == rec.messages());
  CHECK(count("\"cat\": \"recv\", \"ph\": \"b\"") == rec.messages());
  CHECK(count("\"cat\": \"reduce\"") == 3 * 2);  // n-1 reduce-scatter steps on each of 3 ranks
  CHECK(count("\"thread_name\"") == 3);
  CHECK(count("{") == count("}"));
  CHECK(json.rfind("{\"traceEvents\": [", 0) == 0);
}
