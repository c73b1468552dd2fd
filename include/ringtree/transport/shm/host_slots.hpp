#pragma once
// The default slot policy, host_slots: chunk payloads in the segment itself,
// copied with memcpy; shm_transport is slot_transport over it. Kept apart
// from slot_transport (shm/slots.hpp) so that the protocol names no policy.
#include <cstddef>
#include <cstring>
#include <functional>
#include <span>

#include <ringtree/core/copy.hpp>
#include <ringtree/transport/shm/slots.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree {
namespace detail {

// Where chunk payloads live and how they are copied: host_slots keeps them
// in the segment and copies with copy_bytes (core/copy.hpp). A policy may
// instead keep them in device memory (cuda_ipc.hpp); setup() then publishes
// this rank's policy data (an IPC handle) and reads the others'.
struct host_slots {
  using memory_type = host_memory;
  static constexpr const char* name = "shm";
  static constexpr bool payload_in_segment = true;
  // Symmetric memory is a POSIX segment per rank, set up with the
  // transport's own messages and freed without the peers: a communicator may
  // map it in a collective call (memory/shared_mapping.hpp).
  static constexpr bool maps_in_calls = true;
  struct context {
    int rank, size;
    std::size_t slots, slot_bytes;
    std::function<std::span<std::byte>(int)> policy_data;  // rank r's policy data
    std::function<void()> publish;                  // my policy data is written
    std::function<void()> wait_all_published;
  };
  void setup(const context&) {}
  host_slots for_split(int) const { return {}; }
  memory_type memory() const noexcept { return {}; }
  std::byte* payload(int /*from*/, int /*to*/, std::size_t /*index*/, std::byte* in_segment) const noexcept {
    return in_segment;
  }
  void put(std::byte* slot, const std::byte* src, std::size_t len) const noexcept { copy_bytes(slot, src, len); }
  void get(std::byte* dst, const std::byte* slot, std::size_t len) const noexcept { copy_bytes(dst, slot, len); }
};

}  // namespace detail

// Processes on one host, payloads in the shared segment.
using shm_transport = slot_transport<detail::host_slots>;

}  // namespace ringtree
