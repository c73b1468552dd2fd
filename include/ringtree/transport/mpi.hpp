#pragma once
// mpi_transport: ringtree over an MPI communicator (Open MPI 4.1, MPI-3.1).
//
// The user's communicator is duplicated, so ringtree's messages can never
// match the user's own. Every message is a non-blocking MPI_Isend/Irecv of
// bytes on one tag; MPI's non-overtaking rule gives the per-pair ordering
// the transport concept promises. Messages longer than MPI's int count are
// sent as several pieces (both ends cut them the same way). Waiting polls
// MPI_Testall against a deadline, so a peer that stalls or dies raises
// ringtree::timeout_error naming it instead of hanging.
//
// After a failed wait (a timeout, a peer's error) the transport is broken:
// every later call raises, naming the first failure. Receives still posted
// are cancelled, so MPI writes into no buffer after the error has been
// raised; sends still posted may yet be read by MPI (Open MPI cannot cancel
// them), so ringtree's scratch is kept for them (mpi_memory.hpp), and the
// caller's buffers of the failed call must stay alive until MPI_Finalize.
// What is safe then (docs/errors.md): destroy the communicator and
// transport and call MPI_Finalize, or end the job at once with abort()
// (MPI_Abort, like NCCL's ncclCommAbort), which is what a job whose peers
// may still be inside the collective should do.
//
// Thread levels: synchronous collectives from one thread need only
// MPI_THREAD_SINGLE (or FUNNELED from the main thread). Anything that runs
// collectives on a background thread (allreduce_async, grad_sync) needs
// MPI_THREAD_SERIALIZED if the program makes no MPI calls of its own
// meanwhile, MPI_THREAD_MULTIPLE if it does; require_thread_level() says so
// with a clear error.
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <memory>
#include <optional>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <ringtree/core/config.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/core/fail_stop.hpp>
#include <ringtree/core/wait.hpp>
#include <ringtree/memory/shared_mapping.hpp>
#include <ringtree/transport/mpi_memory.hpp>
#include <ringtree/transport/shared_segments.hpp>
#include <ringtree/transport/transport.hpp>
#include <ringtree/transport/wait_board.hpp>

namespace ringtree {

namespace detail {

inline const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

inline void check_thread_level(int provided, int required, const std::string& feature, int rank) {
  if (provided < required)
    throw error(feature, rank,
                cat("needs MPI thread level ", thread_level_name(required), " but MPI provides ",
                    thread_level_name(provided), "; initialise MPI with MPI_Init_thread(..., ",
                    thread_level_name(required), ", &provided)"));
}

inline std::string mpi_error_string(int code) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, s, &len);
  return std::string(s, len);
}

}  // namespace detail

struct mpi_options {
  std::optional<std::chrono::duration<double>> timeout{};  // unset: RINGTREE_TIMEOUT (default 300 s)
  // Largest piece one MPI call carries; MPI-3.1 counts are int.
  std::size_t max_piece_bytes = std::size_t{1} << 30;
};

class mpi_transport {
 public:
  using memory_type = mpi_memory;
  static constexpr const char* name = "mpi";

  // Up to 4 pieces (4 GiB) inline, so that small messages allocate nothing.
  class request {
   public:
    request() = default;
    request(request&& o) noexcept { *this = std::move(o); }
    request& operator=(request&& o) noexcept {  // the moved-from request is empty: one owner per handle
      if (this == &o) return *this;
      abandon();
      owner_ = o.owner_;
      n_ = std::exchange(o.n_, 0);
      std::copy(o.small_, o.small_ + inline_pieces, small_);
      std::copy(o.small_len_, o.small_len_ + inline_pieces, small_len_);
      big_ = std::move(o.big_);
      big_len_ = std::move(o.big_len_);
      peer_ = o.peer_;
      recv_ = o.recv_;
      since_ = o.since_;
      return *this;
    }
    // A request never waited for (the stack unwinding after an error) is
    // handed to the transport, which cancels it if it is a receive.
    ~request() { abandon(); }

