#pragma once
// Measuring which algorithm is fastest at one size, on the live transport:
// what algorithm::automatic does the first time a size bin is called
// (communicator/chooser.hpp). In four steps:
//
//   buffers      scratch of the transport's own memory, never the caller's
//   warm_up      each algorithm once untimed (connections, pages), once timed
//   sample       rounds that interleave the algorithms, a barrier before each
//                sample, every time the slowest rank's
//   medians      per algorithm, the median over rounds of its time relative
//                to the round's fastest
//
// and then a choice: the neighbouring bin's, where it is within 10% (stable
// between sizes), else the fastest, with ties within 5% broken by the cost
// model. The same calls on every rank: every number that decides how many
// calls to make is agreed on (an all-reduce of max).
//
// `Comm` runs rows and lends its transport: comm.size(), comm.transport()
// .memory(), comm.untraced_view(), comm.chunks(), and comm.run<C>(row,
// args...) (the communicator, which befriends the chooser).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include <ringtree/algorithms/ring.hpp>
#include <ringtree/algorithms/table.hpp>
#include <ringtree/tuning/choice_cache.hpp>

namespace ringtree::detail {

// The buffers a measured call of C on `bytes` runs on (floats, as
// gradients are; zeros on the host, so sums stay finite and no denormals),
// and how to call a row on them.
template <collective C, class Memory>
class measure_buffers {
 public:
  measure_buffers(const Memory& raw, int n, std::size_t bytes)
      : e_(std::max<std::size_t>(1, bytes / sizeof(float))),
        total_(C == collective::reduce_scatter ? std::max<std::size_t>(e_, n) : e_),
        block_(C == collective::reduce_scatter ? total_ / n : e_),
        whole_(std::max<std::size_t>(e_, n) / n * n),  // all-to-all: one rank's input, n equal blocks
        a_(raw.template scratch<float>(std::max({total_, block_ * n, whole_}))),
        b_(raw.template scratch<float>(C == collective::alltoall ? whole_ : block_)),
        counts_(n, whole_ / n) {
    if constexpr (kind_of_memory<Memory>() == memory_kind::host) {
      std::memset(static_cast<void*>(a_.span().data()), 0, a_.span().size_bytes());
      std::memset(static_cast<void*>(b_.span().data()), 0, b_.span().size_bytes());
    }
    auto x = a_.span(), y = b_.span();
    data_ = x.first(total_);  // scatter and gather move blocks between the two buffers
    if constexpr (C == collective::scatter) in_ = x.first(block_ * n), data_ = y.first(block_);
    else if constexpr (C == collective::gather) in_ = y.first(block_), data_ = x.first(block_ * n);
    else if constexpr (C == collective::reduce_scatter || C == collective::allgather) data_ = x.first(block_ * n);
    else if constexpr (C == collective::alltoall) in_ = x.first(whole_), data_ = y.first(whole_);
  }
  // Calls row `a` on these buffers through comm.run<C>.
  template <class Comm>
  void call(Comm& comm, algorithm a) {
    with_row_arguments<C>(in_, data_, op::sum, 0, std::span<const std::size_t>(counts_),
                          [&](auto... args) { comm.template run<C>(a, args...); });
  }

