// Exit 0 when a CUDA device can be used, 77 (meson's "skipped") otherwise.
#include <cuda_runtime.h>

#include <cstdio>

int main() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("no CUDA device (%s): the CUDA tests are skipped\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  std::printf("%d CUDA device(s)\n", n);
  return 0;
}
