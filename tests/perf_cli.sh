#!/usr/bin/env bash
# ringtree-perf as a user runs it: bad input gets a clear message and a
# non-zero exit; a small sweep checks its results and writes CSV and JSON.
set -u
perf=$1
fail() { echo "FAIL: $*"; exit 1; }
run() { mpirun --oversubscribe -np "$1" "$perf" "${@:2}"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$(run 2 --bogus 1 2>&1); rc=$?
[ $rc -ne 0 ] || fail "a bad flag exited 0"
grep -q "unknown flag '--bogus'" <<<"$out" || fail "no message for a bad flag: $out"
out=$(run 1 -b 12Q 2>&1); rc=$?
[ $rc -ne 0 ] || fail "a bad size exited 0"
grep -q "'12Q' is not a whole number" <<<"$out" || fail "no message for a bad size: $out"
out=$(run 2 -R 5 -o broadcast -b 8 -e 8 2>&1); rc=$?
[ $rc -ne 0 ] || fail "a root out of range exited 0"
grep -q "root 5 is out of range for 2 ranks" <<<"$out" || fail "no message for a bad root: $out"

out=$(run 3 -b 8 -e 4K -f 8 -o allreduce,broadcast,scatter,reduce_scatter,allgather,reduce,gather \
      -a ring,tree,binomial,linear,recursive_doubling,automatic,mpi -w 1 -n 2 -c 1 \
      --csv "$tmp/rows.csv" --json "$tmp/rows.json" 2>&1) || fail "the sweep failed: $out"
echo "$out"
grep -q "# checked: 0 wrong elements" <<<"$out" || fail "results were not all checked and right"
[ "$(grep -c '^allreduce ' <<<"$out")" -ge 10 ] || fail "too few allreduce rows"
[ "$(wc -l <"$tmp/rows.csv")" -gt 20 ] || fail "CSV too short"
grep -q '"collective": "gather"' "$tmp/rows.json" || fail "JSON lacks rows"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['ranks']==3 and len(d['rows'])>20" "$tmp/rows.json" \
  2>/dev/null || { command -v python3 >/dev/null && fail "JSON does not parse"; }
out=$(run 2 -b 8 -e 1M -f 16 -a ring,recursive_doubling,automatic,mpi --model -w 1 -n 2 --rounds 3 2>&1) || fail "--model failed: $out"
grep -q "rounds 3" <<<"$out" || fail "the header does not say --rounds 3: $out"
echo "$out"
grep -q "^# cost model: alpha" <<<"$out" || fail "--model does not show the model's constants"
grep -q "model(us)" <<<"$out" || fail "--model has no model column"
# every ringtree row has a positive prediction; MPI's rows have none
awk '/^allreduce/ && $7 != "mpi" { if (!($9 > 0)) bad = 1 } /^allreduce/ && $7 == "mpi" { if ($9 != "-") bad = 1 }
     END { exit bad }' <<<"$out" || fail "--model rows lack predictions: $out"
# --fresh: a `write` row per size, times that include the write, results still checked
out=$(run 2 -t shm -o broadcast,reduce -b 4K -e 64K -f 16 -a ring,mpi --fresh -w 1 -n 2 -c 1 2>&1) || fail "--fresh failed: $out"
echo "$out"
grep -q "^# fresh: " <<<"$out" || fail "the header does not say --fresh"
grep -q "# checked: 0 wrong elements" <<<"$out" || fail "--fresh rows were not all checked and right"
[ "$(grep -cE '^(broadcast|reduce) .* write ' <<<"$out")" -eq 4 ] || fail "--fresh lacks a write row per size: $out"
awk '$7 == "write" && !($8 > 0) { bad = 1 } END { exit bad }' <<<"$out" || fail "a write row has no time: $out"
# the machine's core-to-core round trip, before and after the rows (not measured with more ranks than cores)
grep -qE "^# core-to-core round trip \(one cache line, ranks 0 and 1\): ([0-9]+ ns|not measured)" <<<"$out" \
  || fail "no core-to-core round trip in the header: $out"
if grep -qE "ranks 0 and 1\): [0-9]+ ns" <<<"$out"; then
  grep -qE "^# core-to-core round trip after the rows: [0-9]+ ns" <<<"$out" || fail "no round trip after the rows: $out"
fi
# -t net: net_cluster (UCX between hosts; MPI only hands out the addresses), where built with
# UCX. On one host its collectives run over shared memory: this checks the set-up and the rows.
if out=$(run 2 -t net -o allreduce,broadcast -b 8 -e 64K -f 64 -a ring,automatic,mpi -w 1 -n 2 -c 1 2>&1); then
  echo "$out"
  grep -q "# checked: 0 wrong elements" <<<"$out" || fail "-t net rows were not all checked and right: $out"
elif grep -q "built without UCX" <<<"$out"; then
  echo "SKIPPED -t net: built without UCX"
else
  fail "-t net failed: $out"
fi
echo "ringtree-perf command line: ok"
