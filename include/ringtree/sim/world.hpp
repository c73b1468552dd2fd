#pragma once
// ringtree's own algorithms at thousands of ranks, in virtual time.
//
// sim::world runs N ranks of unchanged algorithm code (any row of the
// algorithm table, or anything else written against the transport concept)
// on one thread: each rank is a fiber (sim/fiber.hpp), and a discrete-event
// scheduler always resumes the rank whose virtual clock is earliest (ties:
// the order the events were made). Nothing depends on the host's clock or
// threads, so the same inputs give the same virtual times, bit for bit,
// on every run and machine (times are integer picoseconds).
//
// The network the ranks run on, and what it leaves out, is sim/network.hpp.
// A message starts when both ends are posted (rendezvous, as the transport
// concept allows) and its ports are free.
//
// With data (options::data) payloads really move and reductions really
// run, so results can be checked at rank counts no machine here has.
// Without, only sizes travel: buffers are spans over a reserved range that
// is never mapped (touching it faults), so 4096 ranks x 256 MiB fits.
// A schedule that can never finish (a deadlock) raises ringtree::error
// naming the ranks that wait and for what, instead of hanging.
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <ringtree/core/error.hpp>
#include <ringtree/core/reduce.hpp>
#include <ringtree/sim/fiber.hpp>
#include <ringtree/sim/network.hpp>
#include <ringtree/transport/topology.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree::sim {

struct options {
  network net{};
  std::vector<int> hosts{1};  // ranks on each host (uneven allowed)
  bool data = true;           // payloads move and reductions run
  std::size_t stack_bytes = std::size_t{256} << 10;
};

// What a run did.
struct run_stats {
  std::uint64_t messages = 0, bytes = 0, events = 0;
};

class world;

// Memory of a simulated rank: host memory whose copies and reductions
// charge the rank's clock (and, without data, only that).
struct memory {
  static constexpr memory_kind kind = memory_kind::host;
  world* w;
  int rank;  // in the world
  template <class E>
  struct buffer {
    std::unique_ptr<E[]> owned;
    std::span<E> s{};
    std::span<E> span() const noexcept { return s; }
  };
  template <class E> buffer<E> scratch(std::size_t n) const;
  template <class E> void copy(std::span<E> dst, std::span<const E> src) const;
  template <class E> void reduce(op o, std::span<E> acc, std::span<const E> in, operands order = operands::acc_first) const;
  template <class E> void average(std::span<E> data, int ranks) const;
  template <class E> void split_avg(std::span<E> data, std::span<std::int64_t> remainders, int ranks) const;
  template <class E> void join_avg(std::span<E> data, std::span<const std::int64_t> remainders, int ranks) const;
};

// One rank's view of a group of simulated ranks: the world's, its host's
// (host_local) or its index's across hosts (host_cross). Models the
// transport concept and hierarchical_transport.
class transport {
 public:
  class request {
   public:
    request() = default;
    request(request&& o) noexcept : id_(std::exchange(o.id_, -1)) {}
    request& operator=(request&& o) noexcept {
      id_ = std::exchange(o.id_, -1);
      return *this;
    }

   private:
    friend class transport;
    friend class world;
    explicit request(int id) : id_(id) {}
    int id_ = -1;
  };
  using memory_type = sim::memory;
  static constexpr const char* name = "sim";
  static constexpr bool in_process = true;

  int rank() const noexcept { return me_; }
  int size() const noexcept { return size_; }
  memory_type memory() const noexcept;
  request isend(int peer, std::span<const std::byte> data);
  request irecv(int peer, std::span<std::byte> data);
  void wait(request& r);

  const host_layout& layout() const noexcept;
  transport& host_local();
  transport& host_cross();

 private:
  friend class world;
  world* w_ = nullptr;
  int group_ = 0, me_ = 0, size_ = 0, world_rank_ = 0;
};

