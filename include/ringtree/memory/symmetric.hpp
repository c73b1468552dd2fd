#pragma once
// Symmetric buffers, and the epoch lines that order direct reads of them.
//
// comm.allocate<E>(count) (a collective call, the same count on every
// rank) gives each rank a buffer its peers can read and write: a region
// per rank from the transport's map_shared (memory/shared_mapping.hpp). A
// collective on a span inside such a buffer runs a direct algorithm
// (algorithms/direct.hpp): ranks read their peers' spans instead of
// receiving copies of them.
//
// Order without locks: every rank owns one epoch line, on a cache line of
// its own, that only it writes: the call it is in and the phase it has
// reached in it, as one counter that only grows (call << 24 | phase; no
// resets), and the span it brought to the call. A direct algorithm is a
// few phases: published (my span may be read), steps (part j of what I
// write is written), done (I read nobody any more). Readers wait for a
// peer's line to reach a phase. Every call ends with each rank waiting
// until the ranks that read its memory are done, so once a call returns no
// peer reads this rank's buffers: freeing one is safe at any time.
//
// Nothing silent: a peer's span is used only after its line says it is in
// the same call on the same buffer with the same size, collective,
// algorithm, op and root; a rank that fails marks its line, and peers
// waiting on it raise at once; a peer that dies, leaves or stalls is named
// within RINGTREE_TIMEOUT.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <ringtree/core/copy.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/core/fail_stop.hpp>
#include <ringtree/core/wait.hpp>
#include <ringtree/memory/host_memory.hpp>
#include <ringtree/memory/shared_mapping.hpp>

namespace ringtree {

template <class E> class symmetric_buffer;

namespace detail {

struct alignas(64) epoch_line {
  std::atomic<std::uint64_t> seq;  // call << 24 | phase; failed_seq once this rank gave up
  std::uint64_t region, offset, bytes;  // the span this rank brought to the call
  std::uint64_t call_word;                // collective, algorithm, op, root: what the call is
  std::uint64_t in_region, in_offset;   // an out-of-place all-reduce's input (else the span itself)
};
inline constexpr std::uint64_t failed_seq = ~std::uint64_t{0};

// A staging slot for small calls: the payload shares the first cache line
// with the sequence number, so a reader of up to 40 bytes moves one line.
// Each rank has stage_slots of them, used in turn: a rank writes a slot
// again stage_slots staged calls later, when every peer has finished
// reading it (they staged the call after it, which they do only after
// reading this one). So a rank that reads nothing (a broadcast's root, a
// reduce's others) runs up to stage_slots calls ahead of its slowest
// peer, as MPI's eager messages let its ranks: where ranks outnumber the
// cores, a peer runs only when it gets a core, and then reads every call
// it missed at once (with 8 slots a small broadcast at 4 ranks on 2 cores
// took 1.1-1.8 us a call, with 64 0.35-0.65, MPI's own 0.55-0.98).
struct stage_header {
  std::atomic<std::uint64_t> seq;  // the staged call this slot holds
  std::uint64_t call_word, bytes;
};
inline constexpr std::size_t stage_stride = 8192, stage_capacity = stage_stride - sizeof(stage_header);
inline constexpr std::uint64_t stage_slots = 64;
// A rank's control memory: its epoch line, then its staging slots.
inline constexpr std::size_t control_bytes = 64 + stage_slots * stage_stride;
inline constexpr int phase_bits = 24;
inline constexpr std::uint32_t published_phase = 1, done_phase = (1u << phase_bits) - 1;
// Steps 2 .. done_phase - 1 are free for the algorithm's own use.
inline constexpr std::uint32_t max_steps = done_phase - 2;

struct symmetric_region {
  std::uint64_t id = 0;  // the same on every rank: allocations are collective
  shared_mapping map;    // bases[rank] is this rank's own
  bool shared = false;   // false: plain memory (the ranks cannot share any)
  std::byte* mine() const noexcept { return map.bases.empty() ? nullptr : map.bases[rank]; }
  int rank = 0;
};

// A communicator's symmetric memory: the control lines (one per rank) and
// the buffers allocated so far, by id.
class symmetric_heap {
 public:
  // `cores`: what the ranks may run on between them (cores_of_all).
  symmetric_heap(int rank, int size, shared_mapping control, int cores)
      : rank_(rank), size_(size), control_(std::move(control)), spin_(size > cores ? 16 : 20000) {}
  bool oversubscribed() const noexcept { return spin_ < 20000; }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  epoch_line* line(int r) const noexcept { return reinterpret_cast<epoch_line*>(control_.bases[r]); }
  epoch_line* mine() const noexcept { return line(rank_); }
  stage_header* stage(int r, std::uint64_t s) const noexcept {
    return reinterpret_cast<stage_header*>(control_.bases[r] + 64 + (s % stage_slots) * stage_stride);
  }
  std::uint64_t next_stage() {
    check_usable();
    return ++stage_;
  }
  // Before this rank writes its slot for staged call s: every peer has
  // read the call that slot held (s - stage_slots), which it has once it
  // staged the call after it. A look at every peer's slot on every call
  // costs a cache line from each; instead this waits, once in stage_slots / 2
  // calls, for the peers to have staged s - stage_slots / 2, which covers
  // the next stage_slots / 2 calls (so a rank still runs stage_slots / 2
  // calls ahead at least).
  void reserve_stage(const char* call, std::uint64_t s) {
    if (s <= stage_slots || s - stage_slots + 1 <= read_by_all_) return;
    const std::uint64_t upto = s - stage_slots / 2;
    for (int q = 0; q < size_; ++q)
      if (q != rank_) wait(call, q, stage(q, upto)->seq, upto);
    read_by_all_ = upto;
  }

