// libringtree-mpi's pieces (calls.cpp holds the MPI_* entry points):
// which calls ringtree serves, the ringtree communicator cached on each MPI
// communicator, buffers as bytes, and errors turned into MPI errors.
#pragma once
#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ringtree/mpi.hpp>

#include "routes.hpp"

namespace ringtree::mpi_layer {

// The settings, read once (RINGTREE_MPI, RINGTREE_MPI_LOG,
// RINGTREE_MPI_CROSS_BYTES) at the first call MPI has been initialised for.
struct settings {
  bool enabled = true;
  bool log = false;
  // Across hosts ringtree's collectives run over MPI's point to point, which
  // loses to MPI's own below this size (bench/RESULTS.md); within a host
  // shared memory wins at every size.
  std::size_t cross_bytes = std::size_t{32} << 20;
  bool thread_multiple = false;  // the caller asked for MPI_THREAD_MULTIPLE: MPI serves it
  bool routes = true;            // RINGTREE_MPI_ROUTES=0: ringtree serves what it can, whatever was measured
};
const settings& the_settings();

// Calls made while the layer itself runs (ringtree's own use of MPI:
// MPI_Bcast when a communicator is made, ...) go straight to MPI.
// (initial-exec: a plain load, not a call to __tls_get_addr per MPI call;
// the layer is loaded at start, preloaded or linked.)
inline thread_local bool inside __attribute__((tls_model("initial-exec"))) = false;
struct inside_scope {
  bool was = inside;
  inside_scope() { inside = true; }
  ~inside_scope() { inside = was; }
};

// MPI's progress, for ringtree's waits (core/wait.hpp, while_waiting) and
// the layer's own: a no-op on threads not inside a call of the layer.
void mpi_progress() noexcept;

// The ringtree communicator of one MPI communicator, made at its first
// call that ringtree serves (collectively).
struct layer_comm {
  communicator<cluster_transport> comm;
  bool one_host;
  route_table routes;  // ringtree-mpi-tune's measurements (rank 0's file, on every rank)
  explicit layer_comm(MPI_Comm c);
};
// What the layer knows of an MPI communicator, kept as its attribute (so it
// goes when the communicator is freed) and cached for the last one asked
// about: a call's own cost stays a compare or two.
// Per call, the last count and datatype its routes sent to MPI ("measured
// faster"): calls repeat their sizes, and these need no other look.
struct call_to_mpi {
  bool set = false;  // (unset never matches: MPI_Barrier's count -1 and null type were a match)
  long count = -1;
  MPI_Datatype t = MPI_DATATYPE_NULL;
};
// Per call, the last arguments of a call of no elements that MPI's own
// accepted. Open MPI checks such a call's arguments and returns without a
// word to the other ranks (4.1's bindings: count 0 on an
// intracommunicator), so the same arguments again get MPI's answer without
// asking it: a compare of a few words instead of a call. Whatever could
// change that answer moves `empty_epoch` on: a freed datatype or op (its
// handle may come back as another), a layer request started (a call that
// goes to MPI completes those first), MPI_Finalize. A freed communicator
// takes its comm_info along.
#ifdef OPEN_MPI
inline constexpr bool mpi_answers_empty_alone = true;
#else
inline constexpr bool mpi_answers_empty_alone = false;  // (not checked for other MPIs)
#endif
using call_args = std::array<std::uintptr_t, 6>;
inline std::uint64_t empty_epoch = 1;
// Moves on when a datatype is freed: what the layer learnt of a datatype
// handle (its size, whether it is plain: support.cpp, facts_of) is asked
// of MPI again.
inline std::uint64_t types_epoch = 1;
template <class... A>
call_args args_of(A... a) {
  auto word = []<class W>(W w) {
    if constexpr (std::is_pointer_v<W>) return reinterpret_cast<std::uintptr_t>(w);
    else return static_cast<std::uintptr_t>(w);
  };
  return {word(a)...};
}
struct accepted_empty {
  std::uint64_t epoch = 0;  // (0 never matches)
  call_args args{};
  // (six xors, not the call to memcmp that std::array's == becomes: that
  // call alone cost more than MPI's own answer)
  bool matches(const call_args& a) const noexcept {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return ((epoch ^ empty_epoch) | ... | (args[I] ^ a[I])) == 0;
    }(std::make_index_sequence<std::tuple_size_v<call_args>>{});
  }
};
struct comm_info {
  bool inter = false;
  int size = 0, rank = -1;
  std::unique_ptr<layer_comm> lc;  // made by layer_of
  std::array<call_to_mpi, call_kinds> to_mpi{};
  std::array<accepted_empty, call_kinds> empty{};
};
// The communicator asked about last, and what the layer knows of it
// (support.cpp keeps them): a call on it reads its info without a call.
// While there is none, last_comm is `no_comm`, a value no call passes (a
// null handle; MPI_COMM_NULL is a real one that a call may pass, and it
// matched then, with no info behind it).
inline constexpr MPI_Comm no_comm = MPI_Comm{};
extern MPI_Comm last_comm;
extern comm_info* last_info;
comm_info& info_of_slow(MPI_Comm comm);
inline comm_info& info_of(MPI_Comm comm) { return comm == last_comm ? *last_info : info_of_slow(comm); }
// Makes it on the first call served (every rank is in `call`), after
// checking that every rank runs the layer.
layer_comm& layer_of(MPI_Comm comm, comm_info& info, const char* call);
void drop_all();                                       // before MPI_Finalize

