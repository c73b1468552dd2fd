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
#include <array>
#include <cstdlib>
#include <memory>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <ringtree/algorithms/barrier.hpp>
#include <ringtree/algorithms/rabenseifner.hpp>
#include <ringtree/algorithms/recursive_doubling.hpp>
#include <ringtree/algorithms/ring.hpp>
#include <ringtree/algorithms/scatter.hpp>
#include <ringtree/algorithms/scatter_allgather.hpp>
#include <ringtree/algorithms/tree.hpp>
#include <ringtree/calibration.hpp>
#include <ringtree/core/config.hpp>
#include <ringtree/core/dtype.hpp>
#include <ringtree/core/error.hpp>
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

// RINGTREE_ALGO=ring (or tree, ...): every call that offers it uses it,
// like NCCL_ALGO; other calls choose as usual.
inline std::optional<algorithm> env_algorithm() {
  const char* s = std::getenv("RINGTREE_ALGO");
  if (s == nullptr || *s == '\0') return std::nullopt;
  if (auto a = algorithm_from_string(s); a && *a != algorithm::automatic) return a;
  std::string names;
  for (std::size_t k = 1; k < std::size(algorithm_names); ++k) names += (k > 1 ? ", " : "") + std::string(algorithm_names[k]);
  throw error("RINGTREE_ALGO", -1, cat("unknown algorithm '", s, "' (one of: ", names, ")"));
}
}  // namespace detail

struct communicator_options {
  bool checked = detail::env_flag("RINGTREE_CHECK");
  std::optional<algorithm> forced = detail::env_algorithm();  // RINGTREE_ALGO
  detail::tuning tuning{};
  std::optional<cost_model> model{};  // unset: the cached (or else calibrated) constants
};

template <transport Transport>
class communicator {
 public:
  explicit communicator(Transport& t, communicator_options opt = {}) : t_(&t), opt_(std::move(opt)) { open_trace(); }
  // A communicator that owns its transport (what split returns).
  explicit communicator(std::unique_ptr<Transport> t, communicator_options opt = {})
      : owned_(std::move(t)), t_(owned_.get()), opt_(std::move(opt)) {
    open_trace();
  }

  int rank() const noexcept { return t_->rank(); }
  // Gives up after an error (a timeout_error above all), where the transport
  // can: over MPI it ends the whole job now (MPI_Abort, like NCCL's
  // ncclCommAbort); over shared memory the transport refuses every later
  // call and the peers' waits on this rank raise at once. docs/errors.md
  // says what else is safe after a timeout on each transport.
  void abort() requires requires(Transport& t) { t.abort(); } { t_->abort(); }
  int size() const noexcept { return t_->size(); }
  Transport& transport() const noexcept { return *t_; }
  bool checked() const noexcept { return opt_.checked; }
  void set_checked(bool on) noexcept { opt_.checked = on; }

  // The cost model in use, with its constants. The first call loads or
  // measures them on every rank: call it on all ranks, like a collective.
  const ringtree::tuner& model() {
    if (!tuner_) tuner_.emplace(size(), opt_.model ? *opt_.model : detail::load_or_calibrate(tt_), opt_.tuning);
    return *tuner_;
  }
  // The algorithm algorithm::automatic runs for collective `c` on `bytes`
  // (the whole buffer; one rank's block for scatter, gather, allgather).
  // Collective when it needs the model (see model()).
  algorithm choose(collective c, std::size_t bytes) {
    if (opt_.forced && detail::offers(c, *opt_.forced)) return *opt_.forced;
    if (size() == 1 || detail::offered(c).size() == 1) return detail::offered(c).front();
    return model().choose(c, bytes);
  }

