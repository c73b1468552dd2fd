// libringtree-mpi: MPI's collectives served by ringtree, for any MPI program,
// through MPI's profiling interface. Preloaded (LD_PRELOAD=libringtree-mpi.so)
// or linked before the MPI library, it defines MPI_Allreduce, MPI_Reduce,
// MPI_Bcast, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall,
// MPI_Barrier and MPI_Iallreduce (and MPI_Type_free and MPI_Op_free, to
// note that a handle is gone). A call ringtree can serve with exactly
// MPI's semantics runs on the ringtree communicator cached on its MPI
// communicator (shared memory within a host, MPI between hosts); any other
// goes to MPI's own (PMPI_*) untouched:
//
//   reductions   the predefined integer types, float and double, with
//                MPI_SUM, MPI_PROD, MIN or MAX (not user ops, MAXLOC, the
//                logical and bitwise ops, long double, complex)
//   data moving  every datatype: predefined ones without gaps as they lie,
//                others packed (MPI_Pack), since ranks may pass different
//                datatypes of the same signature
//   never        intercommunicators, one-rank communicators, callers in
//                MPI_THREAD_MULTIPLE, calls across hosts below
//                RINGTREE_MPI_CROSS_BYTES (default 32 MiB; MPI's own is
//                faster there), MPI_Iallreduce across hosts (its progress
//                thread would call MPI), and anything MPI would reject
//                (negative counts, a bad root) so that MPI reports it
//
// RINGTREE_MPI=0 turns the layer off; RINGTREE_MPI_LOG=1 prints a line per
// call saying which path ran. Errors are MPI errors (layer.hpp, raise).
#include <sched.h>

#include <algorithm>

#include "layer.hpp"

using namespace ringtree;
using namespace ringtree::mpi_layer;

