// ringtree-model: the cost model's predictions, without running anything:
// which algorithm wins at which rank count and size, for given constants.
//   ringtree-model [--alpha-us 3] [--gbps 100] [--gamma-ns 0.05] [--knee BYTES --above-us US]
//                  [--collective allreduce] [--ranks 8,64,...] [--sizes 8,64K,...]
//                  [--per-host L --net-alpha-us US --net-gbps G]
// Prints a Markdown table per size: predicted time of every algorithm the
// collective offers, the fastest in bold (docs/algorithms.md shows one).
// With --per-host, each rank count is hosts of L ranks (numbered host by
// host), alpha and beta are within a host and the --net- ones between
// hosts (one link per host), and the hierarchical algorithms join the table.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ringtree/core/config.hpp>
#include <ringtree/tuning/cost_model.hpp>

#include "cli.hpp"

using namespace ringtree;

namespace {

std::string help() {
  const std::string collectives = cli::collective_names(true), algos = cli::algorithms_by_collective(true);
  return "usage: ringtree-model [--collective NAME] [--ranks N,N,...] [--sizes SIZE,SIZE,...]\n"
         "                      [--alpha-us US] [--gbps G] [--gamma-ns NS] [--knee BYTES --above-us US]\n"
         "                      [--per-host L --net-alpha-us US --net-gbps G]\n"
         "The cost model's predicted time of every algorithm of a collective, one Markdown table per size\n"
         "(the fastest in bold, and what automatic picks): alpha * steps + beta * bytes + gamma * reduced.\n"
         "  --collective NAME  " + collectives + " (default allreduce); its algorithms:\n" + algos +
         "                     (and hierarchical, with --per-host)\n"
         "  --ranks LIST       rank counts (default 8,64,512,4096,65536)\n"
         "  --sizes LIST       buffer sizes, with K, M, G (default 8,64K,1M,16M,256M)\n"
         "  --alpha-us US      latency per step (default 3)\n"
         "  --gbps G           bandwidth in Gb/s: beta = 8 / G ns per byte (default 100)\n"
         "  --gamma-ns NS      reduction cost per byte (default 0.05)\n"
         "  --knee BYTES, --above-us US   steps with messages above BYTES cost US more (default none)\n"
         "  --per-host L       every rank count is hosts of L ranks; alpha, beta are within a host and\n"
         "  --net-alpha-us US, --net-gbps G   these between hosts (default: as within)\n"
         "  --algorithm-names  print every algorithm's name (what RINGTREE_ALGO takes), then exit\n"
         "  --algorithm-table  print the algorithm table (collective, algorithm, what it does) as Markdown, then exit\n"
         "  --variables        print every RINGTREE_* variable (name, default, meaning) as Markdown, then exit\n"
         "  -h, --help         this text\n"
         "Example:\n"
         "  ringtree-model --collective allreduce --ranks 8,1024 --sizes 64K,256M --alpha-us 3 --gbps 100\n" +
         detail::environment_help();
}

std::string human_time(double s) {
  char buf[32];
  if (s < 1e-3) std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  else if (s < 1) std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  cli::tool() = "ringtree-model";
  cost_model m;
  m.alpha = 3e-6;
  m.beta = 8.0 / 100e9;
  m.gamma = 0.05e-9;
  m.source = "command line";
  collective c = collective::allreduce;
  std::vector<int> ranks = {8, 64, 512, 4096, 65536};
  std::vector<std::string> sizes = {"8", "64K", "1M", "16M", "256M"};
  int per_host = 0;  // 0: every rank on one host
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      std::printf("%s", help().c_str());
      return 0;
    }
    if (f == "--algorithm-table") {  // (README's table is this one)
      std::printf("| collective | algorithm | what it does |\n|---|---|---|\n");
      for (collective k : all_collectives)
        for (const auto& r : detail::rows)
          if (r.what == k)
            std::printf("| %s | `%s` | %s |\n", std::string(to_string(k)).c_str(), std::string(r.name).c_str(),
                        std::string(r.about).c_str());
      return 0;
    }
    if (f == "--variables") {  // (README's table is this one)
      std::printf("| variable | default | meaning |\n|---|---|---|\n");
      for (const auto& v : env_variables) std::printf("| `%s` | %s | %s |\n", v.name, v.fallback, v.meaning);
      return 0;
    }
    if (f == "--algorithm-names") {  // (docs/errors.md's list is this line)
      std::printf("The algorithm names (`RINGTREE_ALGO`, `ringtree-perf -a`, `ringtree-trace --algo`): %s.\n",
                  detail::algorithm_names_list().c_str());
      return 0;
    }
    if (i + 1 >= argc) cli::usage_error(f + " needs a value");
    const std::string v = argv[++i];
    try {
      if (f == "--alpha-us") m.alpha = cli::parse_number(f, v) * 1e-6;
      else if (f == "--gbps") m.beta = 8.0 / (cli::parse_number(f, v) * 1e9);
      else if (f == "--gamma-ns") m.gamma = cli::parse_number(f, v) * 1e-9;
      else if (f == "--knee") m.knee = cli::parse_number(f, v);
      else if (f == "--above-us") m.alpha_above = cli::parse_number(f, v) * 1e-6;
      else if (f == "--collective") c = cli::parse_collective(v, f, true);
      else if (f == "--per-host") per_host = static_cast<int>(cli::parse_int(f, v, 1, 1 << 20));
      else if (f == "--net-alpha-us") m.alpha_net = cli::parse_number(f, v) * 1e-6;
      else if (f == "--net-gbps") m.beta_net = 8.0 / (cli::parse_number(f, v) * 1e9);
      else if (f == "--ranks") {
        ranks.clear();
        for (auto& r : cli::split(v)) ranks.push_back(static_cast<int>(cli::parse_int(f, r, 1, 1 << 20)));
      } else if (f == "--sizes") sizes = cli::split(v);
      else cli::usage_error("unknown flag '" + f + "'");
    } catch (const error& e) {
      cli::usage_error(cli::plain(e));
    }
  }
  std::printf("Predicted %s times: alpha %.3g us per step, beta %.3g ns/B (%.0f Gb/s), gamma %.3g ns/B reduced",
              std::string(to_string(c)).c_str(), m.alpha * 1e6, m.beta * 1e9, 8 / m.beta / 1e9, m.gamma * 1e9);
  if (m.knee > 0) std::printf(", +%.3g us per step above %.0f B", m.alpha_above * 1e6, m.knee);
  if (per_host > 0) {
    for (int n : ranks)
      if (n % per_host != 0) cli::usage_error(detail::cat("--ranks ", n, " is not a whole number of hosts of --per-host ", per_host));
    std::printf("; hosts of %d ranks, between hosts alpha %.3g us, beta %.3g ns/B (%.0f Gb/s) per host's link", per_host,
                (m.alpha_net < 0 ? m.alpha : m.alpha_net) * 1e6, (m.beta_net < 0 ? m.beta : m.beta_net) * 1e9,
                8 / (m.beta_net < 0 ? m.beta : m.beta_net) / 1e9);
  }
  std::printf(".\n");
  auto shape_of = [&](int n) { return per_host > 0 ? host_shape::even(n / per_host, per_host) : host_shape{}; };
  // the algorithms offered at some rank count of the table (the hierarchical ones need several hosts)
  std::vector<algorithm> offer;
  for (const auto& r : detail::rows)
    if (r.what == c && !r.window_only && !(r.across_hosts && per_host == 0)) offer.push_back(r.id);
  for (const auto& size : sizes) {
    std::size_t bytes = 0;
    try {
      bytes = cli::parse_size("--sizes", size);
    } catch (const error& e) {
      cli::usage_error(cli::plain(e));
    }
    std::printf(per_host > 0 ? "\n%s bytes:\n\n| hosts x ranks |" : "\n%s bytes:\n\n| ranks |", size.c_str());
    for (auto a : offer) std::printf(" %s |", std::string(to_string(a)).c_str());
    std::printf(" automatic picks |\n|---:|");
    for (std::size_t k = 0; k < offer.size(); ++k) std::printf("---:|");
    std::printf("---|\n");
    for (int n : ranks) {
      const tuner t(n, m, {}, memory_kind::host, shape_of(n));
      const algorithm pick = t.choose(c, bytes);
      std::printf(per_host > 0 ? "| %d x %d |" : "| %d |", per_host > 0 ? n / per_host : n, per_host);
      for (auto a : offer) {
        const placement at{n, bytes, memory_kind::host, false, false, shape_of(n).hosts};
        if (detail::find_row(c, a)->across_hosts && !detail::offers(c, a, at)) {  // one rank per host: nothing to split
          std::printf(" - |");
          continue;
        }
        const std::string cell = human_time(t.seconds(c, a, bytes));
        std::printf(a == pick ? " **%s** |" : " %s |", cell.c_str());
      }
      std::printf(" %s |\n", std::string(to_string(pick)).c_str());
    }
  }
  return 0;
}
