#!/usr/bin/env bash
# A host's link goes down in the middle of hierarchical all-reduces (2 hosts
# x 2 ranks, tests/mpi/hosts.sh -d): every rank of the other host raises a
# timeout_error naming a rank of the downed host within RINGTREE_TIMEOUT
# (and a second), never a hang or a wrong result.
#   link_down.sh FAULT_PROGRAM     (tests/mpi/fault.cpp, mode link-down)
set -u
here=$(cd "$(dirname "$0")" && pwd)
prog=$1
timeout=${LINK_DOWN_TIMEOUT:-4}
fail() { echo "FAIL: link_down.sh: $*"; exit 1; }
command -v bc >/dev/null || { echo "SKIP: no bc"; exit 77; }
out=$(RINGTREE_TIMEOUT=$timeout HOSTS_LIMIT=$((timeout + 15)) bash "$here/hosts.sh" -l 2x2 -m node -d 2:3 "$prog" link-down 2>&1)
rc=$?
echo "$out" | grep -v '^\s*$' | grep -v '^\s*\(--\|\*\)\|^\[host[0-9]*:' | head -40
[ $rc -eq 77 ] && exit 77
! grep -q "WRONG RESULT" <<<"$out" || fail "a rank returned a wrong result"
# --map-by node: host 1 holds ranks 0 and 2, host 2 ranks 1 and 3
for r in 0 2; do
  line=$(grep "^LINK rank $r: " <<<"$out") || fail "rank $r (host 1) raised nothing"
  peer=$(sed -n 's/.*timeout_error naming rank \([0-9]*\):.*/\1/p' <<<"$line")
  secs=$(sed -n 's/.* after \([0-9.]*\) s,.*/\1/p' <<<"$line")
  [ -n "$peer" ] || fail "rank $r: not a timeout error: $line"
  [ $((peer % 2)) = 1 ] || fail "rank $r named rank $peer, which is not on host 2"
  [ "$(echo "$secs <= $timeout + 1" | bc)" = 1 ] || fail "rank $r raised after $secs s (RINGTREE_TIMEOUT=$timeout)"
  echo "ok: rank $r (host 1) raised after $secs s, naming rank $peer (host 2)"
done
echo "link down: ok"
