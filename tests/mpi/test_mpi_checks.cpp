// Over MPI, what is refused and what times out: checked mode, RINGTREE_CHECK,
// a rank that never joins, thread levels too low for a feature.
#include <doctest/doctest.h>
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/mpi.hpp>
#include <ringtree/transport/shm_mpi.hpp>

#include "test_time.hpp"
#include "mpi_check.hpp"

using namespace ringtree;
using namespace std::chrono_literals;

namespace {
using rt_test::has;
using rt_test::world_rank;
using rt_test::world_size;
}  // namespace

TEST_CASE("checked mode: mismatched counts or roots raise on every rank, naming the ranks") {
  mpi_transport t(MPI_COMM_WORLD);
  communicator comm(t, communicator_options{.checked = true});
  const int n = comm.size(), me = comm.rank();
  if (n < 2) return;
  std::vector<float> v(me == n - 1 ? 12 : 10);
  std::string msg;
  try {
    comm.allreduce(std::span<float>(v));
  } catch (const error& e) {
    msg = e.what();
  }
  CHECK(has(msg, "allreduce on rank " + std::to_string(me)));
  CHECK(has(msg, "ranks " + std::to_string(n - 1) + " differ from rank 0 in count"));
  msg.clear();
  try {
    comm.broadcast(std::span<float>(v).first(10), me == 0 ? 1 : 0);
  } catch (const error& e) {
    msg = e.what();
  }
  CHECK(has(msg, "differ from rank 0 in root"));
  // and the communicator still works afterwards
  std::vector<int> ok(3, 1);
  comm.allreduce(std::span<int>(ok));
  CHECK(ok[2] == n);
}

TEST_CASE("RINGTREE_CHECK=1 turns checked mode on") {
  setenv("RINGTREE_CHECK", "1", 1);
  mpi_transport t(MPI_COMM_WORLD);
  communicator comm(t);
  unsetenv("RINGTREE_CHECK");
  CHECK(comm.checked());
}

TEST_CASE("a rank that never joins: the others raise a timeout error naming it") {
  const int n = world_size(), me = world_rank();
  if (n < 2) return;
  {
    mpi_transport t(MPI_COMM_WORLD, mpi_options{.timeout = 1s});
    communicator comm(t);
    const int absent = n - 1;
    std::string msg;
    auto t0 = std::chrono::steady_clock::now();
    if (me != absent) {
      std::vector<int> v(4, 1);  // small: the sends complete eagerly, nothing is left pending
      try {
        comm.allreduce(std::span<int>(v), op::sum, algorithm::ring);
      } catch (const timeout_error& e) {
        msg = e.what();
        CHECK(e.peer() >= 0);
      }
      CHECK(std::chrono::steady_clock::now() - t0 < rt_test::scaled(10s));
      // the rank waited on is the absent one, or one that waits on it in turn
      CHECK(has(msg, "(RINGTREE_TIMEOUT)"));
      CHECK(has(msg, "waited 1 s for rank"));
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("thread levels: a feature that needs more than MPI provides gets a clear error") {
  CHECK_THROWS_WITH_AS(detail::check_thread_level(MPI_THREAD_FUNNELED, MPI_THREAD_MULTIPLE, "grad_sync", 3),
                       doctest::Contains("grad_sync on rank 3: needs MPI thread level MPI_THREAD_MULTIPLE but MPI provides MPI_THREAD_FUNNELED"),
                       error);
  CHECK_NOTHROW(detail::check_thread_level(MPI_THREAD_MULTIPLE, MPI_THREAD_SERIALIZED, "x", 0));
  mpi_transport t(MPI_COMM_WORLD);
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided >= MPI_THREAD_SERIALIZED) CHECK_NOTHROW(t.require_thread_level(MPI_THREAD_SERIALIZED, "grad_sync"));
}
