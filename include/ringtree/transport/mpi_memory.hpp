#pragma once
// mpi_memory: the memory type of mpi_transport (transport/mpi.hpp). After
// a failure, MPI may still read a send it cannot cancel, so from then on
// the scratch buffers of calls are parked instead of freed, for as long as
// MPI may use them. Apart from the transport because it is plain host
// memory with a parking lot, and needs nothing of MPI.
#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <ringtree/transport/transport.hpp>

namespace ringtree {

namespace detail {
// Scratch that MPI may still read after a failure: once a send has been
// abandoned (MPI has no way to cancel it), scratch freed from then on is
// parked here instead, and kept for as long as MPI may use it.
struct mpi_parking {
  bool hold = false;
  std::vector<std::shared_ptr<void>> parked;
};
}  // namespace detail

// Host memory whose scratch buffers are parked instead of freed while the
// transport has abandoned sends (see mpi_transport's failure notes).
// A plain pointer to the transport's parking: scratch lives inside a call,
// which the transport outlives (no reference counting on the hot path).
struct mpi_memory : host_memory {
  detail::mpi_parking* parking = nullptr;
  template <class E>
  struct buffer {
    std::shared_ptr<E[]> data_;
    std::size_t size_ = 0;
    detail::mpi_parking* parking_ = nullptr;
    buffer() = default;
    buffer(std::shared_ptr<E[]> d, std::size_t n, detail::mpi_parking* p) : data_(std::move(d)), size_(n), parking_(p) {}
    buffer(buffer&& o) noexcept : data_(std::move(o.data_)), size_(std::exchange(o.size_, 0)), parking_(o.parking_) {}
    buffer& operator=(buffer&& o) noexcept {
      park();
      data_ = std::move(o.data_);
      size_ = std::exchange(o.size_, 0);
      parking_ = o.parking_;
      return *this;
    }
    ~buffer() { park(); }
    std::span<E> span() const noexcept { return {data_.get(), size_}; }

   private:
    void park() noexcept {
      if (data_ && parking_ && parking_->hold) parking_->parked.push_back(std::move(data_));
    }
  };
  template <class E>
  buffer<E> scratch(std::size_t n) const {
    return {std::make_shared_for_overwrite<E[]>(n), n, parking};
  }
};

}  // namespace ringtree