namespace {

bool mpi_ready() {
  static bool ready = false;
  if (!ready) {
    int init = 0, fin = 0;
    PMPI_Initialized(&init);
    PMPI_Finalized(&fin);
    ready = init && !fin;
  }
  return ready;
}

// Why a call on `comm` goes to MPI whatever its arguments, or null.
const char* refused_everywhere(MPI_Comm comm, comm_info*& info) {
  const settings& s = the_settings();
  if (!s.enabled) return "RINGTREE_MPI=0";
  if (s.thread_multiple) return "MPI_THREAD_MULTIPLE";
  if (comm == MPI_COMM_NULL) return "MPI_COMM_NULL";
  info = &info_of(comm);
  if (info->inter) return "an intercommunicator";
  if (info->size < 2) return "one rank";
  return nullptr;
}

// A reduction's refusal: what ringtree cannot reduce with MPI's own
// element rules, and what MPI would reject (so that MPI reports it). Every
// rank passes the same datatype and op, so every rank decides alike.
// MPI_MIN and MPI_MAX of floating point: Open MPI keeps `a > b ? a : b` in
// the order its algorithm combines the ranks, so which NaN or which zero
// comes out depends on that order; only MPI's own call gives MPI's bytes.
const char* refused_reduction(int count, MPI_Datatype t, MPI_Op o) {
  if (count < 0) return "a negative count";
  if (t == MPI_DATATYPE_NULL) return "MPI_DATATYPE_NULL";
  if (o == MPI_OP_NULL) return "MPI_OP_NULL";
  if (!has_element(t)) return "a datatype ringtree does not reduce";
  if (!to_op(o)) return "an op ringtree does not have";
  if ((o == MPI_MIN || o == MPI_MAX) && (t == MPI_FLOAT || t == MPI_DOUBLE)) return "MIN and MAX of floating point: MPI's NaN and signed-zero bytes";
  return nullptr;
}
// The same buffer as input and output without MPI_IN_PLACE is erroneous:
// MPI decides what happens (Open MPI's MPI_Allreduce returns
// MPI_ERR_BUFFER).
const char* refused_alias(const void* sendbuf, const void* recvbuf, long count) {
  return count > 0 && sendbuf == recvbuf && sendbuf != MPI_IN_PLACE ? "the send buffer is the receive buffer, not MPI_IN_PLACE" : nullptr;
}
const char* refused_root(int root, MPI_Comm comm) {
  return root < 0 || root >= info_of(comm).size ? "a root out of range" : nullptr;
}
// The data-moving calls' refusals (each rank may pass its own datatypes).
const char* refused_movement(const void* sendbuf, int sendcount, MPI_Datatype sendtype, const void* recvbuf, int recvcount, MPI_Datatype recvtype) {
  const bool in_place = sendbuf == MPI_IN_PLACE;
  if (recvcount < 0 || (!in_place && sendcount < 0)) return "a negative count";
  if (recvtype == MPI_DATATYPE_NULL || (!in_place && sendtype == MPI_DATATYPE_NULL)) return "MPI_DATATYPE_NULL";
  return refused_alias(sendbuf, recvbuf, recvcount);
}
template <class... Why>
const char* first_of(Why... why) {
  const char* found = nullptr;
  ((found = found ? found : why()), ...);
  return found;
}

std::string reduction_text(long count, MPI_Datatype t, MPI_Op o) {
  return detail::cat(count, " x ", type_name(t), ", ", op_name(o));
}

// One call: to ringtree (run, on the communicator's ringtree communicator)
// or to MPI (mpi), as decided and logged here. `refusal` is asked only when
// the communicator itself is not refused; `bytes` gives the call's size
// (routes.hpp says which bytes).
// `count`: the call's count (0: MPI's own returns at once, and so does the
// layer, by MPI's own or by its last answer to the same arguments, unless
// the log wants a line or a request of the layer's may still be running: a
// call routed to MPI completes those first).
// `t`: its datatype (the receive side's, for the data-moving calls). A call
// whose count and datatype were just measured faster on MPI goes there at
// once (MPI checks its arguments): the route costs one compare.
// A call that goes to MPI's own still completes the layer's requests on
// `info`'s communicator first (a freed MPI_Iallreduce completes before the
// next blocking call on its communicator returns).
template <class Mpi>
int to_mpi(call_kind kind, MPI_Comm comm, comm_info* info, Mpi& mpi) {
  if (info && info->lc) try {
      info->lc->comm.quiesce();
    } catch (const std::exception& e) {
      return raise(comm, call_names[std::size_t(kind)].data(), e.what());
    }
  return mpi();
}

// A call of no elements that MPI's own serves (it returns at once): the
// arguments it accepted are kept for the next such call (layer.hpp,
// accepted_empty). Not MPI_Iallreduce's: its answer is a request too.
template <class Mpi>
int empty_to_mpi(call_kind kind, MPI_Comm comm, const call_args& args, Mpi& mpi) {
  const int rc = mpi();
  const settings& s = the_settings();
  if (mpi_answers_empty_alone && rc == MPI_SUCCESS && kind != call_kind::iallreduce && s.enabled && !s.thread_multiple && comm != MPI_COMM_NULL) {
    comm_info& info = info_of(comm);
    if (!info.inter) info.empty[std::size_t(kind)] = {empty_epoch, args};
  }
  return rc;
}

template <class Refusal, class Bytes, class Text, class Run, class Mpi>
[[gnu::noinline]] int serve_long(call_kind kind, MPI_Comm comm, long count, MPI_Datatype t, const call_args& args, Bytes&& bytes,
                                 Refusal&& refusal, Text&& text, Run&& run, Mpi&& mpi);
// A call of no elements on the last communicator asked about, with the
// arguments (args_of: all but the count) MPI's own last accepted: MPI's
// answer, MPI_SUCCESS. Each call asks this first, before it builds the
// pieces serve takes (building them cost more than the answer).
inline bool answered(call_kind kind, MPI_Comm comm, long count, const call_args& args) {
  return count == 0 && comm == last_comm && !inside && last_info->empty[std::size_t(kind)].matches(args);
}
// `args`: as answered() took them, kept where MPI's own accepts them.
template <class Refusal, class Bytes, class Text, class Run, class Mpi>
int serve(call_kind kind, MPI_Comm comm, long count, MPI_Datatype t, const call_args& args, Bytes&& bytes, Refusal&& refusal, Text&& text,
          Run&& run, Mpi&& mpi) {
  // The count and datatype just measured faster on MPI's own, on the last
  // communicator asked about: a compare, then MPI (the memo is set only
  // where the log is off, on a communicator the layer serves). The rest is
  // out of line, so that this path costs no frame of its own.
  if (comm == last_comm && !inside) {
    const call_to_mpi& memo = last_info->to_mpi[std::size_t(kind)];
    if (memo.set && memo.count == count && memo.t == t && last_info->lc) return to_mpi(kind, comm, last_info, mpi);
  }
  return serve_long(kind, comm, count, t, args, bytes, refusal, text, run, mpi);
}
template <class Refusal, class Bytes, class Text, class Run, class Mpi>
int serve_long(call_kind kind, MPI_Comm comm, long count, MPI_Datatype t, const call_args& args, Bytes&& bytes, Refusal&& refusal,
               Text&& text, Run&& run, Mpi&& mpi) {
  const char* call = call_names[std::size_t(kind)].data();
  comm_info* info = nullptr;
  auto to_mpi = [&] { return ::to_mpi(kind, comm, info, mpi); };
  if (inside || !mpi_ready()) return mpi();
  if (count == 0 && !the_settings().log && !requests_pending()) return empty_to_mpi(kind, comm, args, mpi);
  const settings& s = the_settings();
  const char* why = refused_everywhere(comm, info);
  if (!why) why = refusal();
  const std::size_t size = why ? 0 : bytes();  // (asked once, and only of a call not refused: a null datatype has none)
  // (MPI's own returns at once, without a word to the other ranks)
  if (!why && kind != call_kind::barrier && size == 0) why = "nothing to move";
  layer_comm* lc = nullptr;
  if (!why) {
    try {
      lc = &layer_of(comm, *info, call);
    } catch (const std::exception& e) {
      return raise(comm, call, e.what());
    }
    if (!lc->one_host && kind == call_kind::iallreduce) why = "across hosts (its progress thread would call MPI)";
    else if (!lc->one_host && size < s.cross_bytes) why = "across hosts below RINGTREE_MPI_CROSS_BYTES";
    else if (s.routes && lc->routes.get(kind, size) == route::mpi) {
      why = "measured faster";
      if (!s.log) info->to_mpi[std::size_t(kind)] = {true, count, t};  // (with the log on, every call takes the long way and says so)
    }
  }
  if (s.log) log_line(comm, call, text(), why ? std::string("MPI (") + why + ")" : std::string("ringtree"));
  if (why) return to_mpi();
  inside_scope in;
  try {
    run(lc->comm);
    return MPI_SUCCESS;
  } catch (const std::exception& e) {
    return raise(comm, call, e.what());
  }
}

using comm_t = communicator<cluster_transport>;

// The handles a completion call was given (MPI sets those it completes to
// MPI_REQUEST_NULL): copied only while a failed call's code is owed.
class handles {
 public:
  handles(const MPI_Request* rs, int n) {
    if (errors_owed()) copy_.assign(rs, rs + n);
  }
  const MPI_Request* data() const noexcept { return copy_.empty() ? nullptr : copy_.data(); }
 private:
  std::vector<MPI_Request> copy_;
};

// After an MPI completion call returned rc over n requests (`was` as they
// were before it, null when nothing is owed): the code owed for the layer's
// requests it completed. The forms that complete one (Wait, Test, the
// "any" ones): its code, in `one` too. Those that complete several:
// MPI_ERR_IN_STATUS, each of `many` (beside its index in `indices`, for
// the "some" ones) saying its own.
int owing(int n, const MPI_Request* was, const MPI_Request* now, int rc, MPI_Status* one, MPI_Status* many = nullptr,
          const int* indices = nullptr, int reported = 0) {
  if (was == nullptr || rc != MPI_SUCCESS || !errors_owed()) return rc;
  int result = MPI_SUCCESS;
  for (int i = 0; i < n; ++i) {
    if (was[i] == MPI_REQUEST_NULL || now[i] != MPI_REQUEST_NULL) continue;  // not completed by this call
    const int code = owed(was[i], true);
    if (code == MPI_SUCCESS) continue;
    if (many == nullptr) {
      if (one != MPI_STATUS_IGNORE) one->MPI_ERROR = code;
      result = code;
      continue;
    }
    result = MPI_ERR_IN_STATUS;
    const int slot = indices ? static_cast<int>(std::find(indices, indices + reported, i) - indices) : i;
    if (many != MPI_STATUSES_IGNORE) many[slot].MPI_ERROR = code;
  }
  return result;
}
}  // namespace

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype t, MPI_Op o, MPI_Comm comm) {
  const call_args args = args_of(sendbuf, recvbuf, t, o);
  if (answered(call_kind::allreduce, comm, count, args)) return MPI_SUCCESS;
  return serve(call_kind::allreduce, comm, count, t, args, [&] { return signature_bytes(count, t); },
      [&] { return first_of([&] { return refused_reduction(count, t, o); }, [&] { return refused_alias(sendbuf, recvbuf, count); }); },
      [&] { return reduction_text(count, t, o); },
      [&](comm_t& c) {
        const op ro = *to_op(o);
        with_element(t, [&]<class E>() {
          std::span<E> out(static_cast<E*>(recvbuf), static_cast<std::size_t>(count));
          if (sendbuf == MPI_IN_PLACE) c.allreduce(out, ro);
          else c.allreduce(std::span<const E>(static_cast<const E*>(sendbuf), out.size()), out, ro);
        });
      },
      [&] { return PMPI_Allreduce(sendbuf, recvbuf, count, t, o, comm); });
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype t, MPI_Op o, MPI_Comm comm, MPI_Request* req) {
  return serve(call_kind::iallreduce, comm, count, t, {}, [&] { return signature_bytes(count, t); },
      [&] { return first_of([&] { return refused_reduction(count, t, o); }, [&] { return refused_alias(sendbuf, recvbuf, count); }); }, [&] { return reduction_text(count, t, o); },
      [&](comm_t& c) {
        const op ro = *to_op(o);
        with_element(t, [&]<class E>() {
          std::span<E> out(static_cast<E*>(recvbuf), static_cast<std::size_t>(count));
          *req = start_request(comm, sendbuf == MPI_IN_PLACE ? c.allreduce_async(out, ro)
                                                              : c.allreduce_async(std::span<const E>(static_cast<const E*>(sendbuf), out.size()), out, ro));
        });
      },
      [&] { return PMPI_Iallreduce(sendbuf, recvbuf, count, t, o, comm, req); });
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype t, MPI_Op o, int root, MPI_Comm comm) {
  const call_args args = args_of(sendbuf, recvbuf, t, o, root);
  if (answered(call_kind::reduce, comm, count, args)) return MPI_SUCCESS;
  return serve(call_kind::reduce, comm, count, t, args, [&] { return signature_bytes(count, t); },
      [&] {
        // (at the root: recvbuf is used only there)
        const bool at_root = info_of(comm).rank == root;
        return first_of([&] { return refused_reduction(count, t, o); }, [&] { return refused_root(root, comm); },
                        [&] { return at_root ? refused_alias(sendbuf, recvbuf, count) : nullptr; },
                        [&] { return !at_root && sendbuf == MPI_IN_PLACE ? "MPI_IN_PLACE on a rank that is not the root" : nullptr; });
      },
      [&] { return detail::cat(reduction_text(count, t, o), ", root ", root); },
      [&](comm_t& c) {
        const op ro = *to_op(o);
        with_element(t, [&]<class E>() {
          const auto n = static_cast<std::size_t>(count);
          const bool at_root = c.rank() == root;
          std::span<E> out = at_root ? std::span<E>(static_cast<E*>(recvbuf), n) : std::span<E>();
          const E* in = at_root && sendbuf == MPI_IN_PLACE ? out.data() : static_cast<const E*>(sendbuf);
          c.reduce(std::span<const E>(in, n), out, root, ro);
        });
      },
      [&] { return PMPI_Reduce(sendbuf, recvbuf, count, t, o, root, comm); });
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype t, MPI_Op o, MPI_Comm comm) {
  const call_args args = args_of(sendbuf, recvbuf, t, o);
  if (answered(call_kind::reduce_scatter_block, comm, recvcount, args)) return MPI_SUCCESS;
  return serve(call_kind::reduce_scatter_block, comm, recvcount, t, args, [&] { return signature_bytes(recvcount, t) * static_cast<std::size_t>(info_of(comm).size); },
      [&] { return first_of([&] { return refused_reduction(recvcount, t, o); }, [&] { return refused_alias(sendbuf, recvbuf, recvcount); }); },
      [&] { return reduction_text(recvcount, t, o); },
      [&](comm_t& c) {
        const op ro = *to_op(o);
        with_element(t, [&]<class E>() {
          const auto n = static_cast<std::size_t>(recvcount), all = n * static_cast<std::size_t>(c.size());
          std::span<E> out(static_cast<E*>(recvbuf), n);
          if (sendbuf == MPI_IN_PLACE) {  // the input is recvbuf, the result its first block
            std::vector<E> in(static_cast<const E*>(recvbuf), static_cast<const E*>(recvbuf) + all);
            c.reduce_scatter(in, out, ro);
          } else {
            c.reduce_scatter(std::span<const E>(static_cast<const E*>(sendbuf), all), out, ro);
          }
        });
      },
      [&] { return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, t, o, comm); });
}

