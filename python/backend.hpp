// ringtree_torch's pieces (python/ringtree_torch.cpp says what it is): torch
// tensors to ringtree spans, torch's Work over ringtree::work, and every
// collective of a process group written once against a communicator type.
// Each transport's group is compiled in a file of its own (group_*.cpp).
#pragma once
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <ringtree/communicator.hpp>
#include <ringtree/transport/shm.hpp>
#ifdef RINGTREE_TORCH_MPI
#include <ringtree/mpi.hpp>
#endif
#ifdef RINGTREE_TORCH_NET
#include <ringtree/transport/net_cluster.hpp>
#endif

namespace ringtree_torch {

using ringtree::op;
template <class T>
using comm_over = ringtree::communicator<T>;

[[noreturn]] inline void fail(const std::string& call, int rank, const std::string& what) {
  throw ringtree::error("ringtree_torch " + call, rank, what);
}

// torch's element types and ringtree's: bool travels as uint8 (0 or 1),
// with sum as or and product as and.
template <class F>
decltype(auto) with_element(at::ScalarType t, const std::string& call, int rank, F&& f) {
  switch (t) {
    case at::kFloat: return f.template operator()<float>();
    case at::kDouble: return f.template operator()<double>();
    case at::kHalf: return f.template operator()<ringtree::half>();
    case at::kBFloat16: return f.template operator()<ringtree::bfloat16>();
    case at::kChar: return f.template operator()<std::int8_t>();
    case at::kByte: return f.template operator()<std::uint8_t>();
    case at::kShort: return f.template operator()<std::int16_t>();
    case at::kInt: return f.template operator()<std::int32_t>();
    case at::kLong: return f.template operator()<std::int64_t>();
    case at::kBool: return f.template operator()<std::uint8_t>();
    // complex: pairs of reals (sums and averages are element-wise; see to_op)
    case at::kComplexFloat: return f.template operator()<float>();
    case at::kComplexDouble: return f.template operator()<double>();
    default:
      fail(call, rank, std::string("tensors of ") + c10::toString(t) +
                           " are not supported (float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64, bool, "
                           "complex64, complex128 are)");
  }
}

// Elements of the spans per element of a tensor: complex ones are pairs.
inline int64_t lanes(const at::Tensor& t) { return t.is_complex() ? 2 : 1; }

inline op to_op(const c10d::ReduceOp& r, at::ScalarType t, const std::string& call, int rank) {
  const bool b = t == at::kBool;
  if (at::isComplexType(t) && r.op_ != c10d::ReduceOp::SUM && r.op_ != c10d::ReduceOp::AVG)
    fail(call, rank, std::string("ReduceOp ") + std::to_string(int(r.op_)) + " of " + c10::toString(t) +
                         " tensors is not element-wise on the real and imaginary parts (SUM and AVG are)");
  switch (r.op_) {
    case c10d::ReduceOp::SUM: return b ? op::max : op::sum;
    case c10d::ReduceOp::PRODUCT: return b ? op::min : op::prod;
    case c10d::ReduceOp::MIN: return op::min;
    case c10d::ReduceOp::MAX: return op::max;
    case c10d::ReduceOp::AVG:
      if (b) fail(call, rank, "ReduceOp.AVG of bool tensors has no meaning");
      return op::avg;
    default:
      fail(call, rank, "ReduceOp " + std::to_string(int(r.op_)) + " is not supported (SUM, AVG, PRODUCT, MIN, MAX are)");
  }
}

// A tensor the collectives can run on: dense, on the CPU; a
// non-contiguous one runs on a contiguous copy that is copied back.
struct operand {
  at::Tensor user, flat;
  template <class E>
  std::span<E> span() const {
    return {static_cast<E*>(flat.data_ptr()), static_cast<std::size_t>(flat.numel() * lanes(flat))};
  }
  void copy_back() const {
    if (!flat.is_same(user)) user.copy_(flat);
  }
};
inline operand prepare(const at::Tensor& t, const std::string& call, int rank) {
  if (!t.defined()) fail(call, rank, "got an undefined tensor");
  if (!t.device().is_cpu()) fail(call, rank, "tensors must be on the CPU, got one on " + t.device().str());
  if (t.layout() != at::kStrided) fail(call, rank, "sparse tensors are not supported");
  return {t, t.is_contiguous() ? t : t.contiguous()};
}
inline void same_type(const std::vector<at::Tensor>& ts, at::ScalarType t, const std::string& call, int rank) {
  for (const auto& x : ts)
    if (x.scalar_type() != t)
      fail(call, rank, std::string("all tensors must have one type: got ") + c10::toString(t) + " and " + c10::toString(x.scalar_type()));
}
inline const at::Tensor& only(const std::vector<at::Tensor>& ts, const std::string& call, int rank) {
  if (ts.size() != 1) fail(call, rank, "takes one tensor per rank, got " + std::to_string(ts.size()));
  return ts[0];
}
// Many tensors as one flat buffer and back (coalesced calls, lists).
inline at::Tensor flatten(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  for (const auto& t : ts) flat.push_back(t.reshape(-1));
  return flat.empty() ? at::Tensor() : at::cat(flat);
}
inline void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  int64_t at = 0;
  for (const auto& t : ts) {
    t.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));
    at += t.numel();
  }
}

