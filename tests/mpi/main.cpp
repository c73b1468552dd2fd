// doctest main for MPI suites (Debian's doctest has no MPI extension): every
// rank runs the same test cases; the verdict is reduced over the ranks, so
// one failing rank fails the run. Ranks other than 0 print only failures.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  // automatic by the cost model unless a test says otherwise (as the host suite)
  ::setenv("RINGTREE_TUNE", "0", 0);
  int provided = 0;
  // grad_sync and allreduce_async tests run collectives on a second thread.
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  doctest::Context ctx(argc, argv);
  if (rank != 0) ctx.setOption("minimal", true);
  const int failed = ctx.run() != 0 ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int ranks_failed = 0;
  MPI_Reduce(&failed, &ranks_failed, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("MPI suite on %d ranks: %s (%d of %d ranks failed)\n", size, any ? "FAILED" : "passed", ranks_failed, size);
  MPI_Finalize();
  return any;
}
