#pragma once
// grad_sync: data-parallel gradient averaging for C++ trainers, what
// PyTorch's DistributedDataParallel does, over any ringtree communicator.
//
// Gradients are packed into buckets in reverse parameter order (the order
// backward produces them), at most `bucket_bytes` each; the first-registered
// parameters, which backward reaches last, get a small bucket of about
// `last_bucket_bytes`, because nothing can hide the communication of the
// bucket that is ready last. As backward finishes gradient i, the trainer
// calls mark_ready(i); once every gradient of the next bucket is ready, the
// communicator's progress thread (comm.submit, communicator/work.hpp) all-reduces
// it while backward goes on. Buckets run in
// the same order on every rank whatever the order of mark_ready calls, so
// the ranks' collectives always match. synchronize() waits for all of them
// and leaves the mean (or the sum) in every gradient.
//
// Other calls on the communicator during a step queue behind the buckets
// submitted so far (a synchronous one waits for them). Over MPI the
// progress thread needs MPI_THREAD_SERIALIZED (checked by the first step).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <ringtree/communicator.hpp>

namespace ringtree {

struct grad_sync_options {
  std::size_t bucket_bytes = std::size_t{25} << 20;
  std::size_t last_bucket_bytes = std::size_t{1} << 20;
  std::size_t piece_bytes = std::size_t{2} << 20;  // a bucket is all-reduced in pieces this large
  bool average = true;                      // false: leave the sum
  bool missing_as_zero = false;             // a gradient never marked ready counts as zero instead of raising
  enum class wire { full, half, bfloat16 } compression = wire::full;  // float gradients only
  algorithm algo = algorithm::automatic;
};

template <class Comm, class E>
class grad_sync {
 public:
  // Gradients live in the caller's buffers; each bucket copies them in and out.
  grad_sync(Comm& comm, std::vector<std::span<E>> grads, grad_sync_options opt = {})
      : comm_(&comm), opt_(opt), grads_(std::move(grads)) {
    start();
  }
  // Gradients live inside the bucket storage (views): no copy is made.
  // gradient(i) is where the trainer writes gradient i. The buckets are
  // symmetric buffers (comm.allocate) where the ranks share memory, so the
  // all-reduce reads the peers' gradients where they are.
  grad_sync(Comm& comm, const std::vector<std::size_t>& sizes, grad_sync_options opt = {})
      : comm_(&comm), opt_(opt) {
    views_ = true;
    for (auto s : sizes) grads_.emplace_back(static_cast<E*>(nullptr), s);
    start();
  }
  grad_sync(const grad_sync&) = delete;
  // Buckets already submitted still run (the peers wait for them).
  ~grad_sync() {
    for (auto& w : works_) try {
        w.wait();
      } catch (...) {  // the step's error was the caller's to see in synchronize
      }
  }

  std::size_t size() const noexcept { return grads_.size(); }
  std::size_t buckets() const noexcept { return buckets_.size(); }
  std::span<E> gradient(std::size_t i) const { return grads_.at(i); }

  // Gradient i is final for this step.
  void mark_ready(std::size_t i) {
    if (i >= grads_.size())
      throw error("grad_sync::mark_ready", comm_->rank(), detail::cat("index ", i, " is out of range for ", grads_.size(), " gradients"));
    if (accumulating_) return;
    std::lock_guard lk(m_);
    synchronized_ = false;
    if (ready_[i]) return;
    ready_[i] = true;
    if (--pending_[bucket_of_[i]] == 0) submit_ready();
  }

