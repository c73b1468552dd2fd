#!/usr/bin/env bash
# What scripts/ringtree gpu-check runs once the CUDA programs are built:
# the GPU is usable, the suite on device buffers at 2 and 4 ranks, then
# allreduce busbw next to cudaMemcpy. Usable on a GPU machine without the
# rest of the toolchain: give it a build directory made elsewhere.
#   tests/cuda/device_check.sh BUILD_DIR [max bytes for the sweep, default 1 GiB]
set -uo pipefail
build=$1; max=${2:-$((1 << 30))}
say() { printf '\033[1mringtree gpu-check:\033[0m %s\n' "$*" >&2; }
status=0
run() {  # a name, then the command; the verdict of each on one line
  local name=$1; shift
  say "$name"
  local t0=$SECONDS
  if "$@"; then echo "gpu-check: OK     $name ($((SECONDS - t0)) s)"
  else echo "gpu-check: FAILED $name ($((SECONDS - t0)) s)"; status=1; fi
}
"$build/tests/cuda_probe" || { say "no usable GPU here"; exit 1; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
# Each step under a time limit: a hang is a failure, and the rest still runs.
run "the transport on a GPU: made, one barrier" timeout 60 "$build/tests/cuda_no_device"
run "every collective on device buffers, 2 and 4 ranks" env RINGTREE_TIMEOUT=30 timeout 240 "$build/tests/test_cuda_ipc" --duration=true
run "allreduce busbw, 2 ranks" timeout 75 "$build/bench/cuda_bench" 2 "$max"
run "allreduce busbw, 4 ranks on one GPU" timeout 75 "$build/bench/cuda_bench" 4 "$((max / 4))"
exit $status
