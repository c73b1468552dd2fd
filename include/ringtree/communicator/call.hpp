#pragma once
// One collective call as the communicator checks it: what was asked, the
// first problem found with the arguments, and, in checked mode, the
// exchange in which every rank compares what it was asked to do (call,
// count, type, op, root, symmetric buffer, the row it runs, whether its
// arguments were valid; an all-to-all's pairs) before any data moves.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <ringtree/core/compiled.hpp>
#include <ringtree/algorithms/table.hpp>
#include <ringtree/communicator/agreement.hpp>
#include <ringtree/core/dtype.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/memory/symmetric.hpp>

namespace ringtree::detail {

// per_rank * n, or nothing where it overflows: a size checked against a
// product must not pass by wrapping around.
constexpr std::optional<std::size_t> product_of(std::size_t per_rank, int n) noexcept {
  std::size_t p = 0;
  if (__builtin_mul_overflow(per_rank, static_cast<std::size_t>(n), &p)) return std::nullopt;
  return p;
}
// "n * m = p" (or "overflows") for the messages of those checks.
std::string product_text(int n, std::size_t per_rank);

// Whether two spans share a byte (in and out of one call must not,
// unless the call works in place).
template <class A, class B>
bool overlap(std::span<A> a, std::span<B> b) noexcept {
  auto pa = reinterpret_cast<std::uintptr_t>(a.data()), pb = reinterpret_cast<std::uintptr_t>(b.data());
  return !a.empty() && !b.empty() && pa < pb + b.size_bytes() && pb < pa + a.size_bytes();
}

// One collective call: what was asked, the algorithm picked, and the
// first problem found with the arguments.
struct collective_call {
  collective kind;
  std::size_t count;
  dtype type;
  op reduction;
  int root;
  algorithm algo;
  int rank;
  std::string problem;
  std::size_t bytes;  // what automatic is asked about
  std::optional<symmetric_heap::found> symmetric{};  // the call's span in symmetric memory, if it is there
  std::size_t symmetric_bytes = 0;                    // and its length
  std::optional<symmetric_heap::found> symmetric_in{};  // an out-of-place all-reduce's symmetric input
  std::span<const std::byte> private_in{};  // or its private input, where the algorithm streams (not copied first)
  // All-to-all: the elements this rank sends and receives per rank, and
  // digests of them that add up alike over all ranks when every pair agrees.
  std::span<const std::size_t> sends{}, recvs{};
  std::uint64_t pairs_sent = 0, pairs_expected = 0;
  template <class... A>
  void require(bool ok, const A&... why) {
    if (!ok && problem.empty()) problem = cat(why...);
  }
  // A span's size in bytes must fit in size_t (a span can claim more);
  // returns it (wrapped where it does not).
  template <class E>
  std::size_t require_fits(std::size_t elems) {
    std::size_t b = 0;
    require(!__builtin_mul_overflow(elems, sizeof(E), &b), elems, " elements of ", to_string(dtype_of<E>),
            " are more bytes than memory can hold");
    return b;
  }
  // The buffer `whole` (named so, `where` it is checked) holds n blocks
  // of `block` elements, and fits in memory: scatter, gather, reduce_scatter.
  template <class E>
  void require_blocks(const char* whole_name, std::size_t whole, const char* where, const char* block_name,
                      std::size_t block, int n) {
    if (product_of(block, n) != whole)  // (the text only then: it costs more than the whole of a small call)
      require(false, whole_name, ".size() = ", whole, where, " but size() * ", block_name, ".size() = ", product_text(n, block));
    require_fits<E>(whole);
  }
};

// What checked mode compares, field by field: one table, so that the
// words sent and the words explained cannot drift apart. The argument
// check comes last; then, beyond the fields, an all-to-all's pairs.
inline constexpr std::uint64_t requested_bit = 0x100;  // a row not resolved before the comparison
std::string show_algorithm(std::uint64_t v);
inline constexpr std::size_t argument_field = 7;
inline constexpr stated_field fields[] = {
    {"call", [](std::uint64_t v) { return std::string(to_string(collective(v))); }},
    {"count", show_number},
    {"element type", [](std::uint64_t v) { return std::string(to_string(dtype(v))); }},
    {"op", [](std::uint64_t v) { return std::string(to_string(op(v))); }},
    {"root", [](std::uint64_t v) { return std::to_string(std::int64_t(v)); }},
    {"symmetric buffer", [](std::uint64_t v) { return v == 0 ? std::string("none (private memory)") : cat("number ", v); }},
    {"algorithm", show_algorithm},
    {"argument check", show_number},
};
// c's words, in the order of `fields`, then its pairs (all-to-all).
std::vector<std::uint64_t> words_of(const collective_call& c, std::optional<algorithm> row);

// Which pair of an all-to-all disagrees (every rank calls it: the digests
// differed on all): each rank's sends and receives, gathered.
template <class View>
std::string unpaired(View& l, const collective_call& c) {
  const int n = l.size();
  std::vector<std::uint64_t> mine(c.sends.begin(), c.sends.end());
  mine.insert(mine.end(), c.recvs.begin(), c.recvs.end());
  const auto all = gather_words(l, std::span<const std::uint64_t>(mine));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (const auto sent = all[2 * n * i + j], expected = all[2 * n * j + n + i]; sent != expected)
        return cat("rank ", i, " sends rank ", j, " ", sent, " elements but rank ", j, " receives ", expected,
                           " from it (all-to-all: sends[j] on rank i must be recvs[i] on rank j)");
  return "the all-to-all's sizes do not pair up";
}

// Checked mode's exchange: every rank's words for call c (and the row it
// will run, where known), compared; a difference raises on every rank.
template <class View>
void compare_calls(View& l, const collective_call& c, const std::string& name, std::optional<algorithm> row) {
  const auto mine = words_of(c, row);
  const std::size_t w = mine.size();
  const auto all = gather_words(l, std::span<const std::uint64_t>(mine));
  std::string invalid;
  for (int r = 0; r < l.size(); ++r)
    if (all[w * r + argument_field] != 0) invalid += (invalid.empty() ? "" : ", ") + std::to_string(r);
  if (!invalid.empty()) {
    if (!c.problem.empty()) throw error(name, l.rank(), c.problem + " (checked mode: ranks " + invalid + " raise)");
    throw error(name, l.rank(), "checked mode: ranks " + invalid + " passed invalid arguments to this call");
  }
  if (auto d = first_difference(all, l.size(), std::span(fields, argument_field), w); !d.empty())
    throw error(name, l.rank(), "checked mode: " + d);
  // All-to-all: what each rank sends each other must be what that one
  // expects; two digests say whether all pairs match (words_of).
  std::uint64_t sent = 0, expected = 0;
  for (int r = 0; r < l.size(); ++r) sent += all[w * r + argument_field + 1], expected += all[w * r + argument_field + 2];
  if (sent != expected) throw error(name, l.rank(), "checked mode: " + unpaired(l, c));
}
}  // namespace ringtree::detail

#if RINGTREE_DEFINES
#include <ringtree/communicator/call-inl.hpp>
#endif
