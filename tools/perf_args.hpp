#pragma once
// ringtree-perf's command line, kept apart from MPI so that the tests can
// check it directly. Flags follow nccl-tests where they overlap (-b -e -f
// -w -n -c -d); -o names the collectives, -a the algorithms.
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <ringtree/core/config.hpp>
#include <ringtree/core/dtype.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/core/reduce.hpp>
#include <ringtree/tuning/cost_model.hpp>

#include "cli.hpp"

namespace ringtree::perf {
using namespace ringtree::cli;

struct options {
  std::size_t min_bytes = 8, max_bytes = std::size_t{64} << 20;
  double factor = 2;
  std::vector<collective> collectives = {collective::allreduce};
  std::vector<std::string> algos = {"ring", "tree", "automatic", "mpi", "memcpy"};
  dtype type = dtype::float32;
  op redop = op::sum;
  int root = 0;
  int warmup = 5, iters = 20;
  int rounds = 1;  // times each algorithm this many times, in turn; reports the median
  bool check = true;
  bool model = false;  // print the cost model's prediction next to each time
  bool symmetric = false;  // ringtree's rows on buffers from comm.allocate
  bool fresh = false;  // every rank rewrites what it sends before each call
  std::string transport = "mpi";
  chunk_sizes chunks;  // the communicator's pipeline granularity (--ring-chunk, ...)
  std::string csv, json, plot;
  bool help = false;
};

inline std::string usage() {
  const std::string algos = ringtree::detail::algorithm_names_list();  // the table's, so never out of date
  const std::string colls = collective_names(false, ",");
  return R"(usage: mpirun -np N ringtree-perf [options]
  -b, --minbytes SIZE     smallest size (default 8); SIZE takes K, M, G suffixes
  -e, --maxbytes SIZE     largest size (default 64M)
  -f, --stepfactor F      multiply the size by F each step (default 2)
  -o, --collective LIST   from )" + colls + R"( (default allreduce)
  -a, --algo LIST         comma-separated, from: )" + algos + R"(,
                          automatic, mpi, pmpi, memcpy (default ring,tree,automatic,mpi,memcpy);
                          mpi is the MPI library's own collective; pmpi the same
                          called by its profiling name (PMPI_*), which a PMPI
                          layer such as libringtree-mpi.so does not serve: with
                          it preloaded, mpi is the layer and pmpi plain MPI
                          (pmpi, when asked for, is what `vs mpi` compares with);
                          memcpy is one core copying the same bytes (the
                          machine's limit: a busbw of about 0.5x its busbw is
                          copying each byte once)
      --symmetric         run ringtree's algorithms on symmetric buffers
                          (comm.allocate): direct algorithms, automatic picks them
      --fresh             before every call, each rank writes the data it sends
                          (as a training step produces new gradients); times
                          include that write, and a `write` row times it alone.
                          Without it, a single-copy transfer (MPI's, on one host)
                          reads lines the reader still caches from the last call
  -d, --datatype TYPE     float double int8 int16 int32 int64 uint8 uint16 uint32 uint64 half bfloat16
  -r, --redop OP          sum prod min max avg (default sum)
  -R, --root N            root of rooted collectives (default 0)
  -w, --warmup N          warm-up iterations (default 5)
  -n, --iters N           timed iterations (default 20)
      --rounds N          time the algorithms of a size N times in turn (each
                          time warm-up + iters calls) and report each one's
                          median: drift and noisy moments hit all alike (default 1)
  -c, --check 0|1         check every result against a reference (default 1)
  -t, --transport NAME    mpi (default), shm (shared memory; all ranks on one host), cluster
                          (make_communicator's: shared memory within hosts, MPI between them,
                          hierarchical algorithms offered where ranks span hosts) or net (the
                          same with UCX between hosts instead of MPI: net_cluster; MPI only
                          starts the ranks and hands out the addresses; -d float only)
      --ring-chunk SIZE   pipeline chunk of the ring algorithms (default 512K)
      --tree-chunk SIZE   pipeline chunk of the tree algorithms (default 64K)
      --stream-bytes SIZE staging per rank of two_shot on private buffers (default 1M)
      --csv FILE          also write the rows as CSV
      --json FILE         also write the rows as JSON
      --plot FILE.png     draw busbw against size, one line per algorithm (gnuplot)
  -m, --model             print the cost model's predicted time next to each
                          measured one (constants: calibrated, or the cache file)
  -h, --help              this text
Sizes are bytes of the whole buffer, as in nccl-tests: for allgather,
reduce_scatter, scatter and gather that is all ranks' blocks together.
Example:
  mpirun -np 2 ringtree-perf -b 8 -e 64M -a ring,tree,automatic,mpi --plot busbw.png
)" + ringtree::detail::environment_help();
}

inline options parse(int argc, const char* const* argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (flag == "-h" || flag == "--help") { o.help = true; continue; }
    if (flag == "-m" || flag == "--model") { o.model = true; continue; }
    if (flag == "--symmetric") { o.symmetric = true; continue; }
    if (flag == "--fresh") { o.fresh = true; continue; }
    if (auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else {
      if (i + 1 >= argc) bad(flag.rfind("-", 0) == 0 ? flag + " needs a value" : "unexpected argument '" + flag + "'");
      value = argv[++i];
    }
    if (flag == "-b" || flag == "--minbytes") o.min_bytes = parse_size(flag, value);
    else if (flag == "-e" || flag == "--maxbytes") o.max_bytes = parse_size(flag, value);
    else if (flag == "-f" || flag == "--stepfactor") {
      char* end = nullptr;
      o.factor = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(o.factor > 1.0) || o.factor > 1024)
        bad(flag + ": expected a factor above 1, got '" + value + "'");
    } else if (flag == "-o" || flag == "--collective") {
      o.collectives.clear();
      for (auto& c : split(value)) o.collectives.push_back(parse_collective(c));
    } else if (flag == "-a" || flag == "--algo") {
      o.algos.clear();
      for (auto& a : split(value)) {
        if (a != "mpi" && a != "pmpi" && a != "memcpy" && !algorithm_from_string(a)) bad("-a: unknown algorithm '" + a + "'");
        o.algos.push_back(a);
      }
    } else if (flag == "-d" || flag == "--datatype") {
      bool found = false;
      for (int k = 0; k <= static_cast<int>(dtype::bfloat16); ++k)
        if (value == to_string(static_cast<dtype>(k))) { o.type = static_cast<dtype>(k); found = true; }
      if (!found) bad("-d: unknown element type '" + value + "'");
    } else if (flag == "-r" || flag == "--redop") {
      bool found = false;
      for (int k = 0; k <= static_cast<int>(op::avg); ++k)
        if (value == to_string(static_cast<op>(k))) { o.redop = static_cast<op>(k); found = true; }
      if (!found) bad("-r: unknown reduction op '" + value + "'");
    } else if (flag == "-R" || flag == "--root") o.root = static_cast<int>(parse_int(flag, value, 0, 1 << 20));
    else if (flag == "-w" || flag == "--warmup") o.warmup = static_cast<int>(parse_int(flag, value, 0, 1 << 20));
    else if (flag == "-n" || flag == "--iters") o.iters = static_cast<int>(parse_int(flag, value, 1, 1 << 20));
    else if (flag == "--ring-chunk") o.chunks.ring_chunk_bytes = parse_chunk(flag, value);
    else if (flag == "--tree-chunk") o.chunks.tree_chunk_bytes = parse_chunk(flag, value);
    else if (flag == "--stream-bytes") o.chunks.stream_bytes = parse_chunk(flag, value);
    else if (flag == "--rounds") o.rounds = static_cast<int>(parse_int(flag, value, 1, 1000));
    else if (flag == "-c" || flag == "--check") o.check = parse_int(flag, value, 0, 1) == 1;
    else if (flag == "-t" || flag == "--transport") {
      if (value != "mpi" && value != "shm" && value != "cluster" && value != "net")
        bad("-t: unknown transport '" + value + "' (available: mpi, shm, cluster, net)");
      o.transport = value;
    } else if (flag == "--csv") o.csv = value;
    else if (flag == "--json") o.json = value;
    else if (flag == "--plot") o.plot = value;
    else bad("unknown flag '" + flag + "'");
  }
  if (o.min_bytes > o.max_bytes)
    bad("-b " + std::to_string(o.min_bytes) + " is larger than -e " + std::to_string(o.max_bytes));
  return o;
}

// nccl-tests' bus-bandwidth factor: what each rank's links carry relative
// to the buffer size, so that busbw is comparable across rank counts.
inline double bus_factor(collective c, int n) {
  switch (c) {
    case collective::allreduce: return 2.0 * (n - 1) / n;
    case collective::reduce_scatter:
    case collective::allgather:
    case collective::scatter:
    case collective::gather:
    case collective::alltoall: return double(n - 1) / n;
    default: return 1.0;
  }
}

// Elements per rank block for a buffer of `bytes` (see usage()).
inline std::size_t count_for(collective c, std::size_t bytes, std::size_t elem, int n) {
  const bool blocked = c == collective::reduce_scatter || c == collective::allgather || c == collective::scatter ||
                       c == collective::gather || c == collective::alltoall;
  return bytes / elem / (blocked ? n : 1);
}

}  // namespace ringtree::perf
