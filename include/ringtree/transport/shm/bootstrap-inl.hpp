#pragma once
// bootstrap.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <ringtree/transport/shm/bootstrap.hpp>

namespace ringtree::detail {

RINGTREE_FUNC std::string job_identity() {
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

RINGTREE_FUNC bool same_job(const std::string& theirs, const std::string& mine, int creator) {
  if (theirs == mine) return true;
  const bool by_parent = theirs.rfind("parent ", 0) == 0 && mine.rfind("parent ", 0) == 0;
  const int me = static_cast<int>(getpid());
  return by_parent && (is_ancestor(creator, me) || is_ancestor(me, creator));
}

RINGTREE_FUNC int launcher_env_int(std::initializer_list<const char*> names, const char* what) {
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

RINGTREE_FUNC shm_launch shm_launch_from_env() {
  const config c = config::from_env();
  if (c.shm_name.empty())
    throw error("shm_transport", -1, "RINGTREE_SHM_NAME is not set (a name like /ringtree-job42, the same on every rank)");
  const int rank = c.rank ? *c.rank : launcher_env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK"}, "rank");
  const int size = c.size ? *c.size : launcher_env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, "size");
  return {c.shm_name, rank, size};
}

}  // namespace ringtree::detail
