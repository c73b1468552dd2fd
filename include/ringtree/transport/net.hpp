#pragma once
// net_transport: ringtree between hosts without MPI, on UCX's tag API
// (UCP; Debian's libucx 1.13: TCP here, RDMA verbs where the hardware has
// them). The ranks find each other through a bootstrap the caller provides
// (transport/bootstrap.hpp: a torch store, RINGTREE_ROOT=host:port, MPI).
//
// Why UCX (not gloo's transport library): it is the engine UCC and Open
// MPI build on, it picks the fastest path between two hosts at run time
// (TCP, verbs, several rails), its tag matching keeps MPI's
// non-overtaking order (all the transport concept asks), and it is a C
// API, so this header needs no C++ library of a given ABI.
//
// Messages: one UCX tag message per isend, the tag naming the transport
// (each split gets its own number) and the sender, matched with the full
// mask; UCX keeps the order between a pair. Waiting drives UCX's progress
// under the same patience as every transport (spin, yield, then check and
// time out), sleeping on UCX's event descriptor in a long wait. A peer
// that dies is noticed through UCX's peer error handling (the connection
// resets): every wait on it raises naming it, at once.
// After a failure (a timeout, a dead peer, this rank's abort()) the
// transport sends every peer a failure note (why, on a tag of its own that
// no transport uses), then closes every endpoint at once, which cancels
// what UCX still held of this rank's calls. Each rank keeps a receive
// posted for the notes, so a peer's wait raises as soon as one arrives,
// whichever rank it waits on (UCX 1.13 tells a peer nothing when an
// endpoint closes; only the process's exit resets its connections).
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <ringtree/core/config.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/core/fail_stop.hpp>
#include <ringtree/core/wait.hpp>
#include <ringtree/memory/host_memory.hpp>
#include <ringtree/transport/bootstrap.hpp>
#include <ringtree/transport/net/ucx_engine.hpp>
#include <ringtree/transport/transport.hpp>
#include <ringtree/transport/wait_board.hpp>

namespace ringtree {

struct net_options {
  std::optional<std::chrono::duration<double>> timeout{};  // unset: RINGTREE_TIMEOUT (default 300 s)
};

class net_transport {
 public:
  using memory_type = host_memory;
  static constexpr const char* name = "net";

  class request {
   public:
    request() = default;
    request(request&& o) noexcept { *this = std::move(o); }
    request& operator=(request&& o) noexcept {
      if (this == &o) return *this;
      abandon();
      ucx_ = std::exchange(o.ucx_, nullptr);
      pending_ = std::exchange(o.pending_, false);
      owner_ = o.owner_;
      peer_ = o.peer_;
      recv_ = o.recv_;
      bytes_ = o.bytes_;
      got_ = o.got_;
      since_ = o.since_;
      return *this;
    }
    ~request() { abandon(); }

   private:
    friend class net_transport;
    void abandon() noexcept {
      if (pending_ && owner_ != nullptr) owner_->abandon(*this);
      pending_ = false;
    }
    void* ucx_ = nullptr;   // UCX's request while in flight (null: completed when posted)
    bool pending_ = false;  // not yet completed by wait/test
    net_transport* owner_ = nullptr;
    int peer_ = -1;
    bool recv_ = false;
    std::size_t bytes_ = 0, got_ = 0;  // posted; received
    std::chrono::steady_clock::time_point since_{};
  };