// The element type ringtree reduces a predefined MPI datatype as; calls
// f.template operator()<E>() and returns true, or returns false.
template <class I>
using exact_int = std::conditional_t<std::is_signed_v<I>,
    std::conditional_t<sizeof(I) == 1, std::int8_t, std::conditional_t<sizeof(I) == 2, std::int16_t, std::conditional_t<sizeof(I) == 4, std::int32_t, std::int64_t>>>,
    std::conditional_t<sizeof(I) == 1, std::uint8_t, std::conditional_t<sizeof(I) == 2, std::uint16_t, std::conditional_t<sizeof(I) == 4, std::uint32_t, std::uint64_t>>>>;

template <class F>
bool with_element(MPI_Datatype t, F&& f) {
  auto as = [&]<class E>() { f.template operator()<E>(); return true; };
  if (t == MPI_FLOAT) return as.template operator()<float>();
  if (t == MPI_DOUBLE) return as.template operator()<double>();
  if (t == MPI_INT || t == MPI_INT32_T) return as.template operator()<exact_int<int>>();
  if (t == MPI_UNSIGNED || t == MPI_UINT32_T) return as.template operator()<exact_int<unsigned>>();
  if (t == MPI_LONG) return as.template operator()<exact_int<long>>();
  if (t == MPI_UNSIGNED_LONG) return as.template operator()<exact_int<unsigned long>>();
  if (t == MPI_LONG_LONG || t == MPI_LONG_LONG_INT || t == MPI_INT64_T) return as.template operator()<exact_int<long long>>();
  if (t == MPI_AINT) return as.template operator()<exact_int<MPI_Aint>>();
  if (t == MPI_OFFSET) return as.template operator()<exact_int<MPI_Offset>>();
  if (t == MPI_COUNT) return as.template operator()<exact_int<MPI_Count>>();
  if (t == MPI_UNSIGNED_LONG_LONG || t == MPI_UINT64_T) return as.template operator()<exact_int<unsigned long long>>();
  if (t == MPI_SHORT || t == MPI_INT16_T) return as.template operator()<exact_int<short>>();
  if (t == MPI_UNSIGNED_SHORT || t == MPI_UINT16_T) return as.template operator()<exact_int<unsigned short>>();
  if (t == MPI_SIGNED_CHAR || t == MPI_INT8_T) return as.template operator()<std::int8_t>();
  if (t == MPI_UNSIGNED_CHAR || t == MPI_UINT8_T) return as.template operator()<std::uint8_t>();
  return false;
}
inline bool has_element(MPI_Datatype t) {
  return with_element(t, []<class>() {});
}

// SUM, PROD, MIN, MAX; nothing else (user ops, MAXLOC, the bitwise and
// logical ones go to MPI).
inline std::optional<op> to_op(MPI_Op o) {
  if (o == MPI_SUM) return op::sum;
  if (o == MPI_PROD) return op::prod;
  if (o == MPI_MIN) return op::min;
  if (o == MPI_MAX) return op::max;
  return std::nullopt;
}

// `count` elements of datatype `t` at `buf` as bytes in MPI's order: the
// buffer itself for a predefined type without gaps, else a packed copy
// (PMPI_Pack), unpacked back by finish(). The data-moving calls (MPI_Bcast,
// MPI_Allgather, MPI_Alltoall) let each rank pass its own datatype, so
// whether ringtree serves them must not depend on it: a rank that sent
// derived types to MPI would wait for peers that went to ringtree.
class bytes_of {
 public:
  bytes_of(const void* buf, long count, MPI_Datatype t, MPI_Comm comm, bool read);
  std::span<std::uint8_t> span() noexcept { return bytes_; }
  void finish();  // after ringtree wrote into span(): unpack, where packed
 private:
  void* buf_;
  long count_;
  MPI_Datatype t_;
  MPI_Comm comm_;
  std::vector<std::uint8_t> packed_;
  std::span<std::uint8_t> bytes_;
};
// count * MPI_Type_size(t), the bytes of a call's signature.
std::size_t signature_bytes(long count, MPI_Datatype t);

// A ringtree error inside `call` on `comm` as MPI reports errors: its
// message becomes the string of one error code of the class "ringtree"
// (MPI_Error_string gives it), the communicator's handler is called with it
// (MPI_ERRORS_ARE_FATAL aborts, after printing the message), and the code
// is returned.
int raise(MPI_Comm comm, const char* call, const std::string& what);

// RINGTREE_MPI_LOG=1: one line per call on stderr saying which path ran.
std::string type_name(MPI_Datatype t);
std::string op_name(MPI_Op o);
void log_line(MPI_Comm comm, const char* call, const std::string& what, const std::string& path);

// Iallreduce's requests: MPI generalized requests completed by the layer
// when the ringtree call behind one has run, whichever MPI_Wait or MPI_Test
// form looks at it.
MPI_Request start_request(MPI_Comm comm, work w);
bool ours(MPI_Request r);
bool requests_pending() noexcept;  // any of the layer's requests not completed yet, in this process
// Completes r if its call has run (blocking: waits for it first); true if
// it is complete now.
bool settle(MPI_Request r, bool block);
void settle_all(MPI_Request* rs, int n, bool block);
void forget(MPI_Request r);  // MPI_Request_free: complete it when its call has run
// A failed call's error code, owed to whoever completes its request (MPI
// is told it succeeded: it would report the error through
// MPI_COMM_WORLD's handler); `take` forgets it.
bool errors_owed() noexcept;
int owed(MPI_Request r, bool take);
void settle_forgotten(bool block);  // those whose call has run (block: all of them, waiting)

}  // namespace ringtree::mpi_layer
