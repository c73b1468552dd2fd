#pragma once
// Asynchronous calls: ringtree::work and the progress engine behind it.
//
// Each communicator that is asked for an asynchronous call (allreduce_async,
// ..., submit) gets one progress thread. Calls start in the order they
// were made, as they must: every rank has to run its collectives in the
// same order. A call's errors stay with its work (wait() rethrows them,
// exception() shows them).
//
// A collective runs to its end once started. A point-to-point call
// (send_async, recv_async) is posted as soon as the calls before it have
// started, and then completes in the background: the engine polls it
// (the transport's test()) while later calls post and run, like MPI's
// isend and irecv. So "irecv, then a blocking send, then wait", or a
// pending isend beside a collective, make progress without anyone
// waiting on them; a peer that never answers is a timeout, as in a wait.
//
// Whoever waits helps: a wait() on a call that has not started yet runs
// the queue up to it on the waiting thread, and a wait() or test() on a
// point-to-point call polls it there, so the usual "start, then wait at
// once" costs no hand-over to the progress thread (its wake-up is tens of
// microseconds on a busy machine: more than a small all-reduce).
#include <ringtree/core/cxx20.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace ringtree {

namespace detail {
struct engine_core;
struct work_state {
  // A collective: run() does it all. A point-to-point call: post() starts
  // it and returns its poll, which says whether it has completed (and
  // raises if it failed).
  std::function<void()> run;
  std::function<std::function<bool()>()> post;
  std::function<bool()> poll;
  std::function<void(std::exception_ptr)> on_done;  // called by whoever finished it, before wait() returns
  std::shared_ptr<engine_core> core;
  bool done = false;
  std::exception_ptr failure;
  bool p2p() const noexcept { return static_cast<bool>(post) || static_cast<bool>(poll); }
};
}  // namespace detail

// The handle of one asynchronous call.
class work {
 public:
  work() = default;
  explicit work(std::shared_ptr<detail::work_state> s) : s_(std::move(s)) {}
  // Blocks until the call has run (running it, and what is queued before
  // it, on this thread if nothing else does); rethrows its error.
  void wait();
  // Whether it has run (successfully or not); never blocks, but moves
  // point-to-point calls along (as MPI_Test does).
  bool test() const;
  // Its error, once it has run; null while running or on success.
  std::exception_ptr exception() const;
  bool valid() const noexcept { return static_cast<bool>(s_); }

 private:
  std::shared_ptr<detail::work_state> s_;
};

namespace detail {

struct engine_core {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::shared_ptr<work_state>> queue;      // not started yet, in order
  std::vector<std::shared_ptr<work_state>> inflight;  // point to point, posted, not complete
  bool busy = false;  // a thread is using the transport (a step): at most one
  bool stop = false;
  // The core whose calls this thread is running now (a call that makes
  // another call on the same communicator must not wait for the queue).
  static engine_core*& running_here() {
    thread_local engine_core* c = nullptr;
    return c;
  }
  bool idle() const { return queue.empty() && inflight.empty() && !busy; }
  bool workable() const { return !busy && (!queue.empty() || !inflight.empty()); }

  // One step on the transport, by the caller (locked, not busy): posts the
  // point-to-point calls at the front of the queue, polls those in flight,
  // and, with `run_collective`, runs the collective after them. Returns
  // whether anything started or finished.
  bool step(std::unique_lock<std::mutex>& lk, bool run_collective) {
    busy = true;
    std::vector<std::shared_ptr<work_state>> posting, polling = inflight;
    while (!queue.empty() && queue.front()->p2p()) {
      posting.push_back(std::move(queue.front()));
      queue.pop_front();
    }
    std::shared_ptr<work_state> running;
    if (run_collective && !queue.empty()) {
      running = std::move(queue.front());
      queue.pop_front();
    }
    lk.unlock();
    engine_core*& here = running_here();
    engine_core* before = std::exchange(here, this);
    std::vector<std::pair<std::shared_ptr<work_state>, std::exception_ptr>> finished;
    auto attempt = [&](const std::shared_ptr<work_state>& w, auto&& f) {
      try {
        if (f()) finished.emplace_back(w, nullptr);
      } catch (...) {
        finished.emplace_back(w, std::current_exception());
      }
    };
    for (auto& w : posting) {
      attempt(w, [&] {
        w->poll = w->post();  // (posted in order: messages to one peer keep it)
        w->post = nullptr;
        polling.push_back(w);
        return false;
      });
    }
    for (auto& w : polling) attempt(w, [&] { return w->poll(); });
    if (running) attempt(running, [&] { running->run(); return true; });
    for (auto& [w, e] : finished)
      if (w->on_done) try {
          w->on_done(e);
        } catch (...) {  // a completion hook's own failure is not the call's
        }
    here = before;
    lk.lock();
    for (auto& w : posting)
      if (w->poll) inflight.push_back(w);
    for (auto& [w, e] : finished) {
      std::erase(inflight, w);
      w->failure = e;
      w->done = true;
      w->run = nullptr;  // what the call captured goes now, not with the handle
      w->post = nullptr;
      w->poll = nullptr;
      w->on_done = nullptr;
    }
    busy = false;
    cv.notify_all();
    return !posting.empty() || !finished.empty();
  }

