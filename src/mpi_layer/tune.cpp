// ringtree-mpi-tune: measures, once per machine and rank count, what
// libringtree-mpi should run for each call and size: ringtree (with its own
// algorithms measured now, into ringtree's choice cache) or MPI's own,
// whichever is faster. Writes both into the cache directory
// (RINGTREE_CACHE_DIR, else ~/.cache/ringtree), where every later program
// under the layer on this machine and rank count finds them, instead of
// measuring inside its own first calls.
//
//   mpirun -np 4 build/ringtree-mpi-tune [--max-bytes B] [--rounds R]
//
// Linked before MPI, like the layer's users: MPI_* is the layer (made to
// serve every call it can: RINGTREE_MPI_ROUTES=0), PMPI_* is MPI's own.
// Rounds alternate the two, each rank's time of a batch is the slowest
// rank's, the median over rounds decides; before every timed call each
// rank writes new data into what it sends, as a program does. ringtree
// serves a size where it is faster by more than `margin`, MPI's own the
// others (a tie costs the program nothing there); a size whose winner
// differs from both of its neighbours' (which agree) by less than
// `stable_margin` takes theirs, so that choices do not flip between
// neighbouring sizes on noise.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "layer.hpp"

using namespace ringtree;
using namespace ringtree::mpi_layer;