   private:
    friend class mpi_transport;
    void abandon() noexcept {
      if (n_ != 0 && owner_ != nullptr) owner_->abandon(*this);
      n_ = 0;
    }
    static constexpr std::size_t inline_pieces = 4;
    std::size_t count() const noexcept { return n_; }
    MPI_Request* reqs() noexcept { return n_ <= inline_pieces ? small_ : big_.data(); }
    int* lens() noexcept { return n_ <= inline_pieces ? small_len_ : big_len_.data(); }
    void reserve(std::size_t pieces) {
      n_ = pieces;
      if (pieces > inline_pieces) big_.resize(pieces), big_len_.resize(pieces);
    }
    std::size_t n_ = 0;
    MPI_Request small_[inline_pieces];
    int small_len_[inline_pieces];
    std::vector<MPI_Request> big_;
    std::vector<int> big_len_;
    int peer_ = -1;
    bool recv_ = false;
    mpi_transport* owner_ = nullptr;
    std::chrono::steady_clock::time_point since_{};  // test(): the first that found it pending
  };

  explicit mpi_transport(MPI_Comm comm, mpi_options opt = {}) : opt_(opt) {
    if (!opt_.timeout) opt_.timeout = config::from_env().timeout;
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
      throw error("mpi_transport", -1, "MPI is not initialised (call MPI_Init or MPI_Init_thread first)");
    if (opt_.max_piece_bytes == 0 || opt_.max_piece_bytes > static_cast<std::size_t>(INT_MAX))
      throw error("mpi_transport", -1, detail::cat("max_piece_bytes must be in 1..", INT_MAX, ", got ", opt_.max_piece_bytes));
    check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    // Errors on ringtree's communicator come back as codes and become
    // ringtree::error instead of aborting the job.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm local = MPI_COMM_NULL;  // whether every rank is on this host (symmetric memory)
    check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local), "MPI_Comm_split_type");
    int local_size = 0;
    MPI_Comm_size(local, &local_size);
    MPI_Comm_free(&local);
    int here = local_size == size_ ? 1 : 0;
    check(MPI_Allreduce(MPI_IN_PLACE, &here, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
    one_host_ = here == 1;
  }
  mpi_transport(const mpi_transport&) = delete;
  mpi_transport& operator=(const mpi_transport&) = delete;
  ~mpi_transport() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized || comm_ == MPI_COMM_NULL) return;
    settle_abandoned();
    MPI_Comm_free(&comm_);
  }

  // Ends the whole job now (MPI_Abort with `code`): the way out after a
  // timeout_error when peers may still be inside a collective.
  [[noreturn]] void abort(int code = 1) const noexcept {
    MPI_Abort(comm_ != MPI_COMM_NULL ? comm_ : MPI_COMM_WORLD, code);
    std::abort();  // MPI_Abort does not return; if it did, neither do we
  }
  // Why the transport is broken ("" while it works).
  const std::string& failure() const noexcept { return stop_.failure(); }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  MPI_Comm comm() const noexcept { return comm_; }
  mpi_memory memory() const noexcept { return {{}, parking_.get()}; }

  // Raises unless MPI was initialised with at least `required`.
  void require_thread_level(int required, const std::string& feature) const {
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    detail::check_thread_level(provided, required, feature, rank_);
  }

  // communicator::split: MPI_Comm_split, called by every rank of this one.
  std::unique_ptr<mpi_transport> split(int color, int key, std::span<const int>, int) const {
    MPI_Comm part = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &part), "MPI_Comm_split");
    auto t = std::make_unique<mpi_transport>(part, opt_);
    MPI_Comm_free(&part);
    return t;
  }

  // Symmetric memory (memory/shared_mapping.hpp), a collective call: an MPI-3
  // shared window (MPI_Win_allocate_shared) when every rank of the
  // communicator is on this host; nothing when they are not (symmetric
  // buffers are then plain memory and the usual algorithms run). Freed by
  // MPI_Win_free, collective like every window's: free symmetric buffers
  // in the same order on every rank.
  std::optional<shared_mapping> map_shared(std::size_t bytes) {
    check_usable("symmetric memory");
    if (!one_host_) return std::nullopt;
    // every rank is here (or a timeout names one) before MPI's collectives, which have none
    (void)detail::exchange_all(*this, "symmetric memory", std::uint8_t{1});
    MPI_Comm local = MPI_COMM_NULL;
    check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local), "MPI_Comm_split_type");
    constexpr std::size_t page = 4096, line = 64;
    const std::size_t len = std::max(page, (bytes + page - 1) / page * page);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");  // each rank's region on its own pages
    void* base = nullptr;
    MPI_Win win = MPI_WIN_NULL;
    // A line more than asked: MPI aligns a rank's part to less than a cache
    // line, and the epoch lines need 64 bytes.
    const int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(len + line), 1, info, local, &base, &win);
    MPI_Info_free(&info);
    if (rc != MPI_SUCCESS) {
      MPI_Comm_free(&local);
      check(rc, "MPI_Win_allocate_shared");
    }
    std::memset(base, 0, len + line);  // the owner touches its pages first
    struct window {
      MPI_Win win;
      MPI_Comm comm;
      ~window() {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (finalized) return;
        MPI_Win_free(&win);
        MPI_Comm_free(&comm);
      }
    };
    std::shared_ptr<window> keep(new window{win, local});  // (make_shared of a temporary would free it at once)
    shared_mapping m;
    for (int q = 0; q < size_; ++q) {  // ranks of `local` are ours: split with key = rank
      MPI_Aint got = 0;
      int unit = 0;
      void* at = nullptr;
      check(MPI_Win_shared_query(win, q, &got, &unit, &at), "MPI_Win_shared_query");
      const auto a = reinterpret_cast<std::uintptr_t>(at);
      m.bases.push_back(reinterpret_cast<std::byte*>((a + line - 1) / line * line));
    }
    m.bytes = len;
    m.keep = keep;
    m.peer_problem = [](int) { return std::string(); };  // MPI cannot tell; the timeout does
    m.timeout = *opt_.timeout;
    return m;
  }

  // Control memory and staging, mapped in collective calls (maps_in_calls,
  // memory/shared_mapping.hpp) where every rank is on this host: POSIX segments
  // (memory/segments.hpp), set up with this transport's own messages under its
  // timeout and freed without the peers. (None where the ranks, on one
  // host by name, see different /dev/shm: every rank then gets nothing.)
  bool maps_in_calls() const noexcept { return one_host_; }
  std::optional<shared_mapping> map_control(std::size_t bytes) {
    check_usable("symmetric memory");
    if (!one_host_) return std::nullopt;
    return detail::map_segments(*this, bytes, [](int) { return std::string(); }, *opt_.timeout,
                                detail::sharing::if_one_host);
  }

  // Long waits are published on `board` (the host's ranks' lines,
  // wait_board.hpp), this transport's rank r being rank whole[r] of the
  // board's numbering (empty: the same), and a timeout follows the chain.
  void report_waits(std::shared_ptr<const detail::wait_board> board, std::vector<int> whole = {}) {
    board_ = std::move(board);
    whole_ = std::move(whole);
  }

  // Collectives on a background thread (grad_sync) while the program's own
  // thread makes no MPI calls: MPI_THREAD_SERIALIZED.
  void require_background_thread(const std::string& feature) const {
    require_thread_level(MPI_THREAD_SERIALIZED, feature);
  }

  request isend(int peer, std::span<const std::byte> data) {
    check_usable("isend");
    request r = start(peer, false, data.size());
    for_pieces(data.size(), [&](std::size_t i, std::size_t off, int len) {
      r.lens()[i] = len;
      check(MPI_Isend(data.data() + off, len, MPI_BYTE, peer, tag, comm_, &r.reqs()[i]), "MPI_Isend");
    });
    return r;
  }

  request irecv(int peer, std::span<std::byte> data) {
    check_usable("irecv");
    request r = start(peer, true, data.size());
    for_pieces(data.size(), [&](std::size_t i, std::size_t off, int len) {
      r.lens()[i] = len;
      check(MPI_Irecv(data.data() + off, len, MPI_BYTE, peer, tag, comm_, &r.reqs()[i]), "MPI_Irecv");
    });
    return r;
  }

  void wait(request& r) {
    if (r.count() == 0) return;
    check_usable(r.recv_ ? "recv" : "send");
    failing_with(r, [&] {
      // Spin first (lowest latency; the clock is read only once the wait
      // is not short), then yield, so that oversubscribed ranks let their
      // peers run.
      detail::patience p(*opt_.timeout, detail::pace{2000, 0});
      while (!test_pending(r)) {
        if (!p.idle()) continue;
        if (p.started() && board_) board_->waiting(whole_of(r.peer_));  // a long wait: the host may ask whom for
        if (p.overdue()) timed_out(r);
      }
      if (p.waited_long() && board_) board_->done();
    });
  }
  // Whether a message from `peer` has arrived that no posted receive will
  // take (point to point from any source looks with it).
  // How long a wait on a peer may take (what probing callers wait at most).
  std::chrono::duration<double> timeout() const noexcept { return *opt_.timeout; }
  bool probe(int peer) {
    check_usable("probe");
    int flag = 0;
    check(MPI_Iprobe(peer, tag, comm_, &flag, MPI_STATUS_IGNORE), "MPI_Iprobe");
    return flag != 0;
  }
  // Completes r if MPI has, else returns false at once; raises as wait()
  // does, the timeout counted from the first test that found r pending.
  bool test(request& r) {
    if (r.count() == 0) return true;
    check_usable(r.recv_ ? "recv" : "send");
    bool done = false;
    failing_with(r, [&] {
      done = test_pending(r);
      if (done) return;
      const auto now = std::chrono::steady_clock::now();
      if (r.since_ == decltype(r.since_){}) r.since_ = now;
      else if (now - r.since_ > *opt_.timeout) timed_out(r);
    });
    return done;
  }

 private:
  // f() on request r; if it raises, the transport is broken from then on.
  template <class F>
  void failing_with(request& r, F&& f) {
    stop_.guard(std::forward<F>(f), [&] {
      abandon(r);
      r.n_ = 0;
    });
  }
  // No answer in time: names the peer, or the rank this host's chain of
  // waits leads to from it (wait_board.hpp).
  [[noreturn]] void timed_out(const request& r) const {
    detail::raise_timeout(board_.get(), [&](int q) { return whole_of(q); }, !whole_.empty(), r.recv_ ? "recv" : "send",
                          rank_, size_, r.peer_, opt_.timeout->count(), "");
  }
  int whole_of(int r) const noexcept { return whole_.empty() ? r : whole_[r]; }
  // One MPI_Testall of r's pieces: completes r (and checks what arrived)
  // if they are done.
  bool test_pending(request& r) {
    const int parts = static_cast<int>(r.count());
    MPI_Status small[request::inline_pieces];
    std::vector<MPI_Status> big(r.count() > request::inline_pieces ? r.count() : 0);
    MPI_Status* status = big.empty() ? small : big.data();
    int done = 0;
    if (const int rc = MPI_Testall(parts, r.reqs(), &done, status); rc != MPI_SUCCESS) {
      for (int i = 0; i < parts; ++i)
        if (status[i].MPI_ERROR != MPI_SUCCESS && status[i].MPI_ERROR != MPI_ERR_PENDING)
          throw error(r.recv_ ? "recv" : "send", rank_,
                      detail::cat("with rank ", r.peer_, ": ", detail::mpi_error_string(status[i].MPI_ERROR)));
      check(rc, "MPI_Testall");
    }
    if (!done) return false;
    const int* lens = r.lens();
    r.n_ = 0;
    if (!r.recv_) return true;
    // A longer message fails with MPI_ERR_TRUNCATE; a shorter one must not
    // pass silently either (mismatched calls across ranks).
    for (int i = 0; i < parts; ++i) {
      int got = 0;
      MPI_Get_count(&status[i], MPI_BYTE, &got);
      if (got != lens[i])
        throw error("recv", rank_, detail::cat("rank ", r.peer_, " sent ", got, " bytes where ", lens[i],
                                                " were expected (mismatched collective calls?)"));
    }
    return true;
  }

  void check_usable(const char* call) const { stop_.check(call, rank_); }
  // MPI still owns an unfinished request's pieces: receives are cancelled
  // (they must not write into buffers that are about to be freed), and all
  // are kept until the transport is destroyed.
  void abandon(request& r) noexcept {
    int finalized = 0;
    MPI_Finalized(&finalized);
    for (std::size_t i = 0; i < r.count() && !finalized; ++i) {
      MPI_Request& q = r.reqs()[i];
      if (q == MPI_REQUEST_NULL) continue;
      if (r.recv_) MPI_Cancel(&q);
      else parking_->hold = true;  // MPI may still read it: keep scratch from now on
      abandoned_.push_back(q);
      q = MPI_REQUEST_NULL;
    }
    r.n_ = 0;
  }
  // At destruction: give cancelled receives a moment to be confirmed, then
  // let MPI finish or drop the rest on its own (MPI_Request_free). Sends
  // MPI has not finished may be read until MPI_Finalize: the scratch parked
  // for them is then kept until the process ends (a deliberate leak, after
  // a failure only).
  void settle_abandoned() noexcept {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    int done = abandoned_.empty() ? 1 : 0;
    while (!done) {
      MPI_Testall(static_cast<int>(abandoned_.size()), abandoned_.data(), &done, MPI_STATUSES_IGNORE);
      if (done || std::chrono::steady_clock::now() > until) break;
      sched_yield();
    }
    for (auto& q : abandoned_)
      if (q != MPI_REQUEST_NULL) MPI_Request_free(&q);
    abandoned_.clear();
    if (!done) new std::shared_ptr<detail::mpi_parking>(parking_);  // never freed: MPI may still read it
  }

  static constexpr int tag = 0x5254;  // 'RT'

  request start(int peer, bool recv, std::size_t bytes) {
    if (peer < 0 || peer >= size_)
      throw error(recv ? "irecv" : "isend", rank_, detail::cat("peer ", peer, " is out of range for ", size_, " ranks"));
    request r;
    r.owner_ = this;
    r.peer_ = peer;
    r.recv_ = recv;
    r.reserve(bytes == 0 ? 1 : (bytes + opt_.max_piece_bytes - 1) / opt_.max_piece_bytes);
    return r;
  }
  // Cuts `bytes` into pieces MPI's int count accepts; both ends cut alike.
  template <class F>
  void for_pieces(std::size_t bytes, F post) const {
    std::size_t off = 0, i = 0;
    do {
      const std::size_t len = std::min(opt_.max_piece_bytes, bytes - off);
      post(i++, off, static_cast<int>(len));
      off += len;
    } while (off < bytes);
  }
  void check(int code, const char* what) const {
    if (code != MPI_SUCCESS) throw error(what, rank_, detail::mpi_error_string(code));
  }

  mpi_options opt_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  bool one_host_ = false;  // every rank on this host (MPI_COMM_TYPE_SHARED)
  detail::fail_stop stop_{"this mpi_transport failed earlier and cannot be used again (destroy it, then MPI_Finalize, or abort() the job)"};
  std::vector<MPI_Request> abandoned_;   // requests MPI still owns after a failure
  std::shared_ptr<detail::mpi_parking> parking_ = std::make_shared<detail::mpi_parking>();
  std::shared_ptr<const detail::wait_board> board_;  // this host's long waits (report_waits), if any
  std::vector<int> whole_;                           // rank r here is rank whole_[r] on the board
};

}  // namespace ringtree
