// The README's first example: 4 ranks on 4 threads average a gradient.
#include <cstdio>
#include <vector>

#include <ringtree/ringtree.hpp>

int main() {
  ringtree::local_world world(4);  // 4 ranks on 4 threads
  world.run([](ringtree::local_transport& t) {
    ringtree::communicator comm(t);
    std::vector<float> grad(1000, float(comm.rank()));
    comm.allreduce(std::span<float>(grad), ringtree::op::avg);  // mean over ranks
    if (grad[999] != 1.5f) throw ringtree::error("example", comm.rank(), "mean is not 1.5");
    if (comm.rank() == 0) std::printf("mean over 4 ranks: %g\n", grad[0]);
  });
}
