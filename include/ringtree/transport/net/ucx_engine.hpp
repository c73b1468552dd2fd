#pragma once
// The UCX side of net_transport (transport/net.hpp): one context and worker
// per group of ranks, an endpoint to each peer, and the failure notes. It
// knows nothing of ringtree's messages or tags beyond the note's part 0.
#include <poll.h>
#include <sched.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <ringtree/core/error.hpp>
#include <ringtree/core/fail_stop.hpp>
#include <ringtree/transport/bootstrap.hpp>

namespace ringtree::detail {

// One UCX context and worker for a group of ranks, with an endpoint to
// every other rank: shared by a net_transport and its splits.
class ucx_engine {
  // UCX before 1.16 picks its protocols the old way by default: over TCP a
  // large message goes by rendezvous, whose control messages queue behind
  // the data flowing the other way, and the link idles meanwhile: a ring
  // across two emulated 1 Gbit/s hosts used 60% of it (bench/RESULTS.md).
  // The newer selection, 1.16's default, prices each protocol per transport
  // and streams there (92%), while RDMA keeps its zero-copy rendezvous.
  // UCX_PROTO_ENABLE set by the user wins; a UCX without the key ignores it.
  static void prefer_new_protocols(ucp_config_t* config) noexcept {
    unsigned major = 0, minor = 0, release = 0;
    ucp_get_version(&major, &minor, &release);
    if (std::getenv("UCX_PROTO_ENABLE") == nullptr && (major < 1 || (major == 1 && minor < 16)))
      (void)ucp_config_modify(config, "PROTO_ENABLE", "y");
  }