  template <element E>
  void allreduce(std::span<const E> in, std::span<E> out, op o = op::sum, algorithm a = algorithm::automatic) {
    call c = start<E>(collective::allreduce, in.size(), o, -1, a, in.size());
    c.require(out.size() == in.size(), "out.size() = ", out.size(), " but in.size() = ", in.size());
    c.require(in.data() == out.data() || !overlap(in, out), "in and out overlap but are not the same buffer");
    finish(c);
    memory().copy(out, in);
    if (out.empty()) return;
    reduce_and_average(out, o, [&](auto data, op ro) { run_allreduce(c, data, ro); }, [](auto data) { return data; });
  }
  template <element E>
  void allreduce(std::span<E> inout, op o = op::sum, algorithm a = algorithm::automatic) {
    allreduce(std::span<const E>(inout), inout, o, a);
  }

  template <element E>
  void broadcast(std::span<E> data, int root, algorithm a = algorithm::automatic) {
    call c = start<E>(collective::broadcast, data.size(), op::sum, root, a, data.size());
    finish(c);
    if (size() == 1 || data.empty()) return;
    switch (c.algo) {
      case algorithm::ring: ring::broadcast(tt_, data, root, opt_.tuning); break;
      case algorithm::tree: tree::broadcast(tt_, data, root, opt_.tuning); break;
      case algorithm::scatter_allgather: scatter_allgather::broadcast(tt_, data, root); break;
      default: tree::binomial_broadcast(tt_, data, root); break;
    }
  }

  // `out` must hold in.size() elements on the root; elsewhere it is unused.
  template <element E>
  void reduce(std::span<const E> in, std::span<E> out, int root, op o = op::sum,
              algorithm a = algorithm::automatic) {
    call c = start<E>(collective::reduce, in.size(), o, root, a, in.size());
    if (rank() == root) {
      c.require(out.size() == in.size(), "out.size() = ", out.size(), " on the root but in.size() = ", in.size());
      c.require(in.data() == out.data() || !overlap(in, out), "in and out overlap but are not the same buffer");
    }
    finish(c);
    if (in.empty()) return;
    auto mem = memory();
    typename memory_of<Transport>::template buffer<E> work;
    std::span<E> data = out;
    if (rank() != root) {  // the algorithms reduce in place: keep `in` intact
      work = mem.template scratch<E>(in.size());
      data = work.span();
    }
    mem.copy(data, in);
    auto reduction = [&](auto d, op ro) {
      if (size() == 1) return;
      switch (c.algo) {
        case algorithm::ring: ring::reduce(tt_, d, ro, root, opt_.tuning); break;
        case algorithm::tree: tree::reduce(tt_, d, ro, root, opt_.tuning); break;
        default: tree::binomial_reduce(tt_, d, ro, root); break;
      }
    };
    reduce_and_average(data, o, reduction, [&](auto d) { return rank() == root ? d : d.first(0); });
  }

  // The root's `in` holds size() * out.size() elements; rank i receives block i.
  template <element E>
  void scatter(std::span<const E> in, std::span<E> out, int root, algorithm a = algorithm::automatic) {
    call c = start<E>(collective::scatter, out.size(), op::sum, root, a, out.size());
    if (rank() == root) {
      c.require(detail::product_of(out.size(), size()) == in.size(), "in.size() = ", in.size(),
                " on the root but size() * out.size() = ", detail::product_text(size(), out.size()));
      c.template require_fits<E>(in.size());
      c.require(!overlap(in, out), "in and out overlap");
    }
    finish(c);
    if (c.algo == algorithm::linear) linear::scatter(tt_, in, out, root);
    else binomial::scatter(tt_, in, out, root);
  }

  // The root's `out` receives size() * in.size() elements, rank i's in block i.
  template <element E>
  void gather(std::span<const E> in, std::span<E> out, int root, algorithm a = algorithm::automatic) {
    call c = start<E>(collective::gather, in.size(), op::sum, root, a, in.size());
    if (rank() == root) {
      c.require(detail::product_of(in.size(), size()) == out.size(), "out.size() = ", out.size(),
                " on the root but size() * in.size() = ", detail::product_text(size(), in.size()));
      c.template require_fits<E>(out.size());
      c.require(!overlap(in, out), "in and out overlap");
    }
    finish(c);
    if (c.algo == algorithm::linear) linear::gather(tt_, in, out, root);
    else binomial::gather(tt_, in, out, root);
  }

