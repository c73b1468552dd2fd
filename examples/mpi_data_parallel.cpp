// The classic data-parallel demo, in C++ over MPI: every rank trains the
// same two-layer network on its own random batches; after each backward
// pass the gradients are averaged with one ringtree allreduce, so all
// replicas take the same step and stay identical.
//   mpirun -np 2 build/examples/mpi_data_parallel [steps]
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/mpi.hpp>

#include "tiny_mlp.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 200;
  int status = 0;
  try {
    ringtree::mpi_transport t(MPI_COMM_WORLD);
    ringtree::communicator comm(t);
    const int rank = comm.rank(), n = comm.size();
    tiny::mlp model(10, 10, 5, /*seed differs per rank*/ 100 + rank);
    comm.broadcast(std::span<float>(model.params), 0);  // replicas start equal
    std::mt19937 data(7 + rank);                          // each rank its own data
    std::vector<float> x, y;
    float first = 0, last = 0;
    for (int step = 0; step < steps; ++step) {
      tiny::random_batch(data, 20, 10, 5, x, y);
      // a fixed target function, so there is something to learn: y = tanh(sum of x pairs)
      for (int s = 0; s < 20; ++s)
        for (int k = 0; k < 5; ++k) y[s * 5 + k] = std::tanh(x[s * 10 + 2 * k] + x[s * 10 + 2 * k + 1]);
      float loss = model.accumulate_gradients(x, y, 20);
      comm.allreduce(std::span<float>(model.grads), ringtree::op::avg);
      comm.allreduce(std::span<float>(&loss, 1), ringtree::op::avg);
      model.sgd_step(0.05f);
      if (step == 0) first = loss;
      last = loss;
      if (rank == 0 && (step % 50 == 0 || step == steps - 1)) std::printf("step %4d  loss %.4f\n", step, loss);
    }
    // Every replica must hold bitwise the same parameters.
    std::vector<float> lo = model.params, hi = model.params;
    comm.allreduce(std::span<float>(lo), ringtree::op::min);
    comm.allreduce(std::span<float>(hi), ringtree::op::max);
    const bool same = lo == hi;
    if (rank == 0)
      std::printf("%d ranks: loss %.4f -> %.4f, parameters identical on all ranks: %s\n", n, first, last,
                  same ? "yes" : "NO");
    status = (same && last < first) ? 0 : 1;
  } catch (const ringtree::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
