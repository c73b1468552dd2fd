#include <doctest/doctest.h>

#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <ringtree/core/copy.hpp>
#include <ringtree/core/reduce.hpp>

using namespace ringtree;

namespace {
// Element-by-element reference written without the kernel's helpers.
template <class E> E ref(op o, E a, E b) {
  if constexpr (float16_storage<E>) {
    const float x = static_cast<float>(a), y = static_cast<float>(b);
    switch (o) {
      case op::sum: case op::avg: return E(x + y);
      case op::prod: return E(x * y);
      case op::min: return E(y < x ? y : x);
      case op::max: return E(x < y ? y : x);
    }
  } else if constexpr (std::is_integral_v<E>) {
    using U = std::make_unsigned_t<E>;
    switch (o) {  // modulo 2^bits, computed in 64-bit unsigned
      case op::sum: case op::avg: return static_cast<E>(static_cast<U>(std::uint64_t(U(a)) + std::uint64_t(U(b))));
      case op::prod: return static_cast<E>(static_cast<U>(std::uint64_t(U(a)) * std::uint64_t(U(b))));
      case op::min: return b < a ? b : a;
      case op::max: return a < b ? b : a;
    }
  } else {
    switch (o) {
      case op::sum: case op::avg: return a + b;
      case op::prod: return a * b;
      case op::min: return b < a ? b : a;
      case op::max: return a < b ? b : a;
    }
  }
  return a;
}

template <class E> E random_value(std::mt19937& g) {
  if constexpr (float16_storage<E> || std::is_floating_point_v<E>) {
    return E(std::uniform_real_distribution<float>(-100, 100)(g));
  } else {
    return static_cast<E>(g());
  }
}

template <class E> void check_kernel() {
  std::mt19937 g(7);
  for (op o : {op::sum, op::prod, op::min, op::max, op::avg})
    for (std::size_t n : {0u, 1u, 3u, 15u, 16u, 17u, 64u, 100u, 1031u}) {
      std::vector<E> a(n), b(n);
      for (auto& x : a) x = random_value<E>(g);
      for (auto& x : b) x = random_value<E>(g);
      auto acc = a;
      reduce_into<E>(o, acc, b);
      for (std::size_t i = 0; i < n; ++i) {
        const E want = ref(o, a[i], b[i]);
        INFO("op=", to_string(o), " n=", n, " i=", i);
        REQUIRE(std::memcmp(&acc[i], &want, sizeof(E)) == 0);
      }
    }
}
}  // namespace

TEST_CASE_TEMPLATE("local reduction kernels match the element-wise reference", E, float, double, std::int8_t,
                   std::int16_t, std::int32_t, std::int64_t, std::uint8_t, std::uint16_t, std::uint32_t,
                   std::uint64_t, half, bfloat16) {
  check_kernel<E>();
}

TEST_CASE("integer sum and prod wrap around instead of overflowing") {
  CHECK(combine_one<std::int8_t>(op::sum, 127, 1) == -128);
  CHECK(combine_one<std::uint16_t>(op::prod, 65535, 65535) == 1);
  CHECK(combine_one<std::int32_t>(op::prod, std::numeric_limits<int>::min(), -1) == std::numeric_limits<int>::min());
}

TEST_CASE("avg divides the sum once") {
  std::vector<float> f = {3, 6, -9};
  finish_avg<float>(f, 3);
  CHECK(f == std::vector<float>{1, 2, -3});
  std::vector<int> i = {7, -7};
  finish_avg<int>(i, 2);
  CHECK(i == std::vector<int>{3, -3});
  std::vector<half> h = {half(5.0f)};
  finish_avg<half>(h, 2);
  CHECK(static_cast<float>(h[0]) == 2.5f);
}

TEST_CASE("op names") {
  CHECK(to_string(op::avg) == "avg");
  CHECK(to_string(op::prod) == "prod");
}

TEST_CASE_TEMPLATE("16-bit kernels keep infinities and NaN, in the vector body and the tail", E, half, bfloat16) {
  const float big = std::is_same_v<E, half> ? 65504.0f : 3.0e38f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<E> acc(37, E(big)), in(37, E(big));  // 2 vector blocks and a tail
  acc[3] = E(nan);
  acc[36] = E(nan);
  in[5] = E(-std::numeric_limits<float>::infinity());
  reduce_into<E>(op::sum, acc, in);
  for (std::size_t i = 0; i < acc.size(); ++i) {
    const float v = static_cast<float>(acc[i]);
    CAPTURE(i);
    if (i == 3 || i == 36) CHECK(std::isnan(v));
    else if (i == 5) CHECK(v == -std::numeric_limits<float>::infinity());
    else CHECK(v == std::numeric_limits<float>::infinity());  // max + max rounds to infinity
  }
}

// copy_bytes takes another path where the destination lies 1-63 bytes past
// the source (modulo 4 KiB) and the copy is 2 KiB or more: both paths, the
// edges between them and every tail length must copy exactly.
TEST_CASE("copy_bytes copies every byte at every distance and length, and nothing beyond") {
  std::vector<unsigned char> src(20000), dst(20000 + 4096 + 256);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  int bad = 0;
  for (std::size_t gap : {0u, 1u, 8u, 15u, 16u, 63u, 64u, 65u, 4095u, 4096u + 8u})
    for (std::size_t n : {0u, 1u, 63u, 2047u, 2048u, 2049u, 4096u, 4096u + 63u, 12345u, 16384u}) {
      std::fill(dst.begin(), dst.end(), 0xAB);
      // the destination `gap` bytes past the source modulo 4 KiB
      const auto s_at = reinterpret_cast<std::uintptr_t>(src.data()) & 4095;
      const std::size_t at = (s_at + gap + 4096 - (reinterpret_cast<std::uintptr_t>(dst.data()) & 4095)) % 4096 + 64;
      detail::copy_bytes(dst.data() + at, src.data(), n);
      for (std::size_t i = 0; i < n; ++i) bad += dst[at + i] != src[i];
      for (std::size_t i = 0; i < at; ++i) bad += dst[i] != 0xAB;
      for (std::size_t i = at + n; i < dst.size(); ++i) bad += dst[i] != 0xAB;
      CHECK_MESSAGE(bad == 0, "gap ", gap, ", ", n, " bytes: ", bad, " bytes wrong");
      bad = 0;
    }
}
