#pragma once
// Dispatch: how a call reaches the row that runs it.
//
//   start     the call's arguments, checked (call.hpp); where it lies:
//             symmetric memory (comm.allocate) or private memory
//   finish    raise on bad arguments; checked mode compares the call;
//             automatic resolved (chooser.hpp; may measure)
//   run_row   one of four routes to the row's code:
//     window    a symmetric call on a direct row: peers read its buffer
//     staged    a small private call on a row that stages: copied through
//               the control memory's slots, then as a window
//     streamed  a private call on a row that streams: chunks pass through
//               this rank's staging (staging.hpp)
//     messages  every other call: the row runs over the transport (traced
//               where RINGTREE_TRACE is set)
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <ringtree/communicator.hpp>

namespace ringtree {

namespace detail {
// The first argument's size in bytes, where it is a span: what decides
// whether a row stages the call.
template <class X, class... A>
std::size_t first_span_bytes(const X& x, const A&...) noexcept {
  if constexpr (requires { x.size_bytes(); }) return x.size_bytes();
  else return 0;
}
inline std::size_t first_span_bytes() noexcept { return 0; }
}  // namespace detail

// `elems`: how many elements the call's size is, checked to fit in bytes.
// `sym`: the span whose place decides whether the call runs on
// symmetric memory (each collective names one that every rank passes).
template <transport Transport>
template <class E, class S>
detail::collective_call communicator<Transport>::start(collective kind, std::size_t count, op o, int root, algorithm a, std::size_t elems,
                                                       std::span<S> sym) {
  if (opt_.point_to_point_only)
    throw error(std::string(to_string(kind)), rank(), "this communicator is for point to point only (communicator_options::point_to_point_only)");
  quiesce();  // after the asynchronous calls made before
  detail::collective_call c{kind, count, dtype_of<E>, o, root, a, rank(), {}, 0};
  c.bytes = c.template require_fits<E>(elems);
  // (not an empty span: one at the end of a buffer is also at the start
  // of the next, and ranks could tell them apart differently)
  if (shared_.heap && !sym.empty())
    if ((c.symmetric = shared_.heap->find(sym.data(), sym.size_bytes()))) c.symmetric_bytes = sym.size_bytes();
  const bool rooted = kind == collective::broadcast || kind == collective::reduce ||
                      kind == collective::scatter || kind == collective::gather;
  if (rooted) c.require(root >= 0 && root < size(), "root ", root, " is out of range for ", size(), " ranks");
  // An empty call may name a symmetric-only row: it moves nothing (finish picks a plain one).
  const bool symmetric = c.symmetric.has_value() || sym.empty();
  if (a != algorithm::automatic && !detail::offers(kind, a, placement_of(c.bytes, symmetric))) {
    const placement at = placement_of(c.bytes, symmetric);  // the message is built only when needed
    c.require(false, "algorithm ", to_string(a), " is not available for ", to_string(kind), " of ", c.bytes, " bytes on ",
              size(), " ranks (available: ", detail::offered_names(kind, &at), ")");
  }
  return c;
}

// Raise on bad arguments; in checked mode, first agree across ranks on
// the call and the row that will run. Then resolve automatic (which may
// measure: all ranks are here).
template <transport Transport>
template <collective C>
void communicator<Transport>::finish(call& c) {
  // The control memory first (the first collective maps it, on every
  // rank alike, whatever the call): what is offered depends on it.
  if (size() > 1 && detail::maps_in_calls(*t_)) open_shared_state();
  std::optional<algorithm> settled;  // the row, where finding it needs no messages
  if (compares_calls()) {
    if (c.problem.empty()) settled = resolve<C>(c, false);
    {
      auto l = traced_view();
      detail::compare_calls(l, c, std::string(to_string(C)), settled);
    }
  }
  if (!c.problem.empty()) throw error(std::string(to_string(C)), rank(), c.problem);
  c.algo = *resolve<C>(c, true);
  // The ranks agreed on what they asked for only: the row that resolving
  // it needed messages for (a measurement, the model or tuning table
  // loaded) is compared too, once per such call.
  if (compares_calls() && !settled) {
    auto l = traced_view();
    detail::compare_calls(l, c, std::string(to_string(C)), c.algo);
  }
}
// The row call c runs: its algorithm where offered there, else what
// automatic picks. Nothing when finding it needs messages and `talk` is
// false: the first call that loads the cost model or the tuning table,
// or measures a size bin. (The control memory is mapped before.)
template <transport Transport>
template <collective C>
std::optional<algorithm> communicator<Transport>::resolve(const call& c, bool talk) {
  std::optional<algorithm> a = c.algo;
  if (*a == algorithm::automatic) a = c.symmetric ? chooser_.template pick_direct<C>(*this, c.bytes, talk) : chooser_.template pick<C>(*this, c.bytes, talk);
  if (a && !c.symmetric) a = private_row<C>(c.bytes, *a, talk);  // an empty call, above
  return a;
}
// Algorithm a where it runs on private memory (private scratch, an
// empty call): a row not offered there gives way to the usual choice.
template <transport Transport>
template <collective C>
std::optional<algorithm> communicator<Transport>::private_row(std::size_t bytes, algorithm a, bool talk) {
  return detail::offers(C, a, placement_of(bytes, false)) ? a : chooser_.template pick<C>(*this, bytes, talk);
}

// Runs algorithm a's row of collective C on the arguments: over the
// transport, or, for a call on symmetric memory (`sym`) and a row that
// can, by direct reads through a symmetric_window.
template <transport Transport>
template <collective C, bool OverMessages, class... A>
void communicator<Transport>::run(const call& c, A&&... args) {
  run_at<C, OverMessages>(c.algo, c.symmetric ? &*c.symmetric : nullptr, c.symmetric_in ? &*c.symmetric_in : nullptr, c.symmetric_bytes, call_word<C>(c, c.algo), c.private_in, args...);
}
template <transport Transport>
template <collective C, bool OverMessages, class... A>
void communicator<Transport>::run_private(const call& c, algorithm a, A&&... args) {
  a = *private_row<C>(detail::first_span_bytes(args...), a, true);
  run_at<C, OverMessages>(a, nullptr, nullptr, 0, call_word<C>(c, a), {}, args...);
}
template <transport Transport>
template <collective C, bool OverMessages, class... A>
void communicator<Transport>::run_at(algorithm a, const detail::symmetric_heap::found* sym, const detail::symmetric_heap::found* sym_in,
                                      std::size_t sym_bytes, std::uint64_t call_word, std::span<const std::byte> private_in, A&&... args) {
  if (size() == 1 && C != collective::scatter && C != collective::gather) return;  // scatter/gather still copy
  if (!detail::algorithm_table::run<C>(a, [&](auto row) { run_row<OverMessages>(row, sym, sym_in, sym_bytes, call_word, private_in, args...); }))
    throw error(std::string(to_string(C)), rank(), detail::cat("the algorithm table has no row ", to_string(a)));
}
template <transport Transport>
template <bool OverMessages, class Row, class... A>
void communicator<Transport>::run_row(Row row, const detail::symmetric_heap::found* sym, const detail::symmetric_heap::found* sym_in,
             std::size_t sym_bytes, std::uint64_t call_word, std::span<const std::byte> private_in, A&... args) {
  using window = symmetric_window<decltype(memory())>;
  const char* name = to_string(Row::what).data();
  // Private memory too, for a row that stages small calls or streams
  // through staging (not while tracing: the trace shows messages, and
  // these move none).
  const std::size_t bytes = detail::first_span_bytes(args...);
  const bool staged = Row::direct && Row::stages && shared_.heap && !trace_ && direct::staged_call<window>(bytes);
  const bool streamed = Row::direct && !staged && streams_call(Row::streams, sym != nullptr);
  if (!private_in.empty() && !streamed)  // `out` was left unfilled for a stream that is not here
    throw error(name, rank(), detail::cat(Row::name, " was handed the input of a streamed call but does not stream it"));
  if constexpr (Row::direct && requires(window& w, const chunk_sizes& ch, A&... xs) { Row::run(w, ch, xs...); }) {
    detail::symmetric_heap::found staging{};
    if (streamed) staging = shared_.stream_staging(*t_, opt_.chunks.stream_bytes), sym = &staging, sym_bytes = shared_.stream_bytes(opt_.chunks.stream_bytes);  // (maps the control memory first if need be)
    if (sym != nullptr || staged) {
      if (sym == nullptr) sym_bytes = bytes;
      window w(*shared_.heap, name, sym, sym_in, sym_bytes, call_word, memory());
      if (streamed) w.stream(private_in);
      try {
        row.run(w, opt_.chunks, args...);
      } catch (const std::exception& e) {
        shared_.heap->fail(e.what());  // peers waiting on this rank raise at once
        throw;
      }
      return;
    }
  }
  // (flags, not a requires-expression: nvcc errs on one here)
  if constexpr (OverMessages && !Row::window_only) {
    auto l = traced_view();
    row.run(l, opt_.chunks, args...);
  } else throw error(name, rank(), detail::cat(Row::name, " runs only on symmetric memory"));
}

template <transport Transport>
algorithm communicator<Transport>::choose(collective c, std::size_t bytes, bool symmetric) {
  quiesce();
  if (size() > 1 && detail::maps_in_calls(*t_)) open_shared_state();  // what is offered depends on it
  auto by = [&]<collective C>() { return *(symmetric ? chooser_.template pick_direct<C>(*this, bytes, true) : chooser_.template pick<C>(*this, bytes, true)); };
  return detail::with_collective(c, by);
}

// The progress thread, made by the first asynchronous call.
template <transport Transport>
detail::progress_engine& communicator<Transport>::engine() {
  if (!engine_.engine) {
    if constexpr (thread_checking_transport<Transport>)
      t_->require_background_thread("asynchronous calls");
    engine_.engine = std::make_unique<detail::progress_engine>();
  }
  return *engine_.engine;
}

}  // namespace ringtree
