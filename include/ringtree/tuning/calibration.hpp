#pragma once
// Calibration: measure the cost model's constants on the transport in use.
// The file they are kept in is tuning/model_file.hpp; the cache of measured
// choices, tuning/choice_cache.hpp (both included here, for the callers
// that include this header for them).
//
//   a ping-pong sweep between ranks 0 and 1, both directions at once as
//   the algorithms exchange, 8 bytes to 1 MiB:
//     alpha  the time of the 8-byte exchange: one step;
//     beta   the slope between 256 KiB and 1 MiB: time per byte;
//     knee   the size after which the time jumps by more than beta
//            explains (a protocol switch), and alpha_above that jump;
//   gamma  the same exchanges of 64 KiB, 256 KiB and 1 MiB followed by a
//          float sum of what arrived, as the algorithms reduce it: the
//          extra time per byte (the median of the three), and never less
//          than the sum alone takes. Summing data that
//          just arrived costs more than a sum in a warm loop would show
//          (3-4x more with Open MPI's single-copy receives here).
// Medians of several batches, so one noisy batch does not decide; well
// under a second. Rank 0's figures are broadcast, so every rank holds the
// same constants and picks the same algorithm.
//
// RINGTREE_CALIBRATE=1 measures again (and rewrites the file); =0 never
// measures (the file if there is one, else the built-in constants).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <ringtree/algorithms/tree.hpp>
#include <ringtree/core/config.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/tuning/cache_files.hpp>
#include <ringtree/tuning/choice_cache.hpp>
#include <ringtree/tuning/cost_model.hpp>
#include <ringtree/tuning/model_file.hpp>