  // After `idle` steps that moved nothing (messages in flight wait for
  // their peers): yield at first, then sleep a little longer each time,
  // up to a millisecond; a new call or a finished one wakes the sleeper.
  void pause(std::unique_lock<std::mutex>& lk, int idle) {
    if (idle < 16) {
      lk.unlock();
      std::this_thread::yield();
      lk.lock();
    } else {
      cv.wait_for(lk, std::chrono::microseconds(std::min(1000, 10 << std::min(idle - 16, 7))));
    }
  }

  // Runs, polls or waits until `s` is done; `s` null: until nothing is
  // queued or in flight.
  void wait_for(const work_state* s) {
    std::unique_lock lk(m);
    auto finished = [&] { return s != nullptr ? s->done : idle(); };
    if (running_here() == this && !finished())
      throw std::logic_error("ringtree: a call running on the progress thread waited on a later call of the same communicator");
    for (int idle_steps = 0; !finished();) {
      if (!workable()) {
        cv.wait(lk);
        continue;
      }
      // Collectives only up to `s`: while it is queued, the front comes before it.
      const bool queued = s == nullptr || (!s->p2p() ? !s->done : static_cast<bool>(s->post));
      if (step(lk, queued)) idle_steps = 0;
      else pause(lk, ++idle_steps);
    }
  }
  // test(): one step that never blocks on a collective.
  void nudge() {
    std::unique_lock lk(m);
    if (!busy && running_here() != this && (!inflight.empty() || (!queue.empty() && queue.front()->p2p()))) step(lk, false);
  }
};

// One progress thread and its queue: what a communicator owns.
class progress_engine {
 public:
  progress_engine() : core_(std::make_shared<engine_core>()) {
    thread_ = std::thread([c = core_] {
      std::unique_lock lk(c->m);
      for (int idle_steps = 0;;) {
        if (c->stop && c->idle()) return;
        if (!c->workable()) {
          c->cv.wait(lk);
          continue;
        }
        if (c->step(lk, true)) idle_steps = 0;
        else c->pause(lk, ++idle_steps);
      }
    });
  }
  progress_engine(const progress_engine&) = delete;
  // Runs what is still queued or in flight (peers wait for it), then ends
  // the thread.
  ~progress_engine() {
    {
      std::lock_guard lk(core_->m);
      core_->stop = true;
    }
    core_->cv.notify_all();
    thread_.join();
  }

  work submit(std::function<void()> run, std::function<void(std::exception_ptr)> on_done = {}) {
    auto s = std::make_shared<work_state>();
    s->run = std::move(run);
    return enqueue(std::move(s), std::move(on_done));
  }
  // A point-to-point call: `post` starts it and returns its poll.
  work submit_p2p(std::function<std::function<bool()>()> post, std::function<void(std::exception_ptr)> on_done = {}) {
    auto s = std::make_shared<work_state>();
    s->post = std::move(post);
    return enqueue(std::move(s), std::move(on_done));
  }
  // Waits until everything queued has run and every message in flight
  // has completed (a synchronous collective's first step: it must come
  // after them). Nothing to do on the progress thread.
  void drain() {
    if (engine_core::running_here() == core_.get()) return;
    core_->wait_for(nullptr);
  }
  bool idle() {
    std::lock_guard lk(core_->m);
    return core_->idle();
  }

 private:
  work enqueue(std::shared_ptr<work_state> s, std::function<void(std::exception_ptr)> on_done) {
    s->on_done = std::move(on_done);
    s->core = core_;
    {
      std::lock_guard lk(core_->m);
      core_->queue.push_back(s);
    }
    core_->cv.notify_all();
    return work(std::move(s));
  }
  std::shared_ptr<engine_core> core_;
  std::thread thread_;
};

}  // namespace detail

inline void work::wait() {
  if (!s_) return;
  s_->core->wait_for(s_.get());
  if (s_->failure) std::rethrow_exception(s_->failure);
}
inline bool work::test() const {
  if (!s_) return true;
  {
    std::lock_guard lk(s_->core->m);
    if (s_->done) return true;
  }
  s_->core->nudge();
  std::lock_guard lk(s_->core->m);
  return s_->done;
}
inline std::exception_ptr work::exception() const {
  if (!s_) return nullptr;
  std::lock_guard lk(s_->core->m);
  return s_->failure;
}

}  // namespace ringtree
