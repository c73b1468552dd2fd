#!/usr/bin/env bash
# Is algorithm::automatic as fast as the best fixed algorithm? Runs the
# allreduce sweep of `scripts/ringtree bench` REPS times per transport on NP
# ranks with every allreduce algorithm of the table, from a fresh cache (the
# first run measures, the later ones read what it saved), and prints, per
# size, the median time of each, automatic's pick, and automatic's median
# over the best fixed median (target <= 1.10 at 90% of the sizes, never
# above 1.15), and over MPI_Allreduce's. Within a run, each size times all
# algorithms ROUNDS times in turn (ringtree-perf --rounds), so that noise
# and drift hit them alike.
#   bench/tuner_sweep.sh BUILD_DIR [REPS] [MAXBYTES] [NP] [FACTOR] [ROUNDS]
# (TRANSPORTS="mpi" or "shm" for one of them; default both)
set -eu
build=${1:?build dir}
reps=${2:-3}
max=${3:-64M}
np=${4:-2}
factor=${5:-4}
rounds=${6:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
algos=ring,tree,recursive_doubling,rabenseifner,one_shot
for t in ${TRANSPORTS:-mpi shm}; do
  export RINGTREE_CACHE_DIR=$tmp/cache-$t
  start=$(date +%s.%N)
  for i in $(seq "$reps"); do
    mpirun --oversubscribe -np "$np" "$build/tools/ringtree-perf" -t "$t" -b 8 -e "$max" -f "$factor" -c 0 \
      -a "$algos,automatic,mpi" --rounds "$rounds" --csv "$tmp/$t-$i.csv" >/dev/null
  done
  echo "# transport $t, $np ranks, medians of $reps runs x $rounds rounds (us), fresh cache: $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.0f", e-s}') s in all"
  cat "$tmp/$t"-*.csv | awk -F, -v algos="$algos" '
    BEGIN { na = split(algos, A, ",") }
    $1 == "allreduce" {
      a = $7; if (a ~ /^automatic/) { pick[$2] = substr(a, 11); a = "automatic" }
      key = $2 SUBSEP a; n[key]++; v[key, n[key]] = $8; if (!($2 in seen)) { seen[$2] = 1; order[++ns] = $2 } }
    function median(key,   k, i, j, x, tmpv) {
      k = n[key]; if (k == 0) return 1e30
      for (i = 1; i <= k; i++) tmpv[i] = v[key, i]
      for (i = 2; i <= k; i++) { x = tmpv[i]; for (j = i - 1; j >= 1 && tmpv[j] > x; j--) tmpv[j + 1] = tmpv[j]; tmpv[j + 1] = x }
      return k % 2 ? tmpv[(k + 1) / 2] : (tmpv[k / 2] + tmpv[k / 2 + 1]) / 2 }
    END {
      printf "%10s", "bytes"; for (k = 1; k <= na; k++) printf " %9.9s", A[k]; printf " %9s %9s  %-18s %9s %9s\n", "mpi", "auto", "auto picks", "auto/best", "auto/mpi"
      worst = 0; within = 0
      for (i = 1; i <= ns; i++) {
        s = order[i]; best = 1e30; printf "%10d", s
        for (k = 1; k <= na; k++) { x = median(s SUBSEP A[k]); if (x < best) best = x; printf " %9s", (x < 1e29 ? sprintf("%.2f", x) : "-") }
        m = median(s SUBSEP "mpi"); au = median(s SUBSEP "automatic")
        ratio = au / best; if (ratio > worst) worst = ratio; if (ratio <= 1.10) within++
        printf " %9.2f %9.2f  %-18s %9.2f %9.2f\n", m, au, pick[s], ratio, au / m
      }
      printf "# auto within 10%% of the best fixed algorithm at %d of %d sizes; worst auto/best: %.2f\n", within, ns, worst
    }'
  ls "$RINGTREE_CACHE_DIR"/tuned-* >/dev/null 2>&1 && echo "# cached choices: $(grep -c ' = ' "$RINGTREE_CACHE_DIR"/tuned-*) lines in $(basename "$RINGTREE_CACHE_DIR"/tuned-*)"
done
