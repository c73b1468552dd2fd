#pragma once
// root_bootstrap: the ranks meet at an address every one of them is given,
// RINGTREE_ROOT=host:port, as NCCL's ranks meet at NCCL_COMM_ID. Rank 0
// listens there; every other rank connects, says who it is, and each
// allgather is one message to rank 0 and one answer with everyone's.
// Nothing else is needed: no MPI, no shared filesystem, no store.
//
// A connection is accepted only from a rank of this job: its first bytes
// must carry ringtree's greeting, the job's size and the job's identity
// (RINGTREE_SHM_JOB, else the launcher's job id: Slurm, PMIx, torchrun),
// and a rank not already taken. Anything else (a port scanner, a rank of
// another job given the same port) is closed and named if the ranks time
// out. The port is closed as soon as every rank has connected.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ringtree/core/config.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/transport/bootstrap.hpp>
#include <ringtree/transport/shm/bootstrap.hpp>

namespace ringtree {

struct root_options {
  std::optional<std::chrono::duration<double>> timeout{};  // unset: RINGTREE_TIMEOUT (default 300 s)
  std::optional<std::string> job{};  // unset: RINGTREE_SHM_JOB or the launcher's job id ("" where there is none)
};

namespace detail {

// A socket closed on every way out.
class socket_fd {
 public:
  socket_fd() = default;
  explicit socket_fd(int fd) noexcept : fd_(fd) {}
  socket_fd(socket_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  socket_fd& operator=(socket_fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~socket_fd() { reset(); }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// "host:port" (or "[v6 address]:port") into its two parts.
inline std::pair<std::string, std::string> split_host_port(const std::string& where, const char* call) {
  const auto colon = where.rfind(':');
  std::string host = colon == std::string::npos ? "" : where.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : where.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  const long p = port.empty() ? -1 : std::strtol(port.c_str(), &end, 10);
  if (host.empty() || p <= 0 || p > 65535 || *end != '\0')
    throw error(call, -1, cat("the root's address is '", where, "'; expected host:port with a port from 1 to 65535 (RINGTREE_ROOT)"));
  return {host, port};
}

// Reads or writes all of `bytes` by `until`; false where the peer closed.
// Raises on a socket error; a timeout returns false too (`timed_out` set).
inline bool move_all(int fd, std::byte* p, std::size_t bytes, bool reading, std::chrono::steady_clock::time_point until,
                     bool& timed_out) {
  timed_out = false;
  while (bytes > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return timed_out = true, false;
    pollfd pfd{fd, static_cast<short>(reading ? POLLIN : POLLOUT), 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 100)));
    if (ready < 0 && errno != EINTR) return false;
    if (ready <= 0) continue;
    const ssize_t k = reading ? ::recv(fd, p, bytes, 0) : ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (k == 0) return false;
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return false;
    }
    p += k;
    bytes -= static_cast<std::size_t>(k);
  }
  return true;
}

inline std::string address_text(const sockaddr* a) {
  char host[NI_MAXHOST] = {}, port[NI_MAXSERV] = {};
  const socklen_t len = a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (getnameinfo(a, len, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) != 0) return "?";
  return a->sa_family == AF_INET6 ? cat("[", host, "]:", port) : cat(host, ":", port);
}

}  // namespace detail

class root_bootstrap : public bootstrap {
 public:
  // Rank and size from RINGTREE_RANK / RINGTREE_SIZE, else the launcher's
  // (Open MPI, PMI, torchrun's RANK / WORLD_SIZE); the address from RINGTREE_ROOT.
  static root_bootstrap from_env(root_options opt = {}) {
    const config c = config::from_env();
    if (c.root.empty())
      throw error("root_bootstrap", -1, "RINGTREE_ROOT is not set (host:port where rank 0 listens, the same on every rank)");
    const int rank = c.rank ? *c.rank : detail::launcher_env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"}, "rank");
    const int size = c.size ? *c.size : detail::launcher_env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"}, "size");
    return root_bootstrap(c.root, rank, size, std::move(opt));
  }

  root_bootstrap(std::string root, int rank, int size, root_options opt = {})
      : root_(std::move(root)), rank_(rank), size_(size) {
    if (size < 1 || rank < 0 || rank >= size)
      throw error("root_bootstrap", rank, detail::cat("rank ", rank, " of ", size, " ranks: expected 0 <= rank < size"));
    timeout_ = opt.timeout ? *opt.timeout : detail::default_timeout();
    job_ = opt.job ? *opt.job : default_job();
    if (job_.size() > 200) job_.resize(200);
    const auto [host, port] = detail::split_host_port(root_, "root_bootstrap");
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
      throw error("root_bootstrap", rank_, detail::cat("cannot resolve the root's address ", root_, ": ", gai_strerror(rc)));
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> keep(found, freeaddrinfo);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
    if (size_ == 1) return;
    if (rank_ == 0) listen_and_accept(found, until);
    else connect_to_root(found, until);
  }
  root_bootstrap(root_bootstrap&&) noexcept = default;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }

  std::vector<std::vector<std::byte>> allgather(const std::string& what, std::span<const std::byte> mine) override {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
    std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(size_));
    all[rank_].assign(mine.begin(), mine.end());
    if (size_ == 1) return all;
    if (rank_ != 0) {
      send_frame(peers_[0], 0, what, mine, until);
      for (int q = 0; q < size_; ++q) all[q] = recv_frame(peers_[0], 0, what, until);
      return all;
    }
    for (int q = 1; q < size_; ++q) all[q] = recv_frame(peers_[q], q, what, until);
    for (int q = 1; q < size_; ++q)
      for (int s = 0; s < size_; ++s) send_frame(peers_[q], q, what, all[s], until);
    return all;
  }

 private:
  static constexpr char greeting[8] = {'R', 'T', 'R', 'O', 'O', 'T', '1', '\n'};
  struct hello {
    char greeting[8];
    std::uint32_t size, rank, job_bytes;
  };

  static std::string default_job() {
    const std::string id = detail::job_identity();
    return id.rfind("parent ", 0) == 0 ? std::string() : id;  // a parent process is not shared across hosts
  }

  [[noreturn]] void fail(const std::string& what, int peer = -1) const {
    if (peer >= 0) throw timeout_error("root_bootstrap", rank_, peer, what);
    throw error("root_bootstrap", rank_, what);
  }
  std::string who(int q) const { return q == 0 ? detail::cat("the root (rank 0 at ", root_, ")") : detail::cat("rank ", q); }

  void put(int fd, int q, const void* p, std::size_t n, std::chrono::steady_clock::time_point until) {
    bool late = false;
    if (!detail::move_all(fd, static_cast<std::byte*>(const_cast<void*>(p)), n, false, until, late))
      fail(late ? detail::cat("waited ", timeout_.count(), " s to send to ", who(q), " (stalled?)")
                : detail::cat(who(q), " closed the connection (died or gave up?)"), q);
  }
  void get(int fd, int q, void* p, std::size_t n, std::chrono::steady_clock::time_point until) {
    bool late = false;
    if (!detail::move_all(fd, static_cast<std::byte*>(p), n, true, until, late))
      fail(late ? detail::cat("waited ", timeout_.count(), " s for ", who(q), " (stalled, or not in this step?)")
                : detail::cat(who(q), " closed the connection (died or gave up?)"), q);
  }
  // One frame: the step's name and the bytes, each after its length.
  void send_frame(const detail::socket_fd& s, int q, const std::string& what, std::span<const std::byte> bytes,
                  std::chrono::steady_clock::time_point until) {
    const std::uint64_t head[2] = {what.size(), bytes.size()};
    put(s.get(), q, head, sizeof head, until);
    put(s.get(), q, what.data(), what.size(), until);
    put(s.get(), q, bytes.data(), bytes.size(), until);
  }
  std::vector<std::byte> recv_frame(const detail::socket_fd& s, int q, const std::string& what,
                                    std::chrono::steady_clock::time_point until) {
    std::uint64_t head[2] = {};
    get(s.get(), q, head, sizeof head, until);
    if (head[0] > 4096 || head[1] > (std::uint64_t{1} << 30))
      fail(detail::cat(who(q), " sent a frame of ", head[0], " + ", head[1], " bytes: not a ringtree bootstrap message"));
    std::string theirs(head[0], '\0');
    get(s.get(), q, theirs.data(), theirs.size(), until);
    std::vector<std::byte> bytes(head[1]);
    get(s.get(), q, bytes.data(), bytes.size(), until);
    if (theirs != what)
      fail(detail::cat(who(q), " is in the step '", theirs, "' where this rank is in '", what,
                       "': the ranks' set-up steps differ"));
    return bytes;
  }

  void listen_and_accept(const addrinfo* found, std::chrono::steady_clock::time_point until) {
    detail::socket_fd listener;
    std::string why;
    for (const addrinfo* a = found; a != nullptr && !listener; a = a->ai_next) {
      detail::socket_fd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (!s) continue;
      const int one = 1;
      setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (::bind(s.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.get(), size_) == 0) listener = std::move(s);
      else why = detail::cat(detail::address_text(a->ai_addr), ": ", std::strerror(errno));
    }
    if (!listener)
      fail(detail::cat("rank 0 cannot listen at ", root_, " (", why,
                       "): RINGTREE_ROOT must name an address of rank 0's host and a free port"));
    peers_.resize(static_cast<std::size_t>(size_));
    std::vector<std::string> refused;
    for (int joined = 1; joined < size_;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        std::string missing;
        int first = -1;
        for (int q = 1; q < size_; ++q)
          if (!peers_[q]) missing += detail::cat(missing.empty() ? "" : ", ", q), first = first < 0 ? q : first;
        std::string also;
        for (const auto& r : refused) also += detail::cat("; refused ", r);
        fail(detail::cat("waited ", timeout_.count(), " s at ", root_, " for rank(s) ", missing, " of ", size_,
                         " to connect (not started, or given another RINGTREE_ROOT?)", also),
             first);
      }
      pollfd pfd{listener.get(), POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 100))) <= 0) continue;
      sockaddr_storage from{};
      socklen_t len = sizeof from;
      detail::socket_fd s(::accept4(listener.get(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC));
      if (!s) continue;
      const std::string peer = detail::address_text(reinterpret_cast<sockaddr*>(&from));
      // A stray connection gets a second at most to say who it is, so
      // that it cannot hold up the ranks.
      const auto soon = std::min(until, std::chrono::steady_clock::now() + std::chrono::seconds(1));
      hello h{};
      bool late = false;
      std::string job;
      bool ok = detail::move_all(s.get(), reinterpret_cast<std::byte*>(&h), sizeof h, true, soon, late) &&
                std::memcmp(h.greeting, greeting, sizeof greeting) == 0 && h.job_bytes <= 200;
      if (ok) {
        job.resize(h.job_bytes);
        ok = detail::move_all(s.get(), reinterpret_cast<std::byte*>(job.data()), job.size(), true, soon, late);
      }
      std::string refusal;
      if (!ok) refusal = "not a ringtree rank";
      else if (h.size != static_cast<std::uint32_t>(size_)) refusal = detail::cat("a rank of a job of ", h.size, " ranks, this one has ", size_);
      else if (job != job_) refusal = detail::cat("a rank of job '", job, "', this one is '", job_, "'");
      else if (h.rank == 0 || h.rank >= h.size) refusal = detail::cat("rank ", h.rank, " is not a rank to connect to the root");
      else if (peers_[h.rank]) refusal = detail::cat("rank ", h.rank, " has connected already");
      const std::uint32_t answer = refusal.empty() ? 0 : 1;
      (void)detail::move_all(s.get(), reinterpret_cast<std::byte*>(const_cast<std::uint32_t*>(&answer)), sizeof answer, false, soon, late);
      if (!refusal.empty()) {
        refused.push_back(detail::cat(peer, " (", refusal, ")"));
        continue;
      }
      int one = 1;
      setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      peers_[h.rank] = std::move(s);
      ++joined;
    }
  }

  void connect_to_root(const addrinfo* found, std::chrono::steady_clock::time_point until) {
    std::string why;
    auto pause = std::chrono::milliseconds(10);
    while (true) {
      for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
        detail::socket_fd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
        if (!s) continue;
        if (::connect(s.get(), a->ai_addr, a->ai_addrlen) != 0) {
          why = detail::cat(detail::address_text(a->ai_addr), ": ", std::strerror(errno));
          continue;
        }
        hello h{};
        std::memcpy(h.greeting, greeting, sizeof greeting);
        h.size = static_cast<std::uint32_t>(size_);
        h.rank = static_cast<std::uint32_t>(rank_);
        h.job_bytes = static_cast<std::uint32_t>(job_.size());
        put(s.get(), 0, &h, sizeof h, until);
        put(s.get(), 0, job_.data(), job_.size(), until);
        std::uint32_t answer = 1;
        bool late = false;
        if (!detail::move_all(s.get(), reinterpret_cast<std::byte*>(&answer), sizeof answer, true, until, late) || answer != 0)
          fail(detail::cat("the root at ", root_, " (", detail::address_text(a->ai_addr), ") refused rank ", rank_,
                           late ? " (no answer in time)" : "",
                           ": another job's root, or a rank of this number has connected already (job '", job_, "', ", size_,
                           " ranks)"),
               0);
        int one = 1;
        setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        peers_.resize(1);
        peers_[0] = std::move(s);
        return;
      }
      if (std::chrono::steady_clock::now() + pause > until)
        fail(detail::cat("rank ", rank_, " cannot reach the root (rank 0) at ", root_, " for ", timeout_.count(),
                         " s; the last try: ", why),
             0);
      std::this_thread::sleep_for(pause);  // the root may not listen yet
      pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
  }

  std::string root_;
  int rank_, size_;
  std::chrono::duration<double> timeout_;
  std::string job_;
  std::vector<detail::socket_fd> peers_;  // rank 0: every rank's connection; the others: the root's
};

}  // namespace ringtree