namespace {

constexpr double margin = 0.03, stable_margin = 0.05;  // (a flip for stability costs at most what "never slower" allows)

int me = 0, ranks = 1;

// One call of kind k moving `bytes` (routes.hpp: the whole buffer), through
// the layer (MPI_*) or MPI's own (PMPI_*). Reductions sum floats (bytes
// of 4 and more), else unsigned bytes.
void call(call_kind k, bool own, std::size_t bytes, std::vector<char>& in, std::vector<char>& out) {
  const bool small = bytes < 4;
  const MPI_Datatype t = small ? MPI_UINT8_T : MPI_FLOAT;
  const int e = small ? 1 : 4, count = static_cast<int>(bytes / static_cast<std::size_t>(e));
  const int block = static_cast<int>(bytes / static_cast<std::size_t>(ranks));  // bytes per rank
  MPI_Request r;
  switch (k) {
    case call_kind::allreduce: own ? PMPI_Allreduce(in.data(), out.data(), count, t, MPI_SUM, MPI_COMM_WORLD)
                                   : MPI_Allreduce(in.data(), out.data(), count, t, MPI_SUM, MPI_COMM_WORLD); break;
    case call_kind::iallreduce:
      if (own) PMPI_Iallreduce(in.data(), out.data(), count, t, MPI_SUM, MPI_COMM_WORLD, &r), PMPI_Wait(&r, MPI_STATUS_IGNORE);
      else MPI_Iallreduce(in.data(), out.data(), count, t, MPI_SUM, MPI_COMM_WORLD, &r), MPI_Wait(&r, MPI_STATUS_IGNORE);
      break;
    case call_kind::reduce: own ? PMPI_Reduce(in.data(), out.data(), count, t, MPI_SUM, 0, MPI_COMM_WORLD)
                                : MPI_Reduce(in.data(), out.data(), count, t, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case call_kind::bcast: own ? PMPI_Bcast(out.data(), static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD)
                               : MPI_Bcast(out.data(), static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD); break;
    case call_kind::allgather: own ? PMPI_Allgather(in.data(), block, MPI_BYTE, out.data(), block, MPI_BYTE, MPI_COMM_WORLD)
                                   : MPI_Allgather(in.data(), block, MPI_BYTE, out.data(), block, MPI_BYTE, MPI_COMM_WORLD); break;
    case call_kind::alltoall: own ? PMPI_Alltoall(in.data(), block, MPI_BYTE, out.data(), block, MPI_BYTE, MPI_COMM_WORLD)
                                  : MPI_Alltoall(in.data(), block, MPI_BYTE, out.data(), block, MPI_BYTE, MPI_COMM_WORLD); break;
    case call_kind::reduce_scatter_block: {
      const int each = count / ranks;
      own ? PMPI_Reduce_scatter_block(in.data(), out.data(), each, t, MPI_SUM, MPI_COMM_WORLD)
          : MPI_Reduce_scatter_block(in.data(), out.data(), each, t, MPI_SUM, MPI_COMM_WORLD);
      break;
    }
    case call_kind::barrier: own ? PMPI_Barrier(MPI_COMM_WORLD) : MPI_Barrier(MPI_COMM_WORLD); break;
  }
}

// The bytes measured for bin b of kind k: 2^b, rounded down to whole
// blocks per rank (and elements) where the call has them; 0 where it
// cannot have that size.
std::size_t bytes_of_bin(call_kind k, int b) {
  std::size_t bytes = b == 0 ? 1 : std::size_t{1} << b;
  if (k == call_kind::barrier) return b == 0 ? 1 : 0;
  const std::size_t e = bytes < 4 ? 1 : 4;
  if (k == call_kind::allgather || k == call_kind::alltoall || k == call_kind::reduce_scatter_block) {
    const std::size_t unit = (k == call_kind::reduce_scatter_block ? e : 1) * static_cast<std::size_t>(ranks);
    bytes = bytes / unit * unit;
  }
  return bytes - bytes % e;
}

// What a program does between two calls: new data in what this rank sends
// (bytes 1 and 2 in turn: floats stay normal, sums finite). Without it,
// MPI's single-copy transfers on one host read lines that the receiver
// still caches from the last call, a speed that no program sending new data
// sees (bench/RESULTS.md: Open MPI's 1 MiB MPI_Bcast 1.8x faster so, 7x
// with the vCPUs far apart), and the routes would follow that.
void rewrite(call_kind k, std::size_t bytes, std::vector<char>& in, std::vector<char>& out, int j) {
  const int value = 1 + (j & 1);
  switch (k) {
    case call_kind::barrier: break;
    case call_kind::bcast: if (me == 0) std::memset(out.data(), value, bytes); break;
    case call_kind::allgather: std::memset(in.data(), value, bytes / static_cast<std::size_t>(ranks)); break;
    default: std::memset(in.data(), value, bytes);
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  setenv("RINGTREE_MPI_ROUTES", "0", 1);  // (read at the first call) ringtree serves all it can while it is measured
  if (!std::getenv("RINGTREE_TUNE")) setenv("RINGTREE_TUNE", "fresh", 1);  // and measures its own algorithms now
  MPI_Init(&argc, &argv);
  PMPI_Comm_rank(MPI_COMM_WORLD, &me);
  PMPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::size_t max_bytes = std::size_t{64} << 20;
  int rounds = 9;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--max-bytes" || a == "--rounds") && i + 1 < argc) {
      const long v = std::atol(argv[++i]);
      if (v <= 0) { if (me == 0) std::fprintf(stderr, "ringtree-mpi-tune: %s must be positive\n", a.c_str()); PMPI_Abort(MPI_COMM_WORLD, 2); }
      (a == "--rounds" ? (void)(rounds = static_cast<int>(v)) : (void)(max_bytes = static_cast<std::size_t>(v)));
    } else {
      if (me == 0) std::fprintf(stderr, "usage: mpirun -np N ringtree-mpi-tune [--max-bytes B] [--rounds R]\n");
      PMPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  max_bytes = std::min(max_bytes, std::size_t{1} << detail::measured_choices::max_bin);
  std::vector<char> in(max_bytes + 64, 1), out(max_bytes + 64, 0);
  if (me == 0)
    std::printf("# ringtree-mpi-tune: %d ranks, medians of %d alternating rounds (us per call, the slowest rank's)\n"
                "%-26s %10s %12s %12s  %s\n", ranks, rounds, "# call", "bytes", "ringtree", "MPI's own", "route");
  route_table table;
  std::vector<std::array<double, 2>> medians(route_table::bins);
  const int last_bin = detail::measured_choices::bin_of(max_bytes);
  for (std::size_t k = 0; k < call_kinds; ++k) {
    const auto kind = call_kind(k);
    std::vector<int> measured;  // bins, in order
    for (int b = 0; b <= last_bin; ++b) {
      const std::size_t bytes = bytes_of_bin(kind, b);
      if (bytes == 0 && !(kind == call_kind::barrier && b == 0)) continue;
      if (kind != call_kind::barrier && detail::measured_choices::bin_of(bytes) != b) continue;  // (its bin is another's)
      // warm: connections, pages, and ringtree measuring its own algorithms for this bin
      double warm[2];
      for (int own = 0; own < 2; ++own) {
        call(kind, own, bytes, in, out);
        PMPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = std::chrono::steady_clock::now();
        call(kind, own, bytes, in, out);
        warm[own] = seconds_since(t0);
      }
      PMPI_Allreduce(MPI_IN_PLACE, warm, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      std::vector<double> times[2];
      for (int r = 0; r < rounds; ++r)
        for (int own = 0; own < 2; ++own) {
          const int batch = static_cast<int>(std::clamp(2e-3 / std::max(warm[own], 1e-9), 1.0, 2000.0));
          PMPI_Barrier(MPI_COMM_WORLD);
          const auto t0 = std::chrono::steady_clock::now();
          for (int j = 0; j < batch; ++j) rewrite(kind, bytes, in, out, j), call(kind, own, bytes, in, out);
          double t = seconds_since(t0) / batch;
          PMPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          times[own].push_back(t);
        }
      for (int own = 0; own < 2; ++own) {
        std::nth_element(times[own].begin(), times[own].begin() + rounds / 2, times[own].end());
        medians[b][own] = times[own][rounds / 2];
      }
      // (a tie goes to MPI's own: the layer must never make a program slower)
      table.set(kind, b, medians[b][0] < medians[b][1] * (1 - margin) ? route::ringtree : route::mpi);
      measured.push_back(b);
    }
    // Stable between neighbours: an isolated winner by a small margin gives way.
    const route_table before = table;
    for (std::size_t i = 1; i + 1 < measured.size(); ++i) {
      const int b = measured[i], lo = measured[i - 1], hi = measured[i + 1];
      const route here = before.at[k * route_table::bins + b], around = before.at[k * route_table::bins + lo];
      const double ratio = std::max(medians[b][0], medians[b][1]) / std::min(medians[b][0], medians[b][1]);
      if (here != around && around == before.at[k * route_table::bins + hi] && ratio < 1 + stable_margin) table.set(kind, b, around);
    }
    if (me == 0)
      for (int b : measured)
        std::printf("%-26s %10zu %12.2f %12.2f  %s\n", std::string(call_names[k]).c_str(), bytes_of_bin(kind, b), medians[b][0] * 1e6,
                    medians[b][1] * 1e6, table.at[k * route_table::bins + b] == route::mpi ? "MPI" : "ringtree");
  }
  const std::string name = layout_key(MPI_COMM_WORLD);
  if (me == 0) {
    const std::string path = routes_path(name, ranks);
    detail::write_text_file(path, format_routes(table, name, ranks));
    std::printf("# written: %s (and ringtree's own choices beside it)\n", path.c_str());
  }
  MPI_Finalize();
  return 0;
}
