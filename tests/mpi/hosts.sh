#!/usr/bin/env bash
# Run an MPI program across emulated hosts on this machine, so that
# ringtree's multi-host paths (ranks on different nodes, TCP between them,
# shared memory only within a host) run for real:
#
#   tests/mpi/hosts.sh [-l LAYOUT] [-r RATE] [-m node|slot] [-d HOST:SECONDS] PROGRAM [ARGS...]
#   tests/mpi/hosts.sh [-l LAYOUT] [-r RATE] [-d HOST:SECONDS] -e COMMAND
#
#   -l LAYOUT  ranks per host: "2x2" (hosts x ranks each) or "1,1,2" (one
#              number per host); default "2x1", two hosts of one rank
#   -r RATE    shape every host's link to RATE each way (tc tbf: "10gbit",
#              "1gbit", "500mbit"); default unshaped
#   -m MAP     node: ranks go round-robin over the hosts (rank 0 on host 1,
#              rank 1 on host 2, ...; default); slot: host 1's ranks first
#   -d H:S     link down: S seconds after PROGRAM starts, host H's link goes
#              down (ip link set ... down), for fault tests; S = @FILE: once
#              FILE exists (the program says when it is in the middle of work)
#   -e CMD     no MPI: run the shell command CMD once on every host, as a
#              launcher without mpirun does (torchrun --nnodes, srun), with
#              HOSTS_INDEX (0 for host 1, ...), HOSTS_COUNT, HOSTS_RANKS (the
#              ranks of this host) and HOSTS_ROOT (host 1's address) set;
#              exits with the first host's non-zero status, else 0
#
# Each host is a Linux network namespace with its own hostname (a UTS
# namespace) and one veth link to a bridge in a "switch" namespace, address
# 10.77.0.<host>. mpirun runs on host 1; Open MPI's rsh launcher starts its
# daemon on the others through a fake "ssh" (the agent below), which runs the
# command in that host's namespaces. Open MPI is kept on TCP over the veths
# (btl tcp,self, pml ob1): no shared memory between the hosts. The hosts'
# "NICs" are the kernel's network code on this machine's cores, so ranks
# are not bound to cores and yield when idle (--bind-to none, mpi_yield_
# when_idle): a rank spinning on a core starves the softirqs that carry its
# own packets (4 ms per message on 2 hosts of one rank otherwise). The file
# system and /dev/shm are this machine's, so ranks of one host can share
# memory as on a real host. Every host resolves the others' names (host1,
# host2, ...: a private /etc/hosts, through ip netns exec's /etc/netns/),
# as a cluster's DNS would. netem is not in this kernel, so latency is what
# TCP over veth gives: bench/hosts_bench.sh measures it (a ping-pong).
#
# Exits with PROGRAM's status; 77 (meson's "skip") where namespaces cannot be
# made (not root, no CAP_SYS_ADMIN, no ip or unshare); 1 when the hosts are
# not what was asked (checked with hostname before PROGRAM runs). Everything
# it made (namespaces, links, files) goes when it ends, also on failure or a
# signal; namespaces left by a run that was killed are swept the next time.
# Environment: RINGTREE_*, OMPI_* reach the ranks; HOSTS_DEBUG=1 logs every
# agent call; HOSTS_MPIRUN_ARGS: more mpirun flags; HOSTS_LIMIT: seconds
# PROGRAM may run (then it is killed: 124), default none.
set -u

layout="2x1" rate="" map=node down="" each_cmd=""
while [ $# -gt 0 ]; do
  case $1 in
    -l) layout=${2:-}; shift 2 || true;;
    -r) rate=${2:-}; shift 2 || true;;
    -m) map=${2:-}; shift 2 || true;;
    -d) down=${2:-}; shift 2 || true;;
    -e) each_cmd=${2:-}; shift 2 || true;;
    -p) layout="2x${2:-}"; shift 2 || true;;  # two_hosts.sh's flag: N ranks on each of two hosts
    --) shift; break;;
    -*) echo "hosts.sh: unknown flag '$1' (-l LAYOUT, -r RATE, -m node|slot, -d HOST:SECONDS)" >&2; exit 2;;
    *) break;;
  esac
