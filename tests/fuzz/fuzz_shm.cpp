// libFuzzer: what the shared-memory transport reads from memory that other
// processes write. A segment header (magic, version, ranks, sizes, slot
// geometry) must be refused unless its geometry adds up to exactly the
// bytes mapped; a stream of chunk headers (total, len) must be refused as
// soon as one would write outside the receive buffer or the slot. A peer's
// pid (read to tell whether it is alive) may be anything.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fuzz_check.hpp"

#include <ringtree/transport/shm.hpp>

using namespace ringtree::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::uint64_t w[8] = {};
  std::memcpy(w, data + 1, std::min<std::size_t>(size - 1, sizeof w));
  switch (data[0] % 3) {
    case 0: {  // a segment header
      shm_header h{};
      h.magic = (w[0] & 1) ? shm_magic : w[1];
      h.version = (w[0] & 2) ? shm_version : static_cast<std::uint32_t>(w[1]);
      const int ranks = static_cast<int>(w[2] % 70) - 2;
      h.size = (w[0] & 4) ? ranks : static_cast<std::int32_t>(w[3]);
      h.slots = (w[0] & 8) ? w[4] % 64 : w[4];
      h.slot_bytes = (w[0] & 16) ? w[5] % 4096 : w[5];
      const bool payload = w[0] & 32;
      // the size a real segment would have, or the header's claim, or anything
      std::size_t bytes = w[6];
      if ((w[0] & 64) && ranks > 0 && h.slots > 0 && h.slot_bytes > 0 && h.slots < 64 && h.slot_bytes < 4096)
        bytes = shm_layout{ranks, h.slots, h.slot_bytes, payload}.bytes();
      h.bytes = (w[0] & 128) ? bytes : w[7];
      if (header_matches(h, ranks, bytes, payload)) {
        // accepted: then the slots really lie within the mapping
        const shm_layout lay{ranks, h.slots, h.slot_bytes, payload};
        FUZZ_CHECK(!(h.slots == 0 || h.slot_bytes == 0 || ranks < 1 || lay.bytes() != bytes || lay.slots_at() > bytes));
        FUZZ_CHECK(h.slots <= max_slots && h.slot_bytes <= max_slot_bytes);
        FUZZ_CHECK(!payload || h.slot_bytes < bytes);  // payloads in the segment: inside it
      }
      break;
    }
    case 1: {  // a stream of chunk headers into a posted receive
      const std::size_t expected = w[0] % 100000, slot = 1 + w[1] % 8192;
      std::size_t done = 0;
      for (std::size_t i = 2; i + 1 < 8 && done < expected; i += 2) {
        const std::uint64_t total = (w[i] & 1) ? expected : w[i], len = w[i + 1] % (2 * slot + 2);
        if (!chunk_problem(1, 0, total, len, expected, done, slot).empty()) break;  // refused
        FUZZ_CHECK(!(len > slot || done + len > expected || len == 0));  // would have been copied: must fit
        done += len;
      }
      break;
    }
    case 2:  // a peer's pid as read from the segment
      (void)process_alive(static_cast<int>(w[0]));
      break;
  }
  return 0;
}
