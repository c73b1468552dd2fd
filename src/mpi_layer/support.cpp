// libringtree-mpi's support (layer.hpp says what each piece is).
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "layer.hpp"

namespace ringtree::mpi_layer {

// A value that does not parse ends the job, naming it (as ringtree's own
// RINGTREE_* variables raise): a layer silently off is a benchmark wrong.
[[noreturn]] void bad_setting(const char* name, const char* value, const char* expected) {
  std::fprintf(stderr, "ringtree-mpi: %s=%s: expected %s\n", name, value, expected);
  PMPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

const settings& the_settings() {
  static const settings s = [] {
    settings s;
    auto flag = [](const char* name, bool dflt) {  // config's reading of 0 or 1, with the layer's way to fail
      const char* v = config::get(name);
      if (v == nullptr) return dflt;
      try {
        return config::parse_flag(name, v);
      } catch (const error&) {
        bad_setting(name, v, "0 or 1");
      }
    };
    s.enabled = flag("RINGTREE_MPI", true);
    s.log = flag("RINGTREE_MPI_LOG", false);
    s.routes = flag("RINGTREE_MPI_ROUTES", true);
    if (const char* v = std::getenv("RINGTREE_MPI_CROSS_BYTES"); v && *v) {
      char* end = nullptr;
      errno = 0;
      const unsigned long long b = std::strtoull(v, &end, 10);
      if (*end != '\0' || end == v || *v == '-' || *v == '+' || errno == ERANGE || b > SIZE_MAX) bad_setting("RINGTREE_MPI_CROSS_BYTES", v, "a number of bytes from 0 to 2^64-1");
      s.cross_bytes = b;
    }
    int level = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&level);
    s.thread_multiple = level == MPI_THREAD_MULTIPLE;
    return s;
  }();
  return s;
}

// ---- MPI's progress while ringtree waits ----

void mpi_progress() noexcept {
  // Only on a thread inside a call of the layer: the caller's, never a
  // communicator's progress thread (a program in MPI_THREAD_SINGLE or
  // FUNNELED may call MPI from one thread only). An Iprobe moves every
  // pending MPI request along and receives nothing. Once in 16 looks: Open
  // MPI's progress yields the core when it finds nothing and ranks
  // outnumber the cores, so on every look a wait yielded twice (a 32-byte
  // all-gather at 4 ranks on 2 cores took 6 context switches a call, 2x
  // ringtree's own time); a peer waiting for one of this rank's MPI
  // requests is still moved along, within 16 looks of the wait.
  static thread_local unsigned looks __attribute__((tls_model("initial-exec"))) = 0;
  if (!inside || looks++ % 16 != 0) return;
  int flag = 0;
  PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
}

// ---- one ringtree communicator per MPI communicator ----

namespace {
int keyval = MPI_KEYVAL_INVALID;
std::vector<MPI_Comm> known;  // the communicators with an attribute, oldest first
int delete_info(MPI_Comm comm, int, void* value, void*) {
  inside_scope in;
  std::erase(known, comm);
  if (last_comm == comm) last_comm = no_comm, last_info = nullptr;
  delete static_cast<comm_info*>(value);
  return MPI_SUCCESS;
}

// MPI waits for a late peer as long as it takes; a ringtree wait gives up
// after RINGTREE_TIMEOUT seconds, which here defaults to an hour instead of
// 5 minutes, so that a rank busy (checkpointing, say) before a collective
// is not taken for a dead one.
std::chrono::duration<double> layer_timeout() {
  const char* v = config::get("RINGTREE_TIMEOUT");
  return v != nullptr ? config::parse_timeout(v) : std::chrono::hours(1);
}
cluster_options layer_options() {
  cluster_options o;
  o.timeout = layer_timeout();
  return o;
}
// A program under the layer does not measure ringtree's algorithms inside
// its calls (tens of seconds on a busy machine): ringtree-mpi-tune measures
// ahead, and until it has, the cost model chooses (RINGTREE_TUNE, where
// set, decides instead).
communicator_options layer_communicator_options() {
  communicator_options o;
  if (!std::getenv("RINGTREE_TUNE")) o.tune = config::tuning::cached;
  return o;
}

// Rank 0's routes file (or none) on every rank: one PMPI_Bcast.
route_table load_routes(MPI_Comm c, const communicator<cluster_transport>& comm) {
  std::array<std::uint8_t, sizeof(route_table) + 1> msg{};  // + rank 0 failed
  route_table t;
  std::string failed;
  const std::string key = layout_key(c);
  if (comm.rank() == 0) {
    try {
      const std::string path = routes_path(key, comm.size());
      if (auto text = detail::read_text_file(path, "libringtree-mpi", "routes", 0))
        if (auto found = parse_routes(*text, path)) t = *found;
    } catch (const std::exception& e) {
      failed = e.what();
      msg.back() = 1;
    }
    std::memcpy(msg.data(), &t, sizeof t);
  }
  PMPI_Bcast(msg.data(), static_cast<int>(msg.size()), MPI_BYTE, 0, c);
  if (!failed.empty()) throw error("libringtree-mpi", 0, failed);
  if (msg.back()) throw error("libringtree-mpi", comm.rank(), "rank 0 could not read the routes ringtree-mpi-tune measured");
  std::memcpy(&t, msg.data(), sizeof t);
  return t;
}
}  // namespace

layer_comm::layer_comm(MPI_Comm c)
    : comm(make_communicator(c, layer_communicator_options(), layer_options())), one_host(comm.transport().one_host()), routes(load_routes(c, comm)) {}

MPI_Comm last_comm = no_comm;
comm_info* last_info = nullptr;

comm_info& info_of_slow(MPI_Comm comm) {
  if (keyval == MPI_KEYVAL_INVALID) PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_info, &keyval, nullptr);
  void* v = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, keyval, &v, &found);
  if (!found) {
    auto info = std::make_unique<comm_info>();
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    info->inter = inter != 0;
    PMPI_Comm_size(comm, &info->size);
    PMPI_Comm_rank(comm, &info->rank);
    PMPI_Comm_set_attr(comm, keyval, info.get());
    known.push_back(comm);
    v = info.release();
  }
  last_comm = comm;
  return *(last_info = static_cast<comm_info*>(v));
}

