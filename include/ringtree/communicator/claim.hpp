#pragma once
// One communicator per transport object. Two over one transport would
// match each other's messages (a transport has one ordered stream per pair
// of ranks, and no tags): with asynchronous calls in flight, each would
// take the other's bytes for its own, and return wrong numbers. So the
// second is refused, naming the transport; split() is how a program gets
// a second stream, with channels of its own (as MPI_Comm_dup does).
#include <mutex>
#include <set>
#include <utility>

#include <ringtree/core/error.hpp>

namespace ringtree::detail {

class transport_claim {
 public:
  transport_claim() = default;
  // Claims `transport` (its address) for this process's one communicator
  // on it, or raises.
  transport_claim(const void* transport, const char* name, int rank) : at_(transport) {
    std::lock_guard lk(mutex());
    if (!claimed().insert(at_).second) {
      at_ = nullptr;
      throw error("communicator", rank,
                  cat("this ", name, " transport already has a communicator: two communicators over one transport would "
                      "take each other's messages. For a second stream of messages use comm.split(0, comm.rank()), "
                      "which has channels of its own, or make a second transport"));
    }
  }
  transport_claim(transport_claim&& o) noexcept : at_(std::exchange(o.at_, nullptr)) {}
  transport_claim& operator=(transport_claim&& o) noexcept {
    if (this != &o) {
      release();
      at_ = std::exchange(o.at_, nullptr);
    }
    return *this;
  }
  ~transport_claim() { release(); }

 private:
  void release() noexcept {
    if (at_ == nullptr) return;
    std::lock_guard lk(mutex());
    claimed().erase(std::exchange(at_, nullptr));
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::set<const void*>& claimed() {
    static std::set<const void*> s;
    return s;
  }
  const void* at_ = nullptr;
};

}  // namespace ringtree::detail
