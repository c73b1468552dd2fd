#pragma once
// Asynchronous calls: ringtree::work and the progress engine behind it.
//
// Each communicator that is asked for an asynchronous call (allreduce_async,
// ..., submit) gets one progress thread. Calls run one at a time, in the
// order they were made, as they must: every rank has to run its
// collectives in the same order. A call's errors stay with its work
// (wait() rethrows them, exception() shows them).
//
// Whoever waits helps: a wait() on a call that has not started yet runs
// the queue up to it on the waiting thread, so the usual "start, then wait
// at once" costs no hand-over to the progress thread (its wake-up is tens
// of microseconds on a busy machine: more than a small all-reduce).
//
// Point-to-point calls (send_async, recv_async) are deferred: they start
// when something waits on them or when a collective is queued behind them,
// and a run of them is posted together before any is waited on. So
// "isend to the right, irecv from the left, wait both" cannot deadlock on
// a rendezvous send, whatever the order the two ranks posted in.
#include <ringtree/core/cxx20.hpp>

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
  // it and returns what completes it.
  std::function<void()> run;
  std::function<std::function<void()>()> post;
  bool receives = false;  // a receive: completed before the sends posted with it
  std::function<void(std::exception_ptr)> on_done;  // called by whoever ran it, before wait() returns
  std::shared_ptr<engine_core> core;
  bool done = false;
  std::exception_ptr failure;
  bool deferred() const noexcept { return static_cast<bool>(post); }
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
  // Whether it has run (successfully or not); never blocks.
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
  std::deque<std::shared_ptr<work_state>> queue;
  bool busy = false;  // someone is running calls: at most one does
  bool stop = false;
  std::size_t waiters = 0;  // threads in wait() on a deferred call: let the progress thread run it too
  // The core whose calls this thread is running now (a call that makes
  // another call on the same communicator must not wait for the queue).
  static engine_core*& running_here() {
    thread_local engine_core* c = nullptr;
    return c;
  }

  // The calls to run next, taken from the front: one collective, or a run
  // of point-to-point calls (all of them, posted together). Called locked.
  std::vector<std::shared_ptr<work_state>> take() {
    std::vector<std::shared_ptr<work_state>> batch;
    if (queue.empty()) return batch;
    if (!queue.front()->deferred()) {
      batch.push_back(std::move(queue.front()));
      queue.pop_front();
      return batch;
    }
    while (!queue.empty() && queue.front()->deferred()) {
      batch.push_back(std::move(queue.front()));
      queue.pop_front();
    }
    return batch;
  }
  // Whether the progress thread may start the front: a collective at once;
  // a point-to-point run only once a collective follows it or someone waits.
  bool startable() const {
    if (queue.empty() || busy) return false;
    if (!queue.front()->deferred() || waiters > 0) return true;
    for (const auto& w : queue)
      if (!w->deferred()) return true;
    return false;
  }

  // Runs a batch (unlocked), then marks it done and hands the token back.
  void execute(std::unique_lock<std::mutex>& lk, std::vector<std::shared_ptr<work_state>> batch) {
    lk.unlock();
    engine_core*& here = running_here();
    engine_core* before = std::exchange(here, this);
    std::vector<std::exception_ptr> failed(batch.size());
    if (batch.size() == 1 && !batch[0]->deferred()) {
      try {
        batch[0]->run();
      } catch (...) {
        failed[0] = std::current_exception();
      }
    } else {  // post every point-to-point call, then complete the receives, then the sends
      // (a send may be rendezvous: it completes once its receiver waits, so
      // ranks that waited on their sends first would wait on each other)
      std::vector<std::function<void()>> complete(batch.size());
      for (std::size_t i = 0; i < batch.size(); ++i) try {
          complete[i] = batch[i]->post();
        } catch (...) {
          failed[i] = std::current_exception();
        }
      for (bool receives : {true, false})
        for (std::size_t i = 0; i < batch.size(); ++i)
          if (batch[i]->receives == receives && !failed[i] && complete[i]) try {
              complete[i]();
            } catch (...) {
              failed[i] = std::current_exception();
            }
    }
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i]->on_done) try {
          batch[i]->on_done(failed[i]);
        } catch (...) {  // a completion hook's own failure is not the call's
        }
    here = before;
    lk.lock();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      batch[i]->failure = failed[i];
      batch[i]->done = true;
      batch[i]->run = nullptr;  // what the call captured goes now, not with the handle
      batch[i]->post = nullptr;
      batch[i]->on_done = nullptr;
    }
    busy = false;
    cv.notify_all();
  }

  // Runs or waits until `s` is done; `s` null: until the queue is empty.
  void wait_for(const work_state* s) {
    std::unique_lock lk(m);
    auto finished = [&] { return s != nullptr ? s->done : (queue.empty() && !busy); };
    if (running_here() == this && !finished())
      throw std::logic_error("ringtree: a call running on the progress thread waited on a later call of the same communicator");
    const bool counts = s != nullptr && !s->done && s->deferred();
    if (counts) ++waiters, cv.notify_all();
    while (!finished()) {
      if (!busy && !queue.empty()) {
        busy = true;
        execute(lk, take());
      } else {
        cv.wait(lk);
      }
    }
    if (counts) --waiters;
  }
};

// One progress thread and its queue: what a communicator owns.
class progress_engine {
 public:
  progress_engine() : core_(std::make_shared<engine_core>()) {
    thread_ = std::thread([c = core_] {
      std::unique_lock lk(c->m);
      while (true) {
        c->cv.wait(lk, [&] { return c->stop || c->startable(); });
        if (c->stop && c->queue.empty() && !c->busy) return;
        if (!c->startable()) {  // stopping: run what is left, deferred or not
          if (c->busy || c->queue.empty()) {
            c->cv.wait(lk);
            continue;
          }
        }
        c->busy = true;
        c->execute(lk, c->take());
      }
    });
  }
  progress_engine(const progress_engine&) = delete;
  // Runs what is still queued (peers wait for it), then ends the thread.
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
  work submit_deferred(std::function<std::function<void()>()> post, bool receives,
                       std::function<void(std::exception_ptr)> on_done = {}) {
    auto s = std::make_shared<work_state>();
    s->post = std::move(post);
    s->receives = receives;
    return enqueue(std::move(s), std::move(on_done));
  }
  // Waits until everything queued has run (a synchronous call's first
  // step: it must come after them). Nothing to do on the progress thread.
  void drain() {
    if (engine_core::running_here() == core_.get()) return;
    core_->wait_for(nullptr);
  }
  bool idle() {
    std::lock_guard lk(core_->m);
    return core_->queue.empty() && !core_->busy;
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
  std::lock_guard lk(s_->core->m);
  return s_->done;
}
inline std::exception_ptr work::exception() const {
  if (!s_) return nullptr;
  std::lock_guard lk(s_->core->m);
  return s_->failure;
}

}  // namespace ringtree
