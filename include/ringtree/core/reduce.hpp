#pragma once
// Reduction operators and the local kernels that apply them element-wise.
// The kernels are what every algorithm calls between messages, so they are
// written for the compiler's vectoriser: a fixed-length inner loop over
// restrict pointers (g++ -O2 only vectorises loops whose trip count it can
// see), then a scalar tail. Integer sum and prod wrap around (computed in
// unsigned arithmetic, so there is no undefined behaviour); 16-bit floats
// are computed in float and rounded once per combine. A floating-point sum
// or product that is NaN is the canonical quiet NaN: which payload of two
// NaN operands survives depends on the order the compiler put them in,
// which two ranks computing the same element need not share.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>

#include <ringtree/core/dtype.hpp>

// The AVX2 paths use the compiler's vector extensions and F16C builtins
// rather than <immintrin.h>, which alone costs most of a second to parse in
// every file (nvcc's front end is left the portable loops).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define RINGTREE_X86_DISPATCH 1
#include <cpuid.h>
#include <cstring>
#else
#define RINGTREE_X86_DISPATCH 0
#endif

namespace ringtree {

enum class op { sum, prod, min, max, avg };

constexpr std::string_view to_string(op o) noexcept {
  constexpr std::string_view names[] = {"sum", "prod", "min", "max", "avg"};
  return names[static_cast<int>(o)];
}

namespace detail {

// Arithmetic type in which E is combined.
template <class E> struct compute { using type = E; };
template <> struct compute<half> { using type = float; };
template <> struct compute<bfloat16> { using type = float; };
template <class E> using compute_t = typename compute<E>::type;

template <class E> constexpr compute_t<E> widen(E v) noexcept {
  if constexpr (float16_storage<E>) return E::to_float(v.bits);
  else return v;
}
template <class E> constexpr E narrow(compute_t<E> v) noexcept {
  if constexpr (float16_storage<E>) return E::from_bits(E::from_float(v));
  else return v;
}

// Integer arithmetic modulo 2^bits, in an unsigned type at least as wide as
// unsigned int (so that uint16 * uint16 cannot overflow a promoted int).
template <class T>
using wrap_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

// One NaN for every NaN result of + and * (a compare and a blend once
// vectorised: the loops stay memory-bound).
template <class T> RINGTREE_INLINE constexpr T canonical_nan(T r) noexcept {
  return r != r ? std::numeric_limits<T>::quiet_NaN() : r;
}

struct plus {
  template <class T> RINGTREE_INLINE constexpr T operator()(T a, T b) const noexcept {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(wrap_t<T>(a) + wrap_t<T>(b));
    else return canonical_nan(a + b);
  }
};
struct times {
  template <class T> RINGTREE_INLINE constexpr T operator()(T a, T b) const noexcept {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(wrap_t<T>(a) * wrap_t<T>(b));
    else return canonical_nan(a * b);
  }
};
struct minimum {
  template <class T> RINGTREE_INLINE constexpr T operator()(T a, T b) const noexcept { return b < a ? b : a; }
};
struct maximum {
  template <class T> RINGTREE_INLINE constexpr T operator()(T a, T b) const noexcept { return a < b ? b : a; }
};

template <class E, class F>
RINGTREE_INLINE void combine_loop(E* __restrict acc, const E* __restrict in, std::size_t n, F f) noexcept {
  constexpr std::size_t block = 64 / sizeof(E);  // one cache line per inner loop
  std::size_t i = 0;
  for (; i + block <= n; i += block)
    for (std::size_t j = 0; j < block; ++j) acc[i + j] = f(acc[i + j], in[i + j]);
  for (; i < n; ++i) acc[i] = f(acc[i], in[i]);
}

#if RINGTREE_X86_DISPATCH
// The same loop compiled for AVX2, chosen at run time: a header-only library
// cannot know the user's -march, and baseline x86-64 (SSE2) leaves half the
// cache bandwidth unused.
inline bool cpu_has_avx2_f16c() noexcept {
  // F16C from CPUID (leaf 1, ECX bit 29): clang 14 does not know the name.
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
  }();
  return yes;
}
template <class E, class F>
[[gnu::target("avx2,f16c")]] void combine_avx2(E* acc, const E* in, std::size_t n, F f) noexcept {
  combine_loop(acc, in, n, f);
}
// 16-bit floats, 16 at a time: widen to two float vectors, combine, narrow
// back. half converts in hardware (F16C, round to nearest even like
// half::from_float; only NaN payloads may differ); bfloat16 with integer
// vector ops computing exactly bfloat16::from_float.
typedef float rt_v8sf __attribute__((vector_size(32)));
typedef float rt_v4sf __attribute__((vector_size(16)));
typedef short rt_v8hi __attribute__((vector_size(16)));
typedef std::uint16_t rt_v8hu __attribute__((vector_size(16)));
typedef std::uint32_t rt_v8su __attribute__((vector_size(32)));
struct f16c_half {
  [[gnu::target("avx2,f16c")]] static void widen(const std::uint16_t* p, float* out) noexcept {
    for (int k = 0; k < 2; ++k) {
      rt_v8hi h;
      std::memcpy(&h, p + 8 * k, sizeof h);
      const rt_v8sf x = __builtin_ia32_vcvtph2ps256(h);
      std::memcpy(out + 8 * k, &x, sizeof x);
    }
  }
  [[gnu::target("avx2,f16c")]] static void narrow(const float* in, std::uint16_t* p) noexcept {
    for (int k = 0; k < 2; ++k) {
      rt_v8sf x;
      std::memcpy(&x, in + 8 * k, sizeof x);
      const rt_v8hi h = __builtin_ia32_vcvtps2ph256(x, 0);  // round to nearest even
      std::memcpy(p + 8 * k, &h, sizeof h);
    }
  }
  [[gnu::target("avx2,f16c")]] static float to_float(std::uint16_t h) noexcept {
    const rt_v8hi v = {static_cast<short>(h), 0, 0, 0, 0, 0, 0, 0};
    return __builtin_ia32_vcvtph2ps(v)[0];
  }
  [[gnu::target("avx2,f16c")]] static std::uint16_t from_float(float f) noexcept {
    const rt_v4sf v = {f, 0, 0, 0};
    return static_cast<std::uint16_t>(__builtin_ia32_vcvtps2ph(v, 0)[0]);
  }
};
struct avx2_bfloat16 {
  // A bfloat16 is the high half of a float.
  [[gnu::target("avx2,f16c")]] static void widen(const std::uint16_t* p, float* out) noexcept {
    for (int k = 0; k < 2; ++k) {
      rt_v8hu h;
      std::memcpy(&h, p + 8 * k, sizeof h);
      const rt_v8su w = __builtin_convertvector(h, rt_v8su) << 16;
      std::memcpy(out + 8 * k, &w, sizeof w);
    }
  }
  // bfloat16::from_float on 8 floats: round to nearest even, NaN stays a quiet NaN.
  [[gnu::target("avx2,f16c")]] static rt_v8hu round(const float* in) noexcept {
    rt_v8su w;
    std::memcpy(&w, in, sizeof w);
    const rt_v8su rounded = (w + 0x7FFFu + ((w >> 16) & 1u)) >> 16;
    const rt_v8su quiet = (w >> 16) | 0x40u;
    const rt_v8su nan = (rt_v8su)((w & 0x7FFFFFFFu) > 0x7F800000u);
    return __builtin_convertvector((rounded & ~nan) | (quiet & nan), rt_v8hu);
  }
  [[gnu::target("avx2,f16c")]] static void narrow(const float* in, std::uint16_t* p) noexcept {
    for (int k = 0; k < 2; ++k) {
      const rt_v8hu h = round(in + 8 * k);
      std::memcpy(p + 8 * k, &h, sizeof h);
    }
  }
  static float to_float(std::uint16_t b) noexcept { return bfloat16::to_float(b); }
  static std::uint16_t from_float(float f) noexcept { return bfloat16::from_float(f); }
};
template <class Conv, class F>
[[gnu::target("avx2,f16c")]] void combine_16(std::uint16_t* acc, const std::uint16_t* in, std::size_t n, F f) noexcept {
  alignas(32) float x[16], y[16];
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Conv::widen(acc + i, x);
    Conv::widen(in + i, y);
    for (int j = 0; j < 16; ++j) x[j] = f(x[j], y[j]);  // two vector instructions once vectorised
    Conv::narrow(x, acc + i);
  }
  for (; i < n; ++i) acc[i] = Conv::from_float(f(Conv::to_float(acc[i]), Conv::to_float(in[i])));
}
#endif

