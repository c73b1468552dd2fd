// ringtree-sim: ringtree's own algorithms at any rank count, in virtual time
// on a simulated network (include/ringtree/sim/world.hpp), beside the
// closed-form cost model's prediction for the same constants.
//   ringtree-sim --hosts 128 --per-host 8 [--net-gbps 100 --net-alpha-us 5 ...]
//                -o allreduce -a ring,tree,hierarchical,automatic -b 64K -e 256M [--data]
// Prints an nccl-tests-style table; with --data every result is checked
// against a sequential reference, and a wrong element exits 1.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fstream>

#include <ringtree/sim/collective.hpp>
#include <ringtree/trace/page.hpp>
#include <ringtree/teach/watch.hpp>
#include <ringtree/tuning/model_file.hpp>

#include "cli.hpp"
#include "perf_args.hpp"

using namespace ringtree;

namespace {

std::string help() {
  const std::string collectives = cli::collective_names(false), algos = cli::algorithms_by_collective(false);
  return "usage: ringtree-sim [--hosts H --per-host L | --layout L1+L2+...] [network flags]\n"
         "                    [-o COLLECTIVE] [-a ALGO,ALGO,...] [-b SIZE] [-e SIZE] [-f FACTOR] [-r ROOT] [--data]\n"
         "Runs ringtree's algorithms, unchanged, on simulated ranks in virtual time: one thread, each rank\n"
         "a fiber, a network with contention (each host's link carries one message at a time per direction).\n"
         "Prints time and bus bandwidth per size and algorithm, the cost model's closed-form prediction for\n"
         "the same constants, and sim/model (above 1: contention or waiting the closed form leaves out).\n"
         "  --hosts H, --per-host L   H hosts of L ranks each (default 1 x 8)\n"
         "  --layout L1+L2+...        hosts of uneven rank counts, e.g. 8+8+3\n"
         "  --model-file FILE         the constants from a cost model file (as RINGTREE_MODEL_FILE, which is\n"
         "                            read when set); the flags below override it\n"
         "  --alpha-us US             within a host: per message (default 3)\n"
         "  --gbps G                  within a host: bandwidth per rank, Gb/s (default 100)\n"
         "  --gamma-ns NS             reduction cost per byte (default 0.05)\n"
         "  --net-alpha-us US         between hosts: latency (default: as within)\n"
         "  --net-gbps G              between hosts: each host's link per direction, Gb/s (default: as within)\n"
         "  --oversubscribe X         ranks per core: CPU costs (alpha, beta within, gamma) times X (default 1)\n"
         "  --knee BYTES, --above-us US   messages above BYTES cost US more (default none)\n"
         "  -o NAME                   " + collectives + " (default allreduce)\n"
         "  -a LIST                   algorithms, or automatic (the model's pick); default: every one offered\n" + algos +
         "  -b, -e SIZE               smallest and largest size (K, M, G), as ringtree-perf counts it (default 64K, 256M)\n"
         "  -f FACTOR                 size step (default 4)\n"
         "  -r ROOT                   root of broadcast, reduce, scatter, gather (default 0)\n"
         "  --data                    move real payloads and check every result (exit 1 on a wrong element)\n"
         "  --html FILE.html          instead of the table: the teaching page (ringtree-trace's) of one simulated\n"
         "                            call of the first -a algorithm, up to 64 ranks, --html-count elements per rank\n"
         "  --html-count M            elements per rank (per block) on the page, 0 to 64 (default 8)\n"
         "  -h, --help                this text\n"
         "Example:\n"
         "  ringtree-sim --hosts 128 --per-host 8 --net-gbps 100 --net-alpha-us 5 -a ring,hierarchical,automatic -b 1M -e 1G\n" +
         detail::environment_help();
}

}  // namespace

// The most ranks one run simulates (every rank's state is kept in memory).
constexpr long long max_ranks = 1 << 20;

