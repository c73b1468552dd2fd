// layer_check's cases for MPI's promises that a first version of the layer
// broke (each failed before its fix): a request's status can be polled,
// an error of a non-blocking call comes back under MPI_ERRORS_RETURN, an
// erroneous call (the same buffer twice, a null handle) gets MPI's own
// error code, MIN and MAX with NaNs give MPI's bytes, a 2 GiB call of a
// derived datatype is served, and a datatype made at a freed one's handle
// is not taken for the freed one.
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

#include "check.hpp"

namespace layer_check {

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
std::string text_of(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, static_cast<std::size_t>(len));
}
}  // namespace

void request_status(MPI_Comm comm) {
  // MPI_Request_get_status reports completion without freeing: a polling
  // loop ends, then MPI_Wait takes the request.
  const int n = 3000;
  std::vector<double> a(n), got(n), want(n);
  for (int i = 0; i < n; ++i) a[i] = i % 17 + rank;
  PMPI_Allreduce(a.data(), want.data(), n, MPI_DOUBLE, MPI_SUM, comm);
  for (int round = 0; round < 3; ++round) {
    MPI_Request r;
    check(MPI_Iallreduce(a.data(), got.data(), n, MPI_DOUBLE, MPI_SUM, comm, &r), "MPI_Iallreduce");
    int flag = 0;
    MPI_Status st;
    const auto t0 = std::chrono::steady_clock::now();
    int rc = MPI_SUCCESS;
    while (!flag && rc == MPI_SUCCESS && since(t0) < 30) rc = MPI_Request_get_status(r, &flag, &st);
    check(rc, "MPI_Request_get_status");
    expect(flag != 0, "MPI_Request_get_status reported the MPI_Iallreduce complete within 30 s");
    expect(r != MPI_REQUEST_NULL, "MPI_Request_get_status left the request to MPI_Wait");
    check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait after MPI_Request_get_status");
    expect(r == MPI_REQUEST_NULL, "MPI_Wait after MPI_Request_get_status freed the request");
    same_bytes(got.data(), want.data(), n * sizeof(double), "MPI_Iallreduce polled by MPI_Request_get_status");
  }
}

void async_errors_return() {
  // Counts that differ (RINGTREE_CHECK=1) in MPI_Iallreduce on a
  // communicator with MPI_ERRORS_RETURN: the error comes back, from the
  // call or from the completion, as a code whose string names it; the job
  // goes on (MPI_COMM_WORLD's fatal handler is not called).
  setenv("RINGTREE_CHECK", "1", 1);
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  std::vector<float> in(64, 1.0f), out(64);
  for (int form = 0; form < 3; ++form) {
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(in.data(), out.data(), 10 + rank, MPI_FLOAT, MPI_SUM, c, &r);
    MPI_Status st[1];
    st[0].MPI_ERROR = MPI_SUCCESS;
    if (rc == MPI_SUCCESS) {
      if (form == 0) rc = MPI_Wait(&r, &st[0]);
      else if (form == 1) rc = MPI_Waitall(1, &r, st);
      else for (int flag = 0; !flag && rc == MPI_SUCCESS;) rc = MPI_Test(&r, &flag, &st[0]);
    }
    const char* how[] = {"MPI_Wait", "MPI_Waitall", "MPI_Test"};
    expect(rc != MPI_SUCCESS, std::string("an MPI_Iallreduce with counts that differ gives an error code, through ") + how[form]);
    const int code = rc == MPI_ERR_IN_STATUS ? st[0].MPI_ERROR : rc;
    const std::string s = text_of(code);
    expect(s.find("MPI_Iallreduce") != std::string::npos && s.find("count") != std::string::npos,
           std::string("the error's string names MPI_Iallreduce and the counts (") + how[form] + "): '" + s + "'");
    expect(r == MPI_REQUEST_NULL, std::string("the failed request is freed by ") + how[form]);
  }
  unsetenv("RINGTREE_CHECK");
  MPI_Comm_free(&c);
}

