#!/usr/bin/env bash
# Run an MPI program across two "hosts", so that ringtree's multi-machine path
# (ranks on different nodes, TCP between them, no shared memory across them)
# is exercised on one machine.
#
#   tests/mpi/two_hosts.sh [-p N] PROGRAM [ARGS...]
#
# The hosts are two Linux network namespaces joined by a veth pair
# (10.77.0.1 <-> 10.77.0.2), each with its own hostname (a UTS namespace).
# mpirun runs in the first; Open MPI's rsh launcher starts its daemon (orted)
# in the second through a fake "ssh" (the agent written below), which maps the
# address to the namespace and runs the command there. Open MPI is kept on TCP
# over the veth: btl tcp,self and pml ob1 (no shared memory, no UCX).
#
# -p N (or TWO_HOSTS_PER_HOST=N): N ranks on each host, 2*N in all (default 1).
# Exits with PROGRAM's status; 77 (meson's "skip") where namespaces cannot be
# made (not root, no CAP_SYS_ADMIN, no ip or unshare); 1 when the two hosts
# are not really two (checked with hostname before PROGRAM runs).
# TWO_HOSTS_DEBUG=1 logs every agent call (its argv) to stderr.
set -u

per_host=${TWO_HOSTS_PER_HOST:-1}
if [ "${1:-}" = -p ]; then per_host=${2:-}; shift 2 || true; fi
case $per_host in ''|*[!0-9]*|0) echo "two_hosts.sh: -p wants a whole number > 0, not '$per_host'" >&2; exit 2;; esac
[ $# -ge 1 ] || { echo "usage: $0 [-p RANKS_PER_HOST] PROGRAM [ARGS...]" >&2; exit 2; }
prog=$1; shift
# The file system is shared by both "hosts", but the path is handed to orted
# on host2 and started from mpirun's directory there: make it absolute.
case $prog in */*) prog=$(cd "$(dirname "$prog")" && pwd)/$(basename "$prog");; *) found=$(command -v "$prog") || { echo "two_hosts.sh: no program '$prog'" >&2; exit 2; }; prog=$found;; esac
[ -x "$prog" ] || { echo "two_hosts.sh: '$prog' is not executable" >&2; exit 2; }

skip() { echo "SKIP: two_hosts.sh: $* (needs root, CAP_SYS_ADMIN and CAP_NET_ADMIN, iproute2's ip, util-linux's unshare)"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root"
command -v ip >/dev/null || skip "no 'ip' binary (iproute2)"
command -v unshare >/dev/null || skip "no 'unshare' binary (util-linux)"
command -v mpirun >/dev/null || skip "no mpirun"

# Names are unique per run (the PID); interface names must fit in 15 bytes.
h1=rt_h1_$$ h2=rt_h2_$$ v1=rtv1_$$ v2=rtv2_$$
ip1=10.77.0.1 ip2=10.77.0.2
# Everything of this run on disk (the agent, the hostfile, Open MPI's session
# dirs) is under $tmp, named with the PID so that a later run can tell it stale.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/two_hosts.$$.XXXXXX")

# Kill what still runs in a namespace (a stray orted or rank after a failure
# or ctrl-c keeps the namespace alive), then delete it; the veth ends live in
# the namespaces and go with them.
# shellcheck disable=SC2086  # $pids is a list of PIDs, split on purpose
drop_ns() {
  local pids
  pids=$(ip netns pids "$1" 2>/dev/null)
  if [ -n "$pids" ]; then
    kill -TERM $pids 2>/dev/null   # let mpirun/orted tidy their session dirs
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [ -z "$(ip netns pids "$1" 2>/dev/null)" ] && break
      sleep 0.3
    done
    pids=$(ip netns pids "$1" 2>/dev/null)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  fi
  ip netns del "$1" 2>/dev/null
}
cleanup() {
  drop_ns "$h1"; drop_ns "$h2"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP

# Namespaces and dirs left by an earlier run of this script whose shell is
# gone (kill -9): its mpirun, daemons and ranks may still run there. (A PID
# reused since only delays the sweep; a concurrent run is left alone.)
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^rt_h[12]_[0-9]+$'); do
  kill -0 "${ns##*_}" 2>/dev/null || { echo "two_hosts.sh: removing stale namespace $ns"; drop_ns "$ns"; }
done
for d in "${TMPDIR:-/tmp}"/two_hosts.[0-9]*.*; do
  [ -d "$d" ] || continue
  pid=${d##*/two_hosts.}; pid=${pid%%.*}
  kill -0 "$pid" 2>/dev/null || rm -rf "$d"
done

