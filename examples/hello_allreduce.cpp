// The smallest ringtree program over MPI:
//   mpirun -np 4 build/examples/hello_allreduce                    one host: shared memory
//   mpirun --hostfile hosts -np 8 build/examples/hello_allreduce   several: hierarchical
#include <mpi.h>

#include <cstdio>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/mpi.hpp>

int main(int argc, char** argv) {
  // Collectives called from the main thread only: FUNNELED is enough.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int status = 0;
  try {
    auto comm = ringtree::make_communicator(MPI_COMM_WORLD);  // shared memory within a host, MPI between hosts
    std::vector<float> v(8, static_cast<float>(comm.rank() + 1));
    comm.allreduce(std::span<float>(v));  // sum over ranks, algorithm picked automatically
    const int n = comm.size();
    const float want = n * (n + 1) / 2.0f;
    std::printf("rank %d of %d (hosts %s): 1 + ... + %d = %g (%s)\n", comm.rank(), n,
                comm.transport().layout().describe().c_str(), n, v[0], v[7] == want ? "ok" : "WRONG");
    status = v[7] == want ? 0 : 1;
  } catch (const ringtree::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
