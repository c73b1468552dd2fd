#!/usr/bin/env bash
# libringtree-mpi as its users meet it (mpi_layer/layer_check.cpp compares
# every call with MPI's own; this script checks what the log says about the
# path each call took, and the rest):
#   1. layer_check at 2, 3 and 4 ranks: no wrong byte, the calls ringtree
#      serves ran on ringtree, the others on MPI for the reason expected
#   2. an error under MPI_ERRORS_ARE_FATAL ends the job with ringtree's message
#   3. RINGTREE_MPI=0 and programs in MPI_THREAD_MULTIPLE: every call is
#      MPI's, still right; RINGTREE_MPI=yes ends the job, naming it
#   4. an MPI program built without ringtree (examples/mpi_collectives.c)
#      prints the same with the layer preloaded as without it
#   5. the routes: ringtree-mpi-tune measures ringtree against MPI's own and
#      writes them; where a routes file says MPI, the layer calls MPI ("MPI
#      (measured faster)"); a program under the layer never measures
#      ringtree's algorithms in its own run
#   6. MPI's promises: a bad RINGTREE_MPI_CROSS_BYTES ends the job, naming
#      it; a rank without the layer ends the job with a message, not a hang;
#      with LARGE=large, a 2 GiB MPI_Allgather of a derived datatype
#   7. across emulated hosts (mpi/hosts.sh, 2x2): below
#      RINGTREE_MPI_CROSS_BYTES MPI's, above it ringtree's; skipped where
#      hosts.sh cannot make namespaces
# usage: mpi_layer.sh LAYER_CHECK MPI_COLLECTIVES LIBRINGTREE_MPI.so HOSTS_SH RINGTREE_MPI_TUNE [large]
set -u
check=$1 plain=$2 lib=$3 hosts=$4 tune=$5 large=${6:-}
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export RINGTREE_CACHE_DIR=$tmp/cache  # (its own: routes and choices written here are this script's)
mkdir -p "$RINGTREE_CACHE_DIR"
run() { local np=$1; shift; timeout 240 mpirun --oversubscribe -np "$np" "$@"; }
# mpirun forwards the ranks' stderr in chunks that can end mid-line, so lines
# of two ranks interleave on its own stderr: the log is read from one file per
# rank (--output-filename), mpirun's stderr kept apart for messages.
ranks_log() { cat "$tmp"/ranks/*/rank.*/stderr >"$tmp/log" 2>/dev/null; }
logged() { local np=$1; shift; rm -rf "$tmp/ranks"
           run "$np" --output-filename "$tmp/ranks" "$@" 2>"$tmp/mpirun.err"; local rc=$?; ranks_log; return $rc; }
has() { grep -qF -- "$2" "$1" || fail "no line with '$2' in the log of $3 (first lines: $(head -5 "$1"))"; }

