#pragma once
// The algorithm table: one row per (collective, algorithm) pair, each
// defined next to the algorithm it runs (ring.hpp's ring::allreduce_row,
// ...). A row says its name, where it is offered, its cost counts and how
// it runs. Everything that needs to know the algorithms reads this list:
// names (RINGTREE_ALGO and the tools' flags), dispatch and automatic
// (communicator.hpp), the cost model (tuning/cost_model.hpp), the docs tables
// (ringtree-model --table) and the count tests.
//
// Adding an algorithm: write its file with its row (its name, a one-line
// `about`, where it is offered, its counts, run), add the row here (and its
// name to the enum in vocabulary.hpp).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <array>
#include <span>

#include <ringtree/algorithms/alltoall.hpp>
#include <ringtree/algorithms/barrier.hpp>
#include <ringtree/algorithms/direct.hpp>
#include <ringtree/algorithms/hierarchical.hpp>
#include <ringtree/algorithms/one_shot.hpp>
#include <ringtree/algorithms/rabenseifner.hpp>
#include <ringtree/algorithms/recursive_doubling.hpp>
#include <ringtree/algorithms/ring.hpp>
#include <ringtree/algorithms/scatter.hpp>
#include <ringtree/algorithms/scatter_allgather.hpp>
#include <ringtree/algorithms/tree.hpp>
#include <ringtree/core/error.hpp>

