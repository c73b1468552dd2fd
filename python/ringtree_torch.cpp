// ringtree_torch: a torch.distributed backend. `import ringtree_torch`
// registers "ringtree"; then dist.init_process_group("ringtree", ...) runs
// torch's collectives on ringtree communicators:
//
//   ranks started without mpirun (mp.spawn, torchrun) on one host
//                          shared memory (shm_transport), bootstrapped
//                          through torch's store
//   ranks started without mpirun (torchrun --nnodes N, srun) on several
//   hosts (when built with UCX)
//                          net_cluster: shared memory within each host,
//                          UCX between hosts, hierarchical collectives
//                          across them, bootstrapped through torch's store
//   ranks started by mpirun (when built with MPI)
//                          make_communicator's transport (cluster_transport):
//                          shared memory within each host, MPI between
//                          hosts, hierarchical collectives across them
//
// RINGTREE_TORCH_TRANSPORT=shm|net|cluster|mpi forces one (mpi: MPI between
// every two ranks, no shared memory). Each group has two
// communicators: one for the collectives and one for send/recv, so that a
// pipeline stage's pending isend never stands in the way of a collective
// (and the other way round). Every call returns at once; it runs on the
// communicator's progress thread (ringtree::work), and a wait() that
// comes first runs it on the waiting thread instead. The group's timeout
// is ringtree's: a dead or stalled peer raises RuntimeError naming it.
#include <torch/python.h>

#include <pybind11/chrono.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <span>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <variant>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "backend.hpp"