class world {
 public:
  explicit world(options o) : opt_(std::move(o)), links_(opt_.net) {
    if (opt_.hosts.empty()) throw error("sim", -1, "a world needs at least one host");
    std::vector<std::uint64_t> keys;
    for (std::size_t h = 0; h < opt_.hosts.size(); ++h) {
      if (opt_.hosts[h] < 1) throw error("sim", -1, detail::cat("host ", h, " has ", opt_.hosts[h], " ranks (at least 1)"));
      keys.insert(keys.end(), static_cast<std::size_t>(opt_.hosts[h]), h);
    }
    if (keys.size() >= (std::size_t{1} << 24)) throw error("sim", -1, detail::cat(keys.size(), " ranks: at most 16777215"));
    n_ = static_cast<int>(keys.size());
    layout_ = host_layout(keys);
    host_of_.resize(n_);
    for (int r = 0; r < n_; ++r) host_of_[r] = layout_.host_of(r);
    // groups: 0 the world, 1 + h host h, 1 + H + i the ranks of index i
    const int H = layout_.hosts();
    std::vector<int> all(n_);
    for (int r = 0; r < n_; ++r) all[r] = r;
    add_group(all, keys);
    for (int h = 0; h < H; ++h) add_group(layout_.members(h), std::vector<std::uint64_t>(layout_.members(h).size(), 0));
    for (int i = 0; i < layout_.most_per_host(); ++i) {
      std::vector<int> m;
      std::vector<std::uint64_t> k;
      for (int h = 0; h < H; ++h)
        if (i < static_cast<int>(layout_.members(h).size())) m.push_back(layout_.members(h)[i]), k.push_back(k.size());
      add_group(m, k);
    }
    transports_.resize(3 * static_cast<std::size_t>(n_));
    for (int r = 0; r < n_; ++r) {
      const int h = host_of_[r], i = layout_.index_of(r);
      transport_of(r, 0) = make_transport(0, r, r);
      transport_of(r, 1) = make_transport(1 + h, i, r);
      transport_of(r, 2) = make_transport(1 + H + i, h_rank_in_cross(r), r);
    }
  }
  world(const world&) = delete;
  world& operator=(const world&) = delete;
  ~world() {
    if (void_ != nullptr) munmap(void_, void_bytes);
  }

  int size() const noexcept { return n_; }
  const host_layout& layout() const noexcept { return layout_; }
  const options& settings() const noexcept { return opt_; }
  bool data() const noexcept { return opt_.data; }

  // Runs f(transport&) on every rank, from virtual time 0, until all have
  // returned; raises the first rank's error, or a deadlock's.
  template <class F>
  void run(F f) {
    reset();
    std::vector<std::unique_ptr<fiber>> fibers;
    fibers.reserve(n_);
    while (static_cast<int>(stacks_.size()) < n_) stacks_.push_back(std::make_unique<stack>(opt_.stack_bytes));
    for (int r = 0; r < n_; ++r) {
      fibers.push_back(std::make_unique<fiber>([this, r, &f] {
        f(transport_of(r, 0));
        ranks_[r].finished = ranks_[r].clock;
      }, *stacks_[r]));
      schedule(0, r);
    }
    std::exception_ptr failed;
    while (!events_.empty()) {
      std::pop_heap(events_.begin(), events_.end(), later);
      const event e = events_.back();
      events_.pop_back();
      now_ = e.t;
      auto& st = ranks_[e.rank];
      st.clock = std::max(st.clock, now_);
      ++stats_.events;
      running_ = e.rank;
      try {
        fibers[e.rank]->resume();
      } catch (...) {
        failed = std::current_exception();
        running_ = -1;
        break;
      }
      running_ = -1;
    }
    std::string stuck;
    if (!failed) stuck = deadlock_report(fibers);
    cancel(fibers);
    if (failed) std::rethrow_exception(failed);
    if (!stuck.empty()) throw error("sim", -1, stuck);
  }

