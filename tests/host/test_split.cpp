#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>

#include "host_check.hpp"

using namespace ringtree;

TEST_CASE("split: rows and columns of a 2 x 3 grid, each with its own collectives") {
  local_world world(6);
  world.run([](local_transport& t) {
    communicator comm(t);
    const int r = comm.rank(), row = r / 3, col = r % 3;
    auto rows = comm.split(row, -col);  // keys reverse the order inside a row
    auto cols = comm.split(col, r);
    if (rows.size() != 3 || cols.size() != 2) throw error("test", r, "split sizes wrong");
    if (rows.rank() != 2 - col || cols.rank() != row) throw error("test", r, detail::cat("split ranks ", rows.rank(), " ", cols.rank()));
    std::vector<int> v(7, r);
    rows.allreduce(std::span<int>(v));
    if (v[6] != 3 * row * 3 + 3) throw error("test", r, detail::cat("row sum ", v[6]));  // (3 row) + (3 row + 1) + (3 row + 2)
    std::vector<int> w(5, r);
    cols.allreduce(std::span<int>(w), op::max);
    if (w[0] != 3 + col) throw error("test", r, "column max wrong");
    comm.barrier();  // the parent still works, interleaved with its parts
    auto sub = rows.split(0, 0);  // a split of a split
    if (sub.size() != 3) throw error("test", r, "nested split size");
    std::vector<double> d(3, 1.0);
    sub.allreduce(std::span<double>(d));
    if (d[2] != 3.0) throw error("test", r, "nested split allreduce");
  });
}

TEST_CASE("split: a negative color is refused") {
  local_world world(2);
  CHECK_THROWS_WITH_AS(world.run([](local_transport& t) {
                         communicator comm(t);
                         (void)comm.split(-1, 0);
                       }),
                       doctest::Contains("color must be >= 0, got -1"), error);
}

TEST_CASE("split: a second communicator over one transport is refused; split gives a stream of its own") {
  auto what = rt_test::errors_of(2, [](local_transport& t) {
    communicator first(t);
    try {
      communicator second(t);
      throw error("test", t.rank(), "a second communicator over one transport was made");
    } catch (const error& e) {
      if (!rt_test::has(e.what(), "already has a communicator") || !rt_test::has(e.what(), "local")) throw;
    }
    // a split has channels of its own: asynchronous ring all-reduces on both at once stay right
    auto other = first.split(0, first.rank());
    std::vector<std::vector<float>> a(4, std::vector<float>(300000)), b(4, std::vector<float>(300000));
    std::vector<work> pending;
    for (int k = 0; k < 4; ++k) {
      std::fill(a[k].begin(), a[k].end(), float(t.rank() + k));
      std::fill(b[k].begin(), b[k].end(), float(10 * t.rank() + k));
      pending.push_back(first.allreduce_async(a[k], op::sum, algorithm::ring));
      pending.push_back(other.allreduce_async(b[k], op::sum, algorithm::ring));
    }
    for (auto& w : pending) w.wait();
    std::size_t wrong = 0;
    for (int k = 0; k < 4; ++k)
      for (std::size_t i = 0; i < a[k].size(); ++i)
        wrong += (a[k][i] != float(1 + 2 * k)) + (b[k][i] != float(10 + 2 * k));
    if (wrong != 0) throw error("test", t.rank(), detail::cat(wrong, " wrong elements"));
  });
  for (const auto& w : what) CHECK_MESSAGE(w.empty(), w);
  // once the first is gone, the transport takes a new one
  auto again = rt_test::errors_of(2, [](local_transport& t) {
    { communicator first(t); }
    communicator second(t);
    std::vector<int> v(3, 1);
    second.allreduce(v);
    if (v[2] != 2) throw error("test", t.rank(), "wrong sum");
  });
  for (const auto& w : again) CHECK_MESSAGE(w.empty(), w);
}

