#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <ringtree/ringtree.hpp>

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
