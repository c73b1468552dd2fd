// The umbrella header must stand alone and pull in neither MPI nor CUDA;
// its version is meson.build's (RINGTREE_MESON_VERSION, passed by Meson).
#include <ringtree/ringtree.hpp>

#include <cstdio>
#include <string_view>
#ifdef MPI_VERSION
#error "ringtree.hpp included <mpi.h>"
#endif
#ifdef __CUDA_RUNTIME_H__
#error "ringtree.hpp included the CUDA runtime"
#endif
int main() {
  if (std::string_view(ringtree::version_string) != RINGTREE_MESON_VERSION) {
    std::printf("ringtree::version_string is %s but meson.build says %s\n", ringtree::version_string, RINGTREE_MESON_VERSION);
    return 1;
  }
  return ringtree::to_string(ringtree::op::sum) == "sum" ? 0 : 1;
}
