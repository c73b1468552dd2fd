#pragma once
// call.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <ringtree/communicator/call.hpp>

namespace ringtree::detail {

RINGTREE_FUNC std::string product_text(int n, std::size_t per_rank) {
  const auto p = product_of(per_rank, n);
  return p ? cat(n, " * ", per_rank, " = ", *p) : cat(n, " * ", per_rank, ", which overflows");
}

RINGTREE_FUNC std::string show_algorithm(std::uint64_t v) {
  if (v < requested_bit) return std::string(to_string(algorithm(v)));
  const auto a = algorithm(v - requested_bit);
  return a == algorithm::automatic ? std::string("automatic (not chosen yet)") : cat(to_string(a), " (as asked)");
}

RINGTREE_FUNC std::vector<std::uint64_t> words_of(const collective_call& c, std::optional<algorithm> row) {
  return {std::uint64_t(c.kind), std::uint64_t(c.count), std::uint64_t(c.type), std::uint64_t(c.reduction),
          std::uint64_t(std::int64_t(c.root)), c.symmetric ? c.symmetric->region->id : std::uint64_t{0},
          row ? std::uint64_t(*row) : requested_bit | std::uint64_t(c.algo), std::uint64_t(c.problem.empty() ? 0 : 1),
          c.pairs_sent, c.pairs_expected};
}

}  // namespace ringtree::detail