template <class E, class F>
void combine(E* acc, const E* in, std::size_t n, F f) noexcept {
#if RINGTREE_X86_DISPATCH
  if (cpu_has_avx2_f16c()) return combine_avx2(acc, in, n, f);
#endif
  combine_loop(acc, in, n, f);
}

// 16-bit floats: work on the bits (a half is pointer-interconvertible with
// its only member), widen to float, combine, round back.
template <float16_storage E, class F>
void combine(E* acc, const E* in, std::size_t n, F f) noexcept {
  auto* a = reinterpret_cast<std::uint16_t*>(acc);
  auto* b = reinterpret_cast<const std::uint16_t*>(in);
#if RINGTREE_X86_DISPATCH
  if (cpu_has_avx2_f16c())
    return combine_16<std::conditional_t<std::is_same_v<E, half>, f16c_half, avx2_bfloat16>>(a, b, n, f);
#endif
  combine(a, b, n, [f](std::uint16_t x, std::uint16_t y) RINGTREE_LAMBDA_INLINE {
    return E::from_float(f(E::to_float(x), E::to_float(y)));
  });
}

}  // namespace detail

// Which operand comes first. min and max with NaN or signed zeros are not
// commutative, so two ranks that combine each other's data must agree on
// the order (lower rank first) to end with the same bits.
enum class operands { acc_first, in_first };

