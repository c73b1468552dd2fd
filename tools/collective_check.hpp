#pragma once
// A reference check for every collective, shared by the host (local_world)
// and MPI suites: inputs are small integers, so every reduction order gives
// the same bits, and each rank computes the expected result sequentially.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <ringtree/communicator.hpp>
#include <ringtree/transport/local.hpp>

namespace rt_test {
using namespace ringtree;

// The largest rank count a sweep goes to: `full`, or RINGTREE_TEST_MAX_RANKS
// when set (the sanitizer runs, 5-15x slower, take the small counts only).
inline int max_ranks(int full) {
  const char* s = std::getenv("RINGTREE_TEST_MAX_RANKS");
  return s != nullptr && *s != '\0' ? std::min(full, std::atoi(s)) : full;
}

template <class E> E make(long v) {
  if constexpr (float16_storage<E>) return E(static_cast<float>(v));
  else return static_cast<E>(v);
}
template <class E> long double show(E v) {
  if constexpr (float16_storage<E>) return static_cast<long double>(static_cast<float>(v));
  else return static_cast<long double>(v);
}

// Input of rank r at index i. Products stay within half's range: the
// factor 2 appears on at most 4 ranks, the rest are +-1.
template <class E> E value(op o, int r, std::size_t i, unsigned seed) {
  const long k = static_cast<long>((r * 7 + i * 3 + seed) % 11);
  if (o == op::prod) {
    long v = (k == 0 && r < 4) ? 2 : 1;
    if (std::is_signed_v<E> || !std::is_integral_v<E>) v = (k % 3 == 1) ? -v : v;
    return make<E>(v);
  }
  return make<E>(std::is_unsigned_v<E> ? k : k - 3);
}

// The expected reduction of element i over n ranks, computed apart from
// ringtree's kernels (a plain loop in long double: the inputs are small
// integers, so sums and products are exact), so that a wrong kernel or avg
// divisor cannot agree with itself. Integer avg truncates the exact mean
// toward zero; floating avg rounds sum / n once, in E's compute type.
template <class E> E fold(op o, int n, std::size_t i, unsigned seed) {
  long double acc = show(value<E>(o, 0, i, seed));
  for (int r = 1; r < n; ++r) {
    const long double v = show(value<E>(o, r, i, seed));
    switch (o) {
      case op::sum: case op::avg: acc += v; break;
      case op::prod: acc *= v; break;
      case op::min: acc = v < acc ? v : acc; break;
      case op::max: acc = v > acc ? v : acc; break;
    }
  }
  if (o != op::avg) return make<E>(static_cast<long>(acc));
  if constexpr (std::is_integral_v<E>) return static_cast<E>(static_cast<long long>(acc) / n);
  else if constexpr (float16_storage<E>) return E(static_cast<float>(acc) / static_cast<float>(n));
  else return static_cast<E>(static_cast<E>(acc) / static_cast<E>(n));
}

template <class E> bool same_bits(E a, E b) { return std::memcmp(&a, &b, sizeof(E)) == 0; }

struct case_desc {
  collective what;
  algorithm algo;
  op o;
  std::size_t count;  // elements per rank (per block for scatter/gather/reduce_scatter/allgather)
  int root;
  unsigned seed;
};

inline std::string describe(const case_desc& c, int n, std::string_view type) {
  return detail::cat(to_string(c.what), " algo=", to_string(c.algo), " op=", to_string(c.o), " type=", type,
                     " count=", c.count, " ranks=", n, " root=", c.root);
}

// What one checked call found: how many elements are wrong, and the first.
struct verdict {
  std::size_t wrong = 0;
  std::string first;
  bool ok() const { return wrong == 0; }
};

// Where check_all's buffers live: make<E>(len, everywhere) gives a
// buffer of len elements (`everywhere`: every rank asks for this length at
// this point, so it may be a collective allocation).
template <class E>
struct held {
  std::shared_ptr<void> keep;
  std::span<E> span;
};
struct private_buffers {
  template <class E>
  held<E> make(std::size_t len, bool) const {
    auto v = std::make_shared<std::vector<E>>(len);
    return {v, std::span<E>(*v)};
  }
};
// Symmetric buffers (comm.allocate) wherever every rank asks for the same length.
template <class Comm>
struct symmetric_buffers {
  Comm* comm;
  template <class E>
  held<E> make(std::size_t len, bool everywhere) const {
    if (!everywhere) return private_buffers{}.make<E>(len, false);
    auto b = std::make_shared<symmetric_buffer<E>>(comm->template allocate<E>(len));
    return {b, b->span()};
  }
};

// Runs one collective on `comm` (ringtree's communicator, or anything with
// the same calls) and compares every element with the sequential reference.
template <class E, class Comm, class Buffers = private_buffers>
verdict check_all(Comm& comm, const case_desc& c, Buffers buffers = {}) {
  const int n = comm.size(), me = comm.rank();
  const std::size_t m = c.count;
  auto val = [&](int r, std::size_t i) { return value<E>(c.o, r, i, c.seed); };
  std::vector<E> want;
  held<E> in_buf{}, got_buf{};
  auto fill = [&](held<E>& x, std::size_t len, bool everywhere, int r) {
    x = buffers.template make<E>(len, everywhere);
    for (std::size_t i = 0; i < len; ++i) x.span[i] = val(r, i);
  };
  auto blank = [&](held<E>& x, std::size_t len, bool everywhere) {
    x = buffers.template make<E>(len, everywhere);
    for (auto& v : x.span) v = make<E>(99);
  };
  auto want_values = [&](std::size_t len, int r) {
    for (std::size_t i = 0; i < len; ++i) want.push_back(val(r, i));
  };
  std::span<E> got;
  std::span<const E> in;
  switch (c.what) {
    case collective::allreduce:
      fill(in_buf, m, true, me);
      blank(got_buf, m, true);
      comm.allreduce(in = in_buf.span, got = got_buf.span, c.o, c.algo);
      for (std::size_t i = 0; i < m; ++i) want.push_back(fold<E>(c.o, n, i, c.seed));
      break;
    case collective::reduce:
      fill(in_buf, m, true, me);
      blank(got_buf, me == c.root ? m : 0, false);
      comm.reduce(in = in_buf.span, got = got_buf.span, c.root, c.o, c.algo);
      if (me == c.root)
        for (std::size_t i = 0; i < m; ++i) want.push_back(fold<E>(c.o, n, i, c.seed));
      break;
    case collective::broadcast:
      if (me == c.root) fill(got_buf, m, true, c.root);
      else blank(got_buf, m, true);
      comm.broadcast(got = got_buf.span, c.root, c.algo);
      want_values(m, c.root);
      break;
    case collective::scatter:
      if (me == c.root) fill(in_buf, m * n, false, c.root);
      blank(got_buf, m, true);
      comm.scatter(in = in_buf.span, got = got_buf.span, c.root, c.algo);
      for (std::size_t i = 0; i < m; ++i) want.push_back(val(c.root, me * m + i));
      break;
    case collective::gather:
      fill(in_buf, m, true, me);
      blank(got_buf, me == c.root ? m * n : 0, false);
      comm.gather(in = in_buf.span, got = got_buf.span, c.root, c.algo);
      if (me == c.root)
        for (int r = 0; r < n; ++r) want_values(m, r);
      break;
    case collective::reduce_scatter:
      fill(in_buf, m * n, true, me);
      blank(got_buf, m, true);
      comm.reduce_scatter(in = in_buf.span, got = got_buf.span, c.o, c.algo);
      for (std::size_t i = 0; i < m; ++i) want.push_back(fold<E>(c.o, n, me * m + i, c.seed));
      break;
    case collective::allgather:
      fill(in_buf, m, true, me);
      blank(got_buf, m * n, true);
      comm.allgather(in = in_buf.span, got = got_buf.span, c.algo);
      for (int r = 0; r < n; ++r) want_values(m, r);
      break;
    case collective::barrier:
      comm.barrier();
      break;
    case collective::alltoall:  // block j of rank r's input is r's values j*m..: rank me gets block me of everyone's
      fill(in_buf, m * n, true, me);
      blank(got_buf, m * n, true);
      comm.alltoall(in = in_buf.span, got = got_buf.span, c.algo);
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < m; ++i) want.push_back(val(r, me * m + i));
      break;
  }
  verdict v;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!same_bits(got[i], want[i]) && v.wrong++ == 0)
      v.first = detail::cat(describe(c, n, to_string(dtype_of<E>)), ": rank ", me, " index ", i, " got ",
                            show(got[i]), " expected ", show(want[i]));
  return v;
}

