// Nothing silent: the cases where ringtree once returned wrong numbers with
// exit code 0, or aborted instead of raising. Each check has an expectation
// computed apart from the code under test (a plain loop, wider arithmetic).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <ringtree/ringtree.hpp>

#include "tools/collective_check.hpp"
#include "host_check.hpp"

using namespace ringtree;
using namespace std::chrono_literals;

namespace {

using rt_test::has;

const algorithm allreduce_algos[] = {algorithm::ring, algorithm::tree, algorithm::recursive_doubling,
                                     algorithm::rabenseifner};

// The exact mean of `vals`, truncated toward zero (128-bit: no wrap).
__extension__ using int128 = __int128;
template <class E>
E exact_mean(const std::vector<E>& vals) {
  int128 s = 0;
  for (E v : vals) s += static_cast<int128>(v);
  return static_cast<E>(s / static_cast<int128>(vals.size()));
}

// Every rank's input for the integer avg cases: the type's edges, zero and
// small values, mixed in signs, so that every sum wraps in E.
template <class E>
std::vector<E> edge_inputs(int rank, int n, std::size_t count) {
  using L = std::numeric_limits<E>;
  const E picks[] = {L::max(), L::min(), E(0), E(1), static_cast<E>(L::max() - 1), static_cast<E>(L::min() + 1),
                     static_cast<E>(L::max() / 2), static_cast<E>(-1)};
  std::vector<E> v(count);
  for (std::size_t i = 0; i < count; ++i) {
    // element i: all ranks at max, all at min, or a mix, depending on i
    const std::size_t k = i % 5;
    if (k == 0) v[i] = L::max();
    else if (k == 1) v[i] = L::min();
    else v[i] = picks[(i * 7 + static_cast<std::size_t>(rank) * (k + 1) + static_cast<std::size_t>(n)) % std::size(picks)];
  }
  return v;
}

template <class E>
void integer_avg_case(int n) {
  CAPTURE(n);
  CAPTURE(to_string(dtype_of<E>));
  const std::size_t count = 23;
  std::vector<std::vector<E>> inputs(n);
  for (int r = 0; r < n; ++r) inputs[r] = edge_inputs<E>(r, n, count * n);
  std::vector<E> want(count * n);
  for (std::size_t i = 0; i < count * n; ++i) {
    std::vector<E> col;
    for (int r = 0; r < n; ++r) col.push_back(inputs[r][i]);
    want[i] = exact_mean(col);
  }
  std::vector<std::string> wrong(n);
  local_world world(n);
  world.run([&](local_transport& t) {
    communicator comm(t, communicator_options{.model = cost_model{}});
    const int me = t.rank();
    auto note = [&](const char* what, std::size_t i, E got, E exp) {
      if (wrong[me].empty())
        wrong[me] = detail::cat(what, " rank ", me, " index ", i, " got ", +got, " expected ", +exp);
    };
    for (algorithm a : allreduce_algos) {
      std::vector<E> v = inputs[me];
      comm.allreduce(std::span<E>(v), op::avg, a);
      for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != want[i]) note(to_string(a).data(), i, v[i], want[i]);
    }
    for (algorithm a : {algorithm::ring, algorithm::tree, algorithm::binomial}) {
      std::vector<E> out(me == 1 % n ? count * n : 0);
      comm.reduce(std::span<const E>(inputs[me]), std::span<E>(out), 1 % n, op::avg, a);
      for (std::size_t i = 0; i < out.size(); ++i)
        if (out[i] != want[i]) note("reduce", i, out[i], want[i]);
    }
    std::vector<E> block(count);
    comm.reduce_scatter(std::span<const E>(inputs[me]), std::span<E>(block), op::avg);
    for (std::size_t i = 0; i < count; ++i)
      if (block[i] != want[me * count + i]) note("reduce_scatter", i, block[i], want[me * count + i]);
  });
  for (auto& w : wrong) CHECK_MESSAGE(w.empty(), w);
}

template <class E>
E from_bits(std::uint64_t b) {
  E v{};
  std::memcpy(static_cast<void*>(&v), &b, sizeof v);
  return v;
}

