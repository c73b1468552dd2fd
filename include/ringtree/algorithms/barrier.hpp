#pragma once
// Dissemination barrier: in round k every rank signals rank r + 2^k and
// waits for rank r - 2^k. After ceil(log2 n) rounds each rank has heard,
// directly or through others, from every rank.
#include <ringtree/algorithms/common.hpp>

namespace ringtree::dissemination {

template <transport T>
void barrier(T& t) {
  const int n = t.size(), r = t.rank();
  std::byte token[1]{}, got[1]{};
  for (int k = 1; k < n; k <<= 1)
    detail::sendrecv(t, detail::mod(r + k, n), std::span<const std::byte>(token), detail::mod(r - k, n),
                     std::span<std::byte>(got));
}


// The row of the algorithm table (table.hpp): a 1-byte token per round.
struct barrier_row : detail::row<collective::barrier, algorithm::dissemination> {
  static constexpr std::string_view about = "log2 n rounds; in round k each rank signals the rank 2^k ahead";
  static constexpr std::string_view name = "dissemination";
  static constexpr cost_counts counts(const shape& s, double) noexcept { return {double(s.lc), double(s.lc), 0, 0}; }
  template <transport T>
  static void run(T& t, const chunk_sizes&) { barrier(t); }
};

}  // namespace ringtree::dissemination
