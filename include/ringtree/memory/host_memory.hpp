#pragma once
// The memory a transport moves (its memory_type): host memory by default,
// device memory for CUDA IPC (transport/cuda_ipc.hpp). Algorithms allocate
// scratch and reduce through this object, so that one schedule of sends,
// receives and reductions serves both: here the heap and the vectorised
// host loops of core/reduce.hpp.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include <ringtree/core/copy.hpp>
#include <ringtree/core/reduce.hpp>

namespace ringtree {

// What kind of memory a transport moves (its memory_type::kind).
enum class memory_kind { host, device };

// Host memory: scratch from the heap, reductions by the vectorised loops.
struct host_memory {
  static constexpr memory_kind kind = memory_kind::host;
  template <class E>
  struct buffer {
    std::unique_ptr<E[]> data_;
    std::size_t size_ = 0;
    std::span<E> span() const noexcept { return {data_.get(), size_}; }
  };
  template <class E>
  buffer<E> scratch(std::size_t n) const {
    return {std::make_unique_for_overwrite<E[]>(n), n};
  }
  template <class E>
  void copy(std::span<E> dst, std::span<const E> src) const noexcept {
    if (!src.empty() && dst.data() != src.data())
      detail::copy_bytes(static_cast<void*>(dst.data()), src.data(), src.size_bytes());
  }
  template <class E>
  void reduce(op o, std::span<E> acc, std::span<const E> in, operands order = operands::acc_first) const noexcept {
    reduce_into(o, acc, in, order);
  }
  template <class E>
  void average(std::span<E> data, int ranks) const noexcept {
    finish_avg(data, ranks);
  }
  // Exact integer avg (reduce.hpp): split before the sums, join after.
  template <class E>
  void split_avg(std::span<E> data, std::span<std::int64_t> remainders, int ranks) const noexcept {
    ringtree::split_avg(data, remainders, ranks);
  }
  template <class E>
  void join_avg(std::span<E> data, std::span<const std::int64_t> remainders, int ranks) const noexcept {
    ringtree::join_avg(data, remainders, ranks);
  }
};

namespace detail {
// A memory object's kind (M::kind), host where it does not say.
template <class M> constexpr memory_kind kind_of_memory() {
  if constexpr (requires { M::kind; }) return M::kind;
  else return memory_kind::host;
}
}  // namespace detail

}  // namespace ringtree
