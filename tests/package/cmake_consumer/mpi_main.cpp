// The MPI consumer: ringtree::mpi_transport over MPI_COMM_WORLD, run with
// mpirun -np 2 by the package tests. Exits 1 on a wrong result.
#include <mpi.h>

#include <cstdio>
#include <span>
#include <vector>

#include <ringtree/mpi.hpp>  // the MPI front door (also the prebuilt declarations)
#include <ringtree/ringtree.hpp>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int wrong = 0, rank = 0, size = 0;
  {
    ringtree::mpi_transport t(MPI_COMM_WORLD);
    ringtree::communicator comm(t);
    rank = comm.rank(), size = comm.size();
    std::vector<double> v(7, rank + 1.0);
    comm.allreduce(std::span<double>(v));  // sum over ranks: n(n+1)/2
    for (double x : v) wrong += x != size * (size + 1) / 2.0;
    // and MPI's own all-reduce agrees
    int mine = rank + 1, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    wrong += sum != static_cast<int>(v[0]);
  }  // the transport goes before MPI_Finalize
  int any = 0;
  MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("mpi_transport allreduce over %d ranks: %s\n", size, any == 0 ? "ok" : "WRONG");
  MPI_Finalize();
  return any == 0 ? 0 : 1;
}
