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

namespace ringtree {

// Where every rank runs. Hosts are numbered in the order of their lowest
// rank; a host's ranks are indexed in rank order.
class host_layout {
 public:
  host_layout() = default;
  // host_key[r]: any number naming rank r's host (equal keys, one host).
  explicit host_layout(std::span<const std::uint64_t> host_key) {
    const int n = static_cast<int>(host_key.size());
    host_.assign(n, -1);
    index_.assign(n, 0);
    std::vector<std::uint64_t> keys;
    for (int r = 0; r < n; ++r) {
      const auto at = std::find(keys.begin(), keys.end(), host_key[r]);
      host_[r] = static_cast<int>(at - keys.begin());
      if (at == keys.end()) keys.push_back(host_key[r]), members_.emplace_back();
      index_[r] = static_cast<int>(members_[host_[r]].size());
      members_[host_[r]].push_back(r);
    }
  }
  int ranks() const noexcept { return static_cast<int>(host_.size()); }
  int hosts() const noexcept { return static_cast<int>(members_.size()); }
  int host_of(int rank) const { return host_.at(rank); }
  int index_of(int rank) const { return index_.at(rank); }
  // The ranks of host h, in index order.
  const std::vector<int>& members(int h) const { return members_.at(h); }
  // The fewest ranks any host has: how many slices a hierarchical call cuts
  // the buffer into, so that every host cuts it alike. Ranks whose index
  // is this or more (on the hosts that have more) hold no slice.
  int slices() const noexcept {
    int s = hosts() > 0 ? ranks() : 0;
    for (const auto& m : members_) s = std::min(s, static_cast<int>(m.size()));
    return s;
  }
  int most_per_host() const noexcept {
    int s = 0;
    for (const auto& m : members_) s = std::max(s, static_cast<int>(m.size()));
    return s;
  }
  // "2x2", "3+1": hosts times ranks each, or each host's rank count.
  std::string describe() const {
    if (hosts() == 0) return "0";
    if (slices() == most_per_host()) return detail::cat(hosts(), "x", slices());
    std::string s;
    for (const auto& m : members_) s += (s.empty() ? "" : "+") + std::to_string(m.size());
    return s;
  }

 private:
  std::vector<int> host_, index_;
  std::vector<std::vector<int>> members_;
};

template <class T>
concept hierarchical_transport = transport<T> && requires(T& t, const T& ct) {
  { ct.layout() } -> std::same_as<const host_layout&>;
  requires transport<std::remove_reference_t<decltype(t.host_local())>>;
  requires transport<std::remove_reference_t<decltype(t.host_cross())>>;
};

namespace detail {
// How many hosts a transport's ranks span (1 where it cannot tell).
template <class T>
int hosts_of(const T& t) noexcept {
  if constexpr (requires { { t.layout() } -> std::same_as<const host_layout&>; }) return t.layout().hosts();
  else return 1;
}
}  // namespace detail

// The ranks of a transport T grouped into hosts that the caller names
// (host_key[r] for rank r, the same on every rank): the flat transport
// passes through, and host_local()/host_cross() are two splits of it.
// Made collectively by every rank; T must have split (local_transport,
// shm_transport, mpi_transport do).
template <transport T>
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
