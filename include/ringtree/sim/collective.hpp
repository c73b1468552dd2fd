#pragma once
// One collective call on a simulated world (sim/world.hpp): timed without
// data, or run with data and checked element by element against a
// sequential reference. What ringtree-sim and the at-scale tests run.
#include <cstdint>
#include <string>
#include <vector>

#include <ringtree/algorithms/row_call.hpp>
#include <ringtree/sim/world.hpp>
#include <ringtree/tuning/cost_model.hpp>

namespace ringtree::sim {

struct call {
  collective what = collective::allreduce;
  algorithm algo = algorithm::ring;  // automatic: the cost model's pick (pick() below)
  std::size_t count = 0;             // elements per rank (per block where the collective has blocks)
  int root = 0;
  chunk_sizes chunks{};
};

// What a call moves, as the cost model counts it: the whole buffer, the
// input of reduce_scatter and all-to-all, one rank's block of scatter,
// gather and allgather.
inline std::size_t model_bytes(collective c, std::size_t count, std::size_t elem, int n) noexcept {
  const bool whole_input = c == collective::reduce_scatter || c == collective::alltoall;
  return count * elem * (whole_input ? static_cast<std::size_t>(n) : 1);
}

// The cost model for this world: its constants, its hosts.
inline tuner model_of(const world& w, const chunk_sizes& chunks = {}) {
  return tuner(w.size(), w.settings().net.model(), chunks, memory_kind::host,
               w.layout().hosts() > 1 ? host_shape::of(w.layout()) : host_shape{});
}

// The row a call runs: automatic is what the cost model picks among the
// rows that move messages (the simulator has no symmetric memory).
inline algorithm pick(const world& w, const call& c, std::size_t elem) {
  if (c.algo != algorithm::automatic) return c.algo;
  return model_of(w, c.chunks).choose(c.what, model_bytes(c.what, c.count, elem, w.size()));
}

// Whether the world can run row a of c: offered there, and over messages.
inline bool runs(const world& w, collective c, algorithm a, std::size_t bytes) {
  const placement at{w.size(), bytes, memory_kind::host, false, false, w.layout().hosts()};
  return a == algorithm::automatic || (detail::offers(c, a, at) && !detail::find_row(c, a)->window_only);
}

// Virtual seconds one call takes (the last rank's return), elements of E.
// Without data the buffers are sizes only.
template <class E = float>
double time_call(world& w, const call& c) {
  const algorithm a = pick(w, c, sizeof(E));
  const int n = w.size();
  std::vector<detail::row_buffers<E>> held(w.data() ? n : 0);
  if (w.data())
    for (int r = 0; r < n; ++r) held[r] = detail::buffers_for<E>(c.what, n, r, c.root, c.count, [](int, std::size_t) { return E{}; });
  w.run([&](transport& t) {
    const int r = t.rank();
    const auto len = detail::lengths_for(c.what, n, r, c.root, c.count);
    std::span<E> in = w.data() ? std::span<E>(held[r].in) : w.nowhere<E>(len.in);
    std::span<E> data = w.data() ? std::span<E>(held[r].data) : w.nowhere<E>(len.data);
    detail::run_row(t, c.what, a, c.chunks, std::span<const E>(in), data, op::sum, c.root, "ringtree-sim");
  });
  return w.elapsed();
}

// Runs one call with data (the world must carry it) and compares every
// rank's result with the sequential reference: "" where all agree, else
// the first wrong element. Inputs are 64-bit integers, so sums in any
// order agree bit for bit.
inline std::string check_call(world& w, const call& c) {
  if (!w.data()) throw error("ringtree-sim", -1, "checking results needs a world with data");
  using E = std::uint64_t;
  const algorithm a = pick(w, c, sizeof(E));
  const int n = w.size();
  const std::size_t m = c.count, nm = m * static_cast<std::size_t>(n);
  auto input = [](int r, std::size_t i) { return E(r + 1) * 1000003u + E(i) * 7919u; };
  std::vector<detail::row_buffers<E>> b(n);
  for (int r = 0; r < n; ++r) b[r] = detail::buffers_for<E>(c.what, n, r, c.root, m, input);
  w.run([&](transport& t) {
    const int r = t.rank();
    detail::run_row(t, c.what, a, c.chunks, std::span<const E>(b[r].in), std::span<E>(b[r].data), op::sum, c.root, "ringtree-sim");
  });
  // The sums over ranks, once: element i of every rank's input.
  const bool reduces = c.what == collective::allreduce || c.what == collective::reduce || c.what == collective::reduce_scatter;
  std::vector<E> sum(reduces ? (c.what == collective::reduce_scatter ? nm : m) : 0, 0);
  for (int r = 0; r < n && reduces; ++r)
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += input(r, i);
  for (int r = 0; r < n; ++r) {
    const auto& got = b[r].data;
    auto want = [&](std::size_t i, bool& checked) -> E {
      checked = true;
      switch (c.what) {
        case collective::allreduce: return sum[i];
        case collective::reduce: checked = r == c.root; return checked ? sum[i] : 0;
        case collective::broadcast: return input(c.root, i);
        case collective::reduce_scatter: checked = i / m == static_cast<std::size_t>(r); return checked ? sum[i] : 0;
        case collective::allgather: case collective::gather: return input(static_cast<int>(i / m), i % m);
        case collective::scatter: return input(c.root, static_cast<std::size_t>(r) * m + i);
        case collective::alltoall: return input(static_cast<int>(i / m), static_cast<std::size_t>(r) * m + i % m);
        case collective::barrier: checked = false; return 0;
      }
      return 0;
    };
    for (std::size_t i = 0; i < got.size(); ++i) {
      bool checked = false;
      const E expected = want(i, checked);
      if (checked && got[i] != expected)
        return detail::cat(to_string(c.what), " ", to_string(a), " on ", w.layout().describe(), " ranks, count ", m, ", root ", c.root,
                           ": rank ", r, " element ", i, " is ", got[i], ", expected ", expected);
    }
  }
  return {};
}

}  // namespace ringtree::sim