ip netns add "$h1" 2>"$tmp/err" || skip "cannot create a network namespace: $(cat "$tmp/err")"
ip netns add "$h2" 2>"$tmp/err" || skip "cannot create a network namespace: $(cat "$tmp/err")"
setup() {
  ip link add "$v1" netns "$h1" type veth peer name "$v2" netns "$h2" &&
  ip -n "$h1" addr add $ip1/24 dev "$v1" && ip -n "$h2" addr add $ip2/24 dev "$v2" &&
  ip -n "$h1" link set lo up && ip -n "$h2" link set lo up &&
  ip -n "$h1" link set "$v1" up && ip -n "$h2" link set "$v2" up
}
setup 2>"$tmp/err" || skip "cannot set up the veth pair: $(cat "$tmp/err")"

# The fake ssh. Open MPI calls it as "AGENT HOST WORD...", where the words
# (PATH=...; export PATH; ... orted -mca ... "quoted;uri") are meant for the
# remote shell to parse, as ssh joins them with spaces; so join them and hand
# them to sh -c, in the host's namespaces. The agent inherits mpirun's whole
# environment (RINGTREE_*, OMPI_ALLOW_RUN_AS_ROOT*, ...), which real ssh
# would not, so nothing has to be forwarded by hand.
cat >"$tmp/agent" <<EOF
#!/usr/bin/env bash
[ -n "\${TWO_HOSTS_DEBUG:-}" ] && printf 'two_hosts agent argv:%s\n' "\$(printf ' [%s]' "\$@")" >&2
while [ \$# -gt 0 ]; do case \$1 in -*) shift;; *) break;; esac; done   # ssh-style options, if any
host=\$1; shift
case \$host in
  $ip1|host1) ns=$h1 name=host1;;
  $ip2|host2) ns=$h2 name=host2;;
  *) echo "two_hosts agent: unknown host '\$host'" >&2; exit 255;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$1" && exec sh -c "\$2"' sh "\$name" "\$*"
EOF
chmod +x "$tmp/agent"
printf '%s slots=%s\n%s slots=%s\n' $ip1 "$per_host" $ip2 "$per_host" >"$tmp/hosts"

np=$((2 * per_host))
# mpirun itself is on host1: same namespaces as the agent gives to host1.
# --map-by node puts ranks round-robin over the hosts (0 on host1, 1 on host2,
# ...), so neighbours in a ring are on different hosts.
# run_mpi LIMIT COMMAND...: LIMIT seconds at most, 0 for no limit.
run_mpi() {
  local limit=$1; shift
  ip netns exec "$h1" unshare --uts sh -c 'hostname host1 && exec "$@"' sh \
    timeout "$limit" mpirun --hostfile "$tmp/hosts" -np "$np" --map-by node --oversubscribe \
      --mca plm rsh --mca plm_rsh_agent "$tmp/agent" --mca orte_tmpdir_base "$tmp" \
      --mca pml ob1 --mca btl tcp,self \
      --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
      "$@"
}

# Prove there are two hosts: every rank prints its hostname and address.
# Bounded, so that a launch that cannot reach host2 fails instead of hanging.
echo "two_hosts.sh: $np ranks over $h1 ($ip1) and $h2 ($ip2), TCP only"
who=$(run_mpi 60 sh -c 'echo "$(hostname) $(ip -o -4 addr show | awk "/10\\.77\\./{print \$4}")"' 2>&1)
rc=$?
echo "$who" | sed 's/^/  rank on: /'
[ $rc -eq 0 ] || { echo "FAIL: two_hosts.sh: mpirun could not start ranks on both hosts (exit $rc)"; exit 1; }
[ "$(grep -c '^host1 10\.77\.0\.1/24$' <<<"$who")" -eq "$per_host" ] &&
[ "$(grep -c '^host2 10\.77\.0\.2/24$' <<<"$who")" -eq "$per_host" ] ||
  { echo "FAIL: two_hosts.sh: expected $per_host rank(s) on each of host1 and host2"; exit 1; }

# In the background and waited for, so that a signal to this script runs the
# trap at once (bash defers traps while a foreground child runs); the trap
# then stops mpirun and the daemons. stdin is not forwarded to the ranks.
run_mpi 0 "$prog" "$@" </dev/null &
wait $!
rc=$?
# The veth counters show that the ranks' traffic did cross between the hosts.
bytes=$(ip -n "$h1" -s -j link show "$v1" 2>/dev/null | grep -o '"bytes":[0-9]*' | head -2 | cut -d: -f2 | tr '\n' ' ')
echo "two_hosts.sh: $(basename "$prog") on $np ranks over two hosts exited $rc (veth $v1 rx/tx bytes: ${bytes:-?})"
exit $rc