  std::shared_ptr<symmetric_region> add(shared_mapping m) {
    auto r = std::make_shared<symmetric_region>();
    r->id = ++last_id_;
    r->map = std::move(m);
    r->shared = true;
    r->rank = rank_;
    regions_.erase(std::remove_if(regions_.begin(), regions_.end(), [](auto& e) { return e.first.expired(); }), regions_.end());
    regions_.emplace_back(r, r.get());
    return r;
  }
  // The region holding [p, p + bytes) on this rank, and where in it. (A
  // plain pointer: the caller's buffer keeps the region alive during the
  // call, and this runs on every call, where reference counts cost.)
  struct found {
    const symmetric_region* region = nullptr;
    std::size_t offset = 0;
  };
  std::optional<found> find(const void* p, std::size_t bytes) const {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    for (auto& [w, r] : regions_)
      if (!w.expired()) {
        const auto b = reinterpret_cast<std::uintptr_t>(r->mine());
        if (a >= b && a - b <= r->map.bytes && bytes <= r->map.bytes - (a - b)) return found{r, a - b};
      }
    return std::nullopt;
  }

  // A call starts: its number, the same on every rank.
  std::uint64_t next_call() {
    check_usable();
    return ++call_;
  }
  // After an error in a direct call nothing is certain about who still
  // reads what: the line says so to the peers, and later calls raise.
  void fail(const std::string& why) noexcept {
    try {
      stop_.fail(why);
    } catch (...) {  // (no memory for the message: the line below still stops the peers)
    }
    mine()->seq.store(failed_seq);
  }
  void check_usable() const { stop_.check("symmetric", rank_); }