// torch's Work over a ringtree::work: the future is completed (or failed)
// by whichever thread ran the call.
class work final : public c10d::Work {
 public:
  work(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type), outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}
  void start(ringtree::work w) { w_ = std::move(w); }
  void done(std::exception_ptr e) {
    if (e) future_->setError(e);
    else future_->markCompleted(c10::IValue(outputs_));
    finish(e);
  }
  bool wait(std::chrono::milliseconds) override {
    w_.wait();  // runs the call here if it has not started; rethrows its error
    return true;
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  // A receive's sender (known before it completes: recv from any source).
  int sourceRank() const override { return source_; }
  int* source() { return &source_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  ringtree::work w_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  int source_ = -1;
};

// What both transports share: every collective, written once against a
// communicator type.
template <class Comm>
class group {
 public:
  group(Comm coll, Comm p2p, std::string transport)
      : coll_(std::move(coll)), p2p_(std::move(p2p)), transport_(std::move(transport)) {
    // Ranks that disagree (shapes, types, ops, roots) raise on every rank
    // before any data moves, instead of exchanging wrong bytes.
    coll_.set_checked(true);
  }
  int rank() const { return coll_.rank(); }
  int size() const { return coll_.size(); }
  const std::string& transport() const { return transport_; }

  using result = c10::intrusive_ptr<c10d::Work>;

  result allreduce(std::vector<at::Tensor>& ts, const c10d::AllreduceOptions& o) {
    const std::string call = "all_reduce";
    if (ts.size() == 1 && ts[0].defined() && ts[0].is_sparse()) return allreduce_sparse(ts, o);  // (torch sends them here, as to gloo)
    auto x = prepare(only(ts, call, rank()), call, rank());
    const op ro = to_op(o.reduceOp, x.user.scalar_type(), call, rank());
    return typed(x.user.scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::ALLREDUCE, {x.user}, [this, x, ro] {
        coll_.allreduce(x.template span<E>(), ro);
        x.copy_back();
      });
    });
  }
  // A sparse (COO) tensor's sum, as gloo computes it: every rank's entries
  // gathered (padded to the largest count), concatenated in rank order and
  // coalesced (duplicate indices summed), then put in place of the input.
  result allreduce_sparse(std::vector<at::Tensor>& ts, const c10d::AllreduceOptions& o) {
    const std::string call = "all_reduce (sparse)";
    const at::Tensor x = only(ts, call, rank());
    if (!x.is_sparse() || !x.device().is_cpu()) fail(call, rank(), "takes a sparse COO tensor on the CPU");
    if (o.reduceOp.op_ != c10d::ReduceOp::SUM)
      fail(call, rank(), "ReduceOp " + std::to_string(int(o.reduceOp.op_)) + " of a sparse tensor: only SUM is supported (as in gloo)");
    return typed(x.scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::ALLREDUCE, {x}, [this, x] {
        const at::Tensor mine = x.coalesce();
        const operand nnz{at::Tensor(), at::empty({size()}, at::kLong)};
        const operand one{at::Tensor(), at::full({1}, mine._nnz(), at::kLong)};
        coll_.allgather(std::span<const int64_t>(one.template span<int64_t>()), nnz.template span<int64_t>());
        const int64_t most = nnz.flat.max().item<int64_t>();
        auto padded = [&](const at::Tensor& t, int64_t dim) {  // t's entries along dim, padded to `most`
          auto sizes = t.sizes().vec();
          sizes[dim] = most - t.size(dim);
          return at::cat({t, at::zeros(sizes, t.options())}, dim).contiguous();
        };
        auto gather = [&]<class T>(const at::Tensor& t, int64_t dim) {  // every rank's t, padded, stacked
          const operand in{at::Tensor(), padded(t, dim)};
          auto shape = in.flat.sizes().vec();
          shape.insert(shape.begin(), size());
          const operand all{at::Tensor(), at::empty(shape, in.flat.options())};
          coll_.allgather(std::span<const T>(in.template span<T>()), all.template span<T>());
          return all.flat;
        };
        const at::Tensor idx = gather.template operator()<int64_t>(mine._indices(), 1);
        const at::Tensor val = gather.template operator()<E>(mine._values(), 0);
        std::vector<at::Tensor> idxs, vals;
        for (int r = 0; r < size(); ++r) {
          const int64_t k = nnz.flat[r].item<int64_t>();
          idxs.push_back(idx[r].narrow(1, 0, k));
          vals.push_back(val[r].narrow(0, 0, k));
        }
        x.copy_(at::sparse_coo_tensor(at::cat(idxs, 1), at::cat(vals, 0), x.sizes()).coalesce());
      });
    });
  }
  result allreduce_coalesced(std::vector<at::Tensor>& ts, const c10d::AllreduceCoalescedOptions& o) {
    const std::string call = "all_reduce_coalesced";
    if (ts.empty()) fail(call, rank(), "got no tensors");
    for (const auto& t : ts) prepare(t, call, rank());
    same_type(ts, ts[0].scalar_type(), call, rank());
    const op ro = to_op(o.reduceOp, ts[0].scalar_type(), call, rank());
    return typed(ts[0].scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::ALLREDUCE_COALESCED, ts, [this, ts, ro] {
        const operand f{at::Tensor(), flatten(ts)};
        coll_.allreduce(f.template span<E>(), ro);
        unflatten(f.flat, ts);
      });
    });
  }
  result broadcast(std::vector<at::Tensor>& ts, const c10d::BroadcastOptions& o) {
    const std::string call = "broadcast";
    auto x = prepare(only(ts, call, rank()), call, rank());
    const int root = static_cast<int>(o.rootRank);
    return typed(x.user.scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::BROADCAST, {x.user}, [this, x, root] {
        coll_.broadcast(x.template span<E>(), root);
        x.copy_back();
      });
    });
  }
  result reduce(std::vector<at::Tensor>& ts, const c10d::ReduceOptions& o) {
    const std::string call = "reduce";
    auto x = prepare(only(ts, call, rank()), call, rank());
    const op ro = to_op(o.reduceOp, x.user.scalar_type(), call, rank());
    const int root = static_cast<int>(o.rootRank);
    return typed(x.user.scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::REDUCE, {x.user}, [this, x, ro, root] {
        auto s = x.template span<E>();
        coll_.reduce(std::span<const E>(s), rank() == root ? s : s.first(0), root, ro);
        x.copy_back();
      });
    });
  }
  result allgather(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins, const c10d::AllgatherOptions&) {
    const std::string call = "all_gather";
    auto x = prepare(only(ins, call, rank()), call, rank());
    if (outs.size() != 1 || outs[0].size() != std::size_t(size()))
      fail(call, rank(), "needs one list of " + std::to_string(size()) + " output tensors");
    check_like(outs[0], x.user, call);
    return typed(x.user.scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::ALLGATHER, outs[0], [this, x, out = outs[0]] {
        const operand all{at::Tensor(), at::empty({x.user.numel() * size()}, x.user.options())};
        coll_.allgather(std::span<const E>(x.template span<E>()), all.template span<E>());
        unflatten(all.flat, out);
      });
    });
  }
  // outs[r][i] gets rank r's ins[i]: one all-gather of them all, flattened.
  result allgather_coalesced(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins, const c10d::AllgatherOptions&) {
    const std::string call = "all_gather_coalesced";
    if (ins.empty()) fail(call, rank(), "got no input tensors");
    for (const auto& t : ins) prepare(t, call, rank());
    same_type(ins, ins[0].scalar_type(), call, rank());
    if (outs.size() != std::size_t(size()))
      fail(call, rank(), "needs one list of output tensors per rank (" + std::to_string(size()) + "), got " + std::to_string(outs.size()));
    std::vector<at::Tensor> all_outs;
    for (const auto& list : outs) {
      if (list.size() != ins.size())
        fail(call, rank(), "every output list must have one tensor per input tensor (" + std::to_string(ins.size()) + "), got " +
                               std::to_string(list.size()));
      for (std::size_t i = 0; i < ins.size(); ++i) check_like({list[i]}, ins[i], call);
      all_outs.insert(all_outs.end(), list.begin(), list.end());
    }
    return typed(ins[0].scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::ALLGATHER_COALESCED, all_outs, [this, ins, outs] {
        const at::Tensor all = allgather_flat<E>(ins);
        const int64_t each = all.numel() / size();
        for (int r = 0; r < size(); ++r) unflatten(all.narrow(0, r * each, each), outs[r]);
      });
    });
  }
  result allgather_base(at::Tensor& out, at::Tensor& in) {
    const std::string call = "_allgather_base";
    auto x = prepare(in, call, rank()), y = prepare(out, call, rank());
    same_type({out}, in.scalar_type(), call, rank());
    return typed(in.scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::_ALLGATHER_BASE, {out}, [this, x, y] {
        coll_.allgather(std::span<const E>(x.template span<E>()), y.template span<E>());
        y.copy_back();
      });
    });
  }
  // outs[i] gets every rank's ins[i], in rank order: one all-gather of the
  // flattened inputs, then each rank's share put in place.
  result allgather_into_tensor_coalesced(std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins) {
    const std::string call = "all_gather_into_tensor_coalesced";
    pairs(outs, ins, size(), call);
    return typed(ins[0].scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::COALESCED, outs, [this, ins, outs] {
        const at::Tensor all = allgather_flat<E>(ins);
        const int64_t each = all.numel() / size();
        int64_t at = 0;
        for (std::size_t i = 0; i < ins.size(); ++i) {
          const int64_t n = ins[i].numel();
          const operand y = prepare(outs[i], "", rank());
          for (int r = 0; r < size(); ++r) y.flat.view(-1).narrow(0, r * n, n).copy_(all.narrow(0, r * each + at, n));
          y.copy_back();
          at += n;
        }
      });
    });
  }
  // outs[i] gets block `rank` of the reduction of every rank's ins[i]: the
  // inputs regrouped so that one reduce-scatter hands each rank its blocks.
  result reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
                                         const c10d::ReduceScatterOptions& o) {
    const std::string call = "reduce_scatter_tensor_coalesced";
    pairs(ins, outs, size(), call);
    const op ro = to_op(o.reduceOp, ins[0].scalar_type(), call, rank());
    return typed(ins[0].scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::COALESCED, outs, [this, ins, outs, ro] {
        std::vector<at::Tensor> blocks;  // rank r's blocks of every input, r = 0, 1, ...
        for (int r = 0; r < size(); ++r)
          for (std::size_t i = 0; i < ins.size(); ++i) {
            const int64_t n = outs[i].numel();
            blocks.push_back(ins[i].reshape(-1).narrow(0, r * n, n));
          }
        const operand f{at::Tensor(), at::cat(blocks)};
        const operand mine{at::Tensor(), at::empty({f.flat.numel() / size()}, f.flat.options())};
        coll_.reduce_scatter(std::span<const E>(f.template span<E>()), mine.template span<E>(), ro);
        unflatten(mine.flat, outs);
      });
    });
  }
  result reduce_scatter(std::vector<at::Tensor>& outs, std::vector<std::vector<at::Tensor>>& ins,
                        const c10d::ReduceScatterOptions& o) {
    const std::string call = "reduce_scatter";
    auto y = prepare(only(outs, call, rank()), call, rank());
    if (ins.size() != 1 || ins[0].size() != std::size_t(size()))
      fail(call, rank(), "needs one list of " + std::to_string(size()) + " input tensors");
    check_like(ins[0], y.user, call);
    const op ro = to_op(o.reduceOp, y.user.scalar_type(), call, rank());
    return typed(y.user.scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::REDUCE_SCATTER, {y.user}, [this, y, in = ins[0], ro] {
        const operand f{at::Tensor(), flatten(in)};
        coll_.reduce_scatter(std::span<const E>(f.template span<E>()), y.template span<E>(), ro);
        y.copy_back();
      });
    });
  }
  result reduce_scatter_base(at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& o) {
    const std::string call = "_reduce_scatter_base";
    auto x = prepare(in, call, rank()), y = prepare(out, call, rank());
    same_type({out}, in.scalar_type(), call, rank());
    const op ro = to_op(o.reduceOp, in.scalar_type(), call, rank());
    return typed(in.scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::_REDUCE_SCATTER_BASE, {out}, [this, x, y, ro] {
        coll_.reduce_scatter(std::span<const E>(x.template span<E>()), y.template span<E>(), ro);
        y.copy_back();
      });
    });
  }
  result gather(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins, const c10d::GatherOptions& o) {
    const std::string call = "gather";
    auto x = prepare(only(ins, call, rank()), call, rank());
    const int root = static_cast<int>(o.rootRank);
    const bool is_root = rank() == root;
    if (is_root && (outs.size() != 1 || outs[0].size() != std::size_t(size())))
      fail(call, rank(), "needs one list of " + std::to_string(size()) + " output tensors on the root");
    if (!is_root && !outs.empty() && !outs[0].empty()) fail(call, rank(), "takes output tensors only on the root");
    std::vector<at::Tensor> out = is_root ? outs[0] : std::vector<at::Tensor>{};
    if (is_root) check_like(out, x.user, call);
    return typed(x.user.scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::GATHER, out, [this, x, out, root, is_root] {
        const operand all{at::Tensor(), at::empty({is_root ? x.user.numel() * size() : 0}, x.user.options())};
        coll_.gather(std::span<const E>(x.template span<E>()), all.template span<E>(), root);
        if (is_root) unflatten(all.flat, out);
      });
    });
  }
  result scatter(std::vector<at::Tensor>& outs, std::vector<std::vector<at::Tensor>>& ins, const c10d::ScatterOptions& o) {
    const std::string call = "scatter";
    auto y = prepare(only(outs, call, rank()), call, rank());
    const int root = static_cast<int>(o.rootRank);
    const bool is_root = rank() == root;
    if (is_root && (ins.size() != 1 || ins[0].size() != std::size_t(size())))
      fail(call, rank(), "needs one list of " + std::to_string(size()) + " input tensors on the root");
    if (!is_root && !ins.empty() && !ins[0].empty()) fail(call, rank(), "takes input tensors only on the root");
    std::vector<at::Tensor> in = is_root ? ins[0] : std::vector<at::Tensor>{};
    if (is_root) check_like(in, y.user, call);
    return typed(y.user.scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::SCATTER, {y.user}, [this, y, in, root, is_root] {
        const operand f{at::Tensor(), is_root ? flatten(in) : at::empty({0}, y.user.options())};
        coll_.scatter(std::span<const E>(f.template span<E>()), y.template span<E>(), root);
        y.copy_back();
      });
    });
  }
  // all_to_all_single: splits count rows of dim 0 (none: equal blocks).
  result alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits, std::vector<int64_t>& in_splits) {
    const std::string call = "all_to_all_single";
    auto x = prepare(in, call, rank()), y = prepare(out, call, rank());
    same_type({out}, in.scalar_type(), call, rank());
    auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* which) {
      std::vector<std::size_t> c(size());
      const int64_t rows = t.dim() == 0 ? 1 : t.size(0), row = rows == 0 ? 0 : t.numel() / rows * lanes(t);
      if (splits.empty()) {
        if (rows % size() != 0)
          fail(call, rank(), std::string(which) + " has " + std::to_string(rows) + " rows, not a multiple of " +
                                 std::to_string(size()) + " ranks (pass split sizes)");
        std::fill(c.begin(), c.end(), static_cast<std::size_t>(rows / size() * row));
      } else {
        if (splits.size() != std::size_t(size()))
          fail(call, rank(), std::string(which) + " split sizes have " + std::to_string(splits.size()) + " entries for " +
                                 std::to_string(size()) + " ranks");
        for (int j = 0; j < size(); ++j) {
          if (splits[j] < 0) fail(call, rank(), std::string(which) + " split size " + std::to_string(splits[j]) + " is negative");
          c[j] = static_cast<std::size_t>(splits[j] * row);
        }
      }
      return c;
    };
    auto sends = counts(in, in_splits, "input"), recvs = counts(out, out_splits, "output");
    return typed(in.scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::ALLTOALL_BASE, {out}, [this, x, y, sends, recvs] {
        coll_.alltoall(std::span<const E>(x.template span<E>()), sends, y.template span<E>(), recvs);
        y.copy_back();
      });
    });
  }
  // all_to_all: tensor j of the inputs goes to rank j, of any size.
  result alltoall(std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins) {
    const std::string call = "all_to_all";
    if (outs.size() != std::size_t(size()) || ins.size() != std::size_t(size()))
      fail(call, rank(), "needs " + std::to_string(size()) + " input and output tensors, got " + std::to_string(ins.size()) +
                             " and " + std::to_string(outs.size()));
    for (const auto& t : outs) prepare(t, call, rank());
    for (const auto& t : ins) prepare(t, call, rank());
    same_type(outs, ins[0].scalar_type(), call, rank());
    same_type(ins, ins[0].scalar_type(), call, rank());
    std::vector<std::size_t> sends, recvs;
    for (const auto& t : ins) sends.push_back(static_cast<std::size_t>(t.numel() * lanes(t)));
    for (const auto& t : outs) recvs.push_back(static_cast<std::size_t>(t.numel() * lanes(t)));
    return typed(ins[0].scalar_type(), call, [&]<class E>() {
      return launch(coll_, c10d::OpType::ALLTOALL, outs, [this, ins, outs, sends, recvs] {
        const operand f{at::Tensor(), flatten(ins)};
        const auto total = std::accumulate(recvs.begin(), recvs.end(), std::size_t{0});
        const operand g{at::Tensor(), at::empty({static_cast<int64_t>(total)}, ins[0].options())};
        coll_.alltoall(std::span<const E>(f.template span<E>()), sends, g.template span<E>(), recvs);
        unflatten(g.flat, outs);
      });
    });
  }
  result barrier() {
    return launch(coll_, c10d::OpType::BARRIER, {}, [this] { coll_.barrier(); });
  }
  // Collectives started on this group: the same on every rank whose calls
  // match (torch compares them to find ranks that went astray).
  uint64_t sequence_number() const { return seq_; }
  void reset_sequence_number() { seq_ = 0; }
  // (deferred by the engine: they start when waited on, so their futures
  // complete then too)
  result send(std::vector<at::Tensor>& ts, int peer, int tag) {
    const std::string call = "send";
    auto x = prepare(only(ts, call, rank()), call, rank());
    return typed(x.user.scalar_type(), call, [&]<class E>() -> result {
      auto w = c10::make_intrusive<work>(rank(), c10d::OpType::SEND, std::vector<at::Tensor>{x.user});
      w->start(p2p_.send_async(std::span<const E>(x.template span<E>()), peer, tag, [w, x](std::exception_ptr e) { w->done(e); }));
      return w;
    });
  }
  // peer: a rank, or ringtree::any_source (recvAnysource); work.sourceRank() says who sent.
  result recv(std::vector<at::Tensor>& ts, int peer, int tag) {
    const std::string call = peer == ringtree::any_source ? "recv from any source" : "recv";
    auto x = prepare(only(ts, call, rank()), call, rank());
    return typed(x.user.scalar_type(), call, [&]<class E>() -> result {
      auto w = c10::make_intrusive<work>(rank(), c10d::OpType::RECV, std::vector<at::Tensor>{x.user});
      *w->source() = peer;
      w->start(p2p_.recv_async(x.template span<E>(), peer, tag, [w, x](std::exception_ptr e) {
        if (!e) x.copy_back();
        w->done(e);
      }, w->source()));
      return w;
    });
  }

 private:
  template <class F>
  result typed(at::ScalarType t, const std::string& call, F&& f) {
    return with_element(t, call, rank(), std::forward<F>(f));
  }
  // big[i] holds `times` x small[i]'s elements, one type throughout.
  void pairs(const std::vector<at::Tensor>& big, const std::vector<at::Tensor>& small, int64_t times, const std::string& call) {
    if (big.empty() || big.size() != small.size())
      fail(call, rank(), "needs as many outputs as inputs, and at least one: got " + std::to_string(big.size()) + " and " +
                             std::to_string(small.size()));
    for (std::size_t i = 0; i < big.size(); ++i) {
      prepare(big[i], call, rank());
      prepare(small[i], call, rank());
      if (big[i].scalar_type() != small[0].scalar_type() || small[i].scalar_type() != small[0].scalar_type() ||
          big[i].numel() != small[i].numel() * times)
        fail(call, rank(), "tensor pair " + std::to_string(i) + ": " + c10::toString(big[i].scalar_type()) + " x " +
                               std::to_string(big[i].numel()) + " must be " + std::to_string(times) + " x " +
                               c10::toString(small[i].scalar_type()) + " x " + std::to_string(small[i].numel()) +
                               " (one element type throughout)");
    }
  }
  void check_like(const std::vector<at::Tensor>& ts, const at::Tensor& like, const std::string& call) {
    for (const auto& t : ts) {
      prepare(t, call, rank());
      if (t.scalar_type() != like.scalar_type() || t.numel() != like.numel())
        fail(call, rank(), std::string("every tensor of the list must match the other argument: ") + c10::toString(like.scalar_type()) +
                               " x " + std::to_string(like.numel()) + ", got " + c10::toString(t.scalar_type()) + " x " +
                               std::to_string(t.numel()));
    }
  }
  // Every rank's `ins`, flattened, one after another in rank order (one
  // all-gather; on the progress thread).
  template <class E>
  at::Tensor allgather_flat(const std::vector<at::Tensor>& ins) {
    const operand f{at::Tensor(), flatten(ins)};
    const operand all{at::Tensor(), at::empty({f.flat.numel() * size()}, f.flat.options())};
    coll_.allgather(std::span<const E>(f.template span<E>()), all.template span<E>());
    return all.flat;
  }
  // Queues `run` on the communicator's progress thread.
  template <class F>
  result launch(Comm& c, c10d::OpType type, std::vector<at::Tensor> outputs, F run) {
    ++seq_;
    auto w = c10::make_intrusive<work>(rank(), type, std::move(outputs));
    w->start(c.submit(std::move(run), [w](std::exception_ptr e) { w->done(e); }));
    return w;
  }
  Comm coll_, p2p_;
  std::string transport_;
  uint64_t seq_ = 0;
};

using shm_group = group<comm_over<ringtree::shm_transport>>;
#ifdef RINGTREE_TORCH_MPI
using mpi_group = group<comm_over<ringtree::cluster_transport>>;
#endif
#ifdef RINGTREE_TORCH_NET
using net_group = group<comm_over<ringtree::net_cluster>>;
#endif

}  // namespace ringtree_torch

// Compiled once, in group_shm.cpp, group_mpi.cpp and group_net.cpp.
extern template class ringtree_torch::group<ringtree_torch::comm_over<ringtree::shm_transport>>;
#ifdef RINGTREE_TORCH_MPI
extern template class ringtree_torch::group<ringtree_torch::comm_over<ringtree::cluster_transport>>;
#endif
#ifdef RINGTREE_TORCH_NET
extern template class ringtree_torch::group<ringtree_torch::comm_over<ringtree::net_cluster>>;
#endif
