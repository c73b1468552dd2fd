#pragma once
// Which ranks share a host, and the two transports the hierarchical
// algorithms (algorithms/hierarchical.hpp) run on besides the flat one:
//
//   host_local()  this host's ranks, numbered by their index on the host
//   host_cross()  the ranks that have this rank's index on their host, one
//                 per host, numbered by host: every index has its own, so
//                 all the ranks of a host use the network at once
//
// A transport that offers both and its layout() models `hierarchical_transport`.
// Two do: cluster_transport (transport/cluster.hpp: shared memory within a
// host, MPI between hosts, what make_communicator builds) and
// host_groups<T> below, which groups the ranks of any transport that can
// split into hosts the caller names (threads standing for hosts, in tests
// and for teaching).
#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <ringtree/core/error.hpp>
#include <ringtree/transport/transport.hpp>

#include <ringtree/transport/topology.hpp>

namespace ringtree {

// The ranks of a transport T grouped into hosts that the caller names
// (host_key[r] for rank r, the same on every rank): the flat transport
// passes through, and host_local()/host_cross() are two splits of it.
// Made collectively by every rank; T must split (local_transport,
// shm_transport, mpi_transport do).
template <splitting_transport T>
class host_groups {
 public:
  using request = typename T::request;
  using memory_type = memory_of<T>;
  static constexpr const char* name = detail::transport_name<T>();
  static constexpr bool in_process = detail::transport_in_process<T>();

  host_groups(T& flat, std::span<const std::uint64_t> host_key) : flat_(&flat), layout_(check(flat, host_key)) {
    const int r = flat.rank(), h = layout_.host_of(r), i = layout_.index_of(r);
    const auto& here = layout_.members(h);
    local_ = flat.split(h, i, std::span<const int>(here), i);
    std::vector<int> same_index;
    for (int g = 0; g < layout_.hosts(); ++g)
      if (i < static_cast<int>(layout_.members(g).size())) same_index.push_back(layout_.members(g)[i]);
    const int at = static_cast<int>(std::find(same_index.begin(), same_index.end(), r) - same_index.begin());
    cross_ = flat.split(i, h, std::span<const int>(same_index), at);
  }

  int rank() const noexcept { return flat_->rank(); }
  int size() const noexcept { return flat_->size(); }
  memory_type memory() const noexcept { return flat_->memory(); }
  request isend(int peer, std::span<const std::byte> data) { return flat_->isend(peer, data); }
  request irecv(int peer, std::span<std::byte> data) { return flat_->irecv(peer, data); }
  void wait(request& r) { flat_->wait(r); }
  bool test(request& r) { return detail::test(*flat_, r); }

  const host_layout& layout() const noexcept { return layout_; }
  auto& host_local() noexcept { return *local_; }
  auto& host_cross() noexcept { return *cross_; }

 private:
  static host_layout check(const T& flat, std::span<const std::uint64_t> key) {
    if (static_cast<int>(key.size()) != flat.size())
      throw error("host_groups", flat.rank(), detail::cat("needs one host key per rank: ", flat.size(), " ranks, ",
                                                          key.size(), " keys"));
    return host_layout(key);
  }
  T* flat_;
  host_layout layout_;
  decltype(std::declval<T&>().split(0, 0, std::span<const int>{}, 0)) local_, cross_;
};

}  // namespace ringtree
