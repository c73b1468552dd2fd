#pragma once
// Data-parallel training against training alone, shared by the host and
// MPI suites: the same batches, split over the ranks, with gradients
// averaged by grad_sync, must give the parameters of one model trained on
// the whole batch.
#include <algorithm>
#include <random>
#include <span>
#include <vector>

#include <ringtree/train/grad_sync.hpp>

#include "examples/tiny_mlp.hpp"

namespace rt_test::train {

// The model's gradient buffer cut per parameter tensor, in parameter order.
constexpr int global_batch = 24, steps = 5;

// The whole batch on one model: what data parallelism must reproduce.
inline std::vector<float> train_alone() {
  tiny::mlp m(10, 10, 5, 1);
  std::mt19937 g(99);
  std::vector<float> x, y;
  for (int s = 0; s < steps; ++s) {
    tiny::random_batch(g, global_batch, 10, 5, x, y);
    m.accumulate_gradients(x, y, global_batch);
    m.sgd_step(0.1f);
  }
  return m.params;
}

// Rank r trains on its share of the same batches, gradients averaged by grad_sync.
template <class Comm>
std::vector<float> train_parallel(Comm& comm, ringtree::grad_sync_options opt, bool shuffle_ready) {
  const int n = comm.size(), r = comm.rank(), share = global_batch / n;
  tiny::mlp m(10, 10, 5, 1 + 1000 * r);  // different start on each rank (rank 0 as the reference)...
  ringtree::grad_sync sync(comm, m.tensors(m.grads), opt);
  sync.broadcast_parameters(m.tensors(m.params), 0);  // ...made equal
  std::mt19937 g(99), order(r);
  std::vector<float> x, y;
  for (int s = 0; s < steps; ++s) {
    tiny::random_batch(g, global_batch, 10, 5, x, y);
    std::span<const float> xs(x), ys(y);
    m.accumulate_gradients(xs.subspan(r * share * 10, share * 10), ys.subspan(r * share * 5, share * 5), share);
    std::vector<std::size_t> idx = {3, 2, 1, 0};  // backward: last layer first
    if (shuffle_ready) std::shuffle(idx.begin(), idx.end(), order);
    for (auto i : idx) sync.mark_ready(i);
    sync.synchronize();
    m.sgd_step(0.1f);
  }
  return m.params;
}

}  // namespace rt_test::train