  // Waits until rank q's line reaches `target`, or raises naming q.
  void wait(const char* call, int q, std::uint64_t target) const { wait(call, q, line(q)->seq, target); }
  // Waits until `seq`, written by rank q, reaches `target`.
  void wait(const char* call, int q, const std::atomic<std::uint64_t>& seq, std::uint64_t target) const {
    patience p(control_.timeout, pace{spin_, 0});
    // (q's epoch line also says so where `seq` is a staging slot's)
    auto q_failed = [&](std::uint64_t v) { return v == failed_seq || line(q)->seq.load(std::memory_order_acquire) == failed_seq; };
    auto raise_failed = [&] { throw error(call, rank_, cat("rank ", q, " failed in a direct call on symmetric memory (its own error says why)")); };
    const bool on_line = &seq == &line(q)->seq;
    auto at_target = [&](std::uint64_t v) { return v >= target && v != failed_seq; };
    for (long looks = 0;; ++looks) {
      const std::uint64_t v = seq.load(std::memory_order_acquire);
      if (at_target(v)) return;
      if (((looks & 63) == 63 || v == failed_seq) && q_failed(v)) raise_failed();
      // q may have reached `target` and gone on to its next call since the
      // look above (on a loaded machine this rank can be preempted between
      // the two reads); its next call is ordered after it: look once more.
      if ((looks & 63) == 63 && went_elsewhere(q, on_line) && !at_target(seq.load(std::memory_order_acquire)))
        throw error(call, rank_, cat("rank ", q, " called a different collective: it went on to a ", on_line ? "staged" : "direct",
                                     " call that this rank has not made, where this rank's call is ", on_line ? "direct" : "staged",
                                     " (different sizes on different ranks?)"));
      if (!p.idle() || !p.check_due()) continue;
      if (control_.peer_problem)
        if (auto why = control_.peer_problem(q); !why.empty()) {
          // q may have reached `target` and left since the look above: its
          // leaving is ordered after its last phase, so look once more; and
          // where q failed here first, that is the cause to name.
          const std::uint64_t now = seq.load(std::memory_order_acquire);
          if (at_target(now)) return;
          if (q_failed(now)) raise_failed();
          throw error(call, rank_, why);
        }
      if (p.overdue())
        throw timeout_error(call, rank_, q,
                            waited_whole_timeout(control_.timeout.count(), cat("rank ", q),
                                                 " in a direct call on symmetric memory: it stalled, or called something "
                                                 "else (a private buffer where this rank passed a symmetric one?)"));
    }
  }

 private:
  // Whether q is in a call of the other kind that this rank has not made:
  // a staged call while this rank waits on q's epoch line, or a call on
  // the epoch lines while it waits on q's staging slot. Each kind has its
  // own count, so ranks that disagree on whether a call stages (a size on
  // either side of stage_capacity) would otherwise wait for the timeout.
  bool went_elsewhere(int q, bool on_line) const noexcept {
    if (on_line) {
      for (std::uint64_t k = 0; k < stage_slots; ++k)
        if (const std::uint64_t s = stage(q, k)->seq.load(std::memory_order_acquire); s != failed_seq && s > stage_) return true;
      return false;
    }
    const std::uint64_t v = line(q)->seq.load(std::memory_order_acquire);
    return v != failed_seq && (v >> phase_bits) > call_;
  }

  int rank_, size_;
  shared_mapping control_;
  long spin_;  // spins before yielding: few when ranks outnumber cores
  std::uint64_t call_ = 0, stage_ = 0, last_id_ = 0;
  std::uint64_t read_by_all_ = 0;  // every peer has staged this call (reserve_stage)
  std::vector<std::pair<std::weak_ptr<symmetric_region>, const symmetric_region*>> regions_;
  detail::fail_stop stop_{"a direct call on symmetric memory failed earlier, so this communicator's symmetric buffers cannot be used again"};
};

// How the communicator's allocate makes a buffer from a region (nobody else may).
struct symmetric_access {
  template <class E>
  static symmetric_buffer<E> make(std::shared_ptr<symmetric_region> r, std::size_t count) {
    return symmetric_buffer<E>(std::move(r), count);
  }
};

}  // namespace detail

// A buffer every rank of the communicator that allocated it can read and
// write (comm.allocate<E>(count)): a contiguous range, so collectives take
// it (or spans inside it) like any other buffer, and run direct algorithms
// on it. Where the ranks cannot share memory (MPI across hosts) it is
// plain memory and shared() is false.
template <class E>
class symmetric_buffer {
 public:
  symmetric_buffer() = default;
  std::span<E> span() const noexcept { return span_; }
  E* data() const noexcept { return span_.data(); }
  std::size_t size() const noexcept { return span_.size(); }
  E* begin() const noexcept { return span_.data(); }
  E* end() const noexcept { return span_.data() + span_.size(); }
  E& operator[](std::size_t i) const noexcept { return span_[i]; }
  bool shared() const noexcept { return region_ && region_->shared; }

