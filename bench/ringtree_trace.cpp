// ringtree-trace: watch a collective move data, step by step, on threads.
//   ringtree-trace --collective allreduce --algo ring --ranks 4 --count 8 [--root 0] [--hosts H] [--chrome trace.json] [--diagram]
// Prints, for every step (the longest chain of messages that depend on
// each other), which elements each rank sends to whom, then every rank's
// buffer after that step. --diagram prints only a table of the messages,
// step by step and rank by rank (the figures of docs/algorithms.md).
// --chrome writes the same run as a Chrome trace (one track per rank, one
// slice per send, receive and reduction) for ui.perfetto.dev.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>

#include "perf_args.hpp"

using namespace ringtree;

namespace {

struct args {
  collective what = collective::allreduce;
  algorithm algo = algorithm::automatic;
  int ranks = 4, root = 0, hosts = 1;
  std::size_t count = 8;
  std::string chrome;
  bool diagram = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "ringtree-trace: %s\nusage: ringtree-trace --collective NAME --algo NAME --ranks N --count M [--root R] [--hosts H] [--chrome FILE.json] [--diagram]\n", why.c_str());
  std::exit(2);
}

args parse(int argc, char** argv) {
  args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") usage("show a collective step by step");
    if (f == "--diagram") {
      a.diagram = true;
      continue;
    }
    if (i + 1 >= argc) usage(f + " needs a value");
    const std::string v = argv[++i];
    try {
      if (f == "--collective") a.what = perf::parse_collective(v);
      else if (f == "--algo") {
        const auto algo = algorithm_from_string(v);
        if (!algo) usage("unknown algorithm '" + v + "'");
        a.algo = *algo;
      } else if (f == "--ranks") a.ranks = static_cast<int>(perf::detail_::parse_int(f, v, 1, 64));
      else if (f == "--count") a.count = static_cast<std::size_t>(perf::detail_::parse_int(f, v, 0, 64));
      else if (f == "--root") a.root = static_cast<int>(perf::detail_::parse_int(f, v, 0, 63));
      else if (f == "--hosts") a.hosts = static_cast<int>(perf::detail_::parse_int(f, v, 1, 64));
      else if (f == "--chrome") a.chrome = v;
      else usage("unknown flag '" + f + "'");
    } catch (const error& e) {
      usage(e.what());
    }
  }
  return a;
}

std::string show(const std::vector<int>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s + "]";
}