// Inputs for the bitwise-identity cases: NaNs with different payloads and
// signs on different ranks, +0 and -0, infinities, ordinary numbers.
template <class E>
std::vector<E> special_inputs(int rank, std::size_t count) {
  std::vector<E> v(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t k = (i * 5 + static_cast<std::uint64_t>(rank) * 3) % 9;
    if constexpr (sizeof(E) == 2) {  // half / bfloat16: quiet and signalling NaNs with payloads
      const bool bf = std::is_same_v<E, bfloat16>;
      const std::uint16_t nan = bf ? 0x7f81 : 0x7c01, inf = bf ? 0x7f80 : 0x7c00;
      const std::uint16_t pick[] = {static_cast<std::uint16_t>(nan + rank), static_cast<std::uint16_t>(0x8000 | (nan + 2 * rank + 1)),
                                    0x0000, 0x8000, inf, static_cast<std::uint16_t>(0x8000 | inf),
                                    static_cast<std::uint16_t>(bf ? 0x3f80 : 0x3c00), static_cast<std::uint16_t>(bf ? 0xbf80 : 0xbc00),
                                    static_cast<std::uint16_t>(bf ? 0x7fc0 + rank : 0x7e00 + rank)};
      v[i] = from_bits<E>(pick[k]);
    } else if constexpr (sizeof(E) == 4) {
      const std::uint32_t pick[] = {0x7fc00001u + rank, 0xffc00002u + rank, 0u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                    0x3f800000u, 0x7f800001u + rank /* signalling */, 0xbf800000u};
      v[i] = from_bits<E>(pick[k]);
    } else {
      const std::uint64_t pick[] = {0x7ff8000000000001ull + rank, 0xfff8000000000002ull + rank, 0ull, 0x8000000000000000ull,
                                    0x7ff0000000000000ull, 0xfff0000000000000ull, 0x3ff0000000000000ull,
                                    0x7ff0000000000001ull + rank, 0xbff0000000000000ull};
      v[i] = from_bits<E>(pick[k]);
    }
  }
  return v;
}

template <class E>
void bitwise_case(int n, algorithm a) {
  CAPTURE(n);
  CAPTURE(to_string(a));
  CAPTURE(to_string(dtype_of<E>));
  const std::size_t count = 97;
  for (op o : {op::sum, op::prod, op::min, op::max, op::avg}) {
    CAPTURE(to_string(o));
    std::vector<std::vector<E>> results(n);
    local_world world(n);
    world.run([&](local_transport& t) {
      communicator_options opt;
      opt.model = cost_model{};
      opt.chunks.ring_chunk_bytes = 16;  // several chunks, partial last ones
      opt.chunks.tree_chunk_bytes = 24;
      communicator comm(t, opt);
      std::vector<E> v = special_inputs<E>(t.rank(), count);
      comm.allreduce(std::span<E>(v), o, a);
      results[t.rank()] = v;
    });
    for (int r = 1; r < n; ++r) {
      CAPTURE(r);
      for (std::size_t i = 0; i < count; ++i)
        if (std::memcmp(&results[r][i], &results[0][i], sizeof(E)) != 0) {
          FAIL_CHECK("element ", i, " differs between rank 0 and rank ", r);
          break;
        }
    }
    // where any input is NaN, a sum or product is NaN (and the canonical one)
    if (o == op::sum || o == op::prod || o == op::avg) {
      for (std::size_t i = 0; i < count; ++i) {
        bool any_nan = false;
        for (int r = 0; r < n; ++r) {
          const E x = special_inputs<E>(r, count)[i];
          any_nan = any_nan || std::isnan(static_cast<double>(rt_test::show(x)));
        }
        if (any_nan) CHECK(std::isnan(static_cast<double>(rt_test::show(results[0][i]))));
      }
    }
  }
}

}  // namespace

TEST_CASE("integer avg is the exact mean truncated toward zero, for every integer type, algorithm and edge value") {
  for (int n : {2, 3, 4, 5, 7}) {
    integer_avg_case<std::int8_t>(n);
    integer_avg_case<std::uint8_t>(n);
    integer_avg_case<std::int16_t>(n);
    integer_avg_case<std::uint16_t>(n);
    integer_avg_case<std::int32_t>(n);
    integer_avg_case<std::uint32_t>(n);
    integer_avg_case<std::int64_t>(n);
    integer_avg_case<std::uint64_t>(n);
  }
}

