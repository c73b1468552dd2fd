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
#include <chrono>
#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include <ringtree/memory/host_memory.hpp>
#include <ringtree/memory/shared_mapping.hpp>

namespace ringtree {

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

// ---- Optional features ---------------------------------------------------
// What a transport may offer beyond the concept, each named here: the
// checklist for a new transport's author. The code above asks for a feature
// by these names, never by a requires-expression of its own. Also optional:
// hierarchical_transport (topology.hpp: which ranks share a host), and the
// static members `name` and `in_process` (below).

// t.test(r): completes r and returns true, or false while the peer has not
// answered; raises as wait() would. Without it, detail::test waits.
template <class T>
concept testing_transport = transport<T> && requires(T& t, typename T::request& r) {
  { t.test(r) } -> std::same_as<bool>;
};
// t.probe(peer): whether a message from `peer` has arrived, without
// receiving it. Receives from any source need it.
template <class T>
concept probing_transport = transport<T> && requires(T& t, int peer) {
  { t.probe(peer) } -> std::same_as<bool>;
};
// t.timeout(): how long a wait on a peer may take (else RINGTREE_TIMEOUT).
template <class T>
concept timed_transport = transport<T> && requires(const T& t) {
  { t.timeout() } -> std::convertible_to<std::chrono::duration<double>>;
};
// t.abort(): this rank gives up at once; the peers' waits on it raise.
template <class T>
concept abortable_transport = transport<T> && requires(T& t) { t.abort(); };
// t.split(color, key, members, index): a transport of this rank's part, a
// collective call (communicator::split, host_groups).
template <class T>
concept splitting_transport = transport<T> && requires(T& t, std::span<const int> members) {
  t.split(0, 0, members, 0);
};
namespace detail {
// The transport a split of T makes (T itself where T cannot split; a
// communicator's split then fails to compile where it is called).
template <class T>
struct split_transport {
  using type = T;
};
template <splitting_transport T>
struct split_transport<T> {
  using type = typename decltype(std::declval<T&>().split(0, 0, std::span<const int>(), 0))::element_type;
};
template <class T>
using split_transport_t = typename split_transport<T>::type;
}  // namespace detail
// t.require_background_thread(feature): raises where a progress thread
// may not call the transport (MPI below MPI_THREAD_MULTIPLE).
template <class T>
concept thread_checking_transport = requires(T& t, const std::string& feature) {
  t.require_background_thread(feature);
};
// t.map_shared(bytes): memory every rank of the transport can read (threads
// of one process, processes of one host; memory/shared_mapping.hpp).
// Symmetric buffers and the direct algorithms are built on it; a transport
// without it simply has no symmetric memory. Its companions, maps_in_calls
// and map_control, follow.
template <class T>
concept shared_memory_transport = transport<T> && requires(T& t, std::size_t bytes) {
  { t.map_shared(bytes) } -> std::same_as<std::optional<shared_mapping>>;
};

namespace detail {

// Whether a communicator may map its control memory in its first
// collective call, to stage small calls on private memory (memory/symmetric.hpp),
// and the staging that private calls stream through, rather than only when
// the program calls allocate: true where the mapping moves only the
// transport's own messages, under its timeout, and frees without talking
// to the peers (t.maps_in_calls(): MPI's, only where all ranks share a host).
template <class T>
bool maps_in_calls(const T& t) noexcept {
  if constexpr (requires { { t.maps_in_calls() } -> std::same_as<bool>; }) return t.maps_in_calls();
  else return false;
}
// Host memory that every rank maps, for the control lines and staging:
// t.map_control(bytes) where map_shared cannot give it (device memory; MPI's
// windows, made and freed by MPI collectives, which have no timeout), else
// map_shared.
template <class T>
std::optional<shared_mapping> map_control(T& t, std::size_t bytes) {
  if constexpr (requires { t.map_control(bytes); }) return t.map_control(bytes);
  else return t.map_shared(bytes);
}

}  // namespace detail

namespace detail {
// Whether a request has completed, without blocking: t.test(r), which a
// transport may offer (it completes the request and returns true, returns
// false while the peer has not answered, and raises as wait() would: a
// dead peer, or no answer within the timeout of the first unanswered
// test). A transport without it completes the request here (wait()).
// What point-to-point calls in the background are polled with (work.hpp).
template <transport T>
bool test(T& t, typename T::request& r) {
  if constexpr (testing_transport<T>) return t.test(r);
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
template <class T> constexpr memory_kind memory_kind_of() { return kind_of_memory<memory_of<T>>(); }
template <class T> constexpr bool transport_in_process() {
  if constexpr (requires { T::in_process; }) return T::in_process;
  else return false;
}
}  // namespace detail

}  // namespace ringtree
