// What libringtree-mpi itself costs per call, at 8 bytes (linked before MPI,
// so MPI_Allreduce is the layer's). Interleaved rounds of `calls` calls
// each, medians per call:
//
//   served     MPI_Allreduce through the layer, which runs ringtree's
//   direct     the same all-reduce on a ringtree communicator called directly
//              (make_communicator over the same ranks)
//   passed     MPI_Allreduce through the layer with a user op (MPI serves it)
//   pmpi       PMPI_Allreduce with that user op
//   plain      PMPI_Allreduce with MPI_SUM: MPI's own all-reduce
//
// served - direct is what the layer adds to a call it serves (finding the
// communicator's attribute, the datatype and op, the guard), passed - pmpi
// what it adds to one it passes on.
//
//   mpirun -np 2 build/bench/layer_overhead [rounds] [calls]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <ringtree/mpi.hpp>

namespace {
void user_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  for (int i = 0; i < *len; ++i) static_cast<double*>(inout)[i] += static_cast<double*>(in)[i];
}
template <class F>
double per_call_us(F&& f, int calls) {
  for (int i = 0; i < calls / 10; ++i) f();
  PMPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls, slowest = 0;
  PMPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}
double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15, calls = argc > 2 ? std::atoi(argv[2]) : 20000;
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  {  // (the communicator goes before MPI_Finalize)
  double in = rank + 1.0, out = 0;
  auto direct = ringtree::make_communicator(MPI_COMM_WORLD);
  MPI_Op mine;
  MPI_Op_create(user_sum, 1, &mine);
  struct column {
    const char* name;
    std::vector<double> us;
  } cols[] = {{"served", {}}, {"direct", {}}, {"passed", {}}, {"pmpi", {}}, {"plain", {}}};
  std::span<const double> i1(&in, 1);
  std::span<double> o1(&out, 1);
  for (int r = 0; r < rounds; ++r) {
    cols[0].us.push_back(per_call_us([&] { MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); }, calls));
    cols[1].us.push_back(per_call_us([&] { direct.allreduce(i1, o1); }, calls));
    cols[2].us.push_back(per_call_us([&] { MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, mine, MPI_COMM_WORLD); }, calls));
    cols[3].us.push_back(per_call_us([&] { PMPI_Allreduce(&in, &out, 1, MPI_DOUBLE, mine, MPI_COMM_WORLD); }, calls));
    cols[4].us.push_back(per_call_us([&] { PMPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); }, calls));
  }
  if (rank == 0) {
    std::printf("# libringtree-mpi per-call cost, 8 B all-reduce, %d ranks: medians of %d rounds of %d calls (us per call)\n", size, rounds, calls);
    for (auto& c : cols) std::printf("%-8s %8.3f\n", c.name, median(c.us));
    std::printf("served - direct (what the layer adds to a call it serves): %+.3f us\n", median(cols[0].us) - median(cols[1].us));
    std::printf("passed - pmpi   (what it adds to one it passes to MPI):    %+.3f us\n", median(cols[2].us) - median(cols[3].us));
    std::printf("served / plain  (the layer against MPI's own all-reduce):  %.2f\n", median(cols[0].us) / median(cols[4].us));
  }
  MPI_Op_free(&mine);
  }
  MPI_Finalize();
  return 0;
}
