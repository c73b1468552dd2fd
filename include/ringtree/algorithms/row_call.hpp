#pragma once
// One call of a row of the algorithm table (table.hpp) on a transport, on
// a rank's working buffers, without a communicator around it: what
// teaching (teach/watch.hpp) and the simulator (sim/) run. The row works
// in the buffers themselves, as the communicator runs it without the
// copies around it: reduce_scatter leaves rank r's block r of `data`
// reduced; allgather starts from rank r's own block r in place.
#include <cstddef>
#include <span>
#include <vector>

#include <ringtree/algorithms/table.hpp>
#include <ringtree/core/error.hpp>

namespace ringtree::detail {

// How long one rank's buffers are for collective c with m elements per
// rank (per block where the collective has blocks): `in` is what the row
// reads besides `data` (scatter's root, gather, all-to-all).
struct row_lengths {
  std::size_t in = 0, data = 0;
};
constexpr row_lengths lengths_for(collective c, int n, int r, int root, std::size_t m) noexcept {
  const std::size_t nm = m * static_cast<std::size_t>(n);
  switch (c) {
    case collective::allreduce: case collective::reduce: case collective::broadcast: return {0, m};
    case collective::reduce_scatter: case collective::allgather: return {0, nm};
    case collective::scatter: return {r == root ? nm : 0, m};
    case collective::gather: return {m, r == root ? nm : 0};
    case collective::alltoall: return {nm, nm};
    case collective::barrier: return {};
  }
  return {};
}

// One rank's buffers, filled with input(r, i) where the rank has input:
// every rank's data for the reductions, the root's for broadcast and
// scatter, the own block for allgather and gather; the rest zero.
template <class E>
struct row_buffers {
  std::vector<E> in, data;
};
template <class E, class F>
row_buffers<E> buffers_for(collective c, int n, int r, int root, std::size_t m, F input) {
  const auto len = lengths_for(c, n, r, root, m);
  row_buffers<E> b{std::vector<E>(len.in, E{}), std::vector<E>(len.data, E{})};
  auto fill = [&](std::vector<E>& v, std::size_t from, std::size_t count, std::size_t first_index) {
    for (std::size_t i = 0; i < count; ++i) v[from + i] = input(r, first_index + i);
  };
  switch (c) {
    case collective::allreduce: case collective::reduce: case collective::reduce_scatter: fill(b.data, 0, len.data, 0); break;
    case collective::broadcast: if (r == root) fill(b.data, 0, m, 0); break;
    case collective::allgather: fill(b.data, static_cast<std::size_t>(r) * m, m, 0); break;
    case collective::scatter: case collective::gather: case collective::alltoall: fill(b.in, 0, len.in, 0); break;
    case collective::barrier: break;
  }
  return b;
}

// Runs row `a` of collective `c` on the view, on `in` and `data`; `who`
// names the caller in errors (a row that runs only on symmetric memory
// moves no messages, and there is none here).
template <class View, class E>
void run_row(View& view, collective c, algorithm a, const chunk_sizes& ch, std::span<const E> in, std::span<E> data, op o,
             int root, const char* who) {
  const int n = view.size();
  auto run = [&]<collective C>() {
    const bool ran = algorithm_table::run<C>(a, [&](auto row) {
      using Row = decltype(row);
      if constexpr (Row::window_only) {
        throw error(who, view.rank(), cat(Row::name, " runs only on symmetric memory: it moves no messages"));
      } else {
        const std::vector<std::size_t> counts(n, data.size() / n);  // (all-to-all)
        with_row_arguments<C>(in, data, o, root, std::span<const std::size_t>(counts), [&](auto... args) { row.run(view, ch, args...); });
      }
    });
    if (!ran) throw error(who, view.rank(), cat(to_string(C), " has no algorithm ", to_string(a)));
  };
  return with_collective(c, run);
}

}  // namespace ringtree::detail
