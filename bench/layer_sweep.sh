#!/usr/bin/env bash
# libringtree-mpi against MPI's own at every size, for every collective it
# serves: ringtree-mpi-tune first (what a layer user runs once), then
# ringtree-perf under the layer, in one run: `pmpi` is MPI's own (its
# profiling names), `mpi` the layer (ringtree or MPI's own, as measured),
# `automatic` ringtree's communicator called directly. The tuner's own
# table (with MPI_Iallreduce and MPI_Barrier, which ringtree-perf does not
# time) comes first. A cache directory of its own, removed at the end.
#
#   bench/layer_sweep.sh NP [BUILD_DIR] [extra ringtree-perf arguments]
set -euo pipefail
np=${1:?usage: bench/layer_sweep.sh NP [BUILD_DIR]} build=${2:-build}
shift $(( $# >= 2 ? 2 : 1 ))
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export RINGTREE_CACHE_DIR=$cache OMPI_MCA_rmaps_base_oversubscribe=1
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np "$np" -x RINGTREE_CACHE_DIR "$build/ringtree-mpi-tune"
mpirun -np "$np" -x RINGTREE_CACHE_DIR -x LD_PRELOAD="$PWD/$build/libringtree-mpi.so" "$build/tools/ringtree-perf" -t shm \
  -b 0 -e 64M -f 2 -o allreduce,broadcast,reduce,reduce_scatter,allgather,alltoall -a pmpi,mpi,automatic --rounds 5 "$@"
