#pragma once
// cuda_ipc_transport: ringtree's collectives on GPU memory, one process per
// rank, all on one host (compile this with nvcc).
//
// It is the shared-memory transport with its chunk payloads moved to the
// GPU: the host segment still carries the per-pair counters, chunk headers
// and doorbells (the control plane), while each rank cudaMallocs a staging
// area for the chunks sent to it and publishes its CUDA IPC handle in the
// segment. A sender copies a chunk device-to-device straight into the
// receiver's staging slot (cudaMemcpyAsync on the user's stream, peer access
// where the GPUs allow it, the driver stages through the host otherwise),
// waits for it, then publishes the chunk; the receiver copies it out the
// same way. Reductions run as CUDA kernels on the same stream.
//
// Symmetric memory (comm.allocate) is device memory whose IPC handles are
// exchanged once; the direct algorithms read peers' buffers with copies
// and kernels on the stream, and synchronise through host memory.
//
// Completion: every call returns when its work is done (unlike NCCL, which
// returns once the work is enqueued); work the caller queued on the stream
// before the call is ordered before it.
//
// Several ranks may share one GPU (what a one-GPU machine can test); a
// machine without a GPU or driver gets a ringtree::error at construction.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <ringtree/core/error.hpp>
#include <ringtree/core/reduce.hpp>
#include <ringtree/transport/exchange.hpp>
#include <ringtree/transport/shm.hpp>

namespace ringtree {
namespace detail {

// One place where CUDA errors become ringtree::error. Clears the error so
// that a later call does not report it again (sticky errors stay sticky:
// the context is lost then, and every later call says so).
inline void cuda_check(cudaError_t e, const char* what, int rank) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw error(what, rank, cat(cudaGetErrorName(e), ": ", cudaGetErrorString(e)));
}

// Element access in device code: 16-bit floats through CUDA's own types.
template <class E> struct device_value {
  __device__ static compute_t<E> load(E v) { return v; }
  __device__ static E store(compute_t<E> v) { return v; }
};
template <> struct device_value<half> {
  __device__ static float load(half v) { return __half2float(__ushort_as_half(v.bits)); }
  __device__ static half store(float v) {
    half h;
    h.bits = __half_as_ushort(__float2half_rn(v));
    return h;
  }
};
template <> struct device_value<bfloat16> {
  __device__ static float load(bfloat16 v) { return __bfloat162float(__ushort_as_bfloat16(v.bits)); }
  __device__ static bfloat16 store(float v) {
    bfloat16 h;
    h.bits = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    return h;
  }
};

template <class E, class F>
__global__ void reduce_kernel(E* acc, const E* in, std::size_t n, F f, bool in_first) {
  using V = device_value<E>;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const auto a = V::load(acc[i]), b = V::load(in[i]);
    acc[i] = V::store(in_first ? f(b, a) : f(a, b));
  }
}

template <class E>
__global__ void average_kernel(E* data, std::size_t n, int ranks) {
  using V = device_value<E>;
  using C = compute_t<E>;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    data[i] = V::store(static_cast<C>(V::load(data[i]) / static_cast<C>(ranks)));
}

template <class E>
__global__ void split_avg_kernel(E* data, std::int64_t* rem, std::size_t n, int ranks) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    rem[i] = avg_split(data[i], ranks);
}
template <class E>
__global__ void join_avg_kernel(E* data, const std::int64_t* rem, std::size_t n, int ranks) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    data[i] = avg_join(data[i], rem[i], ranks);
}

inline unsigned grid_for(std::size_t n) {
  const std::size_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 4096 ? (blocks == 0 ? 1 : blocks) : 4096);
}

}  // namespace detail

// Device memory on one stream: scratch from cudaMalloc, copies and
// reductions enqueued on the stream. Copies wait for the stream, since the
// transport publishes a chunk right after copying it.
struct device_memory {
  static constexpr memory_kind kind = memory_kind::device;
  cudaStream_t stream = nullptr;
  int rank = -1;

