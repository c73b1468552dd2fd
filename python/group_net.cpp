// The network group's collectives (net_cluster: UCX between hosts), compiled apart (backend.hpp).
#include "backend.hpp"

template class ringtree_torch::group<ringtree_torch::comm_over<ringtree::net_cluster>>;
