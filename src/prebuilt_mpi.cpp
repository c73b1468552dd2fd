// The ringtree-prebuilt-mpi library: the communicators over MPI and the
// cluster transport (include/ringtree/mpi.hpp), compiled once. The cold code
// they call is ringtree-prebuilt's, which it links (RINGTREE_PREBUILT).
#define RINGTREE_PREBUILT
#define RINGTREE_IMPLEMENTATION_MPI
#include <ringtree/communicator-inl.hpp>
#include <ringtree/mpi.hpp>