 public:
  explicit ucx_engine(bootstrap& b) : rank_(b.rank()), size_(b.size()) {
    ucp_config_t* config = nullptr;
    check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
    prefer_new_protocols(config);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;  // (sleep() below)
    params.request_size = sizeof(std::size_t);  // a receive's length, written by received() below
    const ucs_status_t made = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    check(made, "ucp_init");
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_MULTI;  // a communicator's progress thread may call it beside the program's
    check(ucp_worker_create(context_, &wp, &worker_), "ucp_worker_create");
    if (ucp_worker_get_efd(worker_, &efd_) != UCS_OK) efd_ = -1;
    ucp_address_t* address = nullptr;
    std::size_t length = 0;
    check(ucp_worker_get_address(worker_, &address, &length), "ucp_worker_get_address");
    // What a rank publishes: where it runs (for errors), then UCX's address.
    const std::string where = cat("pid ", getpid(), " on ", host_identity().substr(0, host_identity().find('/')));
    std::vector<std::byte> mine(where.size() + 1 + length);
    std::memcpy(mine.data(), where.c_str(), where.size() + 1);
    std::memcpy(mine.data() + where.size() + 1, address, length);
    ucp_worker_release_address(worker_, address);
    const auto all = b.allgather("net_transport: UCX addresses", mine);
    peers_ = std::vector<peer>(static_cast<std::size_t>(size_));  // (atomics: made in place, never moved)
    for (int q = 0; q < size_; ++q) {
      const auto& v = all[q];
      const auto end = std::find(v.begin(), v.end(), std::byte{0});
      peers_[q].where = std::string(reinterpret_cast<const char*>(v.data()), static_cast<std::size_t>(end - v.begin()));
      if (q == rank_) continue;
      if (end == v.end() || end + 1 == v.end())
        throw error("net_transport", rank_, cat("rank ", q, " published no UCX address"));
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.address = reinterpret_cast<const ucp_address_t*>(&*(end + 1));
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = &ucx_engine::peer_failed;
      ep.err_handler.arg = &peers_[q];
      ucp_ep_h made_ep = nullptr;
      if (const ucs_status_t s = ucp_ep_create(worker_, &ep, &made_ep); s != UCS_OK)
        throw error("net_transport", rank_, cat("cannot reach rank ", q, " (", peers_[q].where, "): ", ucs_status_string(s)));
      peers_[q].ep.store(made_ep, std::memory_order_release);
    }
    listen_for_notes();
  }
  ucx_engine(const ucx_engine&) = delete;
  ucx_engine& operator=(const ucx_engine&) = delete;
  ~ucx_engine() {
    if (notes_ != nullptr) {  // the note receive, cancelled before the worker goes
      ucp_request_cancel(worker_, notes_);
      ucp_request_free(notes_);
    }
    close_all(false);
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    if (context_ != nullptr) ucp_cleanup(context_);
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  ucp_worker_h worker() const noexcept { return worker_; }
  // Null once closed (this engine failed, or is going).
  ucp_ep_h ep(int q) const noexcept { return peers_[q].ep.load(std::memory_order_acquire); }
  // Whether rank q failed (its endpoint's error, or its failure note), and
  // why: "" while it is reachable. UCX's callbacks set them, in whichever
  // thread drives the worker: the text is written once, before the flag.
  bool failed(int q) const noexcept { return peers_[q].failed.load(std::memory_order_acquire); }
  const std::string& failure_of(int q) const noexcept {
    static const std::string none;
    return failed(q) ? peers_[q].failure : none;
  }
  const std::string& where(int q) const noexcept { return peers_[q].where; }
  // The first rank whose failure note arrived, else -1 (its failure_of()
  // says why). Its peers cannot finish a collective with it.
  int noted() const noexcept { return noted_.load(std::memory_order_acquire); }
  // A long wait's pause: until the worker has an event (a message, a
  // peer's failure) or `most` has passed, at once if one is pending. The
  // core is free meanwhile, for the ranks beside this one and for the
  // kernel's TCP, which moves this rank's bytes (a yielding loop left it
  // little where ranks outnumber cores). Where UCX has no event file
  // descriptor, a yield.
  void sleep(std::chrono::milliseconds most) noexcept {
    if (efd_ < 0) {
      sched_yield();
      return;
    }
    // UCX's order: progress until nothing moves, then arm.
    while (ucp_worker_progress(worker_) != 0) {
    }
    // UCS_ERR_BUSY: events wait to be progressed, or (TCP) this rank's
    // sends are in flight and need its progress; give the core away once
    // first, as a yielding loop did, or the busy loop starves the kernel's
    // TCP beside it.
    if (ucp_worker_arm(worker_) != UCS_OK) {
      sched_yield();
      return;
    }
    pollfd p{efd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(most.count())) > 0 && ucp_worker_progress(worker_) == 0) {
      // Readable with nothing to progress: UCX 1.13 leaves it so for as
      // long as a peer's connection is half made (that peer busy
      // elsewhere), and a wait that polled again would spin. A short nap.
      timespec nap{0, 500'000};
      nanosleep(&nap, nullptr);
    }
  }
  // Fail-stop for the transport and all its splits: one failure tells
  // every peer (a note) and closes every endpoint.
  fail_stop stop{"this net_transport failed earlier and cannot be used again"};
  void fail(const std::string& why) noexcept {
    if (stop.failed()) return;
    stop.fail(why);
    tell_peers(why);
    close_all(true);
  }

  // Every endpoint closed; `force`: at once, cancelling what UCX still
  // holds (the peers see the connection reset), else after flushing.
  void close_all(bool force) noexcept {
    std::vector<void*> closing;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    for (auto& q : peers_) {
      const ucp_ep_h e = q.ep.exchange(nullptr, std::memory_order_acq_rel);
      if (e == nullptr) continue;
      // (UCX wants a failed peer's endpoint closed by force)
      p.flags = force || q.failed.load(std::memory_order_acquire) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
      void* r = ucp_ep_close_nbx(e, &p);
      if (UCS_PTR_IS_PTR(r)) closing.push_back(r);
    }
    // A flushing close waits for the peer's acknowledgements: bounded, so
    // that a dead peer cannot hold up the exit.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(force ? 1 : 5);
    for (void* r : closing) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS && std::chrono::steady_clock::now() < until)
        ucp_worker_progress(worker_);
      if (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_request_cancel(worker_, r);
      ucp_request_free(r);
    }
  }