namespace {
// Every rank of `comm` must run the layer: a rank without it (RINGTREE_MPI=0
// there, or not preloaded) sits in MPI's own collective while the others
// make a ringtree communicator, and both would wait forever. So the first
// exchange on a communicator is one MPI's own blocking collectives cannot
// match (Open MPI keeps non-blocking collectives apart from blocking
// ones), carrying a marker that no other call produces: an MPI_Iallreduce
// (MPI_BAND) of the layer's 64-bit mark. It ends with a message, never a
// hang: a warning after warn_after, an error after the timeout; a result
// other than the mark means a rank made another non-blocking call.
constexpr unsigned long long mark = 0x7269'6e67'7472'6565ULL;  // "ringtree"
void check_every_rank_joins(MPI_Comm comm, const comm_info& info, const char* call) {
  const double timeout = layer_timeout().count();
  const double warn_after = std::min(30.0, timeout / 2);
  // (on the heap: left to MPI if the wait gives up)
  auto* both = new unsigned long long[2]{mark, 0};
  MPI_Request r = MPI_REQUEST_NULL;
  PMPI_Iallreduce(&both[0], &both[1], 1, MPI_UNSIGNED_LONG_LONG, MPI_BAND, comm, &r);
  const auto t0 = std::chrono::steady_clock::now();
  bool warned = false;
  for (int done = 0;;) {
    PMPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (done) break;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string who = detail::cat("rank ", info.rank, " of ", info.size, " has waited ", static_cast<int>(waited), " s in ", call,
                                        ", the first call the layer serves on this communicator, for every rank to join it");
    const char* why = "; a rank without the layer (RINGTREE_MPI=0 there, or not preloaded) never does: every rank must run it";
    if (waited >= timeout) throw error("libringtree-mpi", info.rank, detail::cat(who, why, " (RINGTREE_TIMEOUT)"));
    if (waited >= warn_after && !warned) {
      warned = true;
      const std::string line = detail::cat("ringtree-mpi: warning: ", who, why, "; still waiting, up to RINGTREE_TIMEOUT\n");
      [[maybe_unused]] auto n = ::write(2, line.data(), line.size());
    }
    sched_yield();
  }
  const unsigned long long got = both[1];
  delete[] both;
  if (got != mark)
    throw error("libringtree-mpi", info.rank, detail::cat("the first call the layer serves on this communicator (", call,
                                                          ") met another call on some rank: a rank without the layer (RINGTREE_MPI=0 there, or not preloaded)?"));
}
}  // namespace

