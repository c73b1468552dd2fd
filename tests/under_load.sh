#!/usr/bin/env bash
# Runs a command beside CPU burners, the way a busy laptop or CI runner
# would run the suite: `tests/under_load.sh [-p PER_CORE] CMD...` starts
# PER_CORE (default 2) busy loops per core, runs CMD, stops the loops
# (also when CMD fails or is interrupted) and exits with CMD's status.
#   tests/under_load.sh scripts/ringtree test
#   tests/under_load.sh build-asan/tests/test_host --test-case='shm:*'
set -u
per_core=2
if [ "${1:-}" = -p ]; then per_core=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: $0 [-p PER_CORE] CMD..." >&2; exit 2; }
pids=()
stop() { [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; pids=(); }
trap 'stop; exit 130' INT TERM
trap stop EXIT
for _ in $(seq $(( $(nproc) * per_core ))); do
  sh -c 'while :; do :; done' &
  pids+=($!)
done
echo "under_load: $((${#pids[@]})) busy loops on $(nproc) cores beside: $*" >&2
"$@"
