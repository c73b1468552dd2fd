// Every collective on device buffers over cuda_ipc_transport, against the
// same sequential reference as the host suites, at 2 and 4 ranks: forked
// processes (as the shm suite), so the CUDA tests need no MPI and run on
// any machine with a GPU. Ranks share GPU rank % devices. Nothing touches
// CUDA before the fork: a forked child cannot use its parent's context.
// (CUDA defines a global `half`: with cuda_fp16.h in scope, say ringtree::half.)
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/cuda_ipc.hpp>

#include "tools/collective_check.hpp"
#include "process_check.hpp"

using namespace ringtree;

namespace {

// The communicator's calls on host spans: copy to the device, run the
// collective on device memory, copy back. So rt_test::check runs unchanged.
// Host spans made by symmetric_buffers() stand for device symmetric
// buffers (comm.allocate): their calls run on those.
struct device_comm {
  communicator<cuda_ipc_transport>& comm;
  std::map<const void*, std::span<std::byte>> symmetric{};  // host span's data -> its symmetric buffer
  int rank() const { return comm.rank(); }
  int size() const { return comm.size(); }

  struct device_symmetric_buffers {
    device_comm* dc;
    template <class E>
    rt_test::held<E> make(std::size_t len, bool everywhere) const {
      if (!everywhere) return rt_test::private_buffers{}.make<E>(len, false);
      struct both {
        std::vector<E> host;
        symmetric_buffer<E> dev;
        device_comm* dc;
        ~both() { dc->symmetric.erase(host.data()); }
      };
      auto b = std::make_shared<both>(both{std::vector<E>(len), dc->comm.template allocate<E>(len), dc});
      if (len != 0) dc->symmetric[b->host.data()] = std::as_writable_bytes(b->dev.span());
      return {b, std::span<E>(b->host)};
    }
  };
  device_symmetric_buffers symmetric_buffers() { return {this}; }

  template <class E> struct dev {
    E* p = nullptr;
    std::size_t n;
    explicit dev(std::size_t n_) : n(n_) { if (n) detail::cuda_check(cudaMalloc(&p, n * sizeof(E)), "cudaMalloc", -1); }
    ~dev() { if (p) cudaFree(p); }
    std::span<E> span() { return {p, n}; }
    void from(std::span<const E> h) {
      if (n) detail::cuda_check(cudaMemcpy(p, h.data(), n * sizeof(E), cudaMemcpyHostToDevice), "cudaMemcpy to device", -1);
    }
    void to(std::span<E> h) {
      if (n) detail::cuda_check(cudaMemcpy(h.data(), p, n * sizeof(E), cudaMemcpyDeviceToHost), "cudaMemcpy to host", -1);
    }
  };
  template <class E, class F> void run(std::span<const E> in, std::span<E> out, F f) {
    auto on_device = [&](std::span<const E> h, dev<E>& own) {  // h's symmetric buffer, or `own`
      const auto s = symmetric.find(h.data());
      std::span<E> d = s == symmetric.end() ? own.span() : std::span<E>(reinterpret_cast<E*>(s->second.data()), h.size());
      if (!h.empty())
        detail::cuda_check(cudaMemcpy(d.data(), h.data(), h.size_bytes(), cudaMemcpyHostToDevice), "cudaMemcpy to device", -1);
      return d;
    };
    dev<E> din(symmetric.count(in.data()) ? 0 : in.size()), dout(symmetric.count(out.data()) ? 0 : out.size());
    const auto di = on_device(in, din);
    const auto dx = on_device(std::span<const E>(out), dout);
    f(std::span<const E>(di), dx);
    if (!out.empty())
      detail::cuda_check(cudaMemcpy(out.data(), dx.data(), out.size_bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy to host", -1);
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
  template <class E> void alltoall(std::span<const E> in, std::span<E> out, algorithm a) {
    run<E>(in, out, [&](auto i, auto x) { comm.alltoall(i, x, a); });
  }
  void barrier() { comm.barrier(); }
};

// One rank of an n-rank run: its first failure, "" when all cases agree.
std::string run_rank(const std::string& name, int rank, int n) {
  int devices = 0;
  detail::cuda_check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount", rank);
  detail::cuda_check(cudaSetDevice(rank % devices), "cudaSetDevice", rank);
  cudaStream_t stream;
  detail::cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate", rank);
  std::string first;
  {
    shm_options small = cuda_ipc_transport::gpu_defaults();
    small.slot_bytes = 4096;  // many chunks, rings that fill up
    cuda_ipc_transport t(name, rank, n, stream, small);
    communicator_options opt;
    opt.chunks.ring_chunk_bytes = 8192;
    communicator comm(t, opt);
    device_comm dc{comm};
    // one GPU serves all ranks: keep 4 ranks short
    const std::vector<std::size_t> counts = {0, 1, std::size_t(n + 1), 1000, std::size_t(n <= 2 ? 100'003 : 10'007)};
    first = rt_test::run_cases<float, double, std::int32_t, std::uint8_t, ringtree::half, ringtree::bfloat16, std::int64_t>(
        dc, counts);
    // the direct algorithms on device symmetric buffers (IPC handles exchanged by allocate)
    const std::string sym = rt_test::run_cases<float, std::int32_t, ringtree::half, double>(dc, counts, 0, true);
    if (first.empty()) first = sym;
  }
  detail::cuda_check(cudaStreamDestroy(stream), "cudaStreamDestroy", rank);
  return first;
}

}  // namespace

TEST_CASE("cuda_ipc: every collective, algorithm and op on device buffers (private and symmetric) matches the reference") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    const std::string name = detail::cat("/ringtree-test-cuda-", getpid(), "-", n);
    const auto res = rt_test::run_processes(n, [&](int rank, FILE* out) {
      const std::string first = run_rank(name, rank, n);
      std::fprintf(out, "%s", first.c_str());
      return first.empty() ? 0 : 1;
    });
    for (int r = 0; r < n; ++r) {
      CAPTURE(r);
      CHECK_MESSAGE(res[r].text.empty(), res[r].text);
      CHECK((WIFEXITED(res[r].status) && WEXITSTATUS(res[r].status) == 0));
    }
  }
}
