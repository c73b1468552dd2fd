// libringtree-mpi against MPI itself: every call through the layer (MPI_*)
// is compared byte for byte with MPI's own (PMPI_*) on the same input, for
// every datatype x op x count the layer serves (counts 0, 1, fewer than the
// ranks, not divisible, large), in place and not, on split, duplicated and
// freed communicators, for the data-moving calls with derived and mixed
// datatypes, and on the paths that go to MPI (user ops, MAXLOC, long
// double, intercommunicators, one rank). Errors: a ringtree error comes back
// as an MPI error code whose string names it (MPI_ERRORS_RETURN), or ends
// the job with its message (--fatal). Linked before MPI, so MPI_* is the
// layer's; mpi_layer.sh checks the paths each call took in the log. The
// reductions and data-moving calls are in calls.cpp, what both share in
// check.hpp.
//
//   mpirun -np 4 layer_check [--fatal | --hosts | --multiple | --large]
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"

using namespace layer_check;

namespace {

// ---- paths that go to MPI: right results there too ----

void user_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  for (int i = 0; i < *len; ++i) static_cast<int*>(inout)[i] += static_cast<int*>(in)[i];
}

void fallbacks(MPI_Comm comm) {
  int me = 0, n = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &n);
  std::vector<int> in(777), got(777), want(777);
  for (int i = 0; i < 777; ++i) in[i] = i * (me + 1) - 300;
  MPI_Op mine;
  MPI_Op_create(user_sum, 1, &mine);
  PMPI_Allreduce(in.data(), want.data(), 777, MPI_INT, MPI_SUM, comm);
  check(MPI_Allreduce(in.data(), got.data(), 777, MPI_INT, mine, comm), "a user op");
  same_bytes(got.data(), want.data(), 777 * sizeof(int), "MPI_Allreduce with a user op");
  MPI_Request req;
  check(MPI_Iallreduce(in.data(), got.data(), 777, MPI_INT, mine, comm, &req), "MPI_Iallreduce with a user op");
  check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait on MPI's request");
  same_bytes(got.data(), want.data(), 777 * sizeof(int), "MPI_Iallreduce with a user op");
  MPI_Op_free(&mine);

  struct pair { int v, at; };
  std::vector<pair> p(100), pw(100), pg(100);
  for (int i = 0; i < 100; ++i) p[i] = {(i * 7 + me * 13) % 50, me};
  PMPI_Allreduce(p.data(), pw.data(), 100, MPI_2INT, MPI_MAXLOC, comm);
  check(MPI_Allreduce(p.data(), pg.data(), 100, MPI_2INT, MPI_MAXLOC, comm), "MPI_MAXLOC");
  same_bytes(pg.data(), pw.data(), sizeof(pair) * 100, "MPI_Allreduce with MPI_MAXLOC");

  std::vector<int> lw(100), lg(100), li(100);
  for (int i = 0; i < 100; ++i) li[i] = (i + me) % 3 != 0;
  PMPI_Allreduce(li.data(), lw.data(), 100, MPI_INT, MPI_LAND, comm);
  check(MPI_Allreduce(li.data(), lg.data(), 100, MPI_INT, MPI_LAND, comm), "MPI_LAND");
  same_bytes(lg.data(), lw.data(), sizeof(int) * 100, "MPI_Allreduce with MPI_LAND");

  std::vector<long double> ld(50, static_cast<long double>(me) + 0.5L), ldw(50), ldg(50);
  PMPI_Allreduce(ld.data(), ldw.data(), 50, MPI_LONG_DOUBLE, MPI_SUM, comm);
  check(MPI_Allreduce(ld.data(), ldg.data(), 50, MPI_LONG_DOUBLE, MPI_SUM, comm), "MPI_LONG_DOUBLE");
  expect(ldg == ldw, "MPI_Allreduce of MPI_LONG_DOUBLE");

  // one rank
  int one = me + 1, back = 0;
  check(MPI_Allreduce(&one, &back, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF), "MPI_COMM_SELF");
  expect(back == me + 1, "MPI_Allreduce on MPI_COMM_SELF");

  // an intercommunicator: the lower half and the upper half
  if (n >= 2) {
    MPI_Comm half, inter;
    const int upper = me >= n / 2;
    MPI_Comm_split(comm, upper, me, &half);
    MPI_Intercomm_create(half, 0, comm, upper ? 0 : n / 2, 99, &inter);
    std::vector<int> x(33, me + 1), iw(33), ig(33);
    PMPI_Allreduce(x.data(), iw.data(), 33, MPI_INT, MPI_SUM, inter);
    check(MPI_Allreduce(x.data(), ig.data(), 33, MPI_INT, MPI_SUM, inter), "an intercommunicator");
    same_bytes(ig.data(), iw.data(), sizeof(int) * 33, "MPI_Allreduce on an intercommunicator");
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }
}

