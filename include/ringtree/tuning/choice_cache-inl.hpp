#pragma once
// choice_cache.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <ringtree/tuning/choice_cache.hpp>

namespace ringtree::detail {

RINGTREE_FUNC std::string tuning_path(const std::string& transport, int ranks, const config& cfg) {
  return cat(cfg.cache_dir, "/tuned-", transport, "-", ranks, "ranks.txt");
}

RINGTREE_FUNC loaded_files<measured_choices>& loaded_tunings() {
  static loaded_files<measured_choices> tables;
  return tables;
}

RINGTREE_FUNC std::optional<std::pair<std::string, int>> name_and_bin(const std::string& key) {
  std::istringstream ks(key);
  std::string name, rest;
  std::size_t bytes = 0;
  if (!(ks >> name >> bytes) || (ks >> rest) || !std::has_single_bit(bytes) || measured_choices::bin_of(bytes) != std::countr_zero(bytes))
    return std::nullopt;
  return std::pair{name, measured_choices::bin_of(bytes)};
}

RINGTREE_FUNC std::optional<measured_choices> parse_tuning(const std::string& text, const std::string& path, int rank) {
  measured_choices t;
  const bool here = read_choice_file(
      text,
      [&](const std::string& key, const std::string& value) {
        const auto nb = name_and_bin(key);
        const auto a = algorithm_from_string(value);
        bool known = false;
        for (collective c : all_collectives)
          if (nb && to_string(c) == nb->first && a && offers(c, *a)) t.set(c, nb->second, *a), known = true;
        return known;
      },
      [&](int no, const std::string& line) {
        return error("tuning", rank, cat(path, ":", no, ": expected 'cpu = ...', 'version = ...' or '<collective> <bytes> = <algorithm>', got '", line, "'"));
      });
  if (!here) return std::nullopt;
  return t;
}

}  // namespace ringtree::detail
