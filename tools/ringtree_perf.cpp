// ringtree-perf: nccl-tests-style sweeps of ringtree's collectives next to
// the MPI library's own, in the same run.
//   mpirun -np 2 build/tools/ringtree-perf -b 8 -e 256M -f 2 -o allreduce -a ring,tree,automatic,mpi
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <ringtree/core/json.hpp>
#include <ringtree/ringtree.hpp>
#include <ringtree/transport/mpi.hpp>
#include <ringtree/mpi.hpp>
#ifdef RINGTREE_PERF_NET
#include <ringtree/communicator-inl.hpp>  // (its communicator is not in the compiled part)
#include <ringtree/transport/mpi_bootstrap.hpp>
#include <ringtree/transport/net_cluster.hpp>
#endif

#include "collective_check.hpp"
#include "core_round_trip.hpp"
#include "mpi_reference.hpp"
#include "perf_args.hpp"

using namespace ringtree;
using namespace ringtree::perf;

namespace {

struct row {
  std::string collective;
  std::size_t bytes, count;
  std::string type, redop;
  int root;
  std::string algo;       // as printed: automatic shows its pick ("automatic:ring")
  std::string requested;  // as asked for with -a
  double time_us, algbw, busbw;
  long wrong;  // -1: not checked
  double vs_mpi;  // MPI's time / this row's time; 0: no mpi row
  double model_us;  // the cost model's prediction; 0: none (MPI's rows, or no --model)
};

// One call of collective `c` on `target` (a communicator or mpi_reference).
template <class E, class Target>
void invoke(Target& target, collective c, std::span<E> in, std::span<E> out, std::size_t m, op o, int root,
            algorithm a) {
  const int n = target.size();
  const bool is_root = target.rank() == root;
  switch (c) {
    case collective::allreduce: target.allreduce(std::span<const E>(in.first(m)), out.first(m), o, a); break;
    case collective::broadcast: target.broadcast(out.first(m), root, a); break;
    case collective::reduce: target.reduce(std::span<const E>(in.first(m)), out.first(is_root ? m : 0), root, o, a); break;
    case collective::scatter: target.scatter(std::span<const E>(in.first(is_root ? m * n : 0)), out.first(m), root, a); break;
    case collective::gather: target.gather(std::span<const E>(in.first(m)), out.first(is_root ? m * n : 0), root, a); break;
    case collective::reduce_scatter: target.reduce_scatter(std::span<const E>(in.first(m * n)), out.first(m), o, a); break;
    case collective::allgather: target.allgather(std::span<const E>(in.first(m)), out.first(m * n), a); break;
    case collective::barrier: break;
    case collective::alltoall: target.alltoall(std::span<const E>(in.first(m * n)), out.first(m * n), a); break;
  }
}

// The part of the buffers that this rank sends from in `c` (what --fresh
// rewrites before each call): the input, the root's buffer for broadcast,
// nothing at the other ranks of rooted calls that only receive.
template <class E>
std::span<E> sent_from(collective c, std::span<E> in, std::span<E> out, std::size_t m, int n, bool is_root) {
  switch (c) {
    case collective::broadcast: return is_root ? out.first(m) : std::span<E>{};
    case collective::scatter: return is_root ? in.first(m * n) : std::span<E>{};
    case collective::reduce_scatter:
    case collective::alltoall: return in.first(m * n);
    case collective::barrier: return {};
    default: return in.first(m);
  }
}

// nccl-tests style: mean time of `iters` calls after `warmup`, the slowest
// rank's (--rounds takes the median of several of these).
template <class F>
double time_us(F call, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) call();
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) call();
  double local = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters, slowest = 0;
  MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

std::string human(std::size_t b) {
  const char* unit[] = {"B", "K", "M", "G"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 3 && std::fmod(v, 1024) == 0) v /= 1024, ++u;
  return detail::cat(static_cast<long long>(v), unit[u]);
}

void print_header(const options& o, int n) {
  std::printf("# ringtree-perf: %d ranks, transport %s, memory %s, type %s, redop %s, root %d, warmup %d, iters %d, rounds %d, check %s\n", n,
              o.transport.c_str(), o.symmetric ? "symmetric" : "private", std::string(to_string(o.type)).c_str(),
              std::string(to_string(o.redop)).c_str(), o.root, o.warmup, o.iters, o.rounds, o.check ? "on" : "off");
  std::printf("# time: mean per call of the slowest rank (the median of the rounds); algbw = size/time; busbw = algbw * bus factor (nccl-tests);\n"
              "# vs mpi = MPI's time (pmpi's, where asked for) / this time for the same size (above 1: faster than MPI)\n"
              "# memcpy: one core copying the same bytes, while the other ranks wait (busbw = algbw)\n");
  if (o.fresh)
    std::printf("# fresh: before each call every rank writes the data it sends; times include it, `write` is that write alone\n");
  if (o.model)
    std::printf("# model(us): alpha * steps + beta * bytes + gamma * reduced bytes (docs/algorithms.md)\n");
}

