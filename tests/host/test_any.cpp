// any_communicator: the calls behind one pointer (test_host is built with
// RINGTREE_PREBUILT, so they come from the ringtree-prebuilt library), on
// threads and between forked processes over shared memory, each collective
// against a sequential reference.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <ringtree/any_communicator.hpp>
#include <ringtree/core/error.hpp>

#include "process_check.hpp"
#include "shm_check.hpp"

namespace {

// Every collective on `count` elements a rank; the number of wrong elements.
template <class E>
int wrong_elements(ringtree::any_communicator& c, int count) {
  const int n = c.size(), r = c.rank();
  int bad = 0;
  auto value = [](int rank, int i) { return E((rank + 1) * 3 + i % 5); };
  std::vector<E> mine(count), all(static_cast<std::size_t>(count) * n), out(count);
  for (int i = 0; i < count; ++i) mine[i] = value(r, i);
  std::vector<E> sum(count);
  for (int i = 0; i < count; ++i)
    for (int q = 0; q < n; ++q) sum[i] = E(sum[i] + value(q, i));

  auto v = mine;
  c.allreduce(std::span(v));
  for (int i = 0; i < count; ++i) bad += v[i] != sum[i];
  c.allreduce(std::span<const E>(mine), std::span(out), ringtree::op::max);
  for (int i = 0; i < count; ++i) bad += out[i] != value(n - 1, i);
  v = mine;
  c.broadcast(std::span(v), n - 1);
  for (int i = 0; i < count; ++i) bad += v[i] != value(n - 1, i);
  std::fill(out.begin(), out.end(), E(0));
  c.reduce(std::span<const E>(mine), std::span(out), 0);
  if (r == 0)
    for (int i = 0; i < count; ++i) bad += out[i] != sum[i];
  c.allgather(std::span<const E>(mine), std::span(all));
  for (int q = 0; q < n; ++q)
    for (int i = 0; i < count; ++i) bad += all[static_cast<std::size_t>(q) * count + i] != value(q, i);
  c.reduce_scatter(std::span<const E>(all), std::span(out));  // block r of every rank's `all`: n copies of rank r's values
  for (int i = 0; i < count; ++i) bad += out[i] != E(n * value(r, i));
  c.scatter(std::span<const E>(all), std::span(out), 0);  // block r of rank 0's `all`
  for (int i = 0; i < count; ++i) bad += out[i] != value(r, i);
  std::vector<E> got(all.size());
  c.gather(std::span<const E>(mine), std::span(got), n - 1);
  if (r == n - 1)
    for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] != all[i];
  c.alltoall(std::span<const E>(all), std::span(got));  // block q from rank q: rank q's block r, q's values
  for (int q = 0; q < n; ++q)
    for (int i = 0; i < count; ++i) bad += got[static_cast<std::size_t>(q) * count + i] != value(r, i);
  c.barrier();
  return bad;
}

}  // namespace

TEST_CASE("any_communicator: every collective on threads, against the sequential result") {
  for (int n : {1, 2, 3}) {
    for (int count : {0, 1, 7, 1000}) {
      CAPTURE(n);
      CAPTURE(count);
      std::vector<int> bad(n, -1);
      ringtree::any_communicator::run_threads(n, [&](ringtree::any_communicator& c) {
        bad[c.rank()] = wrong_elements<float>(c, count) + wrong_elements<std::int32_t>(c, count) +
                        wrong_elements<std::uint8_t>(c, count);
        CHECK(c.size() == n);
      });
      for (int r = 0; r < n; ++r) CHECK(bad[r] == 0);
    }
  }
}

TEST_CASE("any_communicator: an error on a rank is raised by run_threads, naming the call") {
  CHECK_THROWS_WITH_AS(ringtree::any_communicator::run_threads(2,
                                                               [](ringtree::any_communicator& c) {
                                                                 std::vector<float> in(3), out(2);
                                                                 c.allreduce(std::span<const float>(in), std::span(out));
                                                               }),
                       doctest::Contains("allreduce"), ringtree::error);
}

TEST_CASE("any_communicator: shm_from_env between forked processes, every collective") {
  const int n = 3;
  const std::string name = rt_test::unique_name("any");
  const auto before = rt_test::shm_entries();
  const auto res = rt_test::run_processes(n, [&](int rank, FILE* out) {
    ::setenv("RINGTREE_SHM_NAME", name.c_str(), 1);
    ::setenv("RINGTREE_RANK", std::to_string(rank).c_str(), 1);
    ::setenv("RINGTREE_SIZE", std::to_string(n).c_str(), 1);
    auto c = ringtree::any_communicator::shm_from_env();
    const int bad = wrong_elements<double>(c, 333) + wrong_elements<std::int64_t>(c, 1);
    std::fprintf(out, "rank %d of %d: %d wrong", c.rank(), c.size(), bad);
    return bad == 0 && c.rank() == rank && c.size() == n ? 0 : 1;
  });
  for (int r = 0; r < n; ++r) {
    CAPTURE(res[r].text);
    CHECK(rt_test::exited_ok(res[r]));
  }
  CHECK(rt_test::left_behind(before).empty());
}