namespace ringtree {
namespace detail {

// Seconds of `body`, the median of `batches` batches of `reps` calls.
template <class F>
double median_seconds(int batches, int reps, F body) {
  std::vector<double> t;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) body();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

// Measure alpha, beta, gamma between ranks a and b (every rank calls
// this); a's figures {alpha, beta, gamma, knee, alpha_above} reach every rank.
template <transport T>
std::array<double, 5> calibrate_pair(T& t, int a, int b) {
  auto mem = t.memory();
  constexpr int lo = 3, hi = 20;  // exchanges of 2^lo .. 2^hi bytes
  const std::size_t big = std::size_t{1} << hi;
  std::array<double, 5> figures{};
  if (t.rank() == a || t.rank() == b) {
    const int peer = t.rank() == a ? b : a;
    auto out = mem.template scratch<std::byte>(big), in = mem.template scratch<std::byte>(big);
    auto exchange = [&](std::size_t bytes) {
      detail::sendrecv(t, peer, std::span<const std::byte>(out.span().first(bytes)), peer, in.span().first(bytes));
    };
    for (int i = 0; i < 50; ++i) exchange(8);  // warm up: connections, pages, caches
    exchange(big);
    double time[hi + 1] = {};
    for (int k = lo; k <= hi; ++k) {
      const std::size_t s = std::size_t{1} << k;
      time[k] = median_seconds(5, s <= (std::size_t{64} << 10) ? 20 : 4, [&] { exchange(s); });
    }
    const double beta = std::max(0.0, (time[hi] - time[hi - 2]) / double(big - (big >> 2)));
    // The protocol switch: the doubling whose time grows most beyond beta's
    // share, if that is more than half a step (less is noise).
    double knee = 0, jump = 0;
    for (int k = lo; k < hi - 2; ++k)
      if (const double excess = time[k + 1] - time[k] - beta * double(std::size_t{1} << k); excess > jump)
        jump = excess, knee = double(std::size_t{1} << k);
    if (jump < 0.5 * time[lo]) knee = 0, jump = 0;
    double gamma[3];
    for (int k : {16, 18, 20}) {
      const std::size_t s = std::size_t{1} << k, e = s / sizeof(float);
      auto acc = mem.template scratch<float>(e), got = mem.template scratch<float>(e);
      const auto* a = reinterpret_cast<const std::byte*>(acc.span().data());
      auto exchange_reduce = [&] {
        detail::sendrecv(t, peer, std::span<const std::byte>(a, s), peer, std::as_writable_bytes(got.span()));
        mem.reduce(op::sum, acc.span(), std::span<const float>(got.span()));
      };
      exchange_reduce();
      // The reduction alone is a floor: on a busy machine the difference of
      // two noisy medians can come out at nothing, and a sum is never free.
      const double alone = median_seconds(5, k < 20 ? 10 : 4, [&] {
        mem.reduce(op::sum, acc.span(), std::span<const float>(got.span()));
      });
      gamma[(k - 16) / 2] = std::max(alone, median_seconds(5, k < 20 ? 10 : 4, exchange_reduce) - time[k]) / double(s);
    }
    std::sort(gamma, gamma + 3);
    figures[0] = time[lo];
    figures[1] = beta;
    figures[2] = gamma[1];
    figures[3] = knee;
    figures[4] = jump;
  }
  tree::binomial_broadcast(t, std::span<double>(figures), a);
  return figures;
}

// Measure the model's constants (every rank calls this): between ranks 0
// and 1; on ranks that span hosts, within rank 0's host (if it has two
// ranks) and between the first ranks of hosts 0 and 1, for the network's.
template <transport T>
cost_model calibrate(T& t) {
  cost_model m;
  m.source = "measured";
  if (t.size() == 1) return m;
  auto take = [&m](const std::array<double, 5>& f) {
    m.alpha = f[0], m.beta = f[1], m.gamma = f[2], m.knee = f[3], m.alpha_above = f[4];
  };
  if constexpr (hierarchical_transport<T>) {
    if (const auto& l = t.layout(); l.hosts() > 1) {
      const auto net = calibrate_pair(t, l.members(0)[0], l.members(1)[0]);
      take(net);  // the local constants too, unless rank 0's host has a pair to measure them
      m.alpha_net = net[0], m.beta_net = net[1];
      if (l.members(0).size() > 1) take(calibrate_pair(t, l.members(0)[0], l.members(0)[1]));
      return m;
    }
  }
  take(calibrate_pair(t, 0, 1));
  return m;
}

// The model for this communicator (every rank calls this, collectively):
// rank 0 finds it (already loaded, or in the file) or asks everyone to
// measure, and every rank ends with rank 0's constants. `cfg`: the
// environment as the communicator read it when it opened.
template <transport T>
cost_model load_or_calibrate(T& t, const config& cfg) {
  const std::string name = cache_name(t), path = model_path(name, t.size(), cfg);
  const auto cal = cfg.calibrate;
  const std::string mode = !cal ? "" : *cal ? "1" : "0";
  // {state, alpha, beta, gamma, knee, alpha_above, alpha_net, beta_net};
  // state 1: found, 0: measure, 2: use the built-in constants, -1: rank 0
  // failed to read the file.
  double msg[8] = {0, 0, 0, 0, 0, 0, -1, -1};
  std::optional<error> failed;
  cost_model m;
  if (t.rank() == 0) {
    std::lock_guard lk(loaded_models_mutex());
    try {
      std::optional<cost_model> found;  // RINGTREE_CALIBRATE=1: measured once per process
      if (const cost_model* done = loaded_models().find(path)) found = *done;
      else if (mode != "1") found = read_model(path, 0);
      if (found) {
        msg[0] = 1, msg[1] = found->alpha, msg[2] = found->beta, msg[3] = found->gamma;
        msg[4] = found->knee, msg[5] = found->alpha_above, msg[6] = found->alpha_net, msg[7] = found->beta_net;
        m.source = found->source;
      }
      else if (mode == "0") msg[0] = 2;
    } catch (const error& e) {
      failed = e;
      msg[0] = -1;
    }
  }
  if (t.size() > 1) tree::binomial_broadcast(t, std::span<double>(msg), 0);
  if (failed) throw *failed;
  if (msg[0] < 0) throw error("cost model", t.rank(), cat("rank 0 could not read ", path));
  if (msg[0] == 2) return cost_model{};
  if (msg[0] == 1) {
    m.alpha = msg[1], m.beta = msg[2], m.gamma = msg[3], m.knee = msg[4], m.alpha_above = msg[5];
    m.alpha_net = msg[6], m.beta_net = msg[7];
    if (t.rank() != 0) m.source = path + " (rank 0's)";
  } else {
    m = calibrate(t);
    if (t.rank() == 0) {
      write_model(path, m, name, t.size());
      m.source = "measured, saved in " + path;
    }
  }
  if (t.rank() == 0) {
    std::lock_guard lk(loaded_models_mutex());
    loaded_models().put(path, m);
  }
  return m;
}

}  // namespace detail
}  // namespace ringtree
