/* A plain MPI program, with no ringtree in it: MPI's collectives on
 * MPI_COMM_WORLD and on halves of it, each result printed as a checksum
 * (rank 0 prints). Its output is the same whichever library serves the
 * calls; to have ringtree serve them, preload the layer:
 *
 *   mpirun -np 4 build/mpi_collectives
 *   mpirun -np 4 -x LD_PRELOAD=$PWD/build/libringtree-mpi.so build/mpi_collectives
 *
 * (RINGTREE_MPI_LOG=1 prints which path each call took.) The values are
 * whole numbers, so every sum is exact in any order. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double sum_d(const double* v, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += v[i] * (double)(i % 7 + 1);
  return s;
}
static long long sum_i(const int* v, int n) {
  long long s = 0;
  for (int i = 0; i < n; ++i) s += (long long)v[i] * (i % 7 + 1);
  return s;
}

static void collectives(MPI_Comm comm, const char* name, int world_rank) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int n = 1 << 20, block = 1001;
  double* d = malloc(sizeof(double) * n);
  double* r = malloc(sizeof(double) * n);
  int* a = malloc(sizeof(int) * (size_t)block * size);
  int* b = malloc(sizeof(int) * (size_t)block * size);
  char line[8][128];
  int lines = 0;

  for (int i = 0; i < n; ++i) d[i] = (double)((i + rank) % 1000);
  MPI_Allreduce(d, r, n, MPI_DOUBLE, MPI_SUM, comm);
  snprintf(line[lines++], 128, "MPI_Allreduce sum of %d doubles: %.17g", n, sum_d(r, n));

  for (int i = 0; i < block; ++i) a[i] = (i * 31 + rank * 17) % 1009 - 500;
  MPI_Allreduce(MPI_IN_PLACE, a, block, MPI_INT, MPI_MAX, comm);
  snprintf(line[lines++], 128, "MPI_Allreduce max of %d ints in place: %lld", block, sum_i(a, block));

  for (int i = 0; i < block; ++i) a[i] = rank + i % 3 + 1;
  MPI_Reduce(a, b, block, MPI_INT, MPI_PROD, size - 1, comm);
  if (size > 1 && rank == size - 1) MPI_Send(b, block, MPI_INT, 0, 0, comm); /* (not to itself: a blocking send to self can wait forever) */
  if (size > 1 && rank == 0) MPI_Recv(b, block, MPI_INT, size - 1, 0, comm, MPI_STATUS_IGNORE);
  snprintf(line[lines++], 128, "MPI_Reduce product of %d ints to rank %d: %lld", block, size - 1, sum_i(b, block));

  for (int i = 0; i < n; ++i) r[i] = rank == 0 ? (double)(i % 4096) : -1.0;
  MPI_Bcast(r, n, MPI_DOUBLE, 0, comm);
  snprintf(line[lines++], 128, "MPI_Bcast of %d doubles: %.17g", n, sum_d(r, n));

  for (int i = 0; i < block; ++i) a[i] = rank * 100000 + i;
  MPI_Allgather(a, block, MPI_INT, b, block, MPI_INT, comm);
  snprintf(line[lines++], 128, "MPI_Allgather of %d ints per rank: %lld", block, sum_i(b, block * size));

  for (int i = 0; i < block * size; ++i) a[i] = (rank + 1) * (i % 101);
  MPI_Reduce_scatter_block(a, b, block, MPI_INT, MPI_SUM, comm);
  long long mine = sum_i(b, block), all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, comm);
  snprintf(line[lines++], 128, "MPI_Reduce_scatter_block sum of %d ints per rank: %lld", block, all);

  for (int i = 0; i < block * size; ++i) a[i] = rank * 1000 + i / block;
  MPI_Alltoall(a, block, MPI_INT, b, block, MPI_INT, comm);
  mine = sum_i(b, block * size) * (rank + 1);
  MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, comm);
  snprintf(line[lines++], 128, "MPI_Alltoall of %d ints per pair: %lld", block, all);

  MPI_Request req;
  for (int i = 0; i < n; ++i) d[i] = (double)(i % 10 + rank);
  MPI_Iallreduce(d, r, n, MPI_DOUBLE, MPI_MIN, comm, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  MPI_Barrier(comm);
  snprintf(line[lines++], 128, "MPI_Iallreduce min of %d doubles: %.17g", n, sum_d(r, n));

  if (rank == 0)
    for (int i = 0; i < lines; ++i) printf("%s (world rank %d, %d ranks): %s\n", name, world_rank, size, line[i]);
  fflush(stdout);
  free(d), free(r), free(a), free(b);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  collectives(MPI_COMM_WORLD, "world", rank);
  /* Halves, lower half first: its lines come out before the upper half's. */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank >= size / 2, rank, &half);
  for (int h = 0; h < 2; ++h) {
    if ((rank >= size / 2) == h) collectives(half, h ? "upper half" : "lower half", rank);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Comm_free(&half);
  MPI_Finalize();
  return 0;
}
