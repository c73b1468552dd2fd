#pragma once
// Watch a collective: run one call of any collective and algorithm on n
// threads (local_world) through the traced transport, and tell its story
// (trace/story.hpp): every step's messages, and every rank's buffer after
// each step, exactly (receives land after the snapshot: trace_recorder::
// exact_snapshots), with for every element the set of ranks whose input it
// holds. What ringtree-trace prints and draws, and what its tests check.
//
// The algorithm's row runs on the ranks' working buffers themselves (as the
// communicator runs it, without the copies around it), so a reduce-scatter
// or a reduce shows the buffer it works in. Two runs of the same schedule
// make a story: inputs 100 r + i (the values shown), then 1 << r (sums of
// distinct bits are the sets of contributors; copies keep them).
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <ringtree/algorithms/row_call.hpp>
#include <ringtree/communicator-inl.hpp>  // over the simulator, also with RINGTREE_PREBUILT
#include <ringtree/sim/world.hpp>
#include <ringtree/trace/story.hpp>
#include <ringtree/transport/hosts.hpp>
#include <ringtree/transport/local.hpp>

namespace ringtree {

struct watch_options {
  collective what = collective::allreduce;
  algorithm algo = algorithm::automatic;  // automatic: the cost model's pick (deterministic)
  int ranks = 4, root = 0;
  std::size_t count = 8;  // elements per rank, per block where the collective has blocks
  int hosts = 1;          // > 1: ranks dealt host by host to emulated hosts (host_groups)
  cost_model model{};     // the constants of the cost terms, and automatic's
  // Run the ranks on the simulator (sim/world.hpp) instead of threads: the
  // same story, one thread, and the Chrome trace in virtual time on a
  // network with `model`'s constants.
  bool simulate = false;
  chunk_sizes chunks{};
};

namespace detail {

// How the page lays out an algorithm's ranks.
inline std::string figure_of(algorithm a, int hosts) {
  switch (a) {
    case algorithm::tree: case algorithm::binomial: case algorithm::linear: return "tree";
    case algorithm::recursive_doubling: case algorithm::rabenseifner: return "hypercube";
    case algorithm::hierarchical: return "hosts";
    default: return hosts > 1 ? "hosts" : "circle";
  }
}

// One run: every rank's buffers at the start and after each step, and the recorder.
struct watched_run {
  std::vector<std::vector<std::uint64_t>> start;
  std::vector<std::vector<std::vector<std::uint64_t>>> after;  // [step][rank]
  std::vector<row_buffers<std::uint64_t>> ranks;
  std::unique_ptr<trace_recorder> rec;
};

template <class F>
watched_run watch_once(const watch_options& o, algorithm a, const std::vector<std::uint64_t>& host_key, F input) {
  const int n = o.ranks;
  watched_run w;
  w.rec = std::make_unique<trace_recorder>(n);
  for (int r = 0; r < n; ++r) w.ranks.push_back(buffers_for<std::uint64_t>(o.what, n, r, o.root, o.count, input));
  for (auto& b : w.ranks) w.start.push_back(b.data);
  // snapshots[r][s]: rank r's buffer after step s (each rank writes only
  // its own: no lock). When a message of step k arrives (its counter moves
  // to k + 1, the bytes not landed yet), the rank has done all it does with
  // what came before: its buffer is the one after step k - 1, and after
  // every step since the last message it got.
  std::vector<std::map<int, std::vector<std::uint64_t>>> snaps(n);
  std::vector<int> at(n, 0);
  w.rec->exact_snapshots = true;
  w.rec->on_step = [&](int r, int step) {
    for (int s = std::max(0, at[r] - 1); s <= step - 2; ++s) snaps[r][s] = w.ranks[r].data;
    at[r] = step;
  };
  auto run = [&](auto& view) {
    auto& b = w.ranks[view.rank()];
    run_row(view, o.what, a, o.chunks, std::span<const std::uint64_t>(b.in), std::span<std::uint64_t>(b.data), op::sum, o.root, "ringtree-trace");
  };
  if (o.simulate) {
    sim::options so;
    so.net = sim::network::of(o.model);
    so.hosts.assign(1, 0);
    for (int r = 0; r < n; ++r) {  // (host_key: the hosts in rank order)
      if (r > 0 && host_key[r] != host_key[r - 1]) so.hosts.push_back(0);
      ++so.hosts.back();
    }
    sim::world world(so);
    w.rec->clock = [&world] { return world.clock_us(); };
    world.run([&](sim::transport& t) {
      traced_transport<sim::transport> view(t, w.rec.get());
      run(view);
    });
    w.rec->clock = nullptr;
  } else {
    local_world world(n);
    world.run([&](local_transport& t) {
      if (o.hosts > 1) {
        host_groups<local_transport> h(t, host_key);
        traced_transport<host_groups<local_transport>> view(h, w.rec.get());
        run(view);
      } else {
        traced_transport<local_transport> view(t, w.rec.get());
        run(view);
      }
    });
  }
  const int steps = w.rec->steps();
  w.after.assign(steps, std::vector<std::vector<std::uint64_t>>(n));
  for (int r = 0; r < n; ++r)
    for (int s = 0; s < steps; ++s) {
      const auto it = snaps[r].find(s);
      w.after[s][r] = it != snaps[r].end() ? it->second : w.ranks[r].data;  // after its last message: the final buffer
    }
  return w;
}

}  // namespace detail

// The story of one call (see the top of this file). Raises ringtree::error
// for what cannot be watched, naming the valid choices.
// `chrome`: where to write the run as a Chrome trace, if anywhere.
inline trace_story watch(const watch_options& o, std::ostream* chrome = nullptr) {
  const int n = o.ranks;
  if (n < 1 || n > 64) throw error("ringtree-trace", -1, detail::cat("--ranks ", n, ": 1 to 64 (an element's contributors are 64 bits)"));
  if (o.hosts < 1 || o.hosts > n) throw error("ringtree-trace", -1, detail::cat("--hosts ", o.hosts, ": 1 to --ranks (", n, ")"));
  const bool rooted = o.what == collective::broadcast || o.what == collective::reduce || o.what == collective::scatter ||
                      o.what == collective::gather;
  if (rooted && (o.root < 0 || o.root >= n)) throw error("ringtree-trace", -1, detail::cat("--root ", o.root, " is out of range for ", n, " ranks"));
  std::vector<std::uint64_t> host_key(n, 0);
  for (int h = 0; h < o.hosts; ++h) {
    const auto b = detail::block(std::size_t(n), o.hosts, h);
    for (std::size_t r = b.begin; r < b.begin + b.size; ++r) host_key[r] = std::uint64_t(h);
  }
  const std::size_t blocks = (o.what == collective::scatter || o.what == collective::gather || o.what == collective::allgather ||
                              o.what == collective::reduce_scatter || o.what == collective::alltoall) ? std::size_t(n) : 1;
  const std::size_t bytes = o.what == collective::reduce_scatter || o.what == collective::alltoall ? o.count * blocks * 8 : o.count * 8;
  const placement at{n, bytes, memory_kind::host, false, false, o.hosts};
  algorithm a = o.algo;
  if (a == algorithm::automatic) a = tuner(n, o.model, o.chunks, memory_kind::host,
                                           o.hosts > 1 ? host_shape::of(host_layout(host_key)) : host_shape{}).choose(o.what, bytes);
  if (!detail::offers(o.what, a, at) || detail::find_row(o.what, a)->window_only)
    throw error("ringtree-trace", -1, detail::cat("--algo ", to_string(a), " is not one of ", to_string(o.what), "'s on ", n, " ranks",
                                                  o.hosts > 1 ? detail::cat(" on ", o.hosts, " hosts") : std::string(), " (available: ",
                                                  detail::offered_names(o.what, &at), ", automatic)"));
  auto values = detail::watch_once(o, a, host_key, [](int r, std::size_t i) { return std::uint64_t(100 * r) + i; });
  auto masks = detail::watch_once(o, a, host_key, [](int r, std::size_t) { return std::uint64_t{1} << r; });

  trace_story s;
  s.collective = std::string(to_string(o.what));
  s.algorithm = std::string(to_string(a));
  s.figure = detail::figure_of(a, o.hosts);
  s.ranks = n;
  s.root = rooted ? o.root : 0;
  s.count = o.count;
  s.elem_bytes = 8;
  s.model = o.model;
  if (o.hosts > 1)
    for (auto k : host_key) s.host_of.push_back(int(k));
  s.start_values = values.start;
  s.start_masks = masks.start;
  detail::fill_steps(s, *values.rec);
  // which elements of the sender's buffer each message carried (else scratch)
  std::vector<std::size_t> seen(s.steps.size(), 0);
  for (const auto& e : values.rec->events()) {
    auto& m = s.steps.at(e.step).messages.at(seen[e.step]++);
    m.count = e.bytes / sizeof(std::uint64_t);
    for (const auto* buf : {&values.ranks[e.from].data, &values.ranks[e.from].in}) {
      const auto* b = reinterpret_cast<const std::byte*>(buf->data());
      if (!buf->empty() && e.data >= b && e.data + e.bytes <= b + buf->size() * sizeof(std::uint64_t)) {
        m.first = static_cast<std::size_t>(e.data - b) / sizeof(std::uint64_t);
        m.in_buffer = buf == &values.ranks[e.from].data;
        break;
      }
    }
  }
  for (std::size_t k = 0; k < s.steps.size(); ++k) {
    s.steps[k].values = values.after.at(k);
    s.steps[k].masks = masks.after.at(k);
  }
  s.price();
  s.note = o.hosts > 1 ? detail::cat(o.hosts, " emulated hosts") : "";
  if (chrome) values.rec->write_chrome(*chrome);
  return s;
}

}  // namespace ringtree
