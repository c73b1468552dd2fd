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
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <ringtree/core/compiled.hpp>
#include <ringtree/algorithms/table.hpp>
#include <ringtree/core/config.hpp>
#include <ringtree/tuning/calibration.hpp>
#include <ringtree/tuning/cost_model.hpp>
#include <ringtree/tuning/measure.hpp>

namespace ringtree::detail {

// RINGTREE_ALGO, per collective: one algorithm for every collective that
// offers it ("ring"), or one per collective, as NCCL_ALGO takes them
// ("allreduce:ring;broadcast:tree"; a collective not named keeps
// automatic). "" and "automatic": none. An unknown name, an unknown
// collective, a collective named twice, or a collective given an algorithm
// it does not have is an error naming what is wrong and what would do.
using algorithm_per_collective = std::array<std::optional<algorithm>, std::size(all_collectives)>;
algorithm_per_collective env_algorithms(const std::string& spec);

static_assert(std::size(all_collectives) * 6 <= 64 && [] {
  for (const auto& r : rows)
    if (static_cast<unsigned>(r.id) >= 63) return false;
  return true;
}(), "RINGTREE_ALGO's word holds 6 bits a collective");
// The choices as one word (6 bits a collective, 63: none), so that the
// ranks can compare them (communicator/settings.hpp), and back in words.
std::uint64_t env_algorithms_word(const algorithm_per_collective& a);
std::string show_env_algorithms(std::uint64_t w);

// The communicator (Comm) lends the chooser its placement, its untraced
// transport and its rows (the chooser is its friend).
class chooser {
 public:
  chooser() = default;
  // `cfg`: the environment as the communicator read it when it opened
  // (with the options' tune applied); nothing here reads it again.
  chooser(std::optional<algorithm> algo, const config& cfg, std::optional<cost_model> model)
      : algo_(algo), env_algo_(env_algorithms(cfg.algo)), model_(std::move(model)),
        by_model_(model_.has_value() || cfg.tune == config::tuning::model), fresh_(cfg.tune == config::tuning::fresh),
        cached_only_(cfg.tune == config::tuning::cached), cfg_(cfg) {}

  // RINGTREE_ALGO's algorithm for c, if it names one.
  std::optional<algorithm> env_algo(collective c) const noexcept { return env_algo_[static_cast<std::size_t>(c)]; }
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
      tuner_.emplace(comm.size(), model_ ? *model_ : load_or_calibrate(l, cfg_), comm.chunks(), memory_kind_of<T>(), hosts);
    }
    return *tuner_;
  }

  // What automatic runs for C on `bytes` of symmetric memory: a direct row
  // (the user's RINGTREE_ALGO or option first, where offered there).
  // All-reduce: one-shot reads n-1 whole buffers with two synchronisations,
  // two-shot 2(n-1)/n of one with three; one-shot wins while the buffers
  // are small (bench/RESULTS.md, "Zero copies within a host").
  static constexpr std::size_t one_shot_direct_bytes = std::size_t{512} << 10;  // read from all peers together
  template <collective C, class Comm>
  std::optional<algorithm> pick_direct(Comm& comm, std::size_t bytes, bool talk) {
    const placement at = comm.placement_of(bytes, true);
    if (algo_ && offers(C, *algo_, at)) return *algo_;
    if (const auto e = env_algo(C); e && offers(C, *e, at)) return *e;
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
    if (const auto e = env_algo(C); e && offers(C, *e, at)) return *e;
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
    const int bin = measured_choices::bin_of(bytes);
    if (!talk && (!tuning_ || tuning_->get(C, bin) == algorithm::automatic)) return std::nullopt;
    if (!tuning_) {
      tuning_ = std::make_unique<measured_choices>();
      load_tuning(comm.untraced_view(), *tuning_, fresh_, cfg_);
    }
    algorithm a = tuning_->get(C, bin);
    if (a == algorithm::automatic && cached_only_) return by_model(comm, C, bytes, talk);  // measured ahead, or not at all
    if (a == algorithm::automatic) {
      a = measure<C>(comm, bin);
      tuning_->set(C, bin, a);
      save_tuning(comm.untraced_view(), *tuning_, cfg_);
    }
    return offers(C, a, at) ? a : by_model(comm, C, bytes, talk);
  }

  // Times every algorithm offered at bin's size on this transport
  // (tuning/measure.hpp) and returns the fastest, the same on every rank.
  template <collective C, class Comm>
  algorithm measure(Comm& comm, int bin) {
    // The measurements are not the program's calls: RINGTREE_TRACE leaves them out.
    measuring_ = true;
    struct done {
      bool& flag;
      ~done() { flag = false; }
    } untraced{measuring_};
    const std::size_t bytes = std::size_t{1} << bin;
    const placement at = comm.placement_of(bytes, false);
    const auto algos = offered(C, &at);
    if (algos.size() < 2) return algos.empty() ? algorithm::automatic : algos.front();
    measured_comm<Comm> rows{comm};
    const auto median = measured_medians<C>(rows, algos, bytes);
    if (auto kept = neighbours_choice(tuning_.get(), C, bin, algos, median)) return *kept;
    return fastest_or_model(algos, median, [&](algorithm a) { return model(comm).seconds(C, a, bytes); });
  }

 private:
  // The communicator as measuring sees it (tuning/measure.hpp): a member
  // of the chooser, so that it may run rows as the chooser does.
  template <class Comm>
  struct measured_comm {
    Comm& c;
    int size() const noexcept { return c.size(); }
    auto& transport() { return c.transport(); }
    auto untraced_view() { return c.untraced_view(); }
    const chunk_sizes& chunks() const noexcept { return c.chunks(); }
    template <collective K, class... A>
    void run(algorithm a, A... args) {
      c.template run<K>(a, args...);
    }
  };

  std::optional<algorithm> algo_;      // communicator_options::algo
  algorithm_per_collective env_algo_{};  // RINGTREE_ALGO
  std::optional<cost_model> model_;    // communicator_options::model
  bool by_model_ = false;              // choose by the model, never measure
  bool fresh_ = false;                 // RINGTREE_TUNE=fresh: ignore the cache
  bool cached_only_ = false;           // RINGTREE_TUNE=cached: never measure in the run
  bool measuring_ = false;             // measure() runs: nothing is traced
  config cfg_;                         // the environment, read once when the communicator opened
  std::optional<ringtree::tuner> tuner_;
  std::unique_ptr<measured_choices> tuning_;
  std::array<std::pair<std::size_t, algorithm>, std::size(all_collectives)> last_pick_{};  // per collective: bytes, pick
};

}  // namespace ringtree::detail

#if RINGTREE_DEFINES
#include <ringtree/communicator/chooser-inl.hpp>
#endif
