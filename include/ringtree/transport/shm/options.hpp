#pragma once
// What a user may set for a shared-memory transport, and the defaults and
// bounds those settings get: one place, so that a segment's creator and its
// attachers fill them in alike.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include <ringtree/core/config.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/transport/shm/layout.hpp>

namespace ringtree {

struct shm_options {
  std::optional<std::chrono::duration<double>> timeout{};  // unset: RINGTREE_TIMEOUT (default 300 s)
  std::size_t slots = 8;            // chunks in flight per pair of ranks
  std::size_t slot_bytes = 0;       // 0: 128 KiB, less for many ranks (64 MiB of slots at most)
  std::string job{};                // who may attach: "" for job_identity() (shm/bootstrap.hpp); a launcher
                                    // that shares a secret (torch's store) passes it here
};

namespace detail {

// The options with their defaults filled in (RINGTREE_TIMEOUT, a slot size
// for `size` ranks), or an error for numbers the segment cannot hold.
inline shm_options filled_shm_options(shm_options o, int size) {
  if (!o.timeout) o.timeout = config::from_env().timeout;
  if (o.slots == 0 || o.slots > detail::max_slots)
    throw error("shm_transport", -1, detail::cat("slots must be 1..", detail::max_slots, ", got ", o.slots));
  if (o.slot_bytes > detail::max_slot_bytes)
    throw error("shm_transport", -1, detail::cat("slot_bytes must be at most ", detail::max_slot_bytes, ", got ", o.slot_bytes));
  if (o.slot_bytes == 0) {
    const std::size_t pairs = static_cast<std::size_t>(size > 0 ? size : 1) * (size > 0 ? size : 1);
    o.slot_bytes = std::clamp<std::size_t>((std::size_t{64} << 20) / (pairs * o.slots), 4096, std::size_t{128} << 10);
  }
  return o;
}

}  // namespace detail
}  // namespace ringtree
