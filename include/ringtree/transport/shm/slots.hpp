#pragma once
// slot_transport<Slots>: the message protocol over the segment
// (shm/layout.hpp), whatever the slot policy `Slots` keeps the payloads in
// (host memory: shm/host_slots.hpp; device memory: cuda_ipc.hpp). A policy
// gives memory_type, name, payload_in_segment, a context type, setup(),
// for_split(), memory(), payload(), put() and get(), optionally
// map_shared() and maps_in_calls (its memory may be mapped in collective
// calls, memory/shared_mapping.hpp; false if it does not say).
//
// Progress: like MPI, any wait() moves every posted message of this rank
// forward (pushes what fits, pulls what arrived), so two ranks that wait
// on their receives while their sends are still queued do not deadlock.
// A waiting rank spins, then yields, then sleeps on a futex (its doorbell,
// rung by whoever gives it data or space), so oversubscribed ranks still
// progress. A peer whose process is gone is reported at once; one that
// stalls raises timeout_error after RINGTREE_TIMEOUT seconds.
//
// After a failed wait (a timeout, a dead peer, a refused message) the
// transport is broken: later calls raise naming the first failure, nothing
// moves any more (so no buffer of the failed call is touched), and the
// rank's line says it left, so peers waiting on it raise at once. The same
// happens when a transport is destroyed.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/core/error.hpp>
#include <ringtree/core/fail_stop.hpp>
#include <ringtree/core/wait.hpp>
#include <ringtree/memory/shared_mapping.hpp>
#include <ringtree/transport/shm/bootstrap.hpp>
#include <ringtree/transport/shm/futex.hpp>
#include <ringtree/transport/shm/layout.hpp>
#include <ringtree/transport/shm/options.hpp>
#include <ringtree/transport/shared_segments.hpp>
#include <ringtree/transport/shm/segment.hpp>
#include <ringtree/transport/transport.hpp>
#include <ringtree/transport/wait_board.hpp>

namespace ringtree {
namespace detail {

// A policy's maps_in_calls; false where it does not say (a communicator then
// maps its control memory only when the program allocates).
template <class Slots>
constexpr bool slots_map_in_calls() noexcept {
  if constexpr (requires { { Slots::maps_in_calls } -> std::same_as<const bool&>; }) return Slots::maps_in_calls;
  else return false;
}

// Tests reach a transport's peer check through this (it is defined in
// tests/host only): a race of nanoseconds, made to happen every time.
struct slot_transport_seam;

}  // namespace detail

template <class Slots>
class slot_transport {
  struct op_state {
    std::byte* recv_buf = nullptr;
    const std::byte* send_buf = nullptr;
    std::size_t bytes = 0, done = 0;
    bool complete = false;
    int refused_from = -1;  // set when the stream from this peer was refused: wait() raises
  };

 public:
  using memory_type = typename Slots::memory_type;
  static constexpr const char* name = Slots::name;
  static constexpr bool maps_in_calls() noexcept { return detail::slots_map_in_calls<Slots>(); }  // memory/shared_mapping.hpp

  class request {
   public:
    request() = default;

   private:
    friend class slot_transport;
    std::shared_ptr<op_state> op_;
    int peer_ = -1;
    bool recv_ = false;
    std::chrono::steady_clock::time_point since_{}, next_check_{};  // test(): the first that found it pending; the next look at the peer
  };

