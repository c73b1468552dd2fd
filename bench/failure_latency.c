/* How long the other ranks take to raise when rank 0 stalls (sleeps) for
 * STALL seconds before a collective: with RINGTREE_TIMEOUT below STALL,
 * each rank prints how long its call took to return. Run under the layer
 * by bench/failure_latency.sh. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int stall = argc > 1 ? atoi(argv[1]) : 30;
  static float a[1024], b[1024];
  MPI_Allreduce(a, b, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* the communicator is made */
  const double t0 = now();
  if (rank == 0) sleep((unsigned)stall);
  const int rc = MPI_Allreduce(a, b, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d: %s after %.2f s\n", rank, rc == MPI_SUCCESS ? "returned" : "raised", now() - t0);
  fflush(stdout);
  MPI_Finalize(); /* (every rank: Open MPI removes its shared-memory files) */
  return 0;
}
