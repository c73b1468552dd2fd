// Counts above MPI's int limit: 2^31 + 16 int8 elements, all-reduced over MPI.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdint>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/mpi.hpp>

using namespace ringtree;

TEST_CASE("allreduce of 2^31 + 16 int8 elements") {
  mpi_transport t(MPI_COMM_WORLD);
  communicator comm(t);
  const std::size_t count = (std::size_t{1} << 31) + 16;
  const int me = comm.rank(), n = comm.size();
  std::vector<std::int8_t> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<std::int8_t>((i * (me + 1)) % 101);
  comm.allreduce(std::span<std::int8_t>(v), op::sum, algorithm::ring);
  std::size_t wrong = 0, first = count;
  for (std::size_t i = 0; i < count; ++i) {
    unsigned want = 0;
    for (int r = 0; r < n; ++r) want += static_cast<unsigned>((i * (r + 1)) % 101);
    if (v[i] != static_cast<std::int8_t>(want)) {
      if (first == count) first = i;
      ++wrong;
    }
  }
  CHECK_MESSAGE(wrong == 0, "first wrong index ", first);
  // the tail, past 2^31, is where an int count would have wrapped
  CHECK(v[count - 1] == static_cast<std::int8_t>(((count - 1) % 101) + ((count - 1) * 2 % 101) * (n > 1)));
}
