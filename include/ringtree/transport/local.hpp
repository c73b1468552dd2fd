#pragma once
// local_world: N ranks as N threads in one process, for tests and for
// learning. Messages really move: a send posts (pointer, length) into the
// (sender, receiver) channel and completes only when the receiver has
// copied it out (rendezvous, one copy), so an algorithm that would deadlock
// on MPI's rendezvous protocol deadlocks here too, and is caught by a
// timeout instead of hanging. A rank that throws or returns early wakes
// every waiter with an error naming it. After a failed wait a rank's
// transport is broken: every later call raises, naming the first failure
// (its unfinished sends were taken back, its receives copy nothing).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/core/config.hpp>
#include <ringtree/core/copy.hpp>
#include <ringtree/core/fail_stop.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/memory/shared_mapping.hpp>
#include <ringtree/transport/exchange.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree {

class local_world;

namespace detail {

struct local_message {
  const std::byte* data;
  std::size_t bytes;
  bool taken = false;      // a receiver is copying it
  bool done = false;       // copied (or refused), the sender may go on
  std::string refused;     // why the receiver refused it
};

struct local_channel {
  std::mutex m;
  std::condition_variable cv;
  std::uint64_t sent = 0;    // sequence number of the next send
  std::uint64_t posted = 0;  // sequence number of the next receive
  std::map<std::uint64_t, std::shared_ptr<local_message>> inbox;
};

// One communicator's channels: the world's, or a split's.
struct local_context {
  explicit local_context(std::vector<int> world_ranks)
      : size(static_cast<int>(world_ranks.size())), world_rank(std::move(world_ranks)),
        channels(static_cast<std::size_t>(size) * size) {}
  int size;
  std::vector<int> world_rank;  // rank in this context -> rank in the world
  std::vector<local_channel> channels;
  local_channel& channel(int from, int to) { return channels[static_cast<std::size_t>(from) * size + to]; }
  // Symmetric memory being set up (map_shared), by its number in this
  // context: each rank's region, left here for the peers to take (no
  // address crosses a channel, so a mismatched message cannot become one).
  struct mapping {
    std::vector<std::shared_ptr<std::byte>> regions;
    int taken = 0;
  };
  std::mutex mappings_m;
  std::map<std::uint64_t, mapping> mappings;
};

}  // namespace detail

class local_transport {
 public:
  using memory_type = host_memory;
  static constexpr const char* name = "local";
  static constexpr bool in_process = true;  // every rank is a thread of this process
  static constexpr bool maps_in_calls() noexcept { return true; }  // memory/shared_mapping.hpp

  class request {
   public:
    request() = default;
    request(request&& o) noexcept { swap(o); }
    request& operator=(request&& o) noexcept { request t(std::move(o)); swap(t); return *this; }
    ~request() { withdraw(); }

   private:
    friend class local_transport;
    void swap(request& o) noexcept {
      std::swap(ch_, o.ch_); std::swap(msg_, o.msg_); std::swap(seq_, o.seq_);
      std::swap(dst_, o.dst_); std::swap(peer_, o.peer_); std::swap(recv_, o.recv_); std::swap(since_, o.since_);
    }
    // An unfinished send must not leave a pointer to a buffer that is about
    // to die (the stack unwinding after an error): take it back, or wait
    // for the copy already in progress.
    void withdraw() noexcept {
      if (ch_ == nullptr || recv_ || !msg_) return;
      std::unique_lock lk(ch_->m);
      if (!msg_->taken) {
        for (auto it = ch_->inbox.begin(); it != ch_->inbox.end(); ++it)
          if (it->second == msg_) { ch_->inbox.erase(it); break; }
        msg_->done = true;
      }
      ch_->cv.wait(lk, [&] { return msg_->done; });
      ch_ = nullptr;
    }
    detail::local_channel* ch_ = nullptr;
    std::shared_ptr<detail::local_message> msg_;  // sends
    std::uint64_t seq_ = 0;                       // receives
    std::span<std::byte> dst_;                    // receives
    int peer_ = -1;
    bool recv_ = false;
    std::chrono::steady_clock::time_point since_{};  // the first test() that found it pending
  };

