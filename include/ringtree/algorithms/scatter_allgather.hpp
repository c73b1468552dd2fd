#pragma once
// Scatter-allgather broadcast (van de Geijn): the root deals the buffer out
// in n blocks, one per rank, then a ring all-gather completes it
// everywhere. The root sends the buffer once and every other link carries
// (n-1)/n of it: bandwidth-optimal like the chain, with n steps instead of
// the chain's (n-1) + chunks. For large buffers.
#include <vector>

#include <ringtree/algorithms/ring.hpp>

namespace ringtree::scatter_allgather {

template <transport T, class E>
void broadcast(T& t, std::span<E> data, int root) {
  const int n = t.size(), r = t.rank();
  if (r == root) {
    std::vector<typename T::request> sends;
    for (int i = 0; i < n; ++i)
      if (auto b = detail::block_of(data, n, i); i != root && !b.empty())
        sends.push_back(detail::post_send(t, i, std::span<const E>(b)));
    detail::wait_all(t, sends);
  } else if (auto mine = detail::block_of(data, n, r); !mine.empty()) {
    auto q = detail::post_recv(t, root, mine);
    t.wait(q);
  }
  ring::allgather(t, data);
}


// The row of the algorithm table (table.hpp).
struct broadcast_row : detail::row<collective::broadcast, algorithm::scatter_allgather> {
  static constexpr std::string_view about = "the root scatters the buffer in blocks, then a ring all-gather (large broadcasts)";
  static constexpr std::string_view name = "scatter_allgather";
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    return s.uniform(s.n, 2 * (s.n - 1.0) / s.n * B, 0, B / s.n);
  }
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<E> data, int root) { broadcast(t, data, root); }
};

}  // namespace ringtree::scatter_allgather
