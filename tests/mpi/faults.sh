#!/usr/bin/env bash
# Faults in an MPI job (tests/mpi/fault.cpp): the job must end, with a
# non-zero status, within its time limit, and the output must say why.
# Open MPI's runtime ends the whole job when a rank dies, so for a dead rank
# the survivors get no chance to raise; mpirun names it. A stalled rank and
# a rank in another collective are ringtree's to report.
#   faults.sh FAULT_PROGRAM
set -u
prog=$1
fail() { echo "FAIL: $*"; exit 1; }
# expect MODE TIMEOUT LIMIT_SECONDS REGEX: run, check status, time and output.
expect() {
  local mode=$1 timeout=$2 limit=$3 want=$4 out rc t0 t1
  t0=$(date +%s.%N)
  out=$(RINGTREE_TIMEOUT=$timeout timeout 120 mpirun --oversubscribe -np 3 "$prog" "$mode" 2>&1); rc=$?
  t1=$(date +%s.%N)
  echo "--- $mode: exit status $rc after $(printf '%.1f' "$(echo "$t1 - $t0" | bc)") s"
  echo "$out" | grep -v '^\s*$' | head -20
  [ $rc -ne 0 ] || fail "$mode: the job exited 0"
  [ $rc -ne 124 ] || fail "$mode: the job hung (killed by timeout after 120 s)"
  [ "$(echo "$t1 - $t0 < $limit" | bc)" = 1 ] || fail "$mode: took more than $limit s"
  grep -Eq "$want" <<<"$out" || fail "$mode: the output does not say '$want'"
}
command -v bc >/dev/null || { echo "SKIP: no bc"; exit 77; }
# A dead rank: mpirun reports it at once (the 60 s timeout is not what ends it).
expect exit 60 30 "exited with non-zero status|Process name: \[\[[0-9]+,1\],1\]"
# A stalled rank: its neighbours time out after 1 s, name it and abort().
expect stall 1 30 "waited 1 s for rank 1"
# Another collective, checked mode: every rank names rank 1 at once.
expect mismatch-checked 60 30 "checked mode: ranks 1 differ from rank 0 in call"
# Another collective, unchecked: an error (sizes differ, or a timeout), not a hang.
expect mismatch 2 30 "ringtree: "
# After a timeout, without aborting: destroy the communicator, MPI_Finalize.
# The stalled rank's late messages must land in no freed buffer (they used
# to: "Read -1, expected 349524, errno = 14" in every run before the fix,
# and a segfault in 2 of 4); every rank exits 0.
out=$(RINGTREE_TIMEOUT=1 timeout 120 mpirun --oversubscribe -np 3 "$prog" stall-finalize 2>&1); rc=$?
echo "--- stall-finalize: exit status $rc"
echo "$out" | grep -v '^\s*$' | head -20
[ $rc -eq 0 ] || fail "stall-finalize: exit status $rc (a crash or MPI error after the timeout)"
[ "$(grep -c 'finalized after the error' <<<"$out")" = 3 ] || fail "stall-finalize: not every rank finalized"
grep -q "waited 1 s for rank 1" <<<"$out" || fail "stall-finalize: no rank named the stalled one"
! grep -q "WRONG RESULT" <<<"$out" || fail "stall-finalize: a rank returned a wrong result"
# Open MPI's own report of a single-copy transfer into unmapped memory
! grep -Eq "Read -1, expected|errno = 14|Segmentation fault" <<<"$out" || fail "stall-finalize: MPI touched freed memory"
echo "MPI faults: ok"
