#pragma once
// Hierarchical algorithms, for ranks on several hosts (a
// `hierarchical_transport`, transport/topology.hpp): the part of the work that can stay
// within a host runs over the host's own transport (shared memory), and
// only what must cross hosts goes over the network, from every rank of a
// host at once (NCCL's, Horovod's and Open MPI's han's split).
//
// H hosts, host h with L_h ranks. The buffer is cut into S = min L_h
// slices, so that every host cuts it alike: local rank i < S holds slice
// i; ranks beyond S (on hosts with more) hold none and only take part
// within their host. The cross-host transport of local index i joins the
// hosts' ranks i, so S of them run side by side.
//
// all-reduce: reduce-scatter within the host (local rank i: slice i reduced
//   over the host), all-reduce of slice i across hosts (ring), all-gather
//   within the host. Across hosts 2(H-1) steps, and each host sends
//   2(H-1)/H of the buffer: the least any all-reduce can; within a host
//   2(L-1) steps.
// broadcast: the root gives slice i to its host's rank i, who broadcasts it
//   across hosts (binomial tree), then every host all-gathers the slices.
//   Each host receives the buffer once.
// reduce: reduce-scatter within every host, reduce of slice i across hosts
//   to the root's host (ring), then the root gathers its host's slices.
// allgather and reduce_scatter: the same three phases, with every host's
//   blocks cut into S slices (`sliced_order`): within the host the host's
//   own blocks, across hosts each rank's slice of every host's, within the
//   host again.
//
// The choice across hosts for large buffers: the network carries the
// least it can, and the local phases run at memory speed. For small ones
// its 3 phases cost more latency than a flat tree or recursive doubling.
#include <bit>
#include <vector>

#include <ringtree/algorithms/common.hpp>
#include <ringtree/algorithms/ring.hpp>
#include <ringtree/algorithms/tree.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/transport/topology.hpp>