layer_comm& layer_of(MPI_Comm comm, comm_info& info, const char* call) {
  if (!info.lc) {
    detail::while_waiting.store(mpi_progress);
    inside_scope in;
    check_every_rank_joins(comm, info, call);
    info.lc = std::make_unique<layer_comm>(comm);
  }
  return *info.lc;
}

void drop_all() {
  settle_forgotten(true);
  // Newest first: a split's communicator goes before its parent's.
  while (!known.empty()) PMPI_Comm_delete_attr(known.back(), keyval);
  if (keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&keyval);
  detail::while_waiting.store(nullptr);
}

// ---- buffers as bytes ----

namespace {
// A predefined datatype without gaps: its elements lie back to back.
bool plain(MPI_Datatype t, int size) {
  int ni, na, nd, combiner;
  PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner);
  if (combiner != MPI_COMBINER_NAMED) return false;
  MPI_Aint lb, extent;
  PMPI_Type_get_extent(t, &lb, &extent);
  return lb == 0 && extent == size;
}
// What a call asks of its datatype, kept for the last datatype asked about
// on this thread: the same four questions to MPI on every call cost about
// 20 ns of a 4-byte broadcast's 180 at 2 ranks. A freed datatype's handle
// may come back as another: types_epoch moves on then.
struct type_facts {
  MPI_Datatype t{};
  std::uint64_t epoch = 0;  // (0 never matches)
  std::size_t size = 0;
  bool plain = false;
};
const type_facts& facts_of(MPI_Datatype t) {
  static thread_local type_facts f __attribute__((tls_model("initial-exec")));
  if (f.t != t || f.epoch != types_epoch) {
    int size = 0;
    PMPI_Type_size(t, &size);
    f = {t, types_epoch, static_cast<std::size_t>(size), plain(t, size)};
  }
  return f;
}
}  // namespace

std::size_t signature_bytes(long count, MPI_Datatype t) { return static_cast<std::size_t>(count) * facts_of(t).size; }

namespace {
// MPI_Pack counts elements and positions bytes in ints: a buffer of 2 GiB
// or more is packed in pieces, each below that.
template <class F>
void in_pieces(long count, MPI_Datatype t, F&& piece) {
  MPI_Aint lb, extent;
  PMPI_Type_get_extent(t, &lb, &extent);
  const std::size_t size = signature_bytes(1, t);
  const long per = std::max<long>(1, static_cast<long>((std::size_t{1} << 30) / size));
  for (long at = 0; at < count; at += per) {
    const long k = std::min(per, count - at);
    piece(static_cast<MPI_Aint>(at) * extent, static_cast<std::size_t>(at) * size, static_cast<int>(k), static_cast<std::size_t>(k) * size);
  }
}
}  // namespace

bytes_of::bytes_of(const void* buf, long count, MPI_Datatype t, MPI_Comm comm, bool read)
    : buf_(const_cast<void*>(buf)), count_(count), t_(t), comm_(comm) {
  const std::size_t n = signature_bytes(count, t);
  if (n == 0) return;  // (MPI_Pack refuses an empty buffer)
  if (facts_of(t).plain) {
    bytes_ = {static_cast<std::uint8_t*>(buf_), n};
    return;
  }
  packed_.resize(n);  // (MPI packs a homogeneous job's data as its signature's bytes)
  bytes_ = {packed_.data(), n};
  if (!read) return;
  in_pieces(count, t, [&](MPI_Aint from, std::size_t to, int k, std::size_t bytes) {
    int at = 0;
    PMPI_Pack(static_cast<char*>(buf_) + from, k, t, packed_.data() + to, static_cast<int>(bytes), &at, comm);
    if (static_cast<std::size_t>(at) != bytes)
      throw error("libringtree-mpi", -1, detail::cat("MPI_Pack gave ", at, " bytes for ", k, " elements of ", type_name(t), " of ", bytes, " bytes"));
  });
}