for np in 2 3 4; do
  RINGTREE_MPI_LOG=1 logged $np "$check" >"$tmp/out" || fail "layer_check np=$np: $(cat "$tmp/out" "$tmp/mpirun.err"; grep -v '^ringtree-mpi:' "$tmp/log" | head -30)"
  cat "$tmp/out"
  grep -q "cases, 0 wrong" "$tmp/out" || fail "layer_check np=$np did not report 0 wrong: $(grep WRONG "$tmp/log" | head -5)"
  for line in "of $np: MPI_Allreduce(40000 x MPI_FLOAT, MPI_SUM): ringtree" \
              "of $np: MPI_Allreduce(1000 x MPI_UNSIGNED_LONG, MPI_PROD): ringtree" \
              "of $np: MPI_Iallreduce(40000 x MPI_DOUBLE, MPI_SUM): ringtree" \
              "of $np: MPI_Iallreduce(40000 x MPI_DOUBLE, MPI_MAX): MPI (MIN and MAX of floating point: MPI's NaN and signed-zero bytes)" \
              "of $np: MPI_Allreduce(40000 x MPI_INT, MPI_MAX): ringtree" \
              "of $np: MPI_Allreduce(10 x MPI_INT, MPI_SUM): MPI (the send buffer is the receive buffer, not MPI_IN_PLACE)" \
              "of $np: MPI_Allreduce(10 x MPI_DATATYPE_NULL, MPI_SUM): MPI (MPI_DATATYPE_NULL)" \
              "of $np: MPI_Allreduce(10 x MPI_INT, MPI_OP_NULL): MPI (MPI_OP_NULL)" \
              "MPI_Allreduce(10 x MPI_INT, MPI_SUM): MPI (MPI_COMM_NULL)" \
              "of $np: MPI_Reduce(1000 x MPI_SHORT, MPI_MIN, root $((1000 % np))): ringtree" \
              "of $np: MPI_Reduce_scatter_block(1000 x MPI_UINT8_T, MPI_SUM): ringtree" \
              "of $np: MPI_Bcast(70000 x a derived datatype, root $(((70000 + 1) % np))): ringtree" \
              "of $np: MPI_Bcast(70000 x MPI_DOUBLE_INT, root $(((70000 + 1) % np))): ringtree" \
              "of $np: MPI_Allgather(1000 x MPI_INT from each rank): ringtree" \
              "of $np: MPI_Alltoall(1000 x MPI_DOUBLE to and from each rank): ringtree" \
              "of $np: MPI_Barrier(): ringtree" \
              "of $np: MPI_Allreduce(777 x MPI_INT, a user op): MPI (an op ringtree does not have)" \
              "of $np: MPI_Iallreduce(777 x MPI_INT, a user op): MPI (an op ringtree does not have)" \
              "of $np: MPI_Allreduce(100 x MPI_2INT, MPI_MAXLOC): MPI (a datatype ringtree does not reduce)" \
              "of $np: MPI_Allreduce(100 x MPI_INT, MPI_LAND): MPI (an op ringtree does not have)" \
              "of $np: MPI_Allreduce(50 x MPI_LONG_DOUBLE, MPI_SUM): MPI (a datatype ringtree does not reduce)" \
              "of 1: MPI_Allreduce(1 x MPI_INT, MPI_SUM): MPI (one rank)" \
              "MPI_Allreduce(33 x MPI_INT, MPI_SUM): MPI (an intercommunicator)"; do
    has "$tmp/log" "$line" "layer_check np=$np"
  done
  bad=$(grep -v '^ringtree-mpi: rank -\?[0-9]* of [0-9]*: MPI_[A-Za-z_]*(.*): \(ringtree\|MPI (.*)\)$' "$tmp/log" | head -3)
  [ -z "$bad" ] || fail "layer_check np=$np: log lines not of the form 'ringtree-mpi: rank R of N: CALL(ARGS): PATH': $bad"
  # no other reason sent a call to MPI
  others=$(grep -o '): MPI (.*)$' "$tmp/log" | sort -u | grep -v -e 'an op ringtree does not have' -e 'a datatype ringtree does not reduce' \
           -e 'one rank' -e 'an intercommunicator' -e 'MIN and MAX of floating point' -e 'MPI_DATATYPE_NULL' -e 'MPI_OP_NULL' \
           -e 'the send buffer is the receive buffer' -e 'nothing to move' -e 'a root out of range' -e 'MPI_COMM_NULL')
  [ -z "$others" ] || fail "layer_check np=$np: calls went to MPI for other reasons: $others"
done

out=$(RINGTREE_MPI_LOG=0 run 2 "$check" --fatal 2>&1); rc=$?
[ $rc -ne 0 ] || fail "an error under MPI_ERRORS_ARE_FATAL exited 0: $out"
grep -q "ringtree (libringtree-mpi) in MPI_Allreduce: .*count" <<<"$out" || fail "the fatal error does not print ringtree's message: $out"
echo "MPI_ERRORS_ARE_FATAL: exit $rc with ringtree's message"

out=$(RINGTREE_MPI=yes run 2 "$check" 2>&1); rc=$?
[ $rc -ne 0 ] || fail "RINGTREE_MPI=yes exited 0"
grep -q "ringtree-mpi: RINGTREE_MPI=yes: expected 0 or 1" <<<"$out" || fail "no message for RINGTREE_MPI=yes: $out"

RINGTREE_MPI_LOG=1 logged 2 "$check" --multiple >"$tmp/out" || fail "MPI_THREAD_MULTIPLE: $(cat "$tmp/out"; grep WRONG "$tmp/log" | head -5)"
grep -q "cases, 0 wrong" "$tmp/out" || fail "MPI_THREAD_MULTIPLE: not all right: $(grep WRONG "$tmp/log" | head -5)"
! grep -q '): ringtree$' "$tmp/log" || fail "a program in MPI_THREAD_MULTIPLE had calls served by ringtree"
has "$tmp/log" "MPI_Allreduce(1048576 x MPI_FLOAT, MPI_SUM): MPI (MPI_THREAD_MULTIPLE)" "--multiple"
echo "MPI_THREAD_MULTIPLE: every call on MPI, all right; a bad RINGTREE_MPI ends the job, naming it"