namespace ringtree_torch {

using ringtree::detail::host_identity;  // where the ranks run: the host's name and boot id
std::string random_hex(int words) {
  std::random_device rd;
  std::string s;
  for (int i = 0; i < words; ++i) {
    char b[9];
    std::snprintf(b, sizeof b, "%08x", static_cast<unsigned>(rd()));
    s += b;
  }
  return s;
}
std::string get_string(c10d::Store& store, const std::string& key) {
  const auto v = store.get(key);
  return std::string(v.begin(), v.end());
}
void set_string(c10d::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

// One process per rank of a group. A process that reaches another job's
// store (two jobs given one MASTER_ADDR:MASTER_PORT, whose second rank 0
// could not bind) would otherwise read its segment names and secret and
// pair with its ranks: wrong numbers on both sides. So every rank claims
// its number first (an atomic add); a second claim is refused. Where the
// group had already formed, the second claimer is the stranger and only
// it raises; else no one can tell which of the two is, so the claim marks
// the group and every rank raises when it forms (formed(), below).
void claim_rank(c10d::Store& store, int rank, int size) {
  if (store.add("ringtree/claim/" + std::to_string(rank), 1) == 1) return;
  const bool complete = store.add("ringtree/formed", 0) >= size;
  const std::string why = "rank " + std::to_string(rank) + " of this group is claimed by two processes (pid " +
                          std::to_string(getpid()) + " came second): two jobs share one store (MASTER_ADDR:MASTER_PORT), "
                          "or a rank number was given twice";
  if (!complete) set_string(store, "ringtree/conflict", why);
  fail("init_process_group", rank, why + (complete ? "; the group had formed without this process, which is refused"
                                                   : "; every rank of the group raises"));
}
// Every rank's transports are up: the group has formed, unless a rank was
// claimed twice meanwhile (all ranks look once every rank is here).
void formed(c10d::Store& store, int rank, int size, double seconds) {
  store.add("ringtree/formed", 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (store.add("ringtree/formed", 0) < size) {
    if (std::chrono::steady_clock::now() > deadline)
      fail("init_process_group", rank, "the other ranks did not finish setting up the group within its timeout");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (store.check({"ringtree/conflict"}))
    fail("init_process_group", rank, get_string(store, "ringtree/conflict") + ": refused on every rank of the group");
}

#ifdef RINGTREE_TORCH_NET
// torch's store as the network transport's bootstrap (transport/bootstrap.hpp).
class store_bootstrap final : public ringtree::store_bootstrap {
 public:
  store_bootstrap(c10d::Store& store, int rank, int size, std::string prefix, double seconds)
      : ringtree::store_bootstrap(rank, size, std::move(prefix), std::chrono::duration<double>(seconds)), store_(store) {}

 protected:
  void set(const std::string& key, std::span<const std::byte> value) override {
    const auto* p = reinterpret_cast<const uint8_t*>(value.data());
    store_.set(key, std::vector<uint8_t>(p, p + value.size()));
  }
  std::optional<std::vector<std::byte>> try_get(const std::string& key) override {
    if (!store_.check({key})) return std::nullopt;
    const auto v = store_.get(key);
    std::vector<std::byte> out(v.size());
    if (!v.empty()) std::memcpy(out.data(), v.data(), v.size());
    return out;
  }

 private:
  c10d::Store& store_;
};
#endif

using any_group = std::variant<std::unique_ptr<shm_group>
#ifdef RINGTREE_TORCH_MPI
                               , std::unique_ptr<mpi_group>
#endif
#ifdef RINGTREE_TORCH_NET
                               , std::unique_ptr<net_group>
#endif
                               >;

c10::intrusive_ptr<c10d::Backend> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                         std::chrono::milliseconds timeout);

// torch's c10d::Backend, each call forwarded to the group of whichever
// transport was set up. A torch release that lacks one of the newer virtual
// functions (split, getBackendOptions: 2.8 on) sees a plain member function
// there, so one source serves every supported release.
class process_group final : public c10d::Backend {
 public:
  process_group(int rank, int size, any_group g, std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Store> store)
      : c10d::Backend(rank, size), g_(std::move(g)), timeout_(timeout), store_(std::move(store)) {}
  const std::string getBackendName() const override { return "ringtree"; }
  std::string transport() const {
    return std::visit([](auto& g) { return g->transport(); }, g_);
  }
  uint64_t getSequenceNumberForGroup() override {
    return std::visit([](auto& g) { return g->sequence_number(); }, g_);
  }
  void setSequenceNumberForGroup() override {
    std::visit([](auto& g) { g->reset_sequence_number(); }, g_);
  }
  // (no override keyword from here on: these exist in newer releases only)
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() {
    auto o = c10::make_intrusive<c10d::Backend::Options>("ringtree", timeout_);
    return o;
  }
  bool supportsSplitting() const override { return true; }
  // dist.split_group: a new group of `ranks` (parent ranks, in the order
  // given), set up through the store torch prepared for it; nullptr on a
  // rank that is not in it.
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
    const auto me = std::find(ranks.begin(), ranks.end(), getRank());
    if (me == ranks.end()) return nullptr;
    return create(store, static_cast<int>(me - ranks.begin()), static_cast<int>(ranks.size()), opts ? opts->timeout : timeout_);
  }

  // dist.monitored_barrier, as gloo keeps it: every other rank reports to
  // rank 0 and waits for its release; rank 0 waits for the reports within
  // the timeout and names the ranks that did not come (the first one, or
  // all with wait_all_ranks). Kept in the group's store, not the
  // transport: a rank that never comes must leave no half-matched message.
  void monitoredBarrier(const c10d::BarrierOptions& o, bool wait_all) override {
    const auto timeout = o.timeout;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const std::string at = "ringtree/monitored/" + std::to_string(monitored_++) + "/";
    const std::string ms = std::to_string(timeout.count()) + " ms";
    auto arrived = [&](int r) { return store_->check({at + std::to_string(r)}); };
    auto wait_until = [&](auto ready) {
      while (!ready()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      return true;
    };
    if (getRank() != 0) {
      set_string(*store_, at + std::to_string(getRank()), "1");
      if (!wait_until([&] { return store_->check({at + "released"}); }))
        fail("monitored_barrier", getRank(), "Rank " + std::to_string(getRank()) +
                 " successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0 "
                 "(no release within " + ms + "). Please check rank 0 logs for faulty rank.");
      return;
    }
    if (timeout.count() <= 0)
      fail("monitored_barrier", 0, "Rank 0 timed out in monitoredBarrier after " + ms + " (the timeout was spent before any rank was waited for)");
    std::vector<int> missing;
    for (int r = 1; r < getSize(); ++r) {
      if (wait_until([&] { return arrived(r); })) continue;  // (past the deadline: one look)
      if (!wait_all) fail("monitored_barrier", 0, "Rank " + std::to_string(r) + " failed to pass monitoredBarrier in " + ms);
      missing.push_back(r);
    }
    if (!missing.empty()) {
      std::string list;
      for (int r : missing) list += (list.empty() ? "" : ", ") + std::to_string(r);
      fail("monitored_barrier", 0, (missing.size() > 1 ? "Ranks " : "Rank ") + list + " failed to pass monitoredBarrier in " + ms);
    }
    set_string(*store_, at + "released", "1");
  }

#define RINGTREE_FORWARD(...) return std::visit([&](auto& g) { return g->__VA_ARGS__; }, g_)
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& t, const c10d::BroadcastOptions& o) override {
    RINGTREE_FORWARD(broadcast(t, o));
  }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) override {
    RINGTREE_FORWARD(allreduce(t, o));
  }
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) override {
    RINGTREE_FORWARD(allreduce_sparse(t, o));
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& t,
                                                     const c10d::AllreduceCoalescedOptions& o) override {
    RINGTREE_FORWARD(allreduce_coalesced(t, o));
  }
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& t, const c10d::ReduceOptions& o) override {
    RINGTREE_FORWARD(reduce(t, o));
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                           const c10d::AllgatherOptions& o) override {
    RINGTREE_FORWARD(allgather(out, in, o));
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                                     const c10d::AllgatherOptions& o) override {
    RINGTREE_FORWARD(allgather_coalesced(out, in, o));
  }
  // (the names of 2.6; later releases call them through their new names:
  // all_gather_single, reduce_scatter_single, all_to_all_single and the
  // _coalesced forms forward to these)
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in, const c10d::AllgatherOptions&) override {
    RINGTREE_FORWARD(allgather_base(out, in));
  }
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
                                                                 const c10d::AllgatherOptions&) override {
    RINGTREE_FORWARD(allgather_into_tensor_coalesced(out, in));
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                        const c10d::GatherOptions& o) override {
    RINGTREE_FORWARD(gather(out, in, o));
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
                                         const c10d::ScatterOptions& o) override {
    RINGTREE_FORWARD(scatter(out, in, o));
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
                                                const c10d::ReduceScatterOptions& o) override {
    RINGTREE_FORWARD(reduce_scatter(out, in, o));
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                      const c10d::ReduceScatterOptions& o) override {
    RINGTREE_FORWARD(reduce_scatter_base(out, in, o));
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
                                                                 const c10d::ReduceScatterOptions& o) override {
    RINGTREE_FORWARD(reduce_scatter_tensor_coalesced(out, in, o));
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits, const c10d::AllToAllOptions&) override {
    RINGTREE_FORWARD(alltoall_base(out, in, out_splits, in_splits));
  }
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
                                          const c10d::AllToAllOptions&) override {
    RINGTREE_FORWARD(alltoall(out, in));
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override { RINGTREE_FORWARD(barrier()); }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& t, int peer, int tag) override {
    RINGTREE_FORWARD(send(t, peer, tag));
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& t, int peer, int tag) override {
    RINGTREE_FORWARD(recv(t, peer, tag));
  }
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& t, int tag) override {
    RINGTREE_FORWARD(recv(t, ringtree::any_source, tag));
  }
