#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include <ringtree/core/dtype.hpp>

using ringtree::bfloat16;
using ringtree::half;

namespace {
// Independent references. half: the compiler's own _Float16 conversion
// (libgcc, round to nearest even) where it has one; clang 14 has none on
// x86-64 (the sanitizer builds), so there: the same rounding in double
// arithmetic. bfloat16: pick the nearer of the two neighbouring bfloat16
// values in double arithmetic, ties to even (valid below bfloat16's largest
// finite value, where both neighbours are finite). Neither takes NaN.
#ifdef __FLT16_MAX__
std::uint16_t half_ref(float f) { return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f)); }
float half_value(std::uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }
#else
std::uint16_t half_ref(float f) {
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::abs(double(f));
  if (a == 0) return sign;
  const double ulp = std::ldexp(1.0, std::max(std::ilogb(a), -14) - 10);
  const double q = std::nearbyint(a / ulp) * ulp;  // the default rounding mode: ties to even
  if (q >= 65536.0) return sign | 0x7C00;
  if (q < 0x1p-14) return sign | static_cast<std::uint16_t>(q * 0x1p24);
  const int e = std::ilogb(q);
  return sign | static_cast<std::uint16_t>(((e + 15) << 10) | static_cast<int>(std::ldexp(q, 10 - e) - 1024));
}
float half_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? HUGE_VAL : std::ldexp(1024 + m, e - 25);
  return static_cast<float>((h & 0x8000) ? -v : v);
}
#endif
std::uint16_t bf16_ref(float f) {
  const std::uint32_t w = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t lo = w & 0xFFFF0000u, hi = lo + 0x10000u;
  const double dlo = std::abs(double(std::bit_cast<float>(lo)) - f);
  const double dhi = std::abs(double(std::bit_cast<float>(hi)) - f);
  if (dlo < dhi) return lo >> 16;
  if (dhi < dlo) return hi >> 16;
  return ((lo >> 16) & 1) ? hi >> 16 : lo >> 16;
}
bool is_nan16(std::uint16_t h, bool bf) {
  return bf ? ((h & 0x7F80) == 0x7F80 && (h & 0x7F)) : ((h & 0x7C00) == 0x7C00 && (h & 0x3FF));
}
}  // namespace

TEST_CASE("half round-trips every 16-bit pattern exactly, NaN stays NaN") {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float f = half::to_float(h);
    CHECK((f == f) == !is_nan16(h, false));
    if (is_nan16(h, false)) {
      CHECK(is_nan16(half::from_float(f), false));
      CHECK((half::from_float(f) & 0x8000) == (h & 0x8000));
    } else {
      REQUIRE(half::from_float(f) == h);
      REQUIRE(f == half_value(h));
    }
  }
}

TEST_CASE("bfloat16 round-trips every 16-bit pattern exactly, NaN stays NaN") {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float f = bfloat16::to_float(h);
    if (is_nan16(h, true)) CHECK(is_nan16(bfloat16::from_float(f), true));
    else REQUIRE(bfloat16::from_float(f) == h);
  }
}

TEST_CASE("float -> 16-bit rounds to nearest even, overflow to infinity") {
  std::mt19937 gen(42);
  std::uniform_int_distribution<std::uint32_t> bits;
  int checked = 0;
  for (int i = 0; i < 2'000'000; ++i) {
    const float f = std::bit_cast<float>(bits(gen));
    if (std::isnan(f)) continue;
    REQUIRE(half::from_float(f) == half_ref(f));
    if (std::abs(f) < 3.3e38f) REQUIRE(bfloat16::from_float(f) == bf16_ref(f));
    ++checked;
  }
  CHECK(checked > 1'900'000);
  // Ties: 1 + 2^-11 is halfway between two halves; even wins (down); 1 + 3*2^-11 rounds up.
  CHECK(half::from_float(1.0f + 0x1p-11f) == 0x3C00);
  CHECK(half::from_float(1.0f + 3 * 0x1p-11f) == 0x3C02);
  CHECK(half::from_float(65520.0f) == 0x7C00);  // rounds to infinity
  CHECK(half::from_float(65519.0f) == 0x7BFF);
  CHECK(half::from_float(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(half::from_float(-std::numeric_limits<float>::infinity()) == 0xFC00);
  CHECK(half::from_float(0x1p-25f) == 0x0000);  // tie to even (zero)
  CHECK(half::from_float(0x1p-24f) == 0x0001);  // smallest subnormal
  CHECK(bfloat16::from_float(1.0f + 0x1p-8f) == 0x3F80);
  CHECK(bfloat16::from_float(1.0f + 3 * 0x1p-8f) == 0x3F82);
  CHECK(bfloat16::from_float(std::numeric_limits<float>::max()) == 0x7F80);
  CHECK(bfloat16::from_float(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(is_nan16(half::from_float(std::numeric_limits<float>::quiet_NaN()), false));
  CHECK(is_nan16(bfloat16::from_float(-std::numeric_limits<float>::quiet_NaN()), true));
  CHECK(is_nan16(bfloat16::from_float(std::bit_cast<float>(0x7F800001u)), true));  // signalling NaN whose payload is in the low bits
}

TEST_CASE("dtype names") {
  CHECK(ringtree::to_string(ringtree::dtype_of<half>) == "half");
  CHECK(ringtree::to_string(ringtree::dtype_of<std::uint64_t>) == "uint64");
  CHECK(ringtree::to_string(ringtree::dtype_of<bfloat16>) == "bfloat16");
  static_assert(ringtree::element<const float>);
  static_assert(!ringtree::element<long double>);
}
