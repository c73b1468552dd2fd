#pragma once
// faulty_transport<T>: a transport decorator that makes one rank fail in
// the middle of a collective, after it has posted a given number of sends
// and receives, the way real failures happen (some messages out, others not).
//   exit_process: the process ends at once (_Exit), as a crash would;
//   throw_exit:   the rank's thread throws (a rank of local_world dying);
//   stall:        the rank sleeps, then goes on, as a descheduled or
//                 swapping process would; it wakes early once `woken()`
//                 says so (the test's survivors have all finished: their
//                 verdict is in, and the rest of the sleep only cost time).
//   slow_to_next: on every rank, each message to the next rank (a ring's
//                 only peer) waits `stall` first: one algorithm made
//                 clearly slower, for the chooser's tests.
// The other ranks and calls pass through untouched, and so does everything
// before arm() (call it once the communicator over it is made).
#include <chrono>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <thread>

#include <ringtree/communicator-inl.hpp>  // communicators over these (test_host is prebuilt)
#include <ringtree/transport/transport.hpp>

#include "test_time.hpp"

namespace rt_test {

enum class fault { none, exit_process, throw_exit, stall, slow_to_next };

template <ringtree::transport T>
class faulty_transport {
 public:
  using request = typename T::request;
  using memory_type = ringtree::memory_of<T>;
  static constexpr const char* name = ringtree::detail::transport_name<T>();
  static constexpr bool in_process = ringtree::detail::transport_in_process<T>();

  faulty_transport(T& inner, int faulty_rank, fault f, int after_sends, std::chrono::duration<double> stall = {},
                   std::function<bool()> woken = {})
      : inner_(&inner), faulty_(faulty_rank), fault_(f), after_(after_sends), stall_(stall), woken_(std::move(woken)) {}
  int rank() const noexcept { return inner_->rank(); }
  int size() const noexcept { return inner_->size(); }
  memory_type memory() const noexcept { return inner_->memory(); }

  // Counting starts here: the messages before (a communicator's opening
  // exchange) pass untouched.
  void arm() noexcept { armed_ = true; }

  request isend(int peer, std::span<const std::byte> data) {
    if (armed_ && fault_ == fault::slow_to_next && peer == (rank() + 1) % size()) std::this_thread::sleep_for(stall_);
    if (armed_ && rank() == faulty_ && posted_++ == after_) trigger();
    return inner_->isend(peer, data);
  }
  request irecv(int peer, std::span<std::byte> data) {
    if (armed_ && rank() == faulty_ && posted_++ == after_) trigger();
    return inner_->irecv(peer, data);
  }
  void wait(request& r) { inner_->wait(r); }
  bool test(request& r) { return ringtree::detail::test(*inner_, r); }

 private:
  void trigger() {
    switch (fault_) {
      case fault::exit_process: std::_Exit(42);
      case fault::throw_exit: throw std::runtime_error("injected: this rank died");
      case fault::stall: sleep_until([this] { return woken_ && woken_(); }, stall_); break;
      case fault::slow_to_next:
      case fault::none: break;
    }
  }
  T* inner_;
  int faulty_;
  fault fault_;
  int after_, posted_ = 0;
  bool armed_ = false;
  std::chrono::duration<double> stall_;
  std::function<bool()> woken_;
};

}  // namespace rt_test
