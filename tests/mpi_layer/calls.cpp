// layer_check's calls of the layer against MPI's own: the reductions
// (every datatype x op x count it serves) and the data-moving calls (every
// datatype layout, each rank its own).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "check.hpp"

namespace layer_check {

namespace {
// ---- reductions: each type the layer reduces, with values whose results are exact ----

struct type_case {
  MPI_Datatype t;
  const char* name;
  std::size_t size;
  bool floating, is_signed;
};
const type_case reduced[] = {
    {MPI_FLOAT, "MPI_FLOAT", 4, true, true},         {MPI_DOUBLE, "MPI_DOUBLE", 8, true, true},
    {MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", 1, false, true}, {MPI_INT8_T, "MPI_INT8_T", 1, false, true},
    {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", 1, false, false}, {MPI_UINT8_T, "MPI_UINT8_T", 1, false, false},
    {MPI_SHORT, "MPI_SHORT", 2, false, true},        {MPI_UINT16_T, "MPI_UINT16_T", 2, false, false},
    {MPI_INT, "MPI_INT", 4, false, true},            {MPI_UNSIGNED, "MPI_UNSIGNED", 4, false, false},
    {MPI_LONG, "MPI_LONG", sizeof(long), false, true}, {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", sizeof(long), false, false},
    {MPI_LONG_LONG, "MPI_LONG_LONG", 8, false, true}, {MPI_UINT64_T, "MPI_UINT64_T", 8, false, false},
};
struct op_case {
  MPI_Op o;
  const char* name;
};
const op_case ops[] = {{MPI_SUM, "MPI_SUM"}, {MPI_PROD, "MPI_PROD"}, {MPI_MIN, "MPI_MIN"}, {MPI_MAX, "MPI_MAX"}};

// Element i of this rank's input: small for sums and products (exact in
// every type at 4 ranks), spread over the type's range for min and max.
double value(const op_case& o, const type_case& t, std::size_t i, int r) {
  const std::uint64_t h = (i + 1) * 2654435761u + static_cast<std::uint64_t>(r) * 40503u;
  if (o.o == MPI_SUM) return static_cast<double>(h % 7) - (t.is_signed ? 3 : 0);
  if (o.o == MPI_PROD) return t.is_signed && h % 5 == 0 ? -1 : static_cast<double>(1 + h % 2);
  if (t.floating) return static_cast<double>(static_cast<std::int64_t>(h % 20001) - 10000) * 0.25;
  const double span = t.size == 1 ? 255 : t.size == 2 ? 65535 : 4e9;
  return t.is_signed ? std::fmod(static_cast<double>(h), span) - span / 2 : std::fmod(static_cast<double>(h), span);
}
void put(void* p, const type_case& t, double v) {
  if (t.floating) {
    if (t.size == 4) *static_cast<float*>(p) = static_cast<float>(v);
    else *static_cast<double*>(p) = v;
    return;
  }
  const auto s = static_cast<std::int64_t>(v);
  std::memcpy(p, &s, t.size);  // little-endian: the low bytes, two's complement
}
std::vector<unsigned char> input(const op_case& o, const type_case& t, std::size_t n, int r) {
  std::vector<unsigned char> b(n * t.size + 1);
  for (std::size_t i = 0; i < n; ++i) put(b.data() + i * t.size, t, value(o, t, i, r));
  return b;
}

}  // namespace

void reductions(MPI_Comm comm, const char* where) {
  int n = 0, me = 0;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &me);
  const int counts[] = {0, 1, n - 1, 3 * n + 1, 1000, 40000};
  for (const auto& t : reduced)
    for (const auto& o : ops)
      for (int count : counts) {
        const std::size_t bytes = static_cast<std::size_t>(count) * t.size;
        const std::string what = std::string(where) + " " + t.name + " " + o.name + " count " + std::to_string(count);
        const auto in = input(o, t, static_cast<std::size_t>(count), me);
        std::vector<unsigned char> want(bytes + 1, 0xA5), got(bytes + 1, 0xA5);
        PMPI_Allreduce(in.data(), want.data(), count, t.t, o.o, comm);
        check(MPI_Allreduce(in.data(), got.data(), count, t.t, o.o, comm), "MPI_Allreduce " + what);
        same_bytes(got.data(), want.data(), bytes + 1, "MPI_Allreduce " + what);
        got = in;
        check(MPI_Allreduce(MPI_IN_PLACE, got.data(), count, t.t, o.o, comm), "MPI_Allreduce in place " + what);
        same_bytes(got.data(), want.data(), bytes, "MPI_Allreduce in place " + what);

        // Iallreduce, completed by each of the Wait and Test forms in turn
        std::fill(got.begin(), got.end(), 0xA5);
        MPI_Request req;
        check(MPI_Iallreduce(in.data(), got.data(), count, t.t, o.o, comm, &req), "MPI_Iallreduce " + what);
        int flag = 0, index = -1;
        switch ((count + static_cast<int>(o.o == MPI_SUM)) % 4) {
          case 0: check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait"); break;
          case 1: {
            int rc = MPI_SUCCESS;
            while (rc == MPI_SUCCESS && !flag) rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            check(rc, "MPI_Test");
            break;
          }
          case 2: check(MPI_Waitall(1, &req, MPI_STATUSES_IGNORE), "MPI_Waitall"); break;
          default: check(MPI_Waitany(1, &req, &index, MPI_STATUS_IGNORE), "MPI_Waitany"); expect(index == 0, "MPI_Waitany's index");
        }
        expect(req == MPI_REQUEST_NULL, "the request is MPI_REQUEST_NULL after it completed: " + what);
        same_bytes(got.data(), want.data(), bytes + 1, "MPI_Iallreduce " + what);

        const int root = count % n;
        std::fill(want.begin(), want.end(), 0xA5);
        std::fill(got.begin(), got.end(), 0xA5);
        PMPI_Reduce(in.data(), want.data(), count, t.t, o.o, root, comm);
        check(MPI_Reduce(in.data(), got.data(), count, t.t, o.o, root, comm), "MPI_Reduce " + what);
        if (me == root) same_bytes(got.data(), want.data(), bytes + 1, "MPI_Reduce " + what);
        else same_bytes(got.data(), std::vector<unsigned char>(bytes + 1, 0xA5).data(), bytes + 1, "MPI_Reduce leaves a non-root's recvbuf " + what);
        got = in;
        check(MPI_Reduce(me == root ? MPI_IN_PLACE : in.data(), got.data(), count, t.t, o.o, root, comm), "MPI_Reduce in place " + what);
        if (me == root) same_bytes(got.data(), want.data(), bytes, "MPI_Reduce in place " + what);

        if (count > 1000) continue;  // reduce-scatter's input is n times as long
        const auto all = input(o, t, static_cast<std::size_t>(count) * n, me);
        std::fill(want.begin(), want.end(), 0xA5);
        std::fill(got.begin(), got.end(), 0xA5);
        PMPI_Reduce_scatter_block(all.data(), want.data(), count, t.t, o.o, comm);
        check(MPI_Reduce_scatter_block(all.data(), got.data(), count, t.t, o.o, comm), "MPI_Reduce_scatter_block " + what);
        same_bytes(got.data(), want.data(), bytes + 1, "MPI_Reduce_scatter_block " + what);
        auto inplace = all;
        check(MPI_Reduce_scatter_block(MPI_IN_PLACE, inplace.data(), count, t.t, o.o, comm), "MPI_Reduce_scatter_block in place " + what);
        same_bytes(inplace.data(), want.data(), bytes, "MPI_Reduce_scatter_block in place " + what);
      }
  // Large enough for the pipelined algorithms (and several size bins).
  for (const auto& t : {reduced[0], reduced[1], reduced[8]}) {
    const int count = (1 << 22) / static_cast<int>(t.size) + 3;
    const auto in = input(ops[0], t, static_cast<std::size_t>(count), me);
    std::vector<unsigned char> want(in.size()), got(in.size());
    PMPI_Allreduce(in.data(), want.data(), count, t.t, MPI_SUM, comm);
    check(MPI_Allreduce(in.data(), got.data(), count, t.t, MPI_SUM, comm), "large MPI_Allreduce");
    same_bytes(got.data(), want.data(), count * t.size, std::string(where) + " MPI_Allreduce of 4 MiB + 3 elements of " + t.name);
  }
}

// ---- data-moving calls: any datatype, each rank its own ----

namespace {

struct layout_case {
  MPI_Datatype t;
  const char* name;
};
// Predefined without gaps, predefined with a gap (MPI_DOUBLE_INT: 12 bytes
// in 16), and derived: 2 ints of every 3, 4 ints in a row.
std::vector<layout_case> layouts() {
  MPI_Datatype vec, four;
  MPI_Type_vector(3, 2, 3, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  MPI_Type_contiguous(4, MPI_INT, &four);
  MPI_Type_commit(&four);
  return {{MPI_BYTE, "MPI_BYTE"}, {MPI_INT, "MPI_INT"}, {MPI_DOUBLE, "MPI_DOUBLE"}, {MPI_DOUBLE_INT, "MPI_DOUBLE_INT"},
          {vec, "vector(3, 2, 3, MPI_INT)"}, {four, "contiguous(4, MPI_INT)"}};
}
MPI_Aint extent_of(MPI_Datatype t) {
  MPI_Aint lb, ext;
  MPI_Type_get_extent(t, &lb, &ext);
  return ext;
}

}  // namespace

void movement(MPI_Comm comm, const char* where) {
  int n = 0, me = 0;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &me);
  const auto ls = layouts();
  for (const auto& l : ls) {
    const auto ext = static_cast<std::size_t>(extent_of(l.t));
    for (int count : {0, 1, n - 1, 3 * n + 1, 1000, 70000}) {
      const std::string what = std::string(where) + " " + l.name + " count " + std::to_string(count);
      const int root = (count + 1) % n;
      const std::size_t span = static_cast<std::size_t>(count) * ext;
      auto want = me == root ? pattern(span, me, 1) : std::vector<unsigned char>(span, 0x5A), got = want;
      PMPI_Bcast(want.data(), count, l.t, root, comm);
      check(MPI_Bcast(got.data(), count, l.t, root, comm), "MPI_Bcast " + what);
      same_bytes(got.data(), want.data(), span, "MPI_Bcast " + what);
      if (count > 1000) continue;

      // allgather: out of place and in place
      const std::size_t all = span * static_cast<std::size_t>(n);
      const auto mine = pattern(span, me, 2);
      std::vector<unsigned char> w(all, 0x5A), g(all, 0x5A);
      PMPI_Allgather(mine.data(), count, l.t, w.data(), count, l.t, comm);
      check(MPI_Allgather(mine.data(), count, l.t, g.data(), count, l.t, comm), "MPI_Allgather " + what);
      same_bytes(g.data(), w.data(), all, "MPI_Allgather " + what);
      // in place: this rank's block (gaps too) stays as it was
      std::fill(g.begin(), g.end(), 0x5A);
      std::copy(mine.begin(), mine.end(), g.begin() + static_cast<long>(span) * me);
      w = g;
      PMPI_Allgather(mine.data(), count, l.t, w.data(), count, l.t, comm);
      check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g.data(), count, l.t, comm), "MPI_Allgather in place " + what);
      same_bytes(g.data(), w.data(), all, "MPI_Allgather in place " + what);

      // alltoall: out of place and in place
      const auto blocks = pattern(all, me, 3);
      std::fill(w.begin(), w.end(), 0x5A);
      std::fill(g.begin(), g.end(), 0x5A);
      PMPI_Alltoall(blocks.data(), count, l.t, w.data(), count, l.t, comm);
      check(MPI_Alltoall(blocks.data(), count, l.t, g.data(), count, l.t, comm), "MPI_Alltoall " + what);
      same_bytes(g.data(), w.data(), all, "MPI_Alltoall " + what);
      // in place: recvbuf's gaps keep what was there
      g = blocks;
      w = blocks;
      PMPI_Alltoall(blocks.data(), count, l.t, w.data(), count, l.t, comm);
      check(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g.data(), count, l.t, comm), "MPI_Alltoall in place " + what);
      same_bytes(g.data(), w.data(), all, "MPI_Alltoall in place " + what);
    }
  }
  // Ranks passing different datatypes of one signature: the root 4-int
  // blocks, the others ints (and the other way round).
  for (int count : {1, 5, 4097}) {
    const int root = count % n;
    const bool blocks = me == root;
    const std::size_t span = static_cast<std::size_t>(count) * 16;
    auto want = me == root ? pattern(span, me, 4) : std::vector<unsigned char>(span, 0x5A), got = want;
    PMPI_Bcast(want.data(), blocks ? count : 4 * count, blocks ? ls[5].t : MPI_INT, root, comm);
    check(MPI_Bcast(got.data(), blocks ? count : 4 * count, blocks ? ls[5].t : MPI_INT, root, comm), "MPI_Bcast, mixed datatypes");
    same_bytes(got.data(), want.data(), span, std::string(where) + " MPI_Bcast, 4-int blocks at the root and ints elsewhere, count " + std::to_string(count));
    const auto mine = pattern(span, me, 5);
    std::vector<unsigned char> w(span * n, 0x5A), g(span * n, 0x5A);
    const bool odd = me % 2;
    PMPI_Allgather(mine.data(), odd ? count : 4 * count, odd ? ls[5].t : MPI_INT, w.data(), odd ? 4 * count : count, odd ? MPI_INT : ls[5].t, comm);
    check(MPI_Allgather(mine.data(), odd ? count : 4 * count, odd ? ls[5].t : MPI_INT, g.data(), odd ? 4 * count : count, odd ? MPI_INT : ls[5].t, comm), "mixed MPI_Allgather");
    same_bytes(g.data(), w.data(), w.size(), std::string(where) + " MPI_Allgather, mixed datatypes");
  }
  for (std::size_t i = 4; i < ls.size(); ++i) {
    MPI_Datatype t = ls[i].t;
    MPI_Type_free(&t);
  }
}

}  // namespace layer_check
