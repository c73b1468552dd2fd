// One rank of an MPI job fails on purpose; tests/mpi/faults.sh checks what
// the job does about it.
//   mpirun -np N fault exit|stall|mismatch|mismatch-checked
// exit:     rank 1 ends its process in the middle of an all-reduce;
// stall:    rank 1 sleeps 4 s in the middle of it (run with a short RINGTREE_TIMEOUT);
// mismatch: rank 1 calls broadcast while the others call allreduce
//           (-checked: in checked mode).
// A rank that gets a ringtree::error prints it and aborts the job
// (MPI_Abort), as a program should: the others may be blocked in MPI.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/mpi.hpp>

#include "../fault_transport.hpp"

using namespace ringtree;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const rt_test::fault f = mode == "exit" ? rt_test::fault::exit_process
                           : mode == "stall" ? rt_test::fault::stall
                                             : rt_test::fault::none;
  if (f == rt_test::fault::none && mode != "mismatch" && mode != "mismatch-checked") {
    if (rank == 0) std::fprintf(stderr, "usage: fault exit|stall|mismatch|mismatch-checked\n");
    MPI_Finalize();
    return 2;
  }
  try {
    mpi_transport t(MPI_COMM_WORLD);
    rt_test::faulty_transport<mpi_transport> ft(t, 1, f, 3, 4s);  // after 3 posted sends and receives
    communicator_options o;
    o.checked = mode == "mismatch-checked";
    o.model = cost_model{};
    communicator comm(ft, o);
    std::vector<float> v(1 << 18, 1.0f);
    if (mode.rfind("mismatch", 0) == 0 && rank == 1) comm.broadcast(std::span<float>(v), 0, algorithm::ring);
    else comm.allreduce(std::span<float>(v), op::sum, algorithm::ring);
    std::printf("rank %d: finished\n", rank);
  } catch (const error& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Finalize();
  return 0;
}