  template <class E>
  struct buffer {
    std::shared_ptr<E> data_;
    std::size_t size_ = 0;
    std::span<E> span() const noexcept { return {data_.get(), size_}; }
  };
  template <class E>
  buffer<E> scratch(std::size_t n) const {
    void* p = nullptr;
    if (n != 0) detail::cuda_check(cudaMalloc(&p, n * sizeof(E)), "cudaMalloc", rank);
    return {std::shared_ptr<E>(static_cast<E*>(p), [](E* q) { if (q) cudaFree(q); }), n};
  }
  template <class E>
  void copy(std::span<E> dst, std::span<const E> src) const {
    if (src.empty() || dst.data() == src.data()) return;
    detail::cuda_check(cudaMemcpyAsync(dst.data(), src.data(), src.size_bytes(), cudaMemcpyDefault, stream), "cudaMemcpyAsync", rank);
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize", rank);
  }
  template <class E>
  void reduce(op o, std::span<E> acc, std::span<const E> in, operands order = operands::acc_first) const {
    const std::size_t n = acc.size() < in.size() ? acc.size() : in.size();
    if (n == 0) return;
    const bool in_first = order == operands::in_first;
    auto launch = [&](auto f) {
      detail::reduce_kernel<<<detail::grid_for(n), 256, 0, stream>>>(acc.data(), in.data(), n, f, in_first);
    };
    switch (o) {
      case op::sum: case op::avg: launch(detail::plus{}); break;
      case op::prod: launch(detail::times{}); break;
      case op::min: launch(detail::minimum{}); break;
      case op::max: launch(detail::maximum{}); break;
    }
    detail::cuda_check(cudaGetLastError(), "reduce kernel launch", rank);
    // A call may end with this kernel, and calls return when their work is
    // done (and peers may read acc once this rank says so): wait for it.
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize", rank);
  }
  template <class E>
  void average(std::span<E> data, int ranks) const {
    if (data.empty()) return;
    detail::average_kernel<<<detail::grid_for(data.size()), 256, 0, stream>>>(data.data(), data.size(), ranks);
    detail::cuda_check(cudaGetLastError(), "average kernel launch", rank);
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize", rank);
  }
  // Exact integer avg (avg_split / avg_join in reduce.hpp), elementwise.
  template <class E>
  void split_avg(std::span<E> data, std::span<std::int64_t> remainders, int ranks) const {
    if (data.empty()) return;
    detail::split_avg_kernel<<<detail::grid_for(data.size()), 256, 0, stream>>>(data.data(), remainders.data(), data.size(), ranks);
    detail::cuda_check(cudaGetLastError(), "avg split kernel launch", rank);
  }
  template <class E>
  void join_avg(std::span<E> data, std::span<const std::int64_t> remainders, int ranks) const {
    if (data.empty()) return;
    detail::join_avg_kernel<<<detail::grid_for(data.size()), 256, 0, stream>>>(data.data(), remainders.data(), data.size(), ranks);
    detail::cuda_check(cudaGetLastError(), "avg join kernel launch", rank);
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize", rank);
  }
};

namespace detail {

// Slot policy: each rank's incoming chunks live in its own device staging
// area; peers write into it through CUDA IPC.
class cuda_slots {
 public:
  using memory_type = device_memory;
  static constexpr const char* name = "cuda_ipc";
  static constexpr bool payload_in_segment = false;
  static constexpr bool maps_in_calls = false;  // control memory is mapped by allocate only (shm/slots.hpp)
  using context = host_slots::context;

  cuda_slots(cudaStream_t stream, int rank) : st_(std::make_shared<state>()) {
    st_->mem = {stream, rank};
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      cudaGetLastError();
      throw error("cuda_ipc_transport", rank, e != cudaSuccess ? cat("no usable CUDA device: ", cudaGetErrorString(e))
                                                                : std::string("no CUDA device on this machine"));
    }
  }

