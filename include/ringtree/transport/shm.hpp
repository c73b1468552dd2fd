#pragma once
// shm_transport: processes on one host exchanging messages through one POSIX
// shared-memory segment per communicator.
//
// Layout: a header, one line per rank (pid, doorbell), and for every ordered
// pair (from, to) a ring of `slots` fixed-size slots with a producer counter
// (tail, written by `from`) and a consumer counter (head, written by `to`).
// A message travels as a stream of chunks, one per slot; each chunk carries
// the message's total length, so a receiver that expected another size
// raises instead of reading past its buffer. Every length read from shared
// memory is checked against the slot size and the posted buffer first.
//
// Progress: like MPI, any wait() moves every posted message of this rank
// forward (pushes what fits, pulls what arrived), so two ranks that wait
// on their receives while their sends are still queued do not deadlock.
// A waiting rank spins, then yields, then sleeps on a futex (its doorbell,
// rung by whoever gives it data or space), so oversubscribed ranks still
// progress. A peer whose process is gone is reported at once; one that
// stalls raises timeout_error after RINGTREE_TIMEOUT seconds.
//
// Hygiene: rank 0 creates the segment with O_EXCL and mode 0600 under an
// unguessable name (or the launcher's), the others check it is owned by
// their user, and it is unlinked as soon as every rank has attached, so a
// crash leaves nothing behind (a failed set-up removes it too). A segment
// left by a crashed run (creator dead, told apart from a reused pid by its
// start time) is removed by rank 0 and made anew; a rank that finds it
// first waits for the new one.
//
// Who may attach: each rank's line is claimed by compare-and-swap of its
// pid, so a second process with the same rank gets an error naming the
// holder; and every attacher must be of the creator's job (job_identity()
// below: the launcher's job id, or else the parent process), so two jobs
// that use the same name by mistake raise instead of pairing up.
//
// After a failed wait (a timeout, a dead peer, a refused message) the
// transport is broken: later calls raise naming the first failure, nothing
// moves any more (so no buffer of the failed call is touched), and the
// rank's line says it left, so peers waiting on it raise at once. The same
// happens when a transport is destroyed.
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <ringtree/core/config.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/core/posix.hpp>
#include <ringtree/memory/segments.hpp>
#include <ringtree/memory/shared_mapping.hpp>
#include <ringtree/transport/transport.hpp>
#include <ringtree/transport/wait_board.hpp>

