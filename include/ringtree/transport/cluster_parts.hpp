#pragma once
// What every cluster of hosts is made of, whatever carries the messages
// between hosts: the flat transport over all ranks (`Net`: MPI for
// cluster_transport, UCX for net_cluster), shared memory within this host,
// and for the hierarchical algorithms (algorithms/hierarchical.hpp) the
// part across hosts, one per local index:
//
//   every rank on one host    shared memory for everything
//   ranks on several hosts    Net between any two ranks; host_local() is
//                             this host's shared memory, host_cross() the
//                             ranks of this local index on every host
//
// The two clusters differ only in how they are made (who tells which
// ranks share a host, how a host agrees on a segment name) and in what
// abort() and split() mean; they derive from this.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <ringtree/core/error.hpp>
#include <ringtree/transport/shm.hpp>
#include <ringtree/transport/topology.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree::detail {

template <class Net>
class cluster_parts {
 public:
  using memory_type = memory_of<Net>;
  // A message goes over one of the two, as the cluster is laid out.
  struct request {
    shm_transport::request shm;
    typename Net::request net;
  };

  int rank() const noexcept { return world_->rank(); }
  int size() const noexcept { return world_->size(); }
  // Every rank on one host: the messages move through shared memory.
  bool one_host() const noexcept { return layout_.hosts() == 1; }
  memory_type memory() const noexcept { return one_host() ? memory_type{} : world_->memory(); }

  request isend(int peer, std::span<const std::byte> data) {
    request r;
    if (one_host()) r.shm = local_->isend(peer, data);
    else r.net = world_->isend(peer, data);
    return r;
  }
  request irecv(int peer, std::span<std::byte> data) {
    request r;
    if (one_host()) r.shm = local_->irecv(peer, data);
    else r.net = world_->irecv(peer, data);
    return r;
  }
  void wait(request& r) {
    if (one_host()) local_->wait(r.shm);
    else world_->wait(r.net);
  }
  bool test(request& r) { return one_host() ? local_->test(r.shm) : world_->test(r.net); }
  bool probe(int peer) { return one_host() ? local_->probe(peer) : world_->probe(peer); }
  std::chrono::duration<double> timeout() const noexcept { return world_->timeout(); }

  // The hierarchical parts: there where the ranks span hosts and some share one.
  const host_layout& layout() const noexcept { return layout_; }
  shm_transport& host_local() { return part(local_.get(), "host_local"); }
  Net& host_cross() { return part(cross_.get(), "host_cross"); }

  // Symmetric memory and staging where every rank shares this host.
  std::optional<shared_mapping> map_shared(std::size_t bytes) {
    if (!one_host()) return std::nullopt;
    return local_->map_shared(bytes);
  }
  std::optional<shared_mapping> map_control(std::size_t bytes) {
    if (!one_host()) return std::nullopt;
    return local_->map_control(bytes);
  }
  bool maps_in_calls() const noexcept { return one_host(); }

 protected:
  // The parts, once the derived cluster knows the layout: shared memory
  // within this host where it has company (the segment `name`, the same
  // on every rank of the host), and where the ranks span hosts and some
  // share one, host_cross as a split of the flat transport.
  void make_parts(std::unique_ptr<Net> world, std::span<const std::uint64_t> host_keys, const std::string& name,
                  shm_options shm) {
    world_ = std::move(world);
    layout_ = host_layout(host_keys);
    const int r = world_->rank(), h = layout_.host_of(r), i = layout_.index_of(r);
    const int here = static_cast<int>(layout_.members(h).size());
    if (layout_.hosts() == layout_.ranks() && layout_.hosts() > 1) return;  // every rank alone: Net for everything
    local_ = std::make_unique<shm_transport>(name, i, here, std::move(shm));
    if (layout_.hosts() == 1) return;
    const auto same = same_index(i);
    const int at = static_cast<int>(std::find(same.begin(), same.end(), r) - same.begin());
    cross_ = world_->split(i, h, std::span<const int>(same), at);
  }
  // Long waits on any part are published in this host's lines, in the
  // flat transport's numbers, so that a timeout names the rank at the end
  // of the chain (transport/wait_board.hpp), wherever it runs.
  void share_waits() {
    if (!local_ || !cross_) return;
    const int r = rank();
    local_->number_as(layout_.members(layout_.host_of(r)));
    world_->report_waits(local_->wait_board());
    cross_->report_waits(local_->wait_board(), same_index(layout_.index_of(r)));
  }
  // The ranks of local index i, one per host that has one: host_cross's ranks.
  std::vector<int> same_index(int i) const {
    std::vector<int> same;
    for (int g = 0; g < layout_.hosts(); ++g)
      if (i < static_cast<int>(layout_.members(g).size())) same.push_back(layout_.members(g)[i]);
    return same;
  }
  template <class P>
  P& part(P* p, const char* which) const {
    if (p == nullptr)
      throw error(which, rank(), cat("this cluster has no such part: its ", layout_.ranks(), " ranks are on ",
                                     layout_.hosts(), " hosts (", layout_.describe(), ")"));
    return *p;
  }

  std::unique_ptr<Net> world_;
  host_layout layout_;
  std::unique_ptr<shm_transport> local_;  // this host's ranks, where it has more than one
  std::unique_ptr<Net> cross_;            // the ranks of this local index on every host
};

}  // namespace ringtree::detail
