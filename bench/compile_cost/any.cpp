// shm.cpp's program through any_communicator: the file names no transport
// or communicator template, so with RINGTREE_PREBUILT it parses little.
#include <cstdio>
#include <span>
#include <vector>

#include <ringtree/any_communicator.hpp>

int main() {
  auto comm = ringtree::any_communicator::shm_from_env();
  std::vector<float> grad(1000, float(comm.rank()));
  comm.allreduce(std::span(grad), ringtree::op::avg);
  if (comm.rank() == 0) std::printf("%g\n", grad[0]);
}
