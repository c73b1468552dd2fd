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

#include <ringtree/core/compiled.hpp>
#include <ringtree/core/config.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/core/posix.hpp>
#include <ringtree/transport/shm/layout.hpp>

namespace ringtree::detail {

// Which job this process belongs to, as every rank of a job can tell
// without talking to the others: RINGTREE_SHM_JOB, else the launcher's job
// id (Open MPI / PMIx, Slurm, torchrun), else the parent process (a script
// or program that starts the ranks), with its start time.
std::string job_identity();
// A segment made by `creator` with identity `theirs` may be joined by this
// process (identity `mine`): the same job, or, for jobs known only by their
// parent process, one of the two started the other (a program that forks
// its ranks).
bool same_job(const std::string& theirs, const std::string& mine, int creator);

// A number the launcher put in the environment: the first of `names` that
// is set (a rank or a size, `what`).
int launcher_env_int(std::initializer_list<const char*> names, const char* what);

// Where a transport made from the environment attaches: the name from
// RINGTREE_SHM_NAME, rank and size from RINGTREE_RANK / RINGTREE_SIZE (or
// Open MPI's or PMI's variables), so any launcher can start the processes.
struct shm_launch {
  std::string name;
  int rank, size;
};
shm_launch shm_launch_from_env();

}  // namespace ringtree::detail

#if RINGTREE_DEFINES
#include <ringtree/transport/shm/bootstrap-inl.hpp>
#endif
