// A trainer's file on one host: the umbrella and shared memory, one float
// all-reduce between processes (started with RINGTREE_SHM_NAME, RINGTREE_RANK
// and RINGTREE_SIZE set, or under a launcher).
#include <cstdio>
#include <vector>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/shm.hpp>

int main() {
  auto t = ringtree::shm_transport::from_env();
  ringtree::communicator comm(t);
  std::vector<float> grad(1000, float(comm.rank()));
  comm.allreduce(grad, ringtree::op::avg);
  if (comm.rank() == 0) std::printf("%g\n", grad[0]);
}
