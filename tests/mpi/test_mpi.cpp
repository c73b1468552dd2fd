#include <doctest/doctest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/mpi.hpp>
#include <ringtree/transport/shm_mpi.hpp>

#include "tools/collective_check.hpp"
#include "test_time.hpp"
#include "mpi_check.hpp"

using namespace ringtree;
using namespace std::chrono_literals;

namespace {
using rt_test::all_ranks;
using rt_test::has;
using rt_test::world_rank;
using rt_test::world_size;

// Every rank runs every case even after a failure, so that the ranks stay
// in step; the first failure is kept.
template <class... Es, class Comm>
std::string run_cases(Comm& comm, const std::vector<std::size_t>& counts) {
  return rt_test::run_cases<Es...>(comm, counts, 3);
}
// The same on symmetric buffers (comm.allocate): the direct algorithms.
template <class... Es, class Comm>
std::string run_symmetric_cases(Comm& comm, const std::vector<std::size_t>& counts) {
  return rt_test::run_cases<Es...>(comm, counts, 5, true);
}

template <class E> MPI_Datatype mpi_type();
template <> MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <> MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <> MPI_Datatype mpi_type<std::int32_t>() { return MPI_INT32_T; }
template <> MPI_Datatype mpi_type<std::int64_t>() { return MPI_INT64_T; }
template <> MPI_Datatype mpi_type<std::uint8_t>() { return MPI_UINT8_T; }

MPI_Op mpi_op(op o) {
  switch (o) {
    case op::sum: case op::avg: return MPI_SUM;
    case op::prod: return MPI_PROD;
    case op::min: return MPI_MIN;
    case op::max: return MPI_MAX;
  }
  return MPI_SUM;
}

template <class E> E random_value(std::mt19937& g, op o) {
  if (o == op::prod) return static_cast<E>(1 + g() % 2);  // small factors: no overflow in MPI's own arithmetic
  if constexpr (std::is_floating_point_v<E>) return std::uniform_real_distribution<E>(-1, 1)(g);
  else if constexpr (std::is_unsigned_v<E>) return static_cast<E>(g() % 16);
  else return static_cast<E>(static_cast<long>(g() % 2001) - 1000);
}

template <class E> bool close(E a, E b) {
  if constexpr (std::is_floating_point_v<E>) return std::abs(a - b) <= 1e-4 * (1 + std::abs(b));
  else return a == b;
}

// ringtree against the MPI library's own collective on the same random data.
template <class E, class Comm>
std::string differential(Comm& comm, std::size_t count, op o, algorithm a, unsigned seed) {
  const int n = comm.size(), me = comm.rank();
  std::mt19937 g(seed * 131 + me);
  const std::string where = detail::cat(to_string(dtype_of<E>), " count=", count, " op=", to_string(o),
                                        " algo=", to_string(a), " ranks=", n, " rank=", me);
  std::vector<E> in(count * n);
  for (auto& x : in) x = random_value<E>(g, o);
  const int ic = static_cast<int>(count);
  auto mismatch = [&](const char* what, const std::vector<E>& got, const std::vector<E>& want) -> std::string {
    for (std::size_t i = 0; i < want.size(); ++i)
      if (!close(got[i], want[i])) return detail::cat(what, " ", where, " differs from MPI at ", i);
    return {};
  };
  std::string first;  // all five calls run on every rank even after a mismatch
  auto note = [&](std::string m) { if (first.empty()) first = std::move(m); };
  {  // allreduce (avg against MPI_SUM / n)
    std::vector<E> got(count), want(count);
    comm.allreduce(std::span<const E>(in).first(count), std::span<E>(got), o, a);
    MPI_Allreduce(in.data(), want.data(), ic, mpi_type<E>(), mpi_op(o), MPI_COMM_WORLD);
    if (o == op::avg) finish_avg<E>(want, n);
    note(mismatch("allreduce", got, want));
  }
  if (o != op::avg) {  // reduce_scatter_block
    std::vector<E> got(count), want(count);
    comm.reduce_scatter(std::span<const E>(in), std::span<E>(got), o);
    MPI_Reduce_scatter_block(in.data(), want.data(), ic, mpi_type<E>(), mpi_op(o), MPI_COMM_WORLD);
    note(mismatch("reduce_scatter", got, want));
  }
  const int root = static_cast<int>(seed % n);
  {  // broadcast
    std::vector<E> got(in.begin(), in.begin() + count), want = got;
    const algorithm ba = a == algorithm::tree ? algorithm::binomial : algorithm::ring;
    comm.broadcast(std::span<E>(got), root, ba);
    MPI_Bcast(want.data(), ic, mpi_type<E>(), root, MPI_COMM_WORLD);
    note(mismatch("broadcast", got, want));
  }
  {  // scatter
    std::vector<E> got(count), want(count);
    const algorithm sa = a == algorithm::tree ? algorithm::binomial : algorithm::linear;
    comm.scatter(std::span<const E>(in), std::span<E>(got), root, sa);
    MPI_Scatter(in.data(), ic, mpi_type<E>(), want.data(), ic, mpi_type<E>(), root, MPI_COMM_WORLD);
    note(mismatch("scatter", got, want));
  }
  {  // allgather
    std::vector<E> got(count * n), want(count * n);
    comm.allgather(std::span<const E>(in).first(count), std::span<E>(got));
    MPI_Allgather(in.data(), ic, mpi_type<E>(), want.data(), ic, mpi_type<E>(), MPI_COMM_WORLD);
    note(mismatch("allgather", got, want));
  }
  return first;
}
}  // namespace

