#pragma once
// Helpers the MPI suite's files share (a unity build compiles them as one:
// no file may define these names itself).
#include <mpi.h>

#include <string>

namespace rt_test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}
inline bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The verdict of one rank is not enough: a check that failed anywhere fails everywhere.
inline bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

}  // namespace rt_test