  // Waits until every gradient holds the mean (or sum) over ranks. Once per
  // step: a second call with no mark_ready in between raises (it would
  // otherwise average zeros, or the averages again).
  //
  // Every rank ends the step with one small all-reduce that carries its
  // step number (every synchronize counts, failed or not) and its first
  // missing gradient: ranks a step apart (one caught a failed step and went
  // on) raise on every rank instead of averaging different steps.
  void synchronize() {
    if (accumulating_) return;
    std::int64_t missing = -1;
    {
      std::unique_lock lk(m_);
      if (synchronized_ && !grads_.empty())
        throw error("grad_sync::synchronize", comm_->rank(),
                    detail::cat("called again in step ", step_ - 1, " with no mark_ready since: the gradients already hold ",
                                opt_.average ? "the mean" : "the sum", "; call it once per step"));
      for (std::size_t i = 0; i < grads_.size() && missing < 0; ++i)
        if (!ready_[i]) missing = static_cast<std::int64_t>(i);
      if (missing >= 0) {  // run the step anyway (zeros), so that no rank is left waiting
        for (std::size_t i = 0; i < grads_.size(); ++i)
          if (!ready_[i]) {
            std::fill(grads_[i].begin(), grads_[i].end(), E{});
            ready_[i] = true;
            --pending_[bucket_of_[i]];
          }
        submit_ready();
      }
    }
    // Every bucket runs even after a failure (it skips the rest of a
    // failed step); only then may the step be reset.
    std::exception_ptr failure;
    for (auto& w : works_) try {
        w.wait();
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
    const std::int64_t step = step_++;
    reset_step();  // nothing is queued: the next step starts clean whatever happens below
    if (failure) std::rethrow_exception(failure);
    // One all-reduce (min) of: the smallest (index * ranks + rank) of a
    // missing gradient, the step, and minus the step (so the max step too).
    const std::int64_t n = comm_->size();
    std::int64_t w[3] = {missing < 0 ? INT64_MAX : missing * n + comm_->rank(), step, -step};
    comm_->allreduce(std::span<std::int64_t>(w), op::min);
    if (w[1] != -w[2])
      throw error("grad_sync::synchronize", comm_->rank(),
                  detail::cat("ranks are at different steps (", w[1], " to ", -w[2], "; this rank: ", step,
                              "): a rank went on after a failed step, so the gradients were averaged across steps"));
    if (w[0] != INT64_MAX && !opt_.missing_as_zero)
      throw error("grad_sync::synchronize", comm_->rank(),
                  detail::cat("gradient ", w[0] / n, " was never marked ready (on rank ", w[0] % n,
                              "); set missing_as_zero to let unused parameters count as zero"));
    std::lock_guard lk(m_);
    synchronized_ = true;
  }

  // Steps synchronized so far on this rank, failed ones included.
  std::int64_t step() const noexcept { return step_; }

  // Gradient accumulation: while on, mark_ready and synchronize do nothing,
  // so several backward passes add into the gradients locally.
  void set_accumulating(bool on) noexcept { accumulating_ = on; }
  struct no_sync_guard {
    grad_sync* s;
    ~no_sync_guard() { s->set_accumulating(false); }
  };
  [[nodiscard]] no_sync_guard no_sync() noexcept {
    set_accumulating(true);
    return {this};
  }

  // Makes every replica start from root's parameters.
  void broadcast_parameters(const std::vector<std::span<E>>& params, int root) {
    for (auto p : params) comm_->broadcast(p, root);
  }

 private:
  struct bucket {
    std::size_t first, last;  // gradients [first, last) in parameter order
    std::size_t elems;
    std::span<E> storage;     // the packed gradients (or their views), in one of:
    std::vector<E> plain;
    symmetric_buffer<E> shared;
  };

  void start() {
    const int rank = comm_->rank();
    check_same_layout();
    if constexpr (thread_checking_transport<std::remove_reference_t<decltype(comm_->transport())>>)
      comm_->transport().require_background_thread("grad_sync");
    // Buckets from the first parameters (the small last bucket), then up to
    // bucket_bytes each; run in reverse: the last parameters first.
    std::vector<bucket> from_front;
    std::size_t i = 0;
    auto take = [&](std::size_t cap) {
      bucket b{i, i, 0, {}, {}, {}};
      while (i < grads_.size() && (b.last == b.first || (b.elems + grads_[i].size()) * sizeof(E) <= cap))
        b.elems += grads_[i++].size(), ++b.last;
      from_front.push_back(std::move(b));
    };
    if (!grads_.empty()) take(opt_.last_bucket_bytes);
    while (i < grads_.size()) take(opt_.bucket_bytes);
    buckets_.assign(std::make_move_iterator(from_front.rbegin()), std::make_move_iterator(from_front.rend()));
    bucket_of_.resize(grads_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      auto& bk = buckets_[b];
      if (views_) {  // a collective call, in the same order on every rank; zeroed
        bk.shared = comm_->template allocate<E>(bk.elems);
        bk.storage = bk.shared.span();
      } else {
        bk.plain.assign(bk.elems, E{});
        bk.storage = bk.plain;
      }
      std::size_t off = 0;
      for (std::size_t g = buckets_[b].first; g < buckets_[b].last; ++g) {
        bucket_of_[g] = b;
        if (views_) grads_[g] = bk.storage.subspan(off, grads_[g].size());
        off += grads_[g].size();
      }
    }
    if (opt_.compression != grad_sync_options::wire::full && !std::is_same_v<E, float>)
      throw error("grad_sync", rank, "16-bit compression on the wire is for float gradients");
    reset_step();
  }

  // All ranks must register the same gradients; say which index differs.
  void check_same_layout() {
    const int n = comm_->size(), rank = comm_->rank();
    std::vector<std::uint64_t> counts(n);
    const std::uint64_t mine = grads_.size();
    comm_->allgather(std::span<const std::uint64_t>(&mine, 1), std::span<std::uint64_t>(counts));
    for (int r = 0; r < n; ++r)
      if (counts[r] != counts[0])
        throw error("grad_sync", rank, detail::cat("ranks register different numbers of gradients: rank 0 has ", counts[0],
                                                   ", rank ", r, " has ", counts[r]));
    std::vector<std::uint64_t> sizes(grads_.size()), all(grads_.size() * n);
    for (std::size_t g = 0; g < grads_.size(); ++g) sizes[g] = grads_[g].size();
    comm_->allgather(std::span<const std::uint64_t>(sizes), std::span<std::uint64_t>(all));
    for (std::size_t g = 0; g < grads_.size(); ++g) {
      std::string differ;
      for (int r = 1; r < n; ++r)
        if (all[r * grads_.size() + g] != all[g]) differ += detail::cat(differ.empty() ? "" : ", ", r, " (", all[r * grads_.size() + g], ")");
      if (!differ.empty())
        throw error("grad_sync", rank, detail::cat("gradient ", g, " has ", all[g], " elements on rank 0 but other sizes on ranks ", differ));
    }
  }

  void reset_step() {
    std::lock_guard lk(m_);
    ready_.assign(grads_.size(), false);
    pending_.assign(buckets_.size(), 0);
    for (std::size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].last - buckets_[b].first;
    submitted_ = 0;
    works_.clear();
    failed_ = false;
  }

  // Hands the buckets that are ready to the progress thread, in the fixed
  // order: bucket b only after b-1. Called locked.
  void submit_ready() {
    for (; submitted_ < buckets_.size() && pending_[submitted_] == 0; ++submitted_) {
      bucket& b = buckets_[submitted_];
      works_.push_back(comm_->submit([this, &b] {
        if (failed_) return;  // after a failure the step is lost: do not wait on peers again
        try {
          reduce(b);
        } catch (...) {
          failed_ = true;
          throw;
        }
      }));
    }
  }

  // A bucket is all-reduced in pieces of at most piece_bytes: the copy into
  // the bucket, the all-reduce and the copy back then work on data that is
  // still in cache (a 25 MiB bucket copied whole took 1.45x the time of
  // one flat all-reduce of the same bytes, in 2 MiB pieces 1.1x: see
  // bench/RESULTS.md).
  void reduce(bucket& b) {
    const std::size_t piece = std::max<std::size_t>(1, opt_.piece_bytes / sizeof(E));
    for (std::size_t a = 0; a < b.elems; a += piece) {
      const std::size_t e = std::min(b.elems, a + piece);
      std::span<E> flat = b.storage.subspan(a, e - a);
      if (!views_) for_parts(b, a, e, [](std::span<E> grad, std::span<E> packed) { std::copy(grad.begin(), grad.end(), packed.begin()); });
      reduce_flat(flat);
      if (!views_) for_parts(b, a, e, [](std::span<E> grad, std::span<E> packed) { std::copy(packed.begin(), packed.end(), grad.begin()); });
    }
  }

  // Calls f(part of a gradient, where it is packed) for the packed range [a, e).
  template <class F>
  void for_parts(bucket& b, std::size_t a, std::size_t e, F f) {
    std::size_t off = 0;
    for (std::size_t g = b.first; g < b.last && off < e; off += grads_[g++].size()) {
      const std::size_t lo = std::max(a, off), hi = std::min(e, off + grads_[g].size());
      if (lo < hi) f(grads_[g].subspan(lo - off, hi - lo), b.storage.subspan(lo, hi - lo));
    }
  }

  void reduce_flat(std::span<E> flat) {
    const op o = opt_.average ? op::avg : op::sum;
    if constexpr (std::is_same_v<E, float>) {
      if (opt_.compression == grad_sync_options::wire::half) return reduce_as<half>(flat, o);
      if (opt_.compression == grad_sync_options::wire::bfloat16) return reduce_as<bfloat16>(flat, o);
    }
    comm_->allreduce(flat, o, opt_.algo);
  }

  // 16-bit on the wire: half the bytes, each combine rounded to 16 bits.
  template <class W>
  void reduce_as(std::span<float> flat, op o) {
    std::vector<W> wire(flat.size());
    for (std::size_t i = 0; i < flat.size(); ++i) wire[i] = W(flat[i]);
    comm_->allreduce(std::span<W>(wire), op::sum, opt_.algo);
    const float scale = o == op::avg ? 1.0f / comm_->size() : 1.0f;
    for (std::size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(wire[i]) * scale;
  }

  Comm* comm_;
  grad_sync_options opt_;
  std::vector<std::span<E>> grads_;
  bool views_ = false;
  bool accumulating_ = false;
  std::vector<bucket> buckets_;
  std::vector<std::size_t> bucket_of_;
  std::mutex m_;
  std::vector<bool> ready_;
  std::vector<std::size_t> pending_;
  std::size_t submitted_ = 0;  // buckets handed to the progress thread this step
  std::vector<work> works_;    // and their handles
  bool failed_ = false;        // a bucket of this step failed (touched only on the progress thread, and between steps)
  bool synchronized_ = false;  // synchronize() ended the step; no mark_ready since
  std::int64_t step_ = 0;
};

template <class Comm, class E>
grad_sync(Comm&, std::vector<std::span<E>>, grad_sync_options = {}) -> grad_sync<Comm, E>;

}  // namespace ringtree