// ---- communicators: split, duplicated, freed, many ----

std::size_t entries(const char* dir) {
  std::size_t k = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++k;
  return k;
}

void communicators() {
  MPI_Comm parts;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &parts);  // reversed order within each part
  reductions(parts, "split (even/odd, reversed)");
  MPI_Comm_free(&parts);

  // A freed communicator's ringtree communicator goes with it: the next
  // one (often with the same handle) gets a new one, and nothing is left.
  const std::size_t fds = entries("/proc/self/fd");
  for (int round = 0; round < 40; ++round) {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    std::vector<double> in(5000, rank + round), got(5000), want(5000);
    PMPI_Allreduce(in.data(), want.data(), 5000, MPI_DOUBLE, MPI_SUM, dup);
    check(MPI_Allreduce(in.data(), got.data(), 5000, MPI_DOUBLE, MPI_SUM, dup), "a new communicator");
    same_bytes(got.data(), want.data(), 5000 * sizeof(double), "MPI_Allreduce on duplicate " + std::to_string(round));
    MPI_Comm_free(&dup);
  }
  expect(entries("/proc/self/fd") == fds, "40 communicators made and freed leave no file open: " + std::to_string(entries("/proc/self/fd")) +
                                              " now, " + std::to_string(fds) + " before");
}

// ---- Iallreduce's requests among MPI's own, in every completion call ----

