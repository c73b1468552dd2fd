// libringtree-mpi: MPI's collectives served by ringtree, for any MPI program,
// through MPI's profiling interface. Preloaded (LD_PRELOAD=libringtree-mpi.so)
// or linked before the MPI library, it defines MPI_Allreduce, MPI_Reduce,
// MPI_Bcast, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall,
// MPI_Barrier and MPI_Iallreduce. A call ringtree can serve with exactly
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

// A reduction's refusal: what ringtree cannot reduce (every rank passes the
// same datatype and op, so every rank decides alike).
const char* refused_reduction(int count, MPI_Datatype t, MPI_Op o) {
  if (count < 0) return "a negative count";
  if (!has_element(t)) return "a datatype ringtree does not reduce";
  if (!to_op(o)) return "an op ringtree does not have";
  return nullptr;
}
const char* refused_root(int root, MPI_Comm comm) {
  return root < 0 || root >= info_of(comm).size ? "a root out of range" : nullptr;
}

std::string reduction_text(long count, MPI_Datatype t, MPI_Op o) {
  return detail::cat(count, " x ", type_name(t), ", ", op_name(o));
}

// One call: to ringtree (run, on the communicator's ringtree communicator)
// or to MPI (mpi), as decided and logged here. `refusal` is asked only when
// the communicator itself is not refused; `bytes` gives the call's size
// (for the threshold across hosts).
template <class Refusal, class Bytes, class Text, class Run, class Mpi>
int serve(const char* call, MPI_Comm comm, bool async, Bytes&& bytes, Refusal&& refusal, Text&& text, Run&& run, Mpi&& mpi) {
  if (inside || !mpi_ready()) return mpi();
  const settings& s = the_settings();
  comm_info* info = nullptr;
  const char* why = refused_everywhere(comm, info);
  if (!why) why = refusal();
  layer_comm* lc = nullptr;
  if (!why) {
    try {
      lc = &layer_of(comm, *info);
    } catch (const std::exception& e) {
      return raise(comm, call, e.what());
    }
    if (!lc->one_host && async) why = "across hosts (its progress thread would call MPI)";
    else if (!lc->one_host && bytes() < s.cross_bytes) why = "across hosts below RINGTREE_MPI_CROSS_BYTES";
  }
  if (s.log) log_line(comm, call, text(), why ? std::string("MPI (") + why + ")" : std::string("ringtree"));
  if (why) return mpi();
  inside_scope in;
  try {
    run(lc->comm);
    return MPI_SUCCESS;
  } catch (const std::exception& e) {
    return raise(comm, call, e.what());
  }
}

