#pragma once
// traced_transport<T>: a decorator that records every message an algorithm
// sends (step, from, to, bytes) while passing it on to T unchanged.
//
// "step" is a Lamport clock: a rank's clock starts at 0, a message carries
// its sender's clock, and a completed receive moves the receiver's clock to
// one past the message's. The largest step + 1 is then the length of the
// longest chain of messages that depend on each other: the latency steps
// of the algorithm (2(n-1) for ring all-reduce, about 2 log2 n for a tree).
// The recorder is shared by the ranks, so steps are counted for in-process
// worlds; a process that holds one rank of a larger world (MPI, shared
// memory) records its own sends, receives and reductions, without steps.
// A traced transport with no recorder passes everything through: the
// communicator always runs its algorithms through one, so RINGTREE_TRACE
// can switch tracing on in any program.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <ostream>
#include <string>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include <ringtree/core/config.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/core/json.hpp>
#include <ringtree/transport/topology.hpp>
#include <ringtree/memory/scratch_pool.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree {

struct trace_event {
  int step;
  int from;
  int to;
  std::size_t bytes;
  const std::byte* data;  // where the sender's bytes were: which part of its buffer moved
};

// A span of time on one rank: a send or receive from post to completion,
// or a reduction. What a Chrome trace shows, one track per rank. Times are
// microseconds since the recorder was made (ns resolution).
struct trace_slice {
  int rank;
  const char* what;  // "send", "recv", "reduce"
  int peer;          // -1 for reductions
  std::size_t bytes;
  double start_us, end_us;
  int step;          // the rank's step when it ended (for a reduction: the step it belongs to)
};

class trace_recorder {
 public:
  explicit trace_recorder(int size)
      : clock_(size, 0), sent_(size, 0), received_(size, 0), reduced_(size, 0), origin_(std::chrono::steady_clock::now()) {}
  int size() const noexcept { return static_cast<int>(clock_.size()); }
  // Where slices take their times from, if not the host's clock: the
  // simulator's virtual one (sim/world.hpp), in microseconds.
  std::function<double()> clock;

  // Every message, ordered by step, then sender, then receiver.
  std::vector<trace_event> events() const {
    std::lock_guard lk(m_);
    auto e = events_;
    std::stable_sort(e.begin(), e.end(), [](const trace_event& a, const trace_event& b) {
      return std::tie(a.step, a.from, a.to) < std::tie(b.step, b.from, b.to);
    });
    return e;
  }
  int steps() const {
    std::lock_guard lk(m_);
    int s = 0;
    for (auto& e : events_) s = std::max(s, e.step + 1);
    return s;
  }
  std::size_t bytes_sent(int rank) const {
    std::lock_guard lk(m_);
    return sent_.at(rank);
  }
  std::size_t bytes_received(int rank) const {
    std::lock_guard lk(m_);
    return received_.at(rank);
  }
  std::size_t bytes_reduced(int rank) const {  // the accumulator bytes of its reductions
    std::lock_guard lk(m_);
    return reduced_.at(rank);
  }
  std::size_t messages() const {
    std::lock_guard lk(m_);
    return events_.size();
  }
  std::vector<trace_slice> slices() const {
    std::lock_guard lk(m_);
    return slices_;
  }
  // Called on the rank's thread when its step counter moves to `step` (a
  // message sent at step - 1 has arrived), with the buffers as they were
  // after step - 1: with exact_snapshots, before that message's bytes land
  // in the receiver's buffer. The trace tool takes its snapshots here.
  std::function<void(int rank, int step)> on_step;
  // Receives land in a copy first and reach the buffer only after on_step
  // (so a snapshot never shows a byte of the next step); only for the
  // trace tool, which wants exact pictures and pays a copy per message.
  bool exact_snapshots = false;