// The first mismatch, or "".
// The elements a call of case c is sized by (communicator::choose's bytes).
inline std::size_t call_elems(const case_desc& c, int n) {
  const bool whole = c.what == collective::reduce_scatter || c.what == collective::alltoall;
  return whole ? c.count * static_cast<std::size_t>(n) : c.count;
}
// Whether case c's row runs on comm at its size: a row that runs some
// calls only through the staging slots (direct on private memory) runs
// those that fit; every other row every case.
template <class E, class Comm>
bool runs_here(Comm& comm, const case_desc& c, bool symmetric) {
  if constexpr (requires { comm.placement_of(std::size_t{0}); }) {
    const auto* r = detail::find_row(c.what, c.algo);
    return !r || !r->window_only || r->offered(comm.placement_of(call_elems(c, comm.size()) * sizeof(E), symmetric));
  }
  return true;
}
template <class E, class Comm>
std::string check(Comm& comm, const case_desc& c) {
  return runs_here<E>(comm, c, false) ? check_all<E>(comm, c).first : std::string();
}
// The same on symmetric buffers (comm.allocate) wherever the lengths agree.
template <class E, class Comm>
std::string check_symmetric(Comm& comm, const case_desc& c) {
  return runs_here<E>(comm, c, true) ? check_all<E>(comm, c, symmetric_buffers<Comm>{&comm}).first : std::string();
}