int main(int argc, char** argv) {
  cli::tool() = "ringtree-sim";
  int hosts = 1, per_host = 8;
  std::vector<int> layout;
  std::string model_file;
  struct {
    double alpha = -1, gbps = -1, gamma = -1, net_alpha = -1, net_gbps = -1, oversub = 1, knee = -1, above = -1;
  } flag;
  collective c = collective::allreduce;
  std::vector<std::string> algos;
  std::size_t lo = 64 << 10, hi = std::size_t{256} << 20;
  double factor = 4;
  int root = 0;
  bool data = false;
  std::string html;
  std::size_t html_count = 8;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      std::printf("%s", help().c_str());
      return 0;
    }
    if (f == "--data") {
      data = true;
      continue;
    }
    if (i + 1 >= argc) cli::usage_error(f + " needs a value");
    const std::string v = argv[++i];
    try {
      if (f == "--hosts") hosts = static_cast<int>(cli::parse_int(f, v, 1, max_ranks));
      else if (f == "--per-host") per_host = static_cast<int>(cli::parse_int(f, v, 1, max_ranks));
      else if (f == "--layout") {
        layout.clear();
        std::string cur;
        for (char ch : v + "+") {
          if (ch != '+') cur += ch;
          else layout.push_back(static_cast<int>(cli::parse_int(f, cur, 1, max_ranks))), cur.clear();
        }
      } else if (f == "--model-file") model_file = v;
      else if (f == "--alpha-us") flag.alpha = cli::parse_number(f, v);
      else if (f == "--gbps") flag.gbps = cli::parse_number(f, v);
      else if (f == "--gamma-ns") flag.gamma = cli::parse_number(f, v);
      else if (f == "--net-alpha-us") flag.net_alpha = cli::parse_number(f, v);
      else if (f == "--net-gbps") flag.net_gbps = cli::parse_number(f, v);
      else if (f == "--oversubscribe") flag.oversub = cli::parse_number(f, v);
      else if (f == "--knee") flag.knee = cli::parse_number(f, v);
      else if (f == "--above-us") flag.above = cli::parse_number(f, v);
      else if (f == "-o") c = cli::parse_collective(v, f);
      else if (f == "-a") algos = cli::split(v);
      else if (f == "-b") lo = cli::parse_size(f, v);
      else if (f == "-e") hi = cli::parse_size(f, v);
      else if (f == "-f") factor = cli::parse_number(f, v);
      else if (f == "-r") root = static_cast<int>(cli::parse_int(f, v, 0, 1 << 24));
      else if (f == "--html") html = v;
      else if (f == "--html-count") html_count = static_cast<std::size_t>(cli::parse_int(f, v, 0, 64));
      else cli::usage_error("unknown flag '" + f + "'");
    } catch (const error& e) {
      cli::usage_error(cli::plain(e));
    }
  }
  for (double g : {flag.gbps, flag.net_gbps})
    if (g == 0) cli::usage_error("a bandwidth of 0 Gb/s never delivers");
  if (factor < 1.01) cli::usage_error("-f must be above 1");
  if (lo > hi) cli::usage_error(detail::cat("-b ", lo, " is larger than -e ", hi));
  if (flag.oversub < 1) cli::usage_error(detail::cat("--oversubscribe ", flag.oversub, ": ranks per core, at least 1"));
  if (layout.empty()) layout.assign(static_cast<std::size_t>(hosts), per_host);
  {  // every rank's state is kept in memory: refuse what cannot fit before starting
    long long ranks = 0;
    for (int l : layout) ranks += l;
    if (ranks > max_ranks)
      cli::usage_error(detail::cat(ranks, " ranks (", layout.size(), " hosts) are more than ringtree-sim simulates: at most ", max_ranks,
                                   " (2^20)"));
  }

  try {
    // The constants: built-in defaults (ringtree-model's), a model file, then the flags.
    sim::network net{3e-6, 8.0 / 100e9, -1, -1, 0.05e-9, 1, 0, 0, true};
    if (model_file.empty())
      if (const char* env = std::getenv("RINGTREE_MODEL_FILE"); env != nullptr && *env != '\0') model_file = env;
    if (!model_file.empty()) {
      const auto m = detail::read_model(model_file, -1);
      if (!m) cli::usage_error("--model-file " + model_file + ": no such file");
      net = sim::network::of(*m);
    }
    if (flag.alpha >= 0) net.alpha = flag.alpha * 1e-6;
    if (flag.gbps > 0) net.beta = 8.0 / (flag.gbps * 1e9);
    if (flag.gamma >= 0) net.gamma = flag.gamma * 1e-9;
    if (flag.net_alpha >= 0) net.alpha_net = flag.net_alpha * 1e-6;
    if (flag.net_gbps > 0) net.beta_net = 8.0 / (flag.net_gbps * 1e9);
    net.oversubscription = std::max(1.0, flag.oversub);
    if (flag.knee >= 0) net.knee = flag.knee;
    if (flag.above >= 0) net.alpha_above = flag.above * 1e-6;

    sim::options o;
    o.net = net;
    o.hosts = layout;
    o.data = data;
    sim::world w(o);
    const int n = w.size();
    const bool rooted = c == collective::broadcast || c == collective::reduce || c == collective::scatter || c == collective::gather;
    if (rooted && root >= n) cli::usage_error(detail::cat("-r ", root, " is not a rank of ", n));
    // The algorithms: those asked for, else every one offered here (over messages).
    const placement at{n, hi, memory_kind::host, false, false, w.layout().hosts()};
    if (algos.empty())
      for (const auto& r : detail::rows)
        if (r.what == c && sim::runs(w, c, r.id, hi)) algos.emplace_back(r.name);
    std::vector<algorithm> run;
    for (const auto& name : algos) {
      const auto a = algorithm_from_string(name);
      if (!a) cli::usage_error("-a: unknown algorithm '" + name + "' (one of: " + detail::algorithm_names_list() + ")");
      if (!sim::runs(w, c, *a, hi))
        cli::usage_error(detail::cat("-a ", name, ": not one of ", to_string(c), "'s here (", w.layout().describe(), " ranks: ",
                                     detail::offered_names(c, &at), "; the simulator runs no symmetric-memory rows)"));
      run.push_back(*a);
    }

    if (!html.empty()) {  // the page of one simulated call, as ringtree-trace draws it
      watch_options wo;
      wo.what = c;
      wo.algo = run.empty() ? algorithm::automatic : run.front();
      wo.ranks = n;
      wo.root = root;
      wo.count = html_count;
      wo.hosts = w.layout().hosts();
      wo.model = net.model();
      wo.simulate = true;
      if (wo.hosts > 1 && w.layout().slices() != w.layout().most_per_host())
        cli::usage_error("--html deals the ranks evenly over the hosts: use --hosts and --per-host");
      if (n > 64)  // (in this tool's words: watch() speaks ringtree-trace's flags)
        cli::usage_error(detail::cat("--html draws at most 64 ranks (an element's contributors are 64 bits); these hosts have ", n));
      const trace_story story = watch(wo);
      std::ofstream f(html);
      write_html(f, std::vector<trace_story>{story});
      f.close();
      if (!f) throw error("ringtree-sim", -1, "cannot write " + html);
      std::printf("page: %s (%s, %s, %d ranks on %d hosts, %d steps; open it in a browser)\n", html.c_str(), story.collective.c_str(),
                  story.algorithm.c_str(), n, wo.hosts, static_cast<int>(story.steps.size()));
      return 0;
    }
    if (data) {  // every rank's buffers really exist: say so before the machine runs out
      const std::size_t elem = sizeof(std::uint64_t);
      const auto len = detail::lengths_for(c, n, root, root, perf::count_for(c, hi, elem, n));
      const double total = static_cast<double>(n) * static_cast<double>(len.in + len.data) * static_cast<double>(elem);
      if (total > 8.0 * (1 << 30))
        cli::usage_error(detail::cat("--data at -e ", hi, " bytes on ", n, " ranks holds ", static_cast<long long>(total / (1 << 20)),
                                     " MiB of buffers (at most 8 GiB): lower -e, or leave out --data to time sizes only"));
    }
    const auto model = sim::model_of(w);
    std::printf("# ringtree-sim: %s on %d ranks, hosts %s; virtual time, %s, sum%s\n", std::string(to_string(c)).c_str(), n,
                w.layout().describe().c_str(), data ? "uint64" : "float", data ? "; with data, every result checked" : "");
    std::printf("# within a host: alpha %.3g us, beta %.3g ns/B (%.3g Gb/s); between hosts: alpha %.3g us, beta %.3g ns/B (%.3g Gb/s) per host's link;"
                " gamma %.3g ns/B; oversubscription %.3g\n",
                net.alpha * 1e6, net.beta * 1e9, 8 / net.beta / 1e9, (net.alpha_net < 0 ? net.alpha : net.alpha_net) * 1e6,
                (net.beta_net < 0 ? net.beta : net.beta_net) * 1e9, 8 / (net.beta_net < 0 ? net.beta : net.beta_net) / 1e9, net.gamma * 1e9,
                net.oversubscription);
    if (net.knee > 0) std::printf("# messages above %.0f B cost %.3g us more\n", net.knee, net.alpha_above * 1e6);
    std::printf("# time: the last rank's return; algbw = size/time; busbw = algbw * bus factor (nccl-tests); model: the closed form;\n"
                "# why, where sim/model is off by more than 5%%: contention (the run again with ports and links never busy is faster),\n"
                "# waiting (ranks wait on late partners: slower than the closed form even then), pipelining (faster even then)\n");
    std::printf("%12s %12s %6s %6s %20s %12s %11s %11s %12s %9s %-22s %10s %8s\n", "size(B)", "count", "type", "redop", "algorithm", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "model(us)", "sim/model", "why", "messages", "wall(s)");
    // The same call on a network where nothing waits for a port or a link:
    // what the schedule alone costs, to tell contention from the schedule.
    sim::options free_o = o;
    free_o.net.contention = false;
    free_o.data = false;
    sim::world free_world(free_o);
    int wrong = 0;
    const std::size_t elem = data ? sizeof(std::uint64_t) : sizeof(float);  // (checked data: 64-bit integers)
    const char* type = data ? "uint64" : "float";
    for (std::size_t bytes = lo; bytes <= hi; bytes = std::max(bytes + 1, static_cast<std::size_t>(static_cast<double>(bytes) * factor))) {
      const std::size_t count = perf::count_for(c, bytes, elem, n);
      for (algorithm a : run) {
        sim::call k{c, a, count, root};
        const algorithm picked = sim::pick(w, k, elem);
        const auto t0 = std::chrono::steady_clock::now();
        double s = 0;
        std::string bad;
        if (data) {
          bad = sim::check_call(w, k);  // (64-bit integers: every order of sums agrees)
          s = w.elapsed();
        } else {
          s = sim::time_call<float>(w, k);
        }
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double predicted = model.seconds(c, picked, sim::model_bytes(c, count, elem, n));
        const double algbw = s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0;
        std::string why = "-";
        if (predicted > 0 && std::abs(s / predicted - 1) > 0.05) {
          const double alone = data ? sim::time_call<std::uint64_t>(free_world, k) : sim::time_call<float>(free_world, k);
          why.clear();
          if (s > alone * 1.05) why = "contention";
          if (alone > predicted * 1.05) why += why.empty() ? "waiting" : "+waiting";
          if (alone < predicted / 1.05) why += why.empty() ? "pipelining" : "+pipelining";
          if (why.empty()) why = "rounding";
        }
        const std::string label = a == algorithm::automatic ? "automatic:" + std::string(to_string(picked)) : std::string(to_string(a));
        std::printf("%12zu %12zu %6s %6s %20s %12.1f %11.3f %11.3f %12.1f %9.2f %-22s %10llu %8.2f\n", bytes, count, type, "sum", label.c_str(),
                    s * 1e6, algbw, algbw * perf::bus_factor(c, n), predicted * 1e6, predicted > 0 ? s / predicted : 0.0, why.c_str(),
                    static_cast<unsigned long long>(w.stats().messages), wall);
        if (!bad.empty()) {
          std::fprintf(stderr, "ringtree-sim: WRONG RESULT: %s\n", bad.c_str());
          ++wrong;
        }
      }
    }
    if (data) std::printf("# %s\n", wrong == 0 ? "every result checked: all correct" : detail::cat(wrong, " calls gave wrong results").c_str());
    return wrong == 0 ? 0 : 1;
  } catch (const error& e) {
    std::fprintf(stderr, "ringtree-sim: %s\n", cli::plain(e).c_str());
    return 2;
  }
}
