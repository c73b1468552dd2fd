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
// the result back at the end (2 extra steps for those pairs).
//
// Partners combine "lower rank's data first", so both compute the same
// expression and every rank ends with the same bits.
#include <ringtree/algorithms/common.hpp>

namespace ringtree::recursive_doubling {

template <transport T, class E>
void allreduce(T& t, std::span<E> data, op o) {
  const int n = t.size(), r = t.rank();
  if (n == 1 || data.empty()) return;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  auto mem = t.memory();
  auto tmp = mem.template scratch<E>(data.size());
  auto exchange = [&](int partner) {  // swap buffers with `partner`, fold its data in
    detail::sendrecv(t, partner, std::span<const E>(data), partner, tmp.span());
    mem.reduce(o, data, std::span<const E>(tmp.span()), partner < r ? operands::in_first : operands::acc_first);
  };
  auto send_to = [&](int peer) { auto q = detail::post_send(t, peer, std::span<const E>(data)); t.wait(q); };
  auto recv_from = [&](int peer, std::span<E> into) { auto q = detail::post_recv(t, peer, into); t.wait(q); };

  if (r < 2 * rem) {
    if (r % 2 == 0) {  // hand over, wait for the result
      send_to(r + 1);
      recv_from(r + 1, data);
      return;
    }
    recv_from(r - 1, tmp.span());
    mem.reduce(o, data, std::span<const E>(tmp.span()), operands::in_first);
  }
  const int v = r < 2 * rem ? r / 2 : r - rem;                           // number among the p
  auto real = [&](int w) { return w < rem ? 2 * w + 1 : w + rem; };     // ... and back
  for (int mask = 1; mask < p; mask <<= 1) exchange(real(v ^ mask));
  if (r < 2 * rem) send_to(r - 1);
}

}  // namespace ringtree::recursive_doubling