void requests() {
  const int n = 3000;
  std::vector<double> a(n), b(n), ra(n), rb(n), wa(n), wb(n);
  for (int i = 0; i < n; ++i) a[i] = i % 13 + rank, b[i] = (i * 7) % 11 - rank;
  PMPI_Allreduce(a.data(), wa.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  PMPI_Allreduce(b.data(), wb.data(), n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int form = 0; form < 4; ++form) {
    // two of the layer's requests and a ring of MPI's point to point
    MPI_Request rs[4];
    int sent = rank, got = -1;
    std::fill(ra.begin(), ra.end(), 0.0), std::fill(rb.begin(), rb.end(), 0.0);
    check(MPI_Iallreduce(a.data(), ra.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rs[0]), "MPI_Iallreduce");
    MPI_Irecv(&got, 1, MPI_INT, left, 7, MPI_COMM_WORLD, &rs[1]);
    check(MPI_Iallreduce(b.data(), rb.data(), n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &rs[2]), "MPI_Iallreduce");
    MPI_Isend(&sent, 1, MPI_INT, right, 7, MPI_COMM_WORLD, &rs[3]);
    const char* names[] = {"MPI_Waitsome", "MPI_Testall", "MPI_Testany", "MPI_Testsome"};
    int left_to_do = 4, rc = MPI_SUCCESS;
    while (left_to_do > 0 && rc == MPI_SUCCESS) {
      int k = 0, idx[4], flag = 0, one = -1;
      switch (form) {
        case 0: rc = MPI_Waitsome(4, rs, &k, idx, MPI_STATUSES_IGNORE); break;
        case 1: rc = MPI_Testall(4, rs, &flag, MPI_STATUSES_IGNORE); k = flag ? left_to_do : 0; break;
        case 2: rc = MPI_Testany(4, rs, &one, &flag, MPI_STATUS_IGNORE); k = flag && one != MPI_UNDEFINED ? 1 : 0; break;
        default: rc = MPI_Testsome(4, rs, &k, idx, MPI_STATUSES_IGNORE);
      }
      if (k != MPI_UNDEFINED) left_to_do -= k;
    }
    check(rc, names[form]);
    expect(std::all_of(rs, rs + 4, [](MPI_Request r) { return r == MPI_REQUEST_NULL; }), std::string(names[form]) + " completed every request");
    same_bytes(ra.data(), wa.data(), n * sizeof(double), std::string("MPI_Iallreduce completed by ") + names[form]);
    same_bytes(rb.data(), wb.data(), n * sizeof(double), std::string("the second MPI_Iallreduce completed by ") + names[form]);
    expect(got == left, std::string("MPI's own message beside them, by ") + names[form]);
  }
  // A request freed at once: the call still completes, before the next
  // blocking call on the communicator returns. (Open MPI's own refuses to
  // free an active collective request: this part is the layer's alone.)
  // 32 MiB: the call takes milliseconds where a next call that does not
  // wait for it returns in microseconds, so one that forgot it fails every
  // run, not only on a loaded machine. The next call: a barrier (the
  // layer's), a float MPI_MAX (which the layer sends to MPI's own), an
  // all-reduce of no elements made once before (which MPI's own returns at
  // once, and the layer answers a second time from its memo of MPI's
  // answer), and an all-reduce of 1000 ints made once before (where a
  // routes file sends those to MPI's own, the second goes there by the
  // layer's memo, its shortest path: tests/mpi_layer.sh runs this with such
  // a file).
  if (layer_off()) return;
  const int big = 1 << 22;
  std::vector<double> in(big), out(big);
  for (int i = 0; i < big; ++i) in[i] = i % 7 + rank;
  const std::string again = "MPI_Allreduce of 1000 ints, made once before";
  std::vector<int> ints(1000, rank), sums(1000);
  for (const char* next : {"MPI_Barrier", "MPI_Allreduce of a float with MPI_MAX (MPI's own serves it)", "MPI_Allreduce of no elements", again.c_str()}) {
    std::fill(out.begin(), out.end(), 0.0);
    float one = float(rank), most = -1;
    const int floats = std::string(next).find("no elements") != std::string::npos ? 0 : 1;
    if (next == again) check(MPI_Allreduce(ints.data(), sums.data(), 1000, MPI_INT, MPI_SUM, MPI_COMM_WORLD), next);
    if (floats == 0) check(MPI_Allreduce(&one, &most, 0, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD), next);
    MPI_Request r;
    check(MPI_Iallreduce(in.data(), out.data(), big, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r), "MPI_Iallreduce");
    check(MPI_Request_free(&r), "MPI_Request_free");
    expect(r == MPI_REQUEST_NULL, "MPI_Request_free sets MPI_REQUEST_NULL");
    if (next[4] == 'B') check(MPI_Barrier(MPI_COMM_WORLD), next);
    else if (next == again) check(MPI_Allreduce(ints.data(), sums.data(), 1000, MPI_INT, MPI_SUM, MPI_COMM_WORLD), next);
    else check(MPI_Allreduce(&one, &most, floats, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD), next);
    int wrong = 0;
    for (int i = 0; i < big; ++i) wrong += out[i] != double(size) * (i % 7) + size * (size - 1) / 2.0;
    expect(wrong == 0, std::string("MPI_Iallreduce whose request was freed is complete when the next call returns (") + next +
                           "): " + std::to_string(wrong) + " of " + std::to_string(big) + " elements not yet summed");
  }
}

// ---- MPI's progress rule: a rank in a call ringtree serves still moves
// its pending MPI requests, which a peer may need before it joins ----

void progress() {
  // Rank 0 enters the barrier (ringtree's) with MPI's own non-blocking
  // all-reduce pending (a user op: MPI serves it); the others first wait
  // for that all-reduce, whose last step (rank 0 sending the result) needs
  // rank 0's MPI to move. Without the layer's progress, both wait forever.
  MPI_Op mine;
  MPI_Op_create(user_sum, 1, &mine);
  std::vector<int> in(5000, rank + 1), out(5000, 0);
  for (int round = 0; round < 20; ++round) {
    MPI_Request req;
    check(MPI_Iallreduce(in.data(), out.data(), 5000, MPI_INT, mine, MPI_COMM_WORLD, &req), "MPI_Iallreduce (MPI's)");
    if (rank == 0) {
      check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier with MPI's request pending");
      check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
    } else {
      check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
      check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    }
    expect(out[4999] == size * (size + 1) / 2, "MPI's all-reduce beside ringtree's barrier");
  }
  MPI_Op_free(&mine);
}

// ---- errors ----

void errors_return() {
  // Checked mode (read when a communicator's ringtree side is made) finds
  // counts that differ; the error comes back as MPI's.
  setenv("RINGTREE_CHECK", "1", 1);
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  std::vector<float> in(64, 1.0f), out(64);
  const int rc = MPI_Allreduce(in.data(), out.data(), 10 + rank, MPI_FLOAT, MPI_SUM, c);
  expect(rc != MPI_SUCCESS, "counts that differ across ranks give an error code");
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  const std::string s(text, static_cast<std::size_t>(len));
  expect(s.find("MPI_Allreduce") != std::string::npos && s.find("ringtree") != std::string::npos && s.find("count") != std::string::npos,
         "MPI_Error_string names the call, ringtree and the counts: '" + s + "'");
  int cls = 0;
  MPI_Error_class(rc, &cls);
  expect(cls > MPI_ERR_LASTCODE, "the error's class is the layer's own (" + std::to_string(cls) + ")");
  // and the communicator still works
  check(MPI_Allreduce(in.data(), out.data(), 64, MPI_FLOAT, MPI_SUM, c), "an allreduce after the error");
  expect(out[63] == static_cast<float>(size), "the allreduce after the error is right");
  MPI_Comm_free(&c);
  unsetenv("RINGTREE_CHECK");
}

[[noreturn]] void fatal() {
  setenv("RINGTREE_CHECK", "1", 1);
  std::vector<float> in(64, 1.0f), out(64);
  MPI_Allreduce(in.data(), out.data(), 10 + rank, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("rank %d: MPI_ERRORS_ARE_FATAL returned\n", rank);
  std::exit(0);  // the script fails on this exit code
}

void barrier() {
  // Nobody leaves before the last one comes: rank 0 comes 200 ms late and
  // says when it came; every rank must have left after that moment (one
  // clock: steady_clock is the host's CLOCK_MONOTONIC). By cause, not by how
  // long a rank waited: a rank that a loaded machine starts late waits less,
  // rightly (the check that each waited at least 0.19 s failed in a run of
  // the whole suite beside CPU burners).
  using clock = std::chrono::steady_clock;
  if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  long long came = clock::now().time_since_epoch().count();
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  const long long left = clock::now().time_since_epoch().count();
  PMPI_Bcast(&came, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  expect(left >= came, "MPI_Barrier waited for the late rank (left " + std::to_string((came - left) / 1e6) +
                           " ms before rank 0 came)");
}

// ---- across hosts: below RINGTREE_MPI_CROSS_BYTES MPI's, above ringtree's ----

void hosts() {
  for (int count : {1000, 1 << 20}) {
    std::vector<float> in(static_cast<std::size_t>(count)), got(in.size()), want(in.size());
    for (int i = 0; i < count; ++i) in[i] = static_cast<float>((i + rank) % 100);
    PMPI_Allreduce(in.data(), want.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    check(MPI_Allreduce(in.data(), got.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "across hosts");
    same_bytes(got.data(), want.data(), in.size() * 4, "MPI_Allreduce across hosts, count " + std::to_string(count));
    std::vector<unsigned char> b = rank == 0 ? pattern(in.size() * 4, 0, 9) : std::vector<unsigned char>(in.size() * 4, 0), wb = b;
    PMPI_Bcast(wb.data(), count * 4, MPI_BYTE, 0, MPI_COMM_WORLD);
    check(MPI_Bcast(b.data(), count * 4, MPI_BYTE, 0, MPI_COMM_WORLD), "across hosts");
    same_bytes(b.data(), wb.data(), b.size(), "MPI_Bcast across hosts, bytes " + std::to_string(b.size()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "--hosts") setenv("RINGTREE_MPI_CROSS_BYTES", "1000000", 1);  // read at the first call
  if (mode == "--multiple") {  // the layer leaves such programs to MPI
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (mode == "--fatal") fatal();
  const std::size_t shm = entries("/dev/shm");
  if (mode == "--hosts" || mode == "--multiple") {
    hosts();
  } else if (mode == "--large") {
    large_derived(MPI_COMM_WORLD);
  } else {
    reductions(MPI_COMM_WORLD, "world");
    movement(MPI_COMM_WORLD, "world");
    fallbacks(MPI_COMM_WORLD);
    communicators();
    requests();
    request_status(MPI_COMM_WORLD);
    progress();
    erroneous_calls();
    nan_and_zeros(MPI_COMM_WORLD);
    freed_datatypes(MPI_COMM_WORLD);
    if (!layer_off()) errors_return(), async_errors_return();  // (with the layer off, MPI itself would get counts that differ)
    barrier();
  }
  long all[2] = {cases, wrong}, sum[2] = {};
  PMPI_Allreduce(all, sum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  // after MPI_Finalize the layer's shared memory is gone too
  if (rank == 0) {
    const std::size_t left = entries("/dev/shm");
    if (left > shm) std::printf("WRONG: %zu entries in /dev/shm after MPI_Finalize, %zu before\n", left, shm), ++sum[1];
    std::printf("layer_check on %d ranks: %ld cases, %ld wrong\n", size, sum[0], sum[1]);
  }
  return sum[1] == 0 ? 0 : 1;
}
