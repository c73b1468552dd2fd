#pragma once
// Pipeline (model) parallelism: consecutive stages on consecutive ranks,
// activations flowing forward and gradients backward, over any transport.
//
// stage_link: each message is preceded by a small header (element type,
// count, direction), so a receiver that expects another size or type
// raises, naming both sides, instead of reading garbage. Sends are
// buffered (the link keeps a copy until the transport is done with it), so
// no schedule can deadlock on them.
//
// Schedules over m micro-batches on p stages: GPipe (all forwards, then
// all backwards) and 1F1B (after p - s - 1 warm-up forwards, stage s
// alternates one forward and one backward, so at most p - s activations
// are alive). Both leave each stage idle for the bubble (p-1)/(m+p-1).
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <new>
#include <vector>

#include <ringtree/core/dtype.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/train/partition.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree {

template <transport T>
class stage_link {
 public:
  // prev/next: the ranks of the neighbouring stages, -1 at the ends.
  stage_link(T& t, int prev, int next) : t_(&t), prev_(prev), next_(next) {}
  ~stage_link() {
    try {
      flush();
    } catch (...) {
    }
  }
  int prev() const noexcept { return prev_; }
  int next() const noexcept { return next_; }

  template <element E> void send_forward(std::span<const E> x) { send(next_, x, forward, "send_forward"); }
  template <element E> void recv_forward(std::span<E> x) { recv(prev_, x, forward, "recv_forward"); }
  template <element E> void send_backward(std::span<const E> g) { send(prev_, g, backward, "send_backward"); }
  template <element E> void recv_backward(std::span<E> g) { recv(next_, g, backward, "recv_backward"); }

  // Waits until every buffered send has been taken by its receiver.
  void flush() {
    for (auto& p : pending_) t_->wait(p.header_req), t_->wait(p.body_req);
    pending_.clear();
  }

 private:
  static constexpr std::uint32_t forward = 1, backward = 2;
  struct header {
    std::uint64_t count;
    std::uint32_t type;
    std::uint32_t direction;
  };
  struct outgoing {
    header h;
    std::vector<std::byte> body;
    typename T::request header_req, body_req;
  };

  template <class E>
  void send(int peer, std::span<const E> x, std::uint32_t dir, const char* call) {
    if (peer < 0) throw error(call, t_->rank(), "this is the last (or first) stage: there is no stage to send to");
    while (!pending_.empty() && pending_.size() > 64) {  // bound the buffered copies
      t_->wait(pending_.front().header_req);
      t_->wait(pending_.front().body_req);
      pending_.pop_front();
    }
    auto& o = pending_.emplace_back();
    o.h = {x.size(), static_cast<std::uint32_t>(dtype_of<E>), dir};
    o.body.assign(reinterpret_cast<const std::byte*>(x.data()), reinterpret_cast<const std::byte*>(x.data()) + x.size_bytes());
    o.header_req = t_->isend(peer, std::as_bytes(std::span<const header>(&o.h, 1)));
    o.body_req = t_->isend(peer, std::span<const std::byte>(o.body));
  }

  template <class E>
  void recv(int peer, std::span<E> x, std::uint32_t dir, const char* call) {
    if (peer < 0) throw error(call, t_->rank(), "this is the first (or last) stage: there is no stage to receive from");
    header h{};
    auto hr = t_->irecv(peer, std::as_writable_bytes(std::span<header>(&h, 1)));
    t_->wait(hr);
    const bool type_ok = h.type <= static_cast<std::uint32_t>(dtype::bfloat16);
    if (!type_ok || h.count > (std::uint64_t{1} << 40))
      throw error(call, t_->rank(), detail::cat("corrupt header from rank ", peer));
    if (h.count == x.size() && h.type == static_cast<std::uint32_t>(dtype_of<E>) && h.direction == dir) {
      auto br = t_->irecv(peer, std::as_writable_bytes(x));
      t_->wait(br);
      return;
    }
    // Take the message anyway (so the sender is not left waiting), then refuse it.
    std::vector<std::byte> drain;
    try {
      drain.resize(h.count * element_size(static_cast<dtype>(h.type)));
    } catch (const std::bad_alloc&) {
      throw error(call, t_->rank(), detail::cat("rank ", peer, " announced ", h.count, " ", to_string(static_cast<dtype>(h.type)),
                                                " elements, more than this process can hold, where this stage expects ",
                                                x.size(), ": a mismatched or corrupt message"));
    }
    auto br = t_->irecv(peer, std::span<std::byte>(drain));
    t_->wait(br);
    throw error(call, t_->rank(),
                detail::cat("rank ", peer, " sent ", h.count, " ", to_string(static_cast<dtype>(h.type)),
                            h.direction == forward ? " activations" : " gradients", " but this stage expects ",
                            x.size(), " ", to_string(dtype_of<E>), dir == forward ? " activations" : " gradients"));
  }