  // `name`: the segment's name, the same on every rank ("/something").
  slot_transport(const std::string& name, int rank, int size, shm_options opt = {}, Slots slots = {})
      : opt_(detail::filled_shm_options(opt, size)), slots_(std::move(slots)) {
    seg_ = std::make_shared<detail::shm_segment>(name, rank, size, opt_, Slots::payload_in_segment);
    peer_problem_ = [seg = seg_](int q) { return detail::shm_peer_problem(*seg, q); };
    rank_ = rank;
    size_ = size;
    if (sched_getaffinity(0, sizeof me()->cpus, &me()->cpus) != 0) CPU_ZERO(&me()->cpus);
    me()->cpus_set.store(1, std::memory_order_release);
    auto* h = seg_->hdr();
    layout_ = detail::shm_layout{size, static_cast<std::size_t>(h->slots), static_cast<std::size_t>(h->slot_bytes),
                              Slots::payload_in_segment};
    sends_.resize(size);
    recvs_.resize(size);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(*opt_.timeout);
    slots_.setup(typename Slots::context{
        rank, size, layout_.slots, layout_.slot_bytes,
        [this](int r) { return std::span<std::byte>(rank_line(r)->policy_data); },
        [this] { me()->published.store(1); },
        [this, deadline] {
          for (int r = 0; r < size_; ++r)
            while (rank_line(r)->published.load() == 0) {
              if (std::chrono::steady_clock::now() > deadline)
                throw timeout_error("shm_transport", rank_, r, detail::cat("rank ", r, " did not publish its slots within the timeout (RINGTREE_TIMEOUT)"));
              std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
        }});
    if (rank == 0) seg_->unlink_when_all_attached(rank, size, deadline);
    std::vector<int> self(size);
    for (int r = 0; r < size; ++r) self[r] = r;
    number_as(std::move(self));
  }
  slot_transport(slot_transport&&) = default;
  // Peers still waiting on this rank learn at once that it is gone.
  ~slot_transport() {
    if (seg_) leave();
  }

  // Leaves the communicator now: this transport refuses every later call,
  // and the peers' waits on this rank raise at once. For a program that
  // gives up after an error but goes on living.
  void abort() noexcept {
    stop_.fail("abort() was called");
    leave();
  }
  // Why the transport is broken ("" while it works).
  const std::string& failure() const noexcept { return stop_.failure(); }

  // Without MPI: the name from RINGTREE_SHM_NAME, rank and size from
  // RINGTREE_RANK / RINGTREE_SIZE (or Open MPI's or PMI's variables), so any
  // launcher can start the processes.
  static slot_transport from_env(shm_options opt = {}) {
    const auto at = detail::shm_launch_from_env();  // shm/bootstrap.hpp
    return slot_transport(at.name, at.rank, at.size, opt);
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  // communicator::split: the first member draws a segment name and sends
  // it to the others, who all attach to the new segment.
  std::unique_ptr<slot_transport> split(int, int, std::span<const int> members, int index) {
    char name[detail::shm_name_max] = {};
    if (index == 0) std::snprintf(name, sizeof name, "%s", detail::random_shm_name().c_str());
    detail::share_from_first(*this, members, index, "split", std::as_writable_bytes(std::span(name)));
    name[sizeof name - 1] = '\0';
    return std::make_unique<slot_transport>(name, index, static_cast<int>(members.size()), opt_, slots_.for_split(index));
  }

  memory_type memory() const noexcept { return slots_.memory(); }

  // Symmetric memory (memory/shared_mapping.hpp), a collective call: memory of
  // the slots' kind, mapped by every rank: a POSIX segment per rank on the
  // host (map_control), or what a device policy shares (cuda_slots).
  std::optional<shared_mapping> map_shared(std::size_t bytes) {
    if constexpr (requires { slots_.map_shared(*this, bytes, shared_mapping{}); }) {
      check_usable("symmetric memory");
      shared_mapping m;  // what a mapping of this transport carries besides the regions
      m.peer_problem = peer_problem_;
      m.timeout = *opt_.timeout;
      return slots_.map_shared(*this, bytes, std::move(m));
    } else {
      return map_control(bytes);
    }
  }
  // Host memory in a POSIX segment per rank, mapped by all (memory/segments.hpp):
  // symmetric memory's control lines and staging, whatever the slots' kind.
  std::optional<shared_mapping> map_control(std::size_t bytes) {
    check_usable("symmetric memory");
    return detail::map_segments(*this, bytes, peer_problem_,
                                *opt_.timeout, detail::sharing::required);
  }

  // Whom this host's ranks wait for (wait_board.hpp): told as ranks of a
  // whole that this transport is part of (`whole[i]`: rank i's number
  // there; a cluster's host part), or as its own (the default).
  void number_as(std::vector<int> whole) {
    std::vector<detail::wait_line*> lines;
    for (int r = 0; r < size_; ++r) lines.push_back(&rank_line(r)->wait);
    renumbered_ = false;
    for (int r = 0; r < size_ && r < int(whole.size()); ++r) renumbered_ = renumbered_ || whole[r] != r;
    board_ = std::make_shared<detail::wait_board>(seg_, std::move(lines), rank_, std::move(whole));
  }
  std::shared_ptr<const detail::wait_board> wait_board() const noexcept { return board_; }

  const std::string& segment_name() const noexcept { return seg_->name(); }
  std::size_t slot_bytes() const noexcept { return layout_.slot_bytes; }

  request isend(int peer, std::span<const std::byte> data) {
    check_usable("isend");
    request r = post(peer, false);
    r.op_->send_buf = data.data();
    r.op_->bytes = data.size();
    sends_[peer].push_back(r.op_);
    progress_sends(peer);  // eager: a small message leaves at once
    return r;
  }
  request irecv(int peer, std::span<std::byte> data) {
    check_usable("irecv");
    request r = post(peer, true);
    r.op_->recv_buf = data.data();
    r.op_->bytes = data.size();
    recvs_[peer].push_back(r.op_);
    return r;
  }

  // Whether a message from `peer` has arrived that no posted receive will
  // take (point to point from any source looks with it).
  std::chrono::duration<double> timeout() const noexcept { return *opt_.timeout; }
  bool probe(int peer) {
    check_usable("probe");
    if (!recvs_[peer].empty()) return false;
    auto* q = queue(peer, rank_);
    return q->tail.value.load(std::memory_order_acquire) != q->head.value.load(std::memory_order_relaxed);
  }

  void wait(request& r) {
    if (!r.op_) return;
    check_usable(r.recv_ ? "recv" : "send");
    failing_with(r, [&] { wait_pending(r); });
  }
  // Moves every posted message along; completes r if it is done, else
  // returns false at once. Raises as wait() does, the timeout counted from
  // the first test that found r pending.
  bool test(request& r) {
    if (!r.op_) return true;
    check_usable(r.recv_ ? "recv" : "send");
    bool done = false;
    failing_with(r, [&] {
      progress();
      if (!r.op_->complete) {
        const auto now = std::chrono::steady_clock::now();
        if (r.since_ == decltype(r.since_){}) r.since_ = r.next_check_ = now;
        if (now >= r.next_check_) {
          check_peer(r, now - r.since_ > *opt_.timeout);
          r.next_check_ = now + std::chrono::milliseconds(5);
        }
        return;
      }
      finish(r);
      done = true;
    });
    return done;
  }

 private:
  // f() on request r; if it raises, the transport is broken from then on.
  template <class F>
  void failing_with(request& r, F&& f) {
    stop_.guard(std::forward<F>(f), [&] {
      r.op_.reset();
      leave();
    });
  }
  void wait_pending(request& r) {
    // spin: the peer is usually a few hundred ns away, unless it waits for
    // this rank's core (more ranks than cores): then yield almost at once;
    // a long wait sleeps on the doorbell between looks
    const long spins = oversubscribed() ? 7 : 255;
    detail::patience p(*opt_.timeout, detail::pace{spins, 1023 - spins, true});
    while (!r.op_->complete) {
      const std::uint32_t bell = me()->doorbell.load(std::memory_order_acquire);
      if (progress()) {
        p.progressed();
        continue;
      }
      if (r.op_->complete) break;
      if (!p.idle()) continue;
      if (p.started()) board_->waiting(board_->whole_of(r.peer_));  // a long wait: the host may ask whom for
      if (p.check_due()) check_peer(r, p.overdue());
      me()->sleeping.store(1);
      if (!progress() && !r.op_->complete)
        detail::futex_wait(&me()->doorbell, bell, 2'000'000);  // 2 ms, then look again
      me()->sleeping.store(0);
    }
    if (p.waited_long()) board_->done();
    finish(r);
  }
  // r has completed: its state goes back to the spares.
  void finish(request& r) {
    const int refused = r.op_->refused_from;
    if (r.op_.use_count() == 1) spare_.push_back(std::move(r.op_));
    r.op_.reset();
    if (refused >= 0)
      throw error("recv", rank_, detail::cat("a message from rank ", refused,
                                              " was refused earlier, so this one cannot be trusted: not received"));
  }

  // More ranks than the CPUs they may run on between them (the union of
  // their affinity masks; a launcher that binds each rank to one core
  // gives each a mask of one). Known once every rank has said its CPUs.
  bool oversubscribed() {
    if (oversubscribed_ < 0) {
      cpu_set_t any;
      CPU_ZERO(&any);
      for (int q = 0; q < size_; ++q) {
        if (rank_line(q)->cpus_set.load(std::memory_order_acquire) == 0) return false;  // not yet known
        CPU_OR(&any, &any, &rank_line(q)->cpus);
      }
      oversubscribed_ = CPU_COUNT(&any) > 0 && size_ > CPU_COUNT(&any) ? 1 : 0;
    }
    return oversubscribed_ == 1;
  }

  void check_usable(const char* call) const { stop_.check(call, rank_); }
  // Nothing moves any more: drop what was queued (those buffers belong to
  // a call that failed) and tell the peers, waking any that sleep.
  void leave() noexcept {
    for (auto& q : sends_) q.clear();
    for (auto& q : recvs_) q.clear();
    me()->left.store(1);
    for (int r = 0; r < size_; ++r)
      if (r != rank_) {
        rank_line(r)->doorbell.fetch_add(1);
        detail::futex_wake(&rank_line(r)->doorbell);
      }
  }

  request post(int peer, bool recv) {
    if (peer < 0 || peer >= size_ || peer == rank_)
      throw error(recv ? "irecv" : "isend", rank_, detail::cat("peer ", peer, " is not another rank of ", size_));
    request r;
    if (spare_.empty()) {
      r.op_ = std::make_shared<op_state>();
    } else {  // no allocation per message in steady state
      r.op_ = std::move(spare_.back());
      spare_.pop_back();
      *r.op_ = op_state{};
    }
    r.peer_ = peer;
    r.recv_ = recv;
    return r;
  }

  detail::shm_rank* rank_line(int r) const { return seg_->rank_line(r); }
  detail::shm_rank* me() const { return rank_line(rank_); }
  detail::shm_queue* queue(int from, int to) const {
    return reinterpret_cast<detail::shm_queue*>(seg_->base() + layout_.queues_at()) + (static_cast<std::size_t>(from) * size_ + to);
  }
  detail::shm_chunk* slot(int from, int to, std::uint64_t k) const {
    const std::size_t index = (static_cast<std::size_t>(from) * size_ + to) * layout_.slots + k % layout_.slots;
    return reinterpret_cast<detail::shm_chunk*>(seg_->base() + layout_.slots_at() + index * layout_.slot_stride());
  }
  std::byte* payload(int from, int to, std::uint64_t k) const {
    return slots_.payload(from, to, k % layout_.slots, reinterpret_cast<std::byte*>(slot(from, to, k) + 1));
  }
  // Wake rank r if it sleeps. The common case costs one load: a waiter
  // announces `sleeping` and then looks at its queues once more before it
  // sleeps, and a sender publishes its data (seq_cst) before it looks at
  // `sleeping`, so one of the two always sees the other.
  void wake(int r) const {
    auto* line = rank_line(r);
    if (line->sleeping.load() == 0) return;
    line->doorbell.fetch_add(1);
    detail::futex_wake(&line->doorbell);
  }

  // Moves every posted message forward; true if anything moved.
  bool progress() {
    bool moved = false;
    for (int p = 0; p < size_; ++p) {
      if (!sends_[p].empty()) moved |= progress_sends(p);
      if (!recvs_[p].empty()) moved |= progress_recvs(p);
    }
    return moved;
  }

  bool progress_sends(int to) {
    auto* q = queue(rank_, to);
    bool moved = false;
    while (!sends_[to].empty()) {
      op_state& op = *sends_[to].front();
      const std::uint64_t tail = q->tail.value.load(std::memory_order_relaxed);
      const std::uint64_t head = q->head.value.load(std::memory_order_acquire);
      if (tail - head >= layout_.slots) break;  // ring full
      const std::size_t len = std::min(layout_.slot_bytes, op.bytes - op.done);
      auto* c = slot(rank_, to, tail);
      c->total = op.bytes;
      c->len = len;
      if (len != 0) slots_.put(payload(rank_, to, tail), op.send_buf + op.done, len);
      q->tail.value.store(tail + 1);  // seq_cst: see wake()
      op.done += len;
      moved = true;
      if (op.done == op.bytes) {
        op.complete = true;
        sends_[to].pop_front();
      }
    }
    if (moved) wake(to);
    return moved;
  }

  bool progress_recvs(int from) {
    auto* q = queue(from, rank_);
    bool moved = false;
    while (!recvs_[from].empty()) {
      op_state& op = *recvs_[from].front();
      const std::uint64_t head = q->head.value.load(std::memory_order_relaxed);
      if (q->tail.value.load(std::memory_order_acquire) == head) break;  // nothing new
      const auto* c = slot(from, rank_, head);
      // Lengths come from another process: check them before trusting them.
      const std::uint64_t len = c->len;
      if (auto why = detail::chunk_problem(from, rank_, c->total, len, op.bytes, op.done, layout_.slot_bytes); !why.empty()) {
        fail_recv(from);
        throw error("recv", rank_, why);
      }
      if (len != 0) slots_.get(op.recv_buf + op.done, payload(from, rank_, head), len);
      q->head.value.store(head + 1);  // seq_cst: see wake()
      op.done += len;
      moved = true;
      if (op.done == op.bytes) {
        op.complete = true;
        recvs_[from].pop_front();
      }
    }
    if (moved) wake(from);
    return moved;
  }
  // After a refused message the stream from `from` cannot be trusted: drop
  // what this rank expected from it, so later waits fail instead of misreading.
  void fail_recv(int from) {
    for (auto& op : recvs_[from]) op->complete = true, op->refused_from = from;
    recvs_[from].clear();
  }

  // Raises if r's peer can no longer answer or (`expired`) did not in
  // time, naming the rank its host's chain of waits leads to (wait_board.hpp).
  void check_peer(request& r, bool expired) {
    const char* what = r.recv_ ? "recv" : "send";
    const int peer = board_->whole_of(r.peer_);
    const auto why = peer_problem_(r.peer_);
    if (why.empty() && !expired) return;
    // The peer may have finished its part of r and left since the last
    // look (its leaving is ordered after its writes): look once more.
    progress();
    if (r.op_->complete) return;
    const auto b = board_->follow(peer);
    if (b.rank == peer) {
      if (!why.empty()) throw error(what, rank_, why);
      throw timeout_error(what, rank_, r.peer_,
                          detail::waited_whole_timeout(opt_.timeout->count(), detail::cat("rank ", r.peer_),
                                                       ": it stalled or is in another call"));
    }
    // A peer stuck behind another rank (or gone while it waited on one):
    // that one is to blame.
    const std::string whole = renumbered_ ? detail::cat(" (rank ", peer, " of the whole communicator, in whose numbers the rest is)") : "";
    throw timeout_error(what, rank_, numbered(b.rank),
                        detail::cat(why.empty() ? detail::cat("waited ", opt_.timeout->count(), " s for rank ", r.peer_) : why,
                                    whole, b.chain, b.verdict(detail::cat("rank ", b.rank))));
  }
  // The whole's rank w in this transport's numbering: its own rank here, or
  // size() + w for a rank that is not in it (traced_transport reads it so).
  int numbered(int w) const noexcept {
    for (int r = 0; r < size_; ++r)
      if (board_->whole_of(r) == w) return r;
    return size_ + w;
  }

  shm_options opt_;
  Slots slots_;
  std::shared_ptr<detail::shm_segment> seg_;  // shared with the symmetric mappings, which ask it who is alive
  std::function<std::string(int)> peer_problem_;  // why rank q can no longer answer, or "" (the segment says)
  friend struct detail::slot_transport_seam;
  detail::shm_layout layout_{};
  int rank_ = 0, size_ = 1;
  std::vector<std::deque<std::shared_ptr<op_state>>> sends_, recvs_;
  std::vector<std::shared_ptr<op_state>> spare_;
  detail::fail_stop stop_{"this transport failed earlier and cannot be used again (make a new one)"};
  int oversubscribed_ = -1;  // -1: not known yet
  std::shared_ptr<detail::wait_board> board_;  // this host's long waits (number_as)
  bool renumbered_ = false;                    // its numbers are not this transport's
};

}  // namespace ringtree
