#!/usr/bin/env bash
# ringtree across hosts, on emulated ones (tests/mpi/hosts.sh: network
# namespaces on a bridge, each host's link shaped by tc tbf), every figure
# with the network's measured latency and bandwidth (bench/pingpong):
#
#   bench/hosts_bench.sh [BUILD_DIR] [RATE...]      (default: build 10gbit 1gbit)
#
# For each RATE, on 2 hosts x 2 ranks, with ranks round-robin over the hosts
# (--map-by node) and host by host (--map-by slot):
#   - pingpong between the hosts (8 B latency, 4 MiB bandwidth)
#   - all-reduce of 64 MiB floats: hierarchical, the flat ring over MPI,
#     automatic, and MPI_Allreduce (ringtree-perf -t cluster, 3 rounds), and
#     the same rows with UCX between the hosts (-t net, UCX_TLS=tcp)
#   - grad_sync on 1000 gradients of 25 KB against one all-reduce per
#     gradient and one flat all-reduce of the same bytes (grad_sync_bench cluster)
# As root (namespaces); about 3 minutes per rate.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}; shift || true
rates=("$@"); [ ${#rates[@]} -gt 0 ] || rates=(10gbit 1gbit)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RINGTREE_CACHE_DIR=${RINGTREE_CACHE_DIR:-$(mktemp -d)}
hosts="$here/../tests/mpi/hosts.sh"
for b in bench/pingpong tools/ringtree-perf bench/grad_sync_bench; do
  [ -x "$build/$b" ] || { echo "hosts_bench.sh: no $build/$b (build first: scripts/ringtree bench)" >&2; exit 1; }
done
for rate in "${rates[@]}"; do
  for map in node slot; do
    echo "=== 2 hosts x 2 ranks, links shaped to $rate each way, --map-by $map"
    bash "$hosts" -l 2x2 -r "$rate" -m "$map" "$build/bench/pingpong" | grep -v '^hosts.sh\|ranks on:'
    bash "$hosts" -l 2x2 -r "$rate" -m "$map" "$build/tools/ringtree-perf" -t cluster -b 64M -e 64M -w 1 -n 3 --rounds 3 \
      -a hierarchical,ring,automatic,mpi | grep -v '^hosts.sh\|ranks on:'
    # the same rows with UCX between the hosts (net_cluster; MPI only starts the ranks), TCP only
    UCX_TLS=tcp HOSTS_MPIRUN_ARGS="-x UCX_TLS" bash "$hosts" -l 2x2 -r "$rate" -m "$map" "$build/tools/ringtree-perf" -t net \
      -b 64M -e 64M -w 1 -n 3 --rounds 3 -a hierarchical,ring,automatic,mpi | grep -v '^hosts.sh\|ranks on:'
    bash "$hosts" -l 2x2 -r "$rate" -m "$map" "$build/bench/grad_sync_bench" cluster | grep -v '^hosts.sh\|ranks on:\|overlap'
  done
done
