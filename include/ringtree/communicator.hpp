#pragma once
// communicator<Transport>: the front door. Each call checks its arguments,
// picks an algorithm (the caller's, or automatic's choice), runs it
// over the transport and finishes avg. Bad arguments raise ringtree::error
// before any message is sent, so the communicator stays usable.
//
// Checked mode (option `checked`, or RINGTREE_CHECK=1) first has the ranks
// compare what they were asked to do (call, count, type, op, root,
// algorithm, and whether their arguments were valid); a mismatch raises on
// every rank, naming the ranks that differ, instead of hanging or
// corrupting memory. It costs one small all-gather per call.
//
// algorithm::automatic measures the offered rows once per size bin and
// caches the choice, with the cost model (tuning/cost_model.hpp) where
// measuring is off or left to a run ahead (communicator/chooser.hpp). Its
// constants come from communicator_options::model, else from the model
// file or a calibration (tuning/calibration.hpp). RINGTREE_TRACE=FILE.json
// (a Chrome trace) or FILE.html (the interactive page) records every
// call's messages and reductions (trace/sink.hpp).
//
// The class holds the public calls; each concern lives in its own piece
// under communicator/: call.hpp (argument checks, checked mode),
// dispatch.hpp (which route a call takes to its row), chooser.hpp
// (automatic), staging.hpp (shared memory), p2p.hpp (point to point),
// collectives.hpp (the collectives' bodies), options.hpp (what it is
// opened with), settings.hpp (the settings every rank must share), open.hpp
// (opening: one communicator per transport, settings agreed, tracing),
// async.hpp and work.hpp (asynchronous calls and the progress engine).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <ringtree/algorithms/table.hpp>
#include <ringtree/communicator/async.hpp>
#include <ringtree/communicator/call.hpp>
#include <ringtree/communicator/chooser.hpp>
#include <ringtree/communicator/claim.hpp>
#include <ringtree/communicator/options.hpp>
#include <ringtree/communicator/p2p.hpp>
#include <ringtree/communicator/ranges.hpp>
#include <ringtree/communicator/staging.hpp>
#include <ringtree/core/config.hpp>
#include <ringtree/core/dtype.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/communicator/work.hpp>
#include <ringtree/memory/scratch_pool.hpp>
#include <ringtree/trace/sink.hpp>
#include <ringtree/trace/traced.hpp>

namespace ringtree {

template <transport Transport>
class communicator : public async_calls<communicator<Transport>, traced_transport<Transport>> {
 public:
  using transport_type = Transport;

  explicit communicator(Transport& t, communicator_options opt = {});
  // A communicator that owns its transport (what split returns).
  explicit communicator(std::unique_ptr<Transport> t, communicator_options opt = {});
  // One communicator per rank and transport: it owns scratch and tuning
  // state that a copy would share by accident. Move it instead.
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  communicator(communicator&&) noexcept = default;
  communicator& operator=(communicator&&) noexcept = default;
  // Queued asynchronous calls still run (peers wait for them), then the
  // progress thread ends, before anything else goes.
  ~communicator();

  int rank() const noexcept { return t_->rank(); }
  int size() const noexcept { return t_->size(); }
  Transport& transport() const noexcept { return *t_; }
  bool checked() const noexcept { return opt_.checked; }
  void set_checked(bool on) noexcept { opt_.checked = on; }
  // Gives up after an error (a timeout_error above all), where the transport
  // can: over MPI it ends the whole job now (MPI_Abort, like NCCL's
  // ncclCommAbort); over shared memory the transport refuses every later
  // call and the peers' waits on this rank raise at once. docs/errors.md
  // says what else is safe after a timeout on each transport.
  // (A template, so that an explicit instantiation of the class leaves it
  // out where the transport has no abort: clang 14 instantiates constrained
  // non-template members anyway.)
  template <class T = Transport>
    requires abortable_transport<T>
  void abort() { t_->abort(); }

