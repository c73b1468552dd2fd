#pragma once
// copy_bytes: memcpy, except where the CPU's string copy is slow.
//
// glibc copies blocks of a few KiB and more with `rep movsb`, which on
// some CPUs (AMD EPYC here, with ERMS and FSRM) runs 15-20x slower when
// the destination lies 1 to 15 bytes past the source modulo 4 KiB (2.1
// against 49 GB/s for 128 KiB), and at about half speed up to 63 bytes. A
// sender's buffer and a shared-memory slot can lie so (bench/RESULTS.md,
// "Third round: all-to-all at once, the route to MPI's own in 3 ns, and a
// slow mode"). Such pairs copy in 64-byte blocks instead (26-41 GB/s);
// every other pair is memcpy's.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <ringtree/core/cxx20.hpp>

namespace ringtree::detail {

inline void copy_bytes(void* dst, const void* src, std::size_t n) noexcept {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const std::uintptr_t gap = (reinterpret_cast<std::uintptr_t>(d) - reinterpret_cast<std::uintptr_t>(s)) & 4095;
  if (n < 2048 || gap == 0 || gap >= 64) {
    std::memcpy(d, s, n);
    return;
  }
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) std::memcpy(d + i, s + i, 64);  // (vector moves: a fixed size is never `rep movsb`)
  std::memcpy(d + i, s + i, n - i);
}

}  // namespace ringtree::detail
