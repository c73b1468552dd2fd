#pragma once
// The settings that decide what runs, in one table. Every rank must open a
// communicator with the same ones: ranks that resolve one call to
// different rows (or that compare calls while others do not) would
// exchange wrong bytes. The communicator states each entry's word once,
// when it opens (agree_on_settings); the tests vary each entry on one rank
// (tests/host/test_agreement.cpp), so an entry that a word leaves out fails
// there, and a field added to the options fails to compile here until it
// is weighed.
#include <bit>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <ringtree/communicator/agreement.hpp>
#include <ringtree/communicator/chooser.hpp>
#include <ringtree/communicator/options.hpp>
#include <ringtree/core/config.hpp>

namespace ringtree::detail {

// What one rank opened a communicator with: its options, the environment
// (config, with the options' tune applied) and whether it traces.
struct opened_settings {
  communicator_options opt;
  config cfg;
  bool traced = false;
};

struct decisive_setting {
  const char* name;
  std::uint64_t (*word)(const opened_settings&);
  std::string (*show)(std::uint64_t);
  void (*vary)(opened_settings&);  // one change that makes this word, and no other, differ (for the tests)
};

inline constexpr std::uint64_t no_value = ~std::uint64_t{0};

inline std::uint64_t algorithm_word(std::optional<algorithm> a) { return a ? std::uint64_t(*a) : no_value; }
inline std::string show_algorithm_or_none(std::uint64_t v) { return v == no_value ? "none" : std::string(to_string(algorithm(v))); }
inline std::string show_on(std::uint64_t v) { return v ? "on" : "off"; }
inline std::string show_double(std::uint64_t v) { return v == no_value ? "none" : cat(std::bit_cast<double>(v)); }
inline algorithm other_than(std::optional<algorithm> a) { return a == algorithm::ring ? algorithm::tree : algorithm::ring; }

// A chunk size: its word and a change to it.
template <std::size_t chunk_sizes::*F>
decisive_setting chunk_setting(const char* name) {
  return {name, [](const opened_settings& s) -> std::uint64_t { return s.opt.chunks.*F; }, show_number,
          [](opened_settings& s) { s.opt.chunks.*F += 4096; }};
}
// A cost model constant: its bits, or none where no model was given.
template <double cost_model::*F>
decisive_setting model_setting(const char* name) {
  return {name, [](const opened_settings& s) { return s.opt.model ? std::bit_cast<std::uint64_t>(*s.opt.model.*F) : no_value; },
          show_double, [](opened_settings& s) {
            if (!s.opt.model) s.opt.model = cost_model{};
            *s.opt.model.*F = *s.opt.model.*F * 2 + 1e-6;
          }};
}

inline const decisive_setting decisive_settings[] = {
    {"checked mode (communicator_options::checked, RINGTREE_CHECK)",
     [](const opened_settings& s) -> std::uint64_t { return s.opt.checked; }, show_on,
     [](opened_settings& s) { s.opt.checked = !s.opt.checked; }},
    {"communicator_options::algo", [](const opened_settings& s) { return algorithm_word(s.opt.algo); }, show_algorithm_or_none,
     [](opened_settings& s) { s.opt.algo = other_than(s.opt.algo); }},
    {"RINGTREE_ALGO", [](const opened_settings& s) { return env_algorithms_word(env_algorithms(s.cfg.algo)); },
     show_env_algorithms, [](opened_settings& s) { s.cfg.algo = s.cfg.algo == "ring" ? "tree" : "ring"; }},
    chunk_setting<&chunk_sizes::ring_chunk_bytes>("chunks.ring_chunk_bytes"),
    chunk_setting<&chunk_sizes::tree_chunk_bytes>("chunks.tree_chunk_bytes"),
    chunk_setting<&chunk_sizes::chain_chunk_bytes>("chunks.chain_chunk_bytes"),
    chunk_setting<&chunk_sizes::direct_chunk_bytes>("chunks.direct_chunk_bytes"),
    chunk_setting<&chunk_sizes::stream_bytes>("chunks.stream_bytes"),
    {"RINGTREE_TUNE (or communicator_options::tune)", [](const opened_settings& s) { return std::uint64_t(s.cfg.tune); },
     [](std::uint64_t v) { return std::string(v == 0 ? "1 (measure)" : v == 1 ? "0 (cost model)" : v == 2 ? "fresh" : "cached"); },
     [](opened_settings& s) { s.cfg.tune = s.cfg.tune == config::tuning::model ? config::tuning::cached : config::tuning::model; }},
    model_setting<&cost_model::alpha>("communicator_options::model.alpha"),
    model_setting<&cost_model::beta>("communicator_options::model.beta"),
    model_setting<&cost_model::gamma>("communicator_options::model.gamma"),
    model_setting<&cost_model::knee>("communicator_options::model.knee"),
    model_setting<&cost_model::alpha_above>("communicator_options::model.alpha_above"),
    model_setting<&cost_model::alpha_net>("communicator_options::model.alpha_net"),
    model_setting<&cost_model::beta_net>("communicator_options::model.beta_net"),
    {"tracing (RINGTREE_TRACE: traced calls move messages where others share memory)",
     [](const opened_settings& s) -> std::uint64_t { return s.traced; }, show_on, [](opened_settings& s) { s.traced = !s.traced; }},
    {"communicator_options::point_to_point_only", [](const opened_settings& s) -> std::uint64_t { return s.opt.point_to_point_only; },
     show_on, [](opened_settings& s) { s.opt.point_to_point_only = !s.opt.point_to_point_only; }},
};

// Every field of the options is weighed: a new one stops the build here
// (the bindings no longer match) until it is in the table above, or
// argued out of it. Out of it: the model's `source` (a name, not a
// number), config's timeout and paths (they decide when and where, not
// what runs), calibrate (how the model is measured, not which is used).
inline void every_field_weighed(const communicator_options& o, const chunk_sizes& c, const cost_model& m) {
  [[maybe_unused]] const auto& [checked, algo, chunks, model, tune, p2p_only] = o;
  [[maybe_unused]] const auto& [ring, tree, chain, direct, stream] = c;
  [[maybe_unused]] const auto& [alpha, beta, gamma, knee, alpha_above, alpha_net, beta_net, source] = m;
}
// 4 of the options themselves (chunks and model are opened up), 5 chunk
// sizes, 7 of the model's constants, and 2 from the environment alone
// (RINGTREE_ALGO, tracing).
static_assert(std::size(decisive_settings) == 4 + 5 + 7 + 2);

// Every rank states every entry's word; all raise alike where one differs.
template <transport T>
void agree_on_settings(T& view, int rank, const opened_settings& s) {
  std::vector<std::uint64_t> mine;
  for (const auto& f : decisive_settings) mine.push_back(f.word(s));
  const auto all = gather_words(view, std::span<const std::uint64_t>(mine));
  if (auto d = first_difference(all, view.size(), std::span<const decisive_setting>(decisive_settings), mine.size()); !d.empty())
    throw error("communicator", rank, cat("the ranks opened it with different settings, so they could run different ",
                                          "algorithms on one call: ", d, ". Give every rank the same options and RINGTREE_* variables"));
}

}  // namespace ringtree::detail