namespace ringtree {

struct shm_options {
  std::optional<std::chrono::duration<double>> timeout{};  // unset: RINGTREE_TIMEOUT (default 300 s)
  std::size_t slots = 8;            // chunks in flight per pair of ranks
  std::size_t slot_bytes = 0;       // 0: 128 KiB, less for many ranks (64 MiB of slots at most)
  std::string job{};                // who may attach: "" for job_identity() below; a launcher that
                                    // shares a secret (torch's store) passes it here
};

namespace detail {

inline constexpr std::uint64_t shm_magic = 0x52494e4754524545ull;  // "RINGTREE"
inline constexpr std::uint32_t shm_version = 4;

struct alignas(64) shm_header {
  std::uint64_t magic;
  std::uint32_t version;
  std::int32_t size;
  std::uint64_t bytes;
  std::uint64_t slots;
  std::uint64_t slot_bytes;
  std::int32_t creator_pid;
  std::atomic<std::int32_t> attached;
  std::atomic<std::uint32_t> ready;
  std::uint64_t creator_start;  // the creator's start time (/proc), so that a reused pid is not taken for it
  char job[128];                // the creator's job identity; every attacher must share it
};
struct alignas(64) shm_rank {
  std::atomic<std::int32_t> pid;         // claimed by compare-and-swap from 0
  std::atomic<std::uint32_t> doorbell;
  std::atomic<std::uint32_t> sleeping;
  std::atomic<std::uint32_t> published;  // `card` below is valid
  std::atomic<std::uint32_t> left;       // the rank's transport failed or was destroyed
  std::atomic<std::uint32_t> cpus_set;   // `cpus` below is valid
  alignas(64) std::byte card[128];       // what a slot policy shares (a CUDA IPC handle)
  cpu_set_t cpus;                        // the CPUs this rank may run on (oversubscription)
  wait_line wait;                        // whom the rank waits for, in a long wait (wait_board.hpp)
};
struct alignas(64) shm_counter {
  std::atomic<std::uint64_t> value;
};
struct shm_queue {
  shm_counter tail;  // chunks written by the sender
  shm_counter head;  // chunks consumed by the receiver
};
struct shm_chunk {
  std::uint64_t total;  // length of the whole message
  std::uint64_t len;    // bytes in this chunk
};

inline std::size_t round64(std::size_t x) { return (x + 63) & ~std::size_t{63}; }

// What another process wrote is checked before it is used. A chunk header:
// the message's total length must be what this rank posted, and the chunk
// must fit its slot and what is left; "" if it may be copied.
inline std::string chunk_problem(int from, int to, std::uint64_t total, std::uint64_t len, std::size_t expected,
                                 std::size_t done, std::size_t slot_bytes) {
  if (total != expected)
    return cat("rank ", from, " sent a message of ", total, " bytes to rank ", to, ", which expected ", expected,
               " (mismatched collective calls?)");
  if (len > slot_bytes || len > expected - done || (len == 0 && expected != 0))
    return cat("corrupt chunk from rank ", from, ": ", len, " bytes in a slot of ", slot_bytes, " with ", expected - done,
               " left");
  return {};
}

struct shm_layout {
  int n;
  std::size_t slots, slot_bytes;
  bool payload_in_segment = true;  // false: only chunk headers here, payloads in device memory
  std::size_t ranks_at() const { return round64(sizeof(shm_header)); }
  std::size_t queues_at() const { return ranks_at() + round64(sizeof(shm_rank) * n); }
  std::size_t slot_stride() const { return round64(sizeof(shm_chunk) + (payload_in_segment ? slot_bytes : 0)); }
  std::size_t slots_at() const { return queues_at() + round64(sizeof(shm_queue) * n * n); }
  std::size_t bytes() const { return slots_at() + slot_stride() * slots * n * n; }
  // bytes(), or 0 where it would overflow (options are the user's numbers).
  std::size_t checked_bytes() const {
    std::size_t pairs = 0, per_pair = 0, all = 0, total = 0;
    const auto un = static_cast<std::size_t>(n);
    if (__builtin_mul_overflow(un, un, &pairs) || pairs > (std::size_t{1} << 40) ||
        __builtin_mul_overflow(slot_stride(), slots, &per_pair) || __builtin_mul_overflow(per_pair, pairs, &all) ||
        __builtin_add_overflow(all, slots_at(), &total))
      return 0;
    return total;
  }
};

// The segment's header: ours, for this many ranks, and its slot geometry
// adds up to the bytes mapped (with overflow checks: the numbers are not ours).
inline constexpr std::size_t max_slots = 4096, max_slot_bytes = std::size_t{1} << 30;
inline bool header_matches(const shm_header& h, int size, std::size_t bytes, bool payload_in_segment) {
  if (h.magic != shm_magic || h.version != shm_version || h.size != size || h.bytes != bytes || size < 1 ||
      h.slots == 0 || h.slots > max_slots || h.slot_bytes == 0 || h.slot_bytes > max_slot_bytes)
    return false;
  const shm_layout lay{size, h.slots, h.slot_bytes, payload_in_segment};
  std::size_t per_pair = 0, all = 0, total = 0;
  if (__builtin_mul_overflow(lay.slot_stride(), h.slots, &per_pair) ||
      __builtin_mul_overflow(per_pair, static_cast<std::size_t>(size) * static_cast<std::size_t>(size), &all) ||
      __builtin_add_overflow(all, lay.slots_at(), &total))
    return false;
  return total == bytes;
}

inline void futex_wait(std::atomic<std::uint32_t>* addr, std::uint32_t expected, long ns) {
  timespec ts{0, ns};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAIT, expected, &ts, nullptr, 0);
}
inline void futex_wake(std::atomic<std::uint32_t>* addr) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}
// Which job this process belongs to, as every rank of a job can tell
// without talking to the others: RINGTREE_SHM_JOB, else the launcher's job
// id (Open MPI / PMIx, Slurm, torchrun), else the parent process (a script
// or program that starts the ranks), with its start time.
inline std::string job_identity() {
  for (const char* var : {"RINGTREE_SHM_JOB", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"})
    if (const char* v = config::get(var)) {
      std::string id = cat(var, "=", v);
      if (const char* step = std::getenv("SLURM_STEP_ID"); step != nullptr && std::string(var) == "SLURM_JOB_ID")
        id += cat(".", step);
      return id.substr(0, sizeof(shm_header::job) - 1);
    }
  const int parent = static_cast<int>(getppid());
  return cat("parent ", parent, "@", read_proc_stat(parent).start);
}
// A segment made by `creator` with identity `theirs` may be joined by this
// process (identity `mine`): the same job, or, for jobs known only by their
// parent process, one of the two started the other (a program that forks
// its ranks).
inline bool same_job(const std::string& theirs, const std::string& mine, int creator) {
  if (theirs == mine) return true;
  const bool by_parent = theirs.rfind("parent ", 0) == 0 && mine.rfind("parent ", 0) == 0;
  const int me = static_cast<int>(getpid());
  return by_parent && (is_ancestor(creator, me) || is_ancestor(me, creator));
}

// The mapped segment: creation, attachment (claiming this rank's line),
// unlinking.
class shm_segment {
 public:
  shm_segment(const std::string& name, int rank, int size, const shm_options& opt, bool payload_in_segment)
      : name_(name), payload_(payload_in_segment) {
    if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos || name.size() > 200)
      throw error("shm_transport", rank, cat("segment name '", name, "' must be '/' followed by up to 200 characters without '/'"));
    if (size < 1 || rank < 0 || rank >= size)
      throw error("shm_transport", rank, cat("rank ", rank, " and size ", size, " do not fit"));
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(*opt.timeout);
    const std::string job = opt.job.empty() ? job_identity() : cat("job ", opt.job).substr(0, sizeof(shm_header::job) - 1);
    if (rank == 0) create(rank, size, opt, job);
    else attach(rank, size, deadline, job);
    hdr()->attached.fetch_add(1);
  }
  shm_segment(const shm_segment&) = delete;
  ~shm_segment() {
    if (base_ != nullptr) munmap(base_, bytes_);
    if (!unlinked_ && creator_) shm_unlink(name_.c_str());
  }

  shm_header* hdr() const { return static_cast<shm_header*>(base_); }
  std::byte* base() const { return static_cast<std::byte*>(base_); }
  const std::string& name() const { return name_; }
  shm_rank* rank_line(int r) const { return reinterpret_cast<shm_rank*>(base() + round64(sizeof(shm_header))) + r; }
  // Rank 0 removes the name once everyone is in; until then it is the only
  // way in, afterwards the mapping lives on without a name.
  void unlink_when_all_attached(int rank, int size, std::chrono::steady_clock::time_point deadline) {
    while (hdr()->attached.load() < size) {
      if (std::chrono::steady_clock::now() > deadline)
        throw timeout_error("shm_transport", rank, -1,
                            cat("only ", hdr()->attached.load(), " of ", size, " ranks attached to ", name_,
                                " in time (RINGTREE_TIMEOUT)"));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    shm_unlink(name_.c_str());
    unlinked_ = true;
  }

 private:
  void create(int rank, int size, const shm_options& opt, const std::string& job) {
    shm_layout lay{size, opt.slots, opt.slot_bytes, payload_};
    bytes_ = lay.checked_bytes();
    if (bytes_ == 0)
      throw error("shm_transport", rank, cat("a segment for ", size, " ranks with ", opt.slots, " slots of ", opt.slot_bytes,
                                             " bytes per pair is larger than memory can address"));
    sweep_stale_segments();  // what crashed runs left
    int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST && remove_if_stale()) fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      const int e = errno;
      if (e == EEXIST) throw error("shm_transport", rank, cat("rank 0 of ", name_, " is already held by ", holder()));
      throw error("shm_transport", rank, cat("cannot create shared memory ", name_, ": ", std::strerror(e)));
    }
    creator_ = true;
    // From here on a failure removes the name again: nothing is left behind.
    try {
      if (ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
        const int e = errno;
        close(fd);
        throw error("shm_transport", rank, cat("cannot size ", name_, " to ", bytes_, " bytes: ", std::strerror(e)));
      }
      map(fd, rank);
    } catch (...) {
      shm_unlink(name_.c_str());
      unlinked_ = true;
      throw;
    }
    auto* h = hdr();
    h->magic = shm_magic;
    h->version = shm_version;
    h->size = size;
    h->bytes = bytes_;
    h->slots = lay.slots;
    h->slot_bytes = lay.slot_bytes;
    h->creator_pid = getpid();
    h->creator_start = read_proc_stat(getpid()).start;
    std::snprintf(h->job, sizeof h->job, "%s", job.c_str());
    rank_line(0)->pid.store(getpid());
    h->ready.store(1, std::memory_order_release);
  }

  void attach(int rank, int size, std::chrono::steady_clock::time_point deadline, const std::string& job) {
    std::string stale;  // a segment of a crashed run seen meanwhile
    while (true) {  // rank 0 may not have created it (or replaced a stale one) yet
      if (const int fd = shm_open(name_.c_str(), O_RDWR, 0); fd >= 0) {
        struct stat st {};
        if (fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(shm_header))) {
          if (st.st_uid != geteuid() || (st.st_mode & 0077) != 0) {
            close(fd);
            throw error("shm_transport", rank, cat(name_, " belongs to another user or is open to others (mode ",
                                                   std::oct, (st.st_mode & 0777), "); refusing it"));
          }
          bytes_ = static_cast<std::size_t>(st.st_size);
          map(fd, rank);
          if (hdr()->ready.load(std::memory_order_acquire) == 1) {
            if (!process_alive(hdr()->creator_pid, hdr()->creator_start)) {
              stale = cat(" (only a segment left by a crashed run was found: its creator, pid ", hdr()->creator_pid,
                          ", is dead)");
            } else {
              join(rank, size, job);
              return;
            }
          }
          munmap(base_, bytes_);
          base_ = nullptr;
        } else {
          close(fd);
        }
      }
      if (std::chrono::steady_clock::now() > deadline)
        throw timeout_error("shm_transport", rank, 0, cat("rank 0 did not create ", name_, " in time (RINGTREE_TIMEOUT)", stale));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  // A live segment: it must be ours, of this job, with this rank free.
  void join(int rank, int size, const std::string& job) {
    auto* h = hdr();
    if (!header_matches(*h, size, bytes_, payload_))
      throw error("shm_transport", rank, cat(name_, " is not a ringtree segment for ", size, " ranks (it says size ",
                                             h->size, ", ", h->bytes, " bytes)"));
    const std::string theirs(h->job, strnlen(h->job, sizeof h->job));
    if (!same_job(theirs, job, h->creator_pid))
      throw error("shm_transport", rank, cat(name_, " belongs to another job (made by pid ", h->creator_pid, ", job '", theirs,
                                             "'; this process: '", job, "'). Two jobs with the same segment name? Give each "
                                             "its own; ranks not started by one launcher set RINGTREE_SHM_JOB alike"));
    std::int32_t holder = 0;
    if (!rank_line(rank)->pid.compare_exchange_strong(holder, static_cast<std::int32_t>(getpid())))
      throw error("shm_transport", rank, cat("rank ", rank, " of ", name_, " is already held by pid ", holder,
                                             process_alive(holder) ? "" : " (which has died)",
                                             ": two processes were given the same rank"));
  }

  void map(int fd, int rank) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int e = errno;
    close(fd);
    if (p == MAP_FAILED) throw error("shm_transport", rank, cat("cannot map ", name_, " (", bytes_, " bytes): ", std::strerror(e)));
    base_ = p;
  }

  // Who made the segment now under this name: one read-only look at its header.
  struct creator_info {
    bool missing = false;  // no segment of this name
    bool ours = false;     // owned by this user
    int pid = -1;          // -1: not (yet) a ringtree segment
    std::uint64_t start = 0;
    std::string job;
  };
  creator_info creator() const {
    creator_info c;
    const int fd = shm_open(name_.c_str(), O_RDONLY, 0);
    if (fd < 0) {
      c.missing = errno == ENOENT;
      return c;
    }
    struct stat st {};
    if (fstat(fd, &st) == 0) {
      c.ours = st.st_uid == geteuid();
      if (st.st_size >= static_cast<off_t>(sizeof(shm_header))) {
        void* p = mmap(nullptr, sizeof(shm_header), PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
          const auto* h = static_cast<const shm_header*>(p);
          if (h->magic == shm_magic)
            c.pid = h->creator_pid, c.start = h->creator_start, c.job.assign(h->job, strnlen(h->job, sizeof h->job));
          munmap(p, sizeof(shm_header));
        }
      }
    }
    close(fd);
    return c;
  }

  // The existing segment's creator, for an error: "pid P (job J)".
  std::string holder() const {
    const creator_info c = creator();
    if (c.pid < 0) return "another live process";
    return cat("pid ", c.pid, " (job '", c.job, "'): two processes were given rank 0, or two jobs the same segment name");
  }

  // A segment whose creator is dead is what a crashed run left: remove it.
  bool remove_if_stale() {
    const creator_info c = creator();
    if (c.missing) return true;
    if (!c.ours || process_alive(c.pid, c.start)) return false;
    return shm_unlink(name_.c_str()) == 0 || errno == ENOENT;
  }

  std::string name_;
  bool payload_;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  bool creator_ = false, unlinked_ = false;
};