namespace ringtree::hierarchical {

namespace slicing {

// Where a rank is: its host, its index there, and the slices.
struct place {
  int host, index, slices, hosts;
  bool holds_slice() const noexcept { return index < slices; }
};
template <class T>
place where(const T& t) {
  const auto& l = t.layout();
  return {l.host_of(t.rank()), l.index_of(t.rank()), l.slices(), l.hosts()};
}

// A buffer of size() blocks of m elements, cut for the hierarchy: host h's
// blocks (its ranks in index order) are its group, and every group is cut
// into S slices. The sliced order lays out slice 0 of every group (host by
// host), then slice 1, and so on: local rank i's share (slice i of every
// group) is then one contiguous run, with each host's piece inside it.
struct sliced_order {
  const host_layout& l;
  std::size_t m;
  int S;
  // Where slice i of host h's group lies within the group.
  ringtree::detail::range in_group(int i, int h) const noexcept { return ringtree::detail::block(l.members(h).size() * m, S, i); }
  // Where it lies in the sliced order.
  std::size_t at(int i, int h) const noexcept {
    std::size_t x = 0;
    for (int j = 0; j <= i; ++j)
      for (int g = 0; g < l.hosts() && !(j == i && g == h); ++g) x += in_group(j, g).size;
    return x;
  }
  // The sizes of slice i's pieces, host by host (the cross-host layout),
  // and of each local rank's share (the local layout: none beyond S).
  std::vector<std::size_t> pieces(int i) const {
    std::vector<std::size_t> v;
    for (int g = 0; g < l.hosts(); ++g) v.push_back(in_group(i, g).size);
    return v;
  }
  std::vector<std::size_t> shares(int locals) const {
    std::vector<std::size_t> v(locals, 0);
    for (int i = 0; i < S; ++i)
      for (int g = 0; g < l.hosts(); ++g) v[i] += in_group(i, g).size;
    return v;
  }
  // Host h's group's slice sizes (the layout that pieces it together).
  std::vector<std::size_t> group_slices(int h, int locals) const {
    std::vector<std::size_t> v(locals, 0);
    for (int i = 0; i < S; ++i) v[i] = in_group(i, h).size;
    return v;
  }
  // Calls f(offset in the sliced order, offset in the world-order buffer,
  // length) for every run of elements, piece by piece.
  template <class F>
  void each_run(F f) const {
    for (int i = 0; i < S; ++i)
      for (int h = 0; h < l.hosts(); ++h) {
        const auto g = in_group(i, h);
        std::size_t x = at(i, h);
        for (std::size_t o = g.begin; o < g.begin + g.size;) {
          const std::size_t k = o / m, len = std::min(g.begin + g.size, (k + 1) * m) - o;
          f(x, static_cast<std::size_t>(l.members(h)[k]) * m + o % m, len);
          x += len, o += len;
        }
      }
  }
  template <class M, class E>
  void to_sliced(const M& mem, std::span<E> sliced, std::span<const E> data) const {
    each_run([&](std::size_t x, std::size_t d, std::size_t len) { mem.copy(sliced.subspan(x, len), data.subspan(d, len)); });
  }
  template <class M, class E>
  void from_sliced(const M& mem, std::span<E> data, std::span<const E> sliced) const {
    each_run([&](std::size_t x, std::size_t d, std::size_t len) { mem.copy(data.subspan(d, len), sliced.subspan(x, len)); });
  }
};

[[noreturn]] inline void not_hierarchical(const char* call, int rank) {
  throw error(call, rank, "the hierarchical algorithms need a transport that knows its hosts (transport/hosts.hpp)");
}

}  // namespace slicing

template <transport T, class E>
void allreduce(T& t, std::span<E> data, op o, const chunk_sizes& chunks = {}) {
  if constexpr (hierarchical_transport<T>) {
    const auto p = slicing::where(t);
    auto local = t.host_local();
    const ring::layout slices{p.slices};
    ring::reduce_scatter(local, data, o, chunks, slices);
    if (p.holds_slice()) {
      auto cross = t.host_cross();
      ring::allreduce(cross, ringtree::detail::block_of(data, p.slices, p.index), o, chunks);
    }
    ring::allgather(local, data, slices);
  } else {
    slicing::not_hierarchical("allreduce", t.rank());
  }
}

template <transport T, class E>
void broadcast(T& t, std::span<E> data, int root) {
  if constexpr (hierarchical_transport<T>) {
    const auto p = slicing::where(t);
    const auto& l = t.layout();
    const int root_host = l.host_of(root), root_index = l.index_of(root);
    auto local = t.host_local();
    auto slice = [&](int i) { return ringtree::detail::block_of(data, p.slices, i); };
    if (p.host == root_host) {  // the root hands out the slices on its host
      std::vector<typename decltype(local)::request> sends;
      typename decltype(local)::request got;
      for (int i = 0; i < p.slices; ++i) {
        if (i == root_index || slice(i).empty()) continue;
        if (p.index == root_index) sends.push_back(ringtree::detail::post_send(local, i, std::span<const E>(slice(i))));
        else if (p.index == i) got = ringtree::detail::post_recv(local, root_index, slice(i));
      }
      local.wait(got);
      ringtree::detail::wait_all(local, sends);
    }
    if (p.holds_slice() && !slice(p.index).empty()) {
      auto cross = t.host_cross();
      tree::binomial_broadcast(cross, slice(p.index), root_host);
    }
    ring::allgather(local, data, ring::layout{p.slices});
  } else {
    slicing::not_hierarchical("broadcast", t.rank());
  }
}

template <transport T, class E>
void reduce(T& t, std::span<E> data, op o, int root, const chunk_sizes& chunks = {}) {
  if constexpr (hierarchical_transport<T>) {
    const auto p = slicing::where(t);
    const auto& l = t.layout();
    const int root_host = l.host_of(root), root_index = l.index_of(root);
    auto local = t.host_local();
    auto slice = [&](int i) { return ringtree::detail::block_of(data, p.slices, i); };
    ring::reduce_scatter(local, data, o, chunks, ring::layout{p.slices});
    if (p.holds_slice()) {
      auto cross = t.host_cross();
      ring::reduce(cross, slice(p.index), o, root_host, chunks);
    }
    if (p.host == root_host) {  // the root gathers its host's slices
      std::vector<typename decltype(local)::request> recvs;
      typename decltype(local)::request sent;
      for (int i = 0; i < p.slices; ++i) {
        if (i == root_index || slice(i).empty()) continue;
        if (p.index == root_index) recvs.push_back(ringtree::detail::post_recv(local, i, slice(i)));
        else if (p.index == i) sent = ringtree::detail::post_send(local, root_index, std::span<const E>(slice(i)));
      }
      local.wait(sent);
      ringtree::detail::wait_all(local, recvs);
    }
  } else {
    slicing::not_hierarchical("reduce", t.rank());
  }
}

// `data`: size() blocks, rank r's at block r (filled by it); all of them
// filled everywhere afterwards.
template <transport T, class E>
void allgather(T& t, std::span<E> data) {
  if constexpr (hierarchical_transport<T>) {
    const auto p = slicing::where(t);
    const auto& l = t.layout();
    const std::size_t m = data.size() / t.size();
    const slicing::sliced_order order{l, m, p.slices};
    auto local = t.host_local();
    auto mem = t.memory();
    // this host's blocks, within the host
    auto group_buf = mem.template scratch<E>(l.members(p.host).size() * m);
    auto group = group_buf.span();
    mem.copy(group.subspan(p.index * m, m), std::span<const E>(data.subspan(t.rank() * m, m)));
    ring::allgather(local, group);
    // slice i of every host's group, across hosts
    auto buf = mem.template scratch<E>(data.size());
    auto sliced = buf.span();
    const auto shares = order.shares(local.size());
    const ring::layout by_share{0, shares};
    if (p.holds_slice()) {
      const auto g = order.in_group(p.index, p.host);
      mem.copy(sliced.subspan(order.at(p.index, p.host), g.size), std::span<const E>(group.subspan(g.begin, g.size)));
      auto cross = t.host_cross();
      const auto pieces = order.pieces(p.index);
      ring::allgather(cross, by_share.block(sliced, local.size(), p.index), ring::layout{0, pieces});
    }
    // the shares, within the host
    ring::allgather(local, sliced, by_share);
    order.from_sliced(mem, data, std::span<const E>(sliced));
  } else {
    slicing::not_hierarchical("allgather", t.rank());
  }
}

// `data`: size() blocks; afterwards rank r's block r holds it reduced over
// every rank (the others are clobbered).
template <transport T, class E>
void reduce_scatter(T& t, std::span<E> data, op o, const chunk_sizes& chunks = {}) {
  if constexpr (hierarchical_transport<T>) {
    const auto p = slicing::where(t);
    const auto& l = t.layout();
    const std::size_t m = data.size() / t.size();
    const slicing::sliced_order order{l, m, p.slices};
    auto local = t.host_local();
    auto mem = t.memory();
    auto buf = mem.template scratch<E>(data.size());
    auto sliced = buf.span();
    order.to_sliced(mem, sliced, std::span<const E>(data));
    // each rank's share reduced over the host
    const auto shares = order.shares(local.size());
    const ring::layout by_share{0, shares};
    ring::reduce_scatter(local, sliced, o, chunks, by_share);
    // each host's piece of it reduced over the hosts, at that host
    auto group_buf = mem.template scratch<E>(l.members(p.host).size() * m);
    auto group = group_buf.span();
    if (p.holds_slice()) {
      auto cross = t.host_cross();
      const auto pieces = order.pieces(p.index);
      ring::reduce_scatter(cross, by_share.block(sliced, local.size(), p.index), o, chunks, ring::layout{0, pieces});
      const auto g = order.in_group(p.index, p.host);
      mem.copy(group.subspan(g.begin, g.size), std::span<const E>(sliced.subspan(order.at(p.index, p.host), g.size)));
    }
    // this host's group, pieced together within the host
    ring::allgather(local, group, ring::layout{0, order.group_slices(p.host, local.size())});
    mem.copy(data.subspan(t.rank() * m, m), std::span<const E>(group.subspan(p.index * m, m)));
  } else {
    slicing::not_hierarchical("reduce_scatter", t.rank());
  }
}

// Rows of the algorithm table: offered where the ranks span hosts. Their
// counts price the local phases at the model's alpha and beta and the
// cross-host ones at its network constants (cost_counts' net_ fields).
namespace slicing {
// (where every rank is alone on its host there is nothing to do within one)
constexpr bool spans_hosts(const placement& p) noexcept {
  return p.hosts > 1 && p.hosts < p.ranks && p.memory == memory_kind::host;
}
}  // namespace slicing

struct allreduce_row : ringtree::detail::row<collective::allreduce, algorithm::hierarchical> {
  static constexpr std::string_view about = "across hosts: reduce-scatter within each host, a ring all-reduce of each slice across hosts (every rank of a host at once), all-gather within";
  static constexpr std::string_view name = "hierarchical";
  static constexpr bool across_hosts = true;
  static constexpr bool offered(const placement& p) noexcept { return slicing::spans_hosts(p); }
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    const double L = s.per_host, H = s.hosts, S = s.slices;
    cost_counts k;  // within the host: reduce-scatter and all-gather; across: a ring all-reduce of one slice
    k.steps = 2 * (L - 1);
    k.bytes = 2 * (S - 1) / S * B;
    k.reduced = (S - 1) / S * B + (H - 1) / H * B / S;
    k.net_steps = 2 * (H - 1);
    k.net_bytes = 2 * (H - 1) / H * B;  // a host's S ranks at once: 2(H-1)/H of the buffer between them
    return k;
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes& c, std::span<E> data, op o) { allreduce(t, data, o, c); }
};
struct broadcast_row : ringtree::detail::row<collective::broadcast, algorithm::hierarchical> {
  static constexpr std::string_view about = "across hosts: the root hands slice i to its host's rank i, which broadcasts it across hosts (binomial), then every host all-gathers the slices";
  static constexpr std::string_view name = "hierarchical";
  static constexpr bool across_hosts = true;
  static constexpr bool offered(const placement& p) noexcept { return slicing::spans_hosts(p); }
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    const double L = s.per_host, S = s.slices;
    cost_counts k;  // the root hands out slices, they cross by binomial trees, every host all-gathers
    k.steps = (L > 1 ? 1 : 0) + (L - 1);
    k.bytes = 2 * (S - 1) / S * B;
    k.net_steps = std::bit_width(unsigned(s.hosts)) - 1;   // as binomial_broadcast_row: floor and ceil of log2 H
    k.net_bytes = std::bit_width(unsigned(s.hosts - 1)) * B;  // the root's host sends the buffer to each tree child
    return k;
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<E> data, int root) { broadcast(t, data, root); }
};
struct reduce_row : ringtree::detail::row<collective::reduce, algorithm::hierarchical> {
  static constexpr std::string_view about = "across hosts: reduce-scatter within every host, a ring reduce of each slice to the root's host, then the root gathers its host's slices";
  static constexpr std::string_view name = "hierarchical";
  static constexpr bool across_hosts = true;
  static constexpr bool offered(const placement& p) noexcept { return slicing::spans_hosts(p); }
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    const double L = s.per_host, H = s.hosts, S = s.slices;
    cost_counts k;  // reduce-scatter within hosts, ring reduce of each slice across, the root gathers
    k.steps = (L - 1) + (L > 1 ? 1 : 0);
    k.bytes = 2 * (S - 1) / S * B;
    k.reduced = (S - 1) / S * B + (H - 1) / H * B / S;
    k.net_steps = H;
    k.net_bytes = 2 * (H - 1) / H * B;  // the root's host: its part of the reduce-scatter, then every slice
    return k;
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes& c, std::span<E> data, op o, int root) { reduce(t, data, o, root, c); }
};
struct allgather_row : ringtree::detail::row<collective::allgather, algorithm::hierarchical> {
  static constexpr std::string_view about = "across hosts: the host's own blocks within it, each rank's slice of every host's across hosts, then within again";
  static constexpr std::string_view name = "hierarchical";
  static constexpr bool across_hosts = true;
  static constexpr bool offered(const placement& p) noexcept { return slicing::spans_hosts(p); }
  static constexpr cost_counts counts(const shape& s, double B) noexcept {  // B: one rank's block
    const double L = s.per_host, H = s.hosts, n = s.n, S = s.slices;
    cost_counts k;  // the host's blocks within it, each rank's slice of all across, the slices within
    k.steps = 2 * (L - 1);
    k.bytes = (L - 1) * B + (S - 1) / S * n * B;
    k.net_steps = H - 1;
    k.net_bytes = (n - n / H) * B;  // a host receives every other host's blocks
    return k;
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<E> data) { allgather(t, data); }
};
struct reduce_scatter_row : ringtree::detail::row<collective::reduce_scatter, algorithm::hierarchical> {
  static constexpr std::string_view about = "across hosts: the same three phases as all-gather, reducing: within the host, across hosts by slices, within again";
  static constexpr std::string_view name = "hierarchical";
  static constexpr bool across_hosts = true;
  static constexpr bool offered(const placement& p) noexcept { return slicing::spans_hosts(p); }
  static constexpr cost_counts counts(const shape& s, double B) noexcept {  // B: the whole input
    const double L = s.per_host, H = s.hosts, S = s.slices;
    cost_counts k;  // reduce-scatter within, of each slice across (to the hosts), the host's part within
    k.steps = 2 * (L - 1);
    k.bytes = (S - 1) / S * B * (1 + 1 / H);
    k.reduced = (S - 1) / S * B + (H - 1) / H * B / S;
    k.net_steps = H - 1;
    k.net_bytes = (H - 1) / H * B;
    return k;
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes& c, std::span<E> data, op o) { reduce_scatter(t, data, o, c); }
};

}  // namespace ringtree::hierarchical
