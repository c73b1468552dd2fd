#pragma once
// Which ranks share a host (host_layout), and the concept of a transport
// that knows it (hierarchical_transport): the vocabulary the hierarchical
// algorithms and the cost model use, beside the transport concept, so
// that they need no transport model's header (transport/hosts.hpp and
// transport/cluster.hpp are two such models).
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

}  // namespace ringtree
