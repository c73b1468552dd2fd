// The classic toy of data-parallel tutorials, in plain C++ with grad_sync:
// Linear(10,10) -> ReLU -> Linear(10,5), MSE loss, SGD lr 0.001, random
// batches of 20x10 inputs and 20x5 targets on every rank. After every step
// it checks that all replicas hold identical parameters; at the end rank 0
// saves a checkpoint that every rank loads after a barrier.
//   mpirun -np 2 build/examples/ddp_toy [steps] [checkpoint file]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/train/grad_sync.hpp>
#include <ringtree/transport/mpi.hpp>

#include "tiny_mlp.hpp"

int main(int argc, char** argv) {
  // grad_sync all-reduces on a background thread while this thread makes no
  // MPI calls of its own: SERIALIZED is enough.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 50;
  const std::string ckpt = argc > 2 ? argv[2] : "/tmp/ringtree_ddp_toy.ckpt";
  int status = 0;
  try {
    ringtree::mpi_transport t(MPI_COMM_WORLD);
    ringtree::communicator comm(t);
    const int rank = comm.rank();
    tiny::mlp model(10, 10, 5, 42 + rank);  // replicas start apart ...
    ringtree::grad_sync sync(comm, model.tensors(model.grads));
    sync.broadcast_parameters(model.tensors(model.params), 0);  // ... and are made equal
    std::mt19937 data(1000 + rank);
    std::vector<float> x, y, lo, hi;
    for (int step = 0; step < steps; ++step) {
      tiny::random_batch(data, 20, 10, 5, x, y);
      const float loss = model.accumulate_gradients(x, y, 20);
      for (int g = 3; g >= 0; --g) sync.mark_ready(g);  // as backward would, last layer first
      sync.synchronize();
      model.sgd_step(0.001f);
      lo = hi = model.params;  // identical on every rank?
      comm.allreduce(std::span<float>(lo), ringtree::op::min);
      comm.allreduce(std::span<float>(hi), ringtree::op::max);
      if (lo != hi) throw ringtree::error("ddp_toy", rank, "replicas differ after step " + std::to_string(step));
      if (rank == 0 && (step % 10 == 0 || step == steps - 1)) std::printf("step %3d  loss (rank 0) %.4f\n", step, loss);
    }
    if (rank == 0) {
      std::ofstream f(ckpt, std::ios::binary);
      f.write(reinterpret_cast<const char*>(model.params.data()), std::streamsize(model.params.size() * sizeof(float)));
    }
    comm.barrier();
    std::vector<float> loaded(model.params.size());
    std::ifstream f(ckpt, std::ios::binary);
    f.read(reinterpret_cast<char*>(loaded.data()), std::streamsize(loaded.size() * sizeof(float)));
    const bool same = f && loaded == model.params;
    int all_same = same ? 1 : 0;
    comm.allreduce(std::span<int>(&all_same, 1), ringtree::op::min);
    if (rank == 0)
      std::printf("%d ranks, %d steps: replicas identical after every step; checkpoint loaded on every rank: %s\n",
                  comm.size(), steps, all_same ? "identical" : "DIFFERENT");
    status = all_same ? 0 : 1;
  } catch (const ringtree::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
