#pragma once
// Memory every rank can read: what a transport's `t.map_shared(bytes)`
// returns (shared_memory_transport, transport/transport.hpp), a collective
// call that gives every rank a region of its own and the address of every
// peer's region in this process. Symmetric buffers and the direct
// algorithms (memory/symmetric.hpp) are built on it.
//
// Lifetime: a mapping keeps this rank's view of every region alive until
// it is released. A region stays readable while any rank still maps it, so
// a peer that dies or frees early never pulls memory from under a reader
// (no SIGBUS, no use after free).
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ringtree/core/cxx20.hpp>

namespace ringtree {

struct shared_mapping {
  std::vector<std::byte*> bases;  // rank r's region, as this process sees it
  std::size_t bytes = 0;          // every region's size (the same on all ranks)
  std::shared_ptr<void> keep;     // this rank's views (unmapped when the last copy goes)
  std::function<std::string(int)> peer_problem;  // why `peer` can no longer answer, "" while it can
  std::chrono::duration<double> timeout{300};    // how long a wait on a peer may take
};

}  // namespace ringtree
