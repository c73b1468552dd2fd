#pragma once
// Which algorithm runs when the caller says algorithm::automatic, and which
// algorithms each collective offers. One table, so every choice is in one
// place. The rule here is a first one by message size and rank count; a
// cost model calibrated on the transport is to replace it.
#include <cstddef>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ringtree {

enum class algorithm { automatic, ring, tree, binomial, linear, recursive_doubling, rabenseifner, scatter_allgather };

namespace detail {
inline constexpr std::string_view algorithm_names[] = {"automatic", "ring",   "tree",         "binomial",
                                                       "linear",    "recursive_doubling", "rabenseifner",
                                                       "scatter_allgather"};
}  // namespace detail

constexpr std::string_view to_string(algorithm a) noexcept { return detail::algorithm_names[static_cast<int>(a)]; }

// The algorithm called `name` (as to_string spells it), if any: one parser
// for RINGTREE_ALGO and the tools' flags.
constexpr std::optional<algorithm> algorithm_from_string(std::string_view name) noexcept {
  for (std::size_t k = 0; k < std::size(detail::algorithm_names); ++k)
    if (detail::algorithm_names[k] == name) return static_cast<algorithm>(k);
  return std::nullopt;
}

enum class collective { allreduce, broadcast, reduce, scatter, gather, reduce_scatter, allgather, barrier };

constexpr std::string_view to_string(collective c) noexcept {
  constexpr std::string_view names[] = {"allreduce", "broadcast",      "reduce",    "scatter",
                                        "gather",    "reduce_scatter", "allgather", "barrier"};
  return names[static_cast<int>(c)];
}

namespace detail {

// The algorithms each collective implements.
inline std::span<const algorithm> offered(collective c) noexcept {
  static constexpr algorithm all_reduce[] = {algorithm::ring, algorithm::tree, algorithm::recursive_doubling,
                                             algorithm::rabenseifner};
  static constexpr algorithm bcast[] = {algorithm::ring, algorithm::tree, algorithm::binomial, algorithm::scatter_allgather};
  static constexpr algorithm rooted[] = {algorithm::ring, algorithm::tree, algorithm::binomial};
  static constexpr algorithm fan[] = {algorithm::linear, algorithm::binomial};
  static constexpr algorithm ring_only[] = {algorithm::ring};
  static constexpr algorithm dissemination[] = {algorithm::tree};
  switch (c) {
    case collective::allreduce: return all_reduce;
    case collective::broadcast: return bcast;
    case collective::reduce: return rooted;
    case collective::scatter:
    case collective::gather: return fan;
    case collective::reduce_scatter:
    case collective::allgather: return ring_only;
    case collective::barrier: return dissemination;
  }
  return {};
}

inline bool offers(collective c, algorithm a) noexcept {
  for (auto x : offered(c))
    if (x == a) return true;
  return false;
}

inline std::string offered_names(collective c) {
  std::string s;
  for (auto x : offered(c)) s += (s.empty() ? "" : ", ") + std::string(to_string(x));
  return s;
}

// `bytes` is the whole buffer (per rank block for scatter and gather).
inline algorithm choose(collective c, std::size_t bytes, int ranks) noexcept {
  switch (c) {
    case collective::allreduce:
      // fewest steps for small buffers; the tree's log n steps for medium
      // buffers on many ranks; the ring's bandwidth optimum beyond
      if (bytes <= (std::size_t{64} << 10)) return algorithm::recursive_doubling;
      if (bytes <= (std::size_t{512} << 10) && ranks > 8) return algorithm::tree;
      return algorithm::ring;
    case collective::broadcast:
    case collective::reduce:
      // with two ranks every algorithm is one message; the chain pipelines for more
      return bytes <= (std::size_t{64} << 10) || ranks <= 2 ? algorithm::binomial : algorithm::ring;
    case collective::scatter:
    case collective::gather: return bytes <= (std::size_t{16} << 10) ? algorithm::binomial : algorithm::linear;
    default: return *offered(c).begin();
  }
}

}  // namespace detail
}  // namespace ringtree
