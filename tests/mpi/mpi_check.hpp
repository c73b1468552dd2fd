#pragma once
// Helpers the MPI suite's files share (a unity build compiles them as one:
// no file may define these names itself).
#include <mpi.h>

namespace rt_test {

// The verdict of one rank is not enough: a check that failed anywhere fails everywhere.
inline bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

}  // namespace rt_test
