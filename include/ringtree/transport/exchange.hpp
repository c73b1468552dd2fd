#pragma once
// The exchanges that set-up steps are made of (mapping memory, splitting,
// agreeing that a step worked), written against the transport concept
// alone, so that every transport and the communicator share them.
#include <sched.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include <ringtree/core/error.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree::detail {

// Every rank sends `mine` to every other and receives theirs into `all`
// (rank r's at r * mine.size()): the one exchange set-up steps (mapping
// memory, splitting) are made of. Each message leads with a word naming
// the step (`what`) and its size, checked on arrival before anything in it
// is used: a peer in another call whose message happens to be as long
// (an 8-byte broadcast where an address was expected) raises here,
// naming the step, instead of being taken for this one's.
inline std::uint64_t step_word(const char* what, std::size_t bytes) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name, then the size
  for (const char* c = what; *c != '\0'; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 0x100000001b3ull;
  return (h ^ bytes) * 0x100000001b3ull ^ 0x52494e4754524545ull;
}
template <transport T>
void exchange_all(T& t, const char* what, std::span<const std::byte> mine, std::span<std::byte> all) {
  const int n = t.size(), me = t.rank();
  const std::size_t m = mine.size(), w = sizeof(std::uint64_t) + m;
  const std::uint64_t word = step_word(what, m);
  std::vector<std::byte> out(w), in(w * static_cast<std::size_t>(n));
  std::memcpy(out.data(), &word, sizeof word);
  std::copy(mine.begin(), mine.end(), out.begin() + sizeof word);
  std::vector<typename T::request> reqs;
  for (int q = 0; q < n; ++q)
    if (q != me) reqs.push_back(t.irecv(q, std::span(in).subspan(q * w, w)));
  for (int q = 0; q < n; ++q)
    if (q != me) reqs.push_back(t.isend(q, std::span<const std::byte>(out)));
  for (auto& r : reqs) t.wait(r);
  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    std::uint64_t got = 0;
    std::memcpy(&got, in.data() + q * w, sizeof got);
    if (got != word)
      throw error(what, me, cat("rank ", q, " sent something other than this step's ", m,
                                "-byte message (mismatched collective calls?)"));
    std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(q * w + sizeof word), m, all.begin() + static_cast<std::ptrdiff_t>(q * m));
  }
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(me * m));
}
// The same with one value a rank: every rank's, by rank.
template <transport T, class V>
std::vector<V> exchange_all(T& t, const char* what, const V& mine) {
  std::vector<V> all(static_cast<std::size_t>(t.size()));
  exchange_all(t, what, std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(all)));
  return all;
}

// The first of `members` (this transport's ranks) sends `value` to the
// others, which receive it there: how a split's first member hands out
// the new part's name. Checked on arrival as exchange_all's messages are.
template <transport T>
void share_from_first(T& t, std::span<const int> members, int index, const char* what, std::span<std::byte> value) {
  const std::uint64_t word = step_word(what, value.size());
  std::vector<std::byte> msg(sizeof word + value.size());
  if (index == 0) {
    std::memcpy(msg.data(), &word, sizeof word);
    std::copy(value.begin(), value.end(), msg.begin() + sizeof word);
    std::vector<typename T::request> sends;
    for (std::size_t i = 1; i < members.size(); ++i) sends.push_back(t.isend(members[i], std::span<const std::byte>(msg)));
    for (auto& q : sends) t.wait(q);
    return;
  }
  auto q = t.irecv(members[0], std::span(msg));
  t.wait(q);
  std::uint64_t got = 0;
  std::memcpy(&got, msg.data(), sizeof got);
  if (got != word)
    throw error(what, t.rank(), cat("rank ", members[0], " sent something other than this step's ", value.size(),
                                    "-byte message (mismatched collective calls?)"));
  std::copy(msg.begin() + sizeof word, msg.end(), value.begin());
}

// After a collective set-up step that may fail on some ranks: every rank
// says whether it managed, so that all fail together. The first rank that
// did not (this one included), or -1 when all did.
template <transport T>
int first_failed(T& t, bool ok, const char* what = "symmetric memory") {
  const auto all = exchange_all(t, what, static_cast<std::uint8_t>(ok ? 1 : 0));
  const auto at = std::find(all.begin(), all.end(), std::uint8_t{0});
  return at == all.end() ? -1 : static_cast<int>(at - all.begin());
}

// How many cores the ranks sharing this memory may run on between them:
// the union of their affinity masks (each rank's own, exchanged once; a
// launcher that binds each rank to one core gives each a mask of one).
// More ranks than that means waiting ranks must give their core away at once.
template <transport T>
int cores_of_all(T& t) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0)
    for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()) && c < CPU_SETSIZE; ++c) CPU_SET(c, &mine);
  std::vector<cpu_set_t> all(t.size());
  exchange_all(t, "symmetric memory", std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(all)));
  cpu_set_t any;
  CPU_ZERO(&any);
  for (auto& s : all) CPU_OR(&any, &any, &s);
  return std::max(1, CPU_COUNT(&any));
}

}  // namespace ringtree::detail
