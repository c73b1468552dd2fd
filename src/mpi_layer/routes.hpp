// Which of ringtree and MPI's own serves each call the layer may serve, by
// call and size bin: measured once ahead by ringtree-mpi-tune (tune.cpp),
// kept in the cache directory beside ringtree's own choices, and read by
// the layer when it makes a communicator. Where MPI's own was measured
// faster, the layer calls it (the log says "MPI (measured faster)"); where
// nothing was measured, ringtree serves.
#pragma once
#include <mpi.h>

#include <array>
#include <cstdio>
#include <vector>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <ringtree/tuning/cache_files.hpp>
#include <ringtree/tuning/choice_cache.hpp>

namespace ringtree::mpi_layer {

enum class call_kind : std::uint8_t { allreduce, iallreduce, reduce, bcast, allgather, alltoall, reduce_scatter_block, barrier };
inline constexpr std::string_view call_names[] = {"MPI_Allreduce", "MPI_Iallreduce", "MPI_Reduce", "MPI_Bcast",
                                                  "MPI_Allgather", "MPI_Alltoall", "MPI_Reduce_scatter_block", "MPI_Barrier"};
inline constexpr std::size_t call_kinds = std::size(call_names);

enum class route : std::uint8_t { unmeasured, ringtree, mpi };

// Bins as ringtree's choice cache has them: bin b holds (2^(b-1), 2^b]
// bytes; calls above 64 MiB take the last bin's route. The bytes of a
// call: its whole buffer (all ranks' blocks for Allgather, Alltoall and
// Reduce_scatter_block), 0 for a barrier.
struct route_table {
  static constexpr int bins = detail::measured_choices::max_bin + 1;
  std::array<route, call_kinds * bins> at{};
  route get(call_kind k, std::size_t bytes) const noexcept { return at[std::size_t(k) * bins + detail::measured_choices::bin_of(bytes)]; }
  void set(call_kind k, int bin, route r) noexcept { at[std::size_t(k) * bins + bin] = r; }
};

// Where the ranks of `c` run, as a file name's part: "1host", or
// "<hosts>hosts-<hash of which host each rank is on>" (collective; MPI's
// own calls, so the tuner and the layer name the same file).
inline std::string layout_key(MPI_Comm c) {
  int me = 0, n = 0, local_rank = 0;
  PMPI_Comm_rank(c, &me);
  PMPI_Comm_size(c, &n);
  MPI_Comm local;
  PMPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  PMPI_Comm_rank(local, &local_rank);
  int leader = me;  // the host's first rank names it
  PMPI_Bcast(&leader, 1, MPI_INT, 0, local);
  PMPI_Comm_free(&local);
  std::vector<int> host(static_cast<std::size_t>(n));
  PMPI_Allgather(&leader, 1, MPI_INT, host.data(), 1, MPI_INT, c);
  std::uint32_t h = 2166136261u;  // FNV-1a
  int hosts = 0;
  for (int r = 0; r < n; ++r) h = (h ^ static_cast<std::uint32_t>(host[r])) * 16777619u, hosts += host[r] == r;
  if (hosts == 1) return "1host";
  char tag[16];
  std::snprintf(tag, sizeof tag, "%06x", h & 0xffffffu);
  return detail::cat(hosts, "hosts-", tag);
}

// One file per layout and rank count, valid for one CPU and one version,
// as ringtree's own choice cache.
inline std::string routes_path(const std::string& layout, int ranks) {
  return detail::cat(config::from_env().cache_dir, "/mpi-layer-", layout, "-", ranks, "ranks.txt");
}

// Lines: "cpu = ...", "version = ...", "<call> <bytes> = ringtree|mpi"
// (detail::read_choice_file, as ringtree's own choice cache); a line that
// does not parse is an error naming the file. Nothing if the file was made
// on another CPU or by another version.
inline std::optional<route_table> parse_routes(const std::string& text, const std::string& path) {
  route_table t;
  const bool here = detail::read_choice_file(
      text,
      [&](const std::string& key, const std::string& value) {
        const auto nb = detail::name_and_bin(key);
        if (!nb || (value != "ringtree" && value != "mpi")) return false;
        std::size_t k = 0;
        while (k < call_kinds && call_names[k] != nb->first) ++k;
        if (k == call_kinds) return false;
        t.set(call_kind(k), nb->second, value == "mpi" ? route::mpi : route::ringtree);
        return true;
      },
      [&](int no, const std::string& line) {
        return error("libringtree-mpi", -1, detail::cat(path, ":", no, ": expected 'cpu = ...', 'version = ...' or '<MPI call> <bytes> = ringtree|mpi', got '", line, "'"));
      });
  if (!here) return std::nullopt;
  return t;
}

inline std::string format_routes(const route_table& t, const std::string& layout, int ranks) {
  std::string text = detail::cat("# libringtree-mpi: ringtree or MPI's own, measured by ringtree-mpi-tune (", layout, ", ",
                                 ranks, " ranks), ", detail::measured_stamp(), "\n# run ringtree-mpi-tune again to measure again\ncpu = ",
                                 detail::cpu_model(), "\nversion = ", version_string, "\n");
  for (std::size_t k = 0; k < call_kinds; ++k)
    for (int b = 0; b < route_table::bins; ++b)
      if (const route r = t.at[k * route_table::bins + b]; r != route::unmeasured)
        text += detail::cat(call_names[k], " ", b == 0 ? 1 : std::size_t{1} << b, " = ", r == route::mpi ? "mpi" : "ringtree", "\n");
  return text;
}

}  // namespace ringtree::mpi_layer