  int rank() const noexcept { return rank_; }
  int size() const noexcept;
  host_memory memory() const noexcept { return {}; }

  request isend(int peer, std::span<const std::byte> data);
  request irecv(int peer, std::span<std::byte> data);
  void wait(request& r);
  // Completes r if its peer has answered, else returns false (at once);
  // raises as wait() does, the timeout counted from the first test that
  // found it pending.
  bool test(request& r);
  // Whether a message from `peer` has arrived that no posted receive will
  // take (point to point from any source looks with it).
  bool probe(int peer);
  // How long a wait on a peer may take (what probing callers wait at most).
  std::chrono::duration<double> timeout() const noexcept;

  // A transport over a subset of this one's ranks with channels of its
  // own (communicator::split calls it on every rank; `members` are this
  // transport's ranks in the new order, `index` this rank's place).
  std::unique_ptr<local_transport> split(int color, int key, std::span<const int> members, int index);

  // Symmetric memory (memory/shared_mapping.hpp), a collective call: each rank's
  // region comes from the heap, first touched by its owner; every rank
  // holds a reference to every region, so none is freed while a peer that
  // failed half-way may still read it.
  std::optional<shared_mapping> map_shared(std::size_t bytes);

  // Why the transport is broken ("" while it works).
  const std::string& failure() const noexcept { return stop_.failure(); }

 private:
  void check_usable(const char* call) const { stop_.check(call, rank_); }
  bool complete(request& r, bool block);
  friend class local_world;
  local_transport(local_world& w, std::shared_ptr<detail::local_context> ctx, int rank)
      : world_(&w), ctx_(std::move(ctx)), rank_(rank) {}
  local_world* world_;
  std::shared_ptr<detail::local_context> ctx_;
  int rank_;
  detail::fail_stop stop_{"this transport failed earlier and cannot be used again"};
  std::uint64_t mappings_made_ = 0;  // map_shared calls so far
};

class local_world {
 public:
  explicit local_world(int size) : local_world(size, config::from_env().timeout) {}  // RINGTREE_TIMEOUT
  local_world(int size, std::chrono::duration<double> timeout) : size_(size), timeout_(timeout) {
    if (size < 1) throw error("local_world", -1, detail::cat("size must be at least 1, got ", size));
  }
  int size() const noexcept { return size_; }

  // Runs per_rank(local_transport&) on `size` threads and waits for all of
  // them; rethrows the first error raised on any rank.
  template <class F>
  void run(F&& per_rank) {
    std::vector<int> all(size_);
    for (int r = 0; r < size_; ++r) all[r] = r;
    contexts_.clear();
    // Taken now: a rank's split may grow contexts_ while others still start.
    auto world_ctx = std::make_shared<detail::local_context>(all);
    contexts_.push_back(world_ctx);
    state_ = std::vector<std::atomic<int>>(size_);
    failed_ = -1;
    std::exception_ptr first;
    std::mutex first_m;
    std::vector<std::thread> threads;
    threads.reserve(size_);
    for (int r = 0; r < size_; ++r) {
      threads.emplace_back([&, r] {
        local_transport t(*this, world_ctx, r);
        try {
          per_rank(t);
          leave(r, running_done);
        } catch (...) {
          {
            std::lock_guard lk(first_m);
            if (!first) first = std::current_exception();
          }
          leave(r, running_failed);
        }
      });
    }
    for (auto& th : threads) th.join();
    if (first) std::rethrow_exception(first);
  }

 private:
  friend class local_transport;
  static constexpr int running = 0, running_done = 1, running_failed = 2;

