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

# name # file under include/ringtree # old line # new line # tests (doctest filter) # test files
mutants=(
  "operand-order-sendrecv-reduce#algorithms/common.hpp#mem.reduce(o, chunk_of(acc, chunk, j), std::span<const E>(slot(j)), order);#mem.reduce(o, chunk_of(acc, chunk, j), std::span<const E>(slot(j)));#*NaN payloads*,*combine lower rank first*#test_silent.cpp"
  "operand-order-recursive-doubling#algorithms/recursive_doubling.hpp#partner < t.rank() ? operands::in_first : operands::acc_first#operands::acc_first#*NaN payloads*,*combine lower rank first*#test_silent.cpp"
  "grad-sync-piece-offset#train/grad_sync.hpp#std::span<E>(b.storage).subspan(lo, hi - lo)#std::span<E>(b.storage).subspan(lo - a, hi - lo)#*grad_sync: buckets of several pieces*#test_grad_sync.cpp"
  "checked-mode-skips-algorithm#communicator/agreement.hpp#    if (differ.empty()) continue;#    if (differ.empty() || f == 6) continue;#*mismatched algorithm*#test_silent.cpp"
  "checked-mode-skips-op#communicator/agreement.hpp#    if (differ.empty()) continue;#    if (differ.empty() || f == 3) continue;#*mismatched algorithm*#test_silent.cpp"
  "allreduce-size-check-deleted#communicator/collectives.hpp#  c.require(out.size() == in.size(), \"out.size() = \", out.size(), \" but in.size() = \"#c.require(true, \"out.size() = \", out.size(), \" but in.size() = \"#*wrong span lengths*#test_errors.cpp"
  "integer-avg-wraps#communicator/collectives.hpp#    if (o == op::avg && size() > 1) {#    if (false) {#*integer avg*#test_silent.cpp"
  "nan-not-canonical#core/reduce.hpp#  return r != r ? std::numeric_limits<T>::quiet_NaN() : r;#  return r;#*NaN payloads*,*canonical quiet NaN*#test_silent.cpp"
  "grad-sync-wakes-on-failure#train/grad_sync.hpp#cv_.wait(lk, [&] { return done_ == buckets_.size(); });#cv_.wait(lk, [&] { return done_ == buckets_.size() || failure_; });#*failed on every rank are exact (threads*#test_grad_sync.cpp"
  "grad-sync-no-step-check#train/grad_sync.hpp#    if (w[1] != -w[2])#    if (false)#*goes on after a failed step*#test_grad_sync.cpp"
  "avg-divisor-off-by-one#core/reduce.hpp#  const C n = static_cast<C>(ranks);#  const C n = static_cast<C>(ranks + 1);#*the sequential reference at 1..16 ranks*#test_collectives.cpp"
)

status=0
for m in "${mutants[@]}"; do
  IFS='#' read -r name file old new filter files <<<"$m"
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  dir="$work/$name"
  rm -rf "$dir" && mkdir -p "$dir" && cp -r "$root/include" "$dir/include"
  if ! python3 - "$dir/include/ringtree/$file" "$old" "$new" <<'EOF'
import sys
p, old, new = sys.argv[1], sys.argv[2], sys.argv[3]
s = open(p).read()
if s.count(old) != 1:
    sys.exit(f"the mutant's line is not in {p} exactly once: {old}")
open(p, 'w').write(s.replace(old, new))
EOF
  then echo "MUTANT $name: could not be applied"; status=1; continue; fi
  srcs=("$root/tests/host/main.cpp")
  for f in $files; do srcs+=("$root/tests/host/$f"); done
  if ! g++ -std=c++20 -O2 -pthread -I"$dir/include" -I"$root/tests" "${srcs[@]}" -o "$dir/test" 2>"$dir/build.log"; then
    echo "MUTANT $name: does not compile (see $dir/build.log)"; status=1; continue
  fi
  timeout 600 "$dir/test" --test-case="$filter" >"$dir/run.log" 2>&1
  rc=$?
  if grep -q "test cases: *0 |" "$dir/run.log"; then
    echo "MUTANT $name: NO TEST RAN for filter $filter (doctest splits filters at commas)"; status=1
  elif [ $rc -eq 0 ]; then
    echo "MUTANT $name: SURVIVED (its tests passed: $filter)"; status=1
  else
    echo "MUTANT $name: caught by $filter: $(grep -m1 -E 'ERROR|FATAL' "$dir/run.log" | cut -c1-160)"
  fi
done
exit $status
