#pragma once
// What a transport offers when its ranks can read each other's memory
// (threads of one process, processes of one host): `t.map_shared(bytes)`,
// a collective call that gives every rank a region of its own and the
// address of every peer's region in this process. Symmetric buffers and
// the direct algorithms (symmetric.hpp) are built on it; a transport
// without it simply has no symmetric memory.
//
// Lifetime: a mapping keeps this rank's view of every region alive until
// it is released. A region stays readable while any rank still maps it, so
// a peer that dies or frees early never pulls memory from under a reader
// (no SIGBUS, no use after free).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <ringtree/transport/transport.hpp>

namespace ringtree {

struct shared_mapping {
  std::vector<std::byte*> bases;  // rank r's region, as this process sees it
  std::size_t bytes = 0;          // every region's size (the same on all ranks)
  std::shared_ptr<void> keep;     // this rank's views (unmapped when the last copy goes)
  std::function<std::string(int)> peer_problem;  // why `peer` can no longer answer, "" while it can
  std::chrono::duration<double> timeout{300};    // how long a wait on a peer may take
};

template <class T>
concept shared_memory_transport = transport<T> && requires(T& t, std::size_t bytes) {
  { t.map_shared(bytes) } -> std::same_as<std::optional<shared_mapping>>;
};

namespace detail {

// Whether a communicator may map its control memory in its first
// collective call, to stage small calls on private memory (symmetric.hpp),
// and the staging that private calls stream through, rather than only when
// the program calls allocate: true where the mapping moves only the
// transport's own messages, under its timeout, and frees without talking
// to the peers (t.maps_in_calls(): MPI's, only where all ranks share a host).
template <class T>
bool maps_in_calls(const T& t) noexcept {
  if constexpr (requires { { t.maps_in_calls() } -> std::same_as<bool>; }) return t.maps_in_calls();
  else return false;
}
// Host memory that every rank maps, for the control lines and staging:
// t.map_control(bytes) where map_shared cannot give it (device memory; MPI's
// windows, made and freed by MPI collectives, which have no timeout), else
// map_shared.
template <class T>
std::optional<shared_mapping> map_control(T& t, std::size_t bytes) {
  if constexpr (requires { t.map_control(bytes); }) return t.map_control(bytes);
  else return t.map_shared(bytes);
}

// Every rank sends `mine` to every other and receives theirs into `all`
// (rank r's at r * mine.size()): the one exchange mappings are set up with.
template <transport T>
void exchange_all(T& t, std::span<const std::byte> mine, std::span<std::byte> all) {
  const int n = t.size(), me = t.rank();
  const std::size_t m = mine.size();
  std::vector<typename T::request> reqs;
  for (int q = 0; q < n; ++q)
    if (q != me) reqs.push_back(t.irecv(q, all.subspan(q * m, m)));
  for (int q = 0; q < n; ++q)
    if (q != me) reqs.push_back(t.isend(q, mine));
  for (auto& r : reqs) t.wait(r);
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(me * m));
}

// After a collective set-up step that may fail on some ranks: every rank
// says whether it managed, so that all fail together. The first rank that
// did not (this one included), or -1 when all did.
template <transport T>
int first_failed(T& t, bool ok) {
  const std::byte mine{static_cast<unsigned char>(ok ? 1 : 0)};
  std::vector<std::byte> all(static_cast<std::size_t>(t.size()));
  exchange_all(t, std::span(&mine, 1), std::span(all));
  const auto at = std::find(all.begin(), all.end(), std::byte{0});
  return at == all.end() ? -1 : static_cast<int>(at - all.begin());
}

}  // namespace detail
}  // namespace ringtree
