#pragma once
// communicator<Transport>: the front door. Each call checks its arguments,
// picks an algorithm (the caller's, or the tuner's for automatic), runs it
// over the transport and finishes avg. Bad arguments raise ringtree::error
// before any message is sent, so the communicator stays usable.
//
// Checked mode (option `checked`, or RINGTREE_CHECK=1) first has the ranks
// compare what they were asked to do (call, count, type, op, root,
// algorithm, and whether their arguments were valid); a mismatch raises on
// every rank, naming the ranks that differ, instead of hanging or
// corrupting memory. It costs one small all-gather per call.
//
// algorithm::automatic picks by the cost model (tuner.hpp). Its constants
// come from communicator_options::model, else from the cache file or a
// calibration (calibration.hpp), loaded collectively by the first call
// that has a choice to make. RINGTREE_TRACE=FILE.json records every call's
// messages and reductions as a Chrome trace (transport/traced.hpp).
#include <algorithm>
#include <bit>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <ringtree/algorithms/table.hpp>
#include <ringtree/calibration.hpp>
#include <ringtree/communicator/agreement.hpp>
#include <ringtree/communicator/claim.hpp>
#include <ringtree/core/config.hpp>
#include <ringtree/core/dtype.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/core/work.hpp>
#include <ringtree/transport/symmetric.hpp>
#include <ringtree/trace_sink.hpp>
#include <ringtree/transport/traced.hpp>
#include <ringtree/tuner.hpp>

namespace ringtree {

namespace detail {
// per_rank * n, or nothing where it overflows: a size checked against a
// product must not pass by wrapping around.
constexpr std::optional<std::size_t> product_of(std::size_t per_rank, int n) noexcept {
  std::size_t p = 0;
  if (__builtin_mul_overflow(per_rank, static_cast<std::size_t>(n), &p)) return std::nullopt;
  return p;
}
// "n * m = p" (or "overflows") for the messages of those checks.
inline std::string product_text(int n, std::size_t per_rank) {
  const auto p = product_of(per_rank, n);
  return p ? cat(n, " * ", per_rank, " = ", *p) : cat(n, " * ", per_rank, ", which overflows");
}

// RINGTREE_ALGO's algorithm ("" and "automatic": none); an unknown name
// is an error listing the names.
inline std::optional<algorithm> env_algorithm(const std::string& name) {
  if (name.empty() || name == "automatic") return std::nullopt;
  if (auto a = algorithm_from_string(name)) return a;
  throw error("RINGTREE_ALGO", -1, cat("unknown algorithm '", name, "' (one of: ", algorithm_names_list(), ")"));
}
}  // namespace detail

// Any contiguous range of elements (std::vector, std::array, std::span, a
// C array) a collective may take where a span is shown.
template <class R>
concept buffer_range = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
                       element<std::remove_cv_t<std::ranges::range_value_t<R>>>;
template <buffer_range R>
auto view(R&& r) noexcept {
  return std::span<std::remove_reference_t<std::ranges::range_reference_t<R>>>(std::ranges::data(r), std::ranges::size(r));
}
template <buffer_range R>
auto const_view(R&& r) noexcept {
  return std::span<const std::remove_cv_t<std::ranges::range_value_t<R>>>(std::ranges::data(r), std::ranges::size(r));
}
template <class R>
concept writable_range = buffer_range<R> && !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>;
// A range an asynchronous call may keep until it has run: a named object
// (an lvalue) or a view (std::span), never a temporary.
template <class R>
concept lasting_range = std::is_lvalue_reference_v<R> || std::ranges::borrowed_range<R>;
template <class A, class B>
concept same_elements = std::same_as<std::remove_cv_t<std::ranges::range_value_t<A>>, std::remove_cv_t<std::ranges::range_value_t<B>>>;

struct communicator_options {
  bool checked = false;            // or RINGTREE_CHECK=1
  std::optional<algorithm> algo{}; // replaces automatic where offered (as RINGTREE_ALGO does; this wins)
  chunk_sizes chunks{};            // pipeline chunk sizes
  std::optional<cost_model> model{}; // set: automatic chooses by this model instead of measuring
};

template <transport Transport>
class communicator {
 public:
  explicit communicator(Transport& t, communicator_options opt = {}) : t_(&t), opt_(std::move(opt)) { open(); }
  // A communicator that owns its transport (what split returns).
  explicit communicator(std::unique_ptr<Transport> t, communicator_options opt = {})
      : owned_(std::move(t)), t_(owned_.get()), opt_(std::move(opt)) {
    open();
  }
  // One communicator per rank and transport: it owns scratch and tuning
  // state that a copy would share by accident. Move it instead.
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  communicator(communicator&&) noexcept = default;
  communicator& operator=(communicator&&) noexcept = default;
  // Queued asynchronous calls still run (peers wait for them), then the
  // progress thread ends, before anything else goes.
  ~communicator() { engine_.e.reset(); }

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
    requires requires(T& t) { t.abort(); }
  void abort() { t_->abort(); }

  // A collective call, like the others (every rank calls it): the cost
  // model with its constants, which the first call loads from the cache
  // or measures (calibration.hpp). For teaching and for explaining choices.
  const ringtree::tuner& model() {
    quiesce();
    if (!tuner_) {
      auto l = lane(false);
      host_shape hosts;
      if constexpr (hierarchical_transport<Transport>) hosts = host_shape::of(t_->layout());
      tuner_.emplace(size(), opt_.model ? *opt_.model : detail::load_or_calibrate(l), opt_.chunks, detail::memory_kind_of<Transport>(),
                     hosts);
    }
    return *tuner_;
  }
  // A collective call (every rank calls it with the same arguments): the
  // algorithm automatic runs for collective `c` on `bytes` (the whole
  // buffer; one rank's block for scatter, gather, allgather). It measures
  // the offered algorithms the first time a size bin is asked about (see
  // README, "Choosing algorithms"), unless the choice is cached.
  // `symmetric`: for a call on symmetric memory (comm.allocate).
  algorithm choose(collective c, std::size_t bytes, bool symmetric = false) {
    quiesce();
    if (size() > 1 && detail::maps_in_calls(*t_)) open_heap();  // what is offered depends on it
    auto by = [&]<collective C>() { return *(symmetric ? pick_direct<C>(bytes, true) : pick<C>(bytes, true)); };
    switch (c) {  // every collective, no default
      case collective::allreduce: return by.template operator()<collective::allreduce>();
      case collective::broadcast: return by.template operator()<collective::broadcast>();
      case collective::reduce: return by.template operator()<collective::reduce>();
      case collective::scatter: return by.template operator()<collective::scatter>();
      case collective::gather: return by.template operator()<collective::gather>();
      case collective::reduce_scatter: return by.template operator()<collective::reduce_scatter>();
      case collective::allgather: return by.template operator()<collective::allgather>();
      case collective::barrier: return by.template operator()<collective::barrier>();
      case collective::alltoall: return by.template operator()<collective::alltoall>();
    }
    throw error("choose", rank(), "no such collective");
  }
  // Where a call of `bytes` runs, which decides what is offered
  // (detail::offers): on symmetric memory, or on private memory, which may
  // stream through shared staging (where the transport maps control memory
  // in calls, and not while tracing: the trace shows messages).
  placement placed(std::size_t bytes, bool symmetric = false) const noexcept {
    return {size(), bytes, detail::memory_kind_of<Transport>(), symmetric, streams_private(), hosts_};
  }

