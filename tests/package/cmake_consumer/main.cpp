// A program outside ringtree, built against an installed ringtree
// (tests/package/cmake_consumer.sh) or ringtree as a Meson subproject
// (tests/package/meson_subproject.sh). Its build sets no C++ standard: the
// C++20 requirement comes with the dependency. Exits 1 on a wrong result.
#include <cstdio>
#include <span>
#include <vector>

#include <ringtree/ringtree.hpp>

static_assert(__cplusplus >= 202002L, "the C++20 requirement did not come with the ringtree dependency");

int main() {
  int wrong = 0;
  ringtree::local_world world(2);  // 2 ranks on 2 threads
  world.run([&](ringtree::local_transport& t) {
    ringtree::communicator comm(t);
    std::vector<int> v(5, comm.rank() + 1);  // 1 on rank 0, 2 on rank 1
    comm.allreduce(std::span<int>(v));       // sum: 3 everywhere
    for (int x : v) wrong += x != 3;
  });
#ifdef RINGTREE_PREBUILT
  std::printf("(prebuilt) ");
#endif
  std::printf("local_world allreduce over 2 ranks: %s\n", wrong == 0 ? "ok" : "WRONG");
  return wrong == 0 ? 0 : 1;
}