  // Collective over the bootstrap's ranks: every rank publishes its UCX
  // address and connects to every other.
  explicit net_transport(bootstrap& b, net_options opt = {}) : opt_(opt) {
    if (!opt_.timeout) opt_.timeout = config::from_env().timeout;
    engine_ = std::make_shared<detail::ucx_engine>(b);
    rank_ = engine_->rank();
    size_ = engine_->size();
    for (int q = 0; q < size_; ++q) whole_.push_back(q);
  }
  net_transport(const net_transport&) = delete;
  net_transport& operator=(const net_transport&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  memory_type memory() const noexcept { return {}; }
  std::chrono::duration<double> timeout() const noexcept { return *opt_.timeout; }
  const std::string& failure() const noexcept { return engine_->stop.failure(); }

  request isend(int peer, std::span<const std::byte> data) {
    request r = start(peer, false, data.size(), "isend");
    ucp_request_param_t p{};
    r.ucx_ = take(ucp_tag_send_nbx(endpoint(peer, "isend"), data.data(), data.size(), tag(rank_), &p), r);
    return r;
  }
  request irecv(int peer, std::span<std::byte> data) {
    request r = start(peer, true, data.size(), "irecv");
    ucp_request_param_t p{};
    // Always a request, whose callback gives the length: UCX 1.13 leaves
    // recv_info's length 0 where a receive completes as it is posted.
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.cb.recv = &net_transport::received;
    r.ucx_ = take(ucp_tag_recv_nbx(engine_->worker(), data.data(), data.size(), tag(peer), full_mask, &p), r);
    return r;
  }

  void wait(request& r) {
    if (!r.pending_) return;
    failing_with(r, [&] {
      // A short spin (each look drives UCX's progress: on TCP, a system
      // call), then sleep on UCX's events between looks: a message wakes
      // the wait at once, so nothing is gained by yielding in a loop.
      detail::patience pat(*opt_.timeout, detail::pace{200, 0, true});
      while (!test_pending(r)) {
        if (!pat.idle()) continue;
        if (pat.started() && board_) board_->waiting(whole_[r.peer_]);  // a long wait: the host may ask whom for
        if (pat.overdue()) timed_out(r);
        engine_->sleep(std::chrono::milliseconds(2));
      }
      if (pat.waited_long() && board_) board_->done();
    });
  }
  bool test(request& r) {
    if (!r.pending_) return true;
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
  // Long waits are published on `board` (the host's ranks' lines), in the
  // numbers of the transport this one was split from (which its parts
  // know already: `whole` is not needed), and a timeout follows the chain.
  void report_waits(std::shared_ptr<const detail::wait_board> board, const std::vector<int>& = {}) { board_ = std::move(board); }

  // Whether a message from `peer` has arrived that no posted receive takes.
  bool probe(int peer) {
    check_usable("probe", peer);
    ucp_worker_progress(engine_->worker());
    ucp_tag_recv_info_t info{};
    return ucp_tag_probe_nb(engine_->worker(), tag(peer), full_mask, 0, &info) != nullptr;
  }

  // This rank gives up: every peer gets its failure note, so their waits
  // raise at once instead of timing out, and every endpoint closes.
  void abort() noexcept { engine_->fail(detail::cat("rank ", rank_, " called abort()")); }

  // communicator::split: a transport over `members` (this one's ranks),
  // sharing the UCX worker and endpoints; its messages carry a number of
  // its own, the same on every member (splits are collective, in order).
  std::unique_ptr<net_transport> split(int color, int, std::span<const int> members, int index) {
    check_usable("split", -1);
    const std::uint32_t n = ++splits_;
    auto t = std::unique_ptr<net_transport>(new net_transport(*this));
    t->part_ = static_cast<std::uint32_t>((part_ * 0x9e3779b1u) ^ (n * 0x85ebca6bu) ^ (static_cast<std::uint32_t>(color) * 0xc2b2ae35u)) | 1u;
    t->rank_ = index;
    t->size_ = static_cast<int>(members.size());
    t->whole_.clear();
    for (int m : members) t->whole_.push_back(whole_[m]);
    return t;
  }

 private:
  explicit net_transport(net_transport& parent) : opt_(parent.opt_), engine_(parent.engine_) {}

  // The tag: this transport's number, then the sender's rank in it.
  // UCX calls it when a receive completes later than it was posted: the
  // length goes into the request's own space (context: request_size).
  static void received(void* ucx, ucs_status_t, const ucp_tag_recv_info_t* info, void*) {
    *static_cast<std::size_t*>(ucx) = info->length;
  }
  std::uint64_t tag(int sender) const noexcept { return std::uint64_t{part_} << 32 | static_cast<std::uint32_t>(sender); }
  static constexpr std::uint64_t full_mask = ~std::uint64_t{0};

  request start(int peer, bool recv, std::size_t bytes, const char* call) {
    check_usable(call, peer);
    if (peer < 0 || peer >= size_ || peer == rank_)
      throw error(call, rank_, detail::cat("peer ", peer, " is not another rank of ", size_));
    request r;
    r.owner_ = this;
    r.peer_ = peer;
    r.recv_ = recv;
    r.bytes_ = bytes;
    r.pending_ = true;
    return r;
  }
  // The endpoint to `peer`, which must not have failed.
  ucp_ep_h endpoint(int peer, const char* call) {
    const ucp_ep_h e = engine_->ep(whole_[peer]);
    if (e == nullptr || engine_->failed(whole_[peer])) peer_gone(call, peer);
    return e;
  }
  [[noreturn]] void peer_gone(const char* call, int peer) {
    const std::string why = detail::cat("rank ", peer, " (", engine_->where(whole_[peer]), ") failed or left: ",
                                        engine_->failure_of(whole_[peer]));
    engine_->fail(why);
    throw error(call, rank_, why);
  }
  // A member's failure note arrived: no collective of this transport can
  // finish (a note from a rank outside a split does not end the split).
  void noted_gone(const char* call) {
    const auto it = std::find(whole_.begin(), whole_.end(), engine_->noted());
    if (it != whole_.end()) peer_gone(call, static_cast<int>(it - whole_.begin()));
  }
  // UCX's answer to a post: a request, null (done already) or an error.
  void* take(void* posted, request& r) {
    if (UCS_PTR_IS_ERR(posted)) {
      r.pending_ = false;
      const std::string why = detail::cat("with rank ", r.peer_, " (", engine_->where(whole_[r.peer_]), "): ",
                                          ucs_status_string(UCS_PTR_STATUS(posted)));
      engine_->fail(why);
      throw error(r.recv_ ? "irecv" : "isend", rank_, why);
    }
    return posted;
  }

  // One look: drives UCX, then completes r if it is done; raises where the
  // peer has failed or the message is not what was posted.
  bool test_pending(request& r) {
    ucp_worker_progress(engine_->worker());
    const char* call = r.recv_ ? "recv" : "send";
    if (r.ucx_ != nullptr) {
      ucs_status_t s;
      s = ucp_request_check_status(r.ucx_);
      if (r.recv_ && s == UCS_OK) r.got_ = *static_cast<std::size_t*>(r.ucx_);
      if (s == UCS_INPROGRESS) {
        if (engine_->failed(whole_[r.peer_])) peer_gone(call, r.peer_);
        if (engine_->noted() >= 0) noted_gone(call);
        return false;
      }
      ucp_request_free(r.ucx_);
      r.ucx_ = nullptr;
      if (s == UCS_ERR_MESSAGE_TRUNCATED)
        throw error(call, rank_, detail::cat("rank ", r.peer_, " sent more than the ", r.bytes_, " bytes expected (mismatched collective calls?)"));
      if (s != UCS_OK)
        throw error(call, rank_, detail::cat("with rank ", r.peer_, " (", engine_->where(whole_[r.peer_]), "): ", ucs_status_string(s)));
    }
    r.pending_ = false;
    if (r.recv_ && r.got_ != r.bytes_)
      throw error(call, rank_, detail::cat("rank ", r.peer_, " sent ", r.got_, " bytes where ", r.bytes_, " were expected (mismatched collective calls?)"));
    return true;
  }

  template <class F>
  void failing_with(request& r, F&& f) {
    check_usable(r.recv_ ? "recv" : "send", r.peer_);
    try {
      std::forward<F>(f)();
    } catch (const error& e) {
      abandon(r);
      engine_->fail(e.what());  // cancels what UCX holds of ours
      throw;
    }
  }
  // No answer in time: names the peer, or the rank this host's chain of
  // waits leads to from it (wait_board.hpp).
  [[noreturn]] void timed_out(const request& r) const {
    detail::raise_timeout(board_.get(), [&](int q) { return whole_[q]; }, part_ != 1, r.recv_ ? "recv" : "send", rank_,
                          size_, r.peer_, opt_.timeout->count(), detail::cat(" (", engine_->where(whole_[r.peer_]), ")"));
  }
  void check_usable(const char* call, int) const { engine_->stop.check(call, rank_); }

  // A request given up before it completed (an error unwinding): a
  // receive is cancelled, so that UCX writes into no buffer from now on; a
  // send UCX may still read, so the endpoints close at once (which
  // cancels it) and the transport is failed.
  void abandon(request& r) noexcept {
    if (r.ucx_ != nullptr) {
      if (r.recv_) ucp_request_cancel(engine_->worker(), r.ucx_);
      ucp_request_free(r.ucx_);
      r.ucx_ = nullptr;
      if (!r.recv_ && !engine_->stop.failed())
        engine_->fail(detail::cat("a send to rank ", r.peer_, " was given up before it completed"));
    }
    r.pending_ = false;
  }

  net_options opt_;
  std::shared_ptr<detail::ucx_engine> engine_;
  int rank_ = 0, size_ = 1;
  std::uint32_t part_ = 1, splits_ = 0;
  std::vector<int> whole_;  // rank r here is rank whole_[r] of the engine
  std::shared_ptr<const detail::wait_board> board_;  // this host's long waits (report_waits), if any
};

}  // namespace ringtree
