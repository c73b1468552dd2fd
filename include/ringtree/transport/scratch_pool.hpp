#pragma once
// Scratch memory a communicator owns and lends to the algorithms it runs:
// buffers of the transport's memory kind (host or device), kept between
// calls and handed out again, so that a collective that has run once at a
// size allocates nothing the next time (on the CUDA transport a
// cudaMalloc/cudaFree per call would also synchronise the device).
//
// A request takes the smallest free buffer that is large enough. When none
// is, the free buffers that are too small are dropped before a new one is
// made: the pool holds what one call uses at once, not every size ever
// asked for. One thread at a time, like the communicator.
#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <vector>

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
    slab* best = nullptr;
    for (auto& s : slabs_)
      if (!s->busy && s->bytes >= bytes && (best == nullptr || s->bytes < best->bytes)) best = s.get();
    if (best == nullptr) {
      std::erase_if(slabs_, [&](const auto& s) { return !s->busy && s->bytes < bytes; });
      slabs_.push_back(std::make_unique<slab>(slab{mem_.template scratch<std::byte>(bytes), bytes, false}));
      best = slabs_.back().get();
    }
    best->busy = true;
    return best;
  }
  static void give_back(slab* s) noexcept { s->busy = false; }
  std::size_t bytes_held() const noexcept {
    std::size_t b = 0;
    for (auto& s : slabs_) b += s->bytes;
    return b;
  }

 private:
  M mem_;
  std::vector<std::unique_ptr<slab>> slabs_;
};

// A scratch buffer from a pool (returned to it on destruction), or, with no
// pool, the memory's own buffer.
template <class M, class E>
class pooled_buffer {
 public:
  pooled_buffer() = default;
  explicit pooled_buffer(typename M::template buffer<E> own) : own_(std::move(own)), span_(own_.span()) {}
  pooled_buffer(typename scratch_pool<M>::slab* s, std::size_t n)
      : slab_(s), span_(reinterpret_cast<E*>(s->mem.span().data()), n) {}
  pooled_buffer(pooled_buffer&& o) noexcept
      : own_(std::move(o.own_)), slab_(std::exchange(o.slab_, nullptr)), span_(std::exchange(o.span_, {})) {}
  pooled_buffer& operator=(pooled_buffer&& o) noexcept {
    if (this != &o) {
      release();
      own_ = std::move(o.own_);
      slab_ = std::exchange(o.slab_, nullptr);
      span_ = std::exchange(o.span_, {});
    }
    return *this;
  }
  ~pooled_buffer() { release(); }
  std::span<E> span() const noexcept { return span_; }

 private:
  void release() noexcept {
    if (slab_ != nullptr) scratch_pool<M>::give_back(std::exchange(slab_, nullptr));
  }
  typename M::template buffer<E> own_{};
  typename scratch_pool<M>::slab* slab_ = nullptr;
  std::span<E> span_{};
};

}  // namespace ringtree::detail
