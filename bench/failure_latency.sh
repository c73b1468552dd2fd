#!/usr/bin/env bash
# When does a stalled peer's timeout fire on a loaded machine? Two CPU
# burners per core run beside 2 ranks under libringtree-mpi; rank 0 sleeps
# 30 s before an all-reduce, RINGTREE_TIMEOUT is 4 s: rank 1 should raise
# at 4 s (bench/RESULTS.md, "Failures reach everyone fast").
#   bench/failure_latency.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build=${1:-build} runs=${2:-3}
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc -O2 "$(dirname "$0")/failure_latency.c" -o "$tmp/stall"
export RINGTREE_CACHE_DIR=$tmp RINGTREE_TIMEOUT=4
for _ in $(seq 1 $((2 * $(nproc)))); do (while :; do :; done) & pids+=($!); done
for _ in $(seq 1 "$runs"); do
  timeout 120 mpirun -np 2 -x RINGTREE_CACHE_DIR -x RINGTREE_TIMEOUT -x LD_PRELOAD="$PWD/$build/libringtree-mpi.so" "$tmp/stall" 30 2>/dev/null | grep '^rank 1' || true
done
