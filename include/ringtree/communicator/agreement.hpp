#pragma once
// Ranks stating values and comparing them: what checked mode does before
// a call, and what a communicator does once when it opens (its settings).
// Every rank states the same fields, each one word; the words are
// all-gathered, so every rank sees every value and raises the same error,
// naming the field and each rank's value.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <ringtree/algorithms/ring.hpp>
#include <ringtree/core/error.hpp>

namespace ringtree::detail {

// One field: its name, and how its word reads in a message.
struct stated_field {
  const char* name;
  std::string (*show)(std::uint64_t);
};
inline std::string show_number(std::uint64_t v) { return std::to_string(v); }

// Every rank's words (`mine`, as wide on every rank), rank r's at r * width.
template <transport T>
std::vector<std::uint64_t> gather_words(T& view, std::span<const std::uint64_t> mine) {
  const int n = view.size();
  std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(n));
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(mine.size() * view.rank()));
  if (n > 1) ring::allgather(view, std::span<std::uint64_t>(all));  // blocks are exactly `width` words each
  return all;
}

// "ranks 1, 3 differ from rank 0 in <field> (rank 0: a, rank 1: b, ...)"
// for the first of `fields` in which some rank differs from rank 0, or "".
// (Field: a name and a show, as stated_field has.)
template <class Field>
std::string first_difference(std::span<const std::uint64_t> all, int n, std::span<const Field> fields, std::size_t width) {
  for (std::size_t f = 0; f < fields.size(); ++f) {
    std::string differ;
    for (int r = 1; r < n; ++r)
      if (all[width * r + f] != all[f]) differ += cat(differ.empty() ? "" : ", ", r);
    if (differ.empty()) continue;
    std::string values;
    for (int r = 0; r < n; ++r) values += cat(r ? ", " : "", "rank ", r, ": ", fields[f].show(all[width * r + f]));
    return cat("ranks ", differ, " differ from rank 0 in ", fields[f].name, " (", values, ")");
  }
  return {};
}

// A 64-bit mix of a word (splitmix64's finaliser): digests of values that
// need not be shown whole (a cost model, an all-to-all's sizes).
constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// An all-to-all's pair: `elems` from rank `from` to rank `to`. Summed over
// what every rank sends, and over what every rank expects, the two totals
// agree when every pair does (and almost surely differ when one does not).
constexpr std::uint64_t pair_digest(int from, int to, std::size_t elems) noexcept {
  return mix(mix(std::uint64_t(std::uint32_t(from)) << 32 | std::uint32_t(to)) + elems);
}

}  // namespace ringtree::detail
