#pragma once
// The segment's lifetime, apart from what moves through it: creating it,
// attaching to it, unlinking its name, and removing what crashed runs
// left, so that a crash or a stranger cannot leave a rank paired with the
// wrong processes or /dev/shm full.
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
// holder; and every attacher must be of the creator's job (job_identity(),
// shm/bootstrap.hpp: the launcher's job id, or else the parent process), so
// two jobs that use the same name by mistake raise instead of pairing up.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <ringtree/core/compiled.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/core/posix.hpp>
#include <ringtree/memory/segments.hpp>
#include <ringtree/transport/shm/bootstrap.hpp>
#include <ringtree/transport/shm/layout.hpp>
#include <ringtree/transport/shm/options.hpp>

namespace ringtree::detail {

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
                                " within the timeout (RINGTREE_TIMEOUT)"));
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
        throw timeout_error("shm_transport", rank, 0, cat("rank 0 did not create ", name_, " within the timeout (RINGTREE_TIMEOUT)", stale));
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
std::string shm_peer_problem(const shm_segment& seg, int r);

}  // namespace ringtree::detail

#if RINGTREE_DEFINES
#include <ringtree/transport/shm/segment-inl.hpp>
#endif
