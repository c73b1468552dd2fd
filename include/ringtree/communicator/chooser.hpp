#pragma once
// How algorithm::automatic chooses, and everything it keeps: the user's
// override (communicator_options::algo, then RINGTREE_ALGO), the direct
// rows on symmetric memory, a memo of the last size per collective, the
// choices measured per power-of-two size bin (loaded from the choice
// cache, measured on first use, saved), and the cost model that breaks
// ties and answers where measuring is off (RINGTREE_TUNE=0 or a given
// model) or left to a run ahead (RINGTREE_TUNE=cached). Every rank makes the same choice: measurements are agreed on
// (the slowest rank's times), the model and the cache are rank 0's.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <ringtree/algorithms/table.hpp>
#include <ringtree/core/config.hpp>
#include <ringtree/tuning/calibration.hpp>
#include <ringtree/tuning/cost_model.hpp>

namespace ringtree::detail {

// RINGTREE_ALGO's algorithm ("" and "automatic": none); an unknown name
// is an error listing the names.
inline std::optional<algorithm> env_algorithm(const std::string& name) {
  if (name.empty() || name == "automatic") return std::nullopt;
  if (auto a = algorithm_from_string(name)) return a;
  throw error("RINGTREE_ALGO", -1, cat("unknown algorithm '", name, "' (one of: ", algorithm_names_list(), ")"));
}

// The communicator (Comm) lends the chooser its placement, its untraced
// transport and its rows (the chooser is its friend).
class chooser {
 public:
  chooser() = default;
  chooser(std::optional<algorithm> algo, const std::string& env_algo, std::optional<cost_model> model, config::tuning tune)
      : algo_(algo), env_algo_(env_algorithm(env_algo)), model_(std::move(model)),
        by_model_(model_.has_value() || tune == config::tuning::model), fresh_(tune == config::tuning::fresh),
        cached_only_(tune == config::tuning::cached) {}

  std::optional<algorithm> env_algo() const noexcept { return env_algo_; }
  bool measuring() const noexcept { return measuring_; }

  // The cost model with its constants: the given ones, else the cache's
  // or a calibration's (a collective call the first time).
  template <class Comm>
  const ringtree::tuner& model(Comm& comm) {
    if (!tuner_) {
      using T = typename Comm::transport_type;
      auto l = comm.untraced_view();
      host_shape hosts;
      if constexpr (hierarchical_transport<T>) hosts = host_shape::of(comm.transport().layout());
      tuner_.emplace(comm.size(), model_ ? *model_ : load_or_calibrate(l), comm.chunks(), memory_kind_of<T>(), hosts);
    }
    return *tuner_;
  }

  // What automatic runs for C on `bytes` of symmetric memory: a direct row
  // (the user's RINGTREE_ALGO or option first, where offered there).
  // All-reduce: one-shot reads n-1 whole buffers with two synchronisations,
  // two-shot 2(n-1)/n of one with three; one-shot wins while the buffers
  // are small (bench/RESULTS.md, "Symmetric buffers").
  static constexpr std::size_t one_shot_direct_bytes = std::size_t{512} << 10;  // read from all peers together
  template <collective C, class Comm>
  std::optional<algorithm> pick_direct(Comm& comm, std::size_t bytes, bool talk) {
    const placement at = comm.placement_of(bytes, true);
    if (algo_ && offers(C, *algo_, at)) return *algo_;
    if (env_algo_ && offers(C, *env_algo_, at)) return *env_algo_;
    if constexpr (C == collective::allreduce) {
      return bytes * static_cast<std::size_t>(comm.size() - 1) <= one_shot_direct_bytes ? algorithm::one_shot : algorithm::two_shot;
    } else {  // (else: nvcc warns of an unreachable loop)
      for (const auto& r : rows)
        if (r.what == C && r.direct && r.offered(at)) return r.id;
      return pick<C>(comm, bytes, talk);  // no direct row: the usual choice
    }
  }

  // What automatic runs for C on `bytes` (see choose), as resolve says.
  template <collective C, class Comm>
  std::optional<algorithm> pick(Comm& comm, std::size_t bytes, bool talk) {
    auto& memo = last_pick_[static_cast<std::size_t>(C)];  // calls repeat their sizes: answer those at once
    if (memo.first == bytes && memo.second != algorithm::automatic) return memo.second;
    const auto a = choose_without_memo<C>(comm, bytes, talk);
    if (a) memo = {bytes, *a};
    return a;
  }
  template <collective C, class Comm>
  std::optional<algorithm> choose_without_memo(Comm& comm, std::size_t bytes, bool talk) {
    const placement at = comm.placement_of(bytes, false);
    if (algo_ && offers(C, *algo_, at)) return *algo_;
    if (env_algo_ && offers(C, *env_algo_, at)) return *env_algo_;
    int offered = 0;
    algorithm first = algorithm::automatic;
    for (const auto& r : rows)
      if (r.what == C && r.offered(at) && offered++ == 0) first = r.id;
    if (offered <= 1 || comm.size() == 1 || bytes == 0) return first;
    if (by_model_) return by_model(comm, C, bytes, talk);
    return measured_choice<C>(comm, bytes, at, talk);
  }
  // The cost model's choice (loading the model needs messages).
  template <class Comm>
  std::optional<algorithm> by_model(Comm& comm, collective c, std::size_t bytes, bool talk) {
    if (!tuner_ && !talk) return std::nullopt;
    return model(comm).choose(c, bytes);
  }

