// The floor of a small all-reduce between two processes on this host: two
// forked processes each write one cache line (value and sequence number)
// and wait for the other's, with nothing else in the loop (two lines each,
// in turn, as ringtree's staging slots: a line is written again only
// after the peer has moved past reading it). No library can
// exchange 8 bytes faster than this; bench/zero_copy.sh prints it next to
// ringtree's and MPI's 8-byte all-reduce.
//   line_exchange [CALLS]
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

namespace {
struct alignas(64) line {
  std::atomic<std::uint64_t> seq{0};
  std::uint64_t value = 0;
};
}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t calls = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  if (calls == 0) return std::fprintf(stderr, "usage: line_exchange [CALLS > 0]\n"), 2;
  void* m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return std::perror("mmap"), 1;
  auto* lines = new (m) line[4];  // rank r's lines: 2r, 2r + 1
  const pid_t child = fork();
  if (child < 0) return std::perror("fork"), 1;
  const int me = child == 0 ? 1 : 0;
  std::vector<double> rounds;
  std::uint64_t sum = 0, i = 0;
  for (int round = 0; round < 5; ++round) {  // the median of 5 rounds
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t k = 0; k < calls; ++k) {
      ++i;
      line& mine = lines[2 * me + i % 2];
      const line& theirs = lines[2 * (1 - me) + i % 2];
      mine.value = i;
      mine.seq.store(i, std::memory_order_release);
      while (theirs.seq.load(std::memory_order_acquire) < i) {
      }
      sum += theirs.value;
    }
    rounds.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls);
  }
  if (me == 1) _exit(sum == i * (i + 1) / 2 ? 0 : 1);
  int status = 0;
  waitpid(child, &status, 0);
  std::sort(rounds.begin(), rounds.end());
  const bool ok = sum == i * (i + 1) / 2 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::printf("line exchange, 2 processes: %.3f us per call (median of 5 rounds of %llu)%s\n", rounds[2],
              static_cast<unsigned long long>(calls), ok ? "" : " WRONG VALUES");
  return ok ? 0 : 1;
}