// The column titles, after every line of the header.
void print_columns(const options& o) {
  std::printf("%-15s %10s %12s %9s %6s %5s %-28s %11s", "collective", "size", "count", "type", "redop", "root", "algo",
              "time(us)");
  if (o.model) std::printf(" %11s", "model(us)");
  std::printf(" %11s %11s %7s %7s\n", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "vs mpi");
}

void print_row(const row& r, bool model) {
  std::printf("%-15s %10s %12zu %9s %6s %5d %-28s %11.2f", r.collective.c_str(), human(r.bytes).c_str(), r.count,
              r.type.c_str(), r.redop.c_str(), r.root, r.algo.c_str(), r.time_us);
  if (model) std::printf(" %11s", r.model_us > 0 ? detail::cat(std::round(r.model_us * 100) / 100).c_str() : "-");
  std::printf(" %11.3f %11.3f %7s %7s\n", r.algbw, r.busbw, r.wrong < 0 ? "-" : std::to_string(r.wrong).c_str(),
              r.vs_mpi > 0 ? detail::cat(std::round(r.vs_mpi * 100) / 100).c_str() : "-");
  std::fflush(stdout);
}

void write_csv(const std::string& file, const std::vector<row>& rows) {
  std::ofstream f(file);
  if (!f) throw error("ringtree-perf", 0, "cannot write " + file);
  f << "collective,bytes,count,type,redop,root,algo,time_us,algbw_GBps,busbw_GBps,wrong,vs_mpi,model_us\n";
  for (auto& r : rows)
    f << r.collective << ',' << r.bytes << ',' << r.count << ',' << r.type << ',' << r.redop << ',' << r.root << ','
      << r.algo << ',' << r.time_us << ',' << r.algbw << ',' << r.busbw << ',' << r.wrong << ',' << r.vs_mpi << ',' << r.model_us << '\n';
}

void write_json(const std::string& file, const std::vector<row>& rows, int n) {
  std::ofstream f(file);
  if (!f) throw error("ringtree-perf", 0, "cannot write " + file);
  f << "{\"ranks\": " << n << ", \"rows\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto& r = rows[i];
    using detail::json_quoted;
    f << "  {\"collective\": " << json_quoted(r.collective) << ", \"bytes\": " << r.bytes << ", \"count\": " << r.count
      << ", \"type\": " << json_quoted(r.type) << ", \"redop\": " << json_quoted(r.redop) << ", \"root\": " << r.root
      << ", \"algo\": " << json_quoted(r.algo) << ", \"time_us\": " << r.time_us << ", \"algbw_GBps\": " << r.algbw
      << ", \"busbw_GBps\": " << r.busbw << ", \"wrong\": " << r.wrong << ", \"vs_mpi\": " << r.vs_mpi << ", \"model_us\": " << r.model_us << "}"
      << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  f << "]}\n";
}

// busbw against size, one line per (collective, algorithm), drawn by gnuplot.
void write_plot(const std::string& png, const std::vector<row>& rows, int n) {
  std::map<std::string, std::vector<const row*>> lines;
  for (auto& r : rows) lines[r.collective + " " + r.requested].push_back(&r);
  const std::string data = png + ".dat";
  std::ofstream d(data);
  std::string plots;
  int index = 0;
  for (auto& [name, pts] : lines) {
    d << "# " << name << "\n";
    for (auto* r : pts) d << r->bytes << ' ' << r->busbw << "\n";
    d << "\n\n";
    plots += detail::cat(index ? ", " : "", "'", data, "' index ", index, " with linespoints title '", name, "'");
    ++index;
  }
  d.close();
  const std::string script = detail::cat(
      "set terminal pngcairo noenhanced size 1000,620\nset output '", png, "'\nset logscale x 2\n",
      "set xlabel 'size (bytes)'\nset ylabel 'busbw (GB/s)'\nset key top left\nset grid\n",
      "set title 'ringtree-perf: ", n, " ranks, busbw against size'\nset format x '%.0b%B'\nset xtics 16\nplot ", plots, "\n");
  FILE* gp = popen("gnuplot 2>&1", "w");
  if (gp == nullptr) throw error("ringtree-perf", 0, "cannot run gnuplot (apt-get install gnuplot-nox)");
  std::fputs(script.c_str(), gp);
  if (pclose(gp) != 0) throw error("ringtree-perf", 0, "gnuplot failed to draw " + png + " (is gnuplot installed?)");
}