 private:
  friend struct detail::symmetric_access;
  symmetric_buffer(std::shared_ptr<detail::symmetric_region> r, std::size_t count)
      : region_(std::move(r)), span_(reinterpret_cast<E*>(region_->mine()), count) {}
  std::shared_ptr<detail::symmetric_region> region_;
  std::span<E> span_;
};

// One direct call's view of the symmetric memory: what the direct
// algorithms are written against (algorithms/direct.hpp), as the others
// are written against the transport concept. Phases as in the header
// comment; `M` is the memory object that copies and reduces.
template <class M>
class symmetric_window {
 public:
  // `at`: where this rank's span lies in symmetric memory; null for a call
  // on private memory, which may only stage (below).
  // `in`: an all-reduce's input where it is another symmetric span than
  // `at` (out of place); null where the input is the span itself.
  symmetric_window(detail::symmetric_heap& h, const char* call, const detail::symmetric_heap::found* at,
                   const detail::symmetric_heap::found* in, std::size_t bytes, std::uint64_t call_word, M mem)
      : h_(&h), call_(call), at_(at ? *at : detail::symmetric_heap::found{}), in_(in ? *in : at_), bytes_(bytes),
        call_word_(call_word), mem_(std::move(mem)), out_of_place_(in != nullptr) {}

  int rank() const noexcept { return h_->rank(); }
  int size() const noexcept { return h_->size(); }
  const M& memory() const noexcept { return mem_; }

  // Small calls on any host memory: a copy of my data goes to my staging
  // slot, where peers read it (stage_capacity bytes at most). Nobody reads
  // my buffer, so I may return once I have read what I need: at once
  // where that is nothing (a broadcast's root), as an eager message lets
  // MPI's. Every rank stages once in every staged call, if only nothing:
  // a slot is written again stage_slots staged calls later, once every
  // peer has staged the call after it, which it does only after it has
  // read everything of this one. (The slots are host memory: device memory
  // never stages.)
  static constexpr std::size_t stage_capacity = detail::kind_of_memory<M>() == memory_kind::host ? detail::stage_capacity : 0;
  template <class E>
  void stage(std::span<const E> mine) {
    stage_ = h_->next_stage();
    h_->reserve_stage(call_, stage_);
    auto* slot = h_->stage(rank(), stage_);
    slot->call_word = call_word_;
    slot->bytes = mine.size_bytes();
    if (!mine.empty()) detail::copy_bytes(reinterpret_cast<std::byte*>(slot + 1), mine.data(), mine.size_bytes());
    slot->seq.store(stage_, std::memory_order_release);
  }
  // Rank q's staged data of this call (my own copy for q == rank()):
  // `count` elements, the call's whole span unless said.
  template <class E>
  std::span<const E> staged(int q) const { return staged<E>(q, bytes_ / sizeof(E)); }
  template <class E>
  std::span<const E> staged(int q, std::size_t count) const {
    const auto* slot = h_->stage(q, stage_);
    if (q != rank()) h_->wait(call_, q, slot->seq, stage_);
    if (slot->call_word != call_word_ || slot->bytes != count * sizeof(E))
      throw error(call_, rank(), detail::cat("rank ", q, " called a different collective (", slot->bytes, " bytes staged, call word ",
                                             slot->call_word, ") than this rank (", count * sizeof(E), " bytes, call word ", call_word_, ")"));
    return {reinterpret_cast<const E*>(slot + 1), count};
  }

  // A call on private memory that streams through staging (the window's
  // span is then this rank's staging, not the caller's buffer): `in` is
  // the caller's input, where it is apart from the output.
  void stream(std::span<const std::byte> in) noexcept { streamed_ = true, private_in_ = in; }
  bool streamed() const noexcept { return streamed_; }
  template <class E>
  std::span<const E> private_in(std::span<E> data) const noexcept {
    if (private_in_.empty()) return data;
    return {reinterpret_cast<const E*>(private_in_.data()), private_in_.size() / sizeof(E)};
  }