void erroneous_calls() {
  // What MPI rejects, it rejects through the layer too, with its own code.
  // (Open MPI reports some through MPI_COMM_WORLD's handler.)
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  std::vector<int> buf(40, rank), out(40);
  auto same_code = [&](int mine, int mpis, const std::string& what) {
    expect(mpis != MPI_SUCCESS, what + ": MPI's own call rejects it (" + std::to_string(mpis) + ")");
    expect(mine == mpis, what + ": through the layer " + std::to_string(mine) + ", MPI's own " + std::to_string(mpis));
  };
  same_code(MPI_Allreduce(buf.data(), buf.data(), 10, MPI_INT, MPI_SUM, c), PMPI_Allreduce(buf.data(), buf.data(), 10, MPI_INT, MPI_SUM, c),
            "MPI_Allreduce(buf, buf) without MPI_IN_PLACE");
  MPI_Request r1 = MPI_REQUEST_NULL, r2 = MPI_REQUEST_NULL;
  same_code(MPI_Iallreduce(buf.data(), buf.data(), 10, MPI_INT, MPI_SUM, c, &r1), PMPI_Iallreduce(buf.data(), buf.data(), 10, MPI_INT, MPI_SUM, c, &r2),
            "MPI_Iallreduce(buf, buf) without MPI_IN_PLACE");
  if (rank == 0)  // (the others would wait for the root, through the layer and without it)
    same_code(MPI_Reduce(buf.data(), buf.data(), 10, MPI_INT, MPI_SUM, 0, c), PMPI_Reduce(buf.data(), buf.data(), 10, MPI_INT, MPI_SUM, 0, c),
              "MPI_Reduce(buf, buf) at the root");
  same_code(MPI_Allreduce(buf.data(), out.data(), 10, MPI_DATATYPE_NULL, MPI_SUM, c),
            PMPI_Allreduce(buf.data(), out.data(), 10, MPI_DATATYPE_NULL, MPI_SUM, c), "MPI_Allreduce of MPI_DATATYPE_NULL");
  same_code(MPI_Allreduce(buf.data(), out.data(), 10, MPI_INT, MPI_OP_NULL, c), PMPI_Allreduce(buf.data(), out.data(), 10, MPI_INT, MPI_OP_NULL, c),
            "MPI_Allreduce with MPI_OP_NULL");
  same_code(MPI_Bcast(buf.data(), 10, MPI_DATATYPE_NULL, 0, c), PMPI_Bcast(buf.data(), 10, MPI_DATATYPE_NULL, 0, c), "MPI_Bcast of MPI_DATATYPE_NULL");
  // Calls of no elements: the layer answers arguments MPI's own accepted
  // with MPI's answer, without asking again. Any other arguments still get
  // MPI's own answer, and so does a handle that was freed and made again
  // (the uncommitted datatype below usually gets the freed one's address).
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  for (int twice = 0; twice < 2; ++twice) {
    check(MPI_Allreduce(buf.data(), out.data(), 0, MPI_INT, MPI_SUM, c), "MPI_Allreduce of no elements");
    check(MPI_Reduce(buf.data(), out.data(), 0, MPI_INT, MPI_SUM, 0, c), "MPI_Reduce of no elements");
    check(MPI_Reduce_scatter_block(buf.data(), out.data(), 0, MPI_INT, MPI_SUM, c), "MPI_Reduce_scatter_block of no elements");
    check(MPI_Bcast(buf.data(), 0, pair, 0, c), "MPI_Bcast of no elements");
    check(MPI_Allgather(buf.data(), 0, MPI_INT, out.data(), 0, MPI_INT, c), "MPI_Allgather of no elements");
    check(MPI_Alltoall(buf.data(), 0, MPI_INT, out.data(), 0, MPI_INT, c), "MPI_Alltoall of no elements");
    MPI_Request r = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(buf.data(), out.data(), 0, MPI_INT, MPI_SUM, c, &r), "MPI_Iallreduce of no elements");
    expect(r != MPI_REQUEST_NULL, "MPI_Iallreduce of no elements gives a request, the second time too");
    check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait for an MPI_Iallreduce of no elements");
  }
  same_code(MPI_Allreduce(buf.data(), out.data(), 0, MPI_INT, MPI_OP_NULL, c), PMPI_Allreduce(buf.data(), out.data(), 0, MPI_INT, MPI_OP_NULL, c),
            "MPI_Allreduce of no elements with MPI_OP_NULL, after one accepted");
  same_code(MPI_Reduce(buf.data(), out.data(), 0, MPI_INT, MPI_SUM, size, c), PMPI_Reduce(buf.data(), out.data(), 0, MPI_INT, MPI_SUM, size, c),
            "MPI_Reduce of no elements to a root out of range, after one accepted");
  same_code(MPI_Reduce_scatter_block(buf.data(), out.data(), 0, MPI_DATATYPE_NULL, MPI_SUM, c),
            PMPI_Reduce_scatter_block(buf.data(), out.data(), 0, MPI_DATATYPE_NULL, MPI_SUM, c),
            "MPI_Reduce_scatter_block of no elements of MPI_DATATYPE_NULL, after one accepted");
  same_code(MPI_Allgather(buf.data(), 0, MPI_INT, out.data(), 0, MPI_DATATYPE_NULL, c),
            PMPI_Allgather(buf.data(), 0, MPI_INT, out.data(), 0, MPI_DATATYPE_NULL, c), "MPI_Allgather of no elements into MPI_DATATYPE_NULL, after one accepted");
  same_code(MPI_Alltoall(buf.data(), 0, MPI_INT, MPI_IN_PLACE, 0, MPI_INT, c), PMPI_Alltoall(buf.data(), 0, MPI_INT, MPI_IN_PLACE, 0, MPI_INT, c),
            "MPI_Alltoall of no elements into MPI_IN_PLACE, after one accepted");
  const MPI_Datatype was = pair;
  MPI_Type_free(&pair);
  MPI_Datatype loose;
  MPI_Type_contiguous(2, MPI_INT, &loose);
  same_code(MPI_Bcast(buf.data(), 0, loose, 0, c), PMPI_Bcast(buf.data(), 0, loose, 0, c),
            std::string("MPI_Bcast of no elements of an uncommitted datatype") + (loose == was ? " at the handle of a freed one MPI had accepted" : ""));
  MPI_Type_free(&loose);
  // and the communicator still works
  check(MPI_Allreduce(buf.data(), out.data(), 10, MPI_INT, MPI_SUM, c), "MPI_Allreduce after the rejected calls");
  expect(out[9] == size * (size - 1) / 2, "MPI_Allreduce after the rejected calls is right");
  MPI_Comm_free(&c);
  // MPI_COMM_NULL once no communicator is the last asked about (c, freed
  // just now): MPI's MPI_ERR_COMM, not a read of a communicator's info that
  // is not there (the layer's memo matched MPI_COMM_NULL then).
  for (const int count : {10, 0})
    same_code(MPI_Allreduce(buf.data(), out.data(), count, MPI_INT, MPI_SUM, MPI_COMM_NULL),
              PMPI_Allreduce(buf.data(), out.data(), count, MPI_INT, MPI_SUM, MPI_COMM_NULL),
              "MPI_Allreduce of " + std::to_string(count) + " ints on MPI_COMM_NULL, after the last communicator asked about was freed");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