 private:
  struct peer {
    std::string where;    // "pid P on HOST"
    std::atomic<ucp_ep_h> ep{nullptr};
    std::string failure;  // why it failed: written once, then `failed` set
    std::atomic<bool> failed{false};
  };
  // The first cause wins. UCX runs callbacks one at a time (the worker's
  // lock), so the only race is with readers, which look at `failed` first.
  // The endpoint stays open (a send on it fails) until close_all: closing it
  // here, in whichever thread drives the worker, would pull it from under a
  // post in another.
  static void set_failure(peer& p, std::string why) {
    if (p.failed.load(std::memory_order_relaxed)) return;
    p.failure = std::move(why);
    p.failed.store(true, std::memory_order_release);
  }
  static void peer_failed(void* arg, ucp_ep_h, ucs_status_t status) {
    set_failure(*static_cast<peer*>(arg), ucs_status_string(status));
  }
  // Notes travel on part 0 of the tag (transports number from 1), the
  // sender's rank below it, as every message's tag.
  static constexpr std::uint64_t note_mask = ~std::uint64_t{0} << 32;
  static constexpr std::size_t note_max = 512;
  void listen_for_notes() {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.cb.recv = &ucx_engine::note_arrived;
    p.user_data = this;
    void* r = ucp_tag_recv_nbx(worker_, note_in_.data(), note_in_.size(), 0, note_mask, &p);
    if (UCS_PTR_IS_ERR(r)) check(UCS_PTR_STATUS(r), "ucp_tag_recv_nbx (failure notes)");
    notes_ = r;
  }
  static void note_arrived(void*, ucs_status_t status, const ucp_tag_recv_info_t* info, void* arg) {
    auto* e = static_cast<ucx_engine*>(arg);
    if (status != UCS_OK && status != UCS_ERR_MESSAGE_TRUNCATED) return;  // cancelled: the engine is closing
    const auto q = static_cast<int>(info->sender_tag & 0xffffffffu);
    if (q < 0 || q >= e->size_ || q == e->rank_) return;
    set_failure(e->peers_[q], cat("it failed: ", std::string(e->note_in_.data(), std::min(info->length, e->note_in_.size()))));
    int none = -1;  // (a progress thread may run this beside a wait)
    e->noted_.compare_exchange_strong(none, q, std::memory_order_release);
  }
  // Every reachable peer gets why, as far as it goes in a short bound (the
  // sends are small: they leave at once where the connection is up).
  void tell_peers(const std::string& why) noexcept {
    note_out_ = why.substr(0, note_max);
    std::vector<void*> sending;
    ucp_request_param_t p{};
    for (int q = 0; q < size_; ++q) {
      const ucp_ep_h e = ep(q);
      if (q == rank_ || e == nullptr || failed(q)) continue;
      void* r = ucp_tag_send_nbx(e, note_out_.data(), note_out_.size(), static_cast<std::uint32_t>(rank_), &p);
      if (UCS_PTR_IS_PTR(r)) sending.push_back(r);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    for (void* r : sending) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS && std::chrono::steady_clock::now() < until)
        ucp_worker_progress(worker_);
      ucp_request_free(r);  // (one still in flight is cancelled by the forced close)
    }
  }
  void check(ucs_status_t s, const char* call) const {
    if (s != UCS_OK) throw error("net_transport", rank_, cat(call, ": ", ucs_status_string(s)));
  }

  int rank_, size_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<peer> peers_;  // stable: the error handlers hold pointers into it
  std::array<char, note_max> note_in_{};
  std::string note_out_;     // lives until the sends are done
  void* notes_ = nullptr;    // the posted note receive
  int efd_ = -1;             // the worker's event file descriptor (sleep())
  std::atomic<int> noted_{-1};
};

}  // namespace ringtree::detail