  std::uint64_t add_context(std::vector<int> world_ranks) {
    std::lock_guard lk(contexts_m_);
    contexts_.push_back(std::make_shared<detail::local_context>(std::move(world_ranks)));
    return contexts_.size() - 1;
  }
  std::shared_ptr<detail::local_context> context(std::uint64_t id) {
    std::lock_guard lk(contexts_m_);
    return contexts_.at(id);
  }
  void leave(int r, int how) {
    if (how == running_failed) {
      int expect = -1;
      failed_.compare_exchange_strong(expect, r);
    }
    state_[r] = how;
    std::lock_guard lk(contexts_m_);
    for (auto& ctx : contexts_)
      for (auto& c : ctx->channels) {  // wake every waiter so it can see who left
        std::lock_guard lc(c.m);
        c.cv.notify_all();
      }
  }
  // Why a wait on `peer` can never finish, or "" while it still can. Only
  // the peer's own state counts: a rank whose peer is alive keeps waiting
  // (the peer may be about to send; if it is stuck behind a failed rank it
  // fails too, and the chain ends here), so a rank that raised its own,
  // precise error does not turn everyone else's into "someone failed".
  std::string gone(int peer) const {
    const int how = state_[peer];
    if (how == running) return {};
    const int first = failed_;
    const std::string cause = first >= 0 && first != peer ? detail::cat("; rank ", first, " failed first") : "";
    if (how == running_failed) return detail::cat("rank ", peer, " failed", cause);
    return detail::cat("rank ", peer, " returned from run() without matching this message", cause);
  }
  // Waits (`block`) until done(), or only looks once (then `since`, the
  // first look, starts the timeout); raises when the peer can no longer
  // answer or the timeout has passed. Whether done() holds.
  template <class Pred>
  bool wait_for(int rank, int peer, int world_peer, const char* what, std::unique_lock<std::mutex>& lk,
                detail::local_channel& c, Pred done, bool block, std::chrono::steady_clock::time_point& since) {
    const auto now = std::chrono::steady_clock::now();
    if (since == std::chrono::steady_clock::time_point{}) since = now;
    const auto deadline = since + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
    while (!done()) {
      if (auto why = gone(world_peer); !why.empty())
        throw error(what, rank, detail::cat("peer rank ", peer, " can no longer answer: ", why));
      if (block ? c.cv.wait_until(lk, deadline) == std::cv_status::timeout && !done() : now > deadline)
        throw timeout_error(what, rank, peer,
                            detail::waited_whole_timeout(timeout_.count(), detail::cat("rank ", peer)));
      if (!block) return done();
    }
    return true;
  }

  int size_;
  std::chrono::duration<double> timeout_;
  std::mutex contexts_m_;
  std::vector<std::shared_ptr<detail::local_context>> contexts_;  // [0]: the world's
  std::vector<std::atomic<int>> state_;
  std::atomic<int> failed_{-1};
};

inline int local_transport::size() const noexcept { return ctx_->size; }

inline local_transport::request local_transport::isend(int peer, std::span<const std::byte> data) {
  check_usable("isend");
  auto& c = ctx_->channel(rank_, peer);
  request r;
  r.ch_ = &c;
  r.peer_ = peer;
  r.msg_ = std::make_shared<detail::local_message>(detail::local_message{data.data(), data.size(), false, false, {}});
  std::lock_guard lk(c.m);
  c.inbox.emplace(c.sent++, r.msg_);
  c.cv.notify_all();
  return r;
}

inline local_transport::request local_transport::irecv(int peer, std::span<std::byte> data) {
  check_usable("irecv");
  auto& c = ctx_->channel(peer, rank_);
  request r;
  r.ch_ = &c;
  r.peer_ = peer;
  r.recv_ = true;
  r.dst_ = data;
  std::lock_guard lk(c.m);
  r.seq_ = c.posted++;
  return r;
}

inline void local_transport::wait(request& r) {
  if (r.ch_ == nullptr) return;
  check_usable(r.recv_ ? "recv" : "send");
  stop_.guard([&] {
    r.since_ = {};  // a wait's timeout starts now
    complete(r, true);
  });
}

inline bool local_transport::test(request& r) {
  if (r.ch_ == nullptr) return true;
  check_usable(r.recv_ ? "recv" : "send");
  return stop_.guard([&] { return complete(r, false); });
}

inline std::chrono::duration<double> local_transport::timeout() const noexcept { return world_->timeout_; }

inline bool local_transport::probe(int peer) {
  check_usable("probe");
  auto& c = ctx_->channel(peer, rank_);
  std::lock_guard lk(c.m);
  return c.inbox.count(c.posted) != 0;
}