  // A collective call, like the others (every rank calls it): the cost
  // model with its constants, which the first call loads from the cache
  // or measures (tuning/calibration.hpp). For teaching and for explaining choices.
  const ringtree::tuner& model() {
    quiesce();
    return chooser_.model(*this);
  }
  // A collective call (every rank calls it with the same arguments): the
  // algorithm automatic runs for collective `c` on `bytes` (the whole
  // buffer; one rank's block for scatter, gather, allgather). It measures
  // the offered algorithms the first time a size bin is asked about (see
  // README, "Which algorithm runs"), unless the choice is cached.
  // `symmetric`: for a call on symmetric memory (comm.allocate).
  algorithm choose(collective c, std::size_t bytes, bool symmetric = false);
  // Where a call of `bytes` runs, which decides what is offered
  // (detail::offers): on symmetric memory, or on private memory, which may
  // stream through shared staging (where the transport maps control memory
  // in calls, and not while tracing: the trace shows messages).
  placement placement_of(std::size_t bytes, bool symmetric = false) const noexcept {
    const bool staging = shared_.streams_private(*t_, trace_ != nullptr);
    const bool host = detail::memory_kind_of<Transport>() == memory_kind::host;  // device memory never stages
    return {size(), bytes, detail::memory_kind_of<Transport>(), symmetric, staging, hosts_, staging && host ? detail::stage_capacity : 0};
  }
  // (its name until this release)
  placement placed(std::size_t bytes, bool symmetric = false) const noexcept { return placement_of(bytes, symmetric); }

  // Measures every size bin of collective c up to `max_bytes` now (a
  // collective call), instead of on first use.
  void tune(collective c, std::size_t max_bytes = largest_measured_bytes) {
    for (int bin = 0; bin <= detail::measured_choices::bin_of(max_bytes); ++bin) (void)choose(c, std::size_t{1} << bin);
  }

  template <buffer_range In, writable_range Out> requires same_elements<In, Out>
  void allreduce(In&& in, Out&& out, op o = op::sum, algorithm a = algorithm::automatic) {
    allreduce_impl(const_view(in), view(out), o, a);
  }
  template <writable_range R>
  void allreduce(R&& inout, op o = op::sum, algorithm a = algorithm::automatic) {
    auto s = view(inout);
    allreduce(std::span<const typename decltype(s)::element_type>(s), s, o, a);
  }

  template <writable_range R>
  void broadcast(R&& data, int root, algorithm a = algorithm::automatic) {
    broadcast_impl(view(data), root, a);
  }

  // `out` must hold in.size() elements on the root; elsewhere it is unused.
  template <buffer_range In, writable_range Out> requires same_elements<In, Out>
  void reduce(In&& in, Out&& out, int root, op o = op::sum, algorithm a = algorithm::automatic) {
    reduce_impl(const_view(in), view(out), root, o, a);
  }

  // The root's `in` holds size() * out.size() elements; rank i receives block i.
  template <buffer_range In, writable_range Out> requires same_elements<In, Out>
  void scatter(In&& in, Out&& out, int root, algorithm a = algorithm::automatic) {
    scatter_impl(const_view(in), view(out), root, a);
  }

  // The root's `out` receives size() * in.size() elements, rank i's in block i.
  template <buffer_range In, writable_range Out> requires same_elements<In, Out>
  void gather(In&& in, Out&& out, int root, algorithm a = algorithm::automatic) {
    gather_impl(const_view(in), view(out), root, a);
  }

  // `in` holds size() * out.size() elements; rank i receives block i reduced.
  template <buffer_range In, writable_range Out> requires same_elements<In, Out>
  void reduce_scatter(In&& in, Out&& out, op o = op::sum, algorithm a = algorithm::automatic) {
    reduce_scatter_impl(const_view(in), view(out), o, a);
  }

  // `out` receives size() * in.size() elements, rank i's `in` in block i.
  // `in` may be out's block rank() (in place).
  template <buffer_range In, writable_range Out> requires same_elements<In, Out>
  void allgather(In&& in, Out&& out, algorithm a = algorithm::automatic) {
    allgather_impl(const_view(in), view(out), a);
  }
  void barrier();