namespace ringtree {
namespace detail {

template <class... Rows>
struct row_list {
  // Calls f(Row{}) for the row of collective C and algorithm a; false if
  // there is none (the communicator checks before it dispatches).
  template <collective C, class F>
  static bool run(algorithm a, F&& f) {
    return ([&] {
      if constexpr (Rows::what == C) {
        if (Rows::id == a) {
          f(Rows{});
          return true;
        }
      }
      return false;
    }() || ...);
  }
  // Calls f(Row{}) for every row.
  template <class F>
  static void each(F&& f) { (f(Rows{}), ...); }
};

// f.template operator()<C>() for the collective c names: where a run-time
// collective meets code written per collective.
template <class F>
decltype(auto) with_collective(collective c, F&& f) {
  switch (c) {  // every collective, no default
    case collective::allreduce: return f.template operator()<collective::allreduce>();
    case collective::broadcast: return f.template operator()<collective::broadcast>();
    case collective::reduce: return f.template operator()<collective::reduce>();
    case collective::scatter: return f.template operator()<collective::scatter>();
    case collective::gather: return f.template operator()<collective::gather>();
    case collective::reduce_scatter: return f.template operator()<collective::reduce_scatter>();
    case collective::allgather: return f.template operator()<collective::allgather>();
    case collective::barrier: return f.template operator()<collective::barrier>();
    case collective::alltoall: return f.template operator()<collective::alltoall>();
  }
  throw error("collective", -1, cat("no such collective: ", static_cast<int>(c)));
}

// The arguments row C's run takes after (transport, chunks), made from a
// call's input `in` and its buffer `data` (the in-place one; for scatter
// and gather the whole or the block, whichever the rank receives into):
// calls f(args...). One place knows each row's argument list; measuring
// (communicator/chooser.hpp) and teaching (teach/watch.hpp) both call rows
// through it. `counts` holds an all-to-all's equal block sizes.
template <collective C, class E, class F>
void with_row_arguments(std::span<const E> in, std::span<E> data, op o, int root, std::span<const std::size_t> counts, F&& f) {
  if constexpr (C == collective::allreduce || C == collective::reduce_scatter) f(data, o);
  else if constexpr (C == collective::reduce) f(data, o, root);
  else if constexpr (C == collective::broadcast) f(data, root);
  else if constexpr (C == collective::allgather) f(data);
  else if constexpr (C == collective::scatter || C == collective::gather) f(in, data, root);
  else if constexpr (C == collective::barrier) f();
  else if constexpr (C == collective::alltoall) f(in, counts, data, counts);
  else static_assert(C == collective::barrier, "what does this collective's row take?");
}

// Rows of one collective are listed in order of preference on a tie.
using algorithm_table = row_list<
    ring::allreduce_row, tree::allreduce_row, recursive_doubling::allreduce_row, rabenseifner::allreduce_row,
    one_shot::allreduce_row, direct::allreduce_row, hierarchical::allreduce_row,
    ring::broadcast_row, tree::broadcast_row, tree::binomial_broadcast_row, scatter_allgather::broadcast_row,
    direct::broadcast_row, hierarchical::broadcast_row,
    ring::reduce_row, tree::reduce_row, tree::binomial_reduce_row, direct::reduce_row, hierarchical::reduce_row,
    linear::scatter_row, binomial::scatter_row, direct::scatter_row,
    linear::gather_row, binomial::gather_row, direct::gather_row,
    ring::reduce_scatter_row, direct::reduce_scatter_row, hierarchical::reduce_scatter_row,
    ring::allgather_row, direct::allgather_row, hierarchical::allgather_row,
    dissemination::barrier_row,
    pairwise::alltoall_row, linear::alltoall_row, direct::alltoall_row>;

// The table's rows as values, for the questions asked at run time.
struct row_info {
  collective what;
  algorithm id;
  std::string_view name;
  std::string_view about;  // what it does, in one line (README's algorithm table: ringtree-model --algorithm-table)
  bool (*offered)(const placement&) noexcept;
  cost_counts (*counts)(const shape&, double) noexcept;
  bool direct;          // runs on symmetric memory by direct reads
  bool window_only;  // and only there (on symmetric memory, or staged or streamed through staging)
  bool stages;       // its window form also runs small calls on private memory, through the staging slots
  bool streams;      // its window form also runs on private memory, through staging
  bool across_hosts; // offered only where the ranks span hosts
  double (*net_bytes)(const shape&, double) noexcept;  // across hosts, if the row counts them (else nullptr)
};
template <class... Rows>
constexpr auto infos(row_list<Rows...>) {
  return std::array<row_info, sizeof...(Rows)>{row_info{Rows::what, Rows::id, Rows::name, Rows::about, &Rows::offered, &Rows::counts, Rows::direct, Rows::window_only, Rows::stages, Rows::streams, Rows::across_hosts, Rows::net_bytes}...};
}
inline constexpr auto rows = infos(algorithm_table{});

// One name per algorithm, whichever rows it has.
constexpr bool names_agree() {
  for (const auto& a : rows)
    for (const auto& b : rows)
      if (a.id == b.id && a.name != b.name) return false;
  return true;
}
static_assert(names_agree(), "rows of one algorithm must spell its name the same way");

}  // namespace detail

constexpr std::string_view to_string(algorithm a) noexcept {
  if (a == algorithm::automatic) return "automatic";
  for (const auto& r : detail::rows)
    if (r.id == a) return r.name;
  return "unknown";
}

// The algorithm called `name` (as to_string spells it), if any: one parser
// for RINGTREE_ALGO and the tools' flags.
constexpr std::optional<algorithm> algorithm_from_string(std::string_view name) noexcept {
  if (name == "automatic") return algorithm::automatic;
  for (const auto& r : detail::rows)
    if (r.name == name) return r.id;
  return std::nullopt;
}

namespace detail {

// The row of (c, a), if the table has one.
constexpr const row_info* find_row(collective c, algorithm a) noexcept {
  for (const auto& r : rows)
    if (r.what == c && r.id == a) return &r;
  return nullptr;
}

// Whether c offers a at all, and where the call is.
constexpr bool offers(collective c, algorithm a) noexcept { return find_row(c, a) != nullptr; }
constexpr bool offers(collective c, algorithm a, const placement& p) noexcept {
  const auto* r = find_row(c, a);
  return r != nullptr && r->offered(p);
}

// Whether row r counts for collective c: offered at p, or, without p,
// offered somewhere on private memory of ranks on one host (not a
// symmetric-only row, not a hierarchical one).
constexpr bool counts_for(const row_info& r, collective c, const placement* p) noexcept {
  return r.what == c && (p == nullptr ? !r.window_only && !r.across_hosts : r.offered(*p));
}

// The algorithms of c (those offered at p, if given), in the table's order.
inline std::vector<algorithm> offered(collective c, const placement* p = nullptr) {
  std::vector<algorithm> v;
  for (const auto& r : rows)
    if (counts_for(r, c, p)) v.push_back(r.id);
  return v;
}

// "ring, tree, ..." (those offered at p, if given).
inline std::string offered_names(collective c, const placement* p = nullptr) {
  std::string s;
  for (const auto& r : rows)
    if (counts_for(r, c, p)) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

// Every algorithm's name, for messages about a name that is not one.
inline std::string algorithm_names_list() {
  std::string s;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    bool first = true;
    for (std::size_t j = 0; j < k; ++j) first = first && rows[j].id != rows[k].id;
    if (first) s += (s.empty() ? "" : ", ") + std::string(rows[k].name);
  }
  return s;
}

}  // namespace detail
}  // namespace ringtree
