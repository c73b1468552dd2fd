#pragma once
// The choice cache: what algorithm::automatic picked in each size bin, by
// measurement (measured_choices), and the file that keeps it between runs
// (load_tuning / save_tuning), valid for one CPU and one version. Apart
// from the cost model's file because it is another file with other rules:
// measured choices, not constants, and thrown away rather than trusted
// when the machine or ringtree changed.
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include <ringtree/core/compiled.hpp>
#include <ringtree/algorithms/tree.hpp>
#include <ringtree/core/config.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/tuning/cache_files.hpp>
#include <ringtree/tuning/cost_model.hpp>

namespace ringtree {
namespace detail {

// What automatic picked in each size bin, by measurement (communicator.hpp
// measures; this keeps the choices). Bin b holds the sizes in
// (2^(b-1), 2^b] bytes and is measured at 2^b; calls above 2^max_bin
// (64 MiB) use that bin's choice. algorithm::automatic: not measured yet.
struct measured_choices {
  static constexpr int max_bin = 26;
  static constexpr std::size_t collectives = std::size(all_collectives);
  static int bin_of(std::size_t bytes) noexcept {
    return bytes <= 1 ? 0 : std::min(static_cast<int>(std::bit_width(bytes - 1)), max_bin);
  }
  std::array<std::uint8_t, collectives*(max_bin + 1)> pick{};  // algorithm values
  algorithm get(collective c, int bin) const noexcept { return algorithm(pick[std::size_t(c) * (max_bin + 1) + bin]); }
  void set(collective c, int bin, algorithm a) noexcept { pick[std::size_t(c) * (max_bin + 1) + bin] = std::uint8_t(a); }
};

}  // namespace detail

// The largest size automatic measures (its last bin); larger calls use
// that bin's choice. comm.tune() measures up to it by default.
inline constexpr std::size_t largest_measured_bytes = std::size_t{1} << detail::measured_choices::max_bin;

namespace detail {

// The cache of choices: one file per transport and rank count, valid for
// one CPU model and one version of ringtree (a newer version may have
// other algorithms, or faster ones).
std::string tuning_path(const std::string& transport, int ranks, const config& cfg);
loaded_files<measured_choices>& loaded_tunings();

// The entries of a choice file (the choice cache, libringtree-mpi's
// routes): '#' starts a comment, blank lines are skipped, every other line
// is "key = value" (both trimmed). The "cpu" and "version" lines say where
// the file was made; each other line goes to entry(key, value), which
// returns false where it does not parse. A line without '=', or one that
// entry refuses, raises bad(line number, line): never silently ignored.
// True if the file was made on this CPU by this version.
template <class Entry, class Bad>
bool read_choice_file(const std::string& text, Entry&& entry, Bad&& bad) {
  std::string cpu, ver, line;
  std::istringstream in(text);
  auto trim = [](std::string x) {
    x.erase(0, x.find_first_not_of(" \t\r"));
    x.erase(x.find_last_not_of(" \t\r") + 1);
    return x;
  };
  for (int no = 1; std::getline(in, line); ++no) {
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) throw bad(no, line);
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (key == "cpu") cpu = value;
    else if (key == "version") ver = value;
    else if (!entry(key, value)) throw bad(no, line);
  }
  return cpu == cpu_model() && ver == version_string;
}
// A key "<name> <bytes>" of a choice file, with bytes a size bin's (a power
// of two up to 2^max_bin): the name and the bin.
std::optional<std::pair<std::string, int>> name_and_bin(const std::string& key);

// The table in a cache file's text, or nothing if it was made on another
// CPU or by another version. Lines: "cpu = ...", "version = ...",
// "<collective> <bytes> = <algorithm>".
std::optional<measured_choices> parse_tuning(const std::string& text, const std::string& path, int rank);

// Every rank calls this: rank 0 finds the table (this process's, or the
// cache file's unless `fresh`) and every rank ends with rank 0's.
template <transport T>
void load_tuning(T t, measured_choices& table, bool fresh, const config& cfg) {
  const std::string path = tuning_path(cache_name(t), t.size(), cfg);
  std::uint8_t state = 0;  // 1: rank 0 failed
  std::optional<error> failed;
  if (t.rank() == 0) {
    std::lock_guard lk(loaded_models_mutex());
    try {
      if (const measured_choices* done = fresh ? nullptr : loaded_tunings().find(path)) table = *done;
      else if (!fresh)
        if (auto text = read_text_file(path, "tuning", "tuning", 0))
          if (auto found = parse_tuning(*text, path, 0)) table = *found;
    } catch (const error& e) {
      failed = e;
      state = 1;
    }
  }
  std::array<std::uint8_t, sizeof(table.pick) + 1> msg{};
  std::copy(table.pick.begin(), table.pick.end(), msg.begin());
  msg.back() = state;
  if (t.size() > 1) tree::binomial_broadcast(t, std::span<std::uint8_t>(msg), 0);
  if (failed) throw *failed;
  if (msg.back() != 0) throw error("tuning", t.rank(), cat("rank 0 could not read ", path));
  std::copy(msg.begin(), msg.end() - 1, table.pick.begin());
}

// Rank 0 keeps the table for this process and writes the cache file.
template <transport T>
void save_tuning(T t, const measured_choices& table, const config& cfg) {
  if (t.rank() != 0) return;
  const std::string name = cache_name(t), path = tuning_path(name, t.size(), cfg);
  std::string text = cat("# ringtree: what automatic runs, measured on this transport (", name, ", ", t.size(), " ranks), ",
                         measured_stamp(), "\n# delete this file (or RINGTREE_TUNE=fresh) to measure again\ncpu = ", cpu_model(),
                         "\nversion = ", version_string, "\n");
  for (collective c : all_collectives)
    for (int b = 0; b <= measured_choices::max_bin; ++b)
      if (table.get(c, b) != algorithm::automatic) text += cat(to_string(c), " ", std::size_t{1} << b, " = ", to_string(table.get(c, b)), "\n");
  std::lock_guard lk(loaded_models_mutex());
  loaded_tunings().put(path, table);
  write_text_file(path, text);
}

}  // namespace detail
}  // namespace ringtree

#if RINGTREE_DEFINES
#include <ringtree/tuning/choice_cache-inl.hpp>
#endif
