#pragma once
// Fail-stop, the one way every transport (and the symmetric buffers)
// handles its first failure: after an error in a call nothing is certain
// about what the peers still read or write, so every later call raises,
// naming that first failure, instead of moving bytes on a broken state.
#include <string>
#include <utility>

#include <ringtree/core/error.hpp>

namespace ringtree::detail {

class fail_stop {
 public:
  // `refusal`: what a later call says before the first failure
  // ("this transport failed earlier and cannot be used again").
  explicit fail_stop(std::string refusal) : refusal_(std::move(refusal)) {}

  bool failed() const noexcept { return !first_.empty(); }
  const std::string& failure() const noexcept { return first_; }  // "" while usable
  // Records a failure (the first one is kept).
  void fail(const std::string& why) {
    if (first_.empty()) first_ = why.empty() ? std::string("unknown failure") : why;
  }
  // Raises in `call` on `rank` once failed.
  void check(const char* call, int rank) const {
    if (failed()) throw error(call, rank, cat(refusal_, "; the first failure: ", first_));
  }
  // f(); where it raises a ringtree::error, the failure is recorded and
  // `after` runs (drop what was queued, tell the peers) before it goes on.
  template <class F, class After>
  decltype(auto) guard(F&& f, After&& after) {
    try {
      return std::forward<F>(f)();
    } catch (const error& e) {
      fail(e.what());
      after();
      throw;
    }
  }
  template <class F>
  decltype(auto) guard(F&& f) {
    return guard(std::forward<F>(f), [] {});
  }

 private:
  std::string refusal_;
  std::string first_;
};

}  // namespace ringtree::detail
