#pragma once
// Recursive doubling all-reduce: in round k every rank swaps its whole
// buffer with the rank whose (virtual) number differs in bit k and folds it
// in. log2 n rounds of the full buffer: the fewest latency steps of any
// all-reduce, so the choice for small messages; it moves log2(n) times the
// buffer, so not for large ones.
//
// Rank counts that are not a power of two: the first 2*rem ranks (rem = n
// minus the largest power of two p below n) pair up; each even one hands
// its buffer to its odd neighbour and sits out, leaving p ranks, which get
// the result back at the end (2 extra messages for those pairs, and one or
// two more steps on the longest chain: see the model in tuning/cost_model.hpp).
//
// Partners combine "lower rank's data first", so both compute the same
// expression and every rank ends with the same bits.
#include <ringtree/algorithms/common.hpp>
#include <ringtree/algorithms/fold.hpp>

namespace ringtree {
namespace recursive_doubling {

template <transport T, class E>
void allreduce(T& t, std::span<E> data, op o) {
  if (t.size() == 1 || data.empty()) return;
  auto mem = t.memory();
  auto tmp = mem.template scratch<E>(data.size());
  detail::power_of_two_group<T, E> g(t, data, o, tmp.span());
  if (g.active()) {
    const int v = g.rank();
    for (int mask = 1; mask < g.size(); mask <<= 1) {  // swap buffers with the partner, fold its data in
      const int partner = g.real(v ^ mask);
      detail::sendrecv(t, partner, std::span<const E>(data), partner, tmp.span());
      mem.reduce(o, data, std::span<const E>(tmp.span()), partner < t.rank() ? operands::in_first : operands::acc_first);
    }
  }
  g.finish();
}


// The row of the algorithm table (table.hpp). Folding the extra ranks in
// overlaps the first rounds; handing the result back adds a step only if
// the folded ranks reach into the upper half of the p, whose chains it
// then extends.
struct allreduce_row : detail::row<collective::allreduce, algorithm::recursive_doubling> {
  static constexpr std::string_view about = "log2 n exchanges of the whole buffer with partners 1, 2, 4, ... apart (fewest steps, small buffers)";
  static constexpr std::string_view name = "recursive_doubling";
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    const double rounds = s.lf + s.odd;
    return s.uniform(rounds + (s.n - s.p > s.p / 2 ? 1 : 0), rounds * B, rounds * B, B);
  }
  // The whole buffer at every distance 2^k, from s.cube[k] of a host's ranks at once.
  static constexpr double net_bytes_of(const shape& s, double B) noexcept {
    double x = s.odd * B;
    for (int k = 0; k < s.lf; ++k) x += B * std::max(1, s.cube[k]);
    return x;
  }
  static constexpr double (*net_bytes)(const shape&, double) noexcept = &net_bytes_of;
  template <transport T, class E>
  static void run(T& t, const chunk_sizes&, std::span<E> data, op o) { allreduce(t, data, o); }
};

}  // namespace recursive_doubling
}  // namespace ringtree
