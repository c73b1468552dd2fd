// A torch::nn model trained data-parallel over MPI with ringtree::grad_sync:
// what DistributedDataParallel does in Python, for a libtorch C++ trainer.
// Autograd hooks copy each gradient into grad_sync's bucket storage and mark
// it ready, so buckets are all-reduced while backward is still running.
// Rank 0 also trains one model alone on the whole batch and shows that the
// data-parallel model ends with the same parameters.
//   mpirun -np 2 build/examples/libtorch_ddp [steps]
#include <mpi.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/train/grad_sync.hpp>
#include <ringtree/transport/mpi.hpp>

namespace {
torch::nn::Sequential make_model() {
  torch::manual_seed(7);  // the same start everywhere; broadcast_parameters would also do
  return torch::nn::Sequential(torch::nn::Linear(10, 10), torch::nn::ReLU(), torch::nn::Linear(10, 5));
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20;
  int status = 0;
  try {
    torch::set_num_threads(1);
    ringtree::mpi_transport t(MPI_COMM_WORLD);
    ringtree::communicator comm(t);
    const int rank = comm.rank(), n = comm.size(), share = 20, global = share * n;

    auto model = make_model();
    auto params = model->parameters();
    std::vector<std::size_t> sizes;
    for (auto& p : params) sizes.push_back(static_cast<std::size_t>(p.numel()));
    ringtree::grad_sync<ringtree::communicator<ringtree::mpi_transport>, float> sync(comm, sizes);  // views
    std::vector<std::span<float>> param_spans;
    for (auto& p : params) param_spans.emplace_back(p.data_ptr<float>(), static_cast<std::size_t>(p.numel()));
    sync.broadcast_parameters(param_spans, 0);
    for (std::size_t i = 0; i < params.size(); ++i)
      params[i].register_hook([&sync, i](torch::Tensor grad) {
        auto g = grad.contiguous();
        auto view = sync.gradient(i);
        std::memcpy(view.data(), g.data_ptr<float>(), view.size_bytes());
        sync.mark_ready(i);  // this bucket may now start, while backward goes on
        return grad;
      });
    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01));

    auto alone = make_model();  // rank 0's check: one model, the whole batch
    torch::optim::SGD opt_alone(alone->parameters(), torch::optim::SGDOptions(0.01));

    torch::manual_seed(123);  // every rank draws the same global batches and takes its share
    for (int step = 0; step < steps; ++step) {
      auto x = torch::randn({global, 10}), y = torch::randn({global, 5});
      auto xs = x.narrow(0, rank * share, share), ys = y.narrow(0, rank * share, share);
      opt.zero_grad();
      auto loss = torch::mse_loss(model->forward(xs), ys);
      loss.backward();
      sync.synchronize();
      for (std::size_t i = 0; i < params.size(); ++i) {  // the mean over ranks becomes .grad
        auto v = sync.gradient(i);
        params[i].mutable_grad() = torch::from_blob(v.data(), params[i].sizes(), torch::kFloat).clone();
      }
      opt.step();
      float l = loss.item<float>();
      comm.allreduce(std::span<float>(&l, 1), ringtree::op::avg);
      if (rank == 0) {
        opt_alone.zero_grad();
        torch::mse_loss(alone->forward(x), y).backward();
        opt_alone.step();
        std::printf("step %3d  loss %.5f\n", step, l);
      }
    }
    if (rank == 0) {
      double worst = 0;
      auto pa = alone->parameters();
      for (std::size_t i = 0; i < params.size(); ++i)
        worst = std::max(worst, (params[i] - pa[i]).abs().max().item<double>());
      std::printf("%d ranks: largest difference to one process on the whole batch: %.2e (%s)\n", n, worst,
                  worst < 1e-5 ? "equal within float tolerance" : "DIFFERENT");
      status = worst < 1e-5 ? 0 : 1;
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
