#pragma once
// The optional compiled part of ringtree: communicators over the in-process
// transport for every element type, compiled once into the
// ringtree-prebuilt library (src/prebuilt.cpp) instead of in every file
// that makes a call. With RINGTREE_PREBUILT defined (Meson's
// dependency('ringtree-prebuilt') defines it and links the library), these
// explicit instantiation declarations tell the compiler not to instantiate
// them here; without it, everything is instantiated where used, as for any
// header-only library. Other transports are always instantiated where used.
#include <cstdint>

#include <ringtree/communicator.hpp>
#include <ringtree/core/dtype.hpp>
#include <ringtree/transport/local.hpp>

// The collectives of communicator<T> for element type E, declared
// (`extern template`) or defined (`template`).
#define RINGTREE_COLLECTIVES_OF(KIND, T, E)                                                                          \
  KIND void ringtree::communicator<T>::allreduce_impl<E>(std::span<const E>, std::span<E>, op, algorithm);            \
  KIND void ringtree::communicator<T>::broadcast_impl<E>(std::span<E>, int, algorithm);                              \
  KIND void ringtree::communicator<T>::reduce_impl<E>(std::span<const E>, std::span<E>, int, op, algorithm);         \
  KIND void ringtree::communicator<T>::scatter_impl<E>(std::span<const E>, std::span<E>, int, algorithm);            \
  KIND void ringtree::communicator<T>::gather_impl<E>(std::span<const E>, std::span<E>, int, algorithm);             \
  KIND void ringtree::communicator<T>::reduce_scatter_impl<E>(std::span<const E>, std::span<E>, op, algorithm);      \
  KIND void ringtree::communicator<T>::allgather_impl<E>(std::span<const E>, std::span<E>, algorithm);            \
  KIND void ringtree::communicator<T>::alltoall_impl<E>(std::span<const E>, std::span<const std::size_t>, std::span<E>, \
                                                        std::span<const std::size_t>, algorithm);
#define RINGTREE_PREBUILT_TRANSPORT(KIND, T)           \
  KIND class ringtree::communicator<T>;                \
  RINGTREE_COLLECTIVES_OF(KIND, T, float)              \
  RINGTREE_COLLECTIVES_OF(KIND, T, double)             \
  RINGTREE_COLLECTIVES_OF(KIND, T, ringtree::half)     \
  RINGTREE_COLLECTIVES_OF(KIND, T, ringtree::bfloat16) \
  RINGTREE_COLLECTIVES_OF(KIND, T, std::int8_t)        \
  RINGTREE_COLLECTIVES_OF(KIND, T, std::uint8_t)       \
  RINGTREE_COLLECTIVES_OF(KIND, T, std::int16_t)       \
  RINGTREE_COLLECTIVES_OF(KIND, T, std::uint16_t)      \
  RINGTREE_COLLECTIVES_OF(KIND, T, std::int32_t)       \
  RINGTREE_COLLECTIVES_OF(KIND, T, std::uint32_t)      \
  RINGTREE_COLLECTIVES_OF(KIND, T, std::int64_t)       \
  RINGTREE_COLLECTIVES_OF(KIND, T, std::uint64_t)

#if defined(RINGTREE_PREBUILT) && !defined(RINGTREE_BUILDING_PREBUILT)
RINGTREE_PREBUILT_TRANSPORT(extern template, ringtree::local_transport)
#endif
