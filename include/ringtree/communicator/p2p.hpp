#pragma once
// Point to point on a communicator: a header (tag, element type, count),
// then the data, both posted at once by the sender. The receiver matches
// messages to receives by tag (p2p_matcher), then checks type and count,
// so a mismatched pair raises on both ranks.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/core/config.hpp>
#include <ringtree/core/dtype.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree {
// recv's peer for "whichever rank sends first" (with a transport that can
// probe: threads, shared memory, MPI, the cluster's).
inline constexpr int any_source = -1;
}  // namespace ringtree

namespace ringtree::detail {

struct p2p_header {
  std::int64_t tag;
  std::uint64_t type;
  std::uint64_t count;
  std::uint64_t bytes;
};

inline void check_peer(const char* call, int rank, int size, int peer) {
  if (peer < 0 || peer >= size || peer == rank)
    throw error(call, rank, cat("peer ", peer, " is not another rank of ", size));
}

// A posted send on a transport `View` (header and body): poll() moves it
// along and says whether it is done (the progress engine's), complete()
// waits for it (a blocking call's).
template <class View>
struct p2p_posted {
  p2p_posted(View view, p2p_header header) : l(std::move(view)), h(header) {}
  View l;
  p2p_header h;
  typename View::request head, body;
  bool head_done = false;
  bool poll() {
    if (!head_done && !(head_done = test(l, head))) return false;
    return test(l, body);
  }
  void complete() {
    l.wait(head);
    head_done = true;
    l.wait(body);
  }
  // (requests are move-only, std::function copies: posted messages live
  // behind a shared_ptr)
  static std::function<bool()> polled(std::shared_ptr<p2p_posted> m) {
    return [m] { return m->poll(); };
  }
};

template <class View, element E>
std::shared_ptr<p2p_posted<View>> post_send(View view, std::span<const E> data, int peer, int tag) {
  check_peer("send", view.rank(), view.size(), peer);
  auto m = std::make_shared<p2p_posted<View>>(std::move(view), p2p_header{tag, std::uint64_t(dtype_of<E>), data.size(), data.size_bytes()});
  m->head = m->l.isend(peer, std::as_bytes(std::span<const p2p_header>(&m->h, 1)));
  m->body = m->l.isend(peer, std::as_bytes(data));
  return m;
}

// Receives matched to messages by tag, as MPI and gloo match them.
// Messages between two ranks arrive in the order they were sent; a
// receive takes the first one from its peer with its tag. One that arrives
// before its receive (the receiver awaited another tag first) is kept,
// body and all, until a receive asks for it. Headers are received from a
// peer only while a receive waits on that peer, so nothing is left posted
// that no one waits for; a receive from any source receives a header
// only from a peer whose message has arrived (the transport's probe()).
// One per communicator, shared by its receives.
template <class View>
class p2p_matcher {
  using request = typename View::request;
  struct kept {  // a message that came before its receive
    int peer;
    p2p_header h;
    std::vector<std::byte> data;
    request body;
    bool in = false;
  };
  struct receive {
    int peer, tag;  // (peer: any_source too)
    int* source;    // where the sender's rank is written, if asked
    std::span<std::byte> dst;
    std::uint64_t type, count;
    std::shared_ptr<kept> from;  // matched to a kept message
    request body;                // matched on arrival: received in place
    // From any source, nothing waits on a transport until a peer's message
    // arrives, so no transport's timeout runs: the receive keeps its own.
    std::chrono::steady_clock::time_point deadline;
    bool matched = false, done = false;
    bool takes(int p, std::int64_t t) const noexcept { return (peer == p || peer == any_source) && tag == t; }
  };
  struct head {
    p2p_header h{};
    request r;
    bool posted = false;
  };

 public:
  // Posts a receive of `data` from `peer` (or any_source) with `tag`;
  // returns its poll (true once the data is in; raises on a mismatch or a
  // failed peer). The sender's rank goes to *source, if given, once known.
  template <element E>
  std::function<bool()> post(View view, std::span<E> data, int peer, int tag, int* source = nullptr) {
    if (peer == any_source) {
      if constexpr (!probing_transport<View>)
        throw error("recv", view.rank(), "receiving from any source needs a transport that can probe() (threads, shared memory, MPI)");
    } else {
      check_peer("recv", view.rank(), view.size(), peer);
    }
    std::lock_guard lk(m_);
    if (heads_.empty()) heads_.resize(view.size());
    auto w = std::make_shared<receive>(receive{peer, tag, source, std::as_writable_bytes(data), std::uint64_t(dtype_of<E>),
                                               data.size(), nullptr, {}, std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_of(view)),
                                               false, false});
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if (w->takes((*it)->peer, (*it)->h.tag)) {
        w->from = *it;
        w->matched = true;
        if (source) *source = (*it)->peer;
        kept_.erase(it);
        break;
      }
    if (!w->matched) waiting_.push_back(w);
    return [this, view = std::move(view), w]() mutable {
      std::lock_guard lk(m_);
      return poll(view, *w);
    };
  }