inline bool local_transport::complete(request& r, bool block) {
  auto& c = *r.ch_;
  std::unique_lock lk(c.m);
  const int world_peer = ctx_->world_rank[r.peer_];
  if (!r.recv_) {
    if (!world_->wait_for(rank_, r.peer_, world_peer, "send", lk, c, [&] { return r.msg_->done; }, block, r.since_))
      return false;
    r.ch_ = nullptr;
    if (!r.msg_->refused.empty()) throw error("send", rank_, r.msg_->refused);
    return true;
  }
  if (!world_->wait_for(rank_, r.peer_, world_peer, "recv", lk, c, [&] { return c.inbox.count(r.seq_) != 0; }, block, r.since_))
    return false;
  auto msg = c.inbox.extract(r.seq_).mapped();
  r.ch_ = nullptr;
  if (msg->bytes != r.dst_.size()) {
    msg->refused = detail::cat("rank ", r.peer_, " sent ", msg->bytes, " bytes to rank ", rank_,
                               ", which expected ", r.dst_.size(), " (mismatched collective calls?)");
    msg->done = true;
    c.cv.notify_all();
    throw error("recv", rank_, msg->refused);
  }
  msg->taken = true;
  lk.unlock();
  if (msg->bytes != 0) detail::copy_bytes(r.dst_.data(), msg->data, msg->bytes);
  lk.lock();
  msg->done = true;
  c.cv.notify_all();
  return true;
}

inline std::optional<shared_mapping> local_transport::map_shared(std::size_t bytes) {
  check_usable("symmetric memory");
  const int n = size();
  constexpr std::size_t page = 4096;
  const std::size_t len = std::max(page, (bytes + page - 1) / page * page);
  using region = std::shared_ptr<std::byte>;
  region mine(static_cast<std::byte*>(::operator new(len, std::align_val_t{page})),
              [](std::byte* p) { ::operator delete(p, std::align_val_t{page}); });
  std::memset(mine.get(), 0, len);
  // Left in the context under this rank's count of mappings; the ranks
  // then check that they all are at the same count and length before any
  // takes the peers' regions. The last to take them clears the entry.
  const std::uint64_t number = mappings_made_++;
  {
    std::lock_guard lk(ctx_->mappings_m);
    auto& e = ctx_->mappings[number];
    e.regions.resize(n);
    e.regions[rank_] = mine;
  }
  const std::uint64_t stated[2] = {number, len};  // which mapping, how long
  std::vector<std::uint64_t> all(2 * n);
  detail::exchange_all(*this, "symmetric memory", std::as_bytes(std::span(stated)), std::as_writable_bytes(std::span(all)));
  for (int q = 0; q < n; ++q)
    if (all[2 * q] != number || all[2 * q + 1] != len)
      throw error("symmetric memory", rank_, detail::cat("rank ", q, " is at its mapping ", all[2 * q], " of ", all[2 * q + 1],
                                                         " bytes, this rank at mapping ", number, " of ", len,
                                                         " bytes (mismatched allocate calls?)"));
  auto views = std::make_shared<std::vector<region>>();
  {
    std::lock_guard lk(ctx_->mappings_m);
    auto& e = ctx_->mappings[number];
    *views = e.regions;
    if (++e.taken == n) ctx_->mappings.erase(number);
  }
  shared_mapping m;
  for (auto& v : *views) m.bases.push_back(v.get());
  m.bytes = len;
  m.keep = views;
  m.peer_problem = [w = world_, ctx = ctx_](int peer) { return w->gone(ctx->world_rank[peer]); };
  m.timeout = world_->timeout_;
  return m;
}

// The first member makes the new context and tells the others its number.
inline std::unique_ptr<local_transport> local_transport::split(int, int, std::span<const int> members, int index) {
  std::uint64_t id = 0;
  if (index == 0) {
    std::vector<int> world_ranks;
    for (int m : members) world_ranks.push_back(ctx_->world_rank.at(m));
    id = world_->add_context(std::move(world_ranks));
  }
  detail::share_from_first(*this, members, index, "split", std::as_writable_bytes(std::span(&id, 1)));
  return std::unique_ptr<local_transport>(new local_transport(*world_, world_->context(id), index));
}

}  // namespace ringtree
