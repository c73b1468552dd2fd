#pragma once
// Who waits for whom, among the ranks of one host: each rank's line in
// shared memory says, while one of its waits is long, which rank it waits
// for and since when. A rank that times out waiting on a peer of its host
// follows these lines to the rank that is really stuck (the peer may be
// waiting itself, on a rank behind a broken link) and names that one, as
// Horovod's stall inspector and NCCL's watchdog do. Ranks are told in the
// numbering of the whole (a cluster's communicator, or the transport's own
// where it stands alone), so that a chain may leave the host: its last
// link is a rank elsewhere.
//
// Only long waits are published (a wait that has spun and yielded and is
// about to sleep), so the hot path pays nothing. A failed wait leaves its
// line set: a peer that finds this rank dead or gone still learns what it
// was waiting for.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ringtree/core/error.hpp>

namespace ringtree::detail {

struct wait_line {
  std::atomic<std::uint32_t> waiting_for;  // the whole's rank + 1; 0: no long wait
  std::atomic<std::uint64_t> since_ns;     // steady clock (the host's), when that wait began
};

class wait_board {
 public:
  // `lines[i]`: the line of the host's rank i, which is rank whole[i] of
  // the whole; `me`: this rank's index; `keep` holds the memory.
  wait_board(std::shared_ptr<void> keep, std::vector<wait_line*> lines, int me, std::vector<int> whole)
      : keep_(std::move(keep)), lines_(std::move(lines)), me_(me), whole_(std::move(whole)) {}

  int whole_of(int i) const noexcept { return i >= 0 && i < int(whole_.size()) ? whole_[i] : i; }
  int me() const noexcept { return whole_of(me_); }
  void waiting(int whole_peer) const noexcept {
    lines_[me_]->since_ns.store(now_ns(), std::memory_order_relaxed);
    lines_[me_]->waiting_for.store(static_cast<std::uint32_t>(whole_peer + 1), std::memory_order_release);
  }
  void done() const noexcept { lines_[me_]->waiting_for.store(0, std::memory_order_relaxed); }

  // Where a wait on the whole's rank `peer` is stuck: the last rank of the
  // chain of long waits that starts at `peer` (peer itself if it is not
  // waiting, or is not on this host), and the chain in words, "" if none.
  // A chain that comes back to a rank it named (not this one) is a cycle:
  // it stops there, and none of its ranks is more to blame than another.
  // Ranks stuck in collectives called in different orders wait for each
  // other for good; two ranks still exchanging (a message in many pieces,
  // on a machine too busy for the timeout) also wait for each other, but
  // each wait is young: `youngest`, in seconds, tells the two apart.
  struct blame {
    int rank;
    std::string chain;
    bool cycle = false;
    double youngest = 0;  // the cycle's youngest wait
    // The end of a timeout's message: who is to blame (`it`: the peer itself).
    std::string verdict(const std::string& it) const {
      if (cycle && youngest < live_wait_s)
        return cat("; these ranks wait for each other, but the youngest of those waits began ", youngest,
                   " s ago: they are still exchanging, too slowly for the timeout (a busy machine? a larger RINGTREE_TIMEOUT)");
      if (cycle) return "; the ranks of this cycle wait for each other (collectives called in different orders?)";
      return cat(", ", whole_timeout_words, ": ", it, " stalled, died or is in another call");
    }
    static constexpr double live_wait_s = 1.0;
  };
  blame follow(int peer) const {
    blame b{peer, {}};
    std::vector<int> named{peer};
    std::vector<double> ages;  // ages[j]: how long named[j] has waited for named[j + 1]
    for (std::size_t hops = 0; hops < lines_.size(); ++hops) {
      const int i = index_of(b.rank);
      if (i < 0) break;  // elsewhere: the chain leaves the host here
      const std::uint32_t w = lines_[i]->waiting_for.load(std::memory_order_acquire);
      if (w == 0) break;
      const int next = static_cast<int>(w) - 1;
      if (next == me() || next == b.rank) break;  // a cycle through this rank: it is the one waited for
      const double s = static_cast<double>(now_ns() - lines_[i]->since_ns.load(std::memory_order_relaxed)) * 1e-9;
      const double shown = static_cast<int>(s * 10) / 10.0;
      b.chain += cat(", which has waited ", shown, " s for rank ", next);
      ages.push_back(shown);
      if (const auto at = std::find(named.begin(), named.end(), next); at != named.end()) {
        b.chain += ", which is where this chain began";
        b.cycle = true;
        b.youngest = *std::min_element(ages.begin() + (at - named.begin()), ages.end());
        break;
      }
      named.push_back(next);
      b.rank = next;
    }
    return b;
  }

 private:
  int index_of(int whole_rank) const noexcept {
    for (std::size_t i = 0; i < whole_.size(); ++i)
      if (whole_[i] == whole_rank) return static_cast<int>(i);
    return -1;
  }
  static std::uint64_t now_ns() noexcept {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  }
  std::shared_ptr<void> keep_;
  std::vector<wait_line*> lines_;
  int me_;
  std::vector<int> whole_;
};

// The timeout_error of a transport between hosts (MPI, UCX) whose wait on
// its rank `peer` got no answer: it names the peer, or where this host's
// board (may be null) leads from it, the rank it names given in the
// transport's numbers where it has one there (else size + its number).
// `whole_of(q)`: rank q's number on the board; `renumbered`: whether that
// differs from the transport's own; `about`: words on the peer, or "".
template <class WholeOf>
[[noreturn]] void raise_timeout(const wait_board* board, WholeOf whole_of, bool renumbered, const char* call, int me,
                                int size, int peer, double seconds, const std::string& about) {
  const int p = whole_of(peer);
  const auto b = board ? board->follow(p) : wait_board::blame{p, {}};
  int named = b.rank == p ? peer : size + b.rank;
  for (int q = 0; q < size; ++q)
    if (b.rank != p && whole_of(q) == b.rank) named = q;
  throw timeout_error(call, me, named,
                      cat("waited ", seconds, " s for rank ", peer, about,
                          !renumbered || b.chain.empty() ? "" : cat(" (rank ", p, " of the whole communicator, in whose numbers the rest is)"),
                          b.chain, b.verdict(b.rank == p ? std::string("it") : cat("rank ", b.rank))));
}

}  // namespace ringtree::detail
