#pragma once
// Direct algorithms, for spans inside symmetric buffers (comm.allocate):
// every rank reads (or, for scatter, writes) its peers' memory itself, so
// each byte is copied once, with no staging and no messages. They are
// written against symmetric_window (memory/symmetric.hpp) as the others
// are against the transport concept: publish my span, read the peers',
// say when a part of mine is written, say when I read nobody any more.
// The window's memory object copies and reduces, so host and device
// memory share the schedule.
#include <algorithm>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include <ringtree/algorithms/common.hpp>

namespace ringtree::direct {

// Whether a call of `bytes` a rank runs staged (window W's memory has slots).
template <class W>
constexpr bool staged_call(std::size_t bytes) noexcept { return W::stage_capacity > 0 && bytes <= W::stage_capacity; }

// Elements per step of a part that readers take while its writer still
// works on the rest: chunk_bytes, or more where that would make too many steps.
constexpr std::size_t step_elems(std::size_t part, std::size_t chunk_bytes, std::size_t elem) noexcept {
  return std::max(detail::chunk_elems(chunk_bytes, elem), (part + 1023) / 1024);
}

// Staged forms, for calls up to the window's stage_capacity on any
// memory (on private buffers too): every rank copies what it contributes
// into its staging slot (the window's stage, if only nothing), then reads
// what it needs from the peers' slots. One synchronisation, and none for
// a rank that reads nothing (a broadcast's root, a reduce's or gather's
// other ranks): it returns at once. Peers read the copies, never the
// buffers, so those may change as soon as the call returns.

// Folds block [at, at + out.size()) of every rank's staged data, in rank
// order, into `out`: x0 op x1 op ... op x(n-1) (the same bits everywhere).
template <class W, class E>
void fold_staged(W& w, std::span<E> out, op o, std::size_t staged_count, std::size_t at = 0) {
  const auto& mem = w.memory();
  mem.copy(out, w.template staged<E>(0, staged_count).subspan(at, out.size()));
  for (int k = 1; k < w.size(); ++k) mem.reduce(o, out, w.template staged<E>(k, staged_count).subspan(at, out.size()));
}
template <class W, class E>
void allreduce_staged(W& w, std::span<E> data, op o) {
  w.stage(w.out_of_place() ? w.template peer_in<E>(w.rank()) : std::span<const E>(data));
  fold_staged(w, data, o, data.size());
}
template <class W, class E>
void reduce_staged(W& w, std::span<E> data, op o, int root) {
  w.stage(std::span<const E>(data));
  if (w.rank() == root) fold_staged(w, data, o, data.size());
}
// `in`: every rank's whole input; this rank's block of the result goes to `out`.
template <class W, class E>
void reduce_scatter_staged(W& w, std::span<const E> in, std::span<E> out, op o) {
  w.stage(in);
  fold_staged(w, out, o, in.size(), static_cast<std::size_t>(w.rank()) * out.size());
}
template <class W, class E>
void broadcast_staged(W& w, std::span<E> data, int root) {
  w.stage(w.rank() == root ? std::span<const E>(data) : std::span<const E>());
  if (w.rank() != root) w.memory().copy(data, w.template staged<E>(root));
}
// All-to-all of equal blocks: block r of rank q's staged `in` is block q of my `out`.
template <class W, class E>
void alltoall_staged(W& w, std::span<const E> in, std::span<E> out) {
  const std::size_t m = out.size() / w.size();
  w.stage(in);
  for (int q = 0; q < w.size(); ++q) w.memory().copy(out.subspan(q * m, m), w.template staged<E>(q, in.size()).subspan(w.rank() * m, m));
}
// Rank q's block of `out` (n blocks) comes from q's slot, where `in` is staged.
template <class W, class E>
void gather_staged(W& w, std::span<const E> in, std::span<E> out, bool reads) {
  w.stage(in);
  if (!reads) return;
  for (int q = 0; q < w.size(); ++q) w.memory().copy(out.subspan(q * in.size(), in.size()), w.template staged<E>(q, in.size()));
}

// One-shot: every rank folds all n inputs in rank order, x0 op x1 op ...
// op x(n-1), the same expression everywhere (so the same bits). Out of
// place straight into its output, which nobody else reads; in place into
// scratch, since it may overwrite its span only once nobody reads it.
// One read of every peer's buffer: for small buffers.
template <class W, class E>
void allreduce_one_shot(W& w, std::span<E> data, op o) {
  const auto& mem = w.memory();
  w.publish();
  decltype(mem.template scratch<E>(0)) scratch;
  std::span<E> acc = data;
  if (!w.out_of_place()) scratch = mem.template scratch<E>(data.size()), acc = scratch.span();
  mem.copy(acc, w.template peer_in<E>(0));
  for (int k = 1; k < w.size(); ++k) mem.reduce(o, acc, w.template peer_in<E>(k));
  w.done();
  w.wait_all_done();
  mem.copy(data, std::span<const E>(acc));
}

// Two-shot: rank r reduces block r of all n spans into its own span (one
// rank computes each block, so every rank ends with the same bits), then
// every rank copies the other blocks out of their owners' spans, step by
// step as the owners finish them. Each rank reads 2(n-1)/n of the buffer:
// the bandwidth optimum, with no copy through staging.
template <class W, class E>
void allreduce_two_shot(W& w, std::span<E> data, op o, std::size_t chunk_bytes) {
  const auto& mem = w.memory();
  const int n = w.size(), r = w.rank();
  const std::size_t m = data.size();
  const std::size_t step = step_elems(detail::block(m, n, 0).size, chunk_bytes, sizeof(E));
  const std::size_t steps = detail::chunk_count(detail::block(m, n, 0).size, step);  // the same on every rank
  w.publish();
  std::vector<std::span<const E>> in(n);  // the inputs (the spans themselves, in place)
  std::vector<std::span<E>> from(n);      // the outputs, where the reduced blocks are
  for (int q = 0; q < n; ++q) in[q] = w.template peer_in<E>(q), from[q] = w.template peer<E>(q);
  auto part = [&](int owner, std::size_t j) {  // step j of block `owner`: [begin, begin + size)
    const auto b = detail::block(m, n, owner);
    const std::size_t at = std::min(j * step, b.size);
    return detail::range{b.begin + at, std::min(step, b.size - at)};
  };
  for (std::size_t j = 0; j < steps; ++j) {
    const auto p = part(r, j);
    auto acc = data.subspan(p.begin, p.size);
    mem.copy(acc, in[r].subspan(p.begin, p.size));  // nothing to do in place
    for (int k = 1; k < n; ++k) mem.reduce(o, acc, in[(r + k) % n].subspan(p.begin, p.size));
    w.step(j);
  }
  for (int k = 1; k < n; ++k) {
    const int q = (r + k) % n;  // readers spread over the owners
    for (std::size_t j = 0; j < steps; ++j) {
      const auto p = part(q, j);
      if (p.size == 0) break;
      w.wait_step(q, j);
      mem.copy(data.subspan(p.begin, p.size), std::span<const E>(from[q].subspan(p.begin, p.size)));
    }
  }
  w.done();
  w.wait_all_done();
}

// Two-shot on private buffers, streamed through each rank's staging (the
// window's span: two segments, one filling while the other is read).
// Per segment, rank r copies the blocks its peers own into its staging
// (the only copy its data makes), reduces its own block from its input
// and the peers' staging into its output and its staging (one rank
// computes each element: the same bits everywhere), then copies the
// others' reduced blocks out of their owners' staging. About 4 bytes of
// memory traffic per byte at 2 ranks, mostly in cache-sized segments.
template <class W, class E>
void allreduce_streamed(W& w, std::span<const E> in, std::span<E> data, op o) {
  const auto& mem = w.memory();
  const int n = w.size(), r = w.rank();
  w.publish();
  std::vector<std::span<E>> stage(n);
  for (int q = 0; q < n; ++q) stage[q] = w.template peer<E>(q);
  const std::size_t seg = stage[r].size() / 2;  // the same on every rank (the same bytes, checked)
  // Phases per segment j: 3j my copies are in, 3j+1 my block is reduced, 3j+2 I read nobody's half j % 2.
  const std::size_t segs = detail::chunk_count(data.size(), seg);
  for (std::size_t j = 0; j < segs; ++j) {
    const std::size_t at = j * seg, len = std::min(seg, data.size() - at), h = (j % 2) * seg;
    auto blk = [&](int q) { return detail::block(len, n, q); };
    auto staged = [&](int q, int owner) { return stage[q].subspan(h + blk(owner).begin, blk(owner).size); };
    auto part = [&](auto s, int owner) { return s.subspan(at + blk(owner).begin, blk(owner).size); };
    if (j >= 2)
      for (int q = 0; q < n; ++q)
        if (q != r) w.wait_step(q, 3 * (j - 2) + 2);  // nobody reads this half of mine any more
    for (int q = 0; q < n; ++q)
      if (q != r) mem.copy(staged(r, q), part(in, q));
    w.step(3 * j);
    auto acc = part(data, r);
    mem.copy(acc, part(in, r));  // nothing to do in place
    for (int k = 0; k < n; ++k)
      if (k != r) {
        w.wait_step(k, 3 * j);
        mem.reduce(o, acc, std::span<const E>(staged(k, r)));
      }
    mem.copy(staged(r, r), std::span<const E>(acc));
    w.step(3 * j + 1);
    for (int k = 1; k < n; ++k) {
      const int q = (r + k) % n;
      w.wait_step(q, 3 * j + 1);
      mem.copy(part(data, q), std::span<const E>(staged(q, q)));
    }
    w.step(3 * j + 2);
  }
  w.done();
  w.wait_all_done();
}

// Broadcast: every rank copies the root's span.
template <class W, class E>
void broadcast(W& w, std::span<E> data, int root) {
  w.publish();
  if (w.rank() != root) w.memory().copy(data, std::span<const E>(w.template peer<E>(root)));
  w.done();
  if (w.rank() == root) w.wait_all_done();
}

// Scatter: `out` is symmetric on every rank; the root writes block q of
// its `in` (any memory) straight into rank q's `out`.
template <class W, class E>
void scatter(W& w, std::span<const E> in, std::span<E> out, int root) {
  const std::size_t m = out.size();
  w.publish();
  if (w.rank() == root)
    for (int q = 0; q < w.size(); ++q) w.memory().copy(w.template peer<E>(q), in.subspan(q * m, m));
  w.done();
  if (w.rank() != root) w.wait_done(root);
}

// Gather: `in` is symmetric on every rank; the root reads each rank's
// `in` straight into block q of its `out` (any memory).
template <class W, class E>
void gather(W& w, std::span<const E> in, std::span<E> out, int root) {
  const std::size_t m = in.size();
  w.publish();
  if (w.rank() == root)
    for (int q = 0; q < w.size(); ++q) w.memory().copy(out.subspan(q * m, m), std::span<const E>(w.template peer<const E>(q)));
  w.done();
  if (w.rank() != root) w.wait_done(root);
}

// All-gather: `out` is symmetric, its block rank() already holds this
// rank's contribution; every rank copies block q out of rank q's `out`.
template <class W, class E>
void allgather(W& w, std::span<E> out) {
  const int n = w.size(), r = w.rank();
  const std::size_t m = out.size() / n;
  w.publish();
  for (int k = 1; k < n; ++k) {
    const int q = (r + k) % n;
    w.memory().copy(out.subspan(q * m, m), std::span<const E>(w.template peer<E>(q).subspan(q * m, m)));
  }
  w.done();
  w.wait_all_done();
}

// Reduce-scatter: `in` is symmetric on every rank; rank r folds block r of
// every rank's `in`, in rank order, into its `out` (any memory).
template <class W, class E>
void reduce_scatter(W& w, std::span<const E> in, std::span<E> out, op o) {
  const int n = w.size(), r = w.rank();
  const std::size_t m = out.size();
  (void)in;  // this rank's is peer(r)
  w.publish();
  w.memory().copy(out, w.template peer<const E>(0).subspan(r * m, m));
  for (int k = 1; k < n; ++k) w.memory().reduce(o, out, w.template peer<const E>(k).subspan(r * m, m));
  w.done();
  w.wait_all_done();
}

// Rows of the algorithm table: offered on symmetric memory, and where a
// row stages (`staged`) on any host memory whose call fits the staging
// slots (the call's bytes; all-gather's are one rank's block). Counts:
// synchronisations as steps, the most bytes one rank reads or writes.
template <collective C, bool staged = true>
struct direct_row : detail::row<C, algorithm::direct> {
  static constexpr std::string_view name = "direct";
  static constexpr bool direct = true, window_only = true, stages = staged;
  static constexpr bool offered(const placement& p) noexcept { return p.symmetric || (staged && p.bytes <= p.stage_bytes); }
};

struct allreduce_row : detail::row<collective::allreduce, algorithm::two_shot> {
  static constexpr std::string_view about = "symmetric memory: each rank reduces its block from every peer's buffer, then copies the others' reduced blocks";
  static constexpr std::string_view name = "two_shot";
  static constexpr bool direct = true, window_only = true, streams = true;
  static constexpr bool offered(const placement& p) noexcept { return p.symmetric || p.staging; }
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    return s.uniform(3, 2 * (s.n - 1) * B / s.n, (s.n - 1) * B / s.n, B / s.n);
  }
  template <class W, class E>
    requires(!transport<W>)
  static void run(W& w, const chunk_sizes& c, std::span<E> data, op o) {
    if (w.streamed()) allreduce_streamed(w, w.template private_in<E>(data), data, o);
    else allreduce_two_shot(w, data, o, c.direct_chunk_bytes);
  }
};
struct broadcast_row : direct_row<collective::broadcast> {
  static constexpr std::string_view about = "symmetric memory (or staged): every rank copies from the root's buffer";
  static constexpr cost_counts counts(const shape& s, double B) noexcept { return s.uniform(2, B, 0, B); }
  template <class W, class E>
    requires(!transport<W>)
  static void run(W& w, const chunk_sizes&, std::span<E> data, int root) {
    if (staged_call<W>(data.size_bytes())) broadcast_staged(w, data, root);
    else broadcast(w, data, root);
  }
};
// Reduce: staged only (a reduce's buffers are never symmetric).
struct reduce_row : direct_row<collective::reduce> {
  static constexpr std::string_view about = "staged: the root reads and reduces every rank's staged copy";
  static constexpr bool offered(const placement& p) noexcept { return p.bytes <= p.stage_bytes; }
  static constexpr cost_counts counts(const shape& s, double B) noexcept { return s.uniform(1, (s.n - 1) * B, (s.n - 1) * B, B); }
  template <class W, class E>
    requires(!transport<W>)
  static void run(W& w, const chunk_sizes&, std::span<E> data, op o, int root) { reduce_staged(w, data, o, root); }
};
// Scatter stages nothing: its ranks pass inputs of different sizes.
struct scatter_row : direct_row<collective::scatter, false> {
  static constexpr std::string_view about = "symmetric memory: every rank copies its block from the root's buffer";
  static constexpr cost_counts counts(const shape& s, double B) noexcept { return s.uniform(2, (s.n - 1) * B, 0, B); }
  template <class W, class E>
    requires(!transport<W>)
  static void run(W& w, const chunk_sizes&, std::span<const E> in, std::span<E> out, int root) { scatter(w, in, out, root); }
};
struct gather_row : direct_row<collective::gather> {
  static constexpr std::string_view about = "symmetric memory (or staged): the root copies every rank's block";
  static constexpr cost_counts counts(const shape& s, double B) noexcept { return s.uniform(2, (s.n - 1) * B, 0, B); }
  template <class W, class E>
    requires(!transport<W>)
  static void run(W& w, const chunk_sizes&, std::span<const E> in, std::span<E> out, int root) {
    if (staged_call<W>(in.size_bytes())) gather_staged(w, in, out, w.rank() == root);
    else gather(w, in, out, root);
  }
};
// (the call's bytes are one block; the window's span is all n, which must fit)
struct allgather_row : direct_row<collective::allgather> {
  static constexpr std::string_view about = "symmetric memory (or staged): every rank copies every peer's block";
  static constexpr bool offered(const placement& p) noexcept {
    return p.symmetric || p.bytes <= p.stage_bytes / static_cast<std::size_t>(std::max(1, p.ranks));
  }
  static constexpr cost_counts counts(const shape& s, double B) noexcept { return s.uniform(2, (s.n - 1) * B, 0, B); }
  template <class W, class E>
    requires(!transport<W>)
  static void run(W& w, const chunk_sizes&, std::span<E> out) {
    const std::size_t m = out.size() / w.size();
    if (staged_call<W>(out.size_bytes())) gather_staged(w, std::span<const E>(out.subspan(w.rank() * m, m)), out, true);
    else allgather(w, out);
  }
};
// All-to-all: staged only, equal blocks only (communicator::alltoall
// runs blocks of different sizes pairwise: ranks could not agree on
// whether their inputs fit).
struct alltoall_row : direct_row<collective::alltoall> {
  static constexpr std::string_view about = "staged: every rank copies its block from every peer's staged input";
  static constexpr bool offered(const placement& p) noexcept { return p.bytes <= p.stage_bytes; }
  static constexpr cost_counts counts(const shape& s, double B) noexcept { return s.uniform(1, (s.n - 1) * B / s.n, 0, B / s.n); }
  template <class W, class E>
    requires(!transport<W>)
  static void run(W& w, const chunk_sizes&, std::span<const E> in, std::span<const std::size_t>, std::span<E> out,
                  std::span<const std::size_t>) {
    alltoall_staged(w, in, out);
  }
};
struct reduce_scatter_row : direct_row<collective::reduce_scatter> {
  static constexpr std::string_view about = "symmetric memory (or staged): each rank reduces its block from every peer's buffer";
  static constexpr cost_counts counts(const shape& s, double B) noexcept {
    return s.uniform(2, (s.n - 1) * B / s.n, (s.n - 1) * B / s.n, B / s.n);
  }
  template <class W, class E>
    requires(!transport<W>)
  static void run(W& w, const chunk_sizes&, std::span<const E> in, std::span<E> out, op o) {
    if (staged_call<W>(in.size_bytes())) reduce_scatter_staged(w, in, out, o);
    else reduce_scatter(w, in, out, o);
  }
  // Private memory (staged only): `data` holds every block; this rank's is reduced in place.
  template <class W, class E>
    requires(!transport<W>)
  static void run(W& w, const chunk_sizes&, std::span<E> data, op o) {
    reduce_scatter_staged(w, std::span<const E>(data), detail::block_of(data, w.size(), w.rank()), o);
  }
};

}  // namespace ringtree::direct
