#pragma once
// The collectives' bodies: each checks its arguments (start, require),
// agrees and resolves (finish), prepares its buffers (in place, scratch,
// avg) and runs its row (dispatch.hpp).
#include <concepts>
#include <cstdint>
#include <span>
#include <vector>

#include <ringtree/communicator.hpp>

namespace ringtree {

// `reduction(span, op)` reduces in place (on any element type); then avg
// is finished on the part `kept(span)` this rank keeps. Integer avg is
// exact: the reduction runs as a sum on the quotients and again on the
// remainders (avg_split in core/reduce.hpp), so no sum can wrap.
template <transport Transport>
template <class E, class Reduction, class Kept>
void communicator<Transport>::reduce_and_average(std::span<E> data, op o, Reduction reduction, Kept kept) {
  auto mem = memory();
  if constexpr (std::integral<E>) {
    if (o == op::avg && size() > 1) {
      auto rem = mem.template scratch<std::int64_t>(data.size());
      mem.split_avg(data, rem.span(), size());
      reduction(data, op::sum);
      reduction(rem.span(), op::sum);
      mem.join_avg(kept(data), std::span<const std::int64_t>(kept(rem.span())), size());
      return;
    }
  }
  reduction(data, o);
  if (o == op::avg) mem.average(kept(data), size());
}

// Defined outside the class, so not inline: with RINGTREE_PREBUILT the
// explicit instantiation declarations of prebuilt.hpp keep the compiler
// from instantiating them in every file (it would, for inlining, were they
// defined in the class).
template <transport Transport>
void communicator<Transport>::barrier() {
  call c = start<std::uint8_t>(collective::barrier, 0, op::sum, -1, algorithm::automatic, 0);
  finish<collective::barrier>(c);
  run<collective::barrier>(c.algo);
}

template <transport Transport>
template <element E>
void communicator<Transport>::allreduce_impl(std::span<const E> in, std::span<E> out, op o, algorithm a) {
  if (empty_call(a, 0, in, out)) return;
  call c = start<E>(collective::allreduce, in.size(), o, -1, a, in.size(), out);
  c.require(out.size() == in.size(), "out.size() = ", out.size(), " but in.size() = ", in.size());
  c.require(in.data() == out.data() || !detail::overlap(in, out), "in and out overlap but are not the same buffer");
  if (returns_at_once(c, in.size())) return;
  finish<collective::allreduce>(c);
  if (out.empty()) return;
  // Out of place on symmetric memory: the direct rows read the peers'
  // inputs where they are, so `in` is not copied first.
  const bool exact_avg = std::integral<E> && o == op::avg;  // sums remainders too, in scratch: needs out filled
  if (c.symmetric && in.data() != out.data() && size() > 1 && detail::find_row(collective::allreduce, c.algo)->direct && !exact_avg)
    c.symmetric_in = shared_.heap->find(in.data(), in.size_bytes());
  // On private memory, a row that streams copies `in` into staging itself.
  if (in.data() != out.data() && streams_call(detail::find_row(collective::allreduce, c.algo)->streams, c.symmetric.has_value()) &&
      !exact_avg)
    c.private_in = std::as_bytes(in);
  if (!c.symmetric_in && c.private_in.empty()) memory().copy(out, in);
  // (integer avg also sums remainders, in private scratch: not by a symmetric-only row)
  const algorithm for_scratch = private_row<collective::allreduce>(c);
  reduce_and_average(out, o, [&](auto data, op ro) {
        if (static_cast<const void*>(data.data()) == out.data()) run<collective::allreduce>(c, data, ro);
        else run_private<collective::allreduce>(c, for_scratch, data, ro);
      }, [](auto data) { return data; });
}

template <transport Transport>
template <element E>
void communicator<Transport>::broadcast_impl(std::span<E> data, int root, algorithm a) {
  if (empty_call(a, root, data)) return;
  call c = start<E>(collective::broadcast, data.size(), op::sum, root, a, data.size(), data);
  if (returns_at_once(c, data.size())) return;
  finish<collective::broadcast>(c);
  if (data.empty()) return;
  run<collective::broadcast>(c, data, root);
}

template <transport Transport>
template <element E>
void communicator<Transport>::reduce_impl(std::span<const E> in, std::span<E> out, int root, op o, algorithm a) {
  if (empty_call(a, root, in, rank() == root ? out : std::span<E>{})) return;
  call c = start<E>(collective::reduce, in.size(), o, root, a, in.size());
  if (rank() == root) {
    c.require(out.size() == in.size(), "out.size() = ", out.size(), " on the root but in.size() = ", in.size());
    c.require(in.data() == out.data() || !detail::overlap(in, out), "in and out overlap but are not the same buffer");
  }
  if (returns_at_once(c, in.size())) return;
  finish<collective::reduce>(c);
  if (in.empty()) return;
  auto mem = memory();
  typename decltype(mem)::template buffer<E> work;
  std::span<E> data = out;
  if (rank() != root) {  // the algorithms reduce in place: keep `in` intact
    work = mem.template scratch<E>(in.size());
    data = work.span();
  }
  mem.copy(data, in);
  reduce_and_average(data, o, [&](auto d, op ro) { run_private<collective::reduce>(c, c.algo, d, ro, root); },
                     [&](auto d) { return rank() == root ? d : d.first(0); });
}

template <transport Transport>
template <element E>
void communicator<Transport>::scatter_impl(std::span<const E> in, std::span<E> out, int root, algorithm a) {
  if (empty_call(a, root, rank() == root ? in : std::span<const E>{}, out)) return;
  call c = start<E>(collective::scatter, out.size(), op::sum, root, a, out.size(), out);
  if (rank() == root) {
    c.template require_blocks<E>("in", in.size(), " on the root", "out", out.size(), size());
    c.require(!detail::overlap(in, out), "in and out overlap");
  }
  if (returns_at_once(c, out.size())) return;
  finish<collective::scatter>(c);
  run<collective::scatter>(c, in, out, root);
}

template <transport Transport>
template <element E>
void communicator<Transport>::gather_impl(std::span<const E> in, std::span<E> out, int root, algorithm a) {
  if (empty_call(a, root, in, rank() == root ? out : std::span<E>{})) return;
  call c = start<E>(collective::gather, in.size(), op::sum, root, a, in.size(), in);
  if (rank() == root) {
    c.template require_blocks<E>("out", out.size(), " on the root", "in", in.size(), size());
    c.require(!detail::overlap(in, out), "in and out overlap");
  }
  if (returns_at_once(c, in.size())) return;
  finish<collective::gather>(c);
  run<collective::gather>(c, in, out, root);
}

template <transport Transport>
template <element E>
void communicator<Transport>::reduce_scatter_impl(std::span<const E> in, std::span<E> out, op o, algorithm a) {
  if (empty_call(a, 0, in, out)) return;
  call c = start<E>(collective::reduce_scatter, out.size(), o, -1, a, in.size(), in);
  c.template require_blocks<E>("in", in.size(), "", "out", out.size(), size());
  c.require(!detail::overlap(in, out), "in and out overlap");
  if (returns_at_once(c, out.size())) return;
  finish<collective::reduce_scatter>(c);
  if (out.empty()) return;
  auto mem = memory();
  const bool exact_avg = std::integral<E> && o == op::avg;  // split into sums on scratch (reduce_and_average)
  if (c.symmetric && size() > 1 && detail::find_row(collective::reduce_scatter, c.algo)->direct && !exact_avg) {  // peers read `in` where it is
    run_direct<collective::reduce_scatter>(c, in, out, o);
    if (o == op::avg) mem.average(out, size());
    return;
  }
  c.algo = private_row<collective::reduce_scatter>(c);
  if (detail::find_row(collective::reduce_scatter, c.algo)->stages && !exact_avg) {  // staged: peers read a copy of `in`
    run_private<collective::reduce_scatter, false>(c, c.algo, in, out, o);
    if (o == op::avg) mem.average(out, size());
    return;
  }
  auto work = mem.template scratch<E>(in.size());
  mem.copy(work.span(), in);
  auto mine = [&](auto d) { return detail::block_of(d, size(), rank()); };
  reduce_and_average(work.span(), o, [&](auto d, op ro) { run_private<collective::reduce_scatter>(c, c.algo, d, ro); }, mine);
  mem.copy(out, std::span<const E>(mine(work.span())));
}

template <transport Transport>
template <element E>
void communicator<Transport>::allgather_impl(std::span<const E> in, std::span<E> out, algorithm a) {
  if (empty_call(a, 0, in, out)) return;
  call c = start<E>(collective::allgather, in.size(), op::sum, -1, a, in.size(), out);
  const bool sized = detail::product_of(in.size(), size()) == out.size();
  if (!sized) c.require(false, "out.size() = ", out.size(), " but size() * in.size() = ", detail::product_text(size(), in.size()));
  c.template require_fits<E>(out.size());
  // Sliced only once the sizes are known to fit (a hardened standard
  // library aborts on an out-of-range subspan instead of raising).
  const std::size_t at = sized ? in.size() * static_cast<std::size_t>(rank()) : 0;
  // addresses as integers: a span that claims more than memory holds must not overflow a pointer here
  const bool in_place = reinterpret_cast<std::uintptr_t>(in.data()) ==
                        reinterpret_cast<std::uintptr_t>(out.data()) + at * sizeof(E);
  if (sized) c.require(in_place || !detail::overlap(in, out), "in overlaps out but is not out's block ", rank());
  if (returns_at_once(c, in.size())) return;
  finish<collective::allgather>(c);
  memory().copy(out.subspan(at, in.size()), in);
  run<collective::allgather>(c, out);
}

template <transport Transport>
template <element E>
void communicator<Transport>::alltoall_impl(std::span<const E> in, std::span<const std::size_t> sends, std::span<E> out,
                                            std::span<const std::size_t> recvs, algorithm a) {
  if (empty_call(a, 0, in, out, sends, recvs)) return;  // (uneven calls name their counts: never here)
  const int n = size();
  const bool equal = sends.empty() && recvs.empty();
  // Blocks of different sizes run pairwise: what automatic would be asked
  // about (this rank's input) differs between ranks.
  if (!equal && a == algorithm::automatic) a = algorithm::pairwise;
  // (count: checked mode compares the pairs instead; totals may differ by rank)
  call c = start<E>(collective::alltoall, 0, op::sum, -1, a, in.size());
  const auto* row = detail::find_row(collective::alltoall, a);
  c.require(equal || row == nullptr || !row->window_only, "algorithm ", to_string(a),
            " takes equal blocks only (alltoall(in, out)); blocks of different sizes run pairwise");
  std::vector<std::size_t> even;
  if (equal) {
    c.template require_blocks<E>("out", out.size(), "", "a block", out.size() / n, n);
    c.require(in.size() == out.size(), "in.size() = ", in.size(), " but out.size() = ", out.size());
    even.assign(n, out.size() / n);
    sends = recvs = even;
  } else {
    c.require(sends.size() == std::size_t(n) && recvs.size() == std::size_t(n), "sends.size() = ", sends.size(),
              " and recvs.size() = ", recvs.size(), " must both be size() = ", n);
    auto sum = [](std::span<const std::size_t> v) {
      std::size_t t = 0;
      for (auto x : v) t = __builtin_add_overflow(t, x, &t) ? SIZE_MAX : t;
      return t;
    };
    if (c.problem.empty()) {
      c.require(sum(sends) == in.size(), "the sends add up to ", sum(sends), " elements but in.size() = ", in.size());
      c.require(sum(recvs) == out.size(), "the recvs add up to ", sum(recvs), " elements but out.size() = ", out.size());
      c.require(recvs[rank()] == sends[rank()], "this rank sends itself ", sends[rank()], " elements but receives ", recvs[rank()]);
    }
  }
  c.require(!detail::overlap(in, out), "in and out overlap");
  if (equal && returns_at_once(c, out.size())) return;  // (uneven: peers may still send this rank empty blocks)
  if (c.problem.empty()) {
    c.sends = sends, c.recvs = recvs;
    for (int j = 0; j < n; ++j) c.pairs_sent += detail::pair_digest(rank(), j, sends[j]), c.pairs_expected += detail::pair_digest(j, rank(), recvs[j]);
  }
  finish<collective::alltoall>(c);
  if (n == 1) return memory().copy(out, in);
  run_private<collective::alltoall>(c, c.algo, in, sends, out, recvs);
}

}  // namespace ringtree