  // Measures every size bin of collective c up to `max_bytes` now (a
  // collective call), instead of on first use.
  void tune(collective c, std::size_t max_bytes = std::size_t{1} << detail::tuning_table::max_bin) {
    for (int bin = 0; bin <= detail::tuning_table::bin_of(max_bytes); ++bin) (void)choose(c, std::size_t{1} << bin);
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
  void barrier() {
    call c = start<std::uint8_t>(collective::barrier, 0, op::sum, -1, algorithm::automatic, 0);
    finish<collective::barrier>(c);
    run<collective::barrier>(c.algo);
  }

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
  // with the collectives (a split gives a stream of its own). The tag and
  // the element count must match the receiver's, else both raise.
  // With asynchronous calls pending, a blocking one queues behind them and
  // is posted at once (not after them), so that "recv_async, then send"
  // on both ranks completes, as in MPI.
  template <buffer_range R>
  void send(R&& data, int peer, int tag = 0) {
    if (engine_.e) return send_async(const_view(data), peer, tag).wait();
    post_send(const_view(data), peer, tag)->complete();
  }
  template <writable_range R>
  void recv(R&& data, int peer, int tag = 0) {
    if (engine_.e) return recv_async(view(data), peer, tag).wait();
    post_recv(view(data), peer, tag)->complete();
  }

  // Asynchronous forms: each returns a ringtree::work at once; the call
  // runs on this communicator's progress thread, after every call made
  // before it (core/work.hpp). Buffers must live, untouched, until
  // work.wait() returns; a synchronous call waits for the queue first.
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work allreduce_async(In&& in, Out&& out, op o = op::sum, algorithm a = algorithm::automatic) {
    return submit([this, i = const_view(in), x = view(out), o, a] { allreduce_impl(i, x, o, a); });
  }
  template <writable_range R> requires lasting_range<R>
  work allreduce_async(R&& inout, op o = op::sum, algorithm a = algorithm::automatic) {
    return submit([this, x = view(inout), o, a] { allreduce_impl(std::span<const typename decltype(x)::element_type>(x), x, o, a); });
  }
  template <writable_range R> requires lasting_range<R>
  work broadcast_async(R&& data, int root, algorithm a = algorithm::automatic) {
    return submit([this, x = view(data), root, a] { broadcast_impl(x, root, a); });
  }
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work reduce_async(In&& in, Out&& out, int root, op o = op::sum, algorithm a = algorithm::automatic) {
    return submit([this, i = const_view(in), x = view(out), root, o, a] { reduce_impl(i, x, root, o, a); });
  }
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work scatter_async(In&& in, Out&& out, int root, algorithm a = algorithm::automatic) {
    return submit([this, i = const_view(in), x = view(out), root, a] { scatter_impl(i, x, root, a); });
  }
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work gather_async(In&& in, Out&& out, int root, algorithm a = algorithm::automatic) {
    return submit([this, i = const_view(in), x = view(out), root, a] { gather_impl(i, x, root, a); });
  }
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work reduce_scatter_async(In&& in, Out&& out, op o = op::sum, algorithm a = algorithm::automatic) {
    return submit([this, i = const_view(in), x = view(out), o, a] { reduce_scatter_impl(i, x, o, a); });
  }
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work allgather_async(In&& in, Out&& out, algorithm a = algorithm::automatic) {
    return submit([this, i = const_view(in), x = view(out), a] { allgather_impl(i, x, a); });
  }
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work alltoall_async(In&& in, Out&& out, algorithm a = algorithm::automatic) {
    return submit([this, i = const_view(in), x = view(out), a] { alltoall_impl(i, {}, x, {}, a); });
  }
  // (the counts are copied: only the buffers must last)
  template <buffer_range In, writable_range Out> requires same_elements<In, Out> && lasting_range<In> && lasting_range<Out>
  work alltoall_async(In&& in, std::span<const std::size_t> sends, Out&& out, std::span<const std::size_t> recvs,
                      algorithm a = algorithm::automatic) {
    return submit([this, i = const_view(in), x = view(out), s = std::vector<std::size_t>(sends.begin(), sends.end()),
                   r = std::vector<std::size_t>(recvs.begin(), recvs.end()), a] {
      alltoall_impl(i, std::span<const std::size_t>(s), x, std::span<const std::size_t>(r), a);
    });
  }
  work barrier_async() {
    return submit([this] { barrier(); });
  }
  // Point to point is posted once the calls made before it have started,
  // then completes in the background while later calls run (work.hpp).
  // `on_done` as for submit.
  template <buffer_range R> requires lasting_range<R>
  work send_async(R&& data, int peer, int tag = 0, std::function<void(std::exception_ptr)> on_done = {}) {
    return engine().submit_p2p([this, d = const_view(data), peer, tag] { return polled(post_send(d, peer, tag)); },
                               std::move(on_done));
  }
  template <writable_range R> requires lasting_range<R>
  work recv_async(R&& data, int peer, int tag = 0, std::function<void(std::exception_ptr)> on_done = {}) {
    return engine().submit_p2p([this, d = view(data), peer, tag] { return polled(post_recv(d, peer, tag)); },
                               std::move(on_done));
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
    if (engine_.e) engine_.e->drain();
  }

  // A collective call (every rank, the same count): a buffer of `count`
  // elements every rank can read and write where the transport can share
  // memory (threads; processes on one host; MPI ranks all on one host),
  // plain memory otherwise. Collectives on spans inside it run the direct
  // algorithms (algorithms/direct.hpp): peers read it instead of receiving
  // copies. Free it on every rank (over MPI, in the same order: windows
  // are freed collectively); nobody reads it once a call has returned.
  template <element E>
  symmetric_buffer<E> allocate(std::size_t count) {
    quiesce();
    std::size_t bytes = 0;
    if (__builtin_mul_overflow(count, sizeof(E), &bytes))
      throw error("allocate", rank(), detail::cat(count, " elements of ", to_string(dtype_of<E>), " are more bytes than memory can hold"));
    if (size() > 1) {  // the same count everywhere, or nothing is allocated
      std::vector<std::uint64_t> counts(size());
      counts[rank()] = count;
      auto l = lane(false);
      ring::allgather(l, std::span<std::uint64_t>(counts));
      std::string differ;
      for (int r = 0; r < size(); ++r)
        if (counts[r] != counts[0]) differ += detail::cat(differ.empty() ? "" : ", ", "rank ", r, ": ", counts[r]);
      if (!differ.empty())
        throw error("allocate", rank(), detail::cat("every rank must allocate the same count; rank 0 asked for ", counts[0],
                                                    ", but ", differ));
    }
    std::shared_ptr<detail::symmetric_region> r;
    if constexpr (shared_memory_transport<Transport>) {
      open_heap();
      if (heap_)
        if (auto m = t_->map_shared(bytes)) r = heap_->add(std::move(*m));
    }
    if (!r) {  // plain memory: ranks that cannot share memory
      r = std::make_shared<detail::symmetric_region>();
      auto mem = std::shared_ptr<std::byte[]>(new std::byte[std::max<std::size_t>(bytes, 1)]());
      r->rank = rank();
      r->map.bases.assign(size(), nullptr);
      r->map.bases[rank()] = mem.get();
      r->map.bytes = bytes;
      r->map.keep = mem;
    }
    return symmetric_buffer<E>(std::move(r), count);
  }

  // Sub-communicators, like MPI_Comm_split: every rank calls it; ranks with
  // the same color form a new communicator, ordered by key (then by rank
  // here), with channels of their own, so its messages never mix with this
  // one's. Pipeline stages and data-parallel replicas at once, for example.
  auto split(int color, int key) {
    quiesce();
    if (color < 0) throw error("split", rank(), detail::cat("color must be >= 0, got ", color));
    const int n = size();
    std::vector<std::int64_t> all(2 * n);
    const std::int64_t mine[2] = {color, key};
    allgather(mine, all);
    std::vector<int> members;
    for (int r = 0; r < n; ++r)
      if (all[2 * r] == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
    const int index = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    auto part = t_->split(color, key, std::span<const int>(members), index);
    using sub_transport = typename decltype(part)::element_type;
    return communicator<sub_transport>(std::move(part), opt_);
  }

 private:
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

  // A point-to-point message: a header (tag, element type, count), then
  // the data. post_* posts both; the receiver checks the header before it
  // takes the data, so a mismatched pair raises on both ranks.
  struct p2p_header {
    std::int64_t tag;
    std::uint64_t type;
    std::uint64_t count;
  };
  // A posted message: poll() moves it along and says whether it is done
  // (the engine's), complete() waits for it (a blocking call's).
  struct p2p_posted {
    p2p_posted(traced_transport<Transport> lane, p2p_header header) : l(std::move(lane)), h(header) {}
    traced_transport<Transport> l;
    p2p_header h;
    typename traced_transport<Transport>::request head, body;
    std::function<void()> check_header;  // a receive's, once the header is in
    bool head_done = false;
    bool poll() {
      if (!head_done) {
        if (!detail::test(l, head)) return false;
        head_done = true;
        if (check_header) check_header();
      }
      return detail::test(l, body);
    }
    void complete() {
      l.wait(head);
      head_done = true;
      if (check_header) check_header();
      l.wait(body);
    }
  };
  // (requests are move-only, std::function copies: they live behind a shared_ptr)
  static std::function<bool()> polled(std::shared_ptr<p2p_posted> m) {
    return [m] { return m->poll(); };
  }
  template <element E>
  std::shared_ptr<p2p_posted> post_send(std::span<const E> data, int peer, int tag) {
    check_peer("send", peer);
    auto m = std::make_shared<p2p_posted>(lane(), p2p_header{tag, std::uint64_t(dtype_of<E>), data.size()});
    m->head = m->l.isend(peer, std::as_bytes(std::span<const p2p_header>(&m->h, 1)));
    m->body = m->l.isend(peer, std::as_bytes(data));
    return m;
  }
  template <element E>
  std::shared_ptr<p2p_posted> post_recv(std::span<E> data, int peer, int tag) {
    check_peer("recv", peer);
    auto m = std::make_shared<p2p_posted>(lane(), p2p_header{});
    m->head = m->l.irecv(peer, std::as_writable_bytes(std::span<p2p_header>(&m->h, 1)));
    m->body = m->l.irecv(peer, std::as_writable_bytes(data));
    m->check_header = [this, h = &m->h, tag, peer, count = data.size()] {
      if (h->tag != tag || h->type != std::uint64_t(dtype_of<E>) || h->count != count)
        throw error("recv", rank(), detail::cat("rank ", peer, " sent ", h->count, " elements of ", to_string(dtype(h->type)),
                                                " with tag ", h->tag, ", but this rank receives ", count, " elements of ",
                                                to_string(dtype_of<E>), " with tag ", tag));
    };
    return m;
  }
  void check_peer(const char* call, int peer) const {
    if (peer < 0 || peer >= size() || peer == rank())
      throw error(call, rank(), detail::cat("peer ", peer, " is not another rank of ", size()));
  }

  // The progress thread, made by the first asynchronous call.
  detail::progress_engine& engine() {
    if (!engine_.e) {
      if constexpr (requires { t_->require_background_thread(std::string()); })
        t_->require_background_thread("asynchronous calls");
      engine_.e = std::make_unique<detail::progress_engine>();
    }
    return *engine_.e;
  }

  // One collective call: what was asked, the algorithm picked, and the
  // first problem found with the arguments.
  struct call {
    collective what;
    std::size_t count;
    dtype type;
    op o;
    int root;
    algorithm algo;
    int rank;
    std::string problem;
    std::size_t bytes;  // what automatic is asked about
    std::optional<detail::symmetric_heap::found> at{};  // the call's span in symmetric memory, if it is there
    std::size_t at_bytes = 0;                           // and its length
    std::optional<detail::symmetric_heap::found> in_at{};  // an out-of-place all-reduce's symmetric input
    std::span<const std::byte> private_in{};  // or its private input, where the algorithm streams (not copied first)
    // All-to-all: the elements this rank sends and receives per rank, and
    // digests of them that add up alike over all ranks when every pair agrees.
    std::span<const std::size_t> sends{}, recvs{};
    std::uint64_t pairs_sent = 0, pairs_expected = 0;
    template <class... A>
    void require(bool ok, const A&... why) {
      if (!ok && problem.empty()) problem = detail::cat(why...);
    }
    // A span's size in bytes must fit in size_t (a span can claim more);
    // returns it (wrapped where it does not).
    template <class E>
    std::size_t require_fits(std::size_t elems) {
      std::size_t b = 0;
      require(!__builtin_mul_overflow(elems, sizeof(E), &b), elems, " elements of ", to_string(dtype_of<E>),
              " are more bytes than memory can hold");
      return b;
    }
    // The buffer `whole` (named so, `where` it is checked) holds n blocks
    // of `block` elements, and fits in memory: scatter, gather, reduce_scatter.
    template <class E>
    void require_blocks(const char* whole_name, std::size_t whole, const char* where, const char* block_name,
                        std::size_t block, int n) {
      require(detail::product_of(block, n) == whole, whole_name, ".size() = ", whole, where, " but size() * ", block_name,
              ".size() = ", detail::product_text(n, block));
      require_fits<E>(whole);
    }
  };
  // What checked mode compares, field by field: one table, so that the
  // words sent and the words explained cannot drift apart. The argument
  // check comes last; then, beyond the fields, an all-to-all's pairs.
  static std::string show_algorithm(std::uint64_t v) {
    if (v < requested_bit) return std::string(to_string(algorithm(v)));
    const auto a = algorithm(v - requested_bit);
    return a == algorithm::automatic ? std::string("automatic (not chosen yet)") : detail::cat(to_string(a), " (as asked)");
  }
  static constexpr std::uint64_t requested_bit = 0x100;  // a row not resolved before the comparison
  static constexpr std::size_t argument_field = 7;
  static constexpr detail::stated_field fields[] = {
      {"call", [](std::uint64_t v) { return std::string(to_string(collective(v))); }},
      {"count", detail::show_number},
      {"element type", [](std::uint64_t v) { return std::string(to_string(dtype(v))); }},
      {"op", [](std::uint64_t v) { return std::string(to_string(op(v))); }},
      {"root", [](std::uint64_t v) { return std::to_string(std::int64_t(v)); }},
      {"symmetric buffer", [](std::uint64_t v) { return v == 0 ? std::string("none (private memory)") : detail::cat("number ", v); }},
      {"algorithm", show_algorithm},
      {"argument check", detail::show_number},
  };
  // c's words, in the order of `fields`, then its pairs (all-to-all).
  static std::vector<std::uint64_t> words_of(const call& c, std::optional<algorithm> row) {
    return {std::uint64_t(c.what), std::uint64_t(c.count), std::uint64_t(c.type), std::uint64_t(c.o),
            std::uint64_t(std::int64_t(c.root)), c.at ? c.at->region->id : std::uint64_t{0},
            row ? std::uint64_t(*row) : requested_bit | std::uint64_t(c.algo), std::uint64_t(c.problem.empty() ? 0 : 1),
            c.pairs_sent, c.pairs_expected};
  }

  // The transport the algorithms run on: traced when RINGTREE_TRACE is set,
  // with scratch from this communicator's pool. Measurements (tuning,
  // calibration) are not traced.
  traced_transport<Transport> lane(bool traced = true) const {
    return traced_transport<Transport>(*t_, traced && trace_ && !measuring_ ? trace_->rec.get() : nullptr, pool_.get());
  }
  auto memory() const { return lane().memory(); }

  template <class A, class B>
  static bool overlap(std::span<A> a, std::span<B> b) noexcept {
    auto pa = reinterpret_cast<std::uintptr_t>(a.data()), pb = reinterpret_cast<std::uintptr_t>(b.data());
    return !a.empty() && !b.empty() && pa < pb + b.size_bytes() && pb < pa + a.size_bytes();
  }

  // `elems`: how many elements the call's size is, checked to fit in bytes.
  // `sym`: the span whose place decides whether the call runs on
  // symmetric memory (each collective names one that every rank passes).
  template <class E, class S = const E>
  call start(collective what, std::size_t count, op o, int root, algorithm a, std::size_t elems, std::span<S> sym = {}) {
    quiesce();  // after the asynchronous calls made before
    call c{what, count, dtype_of<E>, o, root, a, rank(), {}, 0};
    c.bytes = c.template require_fits<E>(elems);
    // (not an empty span: one at the end of a buffer is also at the start
    // of the next, and ranks could tell them apart differently)
    if (heap_ && !sym.empty())
      if ((c.at = heap_->find(sym.data(), sym.size_bytes()))) c.at_bytes = sym.size_bytes();
    const bool rooted = what == collective::broadcast || what == collective::reduce ||
                        what == collective::scatter || what == collective::gather;
    if (rooted) c.require(root >= 0 && root < size(), "root ", root, " is out of range for ", size(), " ranks");
    // An empty call may name a symmetric-only row: it moves nothing (finish picks a plain one).
    const bool symmetric = c.at.has_value() || sym.empty();
    if (a != algorithm::automatic && !detail::offers(what, a, placed(c.bytes, symmetric))) {
      const placement at = placed(c.bytes, symmetric);  // the message is built only when needed
      c.require(false, "algorithm ", to_string(a), " is not available for ", to_string(what), " of ", c.bytes, " bytes on ",
                size(), " ranks (available: ", detail::offered_names(what, &at), ")");
    }
    return c;
  }

  // Raise on bad arguments; in checked mode, first agree across ranks on
  // the call and the row that will run. Then resolve automatic (which may
  // measure: all ranks are here).
  template <collective C>
  void finish(call& c) {
    // The control memory first (the first collective maps it, on every
    // rank alike, whatever the call): what is offered depends on it.
    if (size() > 1 && detail::maps_in_calls(*t_)) open_heap();
    std::optional<algorithm> settled;  // the row, where finding it needs no messages
    if (opt_.checked && size() > 1) {
      if (c.problem.empty()) settled = resolve<C>(c, false);
      compare(c, std::string(to_string(C)), settled);
    }
    if (!c.problem.empty()) throw error(std::string(to_string(C)), rank(), c.problem);
    c.algo = *resolve<C>(c, true);
    // The ranks agreed on what they asked for only: the row that resolving
    // it needed messages for (a measurement, the model or tuning table
    // loaded) is compared too, once per such call.
    if (opt_.checked && size() > 1 && !settled) compare(c, std::string(to_string(C)), c.algo);
  }
  // The row call c runs: its algorithm where offered there, else what
  // automatic picks. Nothing when finding it needs messages and `talk` is
  // false: the first call that loads the cost model or the tuning table,
  // or measures a size bin. (The control memory is mapped before.)
  template <collective C>
  std::optional<algorithm> resolve(const call& c, bool talk) {
    std::optional<algorithm> a = c.algo;
    if (*a == algorithm::automatic) a = c.at ? pick_direct<C>(c.bytes, talk) : pick<C>(c.bytes, talk);
    if (a && !c.at) a = plain<C>(c.bytes, *a, talk);  // an empty call, above
    return a;
  }
  // Algorithm a where it runs on private memory (private scratch, an
  // empty call): a row not offered there gives way to the usual choice.
  template <collective C>
  std::optional<algorithm> plain(std::size_t bytes, algorithm a, bool talk) {
    return detail::offers(C, a, placed(bytes, false)) ? a : pick<C>(bytes, talk);
  }
  template <collective C>
  algorithm plain(const call& c) {
    return *plain<C>(c.bytes, c.algo, true);
  }
  // placed()'s staging rule
  // (MPI ranks on several hosts map nothing: known from the first call on)
  bool streams_private() const noexcept {
    return size() > 1 && detail::maps_in_calls(*t_) && !trace_ && (heap_ || !heap_tried_);
  }
  // Whether a call of a row that `streams` (and does not stage this call)
  // streams through staging: on private memory, where placed() offers it.
  // run_row streams exactly then, and allreduce_impl leaves `in` for it.
  bool streams_call(bool row_streams, bool symmetric) const noexcept {
    return row_streams && !symmetric && streams_private();
  }

  // What automatic runs for C on `bytes` of symmetric memory: a direct row
  // (the user's RINGTREE_ALGO or option first, where offered there).
  // All-reduce: one-shot reads n-1 whole buffers with two synchronisations,
  // two-shot 2(n-1)/n of one with three; one-shot wins while the buffers
  // are small (bench/RESULTS.md, "Symmetric buffers").
  static constexpr std::size_t one_shot_direct_bytes = std::size_t{512} << 10;  // read from all peers together
  template <collective C>
  std::optional<algorithm> pick_direct(std::size_t bytes, bool talk) {
    const placement at = placed(bytes, true);
    if (opt_.algo && detail::offers(C, *opt_.algo, at)) return *opt_.algo;
    if (env_algo_ && detail::offers(C, *env_algo_, at)) return *env_algo_;
    if constexpr (C == collective::allreduce) {
      return bytes * static_cast<std::size_t>(size() - 1) <= one_shot_direct_bytes ? algorithm::one_shot : algorithm::two_shot;
    } else {  // (else: nvcc warns of an unreachable loop)
      for (const auto& r : detail::rows)
        if (r.what == C && r.direct && r.offered(at)) return r.id;
      return pick<C>(bytes, talk);  // no direct row: the usual choice
    }
  }

  // What automatic runs for C on `bytes` (see choose), as resolve says.
  template <collective C>
  std::optional<algorithm> pick(std::size_t bytes, bool talk) {
    auto& memo = last_pick_[static_cast<std::size_t>(C)];  // calls repeat their sizes: answer those at once
    if (memo.first == bytes && memo.second != algorithm::automatic) return memo.second;
    const auto a = pick_anew<C>(bytes, talk);
    if (a) memo = {bytes, *a};
    return a;
  }
  template <collective C>
  std::optional<algorithm> pick_anew(std::size_t bytes, bool talk) {
    const placement at = placed(bytes, false);
    if (opt_.algo && detail::offers(C, *opt_.algo, at)) return *opt_.algo;
    if (env_algo_ && detail::offers(C, *env_algo_, at)) return *env_algo_;
    int offered = 0;
    algorithm first = algorithm::automatic;
    for (const auto& r : detail::rows)
      if (r.what == C && r.offered(at) && offered++ == 0) first = r.id;
    if (offered <= 1 || size() == 1 || bytes == 0) return first;
    if (opt_.model || cfg_.tune == config::tuning::model) return by_model(C, bytes, talk);
    return tuned<C>(bytes, at, talk);
  }
  // The cost model's choice (loading the model needs messages).
  std::optional<algorithm> by_model(collective c, std::size_t bytes, bool talk) {
    if (!tuner_ && !talk) return std::nullopt;
    return model().choose(c, bytes);
  }

  // Checked mode's exchange: every rank's words for call c (and the row it
  // will run, where known), compared; a difference raises on every rank.
  void compare(const call& c, const std::string& name, std::optional<algorithm> row) {
    const auto mine = words_of(c, row);
    const std::size_t w = mine.size();
    auto l = lane();
    const auto all = detail::gather_words(l, std::span<const std::uint64_t>(mine));
    std::string invalid;
    for (int r = 0; r < size(); ++r)
      if (all[w * r + argument_field] != 0) invalid += (invalid.empty() ? "" : ", ") + std::to_string(r);
    if (!invalid.empty()) {
      if (!c.problem.empty()) throw error(name, rank(), c.problem + " (checked mode: ranks " + invalid + " raise)");
      throw error(name, rank(), "checked mode: ranks " + invalid + " passed invalid arguments to this call");
    }
    if (auto d = detail::first_difference(all, size(), std::span(fields, argument_field), w); !d.empty())
      throw error(name, rank(), "checked mode: " + d);
    // All-to-all: what each rank sends each other must be what that one
    // expects; two digests say whether all pairs match (words_of).
    std::uint64_t sent = 0, expected = 0;
    for (int r = 0; r < size(); ++r) sent += all[w * r + argument_field + 1], expected += all[w * r + argument_field + 2];
    if (sent != expected) throw error(name, rank(), "checked mode: " + unpaired(c));
  }
  // Which pair of an all-to-all disagrees (every rank calls it: the digests
  // differed on all): each rank's sends and receives, gathered.
  std::string unpaired(const call& c) {
    const int n = size();
    std::vector<std::uint64_t> mine(c.sends.begin(), c.sends.end());
    mine.insert(mine.end(), c.recvs.begin(), c.recvs.end());
    auto l = lane();
    const auto all = detail::gather_words(l, std::span<const std::uint64_t>(mine));
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (const auto sent = all[2 * n * i + j], expected = all[2 * n * j + n + i]; sent != expected)
          return detail::cat("rank ", i, " sends rank ", j, " ", sent, " elements but rank ", j, " receives ", expected,
                             " from it (all-to-all: sends[j] on rank i must be recvs[i] on rank j)");
    return "the all-to-all's sizes do not pair up";
  }

  // Runs algorithm a's row of collective C on the arguments: over the
  // transport, or, for a call on symmetric memory (`at`) and a row that
  // can, by direct reads through a symmetric_window.
  template <collective C, class... A>
  void run(algorithm a, A&&... args) {
    run_at<C>(a, nullptr, nullptr, 0, 0, {}, args...);
  }
  // Only the window form: a direct call whose arguments the transport
  // forms do not take (reduce_scatter reads `in` where it is).
  template <collective C, class... A>
  void run_direct(const call& c, A&&... args) {
    run<C, false>(c, args...);
  }
  template <collective C, bool Lane = true, class... A>
  void run(const call& c, A&&... args) {
    // what the peers' lines must match: collective, algorithm, op, root, type
    const std::uint64_t what = std::uint64_t(C) | std::uint64_t(c.algo) << 8 | std::uint64_t(c.o) << 16 |
                               std::uint64_t(std::uint32_t(c.root + 1)) << 24 | std::uint64_t(c.type) << 56;
    run_at<C, Lane>(c.algo, c.at ? &*c.at : nullptr, c.in_at ? &*c.in_at : nullptr, c.at_bytes, what, c.private_in, args...);
  }
  template <collective C, bool Lane = true, class... A>
  void run_at(algorithm a, const detail::symmetric_heap::found* at, const detail::symmetric_heap::found* in_at,
              std::size_t at_bytes, std::uint64_t what, std::span<const std::byte> private_in, A&&... args) {
    if (size() == 1 && C != collective::scatter && C != collective::gather) return;  // scatter/gather still copy
    if (!detail::algorithm_table::run<C>(a, [&](auto row) { run_row<Lane>(row, at, in_at, at_bytes, what, private_in, args...); }))
      throw error(std::string(to_string(C)), rank(), detail::cat("the algorithm table has no row ", to_string(a)));
  }
  template <class X, class... A>
  static std::size_t first_span_bytes(const X& x, const A&...) noexcept {
    if constexpr (requires { x.size_bytes(); }) return x.size_bytes();
    else return 0;
  }
  static std::size_t first_span_bytes() noexcept { return 0; }
  template <bool Lane, class Row, class... A>
  void run_row(Row row, const detail::symmetric_heap::found* at, const detail::symmetric_heap::found* in_at,
               std::size_t at_bytes, std::uint64_t what, std::span<const std::byte> private_in, A&... args) {
    using window = symmetric_window<decltype(memory())>;
    const char* name = to_string(Row::what).data();
    // Private memory too, for a row that stages small calls or streams
    // through staging (not while tracing: the trace shows messages, and
    // these move none).
    const std::size_t bytes = first_span_bytes(args...);
    const bool staged = Row::direct && Row::stages && heap_ && !trace_ && bytes <= window::stage_capacity;
    const bool streamed = Row::direct && !staged && streams_call(Row::streams, at != nullptr);
    if (!private_in.empty() && !streamed)  // `out` was left unfilled for a stream that is not here
      throw error(name, rank(), detail::cat(Row::name, " was handed the input of a streamed call but does not stream it"));
    if constexpr (Row::direct && requires(window& w, const chunk_sizes& ch, A&... xs) { Row::run(w, ch, xs...); }) {
      detail::symmetric_heap::found staging{};
      if (streamed) staging = stream_staging(), at = &staging, at_bytes = stream_bytes();  // (maps the control memory first if need be)
      if (at != nullptr || staged) {
        if (at == nullptr) at_bytes = bytes;
        window w(*heap_, name, at, in_at, at_bytes, what, memory());
        if (streamed) w.stream(private_in);
        try {
          row.run(w, opt_.chunks, args...);
        } catch (const std::exception& e) {
          heap_->fail(e.what());  // peers waiting on this rank raise at once
          throw;
        }
        return;
      }
    }
    // (flags, not a requires-expression: nvcc errs on one here)
    if constexpr (Lane && !Row::window_only) {
      auto l = lane();
      row.run(l, opt_.chunks, args...);
    } else throw error(name, rank(), detail::cat(Row::name, " runs only on symmetric memory"));
  }


  // `reduction(span, op)` reduces in place (on any element type); then avg
  // is finished on the part `kept(span)` this rank keeps. Integer avg is
  // exact: the reduction runs as a sum on the quotients and again on the
  // remainders (avg_split in core/reduce.hpp), so no sum can wrap.
  template <class E, class Reduction, class Kept>
  void reduce_and_average(std::span<E> data, op o, Reduction reduction, Kept kept) {
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

  // automatic by measurement: the choice of the bin `bytes` falls in, from
  // this process's table (loaded once from the cache, the same on every
  // rank), else measured now on every rank.
  template <collective C>
  std::optional<algorithm> tuned(std::size_t bytes, const placement& at, bool talk) {
    const int bin = detail::tuning_table::bin_of(bytes);
    if (!talk && (!tuning_ || tuning_->get(C, bin) == algorithm::automatic)) return std::nullopt;
    if (!tuning_) {
      tuning_ = std::make_unique<detail::tuning_table>();
      detail::load_tuning(lane(false), *tuning_, cfg_.tune == config::tuning::fresh);
    }
    algorithm a = tuning_->get(C, bin);
    if (a == algorithm::automatic) {
      a = measure<C>(bin);
      tuning_->set(C, bin, a);
      detail::save_tuning(lane(false), *tuning_);
    }
    return detail::offers(C, a, at) ? a : by_model(C, bytes, talk);
  }

  // Times every algorithm offered at bin's size on this transport, with
  // buffers of its own (never the caller's), and returns the fastest. The
  // same calls on every rank: the numbers of repetitions come from times
  // every rank agrees on (the slowest rank's, by an all-reduce of max).
  template <collective C>
  algorithm measure(int bin) {
    // The measurements are not the program's calls: RINGTREE_TRACE leaves them out.
    measuring_ = true;
    struct done {
      bool& flag;
      ~done() { flag = false; }
    } untraced{measuring_};
    constexpr collective c = C;
    const std::size_t bytes = std::size_t{1} << bin;
    const placement at = placed(bytes, false);
    const auto algos = detail::offered(c, &at);
    if (algos.size() < 2) return algos.empty() ? algorithm::automatic : algos.front();
    const int n = size();
    const std::size_t e = std::max<std::size_t>(1, bytes / sizeof(float));  // floats, as gradients are
    const std::size_t total = c == collective::reduce_scatter ? std::max<std::size_t>(e, n) : e;
    const std::size_t block = c == collective::reduce_scatter ? total / n : e;
    auto raw = t_->memory();
    const std::size_t whole = std::max<std::size_t>(e, n) / n * n;  // all-to-all: one rank's input, n equal blocks
    auto a = raw.template scratch<float>(std::max({total, block * n, whole})),
         b = raw.template scratch<float>(c == collective::alltoall ? whole : block);
    if constexpr (detail::memory_kind_of<Transport>() == memory_kind::host) {  // zeros: sums stay finite, no denormals
      std::memset(static_cast<void*>(a.span().data()), 0, a.span().size_bytes());
      std::memset(static_cast<void*>(b.span().data()), 0, b.span().size_bytes());
    }
    auto x = a.span(), y = b.span();
    auto once = [&](algorithm al) {
      // every collective, no fallback: a new one must say how it is measured
      if constexpr (C == collective::allreduce) run<C>(al, x.first(total), op::sum);
      else if constexpr (C == collective::broadcast) run<C>(al, x.first(total), 0);
      else if constexpr (C == collective::reduce) run<C>(al, x.first(total), op::sum, 0);
      else if constexpr (C == collective::scatter) run<C>(al, std::span<const float>(x.first(block * n)), y.first(block), 0);
      else if constexpr (C == collective::gather) run<C>(al, std::span<const float>(y.first(block)), x.first(block * n), 0);
      else if constexpr (C == collective::reduce_scatter) run<C>(al, x.first(block * n), op::sum);
      else if constexpr (C == collective::allgather) run<C>(al, x.first(block * n));
      else if constexpr (C == collective::barrier) run<C>(al);
      else if constexpr (C == collective::alltoall) {
        const std::vector<std::size_t> counts(n, whole / n);
        run<C>(al, std::span<const float>(x.first(whole)), std::span<const std::size_t>(counts), y.first(whole),
               std::span<const std::size_t>(counts));
      }
      else static_assert(C == collective::barrier, "how is this collective measured?");
    };
    auto slowest = [&](std::vector<double>& v) {
      auto l = lane(false);
      ring::allreduce(l, std::span<double>(v), op::max, opt_.chunks);
    };
    using clock = std::chrono::steady_clock;
    auto seconds = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
    const std::size_t k = algos.size();
    std::vector<double> warm(k);
    for (std::size_t i = 0; i < k; ++i) {  // the first call pays for connections and pages; the second is timed
      once(algos[i]);
      run<collective::barrier>(algorithm::dissemination);
      const auto t0 = clock::now();
      once(algos[i]);
      warm[i] = seconds(t0);
    }
    slowest(warm);
    // A sample is a batch of calls lasting about sample_s; rounds interleave
    // the algorithms so that a noisy moment hits all of them. Small sizes
    // get many rounds (their medians are what noise blurs most), large ones
    // at least 5, within about budget_s a bin.
    constexpr double sample_s = 1e-3, budget_s = 0.3;
    std::vector<int> batch(k);
    double round_s = 0;
    for (std::size_t i = 0; i < k; ++i) {
      batch[i] = static_cast<int>(std::clamp(sample_s / std::max(warm[i], 1e-9), 1.0, 1000.0));
      round_s += batch[i] * warm[i];
    }
    const int rounds = static_cast<int>(std::clamp(budget_s / std::max(round_s, 1e-9), 5.0, 25.0));
    std::vector<double> times(k * rounds);
    for (int r = 0; r < rounds; ++r)
      for (std::size_t i = 0; i < k; ++i) {
        // All ranks start a sample together; else a rank that left the last
        // one early times its wait for the others as this algorithm's cost
        // (with more ranks than cores, that wait is most of a sample).
        run<collective::barrier>(algorithm::dissemination);
        const auto t0 = clock::now();
        for (int j = 0; j < batch[i]; ++j) once(algos[i]);
        times[r * k + i] = seconds(t0) / batch[i];
      }
    slowest(times);  // a round of the collective takes as long as its slowest rank
    std::vector<double> median(k);
    for (std::size_t i = 0; i < k; ++i) {
      std::vector<double> mine;
      for (int r = 0; r < rounds; ++r) mine.push_back(times[r * k + i]);
      std::nth_element(mine.begin(), mine.begin() + rounds / 2, mine.end());
      median[i] = mine[rounds / 2];
    }
    // Medians within tie_ratio of the fastest are a tie as far as this
    // machine's noise can tell (5-10% between runs here); the cost model
    // (the same on every rank) breaks it, so that a tie goes to the
    // algorithm that scales (fewer steps, fewer bytes) rather than to noise.
    constexpr double tie_ratio = 1.05;
    const double fastest = *std::min_element(median.begin(), median.end());
    algorithm best = algorithm::automatic;
    double best_model = 0;
    for (std::size_t i = 0; i < k; ++i) {
      if (median[i] > fastest * tie_ratio) continue;
      const double m = model().seconds(C, algos[i], bytes);
      if (best == algorithm::automatic || m < best_model) best = algos[i], best_model = m;
    }
    return best;
  }

  void open();
  void agree_on_settings();
  // The shared control memory (epoch lines, staging slots) where the
  // transport has it: made by the first allocate, or, where the transport
  // allows (maps_in_calls), the first collective call (all ranks make it in
  // the same call).
  void open_heap() {
    if constexpr (shared_memory_transport<Transport>) {
      if (heap_tried_) return;
      heap_tried_ = true;
      if (auto control = detail::map_control(*t_, detail::control_bytes))
        heap_ = std::make_unique<detail::symmetric_heap>(rank(), size(), std::move(*control), detail::cores_of_all(*t_));
    }
  }

  // This rank's staging for private calls that stream through shared
  // memory, mapped by the first such call (on every rank: they choose alike).
  // Two segments of whole cache lines.
  std::size_t stream_bytes() const noexcept { return std::max<std::size_t>(128, opt_.chunks.stream_bytes / 128 * 128); }
  detail::symmetric_heap::found stream_staging() {
    if constexpr (shared_memory_transport<Transport>) {
      if (!stream_) {
        open_heap();  // (choose may measure before any call has)
        auto m = heap_ ? detail::map_control(*t_, stream_bytes()) : std::nullopt;
        if (!m) throw error("symmetric", rank(), "the transport mapped no staging memory");
        stream_ = heap_->add(std::move(*m));
      }
      return {stream_.get(), 0};
    } else {
      throw error("symmetric", rank(), "this transport has no shared staging memory");
    }
  }

  // The progress thread (engine()). First of the members: moving a
  // communicator first waits for its queued calls, which hold its address.
  struct engine_slot {
    std::unique_ptr<detail::progress_engine> e;
    engine_slot() = default;
    engine_slot(engine_slot&& o) noexcept : e((o.drain(), std::move(o.e))) {}
    engine_slot& operator=(engine_slot&& o) noexcept {
      drain();
      o.drain();
      e = std::move(o.e);
      return *this;
    }
    void drain() noexcept {
      if (e) try {
          e->drain();
        } catch (...) {  // a call's error stays with its work
        }
    }
  } engine_;
  detail::transport_claim claim_;     // this transport's one communicator (released last but the engine)
  std::unique_ptr<Transport> owned_;  // set for communicators made by split
  Transport* t_;
  communicator_options opt_;
  config cfg_;
  std::optional<algorithm> env_algo_;  // RINGTREE_ALGO
  std::unique_ptr<detail::scratch_pool<memory_of<Transport>>> pool_;
  std::unique_ptr<detail::trace_handle> trace_;  // RINGTREE_TRACE
  std::optional<ringtree::tuner> tuner_;
  std::unique_ptr<detail::tuning_table> tuning_;
  std::unique_ptr<detail::symmetric_heap> heap_;  // shared control memory and symmetric buffers (open_heap)
  std::shared_ptr<detail::symmetric_region> stream_;  // staging for private calls that stream (stream_staging)
  bool heap_tried_ = false;
  int hosts_ = 1;  // the hosts the ranks span (detail::hosts_of): what placed() says
  bool measuring_ = false;  // automatic is timing the algorithms (measure): nothing is traced
  std::array<std::pair<std::size_t, algorithm>, std::size(all_collectives)> last_pick_{};  // per collective: bytes, pick
};

// Defined outside the class, so not inline: with RINGTREE_PREBUILT the
// explicit instantiation declarations of prebuilt.hpp keep the compiler
// from instantiating them in every file (it would, for inlining, were they
// defined in the class).
template <transport Transport>
template <element E>
void communicator<Transport>::allreduce_impl(std::span<const E> in, std::span<E> out, op o, algorithm a) {
  call c = start<E>(collective::allreduce, in.size(), o, -1, a, in.size(), out);
  c.require(out.size() == in.size(), "out.size() = ", out.size(), " but in.size() = ", in.size());
  c.require(in.data() == out.data() || !overlap(in, out), "in and out overlap but are not the same buffer");
  finish<collective::allreduce>(c);
  if (out.empty()) return;
  // Out of place on symmetric memory: the direct rows read the peers'
  // inputs where they are, so `in` is not copied first.
  const bool exact_avg = std::integral<E> && o == op::avg;  // sums remainders too, in scratch: needs out filled
  if (c.at && in.data() != out.data() && size() > 1 && detail::find_row(collective::allreduce, c.algo)->direct && !exact_avg)
    c.in_at = heap_->find(in.data(), in.size_bytes());
  // On private memory, a row that streams copies `in` into staging itself.
  if (in.data() != out.data() && streams_call(detail::find_row(collective::allreduce, c.algo)->streams, c.at.has_value()) &&
      !exact_avg)
    c.private_in = std::as_bytes(in);
  if (!c.in_at && c.private_in.empty()) memory().copy(out, in);
  // (integer avg also sums remainders, in private scratch: not by a symmetric-only row)
  const algorithm for_scratch = plain<collective::allreduce>(c);
  reduce_and_average(out, o, [&](auto data, op ro) {
        if (static_cast<const void*>(data.data()) == out.data()) run<collective::allreduce>(c, data, ro);
        else run<collective::allreduce>(for_scratch, data, ro);
      }, [](auto data) { return data; });
}

template <transport Transport>
template <element E>
void communicator<Transport>::broadcast_impl(std::span<E> data, int root, algorithm a) {
  call c = start<E>(collective::broadcast, data.size(), op::sum, root, a, data.size(), data);
  finish<collective::broadcast>(c);
  if (data.empty()) return;
  run<collective::broadcast>(c, data, root);
}

template <transport Transport>
template <element E>
void communicator<Transport>::reduce_impl(std::span<const E> in, std::span<E> out, int root, op o, algorithm a) {
  call c = start<E>(collective::reduce, in.size(), o, root, a, in.size());
  if (rank() == root) {
    c.require(out.size() == in.size(), "out.size() = ", out.size(), " on the root but in.size() = ", in.size());
    c.require(in.data() == out.data() || !overlap(in, out), "in and out overlap but are not the same buffer");
  }
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
  reduce_and_average(data, o, [&](auto d, op ro) { run<collective::reduce>(c.algo, d, ro, root); },
                     [&](auto d) { return rank() == root ? d : d.first(0); });
}

template <transport Transport>
template <element E>
void communicator<Transport>::scatter_impl(std::span<const E> in, std::span<E> out, int root, algorithm a) {
  call c = start<E>(collective::scatter, out.size(), op::sum, root, a, out.size(), out);
  if (rank() == root) {
    c.template require_blocks<E>("in", in.size(), " on the root", "out", out.size(), size());
    c.require(!overlap(in, out), "in and out overlap");
  }
  finish<collective::scatter>(c);
  run<collective::scatter>(c, in, out, root);
}

template <transport Transport>
template <element E>
void communicator<Transport>::gather_impl(std::span<const E> in, std::span<E> out, int root, algorithm a) {
  call c = start<E>(collective::gather, in.size(), op::sum, root, a, in.size(), in);
  if (rank() == root) {
    c.template require_blocks<E>("out", out.size(), " on the root", "in", in.size(), size());
    c.require(!overlap(in, out), "in and out overlap");
  }
  finish<collective::gather>(c);
  run<collective::gather>(c, in, out, root);
}

template <transport Transport>
template <element E>
void communicator<Transport>::reduce_scatter_impl(std::span<const E> in, std::span<E> out, op o, algorithm a) {
  call c = start<E>(collective::reduce_scatter, out.size(), o, -1, a, in.size(), in);
  c.template require_blocks<E>("in", in.size(), "", "out", out.size(), size());
  c.require(!overlap(in, out), "in and out overlap");
  finish<collective::reduce_scatter>(c);
  if (out.empty()) return;
  auto mem = memory();
  const bool exact_avg = std::integral<E> && o == op::avg;  // split into sums on scratch (reduce_and_average)
  if (c.at && size() > 1 && detail::find_row(collective::reduce_scatter, c.algo)->direct && !exact_avg) {  // peers read `in` where it is
    run_direct<collective::reduce_scatter>(c, in, out, o);
    if (o == op::avg) mem.average(out, size());
    return;
  }
  c.algo = plain<collective::reduce_scatter>(c);
  auto work = mem.template scratch<E>(in.size());
  mem.copy(work.span(), in);
  auto mine = [&](auto d) { return detail::block_of(d, size(), rank()); };
  reduce_and_average(work.span(), o, [&](auto d, op ro) { run<collective::reduce_scatter>(c.algo, d, ro); }, mine);
  mem.copy(out, std::span<const E>(mine(work.span())));
}

template <transport Transport>
template <element E>
void communicator<Transport>::allgather_impl(std::span<const E> in, std::span<E> out, algorithm a) {
  call c = start<E>(collective::allgather, in.size(), op::sum, -1, a, in.size(), out);
  const bool sized = detail::product_of(in.size(), size()) == out.size();
  c.require(sized, "out.size() = ", out.size(), " but size() * in.size() = ", detail::product_text(size(), in.size()));
  c.template require_fits<E>(out.size());
  // Sliced only once the sizes are known to fit (a hardened standard
  // library aborts on an out-of-range subspan instead of raising).
  const std::size_t at = sized ? in.size() * static_cast<std::size_t>(rank()) : 0;
  // addresses as integers: a span that claims more than memory holds must not overflow a pointer here
  const bool in_place = reinterpret_cast<std::uintptr_t>(in.data()) ==
                        reinterpret_cast<std::uintptr_t>(out.data()) + at * sizeof(E);
  if (sized) c.require(in_place || !overlap(in, out), "in overlaps out but is not out's block ", rank());
  finish<collective::allgather>(c);
  memory().copy(out.subspan(at, in.size()), in);
  run<collective::allgather>(c, out);
}

template <transport Transport>
template <element E>
void communicator<Transport>::alltoall_impl(std::span<const E> in, std::span<const std::size_t> sends, std::span<E> out,
                                            std::span<const std::size_t> recvs, algorithm a) {
  const int n = size();
  const bool equal = sends.empty() && recvs.empty();
  // (count: checked mode compares the pairs instead; totals may differ by rank)
  call c = start<E>(collective::alltoall, 0, op::sum, -1, a, in.size());
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
  c.require(!overlap(in, out), "in and out overlap");
  if (c.problem.empty()) {
    c.sends = sends, c.recvs = recvs;
    for (int j = 0; j < n; ++j) c.pairs_sent += detail::pair_digest(rank(), j, sends[j]), c.pairs_expected += detail::pair_digest(j, rank(), recvs[j]);
  }
  finish<collective::alltoall>(c);
  if (n == 1) return memory().copy(out, in);
  run<collective::alltoall>(c.algo, in, sends, out, recvs);
}

template <transport Transport>
void communicator<Transport>::open() {
  claim_ = detail::transport_claim(&detail::innermost(*t_), detail::transport_name<Transport>(), rank());
  cfg_ = config::from_env();
  hosts_ = detail::hosts_of(*t_);
  opt_.checked = opt_.checked || cfg_.check;
  env_algo_ = detail::env_algorithm(cfg_.algo);
  pool_ = std::make_unique<detail::scratch_pool<memory_of<Transport>>>(t_->memory());
  if (auto* sink = detail::trace_sink::from_env()) {
    // new with braces: clang 14 has no parenthesised aggregate
    // initialisation, and a temporary handle would flush the file on its way out
    trace_.reset(new detail::trace_handle{sink->open(detail::next_communicator_id(), rank(), size(),
                                                     detail::transport_in_process<Transport>(),
                                                     detail::transport_name<Transport>()),
                                          sink});
  }
  if (size() > 1) agree_on_settings();
}

// Every rank opens the communicator with the settings that decide what
// runs, or none does: ranks that resolve one call to different rows (or
// that compare calls while others do not) would exchange wrong bytes.
// One exchange, here; calls pay nothing for it.
template <transport Transport>
void communicator<Transport>::agree_on_settings() {
  const auto& ch = opt_.chunks;
  constexpr std::uint64_t none = 0xff;
  auto algo = [](std::optional<algorithm> a) { return a ? std::uint64_t(*a) : none; };
  std::uint64_t model = 0;
  if (opt_.model)
    for (double v : {opt_.model->alpha, opt_.model->beta, opt_.model->gamma, opt_.model->knee, opt_.model->alpha_above,
                     opt_.model->alpha_net, opt_.model->beta_net})
      model = detail::mix(model ^ std::bit_cast<std::uint64_t>(v));
  const std::vector<std::uint64_t> mine = {
      opt_.checked ? 1u : 0u, algo(opt_.algo), algo(env_algo_), ch.ring_chunk_bytes, ch.tree_chunk_bytes,
      ch.chain_chunk_bytes, ch.direct_chunk_bytes, ch.stream_bytes, std::uint64_t(cfg_.tune), model, trace_ ? 1u : 0u};
  static constexpr auto show_algo = [](std::uint64_t v) {
    return v == none ? std::string("none") : std::string(to_string(algorithm(v)));
  };
  static constexpr auto show_on = [](std::uint64_t v) { return std::string(v ? "on" : "off"); };
  static constexpr detail::stated_field settings[] = {
      {"checked mode (communicator_options::checked, RINGTREE_CHECK)", show_on},
      {"communicator_options::algo", show_algo},
      {"RINGTREE_ALGO", show_algo},
      {"chunks.ring_chunk_bytes", detail::show_number},
      {"chunks.tree_chunk_bytes", detail::show_number},
      {"chunks.chain_chunk_bytes", detail::show_number},
      {"chunks.direct_chunk_bytes", detail::show_number},
      {"chunks.stream_bytes", detail::show_number},
      {"RINGTREE_TUNE", [](std::uint64_t v) { return std::string(v == 0 ? "1 (measure)" : v == 1 ? "0 (cost model)" : "fresh"); }},
      {"communicator_options::model", [](std::uint64_t v) { return v == 0 ? std::string("none") : detail::cat("constants #", v % 100000); }},
      {"tracing (RINGTREE_TRACE: traced calls move messages where others share memory)", show_on},
  };
  static_assert(std::size(settings) == 11);
  const auto all = detail::gather_words(detail::innermost(*t_), std::span<const std::uint64_t>(mine));
  if (auto d = detail::first_difference(all, size(), settings, mine.size()); !d.empty())
    throw error("communicator", rank(), detail::cat("the ranks opened it with different settings, so they could run different ",
                                                    "algorithms on one call: ", d, ". Give every rank the same options and RINGTREE_* variables"));
}

}  // namespace ringtree