  // After run(): when each rank returned, and the last of them.
  picoseconds finished_ps(int r) const { return ranks_.at(r).finished; }
  double elapsed() const noexcept {
    picoseconds t = 0;
    for (const auto& s : ranks_) t = std::max(t, s.finished);
    return seconds(t);
  }
  const run_stats& stats() const noexcept { return stats_; }
  // The running rank's virtual clock in microseconds (the world's, between
  // ranks): what a trace of a simulated run is timed by.
  double clock_us() const noexcept { return seconds(running_ >= 0 ? ranks_[running_].clock : now_) * 1e6; }

  // Without data: a span that stands for `n` elements and is never touched
  // (a reserved range with no access: touching it faults).
  template <class E>
  std::span<E> nowhere(std::size_t n) {
    if (void_ == nullptr) {
      void* p = mmap(nullptr, void_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw error("sim", -1, detail::cat("cannot reserve ", void_bytes >> 30, " GiB of address space"));
      void_ = static_cast<std::byte*>(p);
    }
    if (n > void_bytes / sizeof(E))
      throw error("sim", -1, detail::cat("a buffer of ", n * sizeof(E), " bytes is larger than the ", void_bytes >> 30, " GiB reserved"));
    return {reinterpret_cast<E*>(void_), n};
  }

  // The time a rank's CPU takes to reduce or copy `bytes` (its clock moves on).
  void charge_reduce(int r, std::size_t bytes) { ranks_[r].clock += links_.reduce_time(bytes); }
  void charge_copy(int r, std::size_t bytes) { ranks_[r].clock += links_.copy_time(bytes); }

 private:
  friend class transport;
  static constexpr std::size_t void_bytes = std::size_t{1} << 42;  // 4 TiB of address space, no memory

  struct rank_state {
    picoseconds clock = 0, finished = -1;
    int waiting = -1;  // the operation it is blocked on
  };
  struct op {
    int rank, peer;  // world ranks of the poster and its peer
    bool send;
    std::byte* at;
    std::size_t bytes;
    picoseconds done = -1;  // when it completes, once started
    int waiter = -1;        // the rank blocked on it
    int next = -1;          // in its channel's queue
  };
  struct channel {
    int sends = -1, sends_tail = -1, recvs = -1, recvs_tail = -1;
  };
  struct event {
    picoseconds t;
    std::uint64_t seq;
    int rank;
  };
  static bool later(const event& a, const event& b) noexcept { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  struct cancelled {};  // unwinds a fiber that can never go on

  struct group_info {
    std::vector<int> members;
    host_layout layout;
  };
  void add_group(const std::vector<int>& members, const std::vector<std::uint64_t>& keys) {
    groups_.push_back({members, host_layout(keys)});
  }
  int h_rank_in_cross(int r) const {  // its place among the ranks of its index: hosts with that many ranks, in order
    const int i = layout_.index_of(r), h = host_of_[r];
    int at = 0;
    for (int g = 0; g < h; ++g) at += i < static_cast<int>(layout_.members(g).size()) ? 1 : 0;
    return at;
  }
  transport make_transport(int group, int me, int world_rank) {
    transport t;
    t.w_ = this;
    t.group_ = group;
    t.me_ = me;
    t.size_ = static_cast<int>(groups_[group].members.size());
    t.world_rank_ = world_rank;
    return t;
  }
  transport& transport_of(int r, int which) { return transports_[3 * static_cast<std::size_t>(r) + which]; }

  void reset() {
    ranks_.assign(n_, rank_state{});
    ops_.clear();
    free_ops_.clear();
    channels_.clear();
    events_.clear();
    links_.reset(n_, layout_.hosts());
    now_ = 0;
    seq_ = 0;
    stats_ = {};
    cancelling_ = false;
  }
  void schedule(picoseconds t, int r) {
    events_.push_back({t, seq_++, r});
    std::push_heap(events_.begin(), events_.end(), later);
  }
  void suspend() {
    fiber::current()->suspend();
    if (cancelling_ && std::uncaught_exceptions() == 0) throw cancelled{};
  }
  // Brings rank r's clock and the world's to the same time: what it posts
  // then competes for the ports in virtual-time order.
  void sync(int r) {
    auto& st = ranks_[r];
    if (st.clock > now_) {
      schedule(st.clock, r);
      suspend();
    }
  }

  int post(const transport& t, int peer, bool send, std::byte* at, std::size_t bytes) {
    const int r = t.world_rank_;
    if (peer < 0 || peer >= t.size_ || peer == t.me_)
      throw error(send ? "isend" : "irecv", t.me_, detail::cat("peer ", peer, " is not another rank of ", t.size_));
    if (cancelling_) throw cancelled{};
    sync(r);
    const int p = groups_[t.group_].members[peer];
    int id;
    if (!free_ops_.empty()) id = free_ops_.back(), free_ops_.pop_back();
    else id = static_cast<int>(ops_.size()), ops_.emplace_back();
    ops_[id] = op{r, p, send, at, bytes};
    const int from = send ? r : p, to = send ? p : r;
    auto& c = channels_[(std::uint64_t(t.group_) << 48) | (std::uint64_t(from) << 24) | std::uint64_t(to)];
    int& other = send ? c.recvs : c.sends;
    if (other >= 0) {  // the oldest posted other end of this pair: they match
      const int o = other;
      other = ops_[o].next;
      if (other < 0) (send ? c.recvs_tail : c.sends_tail) = -1;
      start(send ? id : o, send ? o : id);
    } else {
      int& head = send ? c.sends : c.recvs;
      int& tail = send ? c.sends_tail : c.recvs_tail;
      if (tail >= 0) ops_[tail].next = id;
      else head = id;
      tail = id;
    }
    return id;
  }

  // Both ends are posted (now): the message takes its ports when they are free.
  void start(int s, int r) {
    op& S = ops_[s];
    op& R = ops_[r];
    if (S.bytes != R.bytes)
      throw error("sim", running_,
                  detail::cat("rank ", S.rank, " sends ", S.bytes, " bytes to rank ", R.rank, ", which receives ", R.bytes,
                              " (the two ranks' schedules disagree)"));
    if (opt_.data && S.bytes > 0) std::memcpy(R.at, S.at, S.bytes);
    ++stats_.messages;
    stats_.bytes += S.bytes;
    const auto d = links_.carry(S.rank, host_of_[S.rank], R.rank, host_of_[R.rank], S.bytes, now_);
    S.done = d.sent;
    R.done = d.received;
    for (op* x : {&S, &R})
      if (x->waiter >= 0) schedule(std::max(x->done, ranks_[x->waiter].clock), x->waiter);
  }

  void wait(const transport& t, transport::request& q) {
    if (q.id_ < 0) return;
    const int id = std::exchange(q.id_, -1), r = t.world_rank_;
    if (ops_[id].done < 0) {
      ops_[id].waiter = r;
      ranks_[r].waiting = id;
      suspend();
      ranks_[r].waiting = -1;
    }
    ranks_[r].clock = std::max(ranks_[r].clock, ops_[id].done);
    free_ops_.push_back(id);
  }

  std::string deadlock_report(const std::vector<std::unique_ptr<fiber>>& fibers) const {
    std::string s;
    int stuck = 0;
    for (int r = 0; r < n_; ++r) {
      if (fibers[r]->done()) continue;
      if (++stuck > 8) continue;
      const int id = ranks_[r].waiting;
      s += detail::cat(s.empty() ? "" : "; ", "rank ", r,
                       id < 0 ? std::string(" never resumed")
                              : detail::cat(" waits to ", ops_[id].send ? "send " : "receive ", ops_[id].bytes, " bytes ",
                                            ops_[id].send ? "to" : "from", " rank ", ops_[id].peer));
    }
    if (stuck == 0) return {};
    return detail::cat("deadlock at ", seconds(now_) * 1e6, " us of virtual time: ", stuck, " of ", n_,
                       " ranks can never go on (", s, stuck > 8 ? "; ..." : "", ")");
  }
  // Unwinds every fiber that has not returned, so that what its stack holds is freed.
  void cancel(std::vector<std::unique_ptr<fiber>>& fibers) {
    cancelling_ = true;
    for (auto& f : fibers) {
      if (f->done()) continue;
      try {
        f->resume();
      } catch (const cancelled&) {
      } catch (...) {  // a second error while unwinding: the first is the one reported
      }
    }
    cancelling_ = false;
  }

  options opt_;
  int n_ = 0;
  host_layout layout_;
  std::vector<int> host_of_;
  std::vector<group_info> groups_;
  std::vector<transport> transports_;  // per rank: the world's, its host's, its index's
  std::vector<std::unique_ptr<stack>> stacks_;
  links links_;

  std::vector<rank_state> ranks_;
  std::vector<op> ops_;
  std::vector<int> free_ops_;
  std::unordered_map<std::uint64_t, channel> channels_;
  std::vector<event> events_;
  picoseconds now_ = 0;
  std::uint64_t seq_ = 0;
  run_stats stats_;
  bool cancelling_ = false;
  int running_ = -1;
  std::byte* void_ = nullptr;
};

// ---- transport and memory, which need the world ----

inline memory transport::memory() const noexcept { return {w_, world_rank_}; }
inline transport::request transport::isend(int peer, std::span<const std::byte> data) {
  return request(w_->post(*this, peer, true, const_cast<std::byte*>(data.data()), data.size()));
}
inline transport::request transport::irecv(int peer, std::span<std::byte> data) {
  return request(w_->post(*this, peer, false, data.data(), data.size()));
}
inline void transport::wait(request& r) { w_->wait(*this, r); }
inline const host_layout& transport::layout() const noexcept { return w_->groups_[group_].layout; }
inline transport& transport::host_local() {
  if (group_ != 0) throw error("host_local", me_, "only the world's transport has host parts");
  return w_->transport_of(world_rank_, 1);
}
inline transport& transport::host_cross() {
  if (group_ != 0) throw error("host_cross", me_, "only the world's transport has host parts");
  return w_->transport_of(world_rank_, 2);
}

template <class E>
memory::buffer<E> memory::scratch(std::size_t n) const {
  if (w->data()) {
    auto p = std::make_unique_for_overwrite<E[]>(n);
    std::span<E> s(p.get(), n);
    return {std::move(p), s};
  }
  return {nullptr, w->nowhere<E>(n)};
}
template <class E>
void memory::copy(std::span<E> dst, std::span<const E> src) const {
  if (src.empty() || dst.data() == src.data()) return;
  w->charge_copy(rank, src.size_bytes());
  if (w->data()) std::memcpy(static_cast<void*>(dst.data()), src.data(), src.size_bytes());
}
template <class E>
void memory::reduce(op o, std::span<E> acc, std::span<const E> in, operands order) const {
  w->charge_reduce(rank, acc.size_bytes());
  if (w->data()) reduce_into(o, acc, in, order);
}
template <class E>
void memory::average(std::span<E> data, int ranks) const {
  w->charge_reduce(rank, data.size_bytes());
  if (w->data()) finish_avg(data, ranks);
}
template <class E>
void memory::split_avg(std::span<E> data, std::span<std::int64_t> remainders, int ranks) const {
  w->charge_reduce(rank, data.size_bytes());
  if (w->data()) ringtree::split_avg(data, remainders, ranks);
}
template <class E>
void memory::join_avg(std::span<E> data, std::span<const std::int64_t> remainders, int ranks) const {
  w->charge_reduce(rank, data.size_bytes());
  if (w->data()) ringtree::join_avg(data, remainders, ranks);
}

static_assert(ringtree::transport<transport>);
static_assert(hierarchical_transport<transport>);

}  // namespace ringtree::sim