TEST_CASE("every collective, algorithm and op matches the sequential reference over MPI") {
  mpi_transport t(MPI_COMM_WORLD);
  communicator_options opt;
  opt.chunks.ring_chunk_bytes = 256;  // many pipeline chunks at small counts
  opt.chunks.tree_chunk_bytes = 96;
  opt.chunks.chain_chunk_bytes = 128;
  communicator comm(t, opt);
  const int n = comm.size();
  const std::string f = run_cases<float, std::int32_t, half, std::int64_t>(
      comm, {0, 1, std::size_t(n > 1 ? n - 1 : 2), std::size_t(n + 1), 97, 1000});
  CHECK_MESSAGE(f.empty(), f);
  CHECK(all_ranks(f.empty()));
}

TEST_CASE("default pipeline sizes at a few MB") {
  mpi_transport t(MPI_COMM_WORLD);
  communicator comm(t);
  const std::string f = run_cases<float>(comm, {(std::size_t{3} << 20) / 4 + 5});
  CHECK_MESSAGE(f.empty(), f);
  CHECK(all_ranks(f.empty()));
}

// Every collective against MPI's own on random data, for several types,
// ops and counts (0, 1, n-1, n+1, primes, 2 MB).
template <class Comm>
std::string differential_sweep(Comm& comm) {
  const int n = comm.size();
  std::string f;
  unsigned seed = 1;
  for (std::size_t count : {std::size_t(0), std::size_t(1), std::size_t(n > 1 ? n - 1 : 3), std::size_t(n + 1),
                            std::size_t(13), std::size_t(251), std::size_t(4099), std::size_t{1} << 19})
    for (op o : {op::sum, op::prod, op::min, op::max, op::avg})
      for (algorithm a : {algorithm::ring, algorithm::tree}) {
        ++seed;  // every rank runs every call, failed or not, to stay in step
        auto keep = [&](std::string g) { if (f.empty()) f = std::move(g); };
        keep(differential<float>(comm, count, o, a, seed));
        keep(differential<std::int32_t>(comm, count, o, a, seed));
        if (count < 5000) keep(differential<double>(comm, count, o, a, seed));
        if (count < 5000) keep(differential<std::int64_t>(comm, count, o, a, seed));
        if (count < 5000 && o != op::prod) keep(differential<std::uint8_t>(comm, count, o, a, seed));
      }
  return f;
}

TEST_CASE("differential: ringtree equals MPI_Allreduce, MPI_Bcast, MPI_Scatter, MPI_Reduce_scatter_block, MPI_Allgather") {
  mpi_transport t(MPI_COMM_WORLD);
  communicator comm(t, communicator_options{.checked = true});
  const std::string f = differential_sweep(comm);
  CHECK_MESSAGE(f.empty(), f);
  CHECK(all_ranks(f.empty()));
}

// Whether every rank is on this host (shared memory needs it; the
// two-host run, tests/mpi/hosts.sh, is not).
bool one_host() {
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int here = 0, all = 0;
  MPI_Comm_size(local, &here);
  MPI_Comm_size(MPI_COMM_WORLD, &all);
  MPI_Comm_free(&local);
  return all_ranks(here == all);
}

TEST_CASE("shm transport bootstrapped from MPI: every collective against the reference and against MPI's own") {
  if (!one_host()) {
    MESSAGE("skipped: the ranks are on several hosts, and shared memory needs one");
    return;
  }
  shm_options small;
  small.slot_bytes = 512;  // messages of many chunks, rings that fill up
  small.slots = 4;
  auto t = make_shm_transport(MPI_COMM_WORLD, small);
  communicator_options opt;
  opt.chunks.ring_chunk_bytes = 256;
  opt.chunks.tree_chunk_bytes = 96;
  opt.chunks.chain_chunk_bytes = 128;
  communicator comm(t, opt);
  const int n = comm.size();
  std::string f = run_cases<float, std::int32_t, half, std::int64_t>(
      comm, {0, 1, std::size_t(n > 1 ? n - 1 : 2), std::size_t(n + 1), 97, 1000});
  CHECK_MESSAGE(f.empty(), f);
  auto big = make_shm_transport(MPI_COMM_WORLD);  // default slots
  communicator big_comm(big);
  f = differential_sweep(big_comm);
  CHECK_MESSAGE(f.empty(), f);
  f = run_cases<float>(big_comm, {(std::size_t{3} << 20) / 4 + 5});
  CHECK_MESSAGE(f.empty(), f);
  CHECK(all_ranks(f.empty()));
}

