// grad_sync against the alternatives a C++ trainer has, on 1000 gradients
// of 25 KB each: one allreduce per gradient (libtorch's distributed example)
// and one flat allreduce of the same bytes; then how much of the
// communication hides behind a simulated backward pass.
//   mpirun -np 2 build/bench/grad_sync_bench [mpi|shm|cluster]   (cluster: make_communicator's, any hosts)
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/train/grad_sync.hpp>
#include <ringtree/transport/mpi.hpp>
#include <ringtree/mpi.hpp>

using namespace ringtree;
using clk = std::chrono::steady_clock;

namespace {

constexpr std::size_t grads = 1000, elems = 25'000 / sizeof(float) + 150;  // 25.6 KB each
constexpr int reps = 7;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median over reps of the slowest rank's time for f(), in ms.
template <class F>
double time_ms(F f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = clk::now();
    f();
    double ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count(), worst = 0;
    MPI_Allreduce(&ms, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    t.push_back(worst);
  }
  return median(t);
}

// Stands in for the backward computation of one layer.
void compute(double us, bool busy) {
  if (!busy) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(us));
    return;
  }
  const auto end = clk::now() + std::chrono::duration<double, std::micro>(us);
  volatile double x = 1;
  while (clk::now() < end) x = x * 1.0000001 + 1e-9;
}

template <class Transport>
void run(Transport& t, const char* name) {
  communicator comm(t);
  const int rank = comm.rank();
  std::vector<std::vector<float>> g(grads, std::vector<float>(elems, 1.0f + rank));
  std::vector<std::span<float>> spans(g.begin(), g.end());
  std::vector<float> flat(grads * elems, 1.0f);

  const double per_gradient = time_ms([&] { for (auto s : spans) comm.allreduce(s, op::avg); });
  const double one_flat = time_ms([&] { comm.allreduce(std::span<float>(flat), op::avg); });
  auto sync_step = [&](grad_sync<communicator<Transport>, float>& s, double layer_us, bool busy) {
    for (std::size_t i = grads; i-- > 0;) {
      if (layer_us > 0) compute(layer_us, busy);
      s.mark_ready(i);
    }
    s.synchronize();
  };
  const std::string picked_small(to_string(comm.choose(collective::allreduce, elems * sizeof(float)))),
      picked_flat(to_string(comm.choose(collective::allreduce, flat.size() * sizeof(float))));
  grad_sync<communicator<Transport>, float> dflt(comm, spans);
  const double with_sync = time_ms([&] { sync_step(dflt, 0, false); });
  grad_sync<communicator<Transport>, float> views(comm, std::vector<std::size_t>(grads, elems));
  const double with_views = time_ms([&] { sync_step(views, 0, false); });

  if (rank == 0) {
    std::printf("# grad_sync_bench: %d ranks, transport %s, %zu gradients of %zu bytes (%.1f MB), median of %d\n",
                comm.size(), name, grads, elems * sizeof(float), grads * elems * sizeof(float) / 1e6, reps);
    std::printf("one allreduce per gradient   %9.2f ms   (automatic: %s)\n", per_gradient, picked_small.c_str());
    std::printf("one flat allreduce           %9.2f ms   (automatic: %s)\n", one_flat, picked_flat.c_str());
    std::printf("grad_sync (copies, %zu buckets) %7.2f ms   %.1fx faster than per gradient, %.2fx the flat allreduce\n",
                dflt.buckets(), with_sync, per_gradient / with_sync, with_sync / one_flat);
    std::printf("grad_sync (views in symmetric buckets, %zu) %7.2f ms   %.1fx faster than per gradient, %.2fx the flat allreduce\n",
                views.buckets(), with_views, per_gradient / with_views, with_views / one_flat);
  }

  // Overlap: backward computes each layer, then marks its gradient ready.
  grad_sync<communicator<Transport>, float> small(comm, spans, grad_sync_options{.bucket_bytes = std::size_t{4} << 20});
  const double comm_only = time_ms([&] { sync_step(small, 0, false); });
  for (bool busy : {false, true}) {
    const double layer_us = comm_only * 1000 / grads;  // backward as long as the communication
    const double compute_only = time_ms([&] { for (std::size_t i = 0; i < grads; ++i) compute(layer_us, busy); });
    const double overlapped = time_ms([&] { sync_step(small, layer_us, busy); });
    const double hidden = (compute_only + comm_only - overlapped) / comm_only;
    if (rank == 0)
      std::printf("overlap, %s backward (4 MiB buckets, %zu): compute %.2f ms + communication %.2f ms -> step %.2f ms: %.0f%% of the communication hidden\n",
                  busy ? "CPU-busy" : "accelerator-like (CPU idle)", small.buckets(), compute_only, comm_only, overlapped,
                  100 * hidden);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  const std::string which = argc > 1 ? argv[1] : "mpi";
  int rc = 0;
  try {
    if (which == "mpi") {
      mpi_transport t(MPI_COMM_WORLD);
      run(t, "mpi");
    } else if (which == "shm" || which == "cluster") {  // make_communicator's transport
      cluster_transport t(MPI_COMM_WORLD);
      if (which == "shm" && !t.one_host()) throw error("grad_sync_bench", t.rank(), "shm needs every rank on one host: use cluster");
      run(t, t.one_host() ? "shm (cluster_transport, one host)" : ("cluster, hosts " + t.layout().describe()).c_str());
    } else {
      throw error("grad_sync_bench", -1, "usage: grad_sync_bench [mpi|shm|cluster]");
    }
  } catch (const error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
