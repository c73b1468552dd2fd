// The classic two-stage toy of model-parallel tutorials, over MPI:
// Linear(10,5) -> LeakyReLU on rank 0, Linear(5,5) on rank 1, MSE loss,
// trained with micro-batches flowing through the pipeline (1F1B). It shows
// that the result equals sequential training in one process, and measures
// the speed-up of pipelining over sending the whole batch at once, with
// each layer's compute simulated by a sleep proportional to its batch (as
// when the math runs on an accelerator and the CPU waits).
// On 4 ranks it combines 2 pipeline stages with 2 data-parallel replicas
// (communicator::split makes both groups; grad_sync averages each stage's
// gradients across the replicas), still equal to one process on the
// whole batch.
//   mpirun -np 2 build/examples/model_parallel [steps] [micro-batches]
//   mpirun -np 4 build/examples/model_parallel [steps] [micro-batches]
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/train/grad_sync.hpp>
#include <ringtree/train/pipeline.hpp>
#include <ringtree/transport/mpi.hpp>

#include "tiny_mlp.hpp"

namespace {

constexpr int batch = 32, in = 10, mid = 5, out = 5;
constexpr double us_per_sample = 200;  // simulated layer compute

void simulate(int samples) { std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(us_per_sample * samples)); }

float target(float a, float b) { return std::sin(a) + 0.5f * b; }
// `rows` samples: inputs and the targets of a fixed function of them.
void make_batch(std::mt19937& g, int rows, std::vector<float>& x, std::vector<float>& t) {
  std::uniform_real_distribution<float> u(-1, 1);
  x.resize(rows * in);
  t.resize(rows * out);
  for (auto& v : x) v = u(g);
  for (int s = 0; s < rows; ++s)
    for (int o = 0; o < out; ++o) t[s * out + o] = target(x[s * in + 2 * o], x[s * in + 2 * o + 1]);
}

// Stage 0: Linear(10,5) -> LeakyReLU. Micro-batch k is rows [k*mb, (k+1)*mb) of the batch.
struct first_stage {
  tiny::linear l{in, mid, 1};
  int mb = 0;
  std::vector<float> x, z, h, gh, gz, gx;
  void reset(int micro) {
    mb = batch / micro;
    z.assign(batch * mid, 0), h = z, gh = z, gz = z, gx.assign(batch * in, 0);
  }
  std::span<float> input(int) { return {}; }
  std::span<float> output(int k) { return std::span<float>(h).subspan(k * mb * mid, mb * mid); }
  std::span<float> grad_output(int k) { return std::span<float>(gh).subspan(k * mb * mid, mb * mid); }
  std::span<float> grad_input(int k) { return std::span<float>(gx).subspan(k * mb * in, mb * in); }
  void forward(int k) {
    simulate(mb);
    l.forward(std::span<const float>(x).subspan(k * mb * in, mb * in), std::span<float>(z).subspan(k * mb * mid, mb * mid), mb);
    for (int i = k * mb * mid; i < (k + 1) * mb * mid; ++i) h[i] = tiny::leaky(z[i]);
  }
  void backward(int k) {
    simulate(mb);
    for (int i = k * mb * mid; i < (k + 1) * mb * mid; ++i) gz[i] = gh[i] * tiny::leaky_grad(z[i]);
    l.backward(std::span<const float>(x).subspan(k * mb * in, mb * in), std::span<const float>(gz).subspan(k * mb * mid, mb * mid),
               grad_input(k), mb);
  }
};

