// A trainer's file that includes ringtree and makes one float all-reduce on
// threads: what every translation unit that uses ringtree pays to compile.
#include <cstdio>
#include <vector>

#include <ringtree/ringtree.hpp>

int main() {
  ringtree::local_world world(4);
  world.run([](ringtree::local_transport& t) {
    ringtree::communicator comm(t);
    std::vector<float> grad(1000, float(comm.rank()));
    comm.allreduce(grad, ringtree::op::avg);
    if (comm.rank() == 0) std::printf("%g\n", grad[0]);
  });
}
