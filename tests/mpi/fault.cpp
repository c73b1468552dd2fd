// One rank of an MPI job fails on purpose; tests/mpi/faults.sh checks what
// the job does about it.
//   mpirun -np N fault exit|stall|mismatch|mismatch-checked
// exit:     rank 1 ends its process in the middle of an all-reduce;
// stall:    rank 1 sleeps 4 s in the middle of it (run with a short RINGTREE_TIMEOUT);
// mismatch: rank 1 calls broadcast while the others call allreduce
//           (-checked: in checked mode).
// A rank that gets a ringtree::error prints it and aborts the job
// (comm.abort(): MPI_Abort), as a program should: the others may be
// blocked in MPI.
// link-down: (under tests/mpi/hosts.sh -d, which takes a host's link down)
//           hierarchical all-reduces over make_communicator until one
//           raises; the rank prints "LINK rank R: after S s, timeout_error
//           naming rank P: ..." and ends its process (MPI cannot end a job
//           whose daemons it cannot reach; the harness does).
// stall-finalize: as stall, but every rank that times out does what
//           docs/errors.md calls safe without aborting: destroys the
//           communicator and transport (ringtree's scratch goes with
//           them), keeps its own buffer until MPI_Finalize, and exits 0
//           (MPI must touch no freed memory when the stalled rank's data
//           arrives).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/mpi.hpp>
#include <ringtree/transport/mpi.hpp>

#include "fault_transport.hpp"
#include "test_time.hpp"

using namespace ringtree;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (mode == "link-down") {
    auto comm = make_communicator(MPI_COMM_WORLD);
    std::vector<float> v(std::size_t{4} << 20, 1.0f);
    auto last = std::chrono::steady_clock::now();
    for (int i = 0;; ++i) {
      try {
        comm.allreduce(std::span<float>(v), op::avg, algorithm::hierarchical);
        last = std::chrono::steady_clock::now();
        if (v[0] != 1.0f) {
          std::fprintf(stderr, "rank %d: WRONG RESULT %g\n", rank, v[0]);
          std::_Exit(5);
        }
        if (i == 0) std::printf("rank %d on %s: all-reducing\n", rank, comm.transport().layout().describe().c_str());
        std::fflush(stdout);
      } catch (const timeout_error& e) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - last).count();
        std::printf("LINK rank %d: after %.1f s, timeout_error naming rank %d: %s\n", rank, s, e.peer(), e.what());
        std::fflush(stdout);
        std::_Exit(3);
      } catch (const error& e) {
        std::printf("LINK rank %d: another error: %s\n", rank, e.what());
        std::fflush(stdout);
        std::_Exit(4);
      }
    }
  }
  const bool finalize = mode == "stall-finalize";
  const rt_test::fault f = mode == "exit" ? rt_test::fault::exit_process
                           : (mode == "stall" || finalize) ? rt_test::fault::stall
                                                           : rt_test::fault::none;
  if (f == rt_test::fault::none && mode != "mismatch" && mode != "mismatch-checked") {
    if (rank == 0) std::fprintf(stderr, "usage: fault exit|stall|stall-finalize|mismatch|mismatch-checked|link-down\n");
    MPI_Finalize();
    return 2;
  }
  std::unique_ptr<std::vector<float>> kept;  // the caller's buffer of a failed call: alive until MPI_Finalize
  {
    mpi_transport t(MPI_COMM_WORLD);
    // after 3 posted sends and receives; 4 s (scaled on a loaded machine):
    // well past the neighbours' 1 s timeout, so theirs fires while it sleeps
    rt_test::faulty_transport<mpi_transport> ft(t, 1, f, 3, rt_test::scaled(4s));
    communicator_options o;
    o.checked = mode == "mismatch-checked";
    o.model = cost_model{};
    communicator comm(ft, o);
    ft.arm();
    auto v = std::make_unique<std::vector<float>>(1 << 18, 1.0f);
    try {
      if (mode.rfind("mismatch", 0) == 0 && rank == 1) comm.broadcast(std::span<float>(*v), 0, algorithm::ring);
      else comm.allreduce(std::span<float>(*v), op::sum, algorithm::ring);
      const float want = mode.rfind("mismatch", 0) == 0 && rank == 1 ? 1.0f : static_cast<float>(comm.size());
      if ((*v)[0] != want) {
        std::fprintf(stderr, "rank %d: WRONG RESULT %g\n", rank, (*v)[0]);
        return 5;
      }
      std::printf("rank %d: finished\n", rank);
    } catch (const error& e) {
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      std::fflush(stderr);
      if (!finalize) t.abort(3);
      kept = std::move(v);
      // keep the (failed) transport's memory busy with other data meanwhile
      std::vector<std::vector<float>> churn;
      for (int i = 0; i < 64; ++i) churn.emplace_back(1 << 14, -1.0f);
    }
  }
  // After a timeout: the communicator and transport are gone; what MPI may
  // still do with the stalled rank's late messages must touch nothing freed.
  std::this_thread::sleep_for(finalize ? rt_test::scaled(5s) : std::chrono::duration<double>(0));
  MPI_Finalize();
  if (finalize) std::printf("rank %d: finalized after the error\n", rank);
  return 0;
}