// acc[i] = acc[i] (o) in[i] (or in[i] (o) acc[i]). avg combines as sum;
// finish_avg divides once at the end.
template <element E>
void reduce_into(op o, std::span<E> acc, std::span<const E> in, operands order = operands::acc_first) noexcept {
  const std::size_t n = acc.size() < in.size() ? acc.size() : in.size();
  auto run = [&](auto f) {
    if (order == operands::acc_first) detail::combine(acc.data(), in.data(), n, f);
    else detail::combine(acc.data(), in.data(), n, [f](auto a, auto b) RINGTREE_LAMBDA_INLINE { return f(b, a); });
  };
  switch (o) {
    case op::sum:
    case op::avg: run(detail::plus{}); break;
    case op::prod: run(detail::times{}); break;
    case op::min: run(detail::minimum{}); break;
    case op::max: run(detail::maximum{}); break;
  }
}

// Turns a sum over `ranks` contributions into their mean (floating point;
// integers take the exact path below).
template <element E>
void finish_avg(std::span<E> data, int ranks) noexcept {
  using C = detail::compute_t<E>;
  const C n = static_cast<C>(ranks);
  for (auto& v : data) v = detail::narrow<E>(static_cast<C>(detail::widen(v) / n));
}

// The exact mean of integers, truncated toward zero, without a wider type
// on the wire (a sum of n int8 values wraps long before it is divided):
// each rank contributes q = v / n and r = v % n, which are summed apart.
// sum(q) cannot overflow (|q| <= |v| / n) and |sum(r)| < n * n, so
//   mean = sum(q) + sum(r) / n
// is assembled exactly by avg_join. Host loops and device kernels share
// these two element functions.
namespace detail {
// x / n and x % n, truncated toward zero, for |x| < 2^52: a double
// reciprocal estimate (within one of the quotient) and one correction.
// An integer division per element costs ~10x a memory-bound pass; the
// loops below hoist 1.0 / n out.
RINGTREE_INLINE constexpr std::int64_t div_small(std::int64_t x, std::int64_t n, double inv, std::int64_t& r) noexcept {
  std::int64_t q = static_cast<std::int64_t>(static_cast<double>(x) * inv);
  r = x - q * n;
  if (x >= 0) {
    if (r < 0) --q, r += n;
    else if (r >= n) ++q, r -= n;
  } else {
    if (r > 0) ++q, r -= n;
    else if (r <= -n) --q, r += n;
  }
  return q;
}
inline constexpr int max_ranks_for_div_small = 1 << 26;  // |sum of remainders| < n^2 < 2^52
}  // namespace detail

template <std::integral E>
RINGTREE_INLINE constexpr std::int64_t avg_split(E& v, int ranks) noexcept {
  if constexpr (sizeof(E) <= 4) {  // |v| < 2^32: the reciprocal is exact enough
    std::int64_t r = 0;
    v = static_cast<E>(detail::div_small(static_cast<std::int64_t>(v), ranks, 1.0 / ranks, r));
    return r;
  } else if constexpr (std::is_signed_v<E>) {
    const std::int64_t x = v, n = ranks;
    v = static_cast<E>(x / n);
    return x % n;
  } else {
    const std::uint64_t x = v, n = static_cast<std::uint64_t>(ranks);
    v = static_cast<E>(x / n);
    return static_cast<std::int64_t>(x % n);
  }
}
template <std::integral E>
RINGTREE_INLINE constexpr E avg_join(E quotients, std::int64_t remainders, int ranks) noexcept {
  std::int64_t a = 0, b = 0;
  if (ranks < detail::max_ranks_for_div_small) a = detail::div_small(remainders, ranks, 1.0 / ranks, b);
  else a = remainders / ranks, b = remainders % ranks;
  // quotients + a is within one of the mean, so within E's range; unsigned
  // arithmetic wraps instead of overflowing in between.
  const std::uint64_t w = static_cast<std::uint64_t>(static_cast<std::int64_t>(quotients)) + static_cast<std::uint64_t>(a);
  if constexpr (std::is_signed_v<E>) {
    std::int64_t s = static_cast<std::int64_t>(w);
    if (s > 0 && b < 0) --s;       // mean = s + b/n, |b/n| < 1: truncate toward zero
    else if (s < 0 && b > 0) ++s;
    return static_cast<E>(s);
  } else {
    return static_cast<E>(static_cast<std::uint64_t>(quotients) + static_cast<std::uint64_t>(a));
  }
}
template <std::integral E>
void split_avg(std::span<E> data, std::span<std::int64_t> remainders, int ranks) noexcept {
  for (std::size_t i = 0; i < data.size(); ++i) remainders[i] = avg_split(data[i], ranks);
}
template <std::integral E>
void join_avg(std::span<E> data, std::span<const std::int64_t> remainders, int ranks) noexcept {
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = avg_join(data[i], remainders[i], ranks);
}

// The reference semantics of one combine, for tests and checks.
template <element E>
E combine_one(op o, E a, E b) noexcept {
  reduce_into<E>(o, std::span<E>(&a, 1), std::span<const E>(&b, 1));
  return a;
}

}  // namespace ringtree
