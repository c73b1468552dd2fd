#pragma once
// Scratch memory a communicator owns and lends to the algorithms it runs:
// buffers of the transport's memory kind (host or device), kept between
// calls and handed out again, so that a collective that has run once at a
// size allocates nothing the next time (on the CUDA transport a
// cudaMalloc/cudaFree per call would also synchronise the device).
//
// The k-th request of a call (counted from the last moment nothing was
// lent) gets the k-th buffer, grown when it is too small. A call's
// requests come in the same order every time, so after one call of a size
// the next allocates nothing; what the pool holds is at most the largest
// call's requests, not every size ever asked for (a best-fit free list
// churned here: collectives with different patterns of requests kept
// dropping each other's buffers). One thread at a time, like the
// communicator.
#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <ringtree/core/cxx20.hpp>

namespace ringtree::detail {

template <class M>
class scratch_pool {
 public:
  struct slab {
    typename M::template buffer<std::byte> mem;
    std::size_t bytes = 0;
    bool busy = false;
  };
  explicit scratch_pool(M mem) : mem_(std::move(mem)) {}
  scratch_pool(const scratch_pool&) = delete;

  slab* take(std::size_t bytes) {
    if (lent_ == 0) next_ = 0;  // a new call
    if (next_ == slabs_.size()) slabs_.push_back(std::make_unique<slab>());
    slab* s = slabs_[next_++].get();  // never lent: every lent one is below next_
    if (s->bytes < bytes) {
      s->mem = {};  // free the old one first
      s->mem = mem_.template scratch<std::byte>(bytes);
      s->bytes = bytes;
    }
    s->busy = true;
    ++lent_;
    return s;
  }
  void give_back(slab* s) noexcept {
    s->busy = false;
    --lent_;
  }
  std::size_t bytes_held() const noexcept {
    std::size_t b = 0;
    for (auto& s : slabs_) b += s->bytes;
    return b;
  }

 private:
  M mem_;
  std::vector<std::unique_ptr<slab>> slabs_;
  std::size_t next_ = 0, lent_ = 0;
};

// A scratch buffer from a pool (returned to it on destruction), or, with no
// pool, the memory's own buffer.
template <class M, class E>
class pooled_buffer {
 public:
  pooled_buffer() = default;
  explicit pooled_buffer(typename M::template buffer<E> own) : own_(std::move(own)), span_(own_.span()) {}
  pooled_buffer(scratch_pool<M>* pool, std::size_t n)
      : pool_(pool), slab_(pool->take(n * sizeof(E))), span_(reinterpret_cast<E*>(slab_->mem.span().data()), n) {}
  pooled_buffer(pooled_buffer&& o) noexcept
      : own_(std::move(o.own_)), pool_(o.pool_), slab_(std::exchange(o.slab_, nullptr)), span_(std::exchange(o.span_, {})) {}
  pooled_buffer& operator=(pooled_buffer&& o) noexcept {
    if (this != &o) {
      release();
      own_ = std::move(o.own_);
      pool_ = o.pool_;
      slab_ = std::exchange(o.slab_, nullptr);
      span_ = std::exchange(o.span_, {});
    }
    return *this;
  }
  ~pooled_buffer() { release(); }
  std::span<E> span() const noexcept { return span_; }

 private:
  void release() noexcept {
    if (slab_ != nullptr) pool_->give_back(std::exchange(slab_, nullptr));
  }
  typename M::template buffer<E> own_{};
  scratch_pool<M>* pool_ = nullptr;
  typename scratch_pool<M>::slab* slab_ = nullptr;
  std::span<E> span_{};
};

}  // namespace ringtree::detail
