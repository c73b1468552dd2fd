#pragma once
// The compiled part of ringtree (core/compiled.hpp says the three modes):
// the communicators over the transports one host deploys (threads,
// shared memory) for every element type, and the shared-memory transport
// itself. With RINGTREE_PREBUILT these explicit instantiation declarations
// tell the compiler not to instantiate them in this file (the class's
// member bodies are not even in view); with RINGTREE_IMPLEMENTATION this
// file instantiates them, once for the program (the ringtree-prebuilt
// library is src/prebuilt.cpp, which does just that). Header-only, it adds
// nothing. MPI's transports are in <ringtree/mpi.hpp>, the same way; the
// calls of any_communicator (the same communicators behind one pointer) here.
#include <cstdint>

#include <ringtree/any_communicator.hpp>
#include <ringtree/communicator.hpp>
#include <ringtree/core/compiled.hpp>
#include <ringtree/core/dtype.hpp>
#include <ringtree/transport/local.hpp>
#include <ringtree/transport/shm.hpp>

// The members of communicator<T> that are templates over element type E,
// declared (`extern template`) or defined (`template`).
#define RINGTREE_COLLECTIVES_OF(KIND, T, E)                                                                          \
  KIND void ringtree::communicator<T>::allreduce_impl<E>(std::span<const E>, std::span<E>, op, algorithm);            \
  KIND void ringtree::communicator<T>::broadcast_impl<E>(std::span<E>, int, algorithm);                              \
  KIND void ringtree::communicator<T>::reduce_impl<E>(std::span<const E>, std::span<E>, int, op, algorithm);         \
  KIND void ringtree::communicator<T>::scatter_impl<E>(std::span<const E>, std::span<E>, int, algorithm);            \
  KIND void ringtree::communicator<T>::gather_impl<E>(std::span<const E>, std::span<E>, int, algorithm);             \
  KIND void ringtree::communicator<T>::reduce_scatter_impl<E>(std::span<const E>, std::span<E>, op, algorithm);      \
  KIND void ringtree::communicator<T>::allgather_impl<E>(std::span<const E>, std::span<E>, algorithm);            \
  KIND void ringtree::communicator<T>::alltoall_impl<E>(std::span<const E>, std::span<const std::size_t>, std::span<E>, \
                                                        std::span<const std::size_t>, algorithm);                    \
  KIND ringtree::symmetric_buffer<E> ringtree::communicator<T>::allocate<E>(std::size_t);

// M(ARGS..., E) for every element type the compiled part holds.
#define RINGTREE_EACH_ELEMENT(M, ...)                                                                   \
  M(__VA_ARGS__, float) M(__VA_ARGS__, double) M(__VA_ARGS__, ringtree::half) M(__VA_ARGS__, ringtree::bfloat16) \
  M(__VA_ARGS__, std::int8_t) M(__VA_ARGS__, std::uint8_t) M(__VA_ARGS__, std::int16_t)                         \
  M(__VA_ARGS__, std::uint16_t) M(__VA_ARGS__, std::int32_t) M(__VA_ARGS__, std::uint32_t)                      \
  M(__VA_ARGS__, std::int64_t) M(__VA_ARGS__, std::uint64_t)
#define RINGTREE_PREBUILT_TRANSPORT(KIND, T) \
  KIND class ringtree::communicator<T>;      \
  RINGTREE_EACH_ELEMENT(RINGTREE_COLLECTIVES_OF, KIND, T)

// any_communicator's calls (any_communicator.hpp) for element type E.
#define RINGTREE_ANY_COLLECTIVES_OF(KIND, E)                                                                   \
  KIND void ringtree::any_communicator::allreduce<E>(std::span<const E>, std::span<E>, op, algorithm);      \
  KIND void ringtree::any_communicator::broadcast<E>(std::span<E>, int, algorithm);                         \
  KIND void ringtree::any_communicator::reduce<E>(std::span<const E>, std::span<E>, int, op, algorithm);    \
  KIND void ringtree::any_communicator::reduce_scatter<E>(std::span<const E>, std::span<E>, op, algorithm); \
  KIND void ringtree::any_communicator::allgather<E>(std::span<const E>, std::span<E>, algorithm);          \
  KIND void ringtree::any_communicator::scatter<E>(std::span<const E>, std::span<E>, int, algorithm);       \
  KIND void ringtree::any_communicator::gather<E>(std::span<const E>, std::span<E>, int, algorithm);        \
  KIND void ringtree::any_communicator::alltoall<E>(std::span<const E>, std::span<E>, algorithm);

#if defined(RINGTREE_IMPLEMENTATION)
RINGTREE_EACH_ELEMENT(RINGTREE_ANY_COLLECTIVES_OF, template)
template class ringtree::slot_transport<ringtree::detail::host_slots>;
RINGTREE_PREBUILT_TRANSPORT(template, ringtree::local_transport)
RINGTREE_PREBUILT_TRANSPORT(template, ringtree::shm_transport)
#elif defined(RINGTREE_PREBUILT)
extern template class ringtree::slot_transport<ringtree::detail::host_slots>;
RINGTREE_PREBUILT_TRANSPORT(extern template, ringtree::local_transport)
RINGTREE_PREBUILT_TRANSPORT(extern template, ringtree::shm_transport)
#endif