  // The Chrome trace event format (chrome://tracing, ui.perfetto.dev).
  void write_chrome(std::ostream& os) const {
    os << "{\"traceEvents\": [\n";
    bool first = true;
    write_chrome_events(os, 0, first);
    os << "\n], \"displayTimeUnit\": \"ns\"}\n";
  }
  // The events alone, as process `pid`, for files that hold several
  // recorders; `first` tracks the commas between events. Each rank is a
  // track (tid); sends and receives, which overlap (a pipeline posts many
  // at once), are async slices on it, reductions complete ones. Times are
  // microseconds since the recorder was made, to the nanosecond, and
  // distinct and increasing on every track (a tie moves the later one on
  // by a nanosecond).
  void write_chrome_events(std::ostream& os, int pid, bool& first, const std::string& label = "") const {
    std::lock_guard lk(m_);
    auto sep = [&] { os << (first ? "  " : ",\n  "); first = false; };
    if (!label.empty()) {
      sep();
      os << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << pid << ", \"args\": {\"name\": "
         << detail::json_quoted(label) << "}}";
    }
    std::vector<bool> seen(clock_.size(), !one_rank_);
    for (const auto& x : slices_) seen.at(x.rank) = true;
    for (std::size_t r = 0; r < clock_.size(); ++r) {
      if (!seen[r]) continue;
      sep();
      os << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << pid << ", \"tid\": " << r
         << ", \"args\": {\"name\": \"rank " << r << "\"}}";
    }
    // Every event of a track, in time order: (ts, what it is, which slice).
    struct mark {
      double ts;
      int kind;  // 0: a message begins, 1: it ends, 2: a reduction (complete)
      std::size_t slice;
    };
    std::vector<std::vector<mark>> track(clock_.size());
    for (std::size_t i = 0; i < slices_.size(); ++i) {
      const auto& x = slices_[i];
      if (x.peer < 0) track[x.rank].push_back({x.start_us, 2, i});
      else track[x.rank].push_back({x.start_us, 0, i}), track[x.rank].push_back({x.end_us, 1, i});
    }
    char ts[32], dur[32];
    for (auto& t : track) {
      std::stable_sort(t.begin(), t.end(), [](const mark& a, const mark& b) { return a.ts < b.ts; });
      double last = -1;
      for (auto& m : t) {
        m.ts = std::max(m.ts, last + 1e-3);  // distinct and increasing, to the nanosecond
        last = m.ts;
        const auto& x = slices_[m.slice];
        std::snprintf(ts, sizeof ts, "%.3f", m.ts);
        std::snprintf(dur, sizeof dur, "%.3f", std::max(0.0, x.end_us - x.start_us));
        sep();
        os << "{\"name\": \"" << x.what << (x.peer >= 0 ? (std::string(x.what) == "send" ? " to " : " from ") : "")
           << (x.peer >= 0 ? std::to_string(x.peer) : std::string()) << "\", \"cat\": \"" << x.what << "\", \"ph\": \""
           << (m.kind == 0 ? "b" : m.kind == 1 ? "e" : "X") << "\", \"pid\": " << pid << ", \"tid\": " << x.rank
           << ", \"ts\": " << ts;
        if (m.kind == 2) os << ", \"dur\": " << dur;
        else os << ", \"id\": \"" << pid << "." << m.slice << "\"";
        os << ", \"args\": {\"bytes\": " << x.bytes << ", \"step\": " << x.step << "}}";
      }
    }
  }
  // Only one rank records here (the others are in other processes): name
  // only its track.
  void set_one_rank() { one_rank_ = true; }
  bool one_rank() const noexcept { return one_rank_; }

  void clear() {
    std::lock_guard lk(m_);
    slices_.clear();
    events_.clear();
    pairs_.clear();
    std::fill(clock_.begin(), clock_.end(), 0);
    std::fill(sent_.begin(), sent_.end(), 0);
    std::fill(received_.begin(), received_.end(), 0);
    std::fill(reduced_.begin(), reduced_.end(), 0);
  }

 private:
  template <class T> friend class traced_transport;
  template <class M> friend struct traced_memory;
  // Microseconds since the recorder was made (or on `clock`, where set).
  double now_us() const {
    if (clock) return clock();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_).count();
  }
  void on_slice(trace_slice x) {
    std::lock_guard lk(m_);
    if (x.peer < 0) reduced_.at(x.rank) += x.bytes;
    x.step = clock_.at(x.rank);
    slices_.push_back(x);
  }
  struct pair_log {
    std::vector<int> send_clock;  // clock of the k-th message on this pair
    std::size_t posted = 0;       // receives posted on this pair
  };
  void on_send(int from, int to, std::span<const std::byte> data) {
    const std::size_t bytes = data.size();
    std::lock_guard lk(m_);
    events_.push_back({clock_[from], from, to, bytes, data.data()});  // its timing is the send slice's
    sent_[from] += bytes;
    pairs_[{from, to}].send_clock.push_back(clock_[from]);
  }
  std::size_t on_post_recv(int from, int to, std::size_t bytes) {
    std::lock_guard lk(m_);
    received_.at(to) += bytes;
    return pairs_[{from, to}].posted++;
  }
  void on_recv_done(int from, int to, std::size_t k) {
    int moved_to = -1;
    {
      std::lock_guard lk(m_);
      const auto& sent = pairs_[{from, to}].send_clock;
      if (k >= sent.size()) return;  // the sender is in another process: no steps
      const int c = std::max(clock_[to], sent[k] + 1);
      if (c != clock_[to]) moved_to = clock_[to] = c;
    }
    if (moved_to >= 0 && on_step) on_step(to, moved_to);
  }

  mutable std::mutex m_;
  std::vector<trace_event> events_;
  std::vector<trace_slice> slices_;
  std::vector<int> clock_;
  std::vector<std::size_t> sent_, received_, reduced_;
  bool one_rank_ = false;
  std::map<std::pair<int, int>, pair_log> pairs_;
  std::chrono::steady_clock::time_point origin_;
};