TEST_CASE("integer avg: the cases that used to wrap") {
  local_world world(3);
  world.run([](local_transport& t) {
    communicator comm(t);
    std::vector<std::int8_t> a(1, 100);
    comm.allreduce(std::span<std::int8_t>(a), op::avg);
    CHECK(a[0] == 100);  // was 14: 300 wrapped to 44, then / 3
    const std::uint32_t in[] = {0, 0xffffffffu, 0xffffffffu};
    std::vector<std::uint32_t> b(1, in[t.rank()]);
    comm.allreduce(std::span<std::uint32_t>(b), op::avg);
    CHECK(b[0] == 2863311530u);  // was 1431655764
  });
}

TEST_CASE("NaN payloads, signed zeros and infinities: every rank gets the same bits, every op and algorithm") {
  for (int n : {2, 3, 4, 5, 6}) {
    for (algorithm a : allreduce_algos) {
      bitwise_case<float>(n, a);
      bitwise_case<double>(n, a);
      bitwise_case<half>(n, a);
      bitwise_case<bfloat16>(n, a);
    }
  }
}

TEST_CASE("a NaN result of sum and prod is the canonical quiet NaN, whatever the operands' payloads") {
  const float a = from_bits<float>(0x7fc00001u), b = from_bits<float>(0xffc00002u);
  for (op o : {op::sum, op::prod}) {
    const float ab = combine_one(o, a, b), ba = combine_one(o, b, a);
    CHECK(std::bit_cast<std::uint32_t>(ab) == 0x7fc00000u);
    CHECK(std::bit_cast<std::uint32_t>(ba) == 0x7fc00000u);
    std::vector<float> acc(100, a), in(100, b);
    reduce_into<float>(o, acc, in, operands::in_first);
    for (float x : acc) CHECK(std::bit_cast<std::uint32_t>(x) == 0x7fc00000u);
  }
}

TEST_CASE("sizes whose products overflow are refused, never wrapped into a match") {
  local_world world(2);
  world.run([](local_transport& t) {
    communicator comm(t);
    std::vector<float> small(4);
    std::vector<std::uint8_t> bytes(4);
    // (2^63) * 2 ranks wraps to 0: an empty `in` used to pass for it.
    const std::size_t half_range = std::size_t{1} << 63;
    std::span<std::uint8_t> huge(bytes.data(), half_range);  // never touched: the check must refuse first
    using cspan = std::span<const std::uint8_t>;
    if (t.rank() == 0) {
      CHECK_THROWS_WITH_AS(comm.scatter(cspan(), huge, 0), doctest::Contains("2 * 9223372036854775808, which overflows"), error);
      CHECK_THROWS_WITH_AS(comm.gather(cspan(huge), std::span<std::uint8_t>(), 0), doctest::Contains("which overflows"), error);
    }
    CHECK_THROWS_WITH_AS(comm.reduce_scatter(cspan(), huge), doctest::Contains("which overflows"), error);
    CHECK_THROWS_WITH_AS(comm.allgather(cspan(huge), std::span<std::uint8_t>()), doctest::Contains("which overflows"), error);
    // a span claiming more bytes than size_t holds, where the sizes agree
    std::span<float> huge_floats(small.data(), std::size_t{1} << 62);
    std::span<float> huge_in(small.data(), std::size_t{1} << 61);
    CHECK_THROWS_WITH_AS(comm.allgather(std::span<const float>(huge_in), huge_floats),
                         doctest::Contains("4611686018427387904 elements of float are more bytes than memory can hold"), error);
    // count * sizeof(E) overflows although in and out agree (the same span)
    std::span<float> too_many(small.data(), std::numeric_limits<std::size_t>::max() / 2);
    CHECK_THROWS_WITH_AS(comm.allreduce(too_many), doctest::Contains("more bytes than memory can hold"), error);
    CHECK_THROWS_WITH_AS(comm.broadcast(too_many, 0), doctest::Contains("more bytes than memory can hold"), error);
    // and the communicator still works
    std::vector<int> v(3, 1);
    comm.allreduce(std::span<int>(v));
    CHECK(v[2] == 2);
  });
  // In checked mode too: the invalid call raises on every rank.
  local_world world2(2);
  world2.run([](local_transport& t) {
    communicator comm(t, communicator_options{.checked = true});
    std::vector<std::uint8_t> small(4);
    std::span<std::uint8_t> huge(small.data(), std::size_t{1} << 63);
    CHECK_THROWS_WITH_AS(comm.reduce_scatter(std::span<const std::uint8_t>(), huge), doctest::Contains("which overflows"), error);
  });
}