// Counts that exercise the edge cases for n ranks.
inline std::vector<std::size_t> edge_counts(int n) {
  std::vector<std::size_t> c = {0, 1, static_cast<std::size_t>(n > 1 ? n - 1 : 2), static_cast<std::size_t>(n + 1), 31, 1000};
  return c;
}

inline bool uses_op(collective c) {
  return c == collective::allreduce || c == collective::reduce || c == collective::reduce_scatter;
}
inline bool rooted(collective c) {
  return c == collective::broadcast || c == collective::reduce || c == collective::scatter || c == collective::gather;
}

// Every (collective, algorithm, op, root) combination for n ranks: the
// algorithms of private memory (with those that stream through staging
// where `streams`), or (`symmetric`) the direct ones and automatic.
// `hosts`: how many the ranks span (the hierarchical rows need more than one).
inline std::vector<case_desc> all_cases(int n, const std::vector<std::size_t>& counts, unsigned seed = 0,
                                        bool symmetric = false, bool streams = false, int hosts = 1) {
  std::vector<case_desc> out;
  const collective colls[] = {collective::allreduce, collective::reduce,         collective::broadcast,
                              collective::scatter,   collective::gather,         collective::reduce_scatter,
                              collective::allgather, collective::barrier,        collective::alltoall};
  for (auto what : colls) {
    std::vector<algorithm> algos;
    for (const auto& r : detail::rows)
      // (on symmetric memory: the rows that read it, not those that only stage)
      if (r.what == what && (symmetric ? r.direct && r.offered(placement{n, 1, memory_kind::host, true, false, hosts})
                                       : !r.window_only || (streams && (r.streams || r.stages))) &&
          (!r.across_hosts || r.offered(placement{n, 1, memory_kind::host, false, false, hosts})))
        algos.push_back(r.id);
    algos.push_back(algorithm::automatic);
    std::vector<op> ops = {op::sum};
    if (uses_op(what)) ops = {op::sum, op::prod, op::min, op::max, op::avg};
    std::vector<int> roots = {0};
    if (rooted(what) && n > 1) roots = {0, n - 1, n / 2};
    for (auto a : algos)
      for (auto o : ops)
        for (auto root : roots)
          for (auto count : counts) {
            out.push_back({what, a, o, count, root, seed});
            if (what == collective::barrier) break;
          }
  }
  return out;
}

inline std::vector<case_desc> symmetric_cases(int n, const std::vector<std::size_t>& counts, unsigned seed = 0) {
  return all_cases(n, counts, seed, true);
}

