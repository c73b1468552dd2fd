#pragma once
// How far apart two ranks' cores are right now: the round trip of one cache
// line between ranks 0 and 1 of a host, through MPI shared memory. A
// virtual machine's vCPUs can sit on one core complex (tens of ns) or on
// two (hundreds), and the host may move them while a job runs. Copies
// through shared memory pay that distance for every line; an MPI
// single-copy transfer of an unchanged buffer does not. So a table
// measured in the far placement is not comparable with one measured in the
// near one, and ringtree-perf prints this number before and after its rows.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace ringtree::perf {

// Nanoseconds, the median of 7 batches of 2000 round trips (fewer where
// they take more than 200 ms); 0 where it is
// not measured: fewer than 2 ranks on the host, or more ranks than cores
// (a spinning rank would wait for a scheduler slice, not for a line).
// Collective over `world`; the value is that of the caller's host.
inline double line_round_trip_ns(MPI_Comm world) {
  MPI_Comm host;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  int me = 0, n = 0;
  MPI_Comm_rank(host, &me);
  MPI_Comm_size(host, &n);
  const bool measured = n >= 2 && n <= sysconf(_SC_NPROCESSORS_ONLN);
  std::int64_t* base = nullptr;
  MPI_Win win;
  MPI_Win_allocate_shared(me == 0 ? 64 : 0, 1, MPI_INFO_NULL, host, &base, &win);
  MPI_Aint bytes = 0;
  int unit = 0;
  std::int64_t* line = nullptr;
  MPI_Win_shared_query(win, 0, &bytes, &unit, &line);
  if (me == 0) *line = 0;
  MPI_Barrier(host);
  double ns = 0;
  if (measured && me < 2) {
    // Rank 0 leads: it writes an odd number, rank 1 answers with the next
    // one, until rank 0 writes `stop`. Rank 0 stops after 7 batches or
    // 200 ms, so that a loaded machine (where a trip may wait for a
    // scheduler slice) costs a fifth of a second, not minutes.
    std::atomic_ref<std::int64_t> flag(*line);
    constexpr std::int64_t stop = -2;
    if (me == 1) {
      for (std::int64_t v; (v = flag.load(std::memory_order_acquire)) != stop;)
        if (v & 1) flag.store(v + 1, std::memory_order_release);
    } else {
      constexpr int trips = 2000, batches = 7;
      const auto start = std::chrono::steady_clock::now();
      std::vector<double> per_trip;
      std::int64_t k = 0;
      bool late = false;
      for (int b = 0; b < batches && !late; ++b) {
        const auto t0 = std::chrono::steady_clock::now();
        int done = 0;
        while (done < trips && !late) {
          flag.store(k + 1, std::memory_order_release);
          while (flag.load(std::memory_order_acquire) != k + 2) {}
          k += 2;
          late = (++done & 63) == 0 && std::chrono::steady_clock::now() - start > std::chrono::milliseconds(200);
        }
        per_trip.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / done);
      }
      flag.store(stop, std::memory_order_release);
      std::nth_element(per_trip.begin(), per_trip.begin() + per_trip.size() / 2, per_trip.end());
      ns = per_trip[per_trip.size() / 2];
    }
  }
  MPI_Barrier(host);
  MPI_Win_free(&win);
  MPI_Comm_free(&host);
  return ns;
}

}  // namespace ringtree::perf
