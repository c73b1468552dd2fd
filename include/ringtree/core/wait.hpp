#pragma once
// How a rank waits for a peer, in one place: spin while the peer is
// probably a few hundred nanoseconds away, yield while it may need this
// core (more ranks than cores), then wait long: read the clock, check on
// the peer every few milliseconds (dead? failed?), and raise past the
// timeout. The transports say what "done" is, what a check looks at and
// whether they sleep between looks (shm sleeps on a futex); the pace is
// theirs too, and the loop is this one.
#include <sched.h>

#include <atomic>
#include <chrono>

#include <ringtree/core/cxx20.hpp>

namespace ringtree::detail {

// What else a waiting thread keeps moving once it has stopped spinning,
// for the whole process: libringtree-mpi (src/mpi_layer) sets it to MPI's
// own progress, because MPI promises that a rank blocked in one collective
// still completes its other, non-blocking ones, which a peer may be
// waiting for before it joins this one. Null: nothing.
inline std::atomic<void (*)() noexcept> while_waiting{nullptr};

// `spins` looks at full speed, then looks that yield the core (at most
// `yields` of them and at most max_yield of wall time), then the long wait,
// where the core is yielded between looks unless the caller `sleeps`. The
// clock is read at every look after the spins: a yield is a system call
// that, on a loaded machine, can give away a whole scheduler slice
// (milliseconds), so counting looks instead of time let 1000 yields stretch
// a 4 s timeout to 6-18 s and a dead peer's notice to 9-20 s.
struct pace {
  long spins = 0;
  long yields = 0;
  bool sleeps = false;
};

class patience {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr auto check_every = std::chrono::milliseconds(5);
  static constexpr auto max_yield = std::chrono::milliseconds(2);

  patience(std::chrono::duration<double> timeout, pace p) noexcept
      : timeout_(std::chrono::duration_cast<clock::duration>(timeout)), pace_(p) {}

  // After a look that found nothing. True where the wait is long: then
  // started(), check_due() and overdue() say what to do. The timeout
  // counts from the first look after the spins.
  bool idle() noexcept {
    const long k = ++looks_;
    if (k <= pace_.spins) return false;
    if (auto f = while_waiting.load(std::memory_order_relaxed)) f();
    const bool yielding = k <= pace_.spins + pace_.yields && !yielded_enough_;
    if (yielding || !pace_.sleeps) sched_yield();
    now_ = clock::now();
    if (since_ == clock::time_point{}) since_ = now_;
    if (yielding) {
      if (now_ - since_ < max_yield) return false;
      yielded_enough_ = true;
    }
    started_ = deadline_ == clock::time_point{};
    // The first check comes check_every into the long wait, not at its
    // start: a check may read /proc (microseconds), and where ranks
    // outnumber the cores most waits of a small call get this far (one
    // such read a wait made a 4-rank broadcast of 4 B on 2 cores 3x slower).
    if (started_) deadline_ = since_ + timeout_, next_check_ = now_ + check_every;
    return true;
  }
  // Progress was made: spin again (the deadline stays).
  void progressed() noexcept { looks_ = 0, yielded_enough_ = false; }

  bool started() const noexcept { return started_; }  // the long wait began at this look
  bool waited_long() const noexcept { return deadline_ != clock::time_point{}; }
  // Every check_every of the long wait: time to look at the peer.
  bool check_due() noexcept {
    if (now_ < next_check_) return false;
    next_check_ = now_ + check_every;
    return true;
  }
  bool overdue() const noexcept { return now_ > deadline_; }

 private:
  clock::duration timeout_;
  pace pace_;
  long looks_ = 0;
  bool started_ = false, yielded_enough_ = false;
  clock::time_point now_{}, since_{}, deadline_{}, next_check_{};
};

}  // namespace ringtree::detail
