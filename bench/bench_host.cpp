// Host microbenchmarks: the local reduction kernels next to memcpy of the
// same bytes (same binary, same buffers), and every algorithm on local_world.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <vector>

#include <ringtree/ringtree.hpp>

using namespace ringtree;

namespace {

// Buffer sizes: one that fits in L2 and one that has to stream from memory.
constexpr std::int64_t small_bytes = 256 << 10, large_bytes = 32 << 20;

void bm_memcpy(benchmark::State& state) {
  const std::size_t bytes = state.range(0);
  std::vector<char> a(bytes, 1), b(bytes, 2);
  for (auto _ : state) {
    std::memcpy(a.data(), b.data(), bytes);
    benchmark::DoNotOptimize(a.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(bm_memcpy)->Arg(small_bytes)->Arg(large_bytes);

// 128 KiB (a shared-memory slot) with the destination 8 bytes past the
// source modulo 4 KiB, where some CPUs' `rep movsb` (glibc's memcpy of a
// few KiB and more) is 15-20x slow: memcpy (arg 0) against copy_bytes (arg 1).
void bm_copy_8_apart(benchmark::State& state) {
  const std::size_t bytes = 128 << 10;
  std::vector<char> a(bytes + 8192, 1), b(bytes + 8192, 2);
  char* src = a.data() + (4096 - (reinterpret_cast<std::uintptr_t>(a.data()) & 4095));
  char* dst = b.data() + (4096 - (reinterpret_cast<std::uintptr_t>(b.data()) & 4095)) + 8;
  for (auto _ : state) {
    if (state.range(0) == 0) std::memcpy(dst, src, bytes);
    else detail::copy_bytes(dst, src, bytes);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(bm_copy_8_apart)->Arg(0)->Arg(1);

template <class E, op O>
void bm_reduce(benchmark::State& state) {
  const std::size_t n = state.range(0) / sizeof(E);
  std::vector<E> acc(n), in(n);
  for (std::size_t i = 0; i < n; ++i) {
    acc[i] = detail::narrow<E>(detail::compute_t<E>(i % 7 + 1));
    in[i] = detail::narrow<E>(detail::compute_t<E>(1));
  }
  for (auto _ : state) {
    reduce_into<E>(O, acc, in);
    benchmark::DoNotOptimize(acc.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * sizeof(E));  // bytes of the buffer, as for memcpy
}
#define RT_REDUCE(E, O) BENCHMARK(bm_reduce<E, op::O>)->Name("bm_reduce<" #E "," #O ">")->Arg(small_bytes)->Arg(large_bytes)
RT_REDUCE(float, sum);
RT_REDUCE(float, prod);
RT_REDUCE(float, min);
RT_REDUCE(float, max);
RT_REDUCE(double, sum);
RT_REDUCE(std::int32_t, sum);
RT_REDUCE(std::int32_t, max);
RT_REDUCE(std::int8_t, sum);
RT_REDUCE(std::uint64_t, prod);
RT_REDUCE(half, sum);
RT_REDUCE(half, max);
RT_REDUCE(bfloat16, sum);
RT_REDUCE(bfloat16, max);

// A collective on an n-rank local_world: the ranks repeat it `reps` times
// and rank 0 times the loop (between barriers), so thread start-up is not
// measured.
template <collective C, algorithm A>
void bm_local(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::size_t count = state.range(1) / sizeof(float);
  local_world world(n);
  constexpr int reps = 20;
  for (auto _ : state) {
    double seconds = 0;
    world.run([&](local_transport& t) {
      communicator comm(t);
      std::vector<float> a(count * (C == collective::allgather || C == collective::reduce_scatter || C == collective::scatter || C == collective::gather ? n : 1), 1.0f);
      std::vector<float> b(a.size(), 0.0f);
      const std::size_t m = count;
      comm.barrier();
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) {
        if constexpr (C == collective::allreduce) comm.allreduce(std::span<float>(a), op::sum, A);
        else if constexpr (C == collective::broadcast) comm.broadcast(std::span<float>(a), 0, A);
        else if constexpr (C == collective::reduce) comm.reduce(std::span<const float>(a), std::span<float>(b), 0, op::sum, A);
        else if constexpr (C == collective::scatter) comm.scatter(std::span<const float>(a), std::span<float>(b).first(m), 0, A);
        else if constexpr (C == collective::gather) comm.gather(std::span<const float>(a).first(m), std::span<float>(b), 0, A);
        else if constexpr (C == collective::reduce_scatter) comm.reduce_scatter(std::span<const float>(a), std::span<float>(b).first(m), op::sum, A);
        else if constexpr (C == collective::allgather) comm.allgather(std::span<const float>(a).first(m), std::span<float>(b), A);
      }
      comm.barrier();
      if (t.rank() == 0) seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    state.SetIterationTime(seconds / reps);
  }
  state.SetBytesProcessed(state.iterations() * state.range(1));
}
#define RT_LOCAL(C, A) \
  BENCHMARK(bm_local<collective::C, algorithm::A>)->Name("local/" #C "/" #A)->ArgsProduct({{2, 4}, {4 << 10, 4 << 20}})->UseManualTime()->Unit(benchmark::kMicrosecond)
RT_LOCAL(allreduce, ring);
RT_LOCAL(allreduce, tree);
RT_LOCAL(broadcast, ring);
RT_LOCAL(broadcast, tree);
RT_LOCAL(broadcast, binomial);
RT_LOCAL(reduce, ring);
RT_LOCAL(reduce, tree);
RT_LOCAL(reduce, binomial);
RT_LOCAL(scatter, linear);
RT_LOCAL(scatter, binomial);
RT_LOCAL(gather, linear);
RT_LOCAL(gather, binomial);
RT_LOCAL(reduce_scatter, ring);
RT_LOCAL(allgather, ring);

}  // namespace

BENCHMARK_MAIN();
