#!/usr/bin/env bash
# Deliberate breakages of ringtree (mutants), each built against the test
# files that should catch it; a mutant that passes its tests means a weak
# test. Every one must be caught. Not part of `scripts/ringtree test` (each
# mutant is a separate -O2 build, ~1 minute each on 2 cores); run it after
# changing tests:
#   tests/mutants.sh [WORK_DIR] [NAME...]
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/ringtree-mutants-XXXXXX)}
shift || true
mkdir -p "$work"

# name # file # old line # new line # tests (doctest filter) # what runs them:
#   host/*.cpp, sim/*.cpp   test files built with g++ against the mutant's headers
#   layer                   libringtree-mpi and tests/mpi_layer's layer_check, built
#                           with mpicxx from the mutant's tree, run at 2 and 3 ranks
mutants=(
  "operand-order-sendrecv-reduce#include/ringtree/algorithms/common.hpp#mem.reduce(o, chunk_of(acc, chunk, j), std::span<const E>(slot(j)), order);#mem.reduce(o, chunk_of(acc, chunk, j), std::span<const E>(slot(j)));#*NaN payloads*,*combine lower rank first*#host/test_exact.cpp"
  "operand-order-recursive-doubling#include/ringtree/algorithms/recursive_doubling.hpp#partner < t.rank() ? operands::in_first : operands::acc_first#operands::acc_first#*NaN payloads*,*combine lower rank first*#host/test_exact.cpp"
  "grad-sync-piece-offset#include/ringtree/train/grad_sync.hpp#      if (lo < hi) f(grads_[g].subspan(lo - off, hi - lo), b.storage.subspan(lo, hi - lo));#      if (lo < hi) f(grads_[g].subspan(lo - off, hi - lo), b.storage.subspan(lo - a, hi - lo));#*grad_sync: buckets of several pieces*#host/test_grad_sync.cpp"
  "checked-mode-skips-algorithm#include/ringtree/communicator/agreement.hpp#    if (differ.empty()) continue;#    if (differ.empty() || f == 6) continue;#*mismatched algorithm*#host/test_exact.cpp"
  "checked-mode-skips-op#include/ringtree/communicator/agreement.hpp#    if (differ.empty()) continue;#    if (differ.empty() || f == 3) continue;#*mismatched algorithm*#host/test_exact.cpp"
  "allreduce-size-check-deleted#include/ringtree/communicator/collectives.hpp#  c.require(out.size() == in.size(), \"out.size() = \", out.size(), \" but in.size() = \"#c.require(true, \"out.size() = \", out.size(), \" but in.size() = \"#*wrong span lengths*#host/test_errors.cpp"
  "integer-avg-wraps#include/ringtree/communicator/collectives.hpp#    if (o == op::avg && size() > 1) {#    if (false) {#*integer avg*#host/test_exact.cpp"
  "nan-not-canonical#include/ringtree/core/reduce.hpp#  return r != r ? std::numeric_limits<T>::quiet_NaN() : r;#  return r;#*NaN payloads*,*canonical quiet NaN*#host/test_exact.cpp"
  "grad-sync-stops-at-first-failure#include/ringtree/train/grad_sync.hpp#        if (!failure) failure = std::current_exception();#        if (!failure) { failure = std::current_exception(); break; }#*failed on every rank are exact (threads*#host/test_grad_sync.cpp"
  "grad-sync-no-step-check#include/ringtree/train/grad_sync.hpp#    if (w[1] != -w[2])#    if (false)#*goes on after a failed step*#host/test_grad_sync.cpp"
  "avg-divisor-off-by-one#include/ringtree/core/reduce.hpp#  const C n = static_cast<C>(ranks);#  const C n = static_cast<C>(ranks + 1);#*the sequential reference at 1..16 ranks*#host/test_collectives.cpp"
  # the newest code: point to point, the settings agreement, the chooser,
  # the simulator, the peer checks, the stall chain, all-to-all, the MPI layer
  "p2p-type-unchecked#include/ringtree/communicator/p2p.hpp#    if (h.type != w.type || h.count != w.count)#    if (h.count != w.count)#*point to point of another count or type*#host/test_shm.cpp"
  "settings-model-constant-left-out#include/ringtree/communicator/settings.hpp#    model_setting<&cost_model::alpha_net>(\"communicator_options::model.alpha_net\"),#    {\"communicator_options::model.alpha_net\", [](const opened_settings&) { return std::uint64_t{0}; }, show_double, [](opened_settings& s) { s.opt.model->alpha_net += 1; }},#*every setting that decides*#host/test_agreement.cpp"
  "chooser-never-measures#include/ringtree/communicator/chooser.hpp#    if (a == algorithm::automatic && cached_only_) return by_model(comm, C, bytes, talk);  // measured ahead, or not at all#    if (a == algorithm::automatic) return by_model(comm, C, bytes, talk);#*clearly slower*#host/test_table.cpp"
  "sim-receiving-link-unshared#include/ringtree/sim/network.hpp#    nic_out_[ha] = nic_in_[hb] = t1;#    nic_out_[ha] = t1;#*share its receiving link*#sim/test_sim.cpp"
  "shm-peer-check-no-second-look#include/ringtree/transport/shm/slots.hpp#    if (r.op_->complete) return;#    // (no second look)#*between two looks*#host/test_shm_peers.cpp"
  "symmetric-peer-check-no-second-look#include/ringtree/memory/symmetric.hpp#          if (now >= target && now != failed_seq) return;#          // (no second look)#*leaves between two looks*#host/test_symmetric.cpp"
  "stall-chain-walks-a-cycle#include/ringtree/transport/wait_board.hpp#      if (std::find(named.begin(), named.end(), next) != named.end()) {#      if (false) {#*comes back to a rank it named*#host/test_faults.cpp"
  "alltoallv-receives-at-send-offsets#include/ringtree/algorithms/alltoall.hpp#  auto from = [&](int j) { return out.subspan(ri[j], recvs[j]); };#  auto from = [&](int j) { return out.subspan(si[j], recvs[j]); };#*every collective between forked processes*#host/test_shm.cpp"
  "layer-zero-count-skips-pending#src/mpi_layer/calls.cpp#  if (inside || !mpi_ready() || (count == 0 && !the_settings().log && !requests_pending())) return mpi();#  if (inside || !mpi_ready() || (count == 0 && !the_settings().log)) return mpi();#-#layer"
  "layer-call-to-mpi-skips-pending#src/mpi_layer/calls.cpp#      info->lc->comm.quiesce();#      (void)info;#-#layer"
)