#undef RINGTREE_FORWARD

 private:
  any_group g_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  uint64_t monitored_ = 0;  // monitored barriers so far: their keys apart
};

// MPI started by this module is finalized at exit (groups still alive
// then skip their MPI calls: mpi_transport checks MPI_Finalized).
bool& we_initialized_mpi() {
  static bool b = false;
  return b;
}
void finalize_mpi() {
#ifdef RINGTREE_TORCH_MPI
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (we_initialized_mpi() && !finalized) MPI_Finalize();
#endif
}

// The send/recv communicator: no collectives on it, so receives from any
// source may look at its streams (recvAnysource).
const ringtree::communicator_options p2p_only{.point_to_point_only = true};

// What torch calls for init_process_group("ringtree") and new_group:
// (store with this group's prefix, rank, size, timeout).
// torchrun's restarted workers meet in the store of the round before
// (torch 2.x shares one store server between rendezvous rounds), where the
// old round's claims would refuse them: each round's keys apart. Which
// round: not TORCHELASTIC_RESTART_COUNT, which differs between nodes (a
// node whose workers restart because another node's failed does not count
// it), but how often this rank was claimed before under this launcher:
// every worker of a restarted job claims again, so all of them agree.
// Without an elastic launcher a second claim is a stranger (claim_rank).
c10::intrusive_ptr<c10d::Store> this_round(const c10::intrusive_ptr<c10d::Store>& store, int rank) {
  if (!std::getenv("TORCHELASTIC_RUN_ID")) return store;
  const auto before = store->add("ringtree/rounds/" + std::to_string(rank), 1) - 1;
  return c10::make_intrusive<c10d::PrefixStore>("ringtree-round-" + std::to_string(before), store);
}

