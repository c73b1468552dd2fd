#pragma once
// cluster_transport: the ranks of an MPI communicator, wherever they run,
// with shared memory wherever they share a host. What make_communicator
// (<ringtree/mpi.hpp>) builds:
//
//   every rank on one host    shared memory (shm_transport) for everything
//   ranks on several hosts    MPI between any two ranks, and for the
//                             hierarchical algorithms (algorithms/
//                             hierarchical.hpp) shared memory within each
//                             host (host_local) and MPI across hosts, one
//                             communicator per local index (host_cross), so
//                             that every rank of a host uses the network
//   every rank alone          MPI
//
// Which ranks share a host is MPI's answer (MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED). Construction is collective over `comm`; so is
// split, which builds a cluster_transport of each part. Errors from the
// hierarchical parts name the communicator's ranks (traced_transport maps
// them), and abort() ends the whole job (MPI_Abort), whichever part failed.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <ringtree/core/error.hpp>
#include <ringtree/transport/cluster_parts.hpp>
#include <ringtree/transport/hosts.hpp>
#include <ringtree/transport/mpi.hpp>
#include <ringtree/transport/shm.hpp>
#include <ringtree/transport/shm_mpi.hpp>

namespace ringtree {

struct cluster_options {
  std::optional<std::chrono::duration<double>> timeout{};  // unset: RINGTREE_TIMEOUT (default 300 s)
  shm_options shm{};                                       // the shared-memory parts (its timeout: the one above)
  mpi_options mpi{};                                       // the MPI parts (ditto)
  bool shared_memory = true;  // false: MPI between every two ranks, as if each were alone on its host
};

class cluster_transport : public detail::cluster_parts<mpi_transport> {
 public:
  static constexpr const char* name = "cluster";

  explicit cluster_transport(MPI_Comm comm, cluster_options opt = {}) : opt_(std::move(opt)) {
    if (opt_.timeout) opt_.shm.timeout = opt_.mpi.timeout = opt_.timeout;
    auto world = std::make_unique<mpi_transport>(comm, opt_.mpi);
    const MPI_Comm w = world->comm();
    const int rank = world->rank();
    MPI_Comm here = MPI_COMM_NULL;
    check(MPI_Comm_split_type(w, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &here), "MPI_Comm_split_type", rank);
    struct local_comm {  // freed on every way out
      MPI_Comm c;
      ~local_comm() { MPI_Comm_free(&c); }
    } local{here};
    // A host is named by its lowest rank.
    int first = rank;
    check(MPI_Bcast(&first, 1, MPI_INT, 0, local.c), "MPI_Bcast", rank);
    std::vector<std::uint64_t> keys(world->size());
    const std::uint64_t mine = static_cast<std::uint64_t>(opt_.shared_memory ? first : rank);
    check(MPI_Allgather(&mine, 1, MPI_UINT64_T, keys.data(), 1, MPI_UINT64_T, w), "MPI_Allgather", rank);
    make_parts(std::move(world), keys, draw_segment_name(local.c), opt_.shm);
    share_waits();
  }
  cluster_transport(const cluster_transport&) = delete;
  cluster_transport& operator=(const cluster_transport&) = delete;

  MPI_Comm comm() const noexcept { return world_->comm(); }

  // Ends the whole job (MPI_Abort), as over MPI.
  [[noreturn]] void abort(int code = 1) const noexcept { world_->abort(code); }
  void require_background_thread(const std::string& feature) const {
    if (!one_host()) world_->require_background_thread(feature);
  }

  // communicator::split: MPI_Comm_split, then a cluster_transport of the part.
  std::unique_ptr<cluster_transport> split(int color, int key, std::span<const int>, int) const {
    MPI_Comm part = MPI_COMM_NULL;
    check(MPI_Comm_split(world_->comm(), color, key, &part), "MPI_Comm_split", rank());
    struct freed {
      MPI_Comm c;
      ~freed() { MPI_Comm_free(&c); }
    } keep{part};
    return std::make_unique<cluster_transport>(part, opt_);
  }

 private:
  // A segment name every rank of `comm` (one host's ranks) agrees on.
  static std::string draw_segment_name(MPI_Comm comm) {
    int r = 0;
    MPI_Comm_rank(comm, &r);
    char name[detail::shm_name_max] = {};
    if (r == 0) std::snprintf(name, sizeof name, "%s", detail::random_shm_name().c_str());
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm);
    return name;
  }
  static void check(int code, const char* what, int rank) {
    if (code != MPI_SUCCESS) throw error(what, rank, detail::mpi_error_string(code));
  }

  cluster_options opt_;
};

}  // namespace ringtree