  // automatic by measurement: the choice of the bin `bytes` falls in, from
  // this process's table (loaded once from the cache, the same on every
  // rank), else measured now on every rank.
  template <collective C, class Comm>
  std::optional<algorithm> measured_choice(Comm& comm, std::size_t bytes, const placement& at, bool talk) {
    const int bin = tuning_table::bin_of(bytes);
    if (!talk && (!tuning_ || tuning_->get(C, bin) == algorithm::automatic)) return std::nullopt;
    if (!tuning_) {
      tuning_ = std::make_unique<tuning_table>();
      load_tuning(comm.untraced_view(), *tuning_, fresh_);
    }
    algorithm a = tuning_->get(C, bin);
    if (a == algorithm::automatic && cached_only_) return by_model(comm, C, bytes, talk);  // measured ahead, or not at all
    if (a == algorithm::automatic) {
      a = measure<C>(comm, bin);
      tuning_->set(C, bin, a);
      save_tuning(comm.untraced_view(), *tuning_);
    }
    return offers(C, a, at) ? a : by_model(comm, C, bytes, talk);
  }

  // Times every algorithm offered at bin's size on this transport, with
  // buffers of its own (never the caller's), and returns the fastest. The
  // same calls on every rank: the numbers of repetitions come from times
  // every rank agrees on (the slowest rank's, by an all-reduce of max).
  template <collective C, class Comm>
  algorithm measure(Comm& comm, int bin) {
    // The measurements are not the program's calls: RINGTREE_TRACE leaves them out.
    measuring_ = true;
    struct done {
      bool& flag;
      ~done() { flag = false; }
    } untraced{measuring_};
    constexpr collective c = C;
    const std::size_t bytes = std::size_t{1} << bin;
    const placement at = comm.placement_of(bytes, false);
    const auto algos = offered(c, &at);
    if (algos.size() < 2) return algos.empty() ? algorithm::automatic : algos.front();
    const int n = comm.size();
    const std::size_t e = std::max<std::size_t>(1, bytes / sizeof(float));  // floats, as gradients are
    const std::size_t total = c == collective::reduce_scatter ? std::max<std::size_t>(e, n) : e;
    const std::size_t block = c == collective::reduce_scatter ? total / n : e;
    auto raw = comm.transport().memory();
    const std::size_t whole = std::max<std::size_t>(e, n) / n * n;  // all-to-all: one rank's input, n equal blocks
    auto a = raw.template scratch<float>(std::max({total, block * n, whole})),
         b = raw.template scratch<float>(c == collective::alltoall ? whole : block);
    if constexpr (memory_kind_of<typename Comm::transport_type>() == memory_kind::host) {  // zeros: sums stay finite, no denormals
      std::memset(static_cast<void*>(a.span().data()), 0, a.span().size_bytes());
      std::memset(static_cast<void*>(b.span().data()), 0, b.span().size_bytes());
    }
    auto x = a.span(), y = b.span();
    // The call's input and buffer (scatter and gather move blocks between
    // the two scratch buffers), then row `al` on them.
    std::span<const float> in;
    std::span<float> data = x.first(total);
    if constexpr (C == collective::scatter) in = x.first(block * n), data = y.first(block);
    else if constexpr (C == collective::gather) in = y.first(block), data = x.first(block * n);
    else if constexpr (C == collective::reduce_scatter || C == collective::allgather) data = x.first(block * n);
    else if constexpr (C == collective::alltoall) in = x.first(whole), data = y.first(whole);
    const std::vector<std::size_t> counts(n, whole / n);
    auto once = [&](algorithm al) {
      with_row_arguments<C>(in, data, op::sum, 0, std::span<const std::size_t>(counts),
                            [&](auto... args) { comm.template run<C>(al, args...); });
    };
    auto slowest = [&](std::vector<double>& v) {
      auto l = comm.untraced_view();
      ring::allreduce(l, std::span<double>(v), op::max, comm.chunks());
    };
    using clock = std::chrono::steady_clock;
    auto seconds = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
    const std::size_t k = algos.size();
    std::vector<double> warm(k);
    for (std::size_t i = 0; i < k; ++i) {  // the first call pays for connections and pages; the second is timed
      once(algos[i]);
      comm.template run<collective::barrier>(algorithm::dissemination);
      const auto t0 = clock::now();
      once(algos[i]);
      warm[i] = seconds(t0);
    }
    slowest(warm);
    // A sample is a batch of calls lasting about sample_s; rounds interleave
    // the algorithms so that a noisy moment hits all of them. Small sizes
    // get many rounds (their medians are what noise blurs most), large ones
    // at least 5, within about budget_s a bin.
    constexpr double sample_s = 1e-3, budget_s = 0.3;
    std::vector<int> batch(k);
    double round_s = 0;
    for (std::size_t i = 0; i < k; ++i) {
      batch[i] = static_cast<int>(std::clamp(sample_s / std::max(warm[i], 1e-9), 1.0, 1000.0));
      round_s += batch[i] * warm[i];
    }
    const int rounds = static_cast<int>(std::clamp(budget_s / std::max(round_s, 1e-9), 5.0, 25.0));
    std::vector<double> times(k * rounds);
    for (int r = 0; r < rounds; ++r)
      for (std::size_t i = 0; i < k; ++i) {
        // All ranks start a sample together; else a rank that left the last
        // one early times its wait for the others as this algorithm's cost
        // (with more ranks than cores, that wait is most of a sample).
        comm.template run<collective::barrier>(algorithm::dissemination);
        const auto t0 = clock::now();
        for (int j = 0; j < batch[i]; ++j) once(algos[i]);
        times[r * k + i] = seconds(t0) / batch[i];
      }
    slowest(times);  // a round of the collective takes as long as its slowest rank
    // Each algorithm's median over the rounds of its time relative to the
    // round's fastest: the algorithms of a round ran back to back, so a
    // noisy stretch (another process, on a shared machine) slows them
    // alike and cancels out, where plain medians of times let a few noisy
    // rounds of one algorithm decide (at 4-16 MiB in torch processes they
    // picked ring over two_shot, 1.4x slower, in some runs).
    std::vector<double> round_fastest(rounds), median(k);
    for (int r = 0; r < rounds; ++r) round_fastest[r] = std::max(*std::min_element(times.begin() + r * k, times.begin() + (r + 1) * k), 1e-12);
    for (std::size_t i = 0; i < k; ++i) {
      std::vector<double> mine;
      for (int r = 0; r < rounds; ++r) mine.push_back(times[r * k + i] / round_fastest[r]);
      std::nth_element(mine.begin(), mine.begin() + rounds / 2, mine.end());
      median[i] = mine[rounds / 2];
    }
    // Stable between neighbouring sizes: where the bin below or above was
    // measured already, its choice stays unless another is faster by more
    // than stable_ratio (a noisy moment put ring at 256 KiB between two
    // two_shot bins, where it ran at 0.7x MPI's own).
    constexpr double stable_ratio = 1.10;
    const double fastest_here = *std::min_element(median.begin(), median.end());
    for (int nb : {bin - 1, bin + 1}) {
      if (!tuning_ || nb < 0 || nb > tuning_table::max_bin) continue;
      const algorithm there = tuning_->get(C, nb);
      for (std::size_t i = 0; i < k; ++i)
        if (algos[i] == there && median[i] <= fastest_here * stable_ratio) return there;
    }
    // Medians within tie_ratio of the fastest are a tie as far as this
    // machine's noise can tell (5-10% between runs here); the cost model
    // (the same on every rank) breaks it, so that a tie goes to the
    // algorithm that scales (fewer steps, fewer bytes) rather than to noise.
    constexpr double tie_ratio = 1.05;
    const double fastest = *std::min_element(median.begin(), median.end());
    algorithm best = algorithm::automatic;
    double best_model = 0;
    for (std::size_t i = 0; i < k; ++i) {
      if (median[i] > fastest * tie_ratio) continue;
      const double m = model(comm).seconds(C, algos[i], bytes);
      if (best == algorithm::automatic || m < best_model) best = algos[i], best_model = m;
    }
    return best;
  }

 private:
  std::optional<algorithm> algo_;      // communicator_options::algo
  std::optional<algorithm> env_algo_;  // RINGTREE_ALGO
  std::optional<cost_model> model_;    // communicator_options::model
  bool by_model_ = false;              // choose by the model, never measure
  bool fresh_ = false;                 // RINGTREE_TUNE=fresh: ignore the cache
  bool cached_only_ = false;           // RINGTREE_TUNE=cached: never measure in the run
  bool measuring_ = false;             // measure() runs: nothing is traced
  std::optional<ringtree::tuner> tuner_;
  std::unique_ptr<tuning_table> tuning_;
  std::array<std::pair<std::size_t, algorithm>, std::size(all_collectives)> last_pick_{};  // per collective: bytes, pick
};

}  // namespace ringtree::detail
