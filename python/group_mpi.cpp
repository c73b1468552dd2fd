// The MPI group's collectives (over cluster_transport), compiled apart (backend.hpp).
#include "backend.hpp"

template class ringtree_torch::group<ringtree_torch::comm_over<ringtree::cluster_transport>>;