  // `in` holds size() * out.size() elements; rank i receives block i reduced.
  template <element E>
  void reduce_scatter(std::span<const E> in, std::span<E> out, op o = op::sum, algorithm a = algorithm::automatic) {
    call c = start<E>(collective::reduce_scatter, out.size(), o, -1, a, in.size());
    c.require(detail::product_of(out.size(), size()) == in.size(), "in.size() = ", in.size(), " but size() * out.size() = ",
              detail::product_text(size(), out.size()));
    c.template require_fits<E>(in.size());
    c.require(!overlap(in, out), "in and out overlap");
    finish(c);
    if (out.empty()) return;
    auto mem = memory();
    auto work = mem.template scratch<E>(in.size());
    mem.copy(work.span(), in);
    auto mine = [&](auto d) { return detail::block_of(d, size(), rank()); };
    reduce_and_average(work.span(), o, [&](auto d, op ro) { ring::reduce_scatter(tt_, d, ro, opt_.tuning); }, mine);
    mem.copy(out, std::span<const E>(mine(work.span())));
  }

  // `out` receives size() * in.size() elements, rank i's `in` in block i.
  // `in` may be out's block rank() (in place).
  template <element E>
  void allgather(std::span<const E> in, std::span<E> out, algorithm a = algorithm::automatic) {
    call c = start<E>(collective::allgather, in.size(), op::sum, -1, a, in.size());
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
    finish(c);
    auto mine = out.subspan(at, in.size());
    memory().copy(mine, in);
    ring::allgather(tt_, out);
  }

  void barrier() {
    call c = start<std::uint8_t>(collective::barrier, 0, op::sum, -1, algorithm::automatic, 0);
    finish(c);
    dissemination::barrier(tt_);
  }

  // Sub-communicators, like MPI_Comm_split: every rank calls it; ranks with
  // the same color form a new communicator, ordered by key (then by rank
  // here), with channels of their own, so its messages never mix with this
  // one's. Pipeline stages and data-parallel replicas at once, for example.
  auto split(int color, int key) {
    if (color < 0) throw error("split", rank(), detail::cat("color must be >= 0, got ", color));
    const int n = size();
    std::vector<std::int64_t> all(2 * n);
    const std::int64_t mine[2] = {color, key};
    allgather(std::span<const std::int64_t>(mine), std::span<std::int64_t>(all));
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
    std::size_t bytes;  // what the tuner is asked about
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
    std::array<std::uint64_t, 7> words() const {
      return {std::uint64_t(what), count, std::uint64_t(type), std::uint64_t(o),
              std::uint64_t(std::int64_t(root)), std::uint64_t(algo), problem.empty() ? 0u : 1u};
    }
  };
  static constexpr const char* field_names[] = {"call", "count", "element type", "op", "root", "algorithm", "argument check"};

  auto memory() const { return tt_.memory(); }

  template <class A, class B>
  static bool overlap(std::span<A> a, std::span<B> b) noexcept {
    auto pa = reinterpret_cast<std::uintptr_t>(a.data()), pb = reinterpret_cast<std::uintptr_t>(b.data());
    return !a.empty() && !b.empty() && pa < pb + b.size_bytes() && pb < pa + a.size_bytes();
  }

  // `elems`: how many elements the tuner's size is, checked to fit in bytes.
  template <class E>
  call start(collective what, std::size_t count, op o, int root, algorithm a, std::size_t elems) {
    call c{what, count, dtype_of<E>, o, root, a, rank(), {}, 0};
    c.bytes = c.template require_fits<E>(elems);
    const bool rooted = what == collective::broadcast || what == collective::reduce ||
                        what == collective::scatter || what == collective::gather;
    if (rooted) c.require(root >= 0 && root < size(), "root ", root, " is out of range for ", size(), " ranks");
    if (opt_.forced && detail::offers(what, *opt_.forced)) c.algo = *opt_.forced;
    else if (a != algorithm::automatic && !detail::offers(what, a))  // the message is built only when needed: calls are on the hot path
      c.require(false, "algorithm ", to_string(a), " is not available for ", to_string(what),
                " (available: ", detail::offered_names(what), ")");
    return c;
  }