TEST_CASE("symmetric buffers over an MPI shared window and over shm: every direct algorithm against the reference") {
  const std::vector<std::size_t> counts = {0, 1, 3, 1000, 70'000};
  {
    mpi_transport t(MPI_COMM_WORLD);
    communicator comm(t, communicator_options{.checked = true});
    auto probe = comm.allocate<float>(4);
    // across hosts a symmetric buffer is plain memory, and the usual algorithms run on it
    CHECK(probe.shared() == (one_host() && comm.size() > 0));
    // private calls stream through POSIX staging where the ranks share the host (run_cases then includes two_shot)
    CHECK(comm.placement_of(0).staging == (one_host() && comm.size() > 1));
    const std::string first = probe.shared() ? run_symmetric_cases<float, std::int32_t, double>(comm, counts)
                                             : run_cases<float>(comm, {0, 1, 1000});
    CHECK_MESSAGE(all_ranks(first.empty()), first);
    if (!probe.shared()) {  // every call on it works as on private memory
      auto buf = comm.allocate<int>(100);
      for (auto& v : buf) v = comm.rank() + 1;
      comm.allreduce(buf);
      CHECK(buf[99] == comm.size() * (comm.size() + 1) / 2);
    }
  }
  if (one_host()) {
    auto t = make_shm_transport(MPI_COMM_WORLD);
    communicator comm(t, communicator_options{.checked = true});
    const std::string first = run_symmetric_cases<float, std::int64_t, half>(comm, counts);
    CHECK_MESSAGE(all_ranks(first.empty()), first);
  }
}

TEST_CASE("messages above the piece limit are cut into pieces that MPI accepts") {
  mpi_transport t(MPI_COMM_WORLD, mpi_options{.max_piece_bytes = 1000});
  communicator comm(t);
  const std::string f = run_cases<float, std::uint8_t>(comm, {0, 1, 250, 1001, 20'000});
  CHECK_MESSAGE(f.empty(), f);
  CHECK(all_ranks(f.empty()));
  CHECK_THROWS_WITH_AS(mpi_transport(MPI_COMM_WORLD, mpi_options{.max_piece_bytes = std::size_t{1} << 31}),
                       doctest::Contains("max_piece_bytes must be in 1..2147483647"), error);
}

TEST_CASE("ringtree's messages never match the user's: the communicator is duplicated") {
  mpi_transport t(MPI_COMM_WORLD);
  int cmp = MPI_UNEQUAL;
  MPI_Comm_compare(t.comm(), MPI_COMM_WORLD, &cmp);
  CHECK(cmp == MPI_CONGRUENT);
  // A user's message posted on the world communicator around a collective is untouched.
  communicator comm(t);
  const int n = comm.size(), me = comm.rank();
  int token = -1, mine = me;
  MPI_Request rq[2];
  MPI_Irecv(&token, 1, MPI_INT, (me + n - 1) % n, 0x5254, MPI_COMM_WORLD, &rq[0]);
  MPI_Isend(&mine, 1, MPI_INT, (me + 1) % n, 0x5254, MPI_COMM_WORLD, &rq[1]);
  std::vector<int> v(100, 1);
  comm.allreduce(std::span<int>(v));
  MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
  CHECK(v[99] == n);
  CHECK(token == (me + n - 1) % n);
}

template <class Comm>
std::string split_check(Comm& comm) {
  const int n = comm.size(), me = comm.rank();
  auto half = comm.split(me % 2, me);
  std::vector<std::int64_t> v(9, me);
  half.allreduce(std::span<long>(v));
  std::int64_t want = 0;
  for (int r = me % 2; r < n; r += 2) want += r;
  if (v[8] != want) return detail::cat("rank ", me, ": half sum ", v[8], " expected ", want);
  if (half.size() != (n + 1 - me % 2) / 2 || half.rank() != me / 2) return "split size or rank wrong";
  std::vector<int> w(3, 1);
  comm.allreduce(std::span<int>(w));  // the parent still works
  return w[0] == n ? std::string() : std::string("parent allreduce after split wrong");
}

TEST_CASE("split over MPI and over shared memory") {
  mpi_transport t(MPI_COMM_WORLD);
  communicator comm(t);
  std::string f = split_check(comm);
  if (one_host()) {
    auto s = make_shm_transport(MPI_COMM_WORLD);
    communicator shm_comm(s);
    if (f.empty()) f = split_check(shm_comm);
  }
  CHECK_MESSAGE(f.empty(), f);
  CHECK(all_ranks(f.empty()));
}
