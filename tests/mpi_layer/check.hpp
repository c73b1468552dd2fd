// What layer_check's parts share (layer_check.cpp says what it checks):
// the counts of cases and of wrong ones, and the ways to compare with MPI.
#pragma once
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace layer_check {

inline int rank = 0, size = 1;
inline long cases = 0, wrong = 0;

inline bool layer_off() {
  const char* v = std::getenv("RINGTREE_MPI");
  return v && std::string(v) == "0";
}

inline void expect(bool ok, const std::string& what) {
  ++cases;
  if (!ok && wrong++ < 20) std::fprintf(stderr, "rank %d: WRONG: %s\n", rank, what.c_str());
}
inline void same_bytes(const void* got, const void* want, std::size_t n, const std::string& what) {
  const auto* g = static_cast<const unsigned char*>(got);
  const auto* w = static_cast<const unsigned char*>(want);
  std::size_t i = 0;
  while (i < n && g[i] == w[i]) ++i;
  expect(i == n, what + (i < n ? " differs from PMPI's at byte " + std::to_string(i) + " of " + std::to_string(n) : ""));
}
inline void check(int rc, const std::string& what) { expect(rc == MPI_SUCCESS, what + " returned " + std::to_string(rc)); }

// n bytes that differ by rank and seed.
inline std::vector<unsigned char> pattern(std::size_t n, int r, unsigned char seed) {
  std::vector<unsigned char> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(i * 131 + static_cast<std::size_t>(r) * 29 + seed);
  return b;
}

// calls.cpp: every datatype x op x count of the reductions, and the
// data-moving calls with every datatype layout, on `comm`.
void reductions(MPI_Comm comm, const char* where);
void movement(MPI_Comm comm, const char* where);
// promises.cpp: MPI's promises a first version of the layer broke.
void request_status(MPI_Comm comm);
void async_errors_return();
void erroneous_calls();
void nan_and_zeros(MPI_Comm comm);
void freed_datatypes(MPI_Comm comm);
void large_derived(MPI_Comm comm);

}  // namespace layer_check
