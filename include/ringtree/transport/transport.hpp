#pragma once
// The transport concept: what every algorithm may ask of the layer below.
//
// A transport moves bytes between ranks, nothing more. Messages between one
// pair of ranks are matched in the order they were posted (like MPI with
// one tag), so algorithms need no tags. Sends may be rendezvous: an isend
// need not complete until the matching irecv is posted, so an algorithm
// must post both sides of an exchange before waiting on either.
//
// Each transport also names the memory it moves (`memory_type`): the host
// by default, device memory for CUDA IPC. Algorithms allocate scratch and
// reduce through that memory object, so the same schedule serves both.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

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
      std::memcpy(static_cast<void*>(dst.data()), src.data(), src.size_bytes());
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

template <class T>
concept transport = requires(T& t, const T& ct, int peer, std::span<const std::byte> out,
                             std::span<std::byte> in, typename T::request& req) {
  { ct.rank() } noexcept -> std::same_as<int>;
  { ct.size() } noexcept -> std::same_as<int>;
  { t.isend(peer, out) } -> std::same_as<typename T::request>;
  { t.irecv(peer, in) } -> std::same_as<typename T::request>;
  t.wait(req);  // completes the request, or throws ringtree::error (timeout_error)
  typename T::memory_type;
  { ct.memory() } -> std::convertible_to<typename T::memory_type>;
};

template <transport T>
using memory_of = typename T::memory_type;

namespace detail {
// Whether a request has completed, without blocking: t.test(r), which a
// transport may offer (it completes the request and returns true, returns
// false while the peer has not answered, and raises as wait() would: a
// dead peer, or no answer within the timeout of the first unanswered
// test). A transport without it completes the request here (wait()).
// What point-to-point calls in the background are polled with (work.hpp).
template <transport T>
bool test(T& t, typename T::request& r) {
  if constexpr (requires { { t.test(r) } -> std::same_as<bool>; }) return t.test(r);
  else {
    t.wait(r);
    return true;
  }
}
}  // namespace detail

namespace detail {
// A transport's name (T::name, for the cost model's cache file and trace
// files) and whether all its ranks live in this process (T::in_process);
// both optional for user transports.
template <class T> constexpr const char* transport_name() {
  if constexpr (requires { T::name; }) return T::name;
  else return "transport";
}
template <class M> constexpr memory_kind kind_of_memory() {
  if constexpr (requires { M::kind; }) return M::kind;
  else return memory_kind::host;
}
template <class T> constexpr memory_kind memory_kind_of() { return kind_of_memory<memory_of<T>>(); }
template <class T> constexpr bool transport_in_process() {
  if constexpr (requires { T::in_process; }) return T::in_process;
  else return false;
}
}  // namespace detail

}  // namespace ringtree