int MPI_Bcast(void* buf, int count, MPI_Datatype t, int root, MPI_Comm comm) {
  const call_args args = args_of(buf, t, root);
  if (answered(call_kind::bcast, comm, count, args)) return MPI_SUCCESS;
  return serve(call_kind::bcast, comm, count, t, args, [&] { return signature_bytes(count, t); },
      [&] { return count < 0 ? "a negative count" : t == MPI_DATATYPE_NULL ? "MPI_DATATYPE_NULL" : refused_root(root, comm); },
      [&] { return detail::cat(count, " x ", type_name(t), ", root ", root); },
      [&](comm_t& c) {
        bytes_of b(buf, count, t, comm, c.rank() == root);
        c.broadcast(b.span(), root);
        if (c.rank() != root) b.finish();
      },
      [&] { return PMPI_Bcast(buf, count, t, root, comm); });
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const call_args args = args_of(sendbuf, sendcount, sendtype, recvbuf, recvtype);
  if (answered(call_kind::allgather, comm, recvcount, args)) return MPI_SUCCESS;
  return serve(call_kind::allgather, comm, recvcount, recvtype, args, [&] { return signature_bytes(recvcount, recvtype) * static_cast<std::size_t>(info_of(comm).size); },
      [&] { return refused_movement(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype); },
      [&] { return detail::cat(recvcount, " x ", type_name(recvtype), " from each rank"); },
      [&](comm_t& c) {
        const bool in_place = sendbuf == MPI_IN_PLACE;
        bytes_of out(recvbuf, long{recvcount} * c.size(), recvtype, comm, in_place);
        const std::size_t block = out.span().size() / static_cast<std::size_t>(c.size());
        if (in_place) {
          c.allgather(out.span().subspan(block * static_cast<std::size_t>(c.rank()), block), out.span());
        } else {
          bytes_of in(sendbuf, sendcount, sendtype, comm, true);
          c.allgather(in.span(), out.span());
        }
        out.finish();
      },
      [&] { return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm); });
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const call_args args = args_of(sendbuf, sendcount, sendtype, recvbuf, recvtype);
  if (answered(call_kind::alltoall, comm, recvcount, args)) return MPI_SUCCESS;
  return serve(call_kind::alltoall, comm, recvcount, recvtype, args, [&] { return signature_bytes(recvcount, recvtype) * static_cast<std::size_t>(info_of(comm).size); },
      [&] { return refused_movement(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype); },
      [&] { return detail::cat(recvcount, " x ", type_name(recvtype), " to and from each rank"); },
      [&](comm_t& c) {
        bytes_of out(recvbuf, long{recvcount} * c.size(), recvtype, comm, sendbuf == MPI_IN_PLACE);
        if (sendbuf == MPI_IN_PLACE) {  // the input is recvbuf: send a copy
          std::vector<std::uint8_t> in(out.span().begin(), out.span().end());
          c.alltoall(in, out.span());
        } else {
          bytes_of in(sendbuf, long{sendcount} * c.size(), sendtype, comm, true);
          c.alltoall(in.span(), out.span());
        }
        out.finish();
      },
      [&] { return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm); });
}

