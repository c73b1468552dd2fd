#pragma once
// The shared-memory segment's layout, in one place because every process
// of a communicator must agree on it byte for byte (shm_version names it):
// a header, one line per rank (pid, doorbell), and for every ordered pair
// (from, to) a ring of `slots` fixed-size slots with a producer counter
// (tail, written by `from`) and a consumer counter (head, written by `to`).
// A message travels as a stream of chunks, one per slot; each chunk carries
// the message's total length, so a receiver that expected another size
// raises instead of reading past its buffer. What another process wrote
// (a header's geometry, a chunk's lengths) is checked here before use.
#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include <ringtree/core/error.hpp>
#include <ringtree/transport/wait_board.hpp>

namespace ringtree::detail {

inline constexpr std::uint64_t shm_magic = 0x52494e4754524545ull;  // "RINGTREE"
inline constexpr std::uint32_t shm_version = 4;

struct alignas(64) shm_header {
  std::uint64_t magic;
  std::uint32_t version;
  std::int32_t size;
  std::uint64_t bytes;
  std::uint64_t slots;
  std::uint64_t slot_bytes;
  std::int32_t creator_pid;
  std::atomic<std::int32_t> attached;
  std::atomic<std::uint32_t> ready;
  std::uint64_t creator_start;  // the creator's start time (/proc), so that a reused pid is not taken for it
  char job[128];                // the creator's job identity; every attacher must share it
};
struct alignas(64) shm_rank {
  std::atomic<std::int32_t> pid;         // claimed by compare-and-swap from 0
  std::atomic<std::uint32_t> doorbell;
  std::atomic<std::uint32_t> sleeping;
  std::atomic<std::uint32_t> published;  // `policy_data` below is valid
  std::atomic<std::uint32_t> left;       // the rank's transport failed or was destroyed
  std::atomic<std::uint32_t> cpus_set;   // `cpus` below is valid
  alignas(64) std::byte policy_data[128];       // what a slot policy shares (a CUDA IPC handle)
  cpu_set_t cpus;                        // the CPUs this rank may run on (oversubscription)
  wait_line wait;                        // whom the rank waits for, in a long wait (wait_board.hpp)
};
struct alignas(64) shm_counter {
  std::atomic<std::uint64_t> value;
};
struct shm_queue {
  shm_counter tail;  // chunks written by the sender
  shm_counter head;  // chunks consumed by the receiver
};
struct shm_chunk {
  std::uint64_t total;  // length of the whole message
  std::uint64_t len;    // bytes in this chunk
};

inline std::size_t round64(std::size_t x) { return (x + 63) & ~std::size_t{63}; }

// What another process wrote is checked before it is used. A chunk header:
// the message's total length must be what this rank posted, and the chunk
// must fit its slot and what is left; "" if it may be copied.
inline std::string chunk_problem(int from, int to, std::uint64_t total, std::uint64_t len, std::size_t expected,
                                 std::size_t done, std::size_t slot_bytes) {
  if (total != expected)
    return cat("rank ", from, " sent a message of ", total, " bytes to rank ", to, ", which expected ", expected,
               " (mismatched collective calls?)");
  if (len > slot_bytes || len > expected - done || (len == 0 && expected != 0))
    return cat("corrupt chunk from rank ", from, ": ", len, " bytes in a slot of ", slot_bytes, " with ", expected - done,
               " left");
  return {};
}

struct shm_layout {
  int n;
  std::size_t slots, slot_bytes;
  bool payload_in_segment = true;  // false: only chunk headers here, payloads in device memory
  std::size_t ranks_at() const { return round64(sizeof(shm_header)); }
  std::size_t queues_at() const { return ranks_at() + round64(sizeof(shm_rank) * n); }
  std::size_t slot_stride() const { return round64(sizeof(shm_chunk) + (payload_in_segment ? slot_bytes : 0)); }
  std::size_t slots_at() const { return queues_at() + round64(sizeof(shm_queue) * n * n); }
  std::size_t bytes() const { return slots_at() + slot_stride() * slots * n * n; }
  // bytes(), or 0 where it would overflow (options are the user's numbers).
  std::size_t checked_bytes() const {
    std::size_t pairs = 0, per_pair = 0, all = 0, total = 0;
    const auto un = static_cast<std::size_t>(n);
    if (__builtin_mul_overflow(un, un, &pairs) || pairs > (std::size_t{1} << 40) ||
        __builtin_mul_overflow(slot_stride(), slots, &per_pair) || __builtin_mul_overflow(per_pair, pairs, &all) ||
        __builtin_add_overflow(all, slots_at(), &total))
      return 0;
    return total;
  }
};

// The segment's header: ours, for this many ranks, and its slot geometry
// adds up to the bytes mapped (with overflow checks: the numbers are not ours).
inline constexpr std::size_t max_slots = 4096, max_slot_bytes = std::size_t{1} << 30;
inline bool header_matches(const shm_header& h, int size, std::size_t bytes, bool payload_in_segment) {
  if (h.magic != shm_magic || h.version != shm_version || h.size != size || h.bytes != bytes || size < 1 ||
      h.slots == 0 || h.slots > max_slots || h.slot_bytes == 0 || h.slot_bytes > max_slot_bytes)
    return false;
  const shm_layout lay{size, h.slots, h.slot_bytes, payload_in_segment};
  std::size_t per_pair = 0, all = 0, total = 0;
  if (__builtin_mul_overflow(lay.slot_stride(), h.slots, &per_pair) ||
      __builtin_mul_overflow(per_pair, static_cast<std::size_t>(size) * static_cast<std::size_t>(size), &all) ||
      __builtin_add_overflow(all, lay.slots_at(), &total))
    return false;
  return total == bytes;
}

}  // namespace ringtree::detail
