#!/usr/bin/env bash
# The trace tool as a learner runs it, and RINGTREE_TRACE in an MPI program.
#   trace_cli.sh RINGTREE_TRACE_TOOL TRACE_ENV [HELLO_ALLREDUCE]
set -u
tool=$1 env_check=$2 hello=${3:-}
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$("$tool" --collective allreduce --algo ring --ranks 4 --count 8) || fail "ringtree-trace failed: $out"
echo "$out"
# Ring all-reduce of 8 elements on 4 ranks: blocks of 2; at step 0 rank r
# passes block r-1 to its right neighbour, so rank 0 sends elements 6..7.
grep -q "rank 0 -> rank 1: \[6..7\]" <<<"$out" || fail "step 0 of the ring is not rank 0 sending [6..7] to rank 1"
grep -q "^6 steps, 24 messages" <<<"$out" || fail "ring on 4 ranks is not 6 steps of 4 messages"
# After the last step every rank holds the sums: 0+100+200+300 + 4i.
grep -q "rank 3: \[600 604 608 612 616 620 624 628\]" <<<"$out" || fail "wrong final buffer"

out=$("$tool" --collective allreduce --algo recursive_doubling --ranks 4 --count 4 --diagram) || fail "--diagram failed"
echo "$out"
[ "$(grep -c '^ *[0-9]* |' <<<"$out")" -eq 2 ] || fail "recursive doubling on 4 ranks is not 2 steps"
grep -q "\[0..3\]>1" <<<"$out" || fail "rank 0 does not send its whole buffer to rank 1 first"

"$tool" --collective allreduce --algo ring --ranks 3 --count 6 --chrome "$tmp/c.json" >/dev/null || fail "--chrome failed"
"$env_check" --check "$tmp/c.json" || fail "--chrome wrote an invalid trace"

"$env_check" || fail "RINGTREE_TRACE on threads"

# Help that teaches, errors that name the tool and list what is valid.
model=$(dirname "$tool")/ringtree-model
for t in "$tool" "$model"; do
  out=$("$t" --help) || fail "$(basename "$t") --help exited $?"
  for want in "usage:" "allreduce" "rabenseifner" "recursive_doubling" "default" "Example"; do
    grep -q -- "$want" <<<"$out" || fail "$(basename "$t") --help does not say '$want'"
  done
done
out=$("$tool" --algo ringg 2>&1) && fail "an unknown --algo was accepted"
grep -q "^ringtree-trace: --algo: unknown algorithm 'ringg' (one of: ring, tree" <<<"$out" || fail "unknown --algo: unclear error: $out"
out=$("$tool" --collective allreduce --algo scatter_allgather 2>&1) && fail "an algorithm of another collective was accepted"
grep -q "ringtree-trace: .*available: ring, tree, recursive_doubling" <<<"$out" || fail "another collective's algorithm: unclear error: $out"
out=$("$model" --collective allreducee 2>&1) && fail "ringtree-model took an unknown collective"
grep -q "^ringtree-model: --collective: unknown collective 'allreducee' (one of: allreduce," <<<"$out" || fail "ringtree-model: unclear error: $out"
! grep -q "ringtree-perf" <<<"$out" || fail "ringtree-model's error names ringtree-perf"

# The page: one self-contained file.
"$tool" --collective broadcast --algo binomial --ranks 5 --count 4 --root 2 --html "$tmp/b.html" >/dev/null || fail "--html failed"
grep -q '<script id="stories" type="application/json">' "$tmp/b.html" || fail "--html wrote no story"
! grep -Eq 'src=|href=|<link' "$tmp/b.html" || fail "the page fetches something"
"$env_check" --html || fail "RINGTREE_TRACE=FILE.html on threads"

if [ -n "$hello" ]; then
  RINGTREE_TRACE="$tmp/mpi.html" mpirun --oversubscribe -np 2 "$hello" >/dev/null || fail "hello_allreduce with RINGTREE_TRACE=.html failed"
  for r in 0 1; do
    grep -q '"collective": "every call"' "$tmp/mpi.rank$r.html" || fail "RINGTREE_TRACE=.html under MPI: no page for rank $r"
  done
  RINGTREE_TRACE="$tmp/mpi.json" mpirun --oversubscribe -np 2 "$hello" >/dev/null || fail "hello_allreduce with RINGTREE_TRACE failed"
  "$env_check" --check "$tmp/mpi.rank0.json" "$tmp/mpi.rank1.json" || fail "RINGTREE_TRACE under MPI: no valid per-rank files"
fi
echo "trace tool and RINGTREE_TRACE: ok"
