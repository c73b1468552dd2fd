#!/usr/bin/env bash
# ringtree-sim as a user runs it: the table, --data's check, the teaching
# page of a simulated run, and errors that name the flag.
#   sim_cli.sh RINGTREE_SIM RINGTREE_TRACE
set -u
sim=$1 trace=$2
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 64 hosts of 8 (512 ranks) at 1 MiB: a ring over one host's ranks costs
# exactly what the closed form says (sim/model 1.00); the hierarchical
# all-reduce runs; automatic says what it ran.
out=$("$sim" --hosts 64 --per-host 8 --net-gbps 100 --net-alpha-us 5 -a ring,hierarchical,automatic -b 1M -e 1M) || fail "ringtree-sim failed: $out"
echo "$out"
grep -Eq "^ +1048576 +262144 +float +sum +ring .* 1\.00 " <<<"$out" || fail "the ring is not the closed form's time"
grep -Eq " hierarchical " <<<"$out" || fail "no hierarchical row"
grep -Eq " automatic:[a-z_]+ " <<<"$out" || fail "automatic does not say what it ran"

# Four ranks of a host on its one link: the tool says contention is why.
out=$("$sim" --hosts 2 --per-host 4 --net-gbps 10 -a recursive_doubling -b 16M -e 16M) || fail "ringtree-sim failed: $out"
grep -Eq " recursive_doubling .* contention" <<<"$out" || fail "recursive doubling across 2x4 hosts: no contention named: $out"

# With data: every row checked on uneven hosts.
out=$("$sim" --layout 3+5+2 -o reduce_scatter -b 4K -e 64K -f 16 --data) || fail "--data on 3+5+2 failed: $out"
grep -q "every result checked: all correct" <<<"$out" || fail "--data did not check: $out"

# The teaching page of a simulated run, and ringtree-trace --simulate: the same steps as threads.
out=$("$sim" --hosts 4 --per-host 4 -a hierarchical --html "$tmp/h.html") || fail "--html failed: $out"
grep -q "^page: .*hierarchical, 16 ranks on 4 hosts" <<<"$out" || fail "--html: $out"
[ -s "$tmp/h.html" ] && grep -q "<html" "$tmp/h.html" || fail "--html wrote no page"
a=$("$trace" --collective allreduce --algo tree --ranks 7 --count 5)
b=$("$trace" --collective allreduce --algo tree --ranks 7 --count 5 --simulate)
[ "$a" = "$b" ] || fail "ringtree-trace --simulate tells another story than threads"

out=$("$sim" --help) || fail "--help exited $?"
for want in "usage:" "--hosts" "--data" "--html" "Example"; do grep -q -- "$want" <<<"$out" || fail "--help does not say '$want'"; done
out=$("$sim" -a ringg 2>&1) && fail "an unknown -a was accepted"
grep -q "^ringtree-sim: -a: unknown algorithm 'ringg'" <<<"$out" || fail "unknown -a: unclear error: $out"
out=$("$sim" --hosts 1 --per-host 4 -a hierarchical 2>&1) && fail "hierarchical on one host was accepted"
grep -q "^ringtree-sim: -a hierarchical: not one of allreduce's here" <<<"$out" || fail "hierarchical on one host: unclear error: $out"
out=$("$sim" --hosts 128 --per-host 8 --data -b 16M -e 16M 2>&1) && fail "--data of 16 GiB was accepted"
grep -q "^ringtree-sim: --data at -e 16777216 bytes on 1024 ranks holds 16384 MiB" <<<"$out" || fail "--data too large: unclear error: $out"
out=$("$sim" --net-gbps 0 2>&1) && fail "0 Gb/s was accepted"
grep -q "^ringtree-sim: a bandwidth of 0" <<<"$out" || fail "0 Gb/s: unclear error: $out"
# Bounds: what cannot fit is refused before anything starts, naming the limit.
out=$(timeout 20 "$sim" --hosts 4096 --per-host 1048576 2>&1) && fail "2^32 ranks were accepted"
grep -q "^ringtree-sim: 4294967296 ranks (4096 hosts) are more than ringtree-sim simulates: at most 1048576" <<<"$out" ||
  fail "2^32 ranks: unclear error: $out"
for x in 0 0.5; do
  out=$("$sim" --oversubscribe $x 2>&1) && fail "--oversubscribe $x was accepted"
  grep -q "^ringtree-sim: --oversubscribe $x: ranks per core, at least 1" <<<"$out" || fail "--oversubscribe $x: unclear error: $out"
done
out=$("$sim" --per-host 65 --html "$tmp/x.html" 2>&1) && fail "--html of 65 ranks was accepted"
grep -q "^ringtree-sim: --html draws at most 64 ranks" <<<"$out" || fail "--html of 65 ranks: unclear error: $out"
grep -q -- "--ranks" <<<"$out" && fail "--html of 65 ranks names a flag ringtree-sim does not have: $out"
# Oversubscribed: the closed form is scaled as the simulation is (a ring
# on one host: sim/model stays 1.00), and the model column doubles.
one=$("$sim" --per-host 8 -a ring -b 1M -e 1M) || fail "ringtree-sim failed: $one"
two=$("$sim" --per-host 8 -a ring -b 1M -e 1M --oversubscribe 2) || fail "ringtree-sim --oversubscribe 2 failed: $two"
grep -Eq "^ +1048576 .* ring .* 1\.00 +- " <<<"$two" || fail "--oversubscribe 2: the model is not scaled as the simulation: $two"
m1=$(awk '/^ +1048576 /{print $9}' <<<"$one") m2=$(awk '/^ +1048576 /{print $9}' <<<"$two")
awk -v a="$m1" -v b="$m2" 'BEGIN{exit !(b > 1.9 * a && b < 2.1 * a)}' || fail "--oversubscribe 2: model column $m2 us, not twice $m1 us"
echo "ringtree-sim command line: ok"