 private:
  std::size_t e_, total_, block_, whole_;
  typename Memory::template buffer<float> a_, b_;
  std::vector<std::size_t> counts_;
  std::span<const float> in_;
  std::span<float> data_;
};

// Every rank's values become the largest over the ranks: a collective step
// takes as long as its slowest rank, and every rank must plan the same calls.
template <class Comm>
void agree_on_slowest(Comm& comm, std::vector<double>& v) {
  auto l = comm.untraced_view();
  ring::allreduce(l, std::span<double>(v), op::max, comm.chunks());
}

using measure_clock = std::chrono::steady_clock;
inline double seconds_since(measure_clock::time_point t0) {
  return std::chrono::duration<double>(measure_clock::now() - t0).count();
}

// Each algorithm's second call, timed (the first pays for connections and pages).
template <class Comm, class Buffers>
std::vector<double> warm_up(Comm& comm, Buffers& buf, std::span<const algorithm> algos) {
  std::vector<double> warm(algos.size());
  for (std::size_t i = 0; i < algos.size(); ++i) {
    buf.call(comm, algos[i]);
    comm.template run<collective::barrier>(algorithm::dissemination);
    const auto t0 = measure_clock::now();
    buf.call(comm, algos[i]);
    warm[i] = seconds_since(t0);
  }
  agree_on_slowest(comm, warm);
  return warm;
}

// How many calls make a sample of each algorithm (about sample_s), and how
// many rounds: small sizes get many (their medians are what noise blurs
// most), large ones at least 5, within about budget_s a bin.
struct sample_plan {
  std::vector<int> batch;
  int rounds = 5;
};
inline sample_plan plan_samples(std::span<const double> warm) {
  constexpr double sample_s = 1e-3, budget_s = 0.3;
  sample_plan p;
  double round_s = 0;
  for (double w : warm) {
    p.batch.push_back(static_cast<int>(std::clamp(sample_s / std::max(w, 1e-9), 1.0, 1000.0)));
    round_s += p.batch.back() * w;
  }
  p.rounds = static_cast<int>(std::clamp(budget_s / std::max(round_s, 1e-9), 5.0, 25.0));
  return p;
}

// Per round and algorithm, the time of one call (rounds x algorithms, by round).
template <class Comm, class Buffers>
std::vector<double> sample(Comm& comm, Buffers& buf, std::span<const algorithm> algos, const sample_plan& p) {
  const std::size_t k = algos.size();
  std::vector<double> times(k * p.rounds);
  for (int r = 0; r < p.rounds; ++r)
    for (std::size_t i = 0; i < k; ++i) {
      // All ranks start a sample together; else a rank that left the last
      // one early times its wait for the others as this algorithm's cost
      // (with more ranks than cores, that wait is most of a sample).
      comm.template run<collective::barrier>(algorithm::dissemination);
      const auto t0 = measure_clock::now();
      for (int j = 0; j < p.batch[i]; ++j) buf.call(comm, algos[i]);
      times[r * k + i] = seconds_since(t0) / p.batch[i];
    }
  agree_on_slowest(comm, times);
  return times;
}

// Each algorithm's median over the rounds of its time relative to the
// round's fastest: the algorithms of a round ran back to back, so a noisy
// stretch (another process, on a shared machine) slows them alike and
// cancels out, where plain medians of times let a few noisy rounds of one
// algorithm decide (at 4-16 MiB in torch processes they picked ring over
// two_shot, 1.4x slower, in some runs).
inline std::vector<double> relative_medians(std::span<const double> times, std::size_t k) {
  const std::size_t rounds = times.size() / k;
  std::vector<double> median(k);
  for (std::size_t i = 0; i < k; ++i) {
    std::vector<double> mine;
    for (std::size_t r = 0; r < rounds; ++r) {
      const auto round = times.subspan(r * k, k);
      mine.push_back(times[r * k + i] / std::max(*std::min_element(round.begin(), round.end()), 1e-12));
    }
    std::nth_element(mine.begin(), mine.begin() + rounds / 2, mine.end());
    median[i] = mine[rounds / 2];
  }
  return median;
}

// The medians of every algorithm in `algos` on C at `bytes` (at least two).
template <collective C, class Comm>
std::vector<double> measured_medians(Comm& comm, std::span<const algorithm> algos, std::size_t bytes) {
  measure_buffers<C, std::decay_t<decltype(comm.transport().memory())>> buf(comm.transport().memory(), comm.size(), bytes);
  const auto warm = warm_up(comm, buf, algos);
  return relative_medians(sample(comm, buf, algos, plan_samples(warm)), algos.size());
}

// Stable between neighbouring sizes: where the bin below or above was
// measured already, its choice stays unless another is faster by more than
// stable_ratio (a noisy moment put ring at 256 KiB between two two_shot
// bins, where it ran at 0.7x MPI's own).
inline std::optional<algorithm> neighbours_choice(const measured_choices* table, collective c, int bin,
                                                  std::span<const algorithm> algos, std::span<const double> median) {
  constexpr double stable_ratio = 1.10;
  if (table == nullptr) return std::nullopt;
  const double fastest = *std::min_element(median.begin(), median.end());
  for (int nb : {bin - 1, bin + 1}) {
    if (nb < 0 || nb > measured_choices::max_bin) continue;
    const algorithm there = table->get(c, nb);
    for (std::size_t i = 0; i < algos.size(); ++i)
      if (algos[i] == there && median[i] <= fastest * stable_ratio) return there;
  }
  return std::nullopt;
}

// The fastest; medians within tie_ratio of it are a tie as far as this
// machine's noise can tell (5-10% between runs here), and the cost model
// (the same on every rank: `model_seconds(a)`) breaks it, so that a tie
// goes to the algorithm that scales (fewer steps, fewer bytes) rather than
// to noise.
template <class ModelSeconds>
algorithm fastest_or_model(std::span<const algorithm> algos, std::span<const double> median, ModelSeconds&& model_seconds) {
  constexpr double tie_ratio = 1.05;
  const double fastest = *std::min_element(median.begin(), median.end());
  algorithm best = algorithm::automatic;
  double best_model = 0;
  for (std::size_t i = 0; i < algos.size(); ++i) {
    if (median[i] > fastest * tie_ratio) continue;
    const double m = model_seconds(algos[i]);
    if (best == algorithm::automatic || m < best_model) best = algos[i], best_model = m;
  }
  return best;
}

}  // namespace ringtree::detail
