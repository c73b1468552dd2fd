#!/usr/bin/env bash
# torch.distributed across emulated hosts without MPI: dist.all_reduce on
# "ringtree" (net_cluster: shared memory within a host, UCX between hosts)
# against "gloo", in one run (bench/torch_bench.py under torchrun):
#
#   bench/hosts_torch_bench.sh [BUILD_DIR] [RATE...]      (default: build 10gbit 1gbit)
#
# For each RATE: 2 hosts x 2 ranks (tests/mpi/hosts.sh -e: network
# namespaces, each host's link shaped by tc tbf to RATE each way), torchrun
# --nnodes 2 --nproc_per_node 2 with its rendezvous on host 1, all_reduce of
# 4 KiB to 256 MiB, 3 alternating rounds. UCX is kept on TCP (UCX_TLS=tcp):
# the emulated hosts share this machine's memory, which UCX would find and
# use. As root (namespaces); about 4 minutes per rate at 1 Gbit/s.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}; shift || true
rates=("$@"); [ ${#rates[@]} -gt 0 ] || rates=(10gbit 1gbit)
python=$here/../$build/torch-venv/bin/python
[ -x "$python" ] || python=$build/torch-venv/bin/python
[ -x "$python" ] && ls "$build"/python/ringtree_torch/_C*.so >/dev/null 2>&1 ||
  { echo "hosts_torch_bench.sh: no torch backend in $build (build first: scripts/ringtree torch-bench)" >&2; exit 1; }
torchrun=$(dirname "$python")/torchrun
module_dir=$(cd "$build/python" && pwd)
export RINGTREE_CACHE_DIR=${RINGTREE_CACHE_DIR:-$(mktemp -d)} UCX_TLS=tcp OMP_NUM_THREADS=1
for rate in "${rates[@]}"; do
  port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
  echo "=== 2 hosts x 2 ranks, links shaped to $rate each way, torchrun (no MPI)"
  HOSTS_LIMIT=1800 bash "$here/../tests/mpi/hosts.sh" -l 2x2 -r "$rate" -e \
    "$torchrun --nnodes 2 --nproc_per_node 2 --node_rank \$HOSTS_INDEX --rdzv_backend c10d --rdzv_endpoint host1:$port \
     --rdzv_id bench-$rate $here/torch_bench.py --module-dir $module_dir --calls all_reduce --rounds 3 --max-mib 256 --batches 8" |
    grep -v '^hosts.sh\|^W[0-9]\|OMP_NUM_THREADS\|^\*\*\*'
done