c10::intrusive_ptr<c10d::Backend> create(const c10::intrusive_ptr<c10d::Store>& group_store, int rank, int size,
                                         std::chrono::milliseconds timeout) {
  const std::string call = "init_process_group";
  const auto store = this_round(group_store, rank);
  if (size < 1 || rank < 0 || rank >= size) fail(call, rank, "rank " + std::to_string(rank) + " of " + std::to_string(size));
  std::string want = ringtree::config::get("RINGTREE_TORCH_TRANSPORT") ? ringtree::config::get("RINGTREE_TORCH_TRANSPORT") : "";
  if (want != "" && want != "shm" && want != "net" && want != "mpi" && want != "cluster")
    fail(call, rank, "RINGTREE_TORCH_TRANSPORT is '" + want + "'; it must be shm, net, cluster, mpi or unset");
  const double seconds = std::chrono::duration<double>(timeout).count();
  claim_rank(*store, rank, size);
  // Which hosts the ranks run on.
  set_string(*store, "ringtree/host/" + std::to_string(rank), host_identity());
  bool one_host = true;
  for (int r = 0; r < size; ++r) one_host = one_host && get_string(*store, "ringtree/host/" + std::to_string(r)) == host_identity();
  const bool under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
                            std::getenv("PMIX_RANK") != nullptr;
  if (want.empty()) want = under_mpirun ? "cluster" : one_host ? "shm" : "net";
  if (want == "shm") {
    if (!one_host)
      fail(call, rank, "the ranks run on several hosts, and RINGTREE_TORCH_TRANSPORT=shm was set (shared memory needs one host)");
    // Rank 0 draws the segments' names and a secret that every attacher
    // must show (shm_options::job); the store is what the ranks trust.
    if (rank == 0)
      set_string(*store, "ringtree/shm",
                 ringtree::detail::random_shm_name() + " " + ringtree::detail::random_shm_name() + " " + random_hex(4));
    std::istringstream words(get_string(*store, "ringtree/shm"));
    std::string coll_name, p2p_name, secret;
    words >> coll_name >> p2p_name >> secret;
    ringtree::shm_options opt;
    opt.timeout = std::chrono::duration<double>(seconds);
    opt.job = secret;
    auto coll = std::make_unique<ringtree::shm_transport>(coll_name, rank, size, opt);
    auto p2p = std::make_unique<ringtree::shm_transport>(p2p_name, rank, size, opt);
    using C = comm_over<ringtree::shm_transport>;
    auto g = std::make_unique<shm_group>(C(std::move(coll)), C(std::move(p2p), p2p_only), "shm");
    formed(*store, rank, size, seconds);
    return c10::make_intrusive<process_group>(rank, size, std::move(g), timeout, store);
  }
  if (want == "net") {
#ifdef RINGTREE_TORCH_NET
    // Two clusters (collectives; send/recv), each bootstrapped through the
    // store under keys of its own; UCX between hosts, shared memory within.
    ringtree::net_cluster_options opt;
    opt.timeout = std::chrono::duration<double>(seconds);
    store_bootstrap coll_boot(*store, rank, size, "ringtree/net/coll", seconds);
    auto coll = std::make_unique<ringtree::net_cluster>(coll_boot, opt);
    store_bootstrap p2p_boot(*store, rank, size, "ringtree/net/p2p", seconds);
    auto p2p = std::make_unique<ringtree::net_cluster>(p2p_boot, opt);
    const std::string how = coll->one_host() ? "net (one host: shared memory)" : "net (" + coll->layout().describe() + " hosts)";
    using C = comm_over<ringtree::net_cluster>;
    auto g = std::make_unique<net_group>(C(std::move(coll)), C(std::move(p2p), p2p_only), how);
    formed(*store, rank, size, seconds);
    return c10::make_intrusive<process_group>(rank, size, std::move(g), timeout, store);
#else
    fail(call, rank, one_host ? "RINGTREE_TORCH_TRANSPORT=net, but ringtree_torch was built without UCX (libucx-dev)"
                              : "the ranks run on several hosts, and ringtree_torch was built without UCX (libucx-dev) "
                                "or MPI: install libucx-dev and build it again, or start the ranks with mpirun");
#endif
  }
#ifdef RINGTREE_TORCH_MPI
  if (!under_mpirun)
    fail(call, rank, "RINGTREE_TORCH_TRANSPORT=" + want + " needs the ranks started by mpirun");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);  // two progress threads: collectives and send/recv
    we_initialized_mpi() = true;  // and finalize it at exit (module init registers that)
  }
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  set_string(*store, "ringtree/mpi/" + std::to_string(rank), std::to_string(world_rank));
  std::vector<int> members(size);
  for (int r = 0; r < size; ++r) members[r] = std::stoi(get_string(*store, "ringtree/mpi/" + std::to_string(r)));
  MPI_Group world_group, g;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, size, members.data(), &g);
  MPI_Comm coll_comm, p2p_comm;
  MPI_Comm_create_group(MPI_COMM_WORLD, g, 0, &coll_comm);
  MPI_Comm_dup(coll_comm, &p2p_comm);
  MPI_Group_free(&g);
  MPI_Group_free(&world_group);
  // make_communicator's transport: shared memory within each host, MPI
  // between hosts, hierarchical collectives; "mpi": MPI between every pair.
  ringtree::cluster_options opt;
  opt.timeout = std::chrono::duration<double>(seconds);
  opt.shared_memory = want != "mpi";
  using C = comm_over<ringtree::cluster_transport>;
  auto coll = std::make_unique<ringtree::cluster_transport>(coll_comm, opt);  // (each makes its own duplicate)
  auto p2p = std::make_unique<ringtree::cluster_transport>(p2p_comm, opt);
  MPI_Comm_free(&coll_comm);
  MPI_Comm_free(&p2p_comm);
  const std::string how = want == "mpi" ? "mpi" : coll->one_host() ? "cluster (one host: shared memory)"
                                                                    : "cluster (" + coll->layout().describe() + " hosts)";
  auto made = std::make_unique<mpi_group>(C(std::move(coll)), C(std::move(p2p), p2p_only), how);
  formed(*store, rank, size, seconds);
  return c10::make_intrusive<process_group>(rank, size, std::move(made), timeout, store);
#else
  (void)under_mpirun;
  fail(call, rank, one_host ? "RINGTREE_TORCH_TRANSPORT=mpi, but ringtree_torch was built without MPI"
                            : "the ranks run on several hosts, and ringtree_torch was built without MPI (shared memory needs one host)");
#endif
}

}  // namespace ringtree_torch

PYBIND11_MODULE(_C, m) {
  m.doc() = "ringtree as a torch.distributed backend: import it, then init_process_group('ringtree')";
  py::module::import("torch.distributed");
  py::class_<ringtree_torch::process_group, c10d::Backend, c10::intrusive_ptr<ringtree_torch::process_group>>(
      m, "ProcessGroupRingtree")
      .def_property_readonly("transport", &ringtree_torch::process_group::transport,
                             "'shm' (shared memory, one host), 'net (...)' (UCX between hosts, shared memory within), "
                             "'cluster (...)' (make_communicator's, under mpirun) or 'mpi'");
  m.def("_create", &ringtree_torch::create, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>());
  m.def("_finalize_mpi", &ringtree_torch::finalize_mpi, py::call_guard<py::gil_scoped_release>());
  py::module::import("atexit").attr("register")(m.attr("_finalize_mpi"));
}