  void setup(const context& c) {
    auto& s = *st_;
    s.slots = c.slots;
    s.slot_bytes = c.slot_bytes;
    s.peer.assign(c.size, nullptr);
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, std::size_t(c.size) * c.slots * c.slot_bytes), "cudaMalloc (staging)", c.rank);
    s.incoming = static_cast<std::byte*>(p);
    cudaIpcMemHandle_t h;
    cuda_check(cudaIpcGetMemHandle(&h, p), "cudaIpcGetMemHandle", c.rank);
    static_assert(sizeof h <= sizeof(shm_rank::policy_data));
    std::memcpy(c.policy_data(c.rank).data(), &h, sizeof h);
    c.publish();
    c.wait_all_published();
    for (int r = 0; r < c.size; ++r) {
      if (r == c.rank) continue;
      std::memcpy(&h, c.policy_data(r).data(), sizeof h);
      cuda_check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle", c.rank);
      s.peer[r] = static_cast<std::byte*>(p);
    }
    s.rank = c.rank;
  }
  cuda_slots for_split(int new_rank) const { return cuda_slots(st_->mem.stream, new_rank); }
  memory_type memory() const noexcept { return st_->mem; }
  std::byte* payload(int from, int to, std::size_t index, std::byte*) const noexcept {
    auto& s = *st_;
    std::byte* base = to == s.rank ? s.incoming : s.peer[to];
    return base + (std::size_t(from) * s.slots + index) * s.slot_bytes;
  }
  void put(std::byte* slot, const std::byte* src, std::size_t len) const { copy(slot, src, len); }
  void get(std::byte* dst, const std::byte* slot, std::size_t len) const { copy(dst, slot, len); }

  // Symmetric memory on the device (slot_transport::map_shared, a
  // collective call): each rank cudaMallocs its region (zeroed), the IPC
  // handles go round over transport t's messages, and every rank opens
  // every peer's, then all say whether they could, so that a failure is
  // an error on every rank. A region is freed when the last of its
  // owner's views goes: calls end only once nobody reads a rank's region,
  // so none is read then. (The control lines stay in host memory:
  // map_control. Kernels read peers' regions through peer access, which
  // GPUs on one host without it cannot do.)
  template <class T>
  std::optional<shared_mapping> map_shared(T& t, std::size_t bytes, shared_mapping m) const {
    const int me = t.rank(), n = t.size();
    struct views {
      std::vector<void*> at;
      int rank;
      ~views() {
        for (std::size_t q = 0; q < at.size(); ++q)
          if (at[q] != nullptr) q == std::size_t(rank) ? cudaFree(at[q]) : cudaIpcCloseMemHandle(at[q]);
      }
    };
    auto v = std::make_shared<views>(views{std::vector<void*>(n, nullptr), me});
    const std::size_t len = (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256;
    cuda_check(cudaMalloc(&v->at[me], len), "cudaMalloc (symmetric memory)", me);
    cuda_check(cudaMemset(v->at[me], 0, len), "cudaMemset (symmetric memory)", me);
    cudaIpcMemHandle_t mine;
    cuda_check(cudaIpcGetMemHandle(&mine, v->at[me]), "cudaIpcGetMemHandle (symmetric memory)", me);
    std::vector<cudaIpcMemHandle_t> all(n);
    exchange_all(t, "symmetric memory", std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(all)));
    std::string failed;
    for (int q = 0; q < n && failed.empty(); ++q) {
      if (q == me) continue;
      const cudaError_t e = cudaIpcOpenMemHandle(&v->at[q], all[q], cudaIpcMemLazyEnablePeerAccess);
      if (e != cudaSuccess) {
        cudaGetLastError();
        v->at[q] = nullptr;
        failed = cat("cannot open rank ", q, "'s device memory (cudaIpcOpenMemHandle: ", cudaGetErrorString(e), ")");
      }
    }
    if (const int q = first_failed(t, failed.empty()); q >= 0)
      throw error("symmetric memory", me, q == me ? failed : cat("rank ", q, " cannot open its peers' device memory"));
    for (void* p : v->at) m.bases.push_back(static_cast<std::byte*>(p));
    m.bytes = len;
    m.keep = v;
    return m;
  }

 private:
  struct state {
    device_memory mem;
    int rank = -1;
    std::size_t slots = 0, slot_bytes = 0;
    std::byte* incoming = nullptr;
    std::vector<std::byte*> peer;
    ~state() {
      for (auto* p : peer)
        if (p) cudaIpcCloseMemHandle(p);
      if (incoming) cudaFree(incoming);
    }
  };
  void copy(std::byte* dst, const std::byte* src, std::size_t len) const {
    cuda_check(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, st_->mem.stream), "cudaMemcpyAsync", st_->mem.rank);
    cuda_check(cudaStreamSynchronize(st_->mem.stream), "cudaStreamSynchronize", st_->mem.rank);
  }
  std::shared_ptr<state> st_;
};

}  // namespace detail

class cuda_ipc_transport : public slot_transport<detail::cuda_slots> {
 public:
  // `name` as for shm_transport; `stream` is where every collective runs.
  cuda_ipc_transport(const std::string& name, int rank, int size, cudaStream_t stream = nullptr, shm_options opt = gpu_defaults())
      : slot_transport(name, rank, size, opt, detail::cuda_slots(stream, rank)) {}

  // Fewer, larger chunks than on the host: each chunk waits for its copy.
  static shm_options gpu_defaults() {
    shm_options o;
    o.slots = 4;
    o.slot_bytes = std::size_t{4} << 20;
    return o;
  }
};

}  // namespace ringtree
