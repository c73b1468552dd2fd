#pragma once
// What a rank learns from its launcher's environment, without talking to
// the other ranks: which job it belongs to (so that only that job's
// processes may attach to a segment: shm/segment.hpp), and, for a
// transport made without MPI (slot_transport::from_env), the segment's
// name, its rank and the number of ranks.
#include <unistd.h>

#include <cstdlib>
#include <initializer_list>
#include <string>

#include <ringtree/core/config.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/core/posix.hpp>
#include <ringtree/transport/shm/layout.hpp>

namespace ringtree::detail {

// Which job this process belongs to, as every rank of a job can tell
// without talking to the others: RINGTREE_SHM_JOB, else the launcher's job
// id (Open MPI / PMIx, Slurm, torchrun), else the parent process (a script
// or program that starts the ranks), with its start time.
inline std::string job_identity() {
  for (const char* var : {"RINGTREE_SHM_JOB", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"})
    if (const char* v = config::get(var)) {
      std::string id = cat(var, "=", v);
      if (const char* step = std::getenv("SLURM_STEP_ID"); step != nullptr && std::string(var) == "SLURM_JOB_ID")
        id += cat(".", step);
      return id.substr(0, sizeof(shm_header::job) - 1);
    }
  const int parent = static_cast<int>(getppid());
  return cat("parent ", parent, "@", read_proc_stat(parent).start);
}
// A segment made by `creator` with identity `theirs` may be joined by this
// process (identity `mine`): the same job, or, for jobs known only by their
// parent process, one of the two started the other (a program that forks
// its ranks).
inline bool same_job(const std::string& theirs, const std::string& mine, int creator) {
  if (theirs == mine) return true;
  const bool by_parent = theirs.rfind("parent ", 0) == 0 && mine.rfind("parent ", 0) == 0;
  const int me = static_cast<int>(getpid());
  return by_parent && (is_ancestor(creator, me) || is_ancestor(me, creator));
}

// A number the launcher put in the environment: the first of `names` that
// is set (a rank or a size, `what`).
inline int launcher_env_int(std::initializer_list<const char*> names, const char* what) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v != nullptr && *v != '\0') {
      char* end = nullptr;
      const long x = std::strtol(v, &end, 10);
      if (end == v || *end != '\0' || x < 0 || x > 1 << 20)
        throw error("shm_transport", -1, detail::cat(n, "='", v, "' is not a ", what));
      return static_cast<int>(x);
    }
  throw error("shm_transport", -1, detail::cat("no ", what, " in the environment (set RINGTREE_RANK and RINGTREE_SIZE)"));
}

// Where a transport made from the environment attaches: the name from
// RINGTREE_SHM_NAME, rank and size from RINGTREE_RANK / RINGTREE_SIZE (or
// Open MPI's or PMI's variables), so any launcher can start the processes.
struct shm_launch {
  std::string name;
  int rank, size;
};
inline shm_launch shm_launch_from_env() {
  const config c = config::from_env();
  if (c.shm_name.empty())
    throw error("shm_transport", -1, "RINGTREE_SHM_NAME is not set (a name like /ringtree-job42, the same on every rank)");
  const int rank = c.rank ? *c.rank : launcher_env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK"}, "rank");
  const int size = c.size ? *c.size : launcher_env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, "size");
  return {c.shm_name, rank, size};
}

}  // namespace ringtree::detail