// Stage 1: Linear(5,5), loss = mean over the batch of the summed squared error.
struct second_stage {
  tiny::linear l{mid, out, 2};
  int mb = 0;
  std::vector<float> h, y, t, gy, gh;
  float loss = 0;
  void reset(int micro) {
    mb = batch / micro;
    h.assign(batch * mid, 0), gh = h, y.assign(batch * out, 0), gy = y, loss = 0;
  }
  std::span<float> input(int k) { return std::span<float>(h).subspan(k * mb * mid, mb * mid); }
  std::span<float> output(int) { return {}; }
  std::span<float> grad_output(int) { return {}; }
  std::span<float> grad_input(int k) { return std::span<float>(gh).subspan(k * mb * mid, mb * mid); }
  void forward(int k) {
    simulate(mb);
    l.forward(input(k), std::span<float>(y).subspan(k * mb * out, mb * out), mb);
  }
  void backward(int k) {
    simulate(mb);
    for (int i = k * mb * out; i < (k + 1) * mb * out; ++i) {
      const float d = y[i] - t[i];
      loss += d * d / batch;
      gy[i] = 2 * d / batch;
    }
    l.backward(input(k), std::span<const float>(gy).subspan(k * mb * out, mb * out), grad_input(k), mb);
  }
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;  // grad_sync (4 ranks) all-reduces on a background thread
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 30, micro = argc > 2 ? std::atoi(argv[2]) : 4;
  int status = 0;
  try {
    ringtree::mpi_transport t(MPI_COMM_WORLD);
    ringtree::communicator world(t);
    const int rank = world.rank(), replicas = world.size() / 2;
    if (world.size() != 2 && world.size() != 4)
      throw ringtree::error("model_parallel", rank, "run it on 2 ranks (2 stages) or 4 (2 stages x 2 replicas)");
    if (micro < 1 || batch % micro != 0) throw ringtree::error("model_parallel", rank, "micro-batches must divide 32");
    const int stage = rank % 2, replica = rank / 2;
    auto pipe = world.split(replica, stage);  // the two stages of one replica
    auto dp = world.split(stage, replica);    // the same stage in every replica
    ringtree::stage_link link(pipe.transport(), stage == 1 ? 0 : -1, stage == 0 ? 1 : -1);
    first_stage s0;
    second_stage s1;
    tiny::linear& mine = stage == 0 ? s0.l : s1.l;
    ringtree::grad_sync sync(dp, std::vector<std::span<float>>{std::span<float>(mine.gw), std::span<float>(mine.gb)});
    tiny::linear seq0{in, mid, 1}, seq1{mid, out, 2};  // the sequential reference, on every rank
    std::mt19937 data(3);
    std::vector<float> x, tg;
    const int global = batch * replicas;
    auto step = [&](int m) {  // one training step: every replica pipelines its share of the batch
      make_batch(data, global, x, tg);
      std::span<const float> xs(x), ts(tg);
      if (stage == 0) s0.reset(m), s0.x.assign(xs.begin() + replica * batch * in, xs.begin() + (replica + 1) * batch * in);
      else s1.reset(m), s1.t.assign(ts.begin() + replica * batch * out, ts.begin() + (replica + 1) * batch * out);
      if (stage == 0) ringtree::run_pipeline(link, s0, ringtree::pipeline_schedule::one_f_one_b, 0, 2, m);
      else ringtree::run_pipeline(link, s1, ringtree::pipeline_schedule::one_f_one_b, 1, 2, m);
      sync.mark_ready(1);
      sync.mark_ready(0);
      sync.synchronize();  // the mean over replicas
      mine.sgd_step(0.05f);
      // the same step in one process, on the whole batch
      std::vector<float> z(global * mid), h(global * mid), y(global * out), gy(global * out), gh(global * mid),
          gz(global * mid), gx(global * in);
      seq0.forward(x, z, global);
      for (std::size_t i = 0; i < z.size(); ++i) h[i] = tiny::leaky(z[i]);
      seq1.forward(h, y, global);
      for (std::size_t i = 0; i < y.size(); ++i) gy[i] = 2 * (y[i] - tg[i]) / global;
      seq1.backward(h, gy, gh, global);
      for (std::size_t i = 0; i < z.size(); ++i) gz[i] = gh[i] * tiny::leaky_grad(z[i]);
      seq0.backward(x, gz, gx, global);
      seq0.sgd_step(0.05f);
      seq1.sgd_step(0.05f);
    };
    for (int i = 0; i < steps; ++i) {
      step(micro);
      if (rank == 1 && (i % 10 == 0 || i == steps - 1)) std::printf("step %3d  loss (replica 0) %.5f\n", i, s1.loss);
    }
    const auto& ref = stage == 0 ? seq0 : seq1;
    float worst = 0;
    for (std::size_t i = 0; i < mine.w.size(); ++i) worst = std::max(worst, std::abs(mine.w[i] - ref.w[i]));
    for (std::size_t i = 0; i < mine.b.size(); ++i) worst = std::max(worst, std::abs(mine.b[i] - ref.b[i]));
    world.allreduce(std::span<float>(&worst, 1), ringtree::op::max);
    // speed: the whole batch at once (no pipelining) against `micro` micro-batches
    auto timed = [&](int m) {
      world.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 5; ++i) step(m);
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 5;
    };
    const double whole = timed(1), piped = timed(micro);
    if (rank == 0) {
      std::printf("%d stages x %d replicas vs one process: largest parameter difference %.2e (%s)\n", 2, replicas, worst,
                  worst < 1e-5f ? "equal within float tolerance" : "DIFFERENT");
      std::printf("step time: whole batch %.1f ms, %d micro-batches %.1f ms: %.2fx faster (ideal for 2 stages: %.2fx; bubble %.0f%%)\n",
                  whole, micro, piped, whole / piped, 2.0 * micro / (micro + 1), 100 * ringtree::bubble_fraction(2, micro));
    }
    status = worst < 1e-5f ? 0 : 1;
  } catch (const ringtree::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