  static std::size_t element_size(dtype d) {
    switch (d) {
      case dtype::float64: case dtype::int64: case dtype::uint64: return 8;
      case dtype::float32: case dtype::int32: case dtype::uint32: return 4;
      case dtype::int16: case dtype::uint16: case dtype::float16: case dtype::bfloat16: return 2;
      default: return 1;
    }
  }

  T* t_;
  int prev_, next_;
  std::deque<outgoing> pending_;
};

// One step of a schedule: the forward or the backward of a micro-batch.
struct pipeline_op {
  enum kind { forward, backward } what;
  int micro_batch;
  friend bool operator==(const pipeline_op&, const pipeline_op&) = default;
};

enum class pipeline_schedule { gpipe, one_f_one_b };

// What stage s of p does, in order, over m micro-batches.
inline std::vector<pipeline_op> schedule_for(pipeline_schedule kind, int stage, int stages, int micro_batches) {
  if (stages < 1 || stage < 0 || stage >= stages || micro_batches < 1)
    throw error("schedule_for", -1, detail::cat("stage ", stage, " of ", stages, " with ", micro_batches, " micro-batches"));
  std::vector<pipeline_op> ops;
  if (kind == pipeline_schedule::gpipe) {
    for (int k = 0; k < micro_batches; ++k) ops.push_back({pipeline_op::forward, k});
    for (int k = 0; k < micro_batches; ++k) ops.push_back({pipeline_op::backward, k});
    return ops;
  }
  const int warmup = std::min(stages - stage - 1, micro_batches);
  int f = 0, b = 0;
  for (; f < warmup; ++f) ops.push_back({pipeline_op::forward, f});
  while (f < micro_batches) {  // steady state: one forward, one backward
    ops.push_back({pipeline_op::forward, f++});
    ops.push_back({pipeline_op::backward, b++});
  }
  while (b < micro_batches) ops.push_back({pipeline_op::backward, b++});  // cool-down
  return ops;
}

// Runs stage `s`'s schedule. The stage object provides, per micro-batch k:
// input(k) / output(k) activations, grad_output(k) / grad_input(k)
// gradients (spans of one element type), and forward(k) / backward(k).
// The first stage gets no input from a link, the last computes its own
// grad_output (from the loss) inside backward(k).
template <transport T, class Stage>
void run_pipeline(stage_link<T>& link, Stage& stage, pipeline_schedule kind, int s, int stages, int micro_batches) {
  for (const auto& op : schedule_for(kind, s, stages, micro_batches)) {
    const int k = op.micro_batch;
    if (op.what == pipeline_op::forward) {
      if (s > 0) link.recv_forward(stage.input(k));
      stage.forward(k);
      if (s + 1 < stages) link.send_forward(std::span<const typename decltype(stage.output(k))::element_type>(stage.output(k)));
    } else {
      if (s + 1 < stages) link.recv_backward(stage.grad_output(k));
      stage.backward(k);
      if (s > 0) link.send_backward(std::span<const typename decltype(stage.grad_input(k))::element_type>(stage.grad_input(k)));
    }
  }
  link.flush();
}

}  // namespace ringtree
