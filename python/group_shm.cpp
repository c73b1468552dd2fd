// The shared-memory group's collectives, compiled apart (backend.hpp).
#include "backend.hpp"

template class ringtree_torch::group<ringtree_torch::comm_over<ringtree::shm_transport>>;
