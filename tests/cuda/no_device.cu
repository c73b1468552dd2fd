// Without a GPU (or driver), constructing the CUDA transport is a clear
// ringtree::error, never a crash; with one, it works. Runs in CI.
#include <cstdio>
#include <string>

#include <ringtree/ringtree.hpp>
#include <ringtree/transport/cuda_ipc.hpp>

int main() {
  int n = 0;
  const bool gpu = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  try {
    ringtree::cuda_ipc_transport t("/ringtree-no-device-check", 0, 1);
    ringtree::communicator comm(t);
    comm.barrier();
    std::printf("a GPU is present: the transport was made and a barrier ran\n");
    return gpu ? 0 : 1;
  } catch (const ringtree::error& e) {
    std::printf("%s\n", e.what());
    const std::string w = e.what();
    const bool clear = w.find("cuda_ipc_transport on rank 0") != std::string::npos &&
                       w.find("CUDA device") != std::string::npos;
    return (!gpu && clear) ? 0 : 1;
  }
}