  // Rank i's `in` holds size() blocks of out.size() / size() elements;
  // block j goes to rank j, and `out`'s block j comes from rank j.
  template <buffer_range In, writable_range Out> requires same_elements<In, Out>
  void alltoall(In&& in, Out&& out, algorithm a = algorithm::automatic) {
    alltoall_impl(const_view(in), {}, view(out), {}, a);
  }
  // Blocks of any size (MPI_Alltoallv): `sends[j]` elements of `in` go to
  // rank j, `recvs[j]` elements of `out` come from rank j, both in rank
  // order; rank j's sends[i] must be this rank's recvs[j].
  template <buffer_range In, writable_range Out> requires same_elements<In, Out>
  void alltoall(In&& in, std::span<const std::size_t> sends, Out&& out, std::span<const std::size_t> recvs,
                algorithm a = algorithm::automatic) {
    alltoall_impl(const_view(in), sends, view(out), recvs, a);
  }

  // Point to point: `data` to rank `peer`, which receives it with recv.
  // Messages between two ranks arrive in the order they were sent, in line
  // with the collectives (a split gives a stream of its own); a receive
  // takes the first one from its peer with its tag (as in MPI and gloo: a
  // message that comes before its receive waits, copied, for it). The
  // element type and count must match the receiver's, else the receive
  // raises, naming the sender and both; the send raises too where it
  // waits for its receiver (threads), and may have returned where the
  // transport buffers it (shared memory, MPI: like an eager MPI send, it
  // cannot learn what the receiver expects without a reply per message).
  // With asynchronous calls pending, a blocking one queues behind them and
  // is posted at once (not after them), so that "recv_async, then send"
  // on both ranks completes, as in MPI.
  template <buffer_range R>
  void send(R&& data, int peer, int tag = 0) {
    if (engine_.engine) return this->send_async(const_view(data), peer, tag).wait();
    detail::post_send(traced_view(), const_view(data), peer, tag)->complete();
  }
  // `peer` may be any_source (whichever rank's message with `tag` comes
  // first) on a communicator made with point_to_point_only; recv returns
  // the rank it came from.
  template <writable_range R>
  int recv(R&& data, int peer, int tag = 0) {
    check_source(peer);
    int from = peer;
    if (engine_.engine) this->recv_async(view(data), peer, tag, {}, &from).wait();
    else detail::poll_until(receives_->post(traced_view(), view(data), peer, tag, &from));
    return from;
  }

  // Runs f() on the progress thread, in order with the asynchronous calls,
  // with this communicator to itself: for work made of several calls (a
  // grad_sync bucket: copy in, all-reduce, copy out). `on_done`, if given,
  // is called with the outcome by whichever thread ran f, before wait()
  // returns. f must not wait on later calls of this communicator.
  work submit(std::function<void()> f, std::function<void(std::exception_ptr)> on_done = {}) {
    return engine().submit(std::move(f), std::move(on_done));
  }
  // Waits until every asynchronous call made so far has run.
  void quiesce() {
    if (engine_.engine) engine_.engine->drain();
  }

  // A collective call (every rank, the same count): a buffer of `count`
  // elements every rank can read and write where the transport can share
  // memory (threads; processes on one host; MPI ranks all on one host),
  // plain memory otherwise. Collectives on spans inside it run the direct
  // algorithms (algorithms/direct.hpp): peers read it instead of receiving
  // copies. Free it on every rank (over MPI, in the same order: windows
  // are freed collectively); nobody reads it once a call has returned.
  template <element E>
  symmetric_buffer<E> allocate(std::size_t count);

  // Sub-communicators, like MPI_Comm_split: every rank calls it; ranks with
  // the same color form a new communicator, ordered by key (then by rank
  // here), with channels of their own, so its messages never mix with this
  // one's. Pipeline stages and data-parallel replicas at once, for example.
  communicator<detail::split_transport_t<Transport>> split(int color, int key);