void nan_and_zeros(MPI_Comm comm) {
  // MIN and MAX of floats with NaNs and zeros of both signs: Open MPI's
  // bytes depend on the order its algorithm combines the ranks in, so each
  // call is compared with the same call of MPI's own (in place or not,
  // blocking or not, each its own algorithm).
  for (MPI_Datatype t : {MPI_FLOAT, MPI_DOUBLE})
    for (MPI_Op o : {MPI_MIN, MPI_MAX})
      for (int count : {64, 40000}) {
        const std::size_t e = t == MPI_FLOAT ? 4 : 8, bytes = static_cast<std::size_t>(count) * e;
        std::vector<unsigned char> in(bytes * static_cast<std::size_t>(size));  // (reduce-scatter's input: n blocks)
        for (std::size_t i = 0; i < in.size() / e; ++i) {
          const std::uint64_t h = (i + 1) * 2654435761u + static_cast<std::uint64_t>(rank) * 40503u;
          const double v = h % 5 == 0 ? std::nan("") : h % 5 == 1 ? -0.0 : h % 5 == 2 ? 0.0 : static_cast<double>(h % 7) - 3;
          if (e == 4) { const float f = static_cast<float>(v); std::memcpy(&in[i * e], &f, 4); }
          else std::memcpy(&in[i * e], &v, 8);
        }
        const std::string what = std::string(t == MPI_FLOAT ? "MPI_FLOAT" : "MPI_DOUBLE") + (o == MPI_MIN ? " MPI_MIN" : " MPI_MAX") +
                                 " with NaNs and signed zeros, count " + std::to_string(count);
        std::vector<unsigned char> want(bytes), got(bytes);
        PMPI_Allreduce(in.data(), want.data(), count, t, o, comm);
        check(MPI_Allreduce(in.data(), got.data(), count, t, o, comm), "MPI_Allreduce " + what);
        same_bytes(got.data(), want.data(), bytes, "MPI_Allreduce " + what);
        std::vector<unsigned char> wip(in.begin(), in.begin() + static_cast<long>(bytes)), gip = wip;
        PMPI_Allreduce(MPI_IN_PLACE, wip.data(), count, t, o, comm);
        check(MPI_Allreduce(MPI_IN_PLACE, gip.data(), count, t, o, comm), "MPI_Allreduce in place " + what);
        same_bytes(gip.data(), wip.data(), bytes, "MPI_Allreduce in place " + what);
        MPI_Request r;
        PMPI_Iallreduce(in.data(), want.data(), count, t, o, comm, &r);
        PMPI_Wait(&r, MPI_STATUS_IGNORE);
        check(MPI_Iallreduce(in.data(), got.data(), count, t, o, comm, &r), "MPI_Iallreduce " + what);
        check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait " + what);
        same_bytes(got.data(), want.data(), bytes, "MPI_Iallreduce " + what);
        PMPI_Reduce(in.data(), want.data(), count, t, o, size - 1, comm);
        check(MPI_Reduce(in.data(), got.data(), count, t, o, size - 1, comm), "MPI_Reduce " + what);
        if (rank == size - 1) same_bytes(got.data(), want.data(), bytes, "MPI_Reduce " + what);
        PMPI_Reduce_scatter_block(in.data(), want.data(), count, t, o, comm);
        check(MPI_Reduce_scatter_block(in.data(), got.data(), count, t, o, comm), "MPI_Reduce_scatter_block " + what);
        same_bytes(got.data(), want.data(), bytes, "MPI_Reduce_scatter_block " + what);
      }
}

