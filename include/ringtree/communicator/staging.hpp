#pragma once
// A communicator's shared memory: the control memory (epoch lines and the
// staging slots of small calls) with the symmetric buffers made by
// allocate, and the staging that private calls stream through. The first
// collective call maps the control memory where the transport allows
// (maps_in_calls; every rank in the same call), else the first allocate.
#include <cstddef>
#include <memory>

#include <ringtree/core/error.hpp>
#include <ringtree/memory/shared_mapping.hpp>
#include <ringtree/memory/symmetric.hpp>
#include <ringtree/transport/exchange.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree::detail {

template <class Transport>
struct shared_state {
  std::unique_ptr<symmetric_heap> heap;  // control memory and symmetric buffers
  std::shared_ptr<symmetric_region> stream;  // staging for private calls that stream
  bool tried = false;  // open() ran (it may have mapped nothing)

  void open(Transport& t) {
    if constexpr (shared_memory_transport<Transport>) {
      if (tried) return;
      tried = true;
      if (auto control = map_control(t, control_bytes))
        heap = std::make_unique<symmetric_heap>(t.rank(), t.size(), std::move(*control), cores_of_all(t));
    }
  }
  // Whether private calls may stream through staging (placement_of()'s rule):
  // where the transport maps control memory in calls, and not while
  // tracing (the trace shows messages). MPI ranks on several hosts map
  // nothing: known from the first call on.
  bool streams_private(const Transport& t, bool tracing) const noexcept {
    return t.size() > 1 && maps_in_calls(t) && !tracing && (heap || !tried);
  }
  // Two segments of whole cache lines.
  static std::size_t stream_bytes(std::size_t asked) noexcept { return std::max<std::size_t>(128, asked / 128 * 128); }
  // This rank's staging, mapped by the first call that streams (on every
  // rank: they choose alike).
  symmetric_heap::found stream_staging(Transport& t, std::size_t asked) {
    if constexpr (shared_memory_transport<Transport>) {
      if (!stream) {
        open(t);  // (choose may measure before any call has)
        auto m = heap ? map_control(t, stream_bytes(asked)) : std::nullopt;
        if (!m) throw error("symmetric", t.rank(), "the transport mapped no staging memory");
        stream = heap->add(std::move(*m));
      }
      return {stream.get(), 0};
    } else {
      throw error("symmetric", t.rank(), "this transport has no shared staging memory");
    }
  }
};

}  // namespace ringtree::detail