RINGTREE_MPI=0 RINGTREE_MPI_LOG=1 logged 2 "$check" >"$tmp/out" || fail "RINGTREE_MPI=0: $(cat "$tmp/out"; grep WRONG "$tmp/log" | head -5)"
grep -q "cases, 0 wrong" "$tmp/out" || fail "RINGTREE_MPI=0: not all right: $(grep WRONG "$tmp/log" | head -5)"
! grep -q '): ringtree$' "$tmp/log" || fail "RINGTREE_MPI=0 still ran calls on ringtree"
has "$tmp/log" "MPI_Allreduce(40000 x MPI_FLOAT, MPI_SUM): MPI (RINGTREE_MPI=0)" "RINGTREE_MPI=0"
echo "RINGTREE_MPI=0: every call on MPI, all right"

run 4 "$plain" >"$tmp/plain" 2>&1 || fail "mpi_collectives without the layer: $(cat "$tmp/plain")"
RINGTREE_MPI_LOG=1 logged 4 -x LD_PRELOAD="$lib" "$plain" >"$tmp/layer" || fail "mpi_collectives with the layer: $(cat "$tmp/layer" "$tmp/mpirun.err" "$tmp/log")"
[ "$(grep -c . "$tmp/plain")" -ge 24 ] || fail "mpi_collectives printed too little: $(cat "$tmp/plain")"
diff "$tmp/plain" "$tmp/layer" || fail "mpi_collectives prints something else through the layer"
has "$tmp/log" "of 4: MPI_Allreduce(1048576 x MPI_DOUBLE, MPI_SUM): ringtree" "mpi_collectives"
has "$tmp/log" "of 2: MPI_Iallreduce(1048576 x MPI_DOUBLE, MPI_MIN): MPI (MIN and MAX of floating point" "mpi_collectives"
echo "mpi_collectives: the same $(wc -l <"$tmp/plain") lines with and without the layer"

# The routes. ringtree-mpi-tune writes them (and ringtree's own choices);
# the programs before it, under the layer, measured nothing in their runs.
ls "$RINGTREE_CACHE_DIR"/tuned-* >/dev/null 2>&1 && fail "a program under the layer measured ringtree's algorithms in its own run: $(ls "$RINGTREE_CACHE_DIR")"
routes=$RINGTREE_CACHE_DIR/mpi-layer-1host-2ranks.txt
run 2 "$tune" --max-bytes 65536 --rounds 3 >"$tmp/tune" 2>&1 || fail "ringtree-mpi-tune: $(tail -5 "$tmp/tune")"
[ -f "$routes" ] || fail "ringtree-mpi-tune wrote no $routes: $(tail -3 "$tmp/tune"; ls "$RINGTREE_CACHE_DIR")"
for call in MPI_Allreduce MPI_Iallreduce MPI_Reduce MPI_Bcast MPI_Allgather MPI_Alltoall MPI_Reduce_scatter_block; do
  grep -Eq "^$call 1024 = (ringtree|mpi)$" "$routes" || fail "ringtree-mpi-tune: no route for $call at 1024 bytes in $routes: $(cat "$routes")"
  grep -Eq "^$call +1024 +[0-9.]+ +[0-9.]+ +(MPI|ringtree)$" "$tmp/tune" || fail "ringtree-mpi-tune printed no times for $call at 1024 bytes: $(cat "$tmp/tune")"
done
ls "$RINGTREE_CACHE_DIR"/tuned-cluster-2ranks.txt >/dev/null || fail "ringtree-mpi-tune left ringtree's own choices unmeasured: $(ls "$RINGTREE_CACHE_DIR")"
# Routes given by hand (this machine's cpu and version lines): those calls go to MPI.
{ grep -E '^(cpu|version) =' "$routes"; echo "MPI_Allreduce 4096 = mpi"; echo "MPI_Alltoall 16384 = mpi"; } >"$tmp/routes"
cp "$tmp/routes" "$routes"
RINGTREE_MPI_LOG=1 logged 2 "$check" >"$tmp/out" || fail "layer_check with routes: $(cat "$tmp/out")"
grep -q "cases, 0 wrong" "$tmp/out" || fail "layer_check with routes: not all right"
has "$tmp/log" "of 2: MPI_Allreduce(1000 x MPI_INT, MPI_SUM): MPI (measured faster)" "layer_check with routes"
has "$tmp/log" "of 2: MPI_Alltoall(1000 x MPI_DOUBLE to and from each rank): MPI (measured faster)" "layer_check with routes"
has "$tmp/log" "of 2: MPI_Allreduce(40000 x MPI_FLOAT, MPI_SUM): ringtree" "layer_check with routes"
# (without the log too: a call routed the same way as the one before goes
# by the layer's memo, a path of its own that must still complete the
# layer's pending requests first)
run 2 "$check" >"$tmp/out" 2>&1 || fail "layer_check with routes, no log: $(cat "$tmp/out")"
grep -q "cases, 0 wrong" "$tmp/out" || fail "layer_check with routes, no log: not all right: $(cat "$tmp/out")"
RINGTREE_MPI_ROUTES=0 RINGTREE_MPI_LOG=1 logged 2 "$check" >"$tmp/out" || fail "RINGTREE_MPI_ROUTES=0: $(cat "$tmp/out")"
has "$tmp/log" "of 2: MPI_Allreduce(1000 x MPI_INT, MPI_SUM): ringtree" "RINGTREE_MPI_ROUTES=0"
echo "x MPI_Allreduce 4096 = fastest" >>"$routes"
out=$(run 2 "$check" 2>&1) && fail "a routes file that does not parse: exit 0"
grep -qF "$routes:" <<<"$out" || fail "a routes file that does not parse: no message naming it: $(tail -5 <<<"$out")"
rm -f "$routes"
echo "routes: ringtree-mpi-tune measured them; measured ones go to MPI, RINGTREE_MPI_ROUTES=0 ignores them, a bad file is named"

