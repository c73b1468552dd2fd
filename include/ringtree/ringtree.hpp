#pragma once
// ringtree: collective communication algorithms over interchangeable
// transports. This umbrella needs nothing but the C++ standard library;
// include <ringtree/mpi.hpp> or <ringtree/transport/cuda_ipc.hpp>
// on purpose for those transports.
#include <ringtree/core/dtype.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/core/reduce.hpp>
#include <ringtree/transport/transport.hpp>
#include <ringtree/transport/local.hpp>
#include <ringtree/trace/traced.hpp>
#include <ringtree/algorithms/table.hpp>
#include <ringtree/tuning/cost_model.hpp>
#include <ringtree/communicator.hpp>
#include <ringtree/prebuilt.hpp>  // nothing unless RINGTREE_PREBUILT