done
usage="usage: $0 [-l LAYOUT] [-r RATE] [-m node|slot] [-d HOST:SECONDS] PROGRAM [ARGS...] | -e COMMAND"
[ $# -ge 1 ] || [ -n "$each_cmd" ] || { echo "$usage" >&2; exit 2; }
# The layout as one rank count per host.
case $layout in
  *x*) hosts=${layout%%x*} each=${layout#*x}
       case "$hosts$each" in ''|*[!0-9]*) echo "hosts.sh: -l '$layout': HOSTSxRANKS wants two whole numbers" >&2; exit 2;; esac
       per=(); for ((i = 0; i < hosts; i++)); do per+=("$each"); done;;
  *) IFS=, read -r -a per <<<"$layout";;
esac
hosts=${#per[@]}
for c in "${per[@]}"; do
  case $c in ''|*[!0-9]*|0) echo "hosts.sh: -l '$layout': every host needs a whole number of ranks > 0" >&2; exit 2;; esac
done
[ "$hosts" -ge 1 ] && [ "$hosts" -le 16 ] || { echo "hosts.sh: -l '$layout': 1 to 16 hosts" >&2; exit 2; }
case $map in node|slot) ;; *) echo "hosts.sh: -m '$map': node or slot" >&2; exit 2;; esac
if [ -n "$down" ]; then
  down_host=${down%%:*} down_after=${down#*:}
  case "$down_host" in ''|*[!0-9]*) echo "hosts.sh: -d '$down': HOST:SECONDS" >&2; exit 2;; esac
  [ "$down_host" -ge 1 ] && [ "$down_host" -le "$hosts" ] || { echo "hosts.sh: -d '$down': no host $down_host" >&2; exit 2; }