TEST_CASE("allgather with a too-short out raises (it used to slice out of range first)") {
  local_world world(3);
  world.run([](local_transport& t) {
    communicator comm(t);
    std::vector<int> in(4, t.rank()), out(5);
    CHECK_THROWS_WITH_AS(comm.allgather(std::span<const int>(in), std::span<int>(out)),
                         doctest::Contains("out.size() = 5 but size() * in.size() = 3 * 4 = 12"), error);
    std::vector<int> none;
    CHECK_THROWS_WITH_AS(comm.allgather(std::span<const int>(in), std::span<int>(none)),
                         doctest::Contains("out.size() = 0"), error);
  });
}

TEST_CASE("checked mode names a mismatched algorithm and a mismatched op") {
  for (int field = 0; field < 2; ++field) {
    std::vector<std::string> msgs(3);
    local_world world(3, rt_test::scaled(10s));
    world.run([&](local_transport& t) {
      communicator comm(t, communicator_options{.checked = true, .model = cost_model{}});
      std::vector<float> v(8, 1.0f);
      const bool odd = t.rank() == 2;
      try {
        if (field == 0) comm.allreduce(std::span<float>(v), op::sum, odd ? algorithm::tree : algorithm::ring);
        else comm.allreduce(std::span<float>(v), odd ? op::max : op::sum, algorithm::ring);
      } catch (const error& e) {
        msgs[t.rank()] = e.what();
      }
    });
    for (int r = 0; r < 3; ++r) {
      CAPTURE(msgs[r]);
      if (field == 0) CHECK(has(msgs[r], "checked mode: ranks 2 differ from rank 0 in algorithm (rank 0: ring, rank 1: ring, rank 2: tree)"));
      else CHECK(has(msgs[r], "checked mode: ranks 2 differ from rank 0 in op (rank 0: sum, rank 1: sum, rank 2: max)"));
    }
  }
}

TEST_CASE("recursive doubling and Rabenseifner combine lower rank first: min and max over signed zeros equal the rank-order fold") {
  // With +0 and -0 (and no NaN) min and max are associative once ties go to
  // the left operand, so an algorithm that keeps the lower rank's operand
  // first must give exactly the sequential fold in rank order, in every
  // block. (Ring and tree reduce in their own orders: only identity across
  // ranks is promised there, tested above.)
  for (int n : {2, 3, 4, 5, 6, 8}) {
    for (algorithm a : {algorithm::recursive_doubling, algorithm::rabenseifner}) {
      for (op o : {op::min, op::max}) {
        CAPTURE(n);
        CAPTURE(to_string(a));
        CAPTURE(to_string(o));
        const std::size_t count = 64;
        auto input = [](int r, std::size_t i) { return ((i >> (r % 6)) ^ static_cast<std::size_t>(r)) & 1 ? -0.0f : 0.0f; };
        std::vector<std::vector<float>> got(n);
        local_world world(n);
        world.run([&](local_transport& t) {
          communicator_options opt;
          opt.model = cost_model{};
          opt.chunks.ring_chunk_bytes = 16;
          communicator comm(t, opt);
          std::vector<float> v(count);
          for (std::size_t i = 0; i < count; ++i) v[i] = input(t.rank(), i);
          comm.allreduce(std::span<float>(v), o, a);
          got[t.rank()] = v;
        });
        std::size_t wrong = 0;
        std::string first;
        for (std::size_t i = 0; i < count; ++i) {
          float want = input(0, i);
          for (int r = 1; r < n; ++r) {
            const float x = input(r, i);
            if (o == op::min ? x < want : want < x) want = x;  // ties keep the lower rank's value
          }
          for (int r = 0; r < n; ++r)
            if (std::bit_cast<std::uint32_t>(got[r][i]) != std::bit_cast<std::uint32_t>(want) && wrong++ == 0)
              first = detail::cat("rank ", r, " element ", i, ": sign bit ", std::signbit(got[r][i]), ", the fold's ",
                                  std::signbit(want));
        }
        CHECK_MESSAGE(wrong == 0, first);
      }
    }
  }
}