// The memory of a traced transport: the inner one, with every reduction
// recorded as a slice, and scratch lent by the communicator's pool (when
// it has one).
template <class M>
struct traced_memory {
  static constexpr memory_kind kind = detail::kind_of_memory<M>();
  M inner;
  trace_recorder* rec;
  int rank;
  detail::scratch_pool<M>* pool = nullptr;
  template <class E> using buffer = detail::pooled_buffer<M, E>;
  template <class E> buffer<E> scratch(std::size_t n) const {
    if (pool == nullptr) return buffer<E>(inner.template scratch<E>(n));
    if (n == 0) return {};
    return buffer<E>(pool, n);
  }
  template <class E> void copy(std::span<E> dst, std::span<const E> src) const { inner.copy(dst, src); }
  template <class E> void average(std::span<E> data, int ranks) const { inner.average(data, ranks); }
  template <class E> void split_avg(std::span<E> d, std::span<std::int64_t> r, int ranks) const { inner.split_avg(d, r, ranks); }
  template <class E> void join_avg(std::span<E> d, std::span<const std::int64_t> r, int ranks) const { inner.join_avg(d, r, ranks); }
  template <class E>
  void reduce(op o, std::span<E> acc, std::span<const E> in, operands order = operands::acc_first) const {
    if (rec == nullptr) return inner.reduce(o, acc, in, order);
    const double t0 = rec->now_us();
    inner.reduce(o, acc, in, order);
    rec->on_slice({rank, "reduce", -1, acc.size_bytes(), t0, rec->now_us(), 0});
  }
};

// A transport seen through a recorder (null: none) and a scratch pool
// (null: none): what a communicator's algorithms run on. A hierarchical
// transport's two parts (transport/hosts.hpp) are seen through the same
// recorder, their ranks recorded as the whole's (`world`: a part's rank ->
// the whole's), so a trace shows a hierarchical call as one.
template <class T>
class traced_transport {
 public:
  using memory_type = traced_memory<memory_of<T>>;
  static constexpr const char* name = detail::transport_name<T>();
  static constexpr bool in_process = detail::transport_in_process<T>();
  struct request {
    typename T::request inner;
    int peer = -1;
    std::size_t k = 0, bytes = 0;
    bool recv = false, open = false;
    double start_us = 0;
    std::span<std::byte> to{};        // exact_snapshots: where the staged bytes go after on_step
    std::vector<std::byte> staged{};  // ... and where they land first
  };

  traced_transport(T& inner, trace_recorder& rec) : inner_(&inner), rec_(&rec) {}
  traced_transport(T& inner, trace_recorder* rec, detail::scratch_pool<memory_of<T>>* pool = nullptr,
                   std::vector<int> world = {})
      : inner_(&inner), rec_(rec), pool_(pool), world_(std::move(world)) {}
  int rank() const noexcept { return inner_->rank(); }
  int size() const noexcept { return inner_->size(); }
  memory_type memory() const noexcept { return {inner_->memory(), rec_, world_of(rank()), pool_}; }
  trace_recorder* recorder() const noexcept { return rec_; }
  T& inner() const noexcept { return *inner_; }

  request isend(int peer, std::span<const std::byte> data) {
    if (rec_ == nullptr) return {inner_->isend(peer, data)};
    rec_->on_send(world_of(rank()), world_of(peer), data);
    return {inner_->isend(peer, data), peer, 0, data.size(), false, true, rec_->now_us()};
  }
  request irecv(int peer, std::span<std::byte> data) {
    if (rec_ == nullptr) return {inner_->irecv(peer, data)};
    const std::size_t k = rec_->on_post_recv(world_of(peer), world_of(rank()), data.size());
    if (!rec_->exact_snapshots) return {inner_->irecv(peer, data), peer, k, data.size(), true, true, rec_->now_us()};
    request r{{}, peer, k, data.size(), true, true, rec_->now_us(), data, std::vector<std::byte>(data.size())};
    r.inner = inner_->irecv(peer, std::span<std::byte>(r.staged));  // (a vector's buffer keeps its place when moved)
    return r;
  }
  void wait(request& r) {
    in_whole_ranks([&] { inner_->wait(r.inner); });
    completed(r);
  }
  bool probe(int peer)
    requires probing_transport<T>
  {
    return inner_->probe(peer);
  }
  std::chrono::duration<double> timeout() const noexcept
    requires timed_transport<T>
  {
    return inner_->timeout();
  }
  // (only where T can test; detail::test falls back to wait otherwise)
  bool test(request& r)
    requires testing_transport<T>
  {
    bool done = false;
    in_whole_ranks([&] { done = inner_->test(r.inner); });
    if (done) completed(r);
    return done;
  }