// One case on private or (where `comm` can allocate) symmetric buffers;
// a wrapper whose symmetric buffers are not host memory says how it makes
// them (comm.symmetric_buffers(): a Buffers policy as above).
template <class E, class Comm>
std::string check_case(Comm& comm, const case_desc& c, bool symmetric) {
  if constexpr (requires { comm.symmetric_buffers(); }) {
    if (symmetric) return check_all<E>(comm, c, comm.symmetric_buffers()).first;
  } else if constexpr (requires { comm.template allocate<E>(std::size_t{0}); }) {
    if (symmetric) return check_symmetric<E>(comm, c);
  }
  return check<E>(comm, c);
}

// Whether private calls on `comm` may stream through shared staging, as
// the communicator itself says.
template <class Comm>
bool streams_private(Comm& comm) {
  if constexpr (requires { comm.placement_of(std::size_t{0}); }) return comm.placement_of(0).staging;
  else return false;
}
template <class Comm>
int hosts_of(Comm& comm) {
  if constexpr (requires { comm.placement_of(std::size_t{0}); }) return comm.placement_of(0).hosts;
  else return 1;
}

// All-to-all of blocks of different sizes whose send and receive lists
// differ (rank r sends f(2r + j) elements to rank j and receives f(2j + r)
// from it, some of them 0), so that send and receive offsets differ: ""
// or the first wrong element. Block j of r's input holds 1000 r + 10 j + i.
// `a`: automatic (which runs such blocks pairwise) or a row that takes them.
template <class Comm>
std::string check_alltoallv(Comm& comm, algorithm a = algorithm::automatic) {
  const int n = comm.size(), r = comm.rank();
  auto f = [](int x) { return static_cast<std::size_t>(x % 4); };
  std::vector<std::size_t> sends(n), recvs(n);
  for (int j = 0; j < n; ++j) sends[j] = f(2 * r + j), recvs[j] = f(2 * j + r);
  std::vector<std::int32_t> in, out;
  for (int j = 0; j < n; ++j)
    for (std::size_t i = 0; i < sends[j]; ++i) in.push_back(1000 * r + 10 * j + static_cast<std::int32_t>(i));
  for (int j = 0; j < n; ++j) out.resize(out.size() + recvs[j], -1);
  comm.alltoall(std::span<const std::int32_t>(in), std::span<const std::size_t>(sends), std::span<std::int32_t>(out),
                std::span<const std::size_t>(recvs), a);
  std::size_t at = 0;
  for (int j = 0; j < n; ++j)
    for (std::size_t i = 0; i < recvs[j]; ++i, ++at)
      if (const std::int32_t want = 1000 * j + 10 * r + static_cast<std::int32_t>(i); out[at] != want)
        return detail::cat("uneven alltoall (", to_string(a), ") on ", n, " ranks: rank ", r, " element ", i, " of rank ", j, "'s block (at ", at, ") is ", out[at],
                           ", expected ", want);
  return {};
}

// Runs every case (on symmetric buffers: the direct ones) on `comm`, every
// rank every case even after a failure, to stay in step; the first failure.
template <class... Es, class Comm>
std::string run_cases(Comm& comm, const std::vector<std::size_t>& counts, unsigned seed = 0, bool symmetric = false) {
  std::string first;
  for (const auto& c : all_cases(comm.size(), counts, seed, symmetric, streams_private(comm), hosts_of(comm))) {
    std::string f[] = {check_case<Es>(comm, c, symmetric)...};
    for (auto& x : f)
      if (first.empty()) first = x;
  }
  if constexpr (requires(std::span<const std::int32_t> i, std::span<const std::size_t> k, std::span<std::int32_t> o) {
                  comm.alltoall(i, k, o, k);
                }) {
    std::vector<algorithm> uneven = {algorithm::automatic};
    for (const auto& row : detail::rows)
      if (row.what == collective::alltoall && !row.window_only) uneven.push_back(row.id);
    for (auto a : uneven)
      if (auto x = check_alltoallv(comm, a); first.empty()) first = x;
  }
  return first;
}

// The same on an n-rank local_world: each rank's first failure.
template <class... Es>
std::vector<std::string> run_world(int n, const std::vector<std::size_t>& counts, communicator_options opt,
                                   bool symmetric = false) {
  std::vector<std::string> failures(n);
  local_world(n).run([&](local_transport& t) {
    communicator comm(t, opt);
    failures[t.rank()] = run_cases<Es...>(comm, counts, 0, symmetric);
  });
  return failures;
}

}  // namespace rt_test
