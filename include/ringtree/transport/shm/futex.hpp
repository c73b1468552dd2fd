#pragma once
// Sleeping and waking on a word of shared memory (Linux futexes): how a
// rank that waits long sleeps on its doorbell (shm/layout.hpp's shm_rank)
// and how whoever gives it data or space wakes it, without a busy core.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <ctime>

#include <ringtree/core/cxx20.hpp>

namespace ringtree::detail {

inline void futex_wait(std::atomic<std::uint32_t>* addr, std::uint32_t expected, long ns) {
  timespec ts{0, ns};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAIT, expected, &ts, nullptr, 0);
}
inline void futex_wake(std::atomic<std::uint32_t>* addr) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

}  // namespace ringtree::detail