  // The parts of a hierarchical transport, traced alike.
  const host_layout& layout() const noexcept
    requires hierarchical_transport<T>
  {
    return inner_->layout();
  }
  auto host_local() const
    requires hierarchical_transport<T>
  {
    const auto& l = inner_->layout();
    return part(inner_->host_local(), l.members(l.host_of(rank())));
  }
  auto host_cross() const
    requires hierarchical_transport<T>
  {
    const auto& l = inner_->layout();
    std::vector<int> same_index;
    for (int h = 0; h < l.hosts(); ++h)
      if (l.index_of(rank()) < static_cast<int>(l.members(h).size())) same_index.push_back(l.members(h)[l.index_of(rank())]);
    return part(inner_->host_cross(), same_index);
  }

 private:
  // A part's rank as the whole's; a part names a rank outside it as its
  // size() + that rank of the whole (a chain of waits that left it).
  int world_of(int r) const noexcept {
    if (world_.empty() || r < 0) return r;
    return r < int(world_.size()) ? world_[r] : r - int(world_.size());
  }
  // f(), with a part's errors told in the whole's ranks.
  template <class F>
  void in_whole_ranks(F&& f) const {
    if (world_.empty()) return f();
    try {
      f();
    } catch (const timeout_error& e) {
      throw timeout_error(e.call(), world_of(rank()), world_of(e.peer()),
                          detail::cat("no answer from rank ", world_of(e.peer()), ": ", in_whole(e)));
    } catch (const error& e) {
      throw error(e.call(), world_of(rank()), in_whole(e));
    }
  }
  // A request has completed: what the recorder keeps of it.
  void completed(request& r) {
    if (!r.open) return;
    r.open = false;
    if (r.recv) rec_->on_recv_done(world_of(r.peer), world_of(rank()), r.k);
    if (!r.staged.empty()) std::memcpy(r.to.data(), r.staged.data(), r.staged.size());
    rec_->on_slice({world_of(rank()), r.recv ? "recv" : "send", world_of(r.peer), r.bytes, r.start_us, rec_->now_us(), 0});
  }
  // A part's error, with its ranks told as the whole's.
  std::string in_whole(const error& e) const {
    std::string ranks, there;
    for (std::size_t r = 0; r < world_.size(); ++r) ranks += detail::cat(r ? ", " : "", world_[r]), there += detail::cat(r ? ", " : "", r);
    return detail::cat("in a hierarchical call's part over ranks ", ranks, " (numbered ", there, " there): ", e.what());
  }
  template <class> friend class traced_transport;
  // A part seen through this recorder: the inner transport's own part, or
  // (a traced transport inside a traced one) a view of it, kept here.
  template <class P>
  auto part(P&& p, const std::vector<int>& ranks) const {
    using Q = std::remove_cvref_t<P>;
    std::vector<int> world;
    for (int r : ranks) world.push_back(world_of(r));
    detail::scratch_pool<memory_of<Q>>* pool = nullptr;
    if constexpr (std::same_as<memory_of<Q>, memory_of<T>>) pool = pool_;
    if constexpr (std::is_lvalue_reference_v<P>) {
      return traced_transport<Q>(p, rec_, pool, std::move(world));
    } else {
      auto kept = std::make_shared<Q>(std::move(p));
      traced_transport<Q> view(*kept, rec_, pool, std::move(world));
      view.kept_ = std::move(kept);
      return view;
    }
  }
  T* inner_;
  trace_recorder* rec_;
  detail::scratch_pool<memory_of<T>>* pool_ = nullptr;
  std::vector<int> world_;      // empty: the ranks are the whole's
  std::shared_ptr<void> kept_;  // what inner_ points to, where this view owns it
};


namespace detail {
// The transport under any traced views: what a communicator claims, and
// what its own bookkeeping (the exchange when it opens) runs on, so that
// a trace shows the program's calls only.
template <class T>
auto& innermost(T& t) noexcept {
  if constexpr (requires { t.inner(); t.recorder(); }) return innermost(t.inner());
  else return t;
}
}  // namespace detail

}  // namespace ringtree
