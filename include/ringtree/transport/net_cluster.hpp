#pragma once
// net_cluster: ranks on several hosts without MPI. Within a host they talk
// through shared memory, between hosts through the network transport
// (transport/net.hpp, UCX); the hierarchical algorithms get both parts, as
// over cluster_transport (transport/cluster_parts.hpp). Made from a
// bootstrap the caller provides (transport/bootstrap.hpp): a torch store,
// RINGTREE_ROOT=host:port, an MPI communicator.
//
// Which ranks share a host is found, not assumed: the host's name and boot
// id (detail::host_identity). A host's first rank names its segment; rank
// 0 draws the secret that the segments admit (shm_options::job), so that
// ranks started by different parents (ssh, a container runtime) still
// attach, and nothing outside the job does.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <ringtree/core/error.hpp>
#include <ringtree/transport/bootstrap.hpp>
#include <ringtree/transport/cluster_parts.hpp>
#include <ringtree/transport/exchange.hpp>
#include <ringtree/transport/net.hpp>
#include <ringtree/transport/shm.hpp>

namespace ringtree {

struct net_cluster_options {
  std::optional<std::chrono::duration<double>> timeout{};  // unset: RINGTREE_TIMEOUT (default 300 s)
  shm_options shm{};                                       // the shared-memory parts (its timeout: the one above)
  net_options net{};                                       // the network parts (ditto)
  bool shared_memory = true;  // false: the network between every two ranks, as if each were alone on its host
};

class net_cluster : public detail::cluster_parts<net_transport> {
 public:
  static constexpr const char* name = "net_cluster";

  // Collective over the bootstrap's ranks.
  explicit net_cluster(bootstrap& b, net_cluster_options opt = {}) : opt_(std::move(opt)) {
    if (opt_.timeout) opt_.shm.timeout = opt_.net.timeout = opt_.timeout;
    auto world = std::make_unique<net_transport>(b, opt_.net);
    const std::uint64_t here = detail::step_word(detail::host_identity().c_str(), 0);
    auto keys = detail::exchange_all(*world, "net_cluster: hosts", opt_.shared_memory ? here : static_cast<std::uint64_t>(world->rank()) + 1);
    if (opt_.shm.job.empty()) {  // rank 0's secret, for every segment of the job
      std::array<char, 33> secret{};
      if (world->rank() == 0) {
        std::random_device rd;
        for (int i = 0; i < 4; ++i) std::snprintf(secret.data() + 8 * i, 9, "%08x", static_cast<unsigned>(rd()));
      }
      opt_.shm.job = std::string("net_cluster ") + detail::exchange_all(*world, "net_cluster: secret", secret)[0].data();
    }
    form(std::move(world), std::move(keys));
    share_waits();  // (a split's parts number their ranks apart: they raise on their own waits)
  }
  net_cluster(const net_cluster&) = delete;
  net_cluster& operator=(const net_cluster&) = delete;

  // This rank gives up; every peer's wait raises at once: those on this
  // host through the segment, the others through the network's notes.
  void abort() noexcept {
    if (local_) local_->abort();
    world_->abort();
  }

  // communicator::split: a net_cluster of the part, its network a split of
  // this one's (no new connections), its hosts those of its members.
  std::unique_ptr<net_cluster> split(int color, int key, std::span<const int> members, int index) {
    std::vector<std::uint64_t> keys;
    for (int m : members) keys.push_back(keys_[m]);
    return std::unique_ptr<net_cluster>(new net_cluster(world_->split(color, key, members, index), std::move(keys), opt_));
  }

 private:
  net_cluster(std::unique_ptr<net_transport> world, std::vector<std::uint64_t> keys, net_cluster_options opt)
      : opt_(std::move(opt)) {
    form(std::move(world), std::move(keys));
  }
  // The parts, once the flat transport and every rank's host are known: a
  // host's first rank draws its segment's name and hands it to the others.
  void form(std::unique_ptr<net_transport> world, std::vector<std::uint64_t> keys) {
    keys_ = std::move(keys);
    std::array<char, detail::shm_name_max> mine{};
    const int me = world->rank();
    int first = me;
    for (int q = 0; q < me; ++q)
      if (keys_[q] == keys_[me]) first = std::min(first, q);
    if (first == me) std::snprintf(mine.data(), mine.size(), "%s", detail::random_shm_name().c_str());
    const auto names = detail::exchange_all(*world, "net_cluster: segment names", mine);
    make_parts(std::move(world), keys_, names[first].data(), opt_.shm);
  }

  net_cluster_options opt_;
  std::vector<std::uint64_t> keys_;  // every rank's host
};

}  // namespace ringtree
