#pragma once
// any_communicator: a communicator behind one pointer, for the files of a
// program that only make calls. Its header names no transport, algorithm
// or tuning type, so such a file parses little more than <span> and
// <functional>; the calls are compiled once, in the ringtree-prebuilt
// library or the program's file with RINGTREE_IMPLEMENTATION
// (core/compiled.hpp), for every element type (float, double, half,
// bfloat16, the 8- to 64-bit integers). Header-only, the definitions come
// with it. What it runs is a communicator<shm_transport> or
// communicator<local_transport>, with everything that implies: automatic,
// RINGTREE_ALGO, RINGTREE_TRACE, the timeouts.
//
//   auto comm = ringtree::any_communicator::shm_from_env();  // RINGTREE_SHM_NAME, RINGTREE_RANK, RINGTREE_SIZE
//   comm.allreduce(std::span(grad), ringtree::op::avg);
#include <cstddef>
#include <functional>
#include <memory>
#include <span>

#include <ringtree/algorithms/vocabulary.hpp>
#include <ringtree/core/compiled.hpp>
#include <ringtree/core/dtype.hpp>

namespace ringtree {

class any_communicator {
 public:
  // Between the processes of this host, through shared memory, as
  // shm_transport::from_env() finds them (a collective call).
  static any_communicator shm_from_env();
  // `ranks` threads of this process (local_world), each running f with its
  // rank's communicator; an error on any rank is raised here.
  static void run_threads(int ranks, const std::function<void(any_communicator&)>& f);

  any_communicator(any_communicator&&) noexcept;
  any_communicator& operator=(any_communicator&&) noexcept;
  ~any_communicator();

  int rank() const noexcept;
  int size() const noexcept;

  // The collectives of communicator<T>, on spans, with its arguments and checks.
  template <element E>
  void allreduce(std::span<const E> in, std::span<E> out, op o = op::sum, algorithm a = algorithm::automatic);
  template <element E>
  void allreduce(std::span<E> inout, op o = op::sum, algorithm a = algorithm::automatic) {
    allreduce(std::span<const E>(inout), inout, o, a);
  }
  template <element E>
  void broadcast(std::span<E> data, int root, algorithm a = algorithm::automatic);
  template <element E>
  void reduce(std::span<const E> in, std::span<E> out, int root, op o = op::sum, algorithm a = algorithm::automatic);
  template <element E>
  void reduce_scatter(std::span<const E> in, std::span<E> out, op o = op::sum, algorithm a = algorithm::automatic);
  template <element E>
  void allgather(std::span<const E> in, std::span<E> out, algorithm a = algorithm::automatic);
  template <element E>
  void scatter(std::span<const E> in, std::span<E> out, int root, algorithm a = algorithm::automatic);
  template <element E>
  void gather(std::span<const E> in, std::span<E> out, int root, algorithm a = algorithm::automatic);
  template <element E>
  void alltoall(std::span<const E> in, std::span<E> out, algorithm a = algorithm::automatic);
  void barrier();

  struct impl;  // any_communicator-inl.hpp

 private:
  explicit any_communicator(std::unique_ptr<impl> p) noexcept;
  std::unique_ptr<impl> p_;
};

}  // namespace ringtree

#if RINGTREE_DEFINES
#include <ringtree/any_communicator-inl.hpp>
#endif