fi
if [ -z "$each_cmd" ]; then
  prog=$1; shift
  # The file system is shared by the hosts, but the path is handed to orted
  # elsewhere and started from mpirun's directory there: make it absolute.
  case $prog in */*) prog=$(cd "$(dirname "$prog")" && pwd)/$(basename "$prog");; *) found=$(command -v "$prog") || { echo "hosts.sh: no program '$prog'" >&2; exit 2; }; prog=$found;; esac
  [ -x "$prog" ] || { echo "hosts.sh: '$prog' is not executable" >&2; exit 2; }
fi

skip() { echo "SKIP: hosts.sh: $* (needs root, CAP_SYS_ADMIN and CAP_NET_ADMIN, iproute2's ip, util-linux's unshare)"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root"
command -v ip >/dev/null || skip "no 'ip' binary (iproute2)"
command -v unshare >/dev/null || skip "no 'unshare' binary (util-linux)"
[ -n "$each_cmd" ] || command -v mpirun >/dev/null || skip "no mpirun"
if [ -n "$rate" ]; then command -v tc >/dev/null || skip "no 'tc' binary (iproute2) for -r"; fi

# Names are unique per run (the PID); interface names must fit in 15 bytes.
sw=rt_sw_$$
ns() { echo "rt_h$1_$$"; }
hv() { echo "rtv$1_$$"; }   # host h's end of its link
sv() { echo "rts$1_$$"; }   # the switch's end
ip_of() { echo "10.77.0.$1"; }
# Everything of this run on disk (the agent, the hostfile, Open MPI's session
# dirs) is under $tmp, named with the PID so that a later run can tell it stale.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hosts.$$.XXXXXX")

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
  [ -n "${downer:-}" ] && kill "$downer" 2>/dev/null
  for ((h = 1; h <= hosts; h++)); do drop_ns "$(ns $h)"; rm -rf "/etc/netns/$(ns $h)"; done
  rmdir /etc/netns 2>/dev/null  # (only if no other run's files are there)
  drop_ns "$sw"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP

# Namespaces and dirs left by an earlier run whose shell is gone (kill -9):
# its mpirun, daemons and ranks may still run there. (A PID reused since
# only delays the sweep; a concurrent run is left alone.) two_hosts.sh's too.
for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^rt_(h[0-9]+|sw)_[0-9]+$'); do
  kill -0 "${n##*_}" 2>/dev/null || { echo "hosts.sh: removing stale namespace $n"; drop_ns "$n"; rm -rf "/etc/netns/$n"; }
done
for d in "${TMPDIR:-/tmp}"/hosts.[0-9]*.* "${TMPDIR:-/tmp}"/two_hosts.[0-9]*.*; do
  [ -d "$d" ] || continue
  pid=${d##*hosts.}; pid=${pid%%.*}
  kill -0 "$pid" 2>/dev/null || rm -rf "$d"
done

# tbf's bucket: 1 ms of the rate, at least 64 KiB (veth's segments): a
# larger one would let whole messages pass at memory speed between pauses.
burst_of() {
  local r=$1 n unit bits
  n=${r%%[a-zA-Z]*} unit=${r#"$n"}
  case $unit in gbit) bits=$((n * 1000000000));; mbit) bits=$((n * 1000000));; kbit) bits=$((n * 1000));;
    *) echo "hosts.sh: -r '$r': a whole number with gbit, mbit or kbit" >&2; return 1;; esac
  local b=$((bits / 8 / 1000))
  [ "$b" -lt 65536 ] && b=65536
  echo "$b"
}
if [ -n "$rate" ]; then burst=$(burst_of "$rate") || exit 2; fi

ip netns add "$sw" 2>"$tmp/err" || skip "cannot create a network namespace: $(cat "$tmp/err")"
setup() {
  ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up && ip -n "$sw" link set lo up || return 1
  local h
  for ((h = 1; h <= hosts; h++)); do
    ip netns add "$(ns $h)" &&
    ip link add "$(hv $h)" netns "$(ns $h)" type veth peer name "$(sv $h)" netns "$sw" &&
    ip -n "$sw" link set "$(sv $h)" master br0 && ip -n "$sw" link set "$(sv $h)" up &&
    ip -n "$(ns $h)" addr add "$(ip_of $h)/24" dev "$(hv $h)" &&
    ip -n "$(ns $h)" link set lo up && ip -n "$(ns $h)" link set "$(hv $h)" up || return 1
    mkdir -p "/etc/netns/$(ns $h)" && {
      printf '127.0.0.1 localhost\n'
      for ((g = 1; g <= hosts; g++)); do printf '%s host%s\n' "$(ip_of $g)" "$g"; done
    } >"/etc/netns/$(ns $h)/hosts" || return 1
    if [ -n "$rate" ]; then  # both directions: out of the host, and out of the switch toward it
      tc -n "$(ns $h)" qdisc add dev "$(hv $h)" root tbf rate "$rate" burst "$burst" latency 50ms &&
      tc -n "$sw" qdisc add dev "$(sv $h)" root tbf rate "$rate" burst "$burst" latency 50ms || return 1
    fi
  done
}
setup 2>"$tmp/err" || skip "cannot set up the hosts' links: $(cat "$tmp/err")"

# The fake ssh. Open MPI calls it as "AGENT HOST WORD...", where the words
# (PATH=...; export PATH; ... orted -mca ... "quoted;uri") are meant for the
# remote shell to parse, as ssh joins them with spaces; so join them and hand
# them to sh -c, in the host's namespaces. The agent inherits mpirun's whole
# environment (RINGTREE_*, OMPI_ALLOW_RUN_AS_ROOT*, ...), which real ssh
# would not, so nothing has to be forwarded by hand.
{
  echo '#!/usr/bin/env bash'
  echo '[ -n "${HOSTS_DEBUG:-}" ] && printf "hosts agent argv:%s\n" "$(printf " [%s]" "$@")" >&2'
  echo 'while [ $# -gt 0 ]; do case $1 in -*) shift;; *) break;; esac; done   # ssh-style options, if any'
  echo 'host=$1; shift'
  echo 'case $host in'
  for ((h = 1; h <= hosts; h++)); do echo "  $(ip_of $h)|host$h) ns=$(ns $h) name=host$h;;"; done
  echo '  *) echo "hosts agent: unknown host '"'"'$host'"'"'" >&2; exit 255;;'
  echo 'esac'
  echo 'exec ip netns exec "$ns" unshare --uts sh -c '"'"'hostname "$1" && exec sh -c "$2"'"'"' sh "$name" "$*"'
} >"$tmp/agent"
chmod +x "$tmp/agent"
np=0
for ((h = 1; h <= hosts; h++)); do
  printf '%s slots=%s\n' "$(ip_of $h)" "${per[$((h - 1))]}" >>"$tmp/hosts"
  np=$((np + per[h - 1]))
done

# mpirun itself is on host 1: the same namespaces as the agent gives to it.
# run_mpi LIMIT COMMAND...: LIMIT seconds at most, 0 for no limit.
run_mpi() {
  local limit=$1; shift
  # shellcheck disable=SC2086  # HOSTS_MPIRUN_ARGS: words on purpose
  ip netns exec "$(ns 1)" unshare --uts sh -c 'hostname host1 && exec "$@"' sh \
    timeout "$limit" mpirun --hostfile "$tmp/hosts" -np "$np" --map-by "$map" --oversubscribe \
      --mca plm rsh --mca plm_rsh_agent "$tmp/agent" --mca orte_tmpdir_base "$tmp" \
      --mca pml ob1 --mca btl tcp,self --bind-to none --mca mpi_yield_when_idle 1 \
      --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
      ${HOSTS_MPIRUN_ARGS:-} "$@"
}

# The link-down fault, in the background.
start_down() {
  if [ -n "$down" ]; then
    ( case $down_after in
        @*) until [ -e "${down_after#@}" ]; do sleep 0.1; done;;  # when the command says so
        *) sleep "$down_after";;
      esac
      ip -n "$(ns "$down_host")" link set "$(hv "$down_host")" down &&
      echo "hosts.sh: host$down_host's link is down (after ${down_after#@})" ) &
    downer=$!
  fi
}

# -e: the command on every host at once, each in its host's namespaces
# (in the background and waited for, as mpirun below).
if [ -n "$each_cmd" ]; then
  echo "hosts.sh: '$each_cmd' on $hosts hosts (${per[*]} ranks each)${rate:+, links shaped to $rate each way}"
  start_down
  pids=()
  for ((h = 1; h <= hosts; h++)); do
    HOSTS_INDEX=$((h - 1)) HOSTS_COUNT=$hosts HOSTS_RANKS=${per[$((h - 1))]} HOSTS_ROOT=$(ip_of 1) \
      ${HOSTS_LIMIT:+timeout "$HOSTS_LIMIT"} ip netns exec "$(ns $h)" unshare --uts sh -c 'hostname "$1" && exec sh -c "$2"' sh "host$h" "$each_cmd" </dev/null &
    pids+=($!)
  done
  rc=0
  for p in "${pids[@]}"; do wait "$p"; r=$?; [ $rc -eq 0 ] && rc=$r; done
  echo "hosts.sh: '$each_cmd' on $hosts hosts exited $rc"
  exit $rc
fi

# Prove the hosts are what was asked: every rank prints its hostname and
# address. Bounded, so that a launch that cannot reach a host fails
# instead of hanging.
echo "hosts.sh: $np ranks on $hosts hosts (${per[*]} each; --map-by $map), TCP only${rate:+, links shaped to $rate each way}"
who=$(run_mpi 60 sh -c 'echo "$(hostname) $(ip -o -4 addr show | awk "/10\\.77\\./{print \$4}")"' 2>&1)
rc=$?
echo "$who" | sort | uniq -c | sed 's/^/  ranks on: /'
[ $rc -eq 0 ] || { echo "FAIL: hosts.sh: mpirun could not start ranks on every host (exit $rc)"; exit 1; }
for ((h = 1; h <= hosts; h++)); do
  [ "$(grep -c "^host$h $(ip_of $h | sed 's/\./\\./g')/24$" <<<"$who")" -eq "${per[$((h - 1))]}" ] ||
    { echo "FAIL: hosts.sh: expected ${per[$((h - 1))]} rank(s) on host$h"; exit 1; }
done

start_down
# In the background and waited for, so that a signal to this script runs the
# trap at once (bash defers traps while a foreground child runs); the trap
# then stops mpirun and the daemons. stdin is not forwarded to the ranks.
# HOSTS_LAYOUT tells the ranks what to expect: "2x2", or "1+1+2" (what
# ringtree's host_layout::describe() says of it).
same=1; for c in "${per[@]}"; do [ "$c" = "${per[0]}" ] || same=0; done
if [ $same = 1 ]; then export HOSTS_LAYOUT="${hosts}x${per[0]}"; else export HOSTS_LAYOUT=$(IFS=+; echo "${per[*]}"); fi
run_mpi "${HOSTS_LIMIT:-0}" -x HOSTS_LAYOUT "$prog" "$@" </dev/null &
wait $!
rc=$?
# The veth counters show that the ranks' traffic did cross between the hosts.
bytes=$(ip -n "$(ns 1)" -s -j link show "$(hv 1)" 2>/dev/null | grep -o '"bytes":[0-9]*' | head -2 | cut -d: -f2 | tr '\n' ' ')
echo "hosts.sh: $(basename "$prog") on $np ranks over $hosts hosts exited $rc (host1's link rx/tx bytes: ${bytes:-?})"
exit $rc
