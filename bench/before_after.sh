#!/usr/bin/env bash
# Two builds of ringtree-perf, alternating in one run: whether a change
# costs anything per call. Each round runs every row on the old build, then
# on the new one (so that a noisy moment hits both); the table shows each
# row's median time over the rounds and new / old.
#   bench/before_after.sh OLD_BUILD NEW_BUILD [ROUNDS=7] [ROWS="shm-8 shm-64M mpi-8 mpi-64M"]
# Rows: <transport>-<size>, 2 ranks, all-reduce with automatic (what a
# program gets), floats, the caller's own buffers.
# Make the old build from a worktree of the old commit:
#   git worktree add /tmp/base <commit> && meson setup /tmp/base/build -Ddebug=false \
#     -Dtests=disabled -Dexamples=disabled -Dbenchmarks=disabled -Dtorch=disabled -Dcuda=disabled \
#     -Dlibtorch=disabled && ninja -C /tmp/base/build tools/ringtree-perf   (bench/ringtree-perf before issue 29)
set -euo pipefail
old=${1:?usage: bench/before_after.sh OLD_BUILD NEW_BUILD [ROUNDS] [ROWS]}
new=${2:?usage: bench/before_after.sh OLD_BUILD NEW_BUILD [ROUNDS] [ROWS]}
rounds=${3:-7}
rows=${4:-shm-8 shm-64M mpi-8 mpi-64M}
# (the tool lives in tools/ since issue 29, in bench/ before)
perf_of() { if [ -x "$1/tools/ringtree-perf" ]; then echo "$1/tools/ringtree-perf"; else echo "$1/bench/ringtree-perf"; fi; }
for b in "$old" "$new"; do [ -x "$(perf_of "$b")" ] || { echo "before_after.sh: no ringtree-perf in $b/tools or $b/bench" >&2; exit 2; }; done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export RINGTREE_CACHE_DIR=$tmp/cache
for r in $(seq 1 "$rounds"); do
  for row in $rows; do
    t=${row%%-*} size=${row#*-}
    iters=20; [ "$size" = 8 ] && iters=20000
    for which in old new; do
      b=$old; [ $which = new ] && b=$new
      mpirun --oversubscribe -np 2 "$(perf_of "$b")" -t "$t" -b "$size" -e "$size" -a automatic -n "$iters" -w 5 \
        --csv "$tmp/$which.$row.$r.csv" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
    done
  done
done
python3 - "$tmp" "$rounds" "$rows" <<'PY'
import csv, statistics, sys
tmp, rounds, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def time(which, row, r):
    return float(next(csv.DictReader(open(f"{tmp}/{which}.{row}.{r}.csv")))["time_us"])
print(f"{'row':>10} {'old us':>10} {'new us':>10} {'new/old':>8}   per round (new/old)")
for row in rows:
    o = [time("old", row, r) for r in range(1, rounds + 1)]
    n = [time("new", row, r) for r in range(1, rounds + 1)]
    mo, mn = statistics.median(o), statistics.median(n)
    per = " ".join(f"{b / a:.2f}" for a, b in zip(o, n))
    print(f"{row:>10} {mo:>10.3f} {mn:>10.3f} {mn / mo:>8.3f}   {per}")
PY