// The collective of `a` on one rank's buffers.
template <class Comm>
void call(Comm& comm, const args& a, std::vector<int>& in, std::vector<int>& out) {
  std::span<const int> i(in);
  std::span<int> o(out);
  switch (a.what) {
    case collective::allreduce: comm.allreduce(i, o, op::sum, a.algo); break;
    case collective::broadcast: comm.broadcast(o, a.root, a.algo); break;
    case collective::reduce: comm.reduce(i, o, a.root, op::sum, a.algo); break;
    case collective::scatter: comm.scatter(i, o, a.root, a.algo); break;
    case collective::gather: comm.gather(i, o, a.root, a.algo); break;
    case collective::reduce_scatter: comm.reduce_scatter(i, o, op::sum, a.algo); break;
    case collective::allgather: comm.allgather(i, o, a.algo); break;
    case collective::barrier: comm.barrier(); break;
    case collective::alltoall: comm.alltoall(i, o, a.algo); break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const args a = parse(argc, argv);
  const int n = a.ranks;
  const std::size_t m = a.count;
  const bool blocked = a.what == collective::scatter || a.what == collective::gather ||
                       a.what == collective::reduce_scatter || a.what == collective::allgather || a.what == collective::alltoall;
  // Every rank's working buffer, and its snapshots by step.
  std::vector<std::vector<int>> in(n), out(n), start(n);
  std::vector<std::map<int, std::vector<int>>> after(n);
  for (int r = 0; r < n; ++r) {
    const std::size_t len_in = (a.what == collective::reduce_scatter || a.what == collective::alltoall ||
                                (a.what == collective::scatter && r == a.root)) ? m * n : m;
    for (std::size_t i = 0; i < len_in; ++i) in[r].push_back(100 * r + static_cast<int>(i));
    const bool gathers = a.what == collective::allgather || a.what == collective::alltoall || (a.what == collective::gather && r == a.root);
    out[r].assign(gathers ? m * n : ((a.what == collective::reduce && r != a.root) ? 0 : m), 0);
    if (a.what == collective::broadcast) out[r] = r == a.root ? in[r] : std::vector<int>(m, 0);
    start[r] = a.what == collective::broadcast ? out[r] : in[r];
  }
  trace_recorder rec(n);
  // A rank's counter moves to `step` when a message of step - 1 arrives,
  // before that data is used: its buffer then holds the result of step - 2.
  rec.on_step = [&](int r, int step) {
    if (step >= 2) after[r][step - 2] = out[r].empty() ? in[r] : out[r];
  };
  try {
    if (a.hosts > n) usage(detail::cat("--hosts ", a.hosts, " is more than --ranks ", n));
    // --hosts H: the ranks dealt to H emulated hosts, host by host (as even as they go)
    std::vector<std::uint64_t> host_of(n);
    for (int h = 0; h < a.hosts; ++h) {
      const auto b = detail::block(std::size_t(n), a.hosts, h);
      for (std::size_t r = b.begin; r < b.begin + b.size; ++r) host_of[r] = std::uint64_t(h);
    }
    local_world world(n);
    world.run([&](local_transport& t) {
      if (a.hosts > 1) {
        host_groups<local_transport> h(t, host_of);
        traced_transport<host_groups<local_transport>> tt(h, rec);
        communicator comm(tt);
        call(comm, a, in[t.rank()], out[t.rank()]);
      } else {
        traced_transport<local_transport> tt(t, rec);
        communicator comm(tt);
        call(comm, a, in[t.rank()], out[t.rank()]);
      }
    });
  } catch (const error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  const auto events = rec.events();
  const int steps = rec.steps();
  // Which elements a message carried: its bytes within the sender's input
  // or output buffer, else a copy in the algorithm's own scratch space.
  auto what = [&](const trace_event& e) {
    const std::size_t k = e.bytes / sizeof(int);
    for (const auto* buf : {&out[e.from], &in[e.from]}) {
      const auto* b = reinterpret_cast<const std::byte*>(buf->data());
      if (!buf->empty() && e.data >= b && e.data + e.bytes <= b + buf->size() * sizeof(int)) {
        const std::size_t at = static_cast<std::size_t>(e.data - b) / sizeof(int);
        return k == 1 ? "[" + std::to_string(at) + "]" : "[" + std::to_string(at) + ".." + std::to_string(at + k - 1) + "]";
      }
    }
    return std::to_string(k) + (k == 1 ? " elt" : " elts");
  };
  if (a.diagram) {  // steps down, ranks across: what each rank sends, and to whom
    std::vector<std::vector<std::string>> cell(steps, std::vector<std::string>(n));
    std::size_t width = 6;
    for (const auto& e : events) {
      auto& c = cell[e.step][e.from];
      c += (c.empty() ? "" : ", ") + what(e) + ">" + std::to_string(e.to);
      width = std::max(width, c.size());
    }
    std::printf("%s, %s, %d ranks, %zu elements%s; [a..b]>r: elements a to b go to rank r\n",
                std::string(to_string(a.what)).c_str(), std::string(to_string(a.algo)).c_str(), n, m,
                blocked ? " per block" : "");
    std::printf("step |");
    for (int r = 0; r < n; ++r) std::printf(" %-*s |", static_cast<int>(width), ("rank " + std::to_string(r)).c_str());
    std::printf("\n");
    for (int s = 0; s < steps; ++s) {
      std::printf("%4d |", s);
      for (int r = 0; r < n; ++r) std::printf(" %-*s |", static_cast<int>(width), cell[s][r].c_str());
      std::printf("\n");
    }
    return 0;
  }
  std::printf("%s, algorithm %s, %d ranks, %zu int32 element%s %s; rank r's element i starts as 100 r + i\n\n",
              std::string(to_string(a.what)).c_str(), std::string(to_string(a.algo)).c_str(), n, m, m == 1 ? "" : "s",
              blocked ? "per block" : "per rank");
  std::printf("start:\n");
  for (int r = 0; r < n; ++r) std::printf("  rank %d: %s\n", r, show(start[r]).c_str());
  for (int s = 0; s < steps; ++s) {
    std::printf("\nstep %d:\n", s);
    for (const auto& e : events)
      if (e.step == s)
        std::printf("  rank %d -> rank %d: %s\n", e.from, e.to, what(e).c_str());
    std::printf(" after step %d:\n", s);
    for (int r = 0; r < n; ++r) {
      const std::vector<int>* v = &start[r];
      for (auto& [k, snap] : after[r])
        if (k <= s) v = &snap;
      if (s == steps - 1) v = out[r].empty() ? &in[r] : &out[r];
      std::printf("  rank %d: %s\n", r, show(*v).c_str());
    }
  }
  std::size_t bytes = 0;
  for (const auto& e : events) bytes += e.bytes;
  std::printf("\n%d steps, %zu messages, %zu bytes in all\n", steps, events.size(), bytes);
  if (!a.chrome.empty()) {
    std::ofstream f(a.chrome);
    rec.write_chrome(f);
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", a.chrome.c_str());
      return 2;
    }
    std::printf("Chrome trace: %s (open it in ui.perfetto.dev)\n", a.chrome.c_str());
  }
  return 0;
}