void bytes_of::finish() {
  if (packed_.empty()) return;
  in_pieces(count_, t_, [&](MPI_Aint to, std::size_t from, int k, std::size_t bytes) {
    int at = 0;
    PMPI_Unpack(packed_.data() + from, static_cast<int>(bytes), &at, static_cast<char*>(buf_) + to, k, t_, comm_);
  });
}

// ---- errors ----

int raise(MPI_Comm comm, const char* call, const std::string& what) {
  static int code = -1;
  if (code < 0) {
    int cls = 0;
    PMPI_Add_error_class(&cls);
    PMPI_Add_error_code(cls, &code);
    PMPI_Add_error_string(cls, const_cast<char*>("ringtree: a collective failed"));
  }
  const std::string text = std::string("ringtree (libringtree-mpi) in ") + call + ": " + what;
  // (MPI keeps MPI_MAX_ERROR_STRING - 1 characters of it)
  std::string kept = text.substr(0, MPI_MAX_ERROR_STRING - 1);
  PMPI_Add_error_string(code, kept.data());
  MPI_Errhandler h = MPI_ERRHANDLER_NULL;
  PMPI_Comm_get_errhandler(comm, &h);
  // MPI's fatal handler prints the code's class, not always its string;
  // this line is the whole message (the reason often comes last).
  if (h == MPI_ERRORS_ARE_FATAL) std::fprintf(stderr, "%s\n", text.c_str());
  if (h != MPI_ERRHANDLER_NULL) PMPI_Errhandler_free(&h);
  PMPI_Comm_call_errhandler(comm, code);
  return code;
}

// ---- the log ----

std::string type_name(MPI_Datatype t) {
  char name[MPI_MAX_OBJECT_NAME] = {};
  int len = 0;
  if (t == MPI_DATATYPE_NULL) return "MPI_DATATYPE_NULL";
  PMPI_Type_get_name(t, name, &len);
  return len > 0 ? std::string(name, static_cast<std::size_t>(len)) : std::string("a derived datatype");
}

std::string op_name(MPI_Op o) {
  struct named { MPI_Op o; const char* name; };
  const named all[] = {{MPI_SUM, "MPI_SUM"},   {MPI_PROD, "MPI_PROD"},     {MPI_MIN, "MPI_MIN"},       {MPI_MAX, "MPI_MAX"},
                       {MPI_LAND, "MPI_LAND"}, {MPI_LOR, "MPI_LOR"},       {MPI_LXOR, "MPI_LXOR"},     {MPI_BAND, "MPI_BAND"},
                       {MPI_BOR, "MPI_BOR"},   {MPI_BXOR, "MPI_BXOR"},     {MPI_MAXLOC, "MPI_MAXLOC"}, {MPI_MINLOC, "MPI_MINLOC"},
                       {MPI_REPLACE, "MPI_REPLACE"}, {MPI_NO_OP, "MPI_NO_OP"}, {MPI_OP_NULL, "MPI_OP_NULL"}};
  for (const auto& n : all)
    if (n.o == o) return n.name;
  return "a user op";
}

void log_line(MPI_Comm comm, const char* call, const std::string& what, const std::string& path) {
  int rank = -1, size = 0;
  if (comm != MPI_COMM_NULL) PMPI_Comm_rank(comm, &rank), PMPI_Comm_size(comm, &size);
  // One write: whole lines in a file of this rank's own. (mpirun forwards
  // stderr in chunks that may split lines; --output-filename keeps them whole.)
  const std::string line = detail::cat("ringtree-mpi: rank ", rank, " of ", size, ": ", call, "(", what, "): ", path, "\n");
  [[maybe_unused]] auto n = ::write(2, line.data(), line.size());
}

