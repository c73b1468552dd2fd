// The network between two hosts, as MPI sees it: the latency of an 8-byte
// ping-pong (half the round trip) and the bandwidth of a stream of 4 MiB messages, between
// rank 0 and the first rank on another host (or rank 1 where all share one).
// What bench/hosts_bench.sh reports with every figure, since netem (added
// latency) is not in this kernel.
//   mpirun -np N build/bench/pingpong
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // the peer: the lowest rank that does not share rank 0's host
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int first = rank;
  MPI_Bcast(&first, 1, MPI_INT, 0, local);
  MPI_Comm_free(&local);
  std::vector<int> host(size);
  MPI_Allgather(&first, 1, MPI_INT, host.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int peer = -1;
  for (int r = 1; r < size && peer < 0; ++r)
    if (host[r] != host[0]) peer = r;
  const bool across = peer >= 0;
  if (!across) peer = size > 1 ? 1 : -1;
  if (peer < 0) {
    if (rank == 0) std::printf("pingpong: needs 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  auto pingpong = [&](std::size_t bytes, int reps) {
    std::vector<char> buf(bytes);
    std::vector<double> t;
    for (int b = 0; b < 7; ++b) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < reps; ++i) {
        if (rank == 0) {
          MPI_Send(buf.data(), static_cast<int>(bytes), MPI_BYTE, peer, 0, MPI_COMM_WORLD);
          MPI_Recv(buf.data(), static_cast<int>(bytes), MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == peer) {
          MPI_Recv(buf.data(), static_cast<int>(bytes), MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(buf.data(), static_cast<int>(bytes), MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
      }
      t.push_back((MPI_Wtime() - t0) / reps / 2);  // one way
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  // A stream of 4 MiB messages one way, then one byte back: the sustained
  // bandwidth (a ping-pong of big messages would let tc's bucket refill
  // between them).
  auto stream = [&](int messages) {
    constexpr std::size_t big = std::size_t{4} << 20;
    std::vector<char> buf(big);
    char ack = 0;
    std::vector<double> t;
    for (int b = 0; b < 5; ++b) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < messages; ++i) {
        if (rank == 0) MPI_Send(buf.data(), static_cast<int>(big), MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        else if (rank == peer) MPI_Recv(buf.data(), static_cast<int>(big), MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
      if (rank == peer) MPI_Send(&ack, 1, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
      else if (rank == 0) MPI_Recv(&ack, 1, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      t.push_back(double(big) * messages / (MPI_Wtime() - t0));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  pingpong(8, 100);  // connections
  const double lat = pingpong(8, 2000), bw = stream(16);
  if (rank == 0)
    std::printf("pingpong rank 0 <-> rank %d (%s): latency %.1f us (8 B, one way), bandwidth %.2f GB/s (a stream of 4 MiB messages)\n",
                peer, across ? "another host" : "the same host", lat * 1e6, bw / 1e9);
  MPI_Finalize();
  return 0;
}