void freed_datatypes(MPI_Comm comm) {
  // A datatype freed and made again with another size, usually at the
  // freed one's handle: the layer keeps what it learnt of the last
  // datatype between calls, and must ask MPI again (each broadcast twice,
  // so the second call takes what the first learnt).
  for (const int n : {2, 3, 5}) {
    MPI_Datatype t;
    MPI_Type_contiguous(n, MPI_INT, &t);
    MPI_Type_commit(&t);
    for (int twice = 0; twice < 2; ++twice) {
      std::vector<int> buf(static_cast<std::size_t>(4 * n), -1);
      if (rank == 0)
        for (int i = 0; i < 4 * n; ++i) buf[static_cast<std::size_t>(i)] = 100 * n + i + twice;
      const std::string what = "MPI_Bcast of 4 x contiguous(" + std::to_string(n) + " ints), a datatype made after another was freed";
      check(MPI_Bcast(buf.data(), 4, t, 0, comm), what);
      int bad = 0;
      for (int i = 0; i < 4 * n; ++i) bad += buf[static_cast<std::size_t>(i)] != 100 * n + i + twice;
      expect(bad == 0, what + ": " + std::to_string(bad) + " wrong ints");
    }
    MPI_Type_free(&t);
  }
}

void large_derived(MPI_Comm comm) {
  // An MPI_Allgather of a derived 1-byte datatype whose receive side packs
  // 2^31 elements or more (MPI_Pack counts in ints): served, right.
  MPI_Datatype one;
  MPI_Type_contiguous(1, MPI_BYTE, &one);
  MPI_Type_commit(&one);
  const std::size_t per = (std::size_t{1} << 31) / static_cast<std::size_t>(size) + 7;  // n * per > 2^31
  std::vector<unsigned char> in(per), out(per * static_cast<std::size_t>(size));
  for (std::size_t i = 0; i < per; ++i) in[i] = static_cast<unsigned char>(i * 7 + static_cast<std::size_t>(rank) * 101);
  check(MPI_Allgather(in.data(), static_cast<int>(per), one, out.data(), static_cast<int>(per), one, comm), "MPI_Allgather of 2 GiB of a derived type");
  std::size_t bad = 0, first = 0;
  for (int r = 0; r < size; ++r)
    for (std::size_t i = 0; i < per; ++i)
      if (out[static_cast<std::size_t>(r) * per + i] != static_cast<unsigned char>(i * 7 + static_cast<std::size_t>(r) * 101) && bad++ == 0)
        first = static_cast<std::size_t>(r) * per + i;
  expect(bad == 0, "MPI_Allgather of " + std::to_string(per * static_cast<std::size_t>(size)) + " elements of a derived 1-byte type: " +
                       std::to_string(bad) + " wrong bytes (first at " + std::to_string(first) + ")");
  MPI_Type_free(&one);
}

}  // namespace layer_check