 private:
  friend class detail::chooser;
  friend class async_calls<communicator, traced_transport<Transport>>;
  using call = detail::collective_call;

  // The collectives on spans: what the range forms above call, and what
  // prebuilt.hpp declares compiled once (explicit instantiations).
  template <element E>
  void allreduce_impl(std::span<const E> in, std::span<E> out, op o, algorithm a);

  template <element E>
  void reduce_impl(std::span<const E> in, std::span<E> out, int root, op o, algorithm a);

  template <element E>
  void scatter_impl(std::span<const E> in, std::span<E> out, int root, algorithm a);

  template <element E>
  void gather_impl(std::span<const E> in, std::span<E> out, int root, algorithm a);

  template <element E>
  void reduce_scatter_impl(std::span<const E> in, std::span<E> out, op o, algorithm a);

  template <element E>
  void allgather_impl(std::span<const E> in, std::span<E> out, algorithm a);

  template <element E>
  void broadcast_impl(std::span<E> data, int root, algorithm a);

  template <element E>
  void alltoall_impl(std::span<const E> in, std::span<const std::size_t> sends, std::span<E> out,
                     std::span<const std::size_t> recvs, algorithm a);

  // The progress thread, made by the first asynchronous call.
  detail::progress_engine& engine();
  void check_source(int peer) const {
    if (peer == any_source && !opt_.point_to_point_only)
      throw error("recv", rank(), "a receive from any_source needs a communicator for point to point only "
                                  "(communicator_options::point_to_point_only; e.g. on comm.split(0, comm.rank())): "
                                  "elsewhere a peer's collective messages share the stream it looks at");
  }
  // The transport the rows run on: traced where RINGTREE_TRACE is set (and
  // automatic is not measuring), with scratch from this communicator's pool.
  traced_transport<Transport> traced_view() const {
    return traced_transport<Transport>(*t_, trace_ && !chooser_.measuring() ? trace_->rec.get() : nullptr, pool_.get());
  }
  // The same, never traced: measurements, calibration, set-up exchanges.
  traced_transport<Transport> untraced_view() const { return traced_transport<Transport>(*t_, nullptr, pool_.get()); }
  auto memory() const { return traced_view().memory(); }
  const chunk_sizes& chunks() const noexcept { return opt_.chunks; }