using comm_t = communicator<cluster_transport>;

}  // namespace

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype t, MPI_Op o, MPI_Comm comm) {
  return serve("MPI_Allreduce", comm, false, [&] { return signature_bytes(count, t); },
      [&] { return refused_reduction(count, t, o); }, [&] { return reduction_text(count, t, o); },
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
  return serve("MPI_Iallreduce", comm, true, [] { return std::size_t{0}; },
      [&] { return refused_reduction(count, t, o); }, [&] { return reduction_text(count, t, o); },
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
  return serve("MPI_Reduce", comm, false, [&] { return signature_bytes(count, t); },
      [&] {
        const char* why = refused_reduction(count, t, o);
        return why ? why : refused_root(root, comm);
      },
      [&] { return detail::cat(reduction_text(count, t, o), ", root ", root); },
      [&](comm_t& c) {
        const op ro = *to_op(o);
        with_element(t, [&]<class E>() {
          const auto n = static_cast<std::size_t>(count);
          const bool at_root = c.rank() == root;
          std::span<E> out = at_root ? std::span<E>(static_cast<E*>(recvbuf), n) : std::span<E>();
          if (!at_root && sendbuf == MPI_IN_PLACE)
            throw error("MPI_Reduce", c.rank(), detail::cat("MPI_IN_PLACE on rank ", c.rank(), ", which is not the root (", root, ")"));
          const E* in = at_root && sendbuf == MPI_IN_PLACE ? out.data() : static_cast<const E*>(sendbuf);
          c.reduce(std::span<const E>(in, n), out, root, ro);
        });
      },
      [&] { return PMPI_Reduce(sendbuf, recvbuf, count, t, o, root, comm); });
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype t, MPI_Op o, MPI_Comm comm) {
  return serve("MPI_Reduce_scatter_block", comm, false, [&] { return signature_bytes(recvcount, t) * static_cast<std::size_t>(info_of(comm).size); },
      [&] { return refused_reduction(recvcount, t, o); }, [&] { return reduction_text(recvcount, t, o); },
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
  return serve("MPI_Bcast", comm, false, [&] { return signature_bytes(count, t); },
      [&] { return count < 0 ? "a negative count" : refused_root(root, comm); },
      [&] { return detail::cat(count, " x ", type_name(t), ", root ", root); },
      [&](comm_t& c) {
        bytes_of b(buf, count, t, comm, c.rank() == root);
        c.broadcast(b.span(), root);
        if (c.rank() != root) b.finish();
      },
      [&] { return PMPI_Bcast(buf, count, t, root, comm); });
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return serve("MPI_Allgather", comm, false, [&] { return signature_bytes(recvcount, recvtype) * static_cast<std::size_t>(info_of(comm).size); },
      [&]() -> const char* { return recvcount < 0 || (sendbuf != MPI_IN_PLACE && sendcount < 0) ? "a negative count" : nullptr; },
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
  return serve("MPI_Alltoall", comm, false, [&] { return signature_bytes(recvcount, recvtype) * static_cast<std::size_t>(info_of(comm).size); },
      [&]() -> const char* { return recvcount < 0 || (sendbuf != MPI_IN_PLACE && sendcount < 0) ? "a negative count" : nullptr; },
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
  return serve("MPI_Barrier", comm, false, [] { return SIZE_MAX; }, [] { return static_cast<const char*>(nullptr); }, [] { return std::string(); },
               [](comm_t& c) { c.barrier(); }, [&] { return PMPI_Barrier(comm); });
}

// ---- completing Iallreduce's requests, whichever call asks ----

int MPI_Wait(MPI_Request* r, MPI_Status* s) {
  if (ours(*r)) settle(*r, true);
  return PMPI_Wait(r, s);
}
int MPI_Test(MPI_Request* r, int* flag, MPI_Status* s) {
  if (ours(*r)) settle(*r, false);
  return PMPI_Test(r, flag, s);
}
int MPI_Waitall(int n, MPI_Request rs[], MPI_Status ss[]) {
  settle_all(rs, n, true);
  return PMPI_Waitall(n, rs, ss);
}
int MPI_Testall(int n, MPI_Request rs[], int* flag, MPI_Status ss[]) {
  settle_all(rs, n, false);
  return PMPI_Testall(n, rs, flag, ss);
}
int MPI_Testany(int n, MPI_Request rs[], int* index, int* flag, MPI_Status* s) {
  settle_all(rs, n, false);
  return PMPI_Testany(n, rs, index, flag, s);
}
int MPI_Testsome(int n, MPI_Request rs[], int* outcount, int indices[], MPI_Status ss[]) {
  settle_all(rs, n, false);
  return PMPI_Testsome(n, rs, outcount, indices, ss);
}
// Waiting for any of several, some ours: MPI cannot wait on what the layer
// completes, so test both in turn.
int MPI_Waitany(int n, MPI_Request rs[], int* index, MPI_Status* s) {
  if (!std::any_of(rs, rs + n, ours)) return PMPI_Waitany(n, rs, index, s);
  for (int flag = 0;; sched_yield()) {
    settle_all(rs, n, false);
    if (const int rc = PMPI_Testany(n, rs, index, &flag, s); rc != MPI_SUCCESS || flag) return rc;
  }
}
int MPI_Waitsome(int n, MPI_Request rs[], int* outcount, int indices[], MPI_Status ss[]) {
  if (!std::any_of(rs, rs + n, ours)) return PMPI_Waitsome(n, rs, outcount, indices, ss);
  for (;; sched_yield()) {
    settle_all(rs, n, false);
    if (const int rc = PMPI_Testsome(n, rs, outcount, indices, ss); rc != MPI_SUCCESS || *outcount != 0) return rc;
  }
}
int MPI_Request_free(MPI_Request* r) {
  if (!ours(*r)) return PMPI_Request_free(r);
  forget(*r);
  *r = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

// The ringtree communicators go (collectively, as they were made) while MPI
// is still there.
int MPI_Finalize() {
  if (mpi_ready()) {
    inside_scope in;
    drop_all();
  }
  return PMPI_Finalize();
}

}  // extern "C"
