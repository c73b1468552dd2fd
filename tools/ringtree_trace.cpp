// ringtree-trace: watch a collective move data, step by step, on threads
// (ringtree/teach/watch.hpp). The text view prints every step's messages and
// every rank's buffer after it; --diagram a table of the messages (the
// figures of docs/algorithms.md); --html an interactive page; --json the
// story behind it; --chrome the run for ui.perfetto.dev.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/teach/watch.hpp>
#include <ringtree/trace/page.hpp>

#include "cli.hpp"

using namespace ringtree;

namespace {

struct args {
  watch_options w;
  std::string chrome, html, json;
  bool diagram = false, renderer = false;
};

std::string help() {
  const std::string collectives = cli::collective_names(true);
  const std::string algos = cli::algorithms_by_collective(true, [](collective c) {
    return std::string(c == collective::allreduce || c == collective::broadcast || c == collective::reduce || c == collective::allgather ||
                               c == collective::reduce_scatter ? ", hierarchical (--hosts > 1)" : "") + ", automatic";
  });
  return "usage: ringtree-trace [--collective NAME] [--algo NAME] [--ranks N] [--count M] [--root R] [--hosts H]\n"
         "                      [--simulate] [--diagram] [--html FILE.html] [--json FILE.json] [--chrome FILE.json]\n"
         "Runs one call of a collective on N threads and shows it step by step: which elements every rank\n"
         "sends to whom, and every rank's buffer after each step (rank r's element i starts as 100 r + i).\n"
         "  --collective NAME  " + collectives + " (default allreduce)\n"
         "  --algo NAME        the algorithm (default automatic: the cost model's pick); by collective:\n" + algos +
         "  --ranks N          1 to 64 (default 4)\n"
         "  --count M          elements per rank, or per block for scatter, gather, reduce_scatter,\n"
         "                     allgather and alltoall; 0 to 64 (default 8)\n"
         "  --root R           the root of broadcast, reduce, scatter, gather (default 0)\n"
         "  --hosts H          deal the ranks, host by host, to H emulated hosts (default 1)\n"
         "  --simulate         run the ranks on the simulator (one thread, virtual time: ringtree-sim's)\n"
         "                     instead of threads; the same steps, and --chrome's times are virtual\n"
         "  --diagram          only a table of the messages: steps down, ranks across\n"
         "  --html FILE.html   an interactive page: ranks, arrows, buffers colored by whose data they hold;\n"
         "                     #step=K in its URL opens step K (no network: it opens from disk)\n"
         "  --json FILE.json   the story behind the page (steps, messages, buffers, cost terms)\n"
         "  --chrome FILE.json the run as a Chrome trace, for ui.perfetto.dev\n"
         "  -h, --help         this text\n"
         "Example:\n"
         "  ringtree-trace --collective allreduce --algo ring --ranks 4 --count 8 --html ring.html\n" +
         detail::environment_help();
}

args parse(int argc, char** argv) {
  cli::tool() = "ringtree-trace";
  args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      std::printf("%s", help().c_str());
      std::exit(0);
    }
    if (f == "--diagram") {
      a.diagram = true;
      continue;
    }
    if (f == "--simulate") {
      a.w.simulate = true;
      continue;
    }
    if (f == "--print-renderer") {  // for docs/figures.sh: the page's drawing code, for Node.js
      a.renderer = true;
      continue;
    }
    if (i + 1 >= argc) cli::usage_error(f + " needs a value");
    const std::string v = argv[++i];
    try {
      if (f == "--collective") a.w.what = cli::parse_collective(v, f, true);
      else if (f == "--algo") {
        const auto algo = algorithm_from_string(v);
        if (!algo) cli::usage_error("--algo: unknown algorithm '" + v + "' (one of: " + detail::algorithm_names_list() + ", automatic)");
        a.w.algo = *algo;
      } else if (f == "--ranks") a.w.ranks = static_cast<int>(cli::parse_int(f, v, 1, 64));
      else if (f == "--count") a.w.count = static_cast<std::size_t>(cli::parse_int(f, v, 0, 64));
      else if (f == "--root") a.w.root = static_cast<int>(cli::parse_int(f, v, 0, 63));
      else if (f == "--hosts") a.w.hosts = static_cast<int>(cli::parse_int(f, v, 1, 64));
      else if (f == "--chrome") a.chrome = v;
      else if (f == "--html") a.html = v;
      else if (f == "--json") a.json = v;
      else cli::usage_error("unknown flag '" + f + "'");
    } catch (const error& e) {
      cli::usage_error(cli::plain(e));
    }
  }
  return a;
}

