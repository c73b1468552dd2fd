#pragma once
// mpi_bootstrap: a bootstrap (transport/bootstrap.hpp) over an MPI
// communicator, for a program that has MPI but wants ringtree's network
// transport between hosts (and for comparing the two on one job).
#include <mpi.h>

#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <ringtree/core/error.hpp>
#include <ringtree/transport/bootstrap.hpp>

namespace ringtree {

class mpi_bootstrap : public bootstrap {
 public:
  // `comm` must outlive the bootstrap; its calls are collective over it.
  explicit mpi_bootstrap(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }

  std::vector<std::vector<std::byte>> allgather(const std::string& what, std::span<const std::byte> mine) override {
    // The step's name leads, so that ranks in different steps raise.
    std::vector<std::byte> value(what.size() + 1 + mine.size());
    std::memcpy(value.data(), what.c_str(), what.size() + 1);
    if (!mine.empty()) std::memcpy(value.data() + what.size() + 1, mine.data(), mine.size());
    const int len = static_cast<int>(value.size());
    std::vector<int> lens(static_cast<std::size_t>(size_)), at(lens.size());
    check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_), "MPI_Allgather");
    int total = 0;
    for (int q = 0; q < size_; ++q) at[q] = total, total += lens[q];
    std::vector<std::byte> got(static_cast<std::size_t>(total));
    check(MPI_Allgatherv(value.data(), len, MPI_BYTE, got.data(), lens.data(), at.data(), MPI_BYTE, comm_), "MPI_Allgatherv");
    std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(size_));
    for (int q = 0; q < size_; ++q) {
      const std::byte* p = got.data() + at[q];
      const std::string theirs(reinterpret_cast<const char*>(p), strnlen(reinterpret_cast<const char*>(p), static_cast<std::size_t>(lens[q])));
      if (theirs != what)
        throw error("bootstrap", rank_, detail::cat("rank ", q, " is in the step '", theirs, "' where this rank is in '", what,
                                                     "': the ranks' set-up steps differ"));
      all[q].assign(p + what.size() + 1, p + lens[q]);
    }
    return all;
  }

 private:
  void check(int code, const char* call) const {
    if (code != MPI_SUCCESS) throw error("mpi_bootstrap", rank_, detail::cat(call, " failed (code ", code, ")"));
  }
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace ringtree
