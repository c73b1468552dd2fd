// make_communicator (transport/cluster.hpp) over MPI: on one host under a
// plain mpirun, and on emulated hosts under tests/mpi/hosts.sh (which sets
// HOSTS_LAYOUT to what the ranks must find: "2x2", "1+1+2").
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/mpi.hpp>

#include "tools/collective_check.hpp"
#include "mpi_check.hpp"

using namespace ringtree;

namespace {
using rt_test::all_ranks;
std::string expected_layout() {
  const char* l = std::getenv("HOSTS_LAYOUT");
  if (l != nullptr) return l;
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return detail::cat("1x", n);  // a plain mpirun: every rank on this host
}
}  // namespace

TEST_CASE("make_communicator: the hosts MPI reports, and shared memory or the hierarchy as they are") {
  auto comm = make_communicator(MPI_COMM_WORLD);
  const auto& l = comm.transport().layout();
  CHECK(l.describe() == expected_layout());
  const bool one_host = l.hosts() == 1;
  CHECK(comm.transport().one_host() == one_host);
  const placement at = comm.placement_of(1 << 20);
  CHECK(at.hosts == l.hosts());
  // shared memory on one host: symmetric buffers and staging; the hierarchy where ranks span hosts and share some
  CHECK(comm.allocate<float>(16).shared() == one_host);
  CHECK(detail::offers(collective::allreduce, algorithm::hierarchical, at) == (l.hosts() > 1 && l.hosts() < l.ranks()));
}

TEST_CASE("make_communicator: every collective, algorithm and op against the sequential reference") {
  communicator_options o;
  o.chunks.ring_chunk_bytes = 8192;  // several chunks per ring step at these sizes
  auto comm = make_communicator(MPI_COMM_WORLD, o);
  const int n = comm.size();
  const std::string first = rt_test::run_cases<float, std::int32_t, ringtree::half, std::int64_t>(
      comm, {0, 1, std::size_t(n + 1), 1000, 40009}, 7);
  CHECK_MESSAGE(first.empty(), first);
  CHECK(all_ranks(first.empty()));
}

TEST_CASE("make_communicator: hierarchical all-reduce equals MPI_Allreduce on random floats (within rounding)") {
  auto comm = make_communicator(MPI_COMM_WORLD);
  if (!detail::offers(collective::allreduce, algorithm::hierarchical, comm.placement_of(4))) return;  // one host, or one rank each
  std::mt19937 g(11 + comm.rank());
  std::vector<double> in(300'007), ours(in.size()), theirs(in.size());
  for (auto& v : in) v = std::uniform_real_distribution<double>(-1, 1)(g);
  comm.allreduce(in, ours, op::sum, algorithm::hierarchical);
  MPI_Allreduce(in.data(), theirs.data(), static_cast<int>(in.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  std::size_t off = 0;
  for (std::size_t i = 0; i < in.size(); ++i) off += std::abs(ours[i] - theirs[i]) > 1e-12 ? 1 : 0;
  CHECK(off == 0);
  // and every rank holds the same bits
  std::vector<double> first(ours);
  comm.broadcast(first, 0);
  CHECK(all_ranks(first == ours));
}

TEST_CASE("make_communicator: split gives cluster communicators of the parts") {
  auto comm = make_communicator(MPI_COMM_WORLD);
  auto half = comm.split(comm.rank() % 2, comm.rank());
  std::vector<int> v(5, comm.rank());
  half.allreduce(v);
  int want = 0;
  for (int r = comm.rank() % 2; r < comm.size(); r += 2) want += r;
  CHECK(v[4] == want);
  CHECK(all_ranks(v[4] == want));
}
