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

}  // namespace ringtree::dissemination