# What runs a mutant's tests: "layer", or test files under tests/.
build_and_run() {
  local dir=$1 filter=$2 files=$3
  if [ "$files" = layer ]; then
    local mpi_flags=(-std=c++20 -O2 -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1 -I"$dir/include")
    mpicxx "${mpi_flags[@]}" -fPIC -shared -fvisibility=hidden -fvisibility-inlines-hidden \
      "$dir/src/mpi_layer/calls.cpp" "$dir/src/mpi_layer/support.cpp" \
      -Wl,--version-script="$root/src/mpi_layer/exports.map" -o "$dir/libringtree-mpi.so" 2>"$dir/build.log" &&
      mpicxx "${mpi_flags[@]}" "$root"/tests/mpi_layer/{layer_check,calls,promises}.cpp -L"$dir" -lringtree-mpi \
        -Wl,-rpath,"$dir" -o "$dir/test" 2>>"$dir/build.log" || return 2
    local rc=0 np
    for np in 2 3; do
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RINGTREE_CACHE_DIR="$dir/cache" \
        timeout 300 mpirun --oversubscribe -np $np "$dir/test" >>"$dir/run.log" 2>&1 || rc=1
    done
    return $rc
  fi
  local srcs=() f
  for f in $files; do srcs+=("$root/tests/$f"); done
  [[ " $files " == *" host/"* ]] && srcs+=("$root/tests/host/main.cpp")
  g++ -std=c++20 -O2 -pthread -I"$dir/include" -I"$root/tests/support" -I"$root" "${srcs[@]}" -o "$dir/test" 2>"$dir/build.log" || return 2
  RINGTREE_CACHE_DIR="$dir/cache" timeout 600 "$dir/test" --test-case="$filter" >"$dir/run.log" 2>&1
}

status=0
for m in "${mutants[@]}"; do
  IFS='#' read -r name file old new filter files <<<"$m"
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  dir="$work/$name"
  rm -rf "$dir" && mkdir -p "$dir/cache" && cp -r "$root/include" "$root/src" "$dir/"
  if ! python3 - "$dir/$file" "$old" "$new" <<'EOF'
import sys
p, old, new = sys.argv[1], sys.argv[2], sys.argv[3]
s = open(p).read()
if s.count(old) != 1:
    sys.exit(f"the mutant's line is not in {p} exactly once: {old}")
open(p, 'w').write(s.replace(old, new))
EOF
  then echo "MUTANT $name: could not be applied"; status=1; continue; fi
  build_and_run "$dir" "$filter" "$files"
  rc=$?
  if [ $rc -eq 2 ]; then
    echo "MUTANT $name: does not compile (see $dir/build.log)"; status=1
  elif grep -q "test cases: *0 |" "$dir/run.log"; then
    echo "MUTANT $name: NO TEST RAN for filter $filter (doctest splits filters at commas)"; status=1
  elif [ $rc -eq 0 ]; then
    echo "MUTANT $name: SURVIVED (its tests passed: $filter $files)"; status=1
  else
    echo "MUTANT $name: caught by $filter $files: $(grep -m1 -E 'ERROR|FATAL|WRONG' "$dir/run.log" | cut -c1-160)"
  fi
done
exit $status