template <class E, class Transport>
int run_on(Transport& t, const options& o) {
  communicator_options copt;
  copt.chunks = o.chunks;
  communicator comm(t, copt);
  mpi_reference mpi(MPI_COMM_WORLD), pmpi(MPI_COMM_WORLD, profiling_calls);
  const int n = comm.size(), me = comm.rank();
  if (o.root >= n) throw error("ringtree-perf", me, detail::cat("--root ", o.root, " is out of range for ", n, " ranks"));
  {  // MPI and the transport set up connections lazily: pay for that before the first row
    std::vector<E> a(64), b(64);
    for (int i = 0; i < 200; ++i) {
      invoke<E>(comm, collective::allreduce, std::span<E>(a), std::span<E>(b), 16, op::max, 0, algorithm::ring);
      if (mpi_datatype<E>() != MPI_DATATYPE_NULL)
        invoke<E>(mpi, collective::allreduce, std::span<E>(a), std::span<E>(b), 16, op::max, 0, algorithm::automatic);
    }
  }
  const cost_model& model = comm.model().model();  // loads or measures it now, not inside a timed row
  const double trip_before = line_round_trip_ns(MPI_COMM_WORLD);
  if (me == 0) {
    print_header(o, n);
    std::printf("# core-to-core round trip (one cache line, ranks 0 and 1): %s\n",
                trip_before > 0 ? detail::cat(std::lround(trip_before), " ns").c_str()
                                : "not measured (one rank on the host, or more ranks than cores)");
    std::printf("# cost model: alpha %.3g us, beta %.3g ns/B, gamma %.3g ns/B, +%.3g us per step above %.0f B%s (%s)\n",
                model.alpha * 1e6, model.beta * 1e9, model.gamma * 1e9, model.alpha_above * 1e6, model.knee,
                model.alpha_net < 0 ? ""
                                    : detail::cat("; between hosts alpha ", model.alpha_net * 1e6, " us, beta ",
                                                  model.beta_net * 1e9, " ns/B").c_str(),
                model.source.c_str());
    if constexpr (hierarchical_transport<Transport>)
      std::printf("# hosts: %s (%d hosts; hierarchical rows %s)\n", t.layout().describe().c_str(), t.layout().hosts(),
                  detail::offers(collective::allreduce, algorithm::hierarchical, comm.placement_of(1 << 20)) ? "offered" : "not offered");
    print_columns(o);
  }
  std::vector<row> rows;
  long total_wrong = 0;
  for (collective c : o.collectives) {
    // MPI's rows are measured first at each size, so that the others can be
    // compared with them: with `pmpi`, the MPI library's own (the baseline
    // even where a PMPI layer serves `mpi`), else `mpi`.
    std::vector<std::string> algos = o.algos;
    const bool has_pmpi = std::find(algos.begin(), algos.end(), "pmpi") != algos.end();
    const std::string baseline = has_pmpi ? "pmpi" : "mpi";
    std::stable_partition(algos.begin(), algos.end(), [](const std::string& a) { return a == "pmpi" || a == "mpi"; });
    for (double b = static_cast<double>(o.min_bytes); b <= static_cast<double>(o.max_bytes);
         b = std::max(b * o.factor, b + 1)) {
      const std::size_t bytes = static_cast<std::size_t>(b);
      const std::size_t m = count_for(c, bytes, sizeof(E), n);
      const std::size_t len = std::max<std::size_t>(1, m * n);
      // --symmetric: ringtree's rows on buffers every rank can read (MPI's and memcpy's on private ones)
      std::vector<E> in_private(len), out_private(len);
      symmetric_buffer<E> in_sym, out_sym;
      if (o.symmetric) in_sym = comm.template allocate<E>(len), out_sym = comm.template allocate<E>(len);
      std::span<E> in = o.symmetric ? in_sym.span() : std::span<E>(in_private);
      std::span<E> out = o.symmetric ? out_sym.span() : std::span<E>(out_private);
      for (std::size_t i = 0; i < len; ++i) in[i] = in_private[i] = rt_test::value<E>(o.redop, me, i, 0);
      // What runs at this size: (name, algorithm, label); then --rounds
      // rounds, each timing every one of them in turn.
      struct entry {
        std::string name, label;
        algorithm a, runs;
        bool is_mpi, is_memcpy;  // `write` (--fresh) counts as memcpy: one rank's copy, not a collective
        bool is_write;
        std::vector<double> us;
        mpi_reference* ref;  // MPI's rows: through which names
      };
      std::vector<entry> todo;
      const std::size_t in_bytes = (c == collective::reduce_scatter || c == collective::alltoall ? m * n : m) * sizeof(E);  // what the tuner is asked
      for (const auto& name : algos) {
        const bool is_mpi = name == "mpi" || name == "pmpi", is_memcpy = name == "memcpy";
        const algorithm a = algorithm_from_string(name).value_or(algorithm::automatic);  // "mpi", "pmpi", "memcpy": not ringtree's
        if (is_mpi && mpi_datatype<E>() == MPI_DATATYPE_NULL) continue;  // no 16-bit floats in MPI-3.1
        const bool ours = !is_mpi && !is_memcpy;
        if (ours && a != algorithm::automatic && !detail::offers(c, a, comm.placement_of(in_bytes, o.symmetric))) continue;  // not offered here
        const algorithm runs = a == algorithm::automatic ? comm.choose(c, in_bytes, o.symmetric) : a;
        const std::string label = a == algorithm::automatic && ours ? name + ":" + std::string(to_string(runs)) : name;
        todo.push_back({name, label, a, runs, is_mpi, is_memcpy, false, {}, name == "pmpi" ? &pmpi : &mpi});
      }
      if (o.fresh) todo.push_back({"write", "write", algorithm::automatic, algorithm::automatic, false, true, true, {}, nullptr});
      auto copy_once = [&] {
        if (me == 0 && bytes > 0) std::memcpy(out_private.data(), in_private.data(), std::min(bytes, len * sizeof(E)));
      };
      // --fresh: new data before every call, at memset's speed: every byte
      // 0x3e, then every byte 0x3f, and so on (normal numbers in each
      // floating type, never a denormal that would slow a reduction; the
      // checks below run on buffers of their own).
      int calls = 0;
      auto rewrite = [&](std::span<E> buf) {
        if (o.fresh && !buf.empty()) std::memset(static_cast<void*>(buf.data()), 0x3e + (++calls & 1), buf.size_bytes());
      };
      // What each kind of row sends from, found once per size: nothing but
      // the call (and the write) is timed.
      const bool is_root = me == o.root;
      const std::span<E> sent_private = sent_from(c, std::span<E>(in_private), std::span<E>(out_private), m, n, is_root);
      const std::span<E> sent_ours = sent_from(c, in, out, m, n, is_root);
      for (int round = 0; round < o.rounds; ++round)
        for (auto& e : todo)
          e.us.push_back(e.is_mpi ? time_us([&] { rewrite(sent_private), invoke<E>(*e.ref, c, std::span<E>(in_private), std::span<E>(out_private), m, o.redop, o.root, e.a); }, o.warmup, o.iters)
                         : e.is_write  ? time_us([&] { rewrite(sent_private); }, o.warmup, o.iters)
                         : e.is_memcpy ? time_us(copy_once, o.warmup, o.iters)
                                       : time_us([&] { rewrite(sent_ours), invoke<E>(comm, c, in, out, m, o.redop, o.root, e.a); }, o.warmup, o.iters));
      double mpi_time = 0;
      for (auto& e : todo) {
        std::nth_element(e.us.begin(), e.us.begin() + e.us.size() / 2, e.us.end());
        const double us = e.us[e.us.size() / 2];  // the same on every rank: each time is the slowest rank's
        if (e.name == baseline) mpi_time = us;
        const rt_test::case_desc cd{c, e.a, o.redop, m, o.root, 1};
        long wrong = -1;
        if (o.check && !e.is_memcpy) {
          wrong = static_cast<long>(e.is_mpi        ? rt_test::check_all<E>(*e.ref, cd).wrong
                                    : o.symmetric ? rt_test::check_all<E>(comm, cd, rt_test::symmetric_buffers<decltype(comm)>{&comm}).wrong
                                                  : rt_test::check_all<E>(comm, cd).wrong);
          long sum = 0;
          MPI_Allreduce(&wrong, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
          wrong = sum;
          total_wrong += wrong;
        }
        const double algbw = us > 0 ? bytes / us / 1e3 : 0;
        row r{std::string(to_string(c)), bytes, m, std::string(to_string(dtype_of<E>)), std::string(to_string(o.redop)),
              o.root, e.label, e.name, us, algbw, e.is_memcpy ? algbw : algbw * bus_factor(c, n), wrong,
              (mpi_time > 0 && e.name != baseline && !e.is_memcpy) ? mpi_time / us : 0,
              o.model && !e.is_mpi && !e.is_memcpy ? comm.model().seconds(c, e.runs, in_bytes) * 1e6 : 0};
        if (me == 0) print_row(r, o.model);
        rows.push_back(r);
      }
      if (bytes == 0 && o.max_bytes == 0) break;
    }
  }
  const double trip_after = line_round_trip_ns(MPI_COMM_WORLD);
  if (me == 0 && trip_before > 0) {
    // A host that moved the ranks' vCPUs mid-run changed every copy's cost: say so.
    const double change = trip_after / trip_before;
    std::printf("# core-to-core round trip after the rows: %ld ns%s\n", std::lround(trip_after),
                change > 2 || change < 0.5 ? " (changed during the run: rows measured before and after the change do not compare)" : "");
  }
  if (me == 0) {
    if (!o.csv.empty()) write_csv(o.csv, rows);
    if (!o.json.empty()) write_json(o.json, rows, n);
    if (!o.plot.empty()) write_plot(o.plot, rows, n);
    if (o.check) std::printf("# %s: %ld wrong elements in all rows\n", total_wrong ? "FAILED" : "checked", total_wrong);
    if (!o.plot.empty()) std::printf("# plot: %s\n", o.plot.c_str());
  }
  return total_wrong ? 1 : 0;
}

template <class E>
int run(const options& o) {
  if (o.transport == "mpi") {
    mpi_transport t(MPI_COMM_WORLD);
    return run_on<E>(t, o);
  }
  if (o.transport == "net") {
#ifdef RINGTREE_PERF_NET
    // (float only: every element type would multiply the tool's build time)
    if constexpr (std::is_same_v<E, float>) {
      mpi_bootstrap b(MPI_COMM_WORLD);
      net_cluster t(b);
      return run_on<E>(t, o);
    } else {
      throw error("ringtree-perf", -1, "-t net runs float only (-d float)");
    }
#else
    throw error("ringtree-perf", -1, "-t net: this ringtree-perf was built without UCX (libucx-dev)");
#endif
  }
  // shm and cluster: make_communicator's transport (on one host, every
  // message moves through shared memory: MPI only starts the ranks)
  cluster_transport t(MPI_COMM_WORLD);
  if (o.transport == "shm" && !t.one_host())
    throw error("ringtree-perf", t.rank(), detail::cat("-t shm needs every rank on one host; these ", t.size(), " are on ",
                                                        t.layout().hosts(), " (", t.layout().describe(), "): use -t cluster"));
  return run_on<E>(t, o);
}

int dispatch(const options& o) {
  switch (o.type) {
    case dtype::float32: return run<float>(o);
    case dtype::float64: return run<double>(o);
    case dtype::int8: return run<std::int8_t>(o);
    case dtype::int16: return run<std::int16_t>(o);
    case dtype::int32: return run<std::int32_t>(o);
    case dtype::int64: return run<std::int64_t>(o);
    case dtype::uint8: return run<std::uint8_t>(o);
    case dtype::uint16: return run<std::uint16_t>(o);
    case dtype::uint32: return run<std::uint32_t>(o);
    case dtype::uint64: return run<std::uint64_t>(o);
    case dtype::float16: return run<half>(o);
    case dtype::bfloat16: return run<bfloat16>(o);
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 0;
  try {
    const options o = parse(argc, argv);  // the same on every rank, so errors are too
    if (o.help) {
      if (rank == 0) std::fputs(usage().c_str(), stdout);
    } else {
      rc = dispatch(o);
    }
  } catch (const error& e) {
    // Command-line errors are the same on every rank: rank 0 says it. A
    // failure during the run may be on one rank only: that rank says it.
    const bool usage_error = e.call() == "ringtree-perf";
    if (rank == 0 || !usage_error) std::fprintf(stderr, "%s\n", e.what());
    rc = 2;
    if (!usage_error) {
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 2);  // stop every rank
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringtree-perf on rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return rc;
}