int MPI_Barrier(MPI_Comm comm) {
  return serve(call_kind::barrier, comm, -1, MPI_DATATYPE_NULL, {}, [] { return SIZE_MAX; }, [] { return static_cast<const char*>(nullptr); }, [] { return std::string(); },
               [](comm_t& c) { c.barrier(); }, [&] { return PMPI_Barrier(comm); });
}

// ---- completing Iallreduce's requests, whichever call asks ----

int MPI_Wait(MPI_Request* r, MPI_Status* s) {
  const MPI_Request was = *r;
  if (ours(was)) settle(was, true);
  return owing(1, &was, r, PMPI_Wait(r, s), s);
}
int MPI_Test(MPI_Request* r, int* flag, MPI_Status* s) {
  const MPI_Request was = *r;
  if (ours(was)) settle(was, false);
  return owing(1, &was, r, PMPI_Test(r, flag, s), s);
}
// (MPI_Request_get_status leaves the request to Wait or Test, and so its code)
int MPI_Request_get_status(MPI_Request r, int* flag, MPI_Status* s) {
  if (ours(r)) settle(r, false);
  const int rc = PMPI_Request_get_status(r, flag, s);
  const int code = rc == MPI_SUCCESS && *flag ? owed(r, false) : MPI_SUCCESS;
  if (code != MPI_SUCCESS && s != MPI_STATUS_IGNORE) s->MPI_ERROR = code;
  return code != MPI_SUCCESS ? code : rc;
}
int MPI_Waitall(int n, MPI_Request rs[], MPI_Status ss[]) {
  settle_all(rs, n, true);
  const handles was(rs, n);
  return owing(n, was.data(), rs, PMPI_Waitall(n, rs, ss), MPI_STATUS_IGNORE, ss);
}
int MPI_Testall(int n, MPI_Request rs[], int* flag, MPI_Status ss[]) {
  settle_all(rs, n, false);
  const handles was(rs, n);
  return owing(n, was.data(), rs, PMPI_Testall(n, rs, flag, ss), MPI_STATUS_IGNORE, ss);
}
int MPI_Testany(int n, MPI_Request rs[], int* index, int* flag, MPI_Status* s) {
  settle_all(rs, n, false);
  const handles was(rs, n);
  return owing(n, was.data(), rs, PMPI_Testany(n, rs, index, flag, s), s);
}
int MPI_Testsome(int n, MPI_Request rs[], int* outcount, int indices[], MPI_Status ss[]) {
  settle_all(rs, n, false);
  const handles was(rs, n);
  const int rc = PMPI_Testsome(n, rs, outcount, indices, ss);
  return owing(n, was.data(), rs, rc, MPI_STATUS_IGNORE, ss, indices, *outcount);
}
// Waiting for any of several, some ours: MPI cannot wait on what the layer
// completes, so test both in turn.
int MPI_Waitany(int n, MPI_Request rs[], int* index, MPI_Status* s) {
  if (!std::any_of(rs, rs + n, ours)) {
    const handles was(rs, n);
    return owing(n, was.data(), rs, PMPI_Waitany(n, rs, index, s), s);
  }
  for (int flag = 0;; sched_yield())
    if (const int rc = MPI_Testany(n, rs, index, &flag, s); rc != MPI_SUCCESS || flag) return rc;
}
int MPI_Waitsome(int n, MPI_Request rs[], int* outcount, int indices[], MPI_Status ss[]) {
  if (!std::any_of(rs, rs + n, ours)) {
    const handles was(rs, n);
    const int rc = PMPI_Waitsome(n, rs, outcount, indices, ss);
    return owing(n, was.data(), rs, rc, MPI_STATUS_IGNORE, ss, indices, *outcount);
  }
  for (;; sched_yield())
    if (const int rc = MPI_Testsome(n, rs, outcount, indices, ss); rc != MPI_SUCCESS || *outcount != 0) return rc;
}
int MPI_Request_free(MPI_Request* r) {
  if (!ours(*r)) {
    if (errors_owed()) owed(*r, true);  // (its error went to the communicator's handler)
    return PMPI_Request_free(r);
  }
  forget(*r);
  *r = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

// A freed datatype's or op's handle may come back as another's: calls of
// no elements ask MPI again (layer.hpp, accepted_empty), and so does what
// the layer knows of a datatype (types_epoch).
int MPI_Type_free(MPI_Datatype* t) {
  ++empty_epoch, ++types_epoch;
  return PMPI_Type_free(t);
}
int MPI_Op_free(MPI_Op* o) {
  ++empty_epoch;
  return PMPI_Op_free(o);
}

// The ringtree communicators go (collectively, as they were made) while MPI
// is still there.
int MPI_Finalize() {
  ++empty_epoch;
  if (mpi_ready()) {
    inside_scope in;
    drop_all();
  }
  return PMPI_Finalize();
}

}  // extern "C"
