// Device benchmark: allreduce busbw on GPU buffers over cuda_ipc_transport,
// next to cudaMemcpy device-to-device bandwidth measured in the same run.
//   mpirun -np 2 build/bench/cuda_bench [max bytes, default 1G]
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/cuda_ipc.hpp>
#include <ringtree/transport/shm_mpi.hpp>

using namespace ringtree;

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1, devices = 0, rc = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::size_t max_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (std::size_t{1} << 30);
  try {
    detail::cuda_check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount", rank);
    detail::cuda_check(cudaSetDevice(rank % devices), "cudaSetDevice", rank);
    cudaStream_t stream;
    detail::cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate", rank);
    cuda_ipc_transport t(shared_segment_name(MPI_COMM_WORLD), rank, size, stream);
    communicator_options opt;
    opt.chunks.ring_chunk_bytes = std::size_t{4} << 20;
    communicator comm(t, opt);
    float *a = nullptr, *b = nullptr;
    detail::cuda_check(cudaMalloc(&a, max_bytes), "cudaMalloc", rank);
    detail::cuda_check(cudaMalloc(&b, max_bytes), "cudaMalloc", rank);
    cudaMemset(a, 0, max_bytes);
    // cudaMemcpy device-to-device bandwidth, for scale (bytes copied / time)
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0, stream);
    for (int i = 0; i < 10; ++i) cudaMemcpyAsync(b, a, max_bytes, cudaMemcpyDeviceToDevice, stream);
    cudaEventRecord(e1, stream);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    const double copy_gbs = 10.0 * max_bytes / (ms * 1e6);
    if (rank == 0) {
      std::printf("# cuda_bench: %d ranks, %d device(s); cudaMemcpy D2D %.1f GB/s at %zu bytes\n", size, devices, copy_gbs, max_bytes);
      std::printf("%12s %12s %12s %12s %14s\n", "bytes", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "busbw/memcpy");
    }
    for (std::size_t bytes = std::size_t{1} << 20; bytes <= max_bytes; bytes *= 4) {
      const std::size_t n = bytes / sizeof(float);
      comm.allreduce(std::span<const float>(a, n), std::span<float>(b, n));  // warm-up
      MPI_Barrier(MPI_COMM_WORLD);
      const int iters = 5;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) comm.allreduce(std::span<const float>(a, n), std::span<float>(b, n));
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters, worst = 0;
      MPI_Allreduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      const double algbw = bytes / worst / 1e3, busbw = algbw * 2.0 * (size - 1) / size;
      if (rank == 0) std::printf("%12zu %12.1f %12.2f %12.2f %14.3f\n", bytes, worst, algbw, busbw, busbw / copy_gbs);
    }
    cudaFree(a);
    cudaFree(b);
  } catch (const error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
