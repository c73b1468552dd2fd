#pragma once
// The MPI user's front door: a communicator over an MPI communicator, with
// shared memory where ranks share a host and hierarchical collectives
// across hosts (transport/cluster.hpp). Not in the umbrella
// <ringtree/ringtree.hpp>, which never pulls in <mpi.h>.
#include <mpi.h>

#include <memory>
#include <utility>

#include <ringtree/communicator.hpp>
#include <ringtree/prebuilt.hpp>
#include <ringtree/transport/cluster.hpp>
#include <ringtree/transport/mpi.hpp>

namespace ringtree {

// The communicator over `comm` that suits where its ranks run (see
// cluster_transport): shared memory on one host, hierarchical collectives
// across hosts, MPI between ranks alone on theirs. It owns its transport.
inline communicator<cluster_transport> make_communicator(MPI_Comm comm, communicator_options opt = {},
                                                        cluster_options transport = {}) {
  return communicator<cluster_transport>(std::make_unique<cluster_transport>(comm, std::move(transport)), std::move(opt));
}

}  // namespace ringtree

// The compiled part for MPI (as prebuilt.hpp for one host): the communicators
// over MPI and over the cluster transport, declared here with
// RINGTREE_PREBUILT (the ringtree-prebuilt-mpi library holds them), defined
// in the one file with RINGTREE_IMPLEMENTATION (or the library's own,
// RINGTREE_IMPLEMENTATION_MPI).
#if defined(RINGTREE_IMPLEMENTATION) || defined(RINGTREE_IMPLEMENTATION_MPI)
RINGTREE_PREBUILT_TRANSPORT(template, ringtree::mpi_transport)
RINGTREE_PREBUILT_TRANSPORT(template, ringtree::cluster_transport)
#elif defined(RINGTREE_PREBUILT)
RINGTREE_PREBUILT_TRANSPORT(extern template, ringtree::mpi_transport)
RINGTREE_PREBUILT_TRANSPORT(extern template, ringtree::cluster_transport)
#endif
