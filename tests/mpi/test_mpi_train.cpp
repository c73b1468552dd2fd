// Training over MPI: grad_sync (replicas equal, the mean gradient, training
// equal to one rank on the whole batch) and pipelines against the sequential run.
#include <doctest/doctest.h>
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/mpi.hpp>
#include <ringtree/transport/shm_mpi.hpp>
#include <ringtree/train/grad_sync.hpp>

#include "mpi_check.hpp"
#include "pipeline_check.hpp"
#include "test_time.hpp"
#include "train_check.hpp"

using namespace ringtree;
using namespace std::chrono_literals;

namespace {
using rt_test::all_ranks;
using rt_test::world_size;
}  // namespace


TEST_CASE("grad_sync over MPI: replicas stay bitwise equal and equal the mean gradient") {
  mpi_transport t(MPI_COMM_WORLD);
  communicator comm(t);
  const int n = comm.size(), me = comm.rank();
  std::vector<std::vector<float>> grads = {std::vector<float>(3000), std::vector<float>(17), std::vector<float>(5000),
                                           std::vector<float>(1)};
  std::vector<std::span<float>> spans(grads.begin(), grads.end());
  grad_sync sync(comm, spans, grad_sync_options{.bucket_bytes = 16'000, .last_bucket_bytes = 4'000});
  std::string f;
  for (int step = 0; step < 3; ++step) {
    for (std::size_t g = 0; g < grads.size(); ++g)
      for (std::size_t i = 0; i < grads[g].size(); ++i) grads[g][i] = float((me + 1) * (step + 1)) + float(i % 7);
    for (std::size_t g = grads.size(); g-- > 0;) sync.mark_ready(g);
    sync.synchronize();
    const float mean_rank = float(n + 1) / 2 * (step + 1);
    for (std::size_t g = 0; g < grads.size(); ++g)
      for (std::size_t i = 0; i < grads[g].size(); ++i)
        if (std::abs(grads[g][i] - (mean_rank + float(i % 7))) > 1e-4f && f.empty())
          f = detail::cat("step ", step, " gradient ", g, "[", i, "] = ", grads[g][i]);
  }
  CHECK_MESSAGE(f.empty(), f);
  CHECK(all_ranks(f.empty()));
}


TEST_CASE("grad_sync over MPI: data-parallel training equals one rank on the whole batch") {
  const int n = world_size();
  if (24 % n != 0) return;
  mpi_transport t(MPI_COMM_WORLD);
  communicator comm(t);
  const auto parallel = rt_test::train::train_parallel(comm, grad_sync_options{.bucket_bytes = 200, .last_bucket_bytes = 100}, true);
  const auto alone = rt_test::train::train_alone();
  bool ok = parallel.size() == alone.size();
  for (std::size_t i = 0; ok && i < alone.size(); ++i) ok = std::abs(parallel[i] - alone[i]) <= 1e-5f * (1 + std::abs(alone[i]));
  CHECK(ok);
  CHECK(all_ranks(ok));
}


TEST_CASE("pipeline over MPI: one stage per rank, GPipe and 1F1B equal the sequential run") {
  mpi_transport t(MPI_COMM_WORLD);
  std::string f;
  for (int m : {1, 4, 7})
    for (auto kind : {pipeline_schedule::gpipe, pipeline_schedule::one_f_one_b})
      if (auto x = rt_test::pipe::check(t, kind, m); f.empty()) f = x;
  CHECK_MESSAGE(f.empty(), f);
  CHECK(all_ranks(f.empty()));
}

// Even and odd ranks, each half summing on its own, over `comm`'s transport.