  // My span may be read (and, where the algorithm says, written) from now on.
  void publish() {
    base_ = h_->next_call() << detail::phase_bits;
    auto* l = h_->mine();
    l->region = at_.region->id;
    l->offset = at_.offset;
    l->bytes = bytes_;
    l->call_word = line_call_word();
    l->in_region = in_.region->id;
    l->in_offset = in_.offset;
    l->seq.store(base_ | detail::published_phase, std::memory_order_release);
  }
  // Whether the call's input is another span than the output (out of
  // place: peers' inputs are read with peer_in, and nobody reads the output
  // before its owner writes it).
  bool out_of_place() const noexcept { return out_of_place_; }
  // Rank q's input span: peer(q) in place, else its other span.
  template <class E>
  std::span<const E> peer_in(int q) const {
    if (!out_of_place_) return peer<const E>(q);
    if (q == rank()) return {reinterpret_cast<const E*>(in_.region->mine() + in_.offset), bytes_ / sizeof(E)};
    (void)peer<const E>(q);  // waits for q and checks its call
    const auto* l = h_->line(q);
    if (l->in_region != in_.region->id || l->in_offset > in_.region->map.bytes || bytes_ > in_.region->map.bytes - l->in_offset)
      throw error(call_, rank(), detail::cat("rank ", q, "'s input (buffer ", l->in_region, ", offset ", l->in_offset,
                                             ") is not in this rank's input buffer (", in_.region->id, ")"));
    return {reinterpret_cast<const E*>(in_.region->map.bases[q] + l->in_offset), bytes_ / sizeof(E)};
  }
  // Rank q's span of this call (mine for q == rank()), once q has published
  // it and it is checked to be the same call on the same buffer.
  template <class E>
  std::span<E> peer(int q) const {
    if (q == rank()) return {reinterpret_cast<E*>(at_.region->mine() + at_.offset), bytes_ / sizeof(E)};
    h_->wait(call_, q, base_ | detail::published_phase);
    const auto* l = h_->line(q);
    if (l->call_word != line_call_word() || l->region != at_.region->id || l->bytes != bytes_)
      throw error(call_, rank(), detail::cat("rank ", q, " called a different collective on symmetric memory (buffer ",
                                             l->region, ", ", l->bytes, " bytes, call word ", l->call_word, ") than this rank (buffer ",
                                             at_.region->id, ", ", bytes_, " bytes, call word ", call_word_, ")"));
    if (l->offset > at_.region->map.bytes || bytes_ > at_.region->map.bytes - l->offset)
      throw error(call_, rank(), detail::cat("rank ", q, "'s span (offset ", l->offset, ", ", bytes_,
                                             " bytes) does not fit its buffer of ", at_.region->map.bytes, " bytes"));
    return {reinterpret_cast<E*>(at_.region->map.bases[q] + l->offset), bytes_ / sizeof(E)};
  }
  // Step `k` (0, 1, ...) of what this rank writes is finished; wait for q's.
  void step(std::size_t k) {
    if (k >= detail::max_steps)
      throw error(call_, rank(), detail::cat("a direct algorithm took ", k + 1, " steps; at most ", detail::max_steps, " fit"));
    h_->mine()->seq.store(base_ | step_phase(k), std::memory_order_release);
  }
  void wait_step(int q, std::size_t k) const { h_->wait(call_, q, base_ | step_phase(k)); }
  // I read nobody's memory any more; wait until q (or everyone) says so too.
  void done() { h_->mine()->seq.store(base_ | detail::done_phase, std::memory_order_release); }
  void wait_done(int q) const { h_->wait(call_, q, base_ | detail::done_phase); }
  void wait_all_done() const {
    for (int q = 0; q < size(); ++q)
      if (q != rank()) wait_done(q);
  }

 private:
  static std::uint64_t step_phase(std::size_t k) noexcept { return 2 + k; }
  // The call word of the epoch line also says whether the input is apart:
  // a rank in place must not meet one that left its span unwritten.
  std::uint64_t line_call_word() const noexcept { return call_word_ | (out_of_place_ ? std::uint64_t{1} << 63 : 0); }
  detail::symmetric_heap* h_;
  const char* call_;
  detail::symmetric_heap::found at_, in_;
  std::size_t bytes_;
  std::uint64_t call_word_, base_ = 0, stage_ = 0;
  M mem_;
  bool out_of_place_, streamed_ = false;
  std::span<const std::byte> private_in_;
};

}  // namespace ringtree