 private:
  bool poll(View& l, receive& w) {
    if (w.done) return true;
    if (!failed_.empty()) throw error("recv", l.rank(), failed_);
    advance(l);
    if (!w.matched) {
      if (w.peer == any_source && std::chrono::steady_clock::now() > w.deadline)
        throw timeout_error("recv", l.rank(), any_source,
                            waited_whole_timeout(std::chrono::duration<double>(timeout_of(l)).count(),
                                                 cat("a message with tag ", w.tag, " from any rank"), ": no rank sent one"));
      return false;
    }
    if (w.from) {
      if (!w.from->in) return false;
      check(l.rank(), w, w.from->peer, w.from->h);
      std::copy(w.from->data.begin(), w.from->data.end(), w.dst.begin());
    } else if (!test(l, w.body)) {
      return false;
    }
    return w.done = true;
  }
  // Receives the headers the waiting receives need, and the bodies of
  // messages in flight.
  void advance(View& l) {
    for (auto& k : all_kept_)
      if (!k->in) k->in = test(l, k->body);
    std::erase_if(all_kept_, [](const auto& k) { return k->in; });
    const bool any = std::any_of(waiting_.begin(), waiting_.end(), [](const auto& w) { return w->peer == any_source; });
    for (int p = 0; p < int(heads_.size()); ++p) {
      if (p == l.rank()) continue;
      auto& hd = heads_[p];
      while (true) {
        if (!hd.posted) {
          if (std::none_of(waiting_.begin(), waiting_.end(), [p](const auto& w) { return w->peer == p; }) &&
              !(any && probe(l, p)))
            break;
          hd.r = l.irecv(p, std::as_writable_bytes(std::span<p2p_header>(&hd.h, 1)));
          hd.posted = true;
        }
        if (!test(l, hd.r)) break;
        hd.posted = false;
        arrived(l, p, hd.h);
      }
    }
  }
  // A header from p: its body goes to the first receive waiting for its
  // tag, or is kept.
  void arrived(View& l, int p, const p2p_header& h) {
    if (h.type > 255 || size_of(dtype(h.type)) == 0 || h.bytes != h.count * size_of(dtype(h.type)))
      throw error("recv", l.rank(), failed_ = cat("rank ", p, " sent something other than a point-to-point message (a collective's? "
                                                   "the calls of the two ranks do not match)"));
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      auto& w = **it;
      if (!w.takes(p, h.tag)) continue;
      w.matched = true;
      if (w.source) *w.source = p;
      waiting_.erase(it);  // (w stays alive: its poll holds it)
      check(l.rank(), w, p, h);
      w.body = l.irecv(p, w.dst);
      return;
    }
    auto k = std::make_shared<kept>(kept{p, h, std::vector<std::byte>(h.bytes), {}, false});
    k->body = l.irecv(p, std::span<std::byte>(k->data));
    kept_.push_back(k);
    all_kept_.push_back(k);
  }
  // A mismatched pair: its body is not received, so nothing after it on
  // this pair can be; every receive of this communicator raises from now.
  void check(int rank, const receive& w, int p, const p2p_header& h) {
    if (h.type != w.type || h.count != w.count)
      throw error("recv", rank, failed_ = cat("rank ", p, " sent ", h.count, " elements of ", to_string(dtype(h.type)),
                                    " with tag ", h.tag, ", but this rank receives ", w.count, " elements of ",
                                    to_string(dtype(w.type)), " with tag ", w.tag));
  }

  // How long the transport waits on a peer (RINGTREE_TIMEOUT where it cannot say).
  static std::chrono::duration<double> timeout_of(const View& l) {
    if constexpr (timed_transport<View>) return l.timeout();
    else return default_timeout();
  }
  static bool probe(View& l, int p) {
    if constexpr (probing_transport<View>) return l.probe(p);
    else return false;
  }

  std::mutex m_;
  std::string failed_;
  std::vector<head> heads_;                       // per peer: the header being received
  std::deque<std::shared_ptr<receive>> waiting_;  // receives not matched yet, in posting order
  std::deque<std::shared_ptr<kept>> kept_;        // messages no receive has taken yet, in arrival order
  std::vector<std::shared_ptr<kept>> all_kept_;   // kept messages whose bodies are still coming
};

// A blocking call's wait on a poll: spins briefly, then sleeps in growing
// steps (up to 1 ms) so that a long wait leaves the core to others.
inline void poll_until(const std::function<bool()>& done) {
  for (int idle = 0; !done(); ++idle) {
    if (idle < 64) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 << std::min(idle - 64, 7))));
  }
}

}  // namespace ringtree::detail