  // dispatch.hpp: a call from its arguments to its row.
  template <class E, class S = const E>
  call start(collective kind, std::size_t count, op o, int root, algorithm a, std::size_t elems, std::span<S> sym = {});
  template <collective C>
  void finish(call& c);
  template <collective C>
  std::optional<algorithm> resolve(const call& c, bool talk);
  template <collective C>
  std::optional<algorithm> private_row(std::size_t bytes, algorithm a, bool talk);
  template <collective C>
  algorithm private_row(const call& c) { return *private_row<C>(c.bytes, c.algo, true); }
  bool streams_call(bool row_streams, bool symmetric) const noexcept {
    return row_streams && !symmetric && shared_.streams_private(*t_, trace_ != nullptr);
  }
  template <collective C, class... A>
  void run(algorithm a, A&&... args) { run_at<C>(a, nullptr, nullptr, 0, 0, {}, args...); }
  template <collective C, bool OverMessages = true, class... A>
  void run(const call& c, A&&... args);
  // Call c's row a on private buffers (scratch, checked as c's): a row
  // offered only up to a size (staged) gives way where these are larger
  // (integer avg's remainders are 8-byte).
  template <collective C, bool OverMessages = true, class... A>
  void run_private(const call& c, algorithm a, A&&... args);
  // Checked mode compares every call across the ranks (one rank has none to compare with).
  bool compares_calls() const noexcept { return opt_.checked && size() > 1; }
  // A call of no elements with good arguments returns at once (MPI's do),
  // unless checked mode is to compare it across ranks.
  bool returns_at_once(const call& c, std::size_t elems) const noexcept {
    return elems == 0 && c.problem.empty() && !compares_calls();
  }
  // The usual such call (every buffer it reads on this rank empty,
  // automatic, a root in range, no asynchronous call queued: a synchronous
  // call waits for those first) returns before the call is even built:
  // MPI's take about 10 ns, building and checking one took 3-10 times
  // that. Any other empty call takes start()'s checks (and their errors).
  template <class... S>
  bool empty_call(algorithm a, int root, S... spans) const noexcept {
    return (spans.empty() && ...) && a == algorithm::automatic && root >= 0 && root < size() && !engine_.engine &&
           !opt_.point_to_point_only && !compares_calls();
  }
  // What the peers' lines and slots must match: collective, algorithm, op, root, type.
  template <collective C>
  static std::uint64_t call_word(const call& c, algorithm a) noexcept {
    return std::uint64_t(C) | std::uint64_t(a) << 8 | std::uint64_t(c.reduction) << 16 | std::uint64_t(std::uint32_t(c.root + 1)) << 24 |
           std::uint64_t(c.type) << 56;
  }
  // Only the window form: a direct call whose arguments the transport
  // forms do not take (reduce_scatter reads `in` where it is).
  template <collective C, class... A>
  void run_direct(const call& c, A&&... args) { run<C, false>(c, args...); }
  template <collective C, bool OverMessages = true, class... A>
  void run_at(algorithm a, const detail::symmetric_heap::found* sym, const detail::symmetric_heap::found* sym_in,
              std::size_t sym_bytes, std::uint64_t call_word, std::span<const std::byte> private_in, A&&... args);
  template <bool OverMessages, class Row, class... A>
  void run_row(Row row, const detail::symmetric_heap::found* sym, const detail::symmetric_heap::found* sym_in,
               std::size_t sym_bytes, std::uint64_t call_word, std::span<const std::byte> private_in, A&... args);
  // collectives.hpp: avg finished after a reduction.
  template <class E, class Reduction, class Kept>
  void reduce_and_average(std::span<E> data, op o, Reduction reduction, Kept kept);

  // open.hpp
  void open();
  void agree_on_settings();
  void open_shared_state() { shared_.open(*t_); }  // the control memory and staging (staging.hpp)

  // The progress thread (engine()). First of the members: moving a
  // communicator first waits for its queued calls, which hold its address.
  struct engine_slot {
    std::unique_ptr<detail::progress_engine> engine;
    engine_slot() = default;
    engine_slot(engine_slot&& o) noexcept : engine((o.drain(), std::move(o.engine))) {}
    engine_slot& operator=(engine_slot&& o) noexcept {
      drain();
      o.drain();
      engine = std::move(o.engine);
      return *this;
    }
    void drain() noexcept {
      if (engine) try {
          engine->drain();
        } catch (...) {  // a call's error stays with its work
        }
    }
  } engine_;
  detail::transport_claim claim_;     // this transport's one communicator (released last but the engine)
  std::unique_ptr<Transport> owned_;  // set for communicators made by split
  Transport* t_;
  communicator_options opt_;
  config cfg_;
  detail::chooser chooser_;  // automatic's state
  detail::shared_state<Transport> shared_;  // control memory, symmetric buffers, staging
  std::unique_ptr<detail::scratch_pool<memory_of<Transport>>> pool_;
  std::unique_ptr<detail::trace_handle> trace_;  // RINGTREE_TRACE
  int hosts_ = 1;  // the hosts the ranks span (detail::hosts_of): what placement_of() says
  // point to point: receives matched by tag (shared with the polls in flight)
  std::shared_ptr<detail::p2p_matcher<traced_transport<Transport>>> receives_ =
      std::make_shared<detail::p2p_matcher<traced_transport<Transport>>>();
};

}  // namespace ringtree

// The members' bodies (communicator-inl.hpp). With RINGTREE_PREBUILT a file
// sees the class alone: the communicators of the prebuilt transports come
// from the library (prebuilt.hpp), and a file that makes one over another
// transport includes <ringtree/communicator-inl.hpp> itself.
#if RINGTREE_DEFINES
#include <ringtree/communicator-inl.hpp>
#endif
