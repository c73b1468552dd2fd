// The umbrella header must stand alone and pull in neither MPI nor CUDA.
#include <ringtree/ringtree.hpp>
#ifdef MPI_VERSION
#error "ringtree.hpp included <mpi.h>"
#endif
#ifdef __CUDA_RUNTIME_H__
#error "ringtree.hpp included the CUDA runtime"
#endif
int main() { return ringtree::to_string(ringtree::op::sum) == "sum" ? 0 : 1; }
