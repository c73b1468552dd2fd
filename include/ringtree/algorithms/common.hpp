#pragma once
// Building blocks every algorithm family shares: how a buffer is cut into
// per-rank blocks and pipeline chunks, and the two exchanges the textbook
// algorithms are made of (send one span while receiving another, with or
// without reducing what arrives). Written only against the transport
// concept and its memory object, so host and device buffers share them.
// The words the rows are made of (collective, algorithm, chunk sizes,
// cost counts) are in vocabulary.hpp.
#include <algorithm>
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include <ringtree/algorithms/vocabulary.hpp>
#include <ringtree/core/reduce.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree::detail {

// Rank i's block when `count` elements are dealt to n ranks: the first
// count % n blocks hold one element more.
struct range { std::size_t begin, size; };
constexpr range block(std::size_t count, int n, int i) noexcept {
  const std::size_t q = count / n, r = count % n, u = static_cast<std::size_t>(i);
  return {u * q + std::min(u, r), q + (u < r ? 1 : 0)};
}
template <class E> std::span<E> block_of(std::span<E> s, int n, int i) noexcept {
  const auto b = block(s.size(), n, i);
  return s.subspan(b.begin, b.size);
}
constexpr int mod(int a, int n) noexcept { return ((a % n) + n) % n; }

constexpr std::size_t chunk_elems(std::size_t bytes, std::size_t elem) noexcept {
  return std::max<std::size_t>(1, bytes / elem);
}
constexpr std::size_t chunk_count(std::size_t size, std::size_t chunk) noexcept {
  return (size + chunk - 1) / chunk;
}
template <class E> std::span<E> chunk_of(std::span<E> s, std::size_t chunk, std::size_t j) noexcept {
  const std::size_t b = j * chunk;
  return s.subspan(b, std::min(chunk, s.size() - b));
}

template <transport T, class E>
typename T::request post_send(T& t, int peer, std::span<const E> s) {
  return t.isend(peer, std::as_bytes(s));
}
template <transport T, class E>
typename T::request post_recv(T& t, int peer, std::span<E> s) {
  return t.irecv(peer, std::as_writable_bytes(s));
}
template <transport T>
void wait_all(T& t, std::vector<typename T::request>& reqs) {
  for (auto& r : reqs) t.wait(r);
  reqs.clear();
}

// Send `out` to `to` while receiving `in` from `from`. Empty spans are not
// sent: both ends compute the same sizes, so they skip the same messages.
template <transport T, class E>
void sendrecv(T& t, int to, std::span<const E> out, int from, std::span<E> in) {
  typename T::request r, s;
  if (!in.empty()) r = post_recv(t, from, in);
  if (!out.empty()) s = post_send(t, to, out);
  t.wait(r);
  t.wait(s);
}

// Send `out` to `to` while receiving a span as long as `acc` from `from`
// and reducing it into `acc`. Both travel in chunks; two receive slots let
// the reduction of one chunk overlap the arrival of the next.
template <transport T, class E>
void sendrecv_reduce(T& t, op o, int to, std::span<const E> out, int from, std::span<E> acc,
                     std::size_t chunk, std::span<E> slots /* 2 * chunk */, operands order = operands::acc_first) {
  auto mem = t.memory();
  std::vector<typename T::request> sends;
  const std::size_t nout = chunk_count(out.size(), chunk), nin = chunk_count(acc.size(), chunk);
  typename T::request recv[2];
  auto slot = [&](std::size_t j) { return slots.subspan((j % 2) * chunk, chunk_of(acc, chunk, j).size()); };
  for (std::size_t j = 0; j < std::min<std::size_t>(2, nin); ++j) recv[j % 2] = post_recv(t, from, slot(j));
  sends.reserve(nout);
  for (std::size_t j = 0; j < nout; ++j) sends.push_back(post_send(t, to, chunk_of(out, chunk, j)));
  for (std::size_t j = 0; j < nin; ++j) {
    t.wait(recv[j % 2]);
    mem.reduce(o, chunk_of(acc, chunk, j), std::span<const E>(slot(j)), order);
    if (j + 2 < nin) recv[j % 2] = post_recv(t, from, slot(j + 2));
  }
  wait_all(t, sends);
}

}  // namespace ringtree::detail