std::string show(const std::vector<std::uint64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s + "]";
}

// "[a..b]" of the sender's buffer, or "N elts" of its scratch.
std::string what(const story_message& m) {
  if (!m.in_buffer) return std::to_string(m.count) + (m.count == 1 ? " elt" : " elts");
  return m.count == 1 ? "[" + std::to_string(m.first) + "]" : "[" + std::to_string(m.first) + ".." + std::to_string(m.first + m.count - 1) + "]";
}

template <class F>
bool write_file(const std::string& path, F body) {
  std::ofstream f(path);
  body(f);
  f.close();
  if (!f) {
    std::fprintf(stderr, "ringtree-trace: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const args a = parse(argc, argv);
  if (a.renderer) {
    std::fwrite(renderer_js().data(), 1, renderer_js().size(), stdout);
    return 0;
  }
  trace_story s;
  std::ostringstream chrome;
  try {
    s = watch(a.w, a.chrome.empty() ? nullptr : &chrome);
  } catch (const error& e) {
    cli::usage_error(cli::plain(e));
  }
  const int n = s.ranks, steps = static_cast<int>(s.steps.size());
  const bool blocked = a.w.what == collective::scatter || a.w.what == collective::gather || a.w.what == collective::reduce_scatter ||
                       a.w.what == collective::allgather || a.w.what == collective::alltoall;
  if (a.diagram) {  // steps down, ranks across: what each rank sends, and to whom
    std::vector<std::vector<std::string>> cell(steps, std::vector<std::string>(n));
    std::size_t width = 6;
    for (int k = 0; k < steps; ++k)
      for (const auto& m : s.steps[k].messages) {
        auto& c = cell[k][m.from];
        c += (c.empty() ? "" : ", ") + what(m) + ">" + std::to_string(m.to);
        width = std::max(width, c.size());
      }
    std::printf("%s, %s, %d ranks, %zu elements%s; [a..b]>r: elements a to b go to rank r\n", s.collective.c_str(),
                s.algorithm.c_str(), n, s.count, blocked ? " per block" : "");
    std::printf("step |");
    for (int r = 0; r < n; ++r) std::printf(" %-*s |", static_cast<int>(width), ("rank " + std::to_string(r)).c_str());
    std::printf("\n");
    for (int k = 0; k < steps; ++k) {
      std::printf("%4d |", k);
      for (int r = 0; r < n; ++r) std::printf(" %-*s |", static_cast<int>(width), cell[k][r].c_str());
      std::printf("\n");
    }
  } else {
    std::printf("%s, algorithm %s, %d ranks%s, %zu element%s %s; rank r's element i starts as 100 r + i\n\n", s.collective.c_str(),
                s.algorithm.c_str(), n, a.w.hosts > 1 ? (" on " + std::to_string(a.w.hosts) + " hosts").c_str() : "", s.count,
                s.count == 1 ? "" : "s", blocked ? "per block" : "per rank");
    std::printf("start:\n");
    for (int r = 0; r < n; ++r) std::printf("  rank %d: %s\n", r, show(s.start_values[r]).c_str());
    std::size_t bytes = 0, messages = 0;
    for (int k = 0; k < steps; ++k) {
      std::printf("\nstep %d:\n", k);
      for (const auto& m : s.steps[k].messages) {
        std::printf("  rank %d -> rank %d: %s\n", m.from, m.to, what(m).c_str());
        bytes += m.bytes, ++messages;
      }
      std::printf(" after step %d:\n", k);
      for (int r = 0; r < n; ++r) std::printf("  rank %d: %s\n", r, show(s.steps[k].values[r]).c_str());
    }
    std::printf("\n%d steps, %zu messages, %zu bytes in all\n", steps, messages, bytes);
  }
  if (!a.json.empty() && !write_file(a.json, [&](std::ostream& f) { write_json(f, s); })) return 2;
  if (!a.html.empty()) {
    if (!write_file(a.html, [&](std::ostream& f) { write_html(f, std::vector<trace_story>{s}); })) return 2;
    std::printf("page: %s (open it in a browser; #step=K opens step K)\n", a.html.c_str());
  }
  if (!a.chrome.empty()) {
    if (!write_file(a.chrome, [&](std::ostream& f) { f << chrome.str(); })) return 2;
    std::printf("Chrome trace: %s (open it in ui.perfetto.dev)\n", a.chrome.c_str());
  }
  return 0;
}
