#pragma once
// chooser.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <ringtree/communicator/chooser.hpp>

namespace ringtree::detail {

RINGTREE_FUNC algorithm_per_collective env_algorithms(const std::string& spec) {
  auto fail = [](const std::string& why) { return error("RINGTREE_ALGO", -1, why); };
  auto algorithm_named = [&](std::string_view n) -> std::optional<algorithm> {
    if (n.empty() || n == "automatic") return std::nullopt;
    if (auto a = algorithm_from_string(n)) return a;
    throw fail(cat("unknown algorithm '", n, "' (one of: ", algorithm_names_list(), ")"));
  };
  algorithm_per_collective out{};
  if (spec.find(':') == std::string::npos) {
    out.fill(algorithm_named(spec));
    return out;
  }
  std::string_view rest = spec;
  while (!rest.empty()) {
    const auto end = rest.find(';');
    const std::string_view item = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    if (item.empty()) continue;
    const auto colon = item.find(':');
    if (colon == std::string_view::npos)
      throw fail(cat("'", item, "' in '", spec, "' names no collective (write collective:algorithm, e.g. allreduce:ring)"));
    const std::string_view c_name = item.substr(0, colon), a_name = item.substr(colon + 1);
    const auto* c = std::find_if(std::begin(all_collectives), std::end(all_collectives),
                                 [&](collective x) { return to_string(x) == c_name; });
    if (c == std::end(all_collectives)) {
      std::string names;
      for (collective x : all_collectives) names += (names.empty() ? "" : ", ") + std::string(to_string(x));
      throw fail(cat("unknown collective '", c_name, "' in '", spec, "' (one of: ", names, ")"));
    }
    auto& slot = out[static_cast<std::size_t>(*c)];
    if (slot) throw fail(cat("'", c_name, "' is named twice in '", spec, "'"));
    slot = algorithm_named(a_name);
    if (slot && !offers(*c, *slot))
      throw fail(cat(c_name, " has no algorithm '", a_name, "' (its algorithms: ", offered_names(*c), ")"));
  }
  return out;
}

RINGTREE_FUNC std::uint64_t env_algorithms_word(const algorithm_per_collective& a) {
  std::uint64_t w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w |= std::uint64_t(a[i] ? static_cast<unsigned>(*a[i]) & 63u : 63u) << (6 * i);
  return w;
}

RINGTREE_FUNC std::string show_env_algorithms(std::uint64_t w) {
  std::string s;
  for (std::size_t i = 0; i < std::size(all_collectives); ++i)
    if (const auto v = (w >> (6 * i)) & 63u; v != 63u)
      s += cat(s.empty() ? "" : ";", to_string(all_collectives[i]), ":", to_string(algorithm(v)));
  return s.empty() ? "none" : s;
}

}  // namespace ringtree::detail
