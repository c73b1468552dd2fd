#pragma once
// The fold that makes any rank count a power of two, for the algorithms
// that pair ranks by bits (recursive doubling, Rabenseifner): the extra
// ranks hand their buffers in before and get the result back after.
#include <span>

#include <ringtree/algorithms/common.hpp>

namespace ringtree {
namespace detail {

// Rank counts that are not a power of two, for the algorithms that need
// one: the first 2*rem ranks pair up, each even one hands its buffer to
// its odd neighbour (which folds it in, lower rank first) and sits out;
// the p remaining ranks are numbered 0..p-1; at the end the odd ones hand
// the result back.
template <transport T, class E>
class power_of_two_group {
 public:
  power_of_two_group(T& t, std::span<E> data, op o, std::span<E> tmp) : t_(t), data_(data), r_(t.rank()) {
    while (p_ * 2 <= t.size()) p_ *= 2;
    rem_ = t.size() - p_;
    if (r_ < 2 * rem_) {
      if (r_ % 2 == 0) {
        auto s = post_send(t, r_ + 1, std::span<const E>(data));
        t.wait(s);
        active_ = false;
        return;
      }
      auto q = post_recv(t, r_ - 1, tmp);
      t.wait(q);
      t.memory().reduce(o, data, std::span<const E>(tmp), operands::in_first);
    }
  }
  bool active() const noexcept { return active_; }
  int size() const noexcept { return p_; }
  int rank() const noexcept { return r_ < 2 * rem_ ? r_ / 2 : r_ - rem_; }            // among the p
  int real(int v) const noexcept { return v < rem_ ? 2 * v + 1 : v + rem_; }         // ... and back
  // The ranks that sat out get the result.
  void finish() {
    if (r_ >= 2 * rem_) return;
    if (r_ % 2 == 0) {
      auto q = post_recv(t_, r_ + 1, data_);
      t_.wait(q);
    } else {
      auto s = post_send(t_, r_ - 1, std::span<const E>(data_));
      t_.wait(s);
    }
  }

 private:
  T& t_;
  std::span<E> data_;
  int r_, p_ = 1, rem_ = 0;
  bool active_ = true;
};

}  // namespace detail

}  // namespace ringtree