  // Raise on bad arguments; in checked mode, first agree across ranks.
  // Then resolve automatic (which may load the model: all ranks are here).
  void finish(call& c) {
    if (opt_.checked && size() > 1) compare(c, std::string(to_string(c.what)));
    if (!c.problem.empty()) throw error(std::string(to_string(c.what)), rank(), c.problem);
    if (c.algo == algorithm::automatic) c.algo = choose(c.what, c.bytes);
  }

  void compare(const call& c, const std::string& name) {
    constexpr std::size_t w = std::tuple_size_v<decltype(c.words())>;
    std::vector<std::uint64_t> all(w * size());
    auto mine = c.words();
    std::copy(mine.begin(), mine.end(), all.begin() + w * rank());
    ring::allgather(tt_, std::span<std::uint64_t>(all));  // blocks are exactly w words each
    auto word = [&](int r, std::size_t f) { return all[w * r + f]; };
    std::string invalid;
    for (int r = 0; r < size(); ++r)
      if (word(r, w - 1) != 0) invalid += (invalid.empty() ? "" : ", ") + std::to_string(r);
    if (!invalid.empty()) {
      if (!c.problem.empty()) throw error(name, rank(), c.problem + " (checked mode: ranks " + invalid + " raise)");
      throw error(name, rank(), "checked mode: ranks " + invalid + " passed invalid arguments to this call");
    }
    for (std::size_t f = 0; f + 1 < w; ++f) {
      std::string differ;
      for (int r = 1; r < size(); ++r)
        if (word(r, f) != word(0, f)) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
      if (differ.empty()) continue;
      std::string values;
      for (int r = 0; r < size(); ++r) values += detail::cat(r ? ", " : "", "rank ", r, ": ", describe(f, word(r, f)));
      throw error(name, rank(), detail::cat("checked mode: ranks ", differ, " differ from rank 0 in ",
                                            field_names[f], " (", values, ")"));
    }
  }

  static std::string describe(std::size_t field, std::uint64_t v) {
    switch (field) {
      case 0: return std::string(to_string(collective(v)));
      case 2: return std::string(to_string(dtype(v)));
      case 3: return std::string(to_string(op(v)));
      case 4: return std::to_string(std::int64_t(v));
      case 5: return std::string(to_string(algorithm(v)));
      default: return std::to_string(v);
    }
  }

  template <class E>
  void run_allreduce(const call& c, std::span<E> data, op o) {
    if (size() == 1) return;
    switch (c.algo) {
      case algorithm::ring: ring::allreduce(tt_, data, o, opt_.tuning); break;
      case algorithm::recursive_doubling: recursive_doubling::allreduce(tt_, data, o); break;
      case algorithm::rabenseifner: rabenseifner::allreduce(tt_, data, o, opt_.tuning); break;
      default: tree::allreduce(tt_, data, o, opt_.tuning); break;
    }
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

  void open_trace() {
    if (auto* sink = detail::trace_sink::from_env()) {
      // new with braces: clang 14 has no parenthesised aggregate
      // initialisation, and a temporary handle would flush the file on its way out
      trace_.reset(new detail::trace_handle{sink->open(detail::next_communicator_id(), rank(), size(),
                                                       detail::transport_in_process<Transport>(),
                                                       detail::transport_name<Transport>())});
      tt_ = traced_transport<Transport>(*t_, trace_->rec.get());
    }
  }

  std::shared_ptr<Transport> owned_;  // set for communicators made by split
  Transport* t_;
  communicator_options opt_;
  std::shared_ptr<detail::trace_handle> trace_;  // RINGTREE_TRACE
  traced_transport<Transport> tt_{*t_, nullptr};  // what the algorithms run on: t_, traced or not
  std::optional<ringtree::tuner> tuner_;
};

}  // namespace ringtree
