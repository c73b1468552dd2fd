#pragma once
// traced_transport<T>: a decorator that records every message an algorithm
// sends (step, from, to, bytes) while passing it on to T unchanged.
//
// "step" is a Lamport clock: a rank's clock starts at 0, a message carries
// its sender's clock, and a completed receive moves the receiver's clock to
// one past the message's. The largest step + 1 is then the length of the
// longest chain of messages that depend on each other: the latency steps
// of the algorithm (2(n-1) for ring all-reduce, about 2 log2 n for a tree).
// The recorder is shared by the ranks, so this works for in-process worlds.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include <ringtree/transport/transport.hpp>

namespace ringtree {

struct trace_event {
  int step;
  int from;
  int to;
  std::size_t bytes;
  double start_us;  // when the send was posted, since the recorder was made
};

class trace_recorder {
 public:
  explicit trace_recorder(int size) : clock_(size, 0), sent_(size, 0) {}

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
  std::size_t messages() const {
    std::lock_guard lk(m_);
    return events_.size();
  }
  void clear() {
    std::lock_guard lk(m_);
    events_.clear();
    pairs_.clear();
    std::fill(clock_.begin(), clock_.end(), 0);
    std::fill(sent_.begin(), sent_.end(), 0);
  }

 private:
  template <class T> friend class traced_transport;
  struct pair_log {
    std::vector<int> send_clock;  // clock of the k-th message on this pair
    std::size_t posted = 0;       // receives posted on this pair
  };
  void on_send(int from, int to, std::size_t bytes) {
    std::lock_guard lk(m_);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
    events_.push_back({clock_[from], from, to, bytes, us});
    sent_[from] += bytes;
    pairs_[{from, to}].send_clock.push_back(clock_[from]);
  }
  std::size_t on_post_recv(int from, int to) {
    std::lock_guard lk(m_);
    return pairs_[{from, to}].posted++;
  }
  void on_recv_done(int from, int to, std::size_t k) {
    std::lock_guard lk(m_);
    clock_[to] = std::max(clock_[to], pairs_[{from, to}].send_clock.at(k) + 1);
  }

  mutable std::mutex m_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::vector<trace_event> events_;
  std::vector<int> clock_;
  std::vector<std::size_t> sent_;
  std::map<std::pair<int, int>, pair_log> pairs_;
};

template <class T>
class traced_transport {
 public:
  using memory_type = memory_of<T>;
  struct request {
    typename T::request inner;
    int peer = -1;
    std::size_t k = 0;
    bool recv = false;
  };

  traced_transport(T& inner, trace_recorder& rec) : inner_(&inner), rec_(&rec) {}
  int rank() const noexcept { return inner_->rank(); }
  int size() const noexcept { return inner_->size(); }
  memory_type memory() const noexcept { return inner_->memory(); }

  request isend(int peer, std::span<const std::byte> data) {
    rec_->on_send(rank(), peer, data.size());
    return {inner_->isend(peer, data), peer, 0, false};
  }
  request irecv(int peer, std::span<std::byte> data) {
    const std::size_t k = rec_->on_post_recv(peer, rank());
    return {inner_->irecv(peer, data), peer, k, true};
  }
  void wait(request& r) {
    inner_->wait(r.inner);
    if (r.recv) rec_->on_recv_done(r.peer, rank(), r.k), r.recv = false;
  }

 private:
  T* inner_;
  trace_recorder* rec_;
};

}  // namespace ringtree
