#pragma once
// settings.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <ringtree/communicator/settings.hpp>

namespace ringtree::detail {

RINGTREE_FUNC std::uint64_t algorithm_word(std::optional<algorithm> a) { return a ? std::uint64_t(*a) : no_value; }

RINGTREE_FUNC std::string show_algorithm_or_none(std::uint64_t v) { return v == no_value ? "none" : std::string(to_string(algorithm(v))); }

RINGTREE_FUNC std::string show_on(std::uint64_t v) { return v ? "on" : "off"; }

RINGTREE_FUNC std::string show_double(std::uint64_t v) { return v == no_value ? "none" : cat(std::bit_cast<double>(v)); }

RINGTREE_FUNC algorithm other_than(std::optional<algorithm> a) { return a == algorithm::ring ? algorithm::tree : algorithm::ring; }

RINGTREE_FUNC void every_field_weighed(const communicator_options& o, const chunk_sizes& c, const cost_model& m) {
  [[maybe_unused]] const auto& [checked, algo, chunks, model, tune, p2p_only] = o;
  [[maybe_unused]] const auto& [ring, tree, chain, direct, stream] = c;
  [[maybe_unused]] const auto& [alpha, beta, gamma, knee, alpha_above, alpha_net, beta_net, source] = m;
}

}  // namespace ringtree::detail
