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
#include <functional>
#include <ostream>
#include <string>
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
};

// A span of time on one rank: a send or receive from post to completion,
// or a reduction. What a Chrome trace shows, one track per rank.
struct trace_slice {
  int rank;
  const char* what;  // "send", "recv", "reduce"
  int peer;          // -1 for reductions
  std::size_t bytes;
  double start_us, end_us;
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
  std::vector<trace_slice> slices() const {
    std::lock_guard lk(m_);
    return slices_;
  }
  // Called (on the rank's thread) when a rank's step counter moves to
  // `step`, before the data that moved it (sent at step - 1) is used: the
  // buffers then hold the result of step - 2. The trace tool takes its
  // snapshots here.
  std::function<void(int rank, int step)> on_step;

  // The Chrome trace event format (chrome://tracing, ui.perfetto.dev).
  void write_chrome(std::ostream& os) const {
    std::lock_guard lk(m_);
    os << "{\"traceEvents\": [\n";
    bool first = true;
    auto sep = [&] { os << (first ? "  " : ",\n  "); first = false; };
    for (std::size_t r = 0; r < clock_.size(); ++r) {
      sep();
      os << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": " << r
         << ", \"args\": {\"name\": \"rank " << r << "\"}}";
    }
    for (const auto& x : slices_) {
      sep();
      os << "{\"name\": \"" << x.what << (x.peer >= 0 ? (std::string(x.what) == "send" ? " to " : " from ") : "")
         << (x.peer >= 0 ? std::to_string(x.peer) : std::string()) << "\", \"cat\": \"" << x.what
         << "\", \"ph\": \"X\", \"pid\": 0, \"tid\": " << x.rank << ", \"ts\": " << x.start_us
         << ", \"dur\": " << std::max(0.0, x.end_us - x.start_us) << ", \"args\": {\"bytes\": " << x.bytes << "}}";
    }
    os << "\n]}\n";
  }

  void clear() {
    std::lock_guard lk(m_);
    slices_.clear();
    events_.clear();
    pairs_.clear();
    std::fill(clock_.begin(), clock_.end(), 0);
    std::fill(sent_.begin(), sent_.end(), 0);
  }

 private:
  template <class T> friend class traced_transport;
  template <class M> friend struct traced_memory;
  double now_us() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
  }
  void on_slice(trace_slice x) {
    std::lock_guard lk(m_);
    slices_.push_back(x);
  }
  struct pair_log {
    std::vector<int> send_clock;  // clock of the k-th message on this pair
    std::size_t posted = 0;       // receives posted on this pair
  };
  void on_send(int from, int to, std::size_t bytes) {
    std::lock_guard lk(m_);
    events_.push_back({clock_[from], from, to, bytes});  // its timing is the send slice's
    sent_[from] += bytes;
    pairs_[{from, to}].send_clock.push_back(clock_[from]);
  }
  std::size_t on_post_recv(int from, int to) {
    std::lock_guard lk(m_);
    return pairs_[{from, to}].posted++;
  }
  void on_recv_done(int from, int to, std::size_t k) {
    int moved_to = -1;
    {
      std::lock_guard lk(m_);
      const int c = std::max(clock_[to], pairs_[{from, to}].send_clock.at(k) + 1);
      if (c != clock_[to]) moved_to = clock_[to] = c;
    }
    if (moved_to >= 0 && on_step) on_step(to, moved_to);
  }

  mutable std::mutex m_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::vector<trace_event> events_;
  std::vector<trace_slice> slices_;
  std::vector<int> clock_;
  std::vector<std::size_t> sent_;
  std::map<std::pair<int, int>, pair_log> pairs_;
};

// The memory of a traced transport: the inner one, with every reduction
// recorded as a slice.
template <class M>
struct traced_memory {
  M inner;
  trace_recorder* rec;
  int rank;
  template <class E> using buffer = typename M::template buffer<E>;
  template <class E> buffer<E> scratch(std::size_t n) const { return inner.template scratch<E>(n); }
  template <class E> void copy(std::span<E> dst, std::span<const E> src) const { inner.copy(dst, src); }
  template <class E> void average(std::span<E> data, int ranks) const { inner.average(data, ranks); }
  template <class E>
  void reduce(op o, std::span<E> acc, std::span<const E> in, operands order = operands::acc_first) const {
    const double t0 = rec->now_us();
    inner.reduce(o, acc, in, order);
    rec->on_slice({rank, "reduce", -1, acc.size_bytes(), t0, rec->now_us()});
  }
};

template <class T>
class traced_transport {
 public:
  using memory_type = traced_memory<memory_of<T>>;
  struct request {
    typename T::request inner;
    int peer = -1;
    std::size_t k = 0, bytes = 0;
    bool recv = false, open = false;
    double start_us = 0;
  };

  traced_transport(T& inner, trace_recorder& rec) : inner_(&inner), rec_(&rec) {}
  int rank() const noexcept { return inner_->rank(); }
  int size() const noexcept { return inner_->size(); }
  memory_type memory() const noexcept { return {inner_->memory(), rec_, rank()}; }

  request isend(int peer, std::span<const std::byte> data) {
    rec_->on_send(rank(), peer, data.size());
    return {inner_->isend(peer, data), peer, 0, data.size(), false, true, rec_->now_us()};
  }
  request irecv(int peer, std::span<std::byte> data) {
    const std::size_t k = rec_->on_post_recv(peer, rank());
    return {inner_->irecv(peer, data), peer, k, data.size(), true, true, rec_->now_us()};
  }
  void wait(request& r) {
    inner_->wait(r.inner);
    if (!r.open) return;
    r.open = false;
    rec_->on_slice({rank(), r.recv ? "recv" : "send", r.peer, r.bytes, r.start_us, rec_->now_us()});
    if (r.recv) rec_->on_recv_done(r.peer, rank(), r.k);
  }

 private:
  T* inner_;
  trace_recorder* rec_;
};

}  // namespace ringtree
