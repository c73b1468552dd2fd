// Built with dependency('ringtree-prebuilt'): the collectives on
// local_transport come from the library (RINGTREE_PREBUILT), not from this
// file. Every collective and the prebuilt element types, checked.
#include <ringtree/ringtree.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

#ifndef RINGTREE_PREBUILT
#error "built without RINGTREE_PREBUILT"
#endif

template <class E>
int check(ringtree::communicator<ringtree::local_transport>& comm) {
  const int n = comm.size(), r = comm.rank();
  int bad = 0;
  std::vector<E> v(7, E(r + 1)), all(7 * n), block(7);
  comm.allreduce(v);
  for (auto x : v) bad += x != E(n * (n + 1) / 2);
  std::vector<E> mine(7, E(r));
  comm.allgather(mine, all);
  for (int i = 0; i < 7 * n; ++i) bad += all[i] != E(i / 7);
  comm.reduce_scatter(all, block);  // block r: n copies of r
  for (auto x : block) bad += x != E(n * r);
  comm.broadcast(block, 0);
  for (auto x : block) bad += x != E(0);
  std::vector<E> sum(7);
  comm.reduce(v, sum, 1);
  if (r == 1) for (auto x : sum) bad += x != E(n * n * (n + 1) / 2);
  comm.scatter(all, block, 2);
  for (auto x : block) bad += x != E(r);
  comm.gather(block, all, 0);
  if (r == 0) for (int i = 0; i < 7 * n; ++i) bad += all[i] != E(i / 7);
  return bad;
}

int main() {
  int bad = 0;
  ringtree::local_world(3).run([&](ringtree::local_transport& t) {
    ringtree::communicator comm(t);
    const int b = check<float>(comm) + check<double>(comm) + check<std::int32_t>(comm) + check<std::int64_t>(comm) +
                  check<std::uint64_t>(comm) + check<std::int8_t>(comm) + check<std::uint16_t>(comm);
    if (b != 0) throw ringtree::error("prebuilt", t.rank(), std::to_string(b) + " wrong elements");
  });
  std::puts("prebuilt: every collective right");
  return bad;
}