// ---- Iallreduce's requests ----

namespace {
struct pending {
  work w;
  MPI_Comm comm;
};
std::unordered_map<MPI_Request, pending> requests;
// Freed by the caller before their call had run: MPI keeps the request
// until the layer completes it.
std::vector<std::pair<MPI_Request, pending>> forgotten;
// Requests whose call failed, with the code the completing call owes its
// caller. MPI itself would report a generalized request's error through
// MPI_COMM_WORLD's handler (aborting a program that asked for
// MPI_ERRORS_RETURN on the communicator), so MPI is told it succeeded and
// the layer returns the code: raise() has called the communicator's
// handler already.
std::unordered_map<MPI_Request, int> failed;

int query_state(void*, MPI_Status* s) {
  MPI_Status_set_elements(s, MPI_BYTE, 0);
  MPI_Status_set_cancelled(s, 0);
  s->MPI_SOURCE = MPI_UNDEFINED;
  s->MPI_TAG = MPI_UNDEFINED;
  s->MPI_ERROR = MPI_SUCCESS;
  return MPI_SUCCESS;
}
int free_state(void*) { return MPI_SUCCESS; }
int cancel_state(void*, int) { return MPI_SUCCESS; }  // a collective cannot be cancelled

// Completes the MPI request of a call once it has run, with its outcome
// (the error code, or MPI_SUCCESS); nothing if it has not run and `block`
// is false. Waiting keeps MPI's own requests moving (a peer may need one
// of them done before it joins this call).
std::optional<int> complete(MPI_Request r, pending& p, bool block) {
  inside_scope in;
  while (!p.w.test()) {
    if (!block) return std::nullopt;
    mpi_progress();
    sched_yield();
  }
  int code = MPI_SUCCESS;
  try {
    p.w.wait();
  } catch (const std::exception& e) {
    code = raise(p.comm, "MPI_Iallreduce", e.what());
  }
  PMPI_Grequest_complete(r);
  return code;
}
}  // namespace

MPI_Request start_request(MPI_Comm comm, work w) {
  settle_forgotten(false);  // (so that freed requests do not pile up until MPI_Finalize)
  MPI_Request r = MPI_REQUEST_NULL;
  PMPI_Grequest_start(query_state, free_state, cancel_state, nullptr, &r);
  requests.emplace(r, pending{std::move(w), comm});
  ++empty_epoch;  // (a call of no elements that goes to MPI completes it first: layer.hpp, accepted_empty)
  return r;
}

bool ours(MPI_Request r) { return !requests.empty() && requests.contains(r); }
bool requests_pending() noexcept {
  if (!forgotten.empty()) try {
      settle_forgotten(false);  // (those that have run no longer keep zero-count calls off the fast path)
    } catch (...) {
      return true;
    }
  return !requests.empty() || !forgotten.empty();
}

bool settle(MPI_Request r, bool block) {
  auto it = requests.find(r);
  if (it == requests.end()) return true;
  const auto code = complete(r, it->second, block);
  if (!code) return false;
  if (*code != MPI_SUCCESS) failed[r] = *code;
  requests.erase(it);
  return true;
}

void settle_all(MPI_Request* rs, int n, bool block) {
  if (requests.empty()) return;
  for (int i = 0; i < n; ++i) settle(rs[i], block);
}

bool errors_owed() noexcept { return !failed.empty(); }
int owed(MPI_Request r, bool take) {
  auto it = failed.find(r);
  if (it == failed.end()) return MPI_SUCCESS;
  const int code = it->second;
  if (take) failed.erase(it);
  return code;
}

void forget(MPI_Request r) {
  auto it = requests.find(r);
  forgotten.emplace_back(r, std::move(it->second));
  requests.erase(it);
  MPI_Request handle = r;  // MPI frees the request once the layer completes it
  PMPI_Request_free(&handle);
}

void settle_forgotten(bool block) {
  std::erase_if(forgotten, [&](auto& f) { return complete(f.first, f.second, block).has_value(); });
}

}  // namespace ringtree::mpi_layer