// Why rank r of `seg` can no longer answer, or "".
inline std::string shm_peer_problem(const shm_segment& seg, int r) {
  const int pid = seg.rank_line(r)->pid.load();
  if (pid != 0 && !process_alive(pid)) return cat("rank ", r, " (pid ", pid, ") has died");
  if (seg.rank_line(r)->left.load() != 0)
    return cat("rank ", r, " (pid ", pid, ") failed or left the communicator (its transport raised, or was destroyed) before this message");
  return {};
}

// Where chunk payloads live and how they are copied: host_slots keeps them
// in the segment and copies with memcpy. A policy may instead keep them in
// device memory (cuda_ipc.hpp); setup() then publishes this rank's card
// (an IPC handle) and reads the others'.
struct host_slots {
  using memory_type = host_memory;
  static constexpr const char* name = "shm";
  static constexpr bool payload_in_segment = true;
  struct context {
    int rank, size;
    std::size_t slots, slot_bytes;
    std::function<std::span<std::byte>(int)> card;  // rank r's card
    std::function<void()> publish;                  // my card is written
    std::function<void()> wait_all_published;
  };
  void setup(const context&) {}
  host_slots for_split(int) const { return {}; }
  memory_type memory() const noexcept { return {}; }
  std::byte* payload(int /*from*/, int /*to*/, std::size_t /*index*/, std::byte* in_segment) const noexcept {
    return in_segment;
  }
  void put(std::byte* slot, const std::byte* src, std::size_t len) const noexcept { std::memcpy(slot, src, len); }
  void get(std::byte* dst, const std::byte* slot, std::size_t len) const noexcept { std::memcpy(dst, slot, len); }
};

}  // namespace detail

