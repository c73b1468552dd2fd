#pragma once
// Rabenseifner all-reduce: reduce-scatter by recursive halving, then
// all-gather by recursive doubling. In the halving round with distance d
// a rank keeps half of the blocks it still holds, sends the other half to
// the rank d away and folds in that rank's copy of its own half; after
// log2 n rounds each rank holds one block, complete; the doubling rounds
// undo the halving, exchanging complete halves. Each rank sends and
// receives 2(n-1)/n of the buffer, like the ring, but in 2 log2 n steps
// instead of 2(n-1): the choice for large buffers on many ranks. Rank
// counts that are not a power of two fold the extra ranks in first (2
// more steps for them).
#include <algorithm>

#include <ringtree/algorithms/common.hpp>
#include <ringtree/algorithms/fold.hpp>

namespace ringtree::rabenseifner {

template <transport T, class E>
void allreduce(T& t, std::span<E> data, op o, const chunk_sizes& chunks = {}) {
  if (t.size() == 1 || data.empty()) return;
  auto mem = t.memory();
  const std::size_t chunk = std::min(detail::chunk_elems(chunks.ring_chunk_bytes, sizeof(E)), (data.size() + 1) / 2);
  // the pairing step needs data.size(), the halving steps two chunks (one more for an odd size)
  auto tmp = mem.template scratch<E>(std::max(data.size(), 2 * chunk));
  detail::power_of_two_group<T, E> g(t, data, o, tmp.span().first(data.size()));
  if (g.active()) {
    const int p = g.size(), v = g.rank();
    // The elements of blocks [lo, hi) when the buffer is dealt into p blocks.
    auto blocks = [&](int lo, int hi) {
      const auto a = detail::block(data.size(), p, lo);
      const std::size_t end = hi == p ? data.size() : detail::block(data.size(), p, hi).begin;
      return data.subspan(a.begin, end - a.begin);
    };
    int lo = 0, hi = p;
    for (int d = p / 2; d >= 1; d /= 2) {  // recursive halving
      const int partner = g.real(v ^ d), mid = (lo + hi) / 2;
      const bool low = (v & d) == 0;
      auto keep = low ? blocks(lo, mid) : blocks(mid, hi);
      auto give = low ? blocks(mid, hi) : blocks(lo, mid);
      // chunked, so that folding in one chunk overlaps the arrival of the next
      detail::sendrecv_reduce(t, o, partner, std::span<const E>(give), partner, keep, chunk, tmp.span().first(2 * chunk),
                              partner < t.rank() ? operands::in_first : operands::acc_first);
      (low ? hi : lo) = mid;
    }
    for (int d = 1; d < p; d *= 2) {  // recursive doubling: exchange complete halves
      const int partner = g.real(v ^ d), size = hi - lo;
      const bool low = (v & d) == 0;
      const int plo = low ? hi : lo - size, phi = low ? hi + size : lo;
      detail::sendrecv(t, partner, std::span<const E>(blocks(lo, hi)), partner, blocks(plo, phi));
      lo = std::min(lo, plo);
      hi = std::max(hi, phi);
    }
  }
  g.finish();
}


// The row of the algorithm table (table.hpp). Its messages halve each
// round (in chunks), and whole buffers fold the extra ranks in and out.
struct allreduce_row : detail::row<collective::allreduce, algorithm::rabenseifner> {
  static constexpr std::string_view about = "recursive halving (reduce-scatter) then recursive doubling (all-gather): 2 log2 n steps, bandwidth-optimal";
  static constexpr std::string_view name = "rabenseifner";
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    const double p = s.p, odd = s.odd;
    cost_counts k{2 * s.lf + 2 * odd, (2 * (p - 1) / p + odd) * B, ((p - 1) / p + odd) * B, 0};
    k.large_steps = s.large(B) ? 2 * odd : 0;
    for (double part = B / 2; part >= B / p && B > 0; part /= 2)
      k.large_steps += s.large(std::min(part, double(s.chunks.ring_chunk_bytes))) ? 2 : 0;
    return k;
  }
  // At distance 2^k each way 2^k / p of the buffer, from s.cube[k] of a host's ranks at once.
  static constexpr double net_bytes_of(const shape& s, double B) noexcept {
    double x = s.odd * B;
    for (int k = 0; k < s.lf; ++k) x += 2 * B * double(1 << k) / s.p * std::max(1, s.cube[k]);
    return x;
  }
  static constexpr double (*net_bytes)(const shape&, double) noexcept = &net_bytes_of;
  template <transport T, class E>
  static void run(T& t, const chunk_sizes& c, std::span<E> data, op o) { allreduce(t, data, o, c); }
};

}  // namespace ringtree::rabenseifner
