#pragma once
// Point to point on a communicator: a header (tag, element type, count),
// then the data. Both are posted at once; the receiver checks the header
// before it takes the data, so a mismatched pair raises on both ranks.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include <ringtree/core/dtype.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree::detail {

struct p2p_header {
  std::int64_t tag;
  std::uint64_t type;
  std::uint64_t count;
};

inline void check_peer(const char* call, int rank, int size, int peer) {
  if (peer < 0 || peer >= size || peer == rank)
    throw error(call, rank, cat("peer ", peer, " is not another rank of ", size));
}

// A posted message on a transport `Lane`: poll() moves it along and says
// whether it is done (the progress engine's), complete() waits for it (a
// blocking call's).
template <class Lane>
struct p2p_posted {
  p2p_posted(Lane lane, p2p_header header) : l(std::move(lane)), h(header) {}
  Lane l;
  p2p_header h;
  typename Lane::request head, body;
  std::function<void()> check_header;  // a receive's, once the header is in
  bool head_done = false;
  bool poll() {
    if (!head_done) {
      if (!test(l, head)) return false;
      head_done = true;
      if (check_header) check_header();
    }
    return test(l, body);
  }
  void complete() {
    l.wait(head);
    head_done = true;
    if (check_header) check_header();
    l.wait(body);
  }
  // (requests are move-only, std::function copies: posted messages live
  // behind a shared_ptr)
  static std::function<bool()> polled(std::shared_ptr<p2p_posted> m) {
    return [m] { return m->poll(); };
  }
};

template <class Lane, element E>
std::shared_ptr<p2p_posted<Lane>> post_send(Lane lane, std::span<const E> data, int peer, int tag) {
  check_peer("send", lane.rank(), lane.size(), peer);
  auto m = std::make_shared<p2p_posted<Lane>>(std::move(lane), p2p_header{tag, std::uint64_t(dtype_of<E>), data.size()});
  m->head = m->l.isend(peer, std::as_bytes(std::span<const p2p_header>(&m->h, 1)));
  m->body = m->l.isend(peer, std::as_bytes(data));
  return m;
}

template <class Lane, element E>
std::shared_ptr<p2p_posted<Lane>> post_recv(Lane lane, std::span<E> data, int peer, int tag) {
  check_peer("recv", lane.rank(), lane.size(), peer);
  auto m = std::make_shared<p2p_posted<Lane>>(std::move(lane), p2p_header{});
  m->head = m->l.irecv(peer, std::as_writable_bytes(std::span<p2p_header>(&m->h, 1)));
  m->body = m->l.irecv(peer, std::as_writable_bytes(data));
  m->check_header = [rank = m->l.rank(), h = &m->h, tag, peer, count = data.size()] {
    if (h->tag != tag || h->type != std::uint64_t(dtype_of<E>) || h->count != count)
      throw error("recv", rank, cat("rank ", peer, " sent ", h->count, " elements of ", to_string(dtype(h->type)),
                                    " with tag ", h->tag, ", but this rank receives ", count, " elements of ",
                                    to_string(dtype_of<E>), " with tag ", tag));
  };
  return m;
}

}  // namespace ringtree::detail