template <class Slots>
class slot_transport {
  struct op_state {
    std::byte* recv_buf = nullptr;
    const std::byte* send_buf = nullptr;
    std::size_t bytes = 0, done = 0;
    bool complete = false;
    int refused_from = -1;  // set when the stream from this peer was refused: wait() raises
  };

 public:
  using memory_type = typename Slots::memory_type;
  static constexpr const char* name = Slots::name;
  static constexpr bool maps_in_calls() noexcept { return std::same_as<Slots, detail::host_slots>; }  // memory/shared_mapping.hpp

  class request {
   public:
    request() = default;

   private:
    friend class slot_transport;
    std::shared_ptr<op_state> op_;
    int peer_ = -1;
    bool recv_ = false;
    std::chrono::steady_clock::time_point since_{}, next_check_{};  // test(): the first that found it pending; the next look at the peer
  };

  // `name`: the segment's name, the same on every rank ("/something").
  slot_transport(const std::string& name, int rank, int size, shm_options opt = {}, Slots slots = {})
      : opt_(fill(opt, size)), slots_(std::move(slots)) {
    seg_ = std::make_shared<detail::shm_segment>(name, rank, size, opt_, Slots::payload_in_segment);
    rank_ = rank;
    size_ = size;
    if (sched_getaffinity(0, sizeof me()->cpus, &me()->cpus) != 0) CPU_ZERO(&me()->cpus);
    me()->cpus_set.store(1, std::memory_order_release);
    auto* h = seg_->hdr();
    lay_ = detail::shm_layout{size, static_cast<std::size_t>(h->slots), static_cast<std::size_t>(h->slot_bytes),
                              Slots::payload_in_segment};
    sends_.resize(size);
    recvs_.resize(size);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(*opt_.timeout);
    slots_.setup(typename Slots::context{
        rank, size, lay_.slots, lay_.slot_bytes,
        [this](int r) { return std::span<std::byte>(rank_line(r)->card); },
        [this] { me()->published.store(1); },
        [this, deadline] {
          for (int r = 0; r < size_; ++r)
            while (rank_line(r)->published.load() == 0) {
              if (std::chrono::steady_clock::now() > deadline)
                throw timeout_error("shm_transport", rank_, r, detail::cat("rank ", r, " did not publish its slots in time (RINGTREE_TIMEOUT)"));
              std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
        }});
    if (rank == 0) seg_->unlink_when_all_attached(rank, size, deadline);
    std::vector<int> self(size);
    for (int r = 0; r < size; ++r) self[r] = r;
    number_as(std::move(self));
  }
  slot_transport(slot_transport&&) = default;
  // Peers still waiting on this rank learn at once that it is gone.
  ~slot_transport() {
    if (seg_) leave();
  }

  // Leaves the communicator now: this transport refuses every later call,
  // and the peers' waits on this rank raise at once. For a program that
  // gives up after an error but goes on living.
  void abort() noexcept {
    if (broken_.empty()) broken_ = "abort() was called";
    leave();
  }
  // Why the transport is broken ("" while it works).
  const std::string& failure() const noexcept { return broken_; }

  // Without MPI: the name from RINGTREE_SHM_NAME, rank and size from
  // RINGTREE_RANK / RINGTREE_SIZE (or Open MPI's or PMI's variables), so any
  // launcher can start the processes.
  static slot_transport from_env(shm_options opt = {}) {
    const config c = config::from_env();
    if (c.shm_name.empty())
      throw error("shm_transport", -1, "RINGTREE_SHM_NAME is not set (a name like /ringtree-job42, the same on every rank)");
    const int rank = c.rank ? *c.rank : env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK"}, "rank");
    const int size = c.size ? *c.size : env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, "size");
    return slot_transport(c.shm_name, rank, size, opt);
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  // communicator::split: the first member draws a segment name and sends
  // it to the others, who all attach to the new segment.
  std::unique_ptr<slot_transport> split(int, int, std::span<const int> members, int index) {
    char name[detail::shm_name_max] = {};
    if (index == 0) std::snprintf(name, sizeof name, "%s", detail::random_shm_name().c_str());
    detail::share_from_first(*this, members, index, "split", std::as_writable_bytes(std::span(name)));
    name[sizeof name - 1] = '\0';
    return std::make_unique<slot_transport>(name, index, static_cast<int>(members.size()), opt_, slots_.for_split(index));
  }

  memory_type memory() const noexcept { return slots_.memory(); }

  // Symmetric memory (memory/shared_mapping.hpp), a collective call: memory of
  // the slots' kind, mapped by every rank: a POSIX segment per rank on the
  // host (map_control), or what a device policy shares (cuda_slots).
  std::optional<shared_mapping> map_shared(std::size_t bytes) {
    if constexpr (requires { slots_.map_shared(*this, bytes, shared_mapping{}); }) {
      check_usable("symmetric memory");
      shared_mapping m;  // what a mapping of this transport carries besides the regions
      m.peer_problem = [seg = seg_](int q) { return detail::shm_peer_problem(*seg, q); };
      m.timeout = *opt_.timeout;
      return slots_.map_shared(*this, bytes, std::move(m));
    } else {
      return map_control(bytes);
    }
  }
  // Host memory in a POSIX segment per rank, mapped by all (memory/segments.hpp):
  // symmetric memory's control lines and staging, whatever the slots' kind.
  std::optional<shared_mapping> map_control(std::size_t bytes) {
    check_usable("symmetric memory");
    return detail::map_segments(*this, bytes, [seg = seg_](int q) { return detail::shm_peer_problem(*seg, q); },
                                *opt_.timeout, detail::sharing::required);
  }

  // Whom this host's ranks wait for (wait_board.hpp): told as ranks of a
  // whole that this transport is part of (`whole[i]`: rank i's number
  // there; a cluster's host part), or as its own (the default).
  void number_as(std::vector<int> whole) {
    std::vector<detail::wait_line*> lines;
    for (int r = 0; r < size_; ++r) lines.push_back(&rank_line(r)->wait);
    renumbered_ = false;
    for (int r = 0; r < size_ && r < int(whole.size()); ++r) renumbered_ = renumbered_ || whole[r] != r;
    board_ = std::make_shared<detail::wait_board>(seg_, std::move(lines), rank_, std::move(whole));
  }
  std::shared_ptr<const detail::wait_board> wait_board() const noexcept { return board_; }

  const std::string& segment_name() const noexcept { return seg_->name(); }
  std::size_t slot_bytes() const noexcept { return lay_.slot_bytes; }

  request isend(int peer, std::span<const std::byte> data) {
    check_usable("isend");
    request r = post(peer, false);
    r.op_->send_buf = data.data();
    r.op_->bytes = data.size();
    sends_[peer].push_back(r.op_);
    progress_sends(peer);  // eager: a small message leaves at once
    return r;
  }
  request irecv(int peer, std::span<std::byte> data) {
    check_usable("irecv");
    request r = post(peer, true);
    r.op_->recv_buf = data.data();
    r.op_->bytes = data.size();
    recvs_[peer].push_back(r.op_);
    return r;
  }

  void wait(request& r) {
    if (!r.op_) return;
    check_usable(r.recv_ ? "recv" : "send");
    failing_with(r, [&] { wait_pending(r); });
  }
  // Moves every posted message along; completes r if it is done, else
  // returns false at once. Raises as wait() does, the timeout counted from
  // the first test that found r pending.
  bool test(request& r) {
    if (!r.op_) return true;
    check_usable(r.recv_ ? "recv" : "send");
    bool done = false;
    failing_with(r, [&] {
      progress();
      if (!r.op_->complete) {
        const auto now = std::chrono::steady_clock::now();
        if (r.since_ == decltype(r.since_){}) r.since_ = r.next_check_ = now;
        if (now >= r.next_check_) {
          check_peer(r, now - r.since_ > *opt_.timeout);
          r.next_check_ = now + std::chrono::milliseconds(5);
        }
        return;
      }
      finish(r);
      done = true;
    });
    return done;
  }

 private:
  // f() on request r; if it raises, the transport is broken from then on.
  template <class F>
  void failing_with(request& r, F&& f) {
    try {
      f();
    } catch (const error& e) {
      broken_ = e.what();
      r.op_.reset();
      leave();
      throw;
    }
  }
  void wait_pending(request& r) {
    std::chrono::steady_clock::time_point deadline{}, next_check{};
    bool published = false;
    for (long idle = 0; !r.op_->complete;) {
      const std::uint32_t bell = me()->doorbell.load(std::memory_order_acquire);
      if (progress()) {
        idle = 0;
        continue;
      }
      if (r.op_->complete) break;
      // spin: the peer is usually a few hundred ns away, unless it waits for
      // this rank's core (more ranks than cores): then yield almost at once
      if (++idle < (oversubscribed() ? 8 : 256)) continue;
      if (idle < 1024) {
        sched_yield();
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      if (deadline == decltype(deadline){}) {
        deadline = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(*opt_.timeout);
        next_check = now;
        board_->waiting(board_->whole_of(r.peer_));  // a long wait: the host may ask whom for
        published = true;
      }
      if (now >= next_check) {
        check_peer(r, now > deadline);
        next_check = now + std::chrono::milliseconds(5);
      }
      me()->sleeping.store(1);
      if (!progress() && !r.op_->complete)
        detail::futex_wait(&me()->doorbell, bell, 2'000'000);  // 2 ms, then look again
      me()->sleeping.store(0);
    }
    if (published) board_->done();
    finish(r);
  }
  // r has completed: its state goes back to the spares.
  void finish(request& r) {
    const int refused = r.op_->refused_from;
    if (r.op_.use_count() == 1) spare_.push_back(std::move(r.op_));
    r.op_.reset();
    if (refused >= 0)
      throw error("recv", rank_, detail::cat("a message from rank ", refused,
                                              " was refused earlier, so this one cannot be trusted: not received"));
  }

  // More ranks than the CPUs they may run on between them (the union of
  // their affinity masks; a launcher that binds each rank to one core
  // gives each a mask of one). Known once every rank has said its CPUs.
  bool oversubscribed() {
    if (oversubscribed_ < 0) {
      cpu_set_t any;
      CPU_ZERO(&any);
      for (int q = 0; q < size_; ++q) {
        if (rank_line(q)->cpus_set.load(std::memory_order_acquire) == 0) return false;  // not yet known
        CPU_OR(&any, &any, &rank_line(q)->cpus);
      }
      oversubscribed_ = CPU_COUNT(&any) > 0 && size_ > CPU_COUNT(&any) ? 1 : 0;
    }
    return oversubscribed_ == 1;
  }

  void check_usable(const char* call) const {
    if (!broken_.empty())
      throw error(call, rank_, detail::cat("this transport failed earlier and cannot be used again (make a new one); ",
                                           "the first failure: ", broken_));
  }
  // Nothing moves any more: drop what was queued (those buffers belong to
  // a call that failed) and tell the peers, waking any that sleep.
  void leave() noexcept {
    for (auto& q : sends_) q.clear();
    for (auto& q : recvs_) q.clear();
    me()->left.store(1);
    for (int r = 0; r < size_; ++r)
      if (r != rank_) {
        rank_line(r)->doorbell.fetch_add(1);
        detail::futex_wake(&rank_line(r)->doorbell);
      }
  }

  static shm_options fill(shm_options o, int size) {
    if (!o.timeout) o.timeout = config::from_env().timeout;
    if (o.slots == 0 || o.slots > detail::max_slots)
      throw error("shm_transport", -1, detail::cat("slots must be 1..", detail::max_slots, ", got ", o.slots));
    if (o.slot_bytes > detail::max_slot_bytes)
      throw error("shm_transport", -1, detail::cat("slot_bytes must be at most ", detail::max_slot_bytes, ", got ", o.slot_bytes));
    if (o.slot_bytes == 0) {
      const std::size_t pairs = static_cast<std::size_t>(size > 0 ? size : 1) * (size > 0 ? size : 1);
      o.slot_bytes = std::clamp<std::size_t>((std::size_t{64} << 20) / (pairs * o.slots), 4096, std::size_t{128} << 10);
    }
    return o;
  }
  static int env_int(std::initializer_list<const char*> names, const char* what) {
    for (const char* n : names)
      if (const char* v = std::getenv(n); v != nullptr && *v != '\0') {
        char* end = nullptr;
        const long x = std::strtol(v, &end, 10);
        if (end == v || *end != '\0' || x < 0 || x > 1 << 20)
          throw error("shm_transport", -1, detail::cat(n, "='", v, "' is not a ", what));
        return static_cast<int>(x);
      }
    throw error("shm_transport", -1, detail::cat("no ", what, " in the environment (set RINGTREE_RANK and RINGTREE_SIZE)"));
  }

  request post(int peer, bool recv) {
    if (peer < 0 || peer >= size_ || peer == rank_)
      throw error(recv ? "irecv" : "isend", rank_, detail::cat("peer ", peer, " is not another rank of ", size_));
    request r;
    if (spare_.empty()) {
      r.op_ = std::make_shared<op_state>();
    } else {  // no allocation per message in steady state
      r.op_ = std::move(spare_.back());
      spare_.pop_back();
      *r.op_ = op_state{};
    }
    r.peer_ = peer;
    r.recv_ = recv;
    return r;
  }

  detail::shm_rank* rank_line(int r) const { return seg_->rank_line(r); }
  detail::shm_rank* me() const { return rank_line(rank_); }
  detail::shm_queue* queue(int from, int to) const {
    return reinterpret_cast<detail::shm_queue*>(seg_->base() + lay_.queues_at()) + (static_cast<std::size_t>(from) * size_ + to);
  }
  detail::shm_chunk* slot(int from, int to, std::uint64_t k) const {
    const std::size_t index = (static_cast<std::size_t>(from) * size_ + to) * lay_.slots + k % lay_.slots;
    return reinterpret_cast<detail::shm_chunk*>(seg_->base() + lay_.slots_at() + index * lay_.slot_stride());
  }
  std::byte* payload(int from, int to, std::uint64_t k) const {
    return slots_.payload(from, to, k % lay_.slots, reinterpret_cast<std::byte*>(slot(from, to, k) + 1));
  }
  // Wake rank r if it sleeps. The common case costs one load: a waiter
  // announces `sleeping` and then looks at its queues once more before it
  // sleeps, and a sender publishes its data (seq_cst) before it looks at
  // `sleeping`, so one of the two always sees the other.
  void ring(int r) const {
    auto* line = rank_line(r);
    if (line->sleeping.load() == 0) return;
    line->doorbell.fetch_add(1);
    detail::futex_wake(&line->doorbell);
  }

  // Moves every posted message forward; true if anything moved.
  bool progress() {
    bool moved = false;
    for (int p = 0; p < size_; ++p) {
      if (!sends_[p].empty()) moved |= progress_sends(p);
      if (!recvs_[p].empty()) moved |= progress_recvs(p);
    }
    return moved;
  }

  bool progress_sends(int to) {
    auto* q = queue(rank_, to);
    bool moved = false;
    while (!sends_[to].empty()) {
      op_state& op = *sends_[to].front();
      const std::uint64_t tail = q->tail.value.load(std::memory_order_relaxed);
      const std::uint64_t head = q->head.value.load(std::memory_order_acquire);
      if (tail - head >= lay_.slots) break;  // ring full
      const std::size_t len = std::min(lay_.slot_bytes, op.bytes - op.done);
      auto* c = slot(rank_, to, tail);
      c->total = op.bytes;
      c->len = len;
      if (len != 0) slots_.put(payload(rank_, to, tail), op.send_buf + op.done, len);
      q->tail.value.store(tail + 1);  // seq_cst: see ring()
      op.done += len;
      moved = true;
      if (op.done == op.bytes) {
        op.complete = true;
        sends_[to].pop_front();
      }
    }
    if (moved) ring(to);
    return moved;
  }

  bool progress_recvs(int from) {
    auto* q = queue(from, rank_);
    bool moved = false;
    while (!recvs_[from].empty()) {
      op_state& op = *recvs_[from].front();
      const std::uint64_t head = q->head.value.load(std::memory_order_relaxed);
      if (q->tail.value.load(std::memory_order_acquire) == head) break;  // nothing new
      const auto* c = slot(from, rank_, head);
      // Lengths come from another process: check them before trusting them.
      const std::uint64_t len = c->len;
      if (auto why = detail::chunk_problem(from, rank_, c->total, len, op.bytes, op.done, lay_.slot_bytes); !why.empty()) {
        fail_recv(from);
        throw error("recv", rank_, why);
      }
      if (len != 0) slots_.get(op.recv_buf + op.done, payload(from, rank_, head), len);
      q->head.value.store(head + 1);  // seq_cst: see ring()
      op.done += len;
      moved = true;
      if (op.done == op.bytes) {
        op.complete = true;
        recvs_[from].pop_front();
      }
    }
    if (moved) ring(from);
    return moved;
  }
  // After a refused message the stream from `from` cannot be trusted: drop
  // what this rank expected from it, so later waits fail instead of misreading.
  void fail_recv(int from) {
    for (auto& op : recvs_[from]) op->complete = true, op->refused_from = from;
    recvs_[from].clear();
  }

  // Raises if r's peer can no longer answer or (`expired`) did not in
  // time, naming the rank its host's chain of waits leads to (wait_board.hpp).
  void check_peer(const request& r, bool expired) const {
    const char* what = r.recv_ ? "recv" : "send";
    const int peer = board_->whole_of(r.peer_);
    const auto why = detail::shm_peer_problem(*seg_, r.peer_);
    if (why.empty() && !expired) return;
    const auto b = board_->follow(peer);
    if (b.rank == peer) {
      if (!why.empty()) throw error(what, rank_, why);
      throw timeout_error(what, rank_, r.peer_,
                          detail::cat("waited ", opt_.timeout->count(), " s for rank ", r.peer_,
                                      " (RINGTREE_TIMEOUT): it stalled or is in another call"));
    }
    // A peer stuck behind another rank (or gone while it waited on one):
    // that one is to blame.
    const std::string whole = renumbered_ ? detail::cat(" (rank ", peer, " of the whole communicator, in whose numbers the rest is)") : "";
    throw timeout_error(what, rank_, numbered(b.rank),
                        detail::cat(why.empty() ? detail::cat("waited ", opt_.timeout->count(), " s for rank ", r.peer_) : why,
                                    whole, b.chain, " (RINGTREE_TIMEOUT): rank ", b.rank, " stalled, died or is in another call"));
  }
  // The whole's rank w in this transport's numbering: its own rank here, or
  // size() + w for a rank that is not in it (traced_transport reads it so).
  int numbered(int w) const noexcept {
    for (int r = 0; r < size_; ++r)
      if (board_->whole_of(r) == w) return r;
    return size_ + w;
  }

  shm_options opt_;
  Slots slots_;
  std::shared_ptr<detail::shm_segment> seg_;  // shared with the symmetric mappings, which ask it who is alive
  detail::shm_layout lay_{};
  int rank_ = 0, size_ = 1;
  std::vector<std::deque<std::shared_ptr<op_state>>> sends_, recvs_;
  std::vector<std::shared_ptr<op_state>> spare_;
  std::string broken_;  // the first failure; "" while usable
  int oversubscribed_ = -1;  // -1: not known yet
  std::shared_ptr<detail::wait_board> board_;  // this host's long waits (number_as)
  bool renumbered_ = false;                    // its numbers are not this transport's
};

// Processes on one host, payloads in the shared segment.
using shm_transport = slot_transport<detail::host_slots>;

}  // namespace ringtree