for v in 99999999999999999999999 -1 12x ""; do
  [ -z "$v" ] && continue
  out=$(RINGTREE_MPI_CROSS_BYTES=$v run 2 "$check" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "RINGTREE_MPI_CROSS_BYTES=$v exited 0"
  grep -qF "ringtree-mpi: RINGTREE_MPI_CROSS_BYTES=$v: expected a number of bytes" <<<"$out" || fail "no message for RINGTREE_MPI_CROSS_BYTES=$v: $(tail -5 <<<"$out")"
done
echo "a bad RINGTREE_MPI_CROSS_BYTES ends the job, naming it"

# One rank without the layer (RINGTREE_MPI=0 there): the others' first call
# on the communicator cannot meet it; they end the job after RINGTREE_TIMEOUT
# with a message saying so, where plain MPI would hang.
start=$SECONDS
out=$(RINGTREE_TIMEOUT=3 run 1 env RINGTREE_MPI=0 "$check" : -np 1 "$check" 2>&1); rc=$?
[ $rc -ne 0 ] || fail "a rank without the layer: exit 0"
[ $rc -ne 124 ] || fail "a rank without the layer: the job hung (killed after 240 s)"
grep -q "rank 1 of 2 has waited [0-9]* s in MPI_Allreduce, the first call the layer serves on this communicator, for every rank to join it; a rank without the layer (RINGTREE_MPI=0 there, or not preloaded) never does" <<<"$out" ||
  fail "a rank without the layer: no message saying so: $(tail -8 <<<"$out")"
echo "a rank without the layer: the job ends in $((SECONDS - start)) s (RINGTREE_TIMEOUT=3), saying why"

if [ "$large" = large ]; then
  out=$(run 2 "$check" --large 2>&1) || fail "a 2 GiB MPI_Allgather of a derived datatype: $(tail -8 <<<"$out")"
  grep -q "cases, 0 wrong" <<<"$out" || fail "a 2 GiB MPI_Allgather of a derived datatype: $out"
  echo "a 2 GiB MPI_Allgather of a derived datatype (2^31 + 14 elements): served, right"
fi

rm -rf "$tmp/ranks"
RINGTREE_MPI_LOG=1 HOSTS_MPIRUN_ARGS="--output-filename $tmp/ranks" bash "$hosts" -l 2x2 "$check" --hosts >"$tmp/out" 2>"$tmp/mpirun.err"; rc=$?
ranks_log
if [ $rc -eq 77 ]; then
  echo "across hosts: skipped ($(tail -1 "$tmp/out" "$tmp/mpirun.err" | tr '\n' ' '))"
else
  [ $rc -eq 0 ] || fail "across hosts: exit $rc: $(cat "$tmp/out"; tail -20 "$tmp/mpirun.err")"
  grep -q "cases, 0 wrong" "$tmp/out" || fail "across hosts: not all right"
  has "$tmp/log" "MPI_Allreduce(1000 x MPI_FLOAT, MPI_SUM): MPI (across hosts below RINGTREE_MPI_CROSS_BYTES)" "across hosts"
  has "$tmp/log" "MPI_Allreduce(1048576 x MPI_FLOAT, MPI_SUM): ringtree" "across hosts"
  has "$tmp/log" "MPI_Bcast(4194304 x MPI_BYTE, root 0): ringtree" "across hosts"
  echo "across hosts (2x2): small calls on MPI, large ones on ringtree, all right"
fi
echo "libringtree-mpi: ok"
