// Every collective on device buffers over cuda_ipc_transport, against the
// same sequential reference as the host suites. Launched by mpirun (MPI
// only hands out the segment name); ranks share GPU rank % devices.
// (CUDA defines a global `half`: with cuda_fp16.h in scope, say ringtree::half.)
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/cuda_ipc.hpp>
#include <ringtree/transport/shm_mpi.hpp>

#include "../collective_check.hpp"

using namespace ringtree;

namespace {

// The communicator's calls on host spans: copy to the device, run the
// collective on device memory, copy back. So rt_test::check runs unchanged.
struct device_comm {
  communicator<cuda_ipc_transport>& comm;
  cudaStream_t stream;
  int rank() const { return comm.rank(); }
  int size() const { return comm.size(); }

  template <class E> struct dev {
    E* p = nullptr;
    std::size_t n;
    explicit dev(std::size_t n_) : n(n_) { if (n) detail::cuda_check(cudaMalloc(&p, n * sizeof(E)), "cudaMalloc", -1); }
    ~dev() { if (p) cudaFree(p); }
    std::span<E> span() { return {p, n}; }
    void from(std::span<const E> h) { if (n) cudaMemcpy(p, h.data(), n * sizeof(E), cudaMemcpyHostToDevice); }
    void to(std::span<E> h) { if (n) cudaMemcpy(h.data(), p, n * sizeof(E), cudaMemcpyDeviceToHost); }
  };
  template <class E, class F> void run(std::span<const E> in, std::span<E> out, F f) {
    dev<E> din(in.size()), dout(out.size());
    din.from(in);
    dout.from(std::span<const E>(out));
    f(std::span<const E>(din.span()), dout.span());
    dout.to(out);
  }
  template <class E> void allreduce(std::span<const E> in, std::span<E> out, op o, algorithm a) {
    run<E>(in, out, [&](auto i, auto x) { comm.allreduce(i, x, o, a); });
  }
  template <class E> void reduce(std::span<const E> in, std::span<E> out, int root, op o, algorithm a) {
    run<E>(in, out, [&](auto i, auto x) { comm.reduce(i, x, root, o, a); });
  }
  template <class E> void broadcast(std::span<E> data, int root, algorithm a) {
    run<E>({}, data, [&](auto, auto x) { comm.broadcast(x, root, a); });
  }
  template <class E> void scatter(std::span<const E> in, std::span<E> out, int root, algorithm a) {
    run<E>(in, out, [&](auto i, auto x) { comm.scatter(i, x, root, a); });
  }
  template <class E> void gather(std::span<const E> in, std::span<E> out, int root, algorithm a) {
    run<E>(in, out, [&](auto i, auto x) { comm.gather(i, x, root, a); });
  }
  template <class E> void reduce_scatter(std::span<const E> in, std::span<E> out, op o, algorithm a) {
    run<E>(in, out, [&](auto i, auto x) { comm.reduce_scatter(i, x, o, a); });
  }
  template <class E> void allgather(std::span<const E> in, std::span<E> out, algorithm a) {
    run<E>(in, out, [&](auto i, auto x) { comm.allgather(i, x, a); });
  }
  void barrier() { comm.barrier(); }
};

bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

}  // namespace

TEST_CASE("cuda_ipc: every collective, algorithm and op on device buffers matches the reference") {
  int rank = 0, size = 1, devices = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
  REQUIRE(cudaSetDevice(rank % devices) == cudaSuccess);
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  std::string first;
  {
    shm_options small = cuda_ipc_transport::gpu_defaults();
    small.slot_bytes = 4096;  // many chunks, rings that fill up
    cuda_ipc_transport t(shared_segment_name(MPI_COMM_WORLD), rank, size, stream, small);
    communicator_options opt;
    opt.chunks.ring_chunk_bytes = 8192;
    communicator comm(t, opt);
    device_comm dc{comm, stream};
    for (const auto& c : rt_test::all_cases(size, {0, 1, std::size_t(size + 1), 1000, 100'003}))
      for (auto f : {rt_test::check<float>(dc, c), rt_test::check<double>(dc, c), rt_test::check<std::int32_t>(dc, c),
                     rt_test::check<std::uint8_t>(dc, c), rt_test::check<ringtree::half>(dc, c), rt_test::check<ringtree::bfloat16>(dc, c),
                     rt_test::check<std::int64_t>(dc, c)})
        if (first.empty()) first = f;
  }
  CHECK_MESSAGE(first.empty(), first);
  CHECK(all_ranks(first.empty()));
  cudaStreamDestroy(stream);
}
