#pragma once
// Bootstrap a shm_transport from an MPI communicator whose ranks share one
// host: rank 0 draws an unguessable segment name and broadcasts it. After
// that MPI is not used: the data moves through shared memory.
#include <mpi.h>

#include <string>

#include <ringtree/transport/shm.hpp>

namespace ringtree {

// A fresh segment name shared by the ranks of `comm`, which must all be on
// this host: rank 0 draws it, MPI broadcasts it.
inline std::string shared_segment_name(MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Comm local;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_size = 0;
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  int all_local = local_size == size ? 1 : 0, everywhere = 0;
  MPI_Allreduce(&all_local, &everywhere, 1, MPI_INT, MPI_MIN, comm);
  if (!everywhere)
    throw error("shm_transport", rank, detail::cat("the ", size, " ranks are not all on one host (", local_size,
                                                   " share this one); use mpi_transport"));
  char name[detail::shm_name_max] = {};
  if (rank == 0) std::snprintf(name, sizeof name, "%s", detail::random_shm_name().c_str());
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm);
  return name;
}

inline shm_transport make_shm_transport(MPI_Comm comm, shm_options opt = {}) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  return shm_transport(shared_segment_name(comm), rank, size, opt);
}

}  // namespace ringtree
