#!/usr/bin/env bash
# The targets of issue 16 (zero copies within a host), each as a ratio
# measured in one run of ringtree-perf, repeated REPS times (median shown,
# every repetition listed):
#   bench/zero_copy.sh BUILD [REPS=3] [ROWS="private symmetric over mpi"]
# Rows:
#   private  shm, 2 ranks, the caller's own buffers: time / MPI_Allreduce's,
#            and busbw / one core's memcpy of the same bytes
#   symmetric shm, 2 ranks, buffers from comm.allocate (--symmetric)
#   over     shm, 4 ranks on this machine's cores (oversubscribed on 2):
#            MPI's time / shm's (at least 1 is the target)
#   mpi      the MPI transport, 2 ranks: MPI's time / ringtree's
#   floor    bench/line_exchange (two processes trading one cache line, the
#            least an 8-byte all-reduce can take here) against MPI's 8 B time
set -euo pipefail
build=${1:?usage: bench/zero_copy.sh BUILD [REPS]}
reps=${2:-3}
rows=${3:-private symmetric over mpi}
perf=$build/tools/ringtree-perf
[ -x "$perf" ] || { echo "zero_copy.sh: no $perf (build first)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export RINGTREE_CACHE_DIR=$tmp/cache   # a fresh tuning cache: automatic measures as a new user's would
run() {  # NAME NP ARGS...
  local name=$1 np=$2; shift 2
  mpirun --oversubscribe -np "$np" "$perf" --csv "$tmp/$name.csv" "$@" >"$tmp/$name.log" 2>&1 ||
    { cat "$tmp/$name.log" >&2; exit 1; }
}
for r in $(seq 1 "$reps"); do
  echo "# repetition $r of $reps" >&2
  for row in $rows; do
    case $row in
      private) run "private.$r" 2 -t shm -b 8 -e 64M -f 2 -a automatic,mpi,memcpy --rounds 3;;
      symmetric) run "symmetric.$r" 2 -t shm --symmetric -b 8 -e 64M -f 2 -a automatic,one_shot,two_shot,mpi,memcpy --rounds 3;;
      over) run "over.$r" 4 -t shm -b 8 -e 64M -f 8 -a automatic,mpi --rounds 3;;
      mpi) "$build/bench/line_exchange" >"$tmp/floor.$r.txt"
           run "mpi.$r" 2 -t mpi -b 8 -e 64M -f 2 -a automatic,two_shot,ring,mpi --rounds 3;;
      *) echo "zero_copy.sh: no row '$row' (private symmetric over mpi)" >&2; exit 2;;
    esac
  done
done
python3 - "$tmp" "$reps" "$rows" <<'PY'
import csv, statistics, sys
tmp, reps, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def load(name, r):
    rows = {}
    for row in csv.DictReader(open(f"{tmp}/{name}.{r}.csv")):
        rows.setdefault(int(row["bytes"]), {})[row["algo"].split(":")[0]] = row
    return rows
def human(b):
    for unit, f in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= f and b % f == 0: return f"{b // f}{unit}"
    return f"{b}B"
def table(name, title, cols):
    if name not in rows: return
    print(f"\n# {title}")
    runs = [load(name, r) for r in range(1, reps + 1)]
    print(f"{'size':>6} " + " ".join(f"{c[0]:>26}" for c in cols))
    for b in sorted(runs[0]):
        cells = []
        for label, f in cols:
            vals = [f(run[b]) for run in runs if b in run]
            vals = [v for v in vals if v is not None]
            cells.append(f"{statistics.median(vals):6.2f} ({' '.join(f'{v:.2f}' for v in vals)})" if vals else "-")
        print(f"{human(b):>6} " + " ".join(f"{c:>26}" for c in cells))
t = lambda row, a: float(row[a]["time_us"]) if a in row else None
bw = lambda row, a: float(row[a]["busbw_GBps"]) if a in row else None
def ratio(x, y): return x / y if x is not None and y else None
table("private", "shm, 2 ranks, private buffers: automatic's time / MPI_Allreduce's (targets: 8B <= 0.7, 1M-16M <= 0.8, 64M <= 0.5); busbw / memcpy's (64M >= 0.4)",
      [("time/mpi", lambda r: ratio(t(r, "automatic"), t(r, "mpi"))), ("busbw/memcpy", lambda r: ratio(bw(r, "automatic"), bw(r, "memcpy")))])
table("symmetric", "shm, 2 ranks, symmetric buffers: time / MPI_Allreduce's (8B <= 0.5); busbw / memcpy's (64M >= 0.6)",
      [("auto time/mpi", lambda r: ratio(t(r, "automatic"), t(r, "mpi"))), ("auto busbw/memcpy", lambda r: ratio(bw(r, "automatic"), bw(r, "memcpy"))),
       ("two_shot busbw/memcpy", lambda r: ratio(bw(r, "two_shot"), bw(r, "memcpy")))])
if "mpi" in rows:
    floors = [float(open(f"{tmp}/floor.{r}.txt").read().split(": ")[1].split()[0]) for r in range(1, reps + 1)]
    vals = [f / t(load("mpi", r)[8], "mpi") for r, f in zip(range(1, reps + 1), floors)]
    print(f"\n# the floor at 8B: line_exchange's time / MPI_Allreduce's (no all-reduce can go below it)\n"
          f"    8B {statistics.median(vals):6.2f} ({' '.join(f'{v:.2f}' for v in vals)}); line_exchange {' '.join(f'{f:.3f}' for f in floors)} us")
table("over", "shm, 4 ranks on the machine's cores, private buffers: MPI's time / automatic's (>= 1)",
      [("mpi/auto", lambda r: ratio(t(r, "mpi"), t(r, "automatic")))])
table("mpi", "MPI transport, 2 ranks: MPI_Allreduce's time / ringtree's (>= 1.0 at 1M-64M)",
      [("mpi/auto", lambda r: ratio(t(r, "mpi"), t(r, "automatic"))), ("mpi/two_shot", lambda r: ratio(t(r, "mpi"), t(r, "two_shot"))),
       ("mpi/ring", lambda r: ratio(t(r, "mpi"), t(r, "ring")))])
PY
