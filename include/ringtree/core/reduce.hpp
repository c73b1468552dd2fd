#pragma once
// Reduction operators and the local kernels that apply them element-wise.
// The kernels are what every algorithm calls between messages, so they are
// written for the compiler's vectoriser: a fixed-length inner loop over
// restrict pointers (g++ -O2 only vectorises loops whose trip count it can
// see), then a scalar tail. Integer sum and prod wrap around (computed in
// unsigned arithmetic, so there is no undefined behaviour); 16-bit floats
// are computed in float and rounded once per combine.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include <ringtree/core/dtype.hpp>

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

struct plus {
  template <class T> constexpr T operator()(T a, T b) const noexcept {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(wrap_t<T>(a) + wrap_t<T>(b));
    else return a + b;
  }
};
struct times {
  template <class T> constexpr T operator()(T a, T b) const noexcept {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(wrap_t<T>(a) * wrap_t<T>(b));
    else return a * b;
  }
};
struct minimum {
  template <class T> constexpr T operator()(T a, T b) const noexcept { return b < a ? b : a; }
};
struct maximum {
  template <class T> constexpr T operator()(T a, T b) const noexcept { return a < b ? b : a; }
};

template <class E, class F>
void combine(E* __restrict acc, const E* __restrict in, std::size_t n, F f) noexcept {
  constexpr std::size_t block = 64 / sizeof(E);  // one cache line per inner loop
  std::size_t i = 0;
  for (; i + block <= n; i += block)
    for (std::size_t j = 0; j < block; ++j) acc[i + j] = f(acc[i + j], in[i + j]);
  for (; i < n; ++i) acc[i] = f(acc[i], in[i]);
}

// 16-bit floats: work on the bits (a half is pointer-interconvertible with
// its only member), widen to float, combine, round back.
template <float16_storage E, class F>
void combine(E* acc, const E* in, std::size_t n, F f) noexcept {
  combine(reinterpret_cast<std::uint16_t*>(acc), reinterpret_cast<const std::uint16_t*>(in), n,
          [f](std::uint16_t a, std::uint16_t b) {
            return E::from_float(f(E::to_float(a), E::to_float(b)));
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
    else detail::combine(acc.data(), in.data(), n, [f](auto a, auto b) { return f(b, a); });
  };
  switch (o) {
    case op::sum:
    case op::avg: run(detail::plus{}); break;
    case op::prod: run(detail::times{}); break;
    case op::min: run(detail::minimum{}); break;
    case op::max: run(detail::maximum{}); break;
  }
}

// Turns a sum over `ranks` contributions into their mean (integers truncate
// toward zero, like C++ division).
template <element E>
void finish_avg(std::span<E> data, int ranks) noexcept {
  using C = detail::compute_t<E>;
  const C n = static_cast<C>(ranks);
  for (auto& v : data) v = detail::narrow<E>(static_cast<C>(detail::widen(v) / n));
}

// The reference semantics of one combine, for tests and checks.
template <element E>
E combine_one(op o, E a, E b) noexcept {
  reduce_into<E>(o, std::span<E>(&a, 1), std::span<const E>(&b, 1));
  return a;
}

}  // namespace ringtree
