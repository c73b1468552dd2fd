#!/usr/bin/env bash
# Is algorithm::automatic as fast as the best fixed algorithm? Runs the
# allreduce sweep of `scripts/ringtree bench` REPS times per transport with
# every allreduce algorithm, and prints, per size, the median time of each,
# automatic's pick, and automatic's median over the best fixed median
# (target <= 1.10), and, up to 4 KiB, over MPI_Allreduce's (target <= 1.2).
#   bench/tuner_sweep.sh BUILD_DIR [REPS] [MAXBYTES]
set -eu
build=${1:?build dir}
reps=${2:-5}
max=${3:-64M}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in mpi shm; do
  for i in $(seq "$reps"); do
    mpirun --oversubscribe -np 2 "$build/bench/ringtree-perf" -t "$t" -b 8 -e "$max" -f 2 -c 0 \
      -a ring,tree,recursive_doubling,rabenseifner,automatic,mpi --csv "$tmp/$t-$i.csv" >/dev/null
  done
  echo "# transport $t, 2 ranks, medians of $reps runs (us); auto/best: automatic over the best fixed algorithm"

  cat "$tmp/$t"-*.csv | awk -F, '
    $1 == "allreduce" {
      a = $7; if (a ~ /^automatic/) { pick[$2] = substr(a, 11); a = "automatic" }
      key = $2 SUBSEP a; n[key]++; v[key, n[key]] = $8; if (!($2 in seen)) { seen[$2] = 1; order[++ns] = $2 } }
    function median(key,   k, i, j, x, tmpv) {
      k = n[key]; if (k == 0) return -1
      for (i = 1; i <= k; i++) tmpv[i] = v[key, i]
      for (i = 2; i <= k; i++) { x = tmpv[i]; for (j = i - 1; j >= 1 && tmpv[j] > x; j--) tmpv[j + 1] = tmpv[j]; tmpv[j + 1] = x }
      return k % 2 ? tmpv[(k + 1) / 2] : (tmpv[k / 2] + tmpv[k / 2 + 1]) / 2 }
    END {
      printf "%10s %9s %9s %9s %9s %9s %9s  %-18s %9s %9s\n", "bytes", "ring", "tree", "rec_dbl", "rabens", "mpi", "auto", "auto picks", "auto/best", "auto/mpi"
      worst = 0
      for (i = 1; i <= ns; i++) {
        s = order[i]
        r = median(s SUBSEP "ring"); tr = median(s SUBSEP "tree"); rd = median(s SUBSEP "recursive_doubling")
        rb = median(s SUBSEP "rabenseifner"); m = median(s SUBSEP "mpi"); au = median(s SUBSEP "automatic")
        best = r; if (tr < best) best = tr; if (rd < best) best = rd; if (rb < best) best = rb
        ratio = au / best; if (ratio > worst) worst = ratio
        printf "%10d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f  %-18s %9.2f %9s\n", s, r, tr, rd, rb, m, au, pick[s], ratio, (s <= 4096 ? sprintf("%.2f", au / m) : "-")
      }
      printf "# worst auto/best: %.2f\n", worst
    }'
done
