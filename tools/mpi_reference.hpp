#pragma once
// The MPI library's own collectives behind the communicator's calls, so the
// same benchmark loop and the same reference check serve both (the `mpi`
// rows of ringtree-perf). avg is MPI_SUM followed by the same division.
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <span>

#include <ringtree/communicator.hpp>

namespace ringtree::perf {

template <class E> MPI_Datatype mpi_datatype() {
  if constexpr (std::is_same_v<E, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<E, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<E, std::int8_t>) return MPI_INT8_T;
  else if constexpr (std::is_same_v<E, std::int16_t>) return MPI_INT16_T;
  else if constexpr (std::is_same_v<E, std::int32_t>) return MPI_INT32_T;
  else if constexpr (std::is_same_v<E, std::int64_t>) return MPI_INT64_T;
  else if constexpr (std::is_same_v<E, std::uint8_t>) return MPI_UINT8_T;
  else if constexpr (std::is_same_v<E, std::uint16_t>) return MPI_UINT16_T;
  else if constexpr (std::is_same_v<E, std::uint32_t>) return MPI_UINT32_T;
  else if constexpr (std::is_same_v<E, std::uint64_t>) return MPI_UINT64_T;
  else return MPI_DATATYPE_NULL;  // MPI-3.1 has no 16-bit floating-point type
}

inline MPI_Op mpi_op(op o) {
  switch (o) {
    case op::prod: return MPI_PROD;
    case op::min: return MPI_MIN;
    case op::max: return MPI_MAX;
    default: return MPI_SUM;
  }
}

// The MPI calls a reference makes: MPI's names (which a PMPI layer such as
// libringtree-mpi may serve) or its profiling names (the MPI library's own,
// whatever is preloaded).
struct mpi_calls {
  decltype(&PMPI_Allreduce) allreduce;
  decltype(&PMPI_Bcast) bcast;
  decltype(&PMPI_Reduce) reduce;
  decltype(&PMPI_Scatter) scatter;
  decltype(&PMPI_Gather) gather;
  decltype(&PMPI_Reduce_scatter_block) reduce_scatter_block;
  decltype(&PMPI_Allgather) allgather;
  decltype(&PMPI_Barrier) barrier;
  decltype(&PMPI_Alltoall) alltoall;
};
inline const mpi_calls standard_calls{MPI_Allreduce, MPI_Bcast, MPI_Reduce, MPI_Scatter, MPI_Gather,
                                      MPI_Reduce_scatter_block, MPI_Allgather, MPI_Barrier, MPI_Alltoall};
inline const mpi_calls profiling_calls{PMPI_Allreduce, PMPI_Bcast, PMPI_Reduce, PMPI_Scatter, PMPI_Gather,
                                       PMPI_Reduce_scatter_block, PMPI_Allgather, PMPI_Barrier, PMPI_Alltoall};

class mpi_reference {
 public:
  explicit mpi_reference(MPI_Comm comm, const mpi_calls& calls = standard_calls) : comm_(comm), mpi_(calls) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
  }
  int rank() const { return rank_; }
  int size() const { return size_; }

  template <class E> void allreduce(std::span<const E> in, std::span<E> out, op o, algorithm) {
    mpi_.allreduce(in.data(), out.data(), count(in.size()), mpi_datatype<E>(), mpi_op(o), comm_);
    if (o == op::avg) finish_avg(out, size_);
  }
  template <class E> void broadcast(std::span<E> data, int root, algorithm) {
    mpi_.bcast(data.data(), count(data.size()), mpi_datatype<E>(), root, comm_);
  }
  template <class E> void reduce(std::span<const E> in, std::span<E> out, int root, op o, algorithm) {
    mpi_.reduce(in.data(), out.data(), count(in.size()), mpi_datatype<E>(), mpi_op(o), root, comm_);
    if (o == op::avg && rank_ == root) finish_avg(out, size_);
  }
  template <class E> void scatter(std::span<const E> in, std::span<E> out, int root, algorithm) {
    mpi_.scatter(in.data(), count(out.size()), mpi_datatype<E>(), out.data(), count(out.size()), mpi_datatype<E>(), root, comm_);
  }
  template <class E> void gather(std::span<const E> in, std::span<E> out, int root, algorithm) {
    mpi_.gather(in.data(), count(in.size()), mpi_datatype<E>(), out.data(), count(in.size()), mpi_datatype<E>(), root, comm_);
  }
  template <class E> void reduce_scatter(std::span<const E> in, std::span<E> out, op o, algorithm) {
    mpi_.reduce_scatter_block(in.data(), out.data(), count(out.size()), mpi_datatype<E>(), mpi_op(o), comm_);
    if (o == op::avg) finish_avg(out, size_);
  }
  template <class E> void allgather(std::span<const E> in, std::span<E> out, algorithm) {
    mpi_.allgather(in.data(), count(in.size()), mpi_datatype<E>(), out.data(), count(in.size()), mpi_datatype<E>(), comm_);
  }
  void barrier() { mpi_.barrier(comm_); }
  template <class E> void alltoall(std::span<const E> in, std::span<E> out, algorithm) {
    const int block = count(out.size() / size_);
    mpi_.alltoall(in.data(), block, mpi_datatype<E>(), out.data(), block, mpi_datatype<E>(), comm_);
  }

 private:
  int count(std::size_t n) const {
    if (n > static_cast<std::size_t>(INT_MAX))
      throw error("mpi_reference", rank_, detail::cat("count ", n, " is above MPI's int limit"));
    return static_cast<int>(n);
  }
  MPI_Comm comm_;
  const mpi_calls& mpi_;
  int rank_ = 0, size_ = 1;
};

}  // namespace ringtree::perf
