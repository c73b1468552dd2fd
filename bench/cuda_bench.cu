// Device benchmark: allreduce busbw on GPU buffers over cuda_ipc_transport,
// next to cudaMemcpy device-to-device bandwidth measured in the same run.
// The ranks are forked processes (no MPI needed on a GPU machine).
//   build/bench/cuda_bench [ranks, default 2] [max bytes, default 1G]
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/cuda_ipc.hpp>

using namespace ringtree;

namespace {

int run_rank(const std::string& name, int rank, int size, std::size_t max_bytes) {
  int devices = 0;
  detail::cuda_check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount", rank);
  detail::cuda_check(cudaSetDevice(rank % devices), "cudaSetDevice", rank);
  cudaStream_t stream;
  detail::cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate", rank);
  cuda_ipc_transport t(name, rank, size, stream);
  communicator_options opt;
  opt.chunks.ring_chunk_bytes = std::size_t{4} << 20;
  communicator comm(t, opt);
  float *a = nullptr, *b = nullptr;
  detail::cuda_check(cudaMalloc(&a, max_bytes), "cudaMalloc", rank);
  detail::cuda_check(cudaMalloc(&b, max_bytes), "cudaMalloc", rank);
  detail::cuda_check(cudaMemset(a, 0, max_bytes), "cudaMemset", rank);
  // cudaMemcpy device-to-device bandwidth, for scale (bytes copied / time)
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaMemcpyAsync(b, a, max_bytes, cudaMemcpyDeviceToDevice, stream);  // warm-up
  cudaEventRecord(e0, stream);
  for (int i = 0; i < 10; ++i) cudaMemcpyAsync(b, a, max_bytes, cudaMemcpyDeviceToDevice, stream);
  cudaEventRecord(e1, stream);
  detail::cuda_check(cudaEventSynchronize(e1), "cudaEventSynchronize", rank);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  const double copy_gbs = 10.0 * max_bytes / (ms * 1e6);
  if (rank == 0) {
    std::printf("# cuda_bench: %d ranks, %d device(s); cudaMemcpy D2D %.1f GB/s at %zu bytes\n", size, devices, copy_gbs, max_bytes);
    std::printf("%12s %12s %12s %12s %14s\n", "bytes", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "busbw/memcpy");
  }
  for (std::size_t bytes = 4; bytes <= max_bytes; bytes *= bytes < (std::size_t{1} << 20) ? 16 : 4) {
    const std::size_t n = bytes / sizeof(float);
    const std::span<const float> in(a, n);
    const std::span<float> out(b, n);
    comm.allreduce(in, out);  // warm-up
    const int iters = bytes < (std::size_t{64} << 20) ? 20 : 5;
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) comm.allreduce(in, out);
    comm.barrier();  // so the time is the slowest rank's
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    const double algbw = bytes / us / 1e3, busbw = algbw * 2.0 * (size - 1) / size;
    if (rank == 0) std::printf("%12zu %12.1f %12.2f %12.2f %14.3f\n", bytes, us, algbw, busbw, busbw / copy_gbs);
  }
  cudaFree(a);
  cudaFree(b);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int size = argc > 1 ? std::atoi(argv[1]) : 2;
  const std::size_t max_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (std::size_t{1} << 30);
  if (size < 1 || max_bytes < 4) {
    std::fprintf(stderr, "cuda_bench: usage: cuda_bench [ranks >= 1] [max bytes >= 4]\n");
    return 2;
  }
  const std::string name = detail::cat("/ringtree-cuda-bench-", getpid());
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    std::fflush(nullptr);
    const pid_t pid = fork();  // before any CUDA call: a child cannot use its parent's context
    if (pid == 0) {
      int rc = 1;
      try {
        rc = run_rank(name, r, size, max_bytes);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "cuda_bench: %s\n", e.what());
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  int rc = 0;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}
