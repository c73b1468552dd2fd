#pragma once
// Element types ringtree reduces: float, double, the fixed-width integers,
// and two 16-bit floating-point storage types, `half` (IEEE binary16) and
// `bfloat16`, that compute in float. Conversions round to nearest even and
// keep infinities and NaN; they are branch-free so that reduction loops
// over 16-bit data vectorise.
#include <ringtree/core/cxx20.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string_view>
#include <type_traits>

// Small functions that must be inlined into the vectorised loops, also into
// the ones compiled for a wider instruction set.
#if defined(__GNUC__)
#define RINGTREE_INLINE [[gnu::always_inline]] inline
#define RINGTREE_LAMBDA_INLINE __attribute__((always_inline))
#else
#define RINGTREE_INLINE inline
#define RINGTREE_LAMBDA_INLINE
#endif

namespace ringtree {
namespace detail {
// c ? a : b without a branch, so that conversion loops vectorise.
RINGTREE_INLINE constexpr std::uint32_t select(bool c, std::uint32_t a, std::uint32_t b) noexcept {
  const std::uint32_t m = 0u - static_cast<std::uint32_t>(c);
  return (a & m) | (b & ~m);
}
}  // namespace detail

namespace detail {

// IEEE binary16.
struct binary16_codec {
  // binary16 -> binary32: exact. Normal numbers are rebased by one multiply
  // (exponent bias 15 -> 127); subnormals are built with a magic-number
  // subtraction; both are computed and one is selected with a bit mask (g++
  // does not vectorise a loop in which a ?: survives as a branch).
  RINGTREE_INLINE static float to_float(std::uint16_t h) noexcept {
    const std::uint32_t w = std::uint32_t{h} << 16;
    const std::uint32_t sign = w & 0x80000000u;
    const std::uint32_t two_w = w + w;
    const float normal = std::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float subnormal = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
    return std::bit_cast<float>(sign | detail::select(two_w < (1u << 27), std::bit_cast<std::uint32_t>(subnormal),
                                              std::bit_cast<std::uint32_t>(normal)));
  }

  // binary32 -> binary16, round to nearest even. The float adder does the
  // rounding: scaling to infinity and back flushes overflow to inf, and
  // adding a power of two aligned to the target precision rounds the
  // mantissa in hardware. NaN becomes a quiet NaN of the same sign.
  RINGTREE_INLINE static std::uint16_t from_float(float f) noexcept {
    const float abs = std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) & 0x7FFFFFFFu);
    float base = (abs * 0x1.0p+112f) * 0x1.0p-110f;
    const std::uint32_t w = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t shl1_w = w + w;
    const std::uint32_t sign = w & 0x80000000u;
    const std::uint32_t bias = std::max(shl1_w & 0xFF000000u, 0x71000000u);
    base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(base);
    const std::uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    return static_cast<std::uint16_t>((sign >> 16) | detail::select(shl1_w > 0xFF000000u, 0x7E00u, nonsign));
  }
};

// bfloat16: the top half of a binary32.
struct bfloat16_codec {
  RINGTREE_INLINE static float to_float(std::uint16_t b) noexcept {
    return std::bit_cast<float>(std::uint32_t{b} << 16);
  }
  // Round to nearest even by adding 0x7FFF plus the lowest kept bit; a NaN
  // would carry into the exponent, so it is replaced by a quiet NaN.
  RINGTREE_INLINE static std::uint16_t from_float(float f) noexcept {
    const std::uint32_t w = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t rounded = (w + 0x7FFFu + ((w >> 16) & 1u)) >> 16;
    return static_cast<std::uint16_t>(detail::select((w & 0x7FFFFFFFu) > 0x7F800000u, (w >> 16) | 0x0040u, rounded));
  }
};

}  // namespace detail

// A 16-bit floating-point value stored as its bits; arithmetic is done in
// float. Standard layout, so an array of them is an array of uint16_t.
template <class Codec>
struct basic_float16 : Codec {
  std::uint16_t bits = 0;
  basic_float16() = default;
  explicit basic_float16(float f) noexcept : bits(Codec::from_float(f)) {}
  explicit operator float() const noexcept { return Codec::to_float(bits); }
  static basic_float16 from_bits(std::uint16_t b) noexcept {
    basic_float16 h;
    h.bits = b;
    return h;
  }
  friend bool operator==(basic_float16 a, basic_float16 b) noexcept { return a.bits == b.bits; }
};

using half = basic_float16<detail::binary16_codec>;
using bfloat16 = basic_float16<detail::bfloat16_codec>;

enum class dtype : std::uint8_t {
  float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16
};

template <class E> inline constexpr bool is_element_v = false;
template <class E> inline constexpr dtype dtype_of = dtype::float32;
#define RINGTREE_ELEMENT(T, D)                        \
  template <> inline constexpr bool is_element_v<T> = true; \
  template <> inline constexpr dtype dtype_of<T> = dtype::D;
RINGTREE_ELEMENT(float, float32)
RINGTREE_ELEMENT(double, float64)
RINGTREE_ELEMENT(std::int8_t, int8)
RINGTREE_ELEMENT(std::int16_t, int16)
RINGTREE_ELEMENT(std::int32_t, int32)
RINGTREE_ELEMENT(std::int64_t, int64)
RINGTREE_ELEMENT(std::uint8_t, uint8)
RINGTREE_ELEMENT(std::uint16_t, uint16)
RINGTREE_ELEMENT(std::uint32_t, uint32)
RINGTREE_ELEMENT(std::uint64_t, uint64)
RINGTREE_ELEMENT(half, float16)
RINGTREE_ELEMENT(bfloat16, bfloat16)
#undef RINGTREE_ELEMENT

// Bytes per element of a type named at run time (0 for a number that names none).
constexpr std::size_t size_of(dtype d) noexcept {
  constexpr std::size_t sizes[] = {4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2};
  return static_cast<std::size_t>(d) < std::size(sizes) ? sizes[static_cast<std::size_t>(d)] : 0;
}

// The types every collective accepts.
template <class E>
concept element = is_element_v<std::remove_cv_t<E>>;

// 16-bit floats are stored as bits and computed in float.
template <class E>
concept float16_storage = std::is_same_v<E, half> || std::is_same_v<E, bfloat16>;

constexpr std::string_view to_string(dtype d) noexcept {
  constexpr std::string_view names[] = {"float",  "double", "int8",   "int16",  "int32", "int64",
                                        "uint8",  "uint16", "uint32", "uint64", "half",  "bfloat16"};
  return names[static_cast<int>(d)];
}

}  // namespace ringtree
