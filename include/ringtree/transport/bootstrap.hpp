#pragma once
// A bootstrap: how the ranks of a transport made without MPI find each
// other before their first message. A transport needs little from it:
// every rank's few bytes (a network address, the host it runs on), once,
// which is one call, allgather. The caller provides it from what the job
// already has, as NCCL's bootstrap takes a unique id the user passes:
//
//   store_bootstrap   a key-value store every rank reaches (torch's
//                     c10d::Store under torchrun; the backend adapts it)
//   root_bootstrap    a rendezvous at RINGTREE_ROOT=host:port, served by
//                     rank 0 (transport/root_bootstrap.hpp)
//   file_bootstrap    a directory on a filesystem every rank sees
//   mpi_bootstrap     an MPI communicator (transport/mpi_bootstrap.hpp)
//
// Bootstraps know nothing of transports; net_transport and net_cluster
// take any of them.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/core/config.hpp>
#include <ringtree/core/error.hpp>

namespace ringtree {

class bootstrap {
 public:
  virtual ~bootstrap() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  // Every rank's `mine`, by rank (their sizes may differ). Collective:
  // every rank makes the same calls in the same order; `what` names the
  // step in errors and is checked against the other ranks'.
  virtual std::vector<std::vector<std::byte>> allgather(const std::string& what, std::span<const std::byte> mine) = 0;
};

// A bootstrap over a key-value store that every rank reaches: publish a
// key, look one up (nothing yet while no rank has set it). allgather
// publishes "PREFIX/ROUND/RANK" and waits until every rank's is there, up
// to the timeout, then names the ranks that never published.
class store_bootstrap : public bootstrap {
 public:
  // prefix: the keys' (several groups may share one store).
  store_bootstrap(int rank, int size, std::string prefix = "ringtree",
                  std::optional<std::chrono::duration<double>> timeout = {})
      : rank_(rank), size_(size), prefix_(std::move(prefix)), timeout_(timeout ? *timeout : detail::default_timeout()) {
    if (size < 1 || rank < 0 || rank >= size)
      throw error("store_bootstrap", rank, detail::cat("rank ", rank, " of ", size, " ranks: expected 0 <= rank < size"));
  }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }

  std::vector<std::vector<std::byte>> allgather(const std::string& what, std::span<const std::byte> mine) override {
    const std::string round = detail::cat(prefix_, "/", round_++, "/");
    std::vector<std::byte> value(what.size() + 1 + mine.size());
    std::memcpy(value.data(), what.c_str(), what.size() + 1);  // the step's name, then the bytes
    if (!mine.empty()) std::memcpy(value.data() + what.size() + 1, mine.data(), mine.size());
    set(round + std::to_string(rank_), value);
    std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(size_));
    std::vector<bool> have(all.size(), false);
    const auto start = std::chrono::steady_clock::now();
    auto pause = std::chrono::microseconds(50);
    for (int left = size_;;) {
      for (int q = 0; q < size_; ++q) {
        if (have[q]) continue;
        auto v = q == rank_ ? std::optional(value) : try_get(round + std::to_string(q));
        if (!v) continue;
        const auto end = std::find(v->begin(), v->end(), std::byte{0});
        const std::string theirs(reinterpret_cast<const char*>(v->data()), static_cast<std::size_t>(end - v->begin()));
        if (end == v->end() || theirs != what)
          throw error("bootstrap", rank_, detail::cat("rank ", q, " published '", theirs, "' where this rank published '", what,
                                                       "' (round ", round_ - 1, " of ", prefix_, "): the ranks' set-up steps differ"));
        all[q].assign(end + 1, v->end());
        have[q] = true;
        --left;
      }
      if (left == 0) return all;
      if (std::chrono::steady_clock::now() - start > timeout_) {
        std::string missing;
        int first = -1;
        for (int q = 0; q < size_; ++q)
          if (!have[q]) missing += detail::cat(missing.empty() ? "" : ", ", q), first = first < 0 ? q : first;
        throw timeout_error("bootstrap", rank_, first,
                            detail::cat("waited ", timeout_.count(), " s for rank(s) ", missing, " to publish '", what,
                                        "' in the store (never started, or started with another size or store?)"));
      }
      std::this_thread::sleep_for(pause);  // a store lookup may be a network round trip: back off to 20 ms
      pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(20));
    }
  }

 protected:
  virtual void set(const std::string& key, std::span<const std::byte> value) = 0;
  virtual std::optional<std::vector<std::byte>> try_get(const std::string& key) = 0;

 private:
  int rank_, size_;
  std::string prefix_;
  std::chrono::duration<double> timeout_;
  std::uint64_t round_ = 0;
};

// A bootstrap over a directory that every rank sees (a shared filesystem:
// NFS, Lustre, or /tmp for ranks of one host), as torch's FileStore: each
// value is a file, written whole under another name and then renamed, so
// that a reader never sees half of it. The directory must be new (or
// empty) for each job: files left by an earlier job would be read as this
// one's. Files stay until the caller removes the directory.
class file_bootstrap : public store_bootstrap {
 public:
  file_bootstrap(std::string directory, int rank, int size, std::optional<std::chrono::duration<double>> timeout = {})
      : store_bootstrap(rank, size, "ringtree", timeout), dir_(std::move(directory)) {
    if (dir_.empty()) throw error("file_bootstrap", rank, "no directory given");
  }

 protected:
  void set(const std::string& key, std::span<const std::byte> value) override {
    const std::string path = file_of(key), tmp = detail::cat(path, ".part-", getpid());
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(value.data()), static_cast<std::streamsize>(value.size()));
      if (!f.flush())
        throw error("file_bootstrap", rank(), detail::cat("cannot write ", tmp, " (", std::strerror(errno), ")"));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw error("file_bootstrap", rank(), detail::cat("cannot rename ", tmp, " to ", path, " (", std::strerror(errno), ")"));
  }
  std::optional<std::vector<std::byte>> try_get(const std::string& key) override {
    std::ifstream f(file_of(key), std::ios::binary);
    if (!f) return std::nullopt;
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<std::byte> out(bytes.size());
    if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }

 private:
  std::string file_of(std::string key) const {
    std::replace(key.begin(), key.end(), '/', '.');
    return dir_ + "/" + key;
  }
  std::string dir_;
};

namespace detail {
// Where this process runs: the host's name and its boot id (two machines
// never share a boot id; two containers named alike on one machine do, and
// share its memory). Emulated hosts, namespaces with names of their own,
// count as hosts of their own.
inline std::string host_identity() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return std::string(name) + "/" + boot;
}
}  // namespace detail

}  // namespace ringtree
