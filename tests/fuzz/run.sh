#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, with ASan and UBSan) and runs each
# for SECONDS; any crash or failed property fails the run and leaves the
# input in OUT_DIR (libFuzzer's crash-* file) to reproduce with
#   OUT_DIR/fuzz_NAME crash-...
#   tests/fuzz/run.sh OUT_DIR SECONDS [NAME...]    (names: partition parse shm calls)
# Exits 77 (skip) without clang++ and its libFuzzer runtime
# (Debian: clang libclang-rt-14-dev). The corpora grow in OUT_DIR/corpus_NAME.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:?out dir}
seconds=${2:-10}
shift 2 || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(partition parse shm calls)
cxx=$(command -v clang++ || command -v clang++-14 || true)
[ -n "$cxx" ] || { echo "SKIP: no clang++ (apt-get install clang libclang-rt-14-dev)"; exit 77; }
mkdir -p "$out"
rm -f "$out"/crash-* "$out"/leak-* "$out"/timeout-*  # a fixed bug must not fail later runs
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -pthread
       -I"$root/include" -I"$root/tools")
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$out/probe.cpp"
"$cxx" "${flags[@]}" "$out/probe.cpp" -o "$out/probe" 2>/dev/null ||
  { echo "SKIP: $cxx cannot link libFuzzer (apt-get install libclang-rt-14-dev)"; exit 77; }
status=0
for name in "${names[@]}"; do
  echo "--- fuzz_$name: building"
  "$cxx" "${flags[@]}" "$here/fuzz_$name.cpp" -o "$out/fuzz_$name" || { status=1; continue; }
  mkdir -p "$out/corpus_$name"
  echo "--- fuzz_$name: $seconds s"
  (cd "$out" && ASAN_OPTIONS=detect_leaks=1 "./fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "corpus_$name" "$here/seeds/$name" >"fuzz_$name.log" 2>&1)
  rc=$?
  grep -E "property failed|ERROR|SUMMARY|stat::number_of_executed_units|stat::peak_rss|Done|crash-" "$out/fuzz_$name.log"
  # libFuzzer exits non-zero and leaves crash-*, leak-* or timeout-* for any finding
  found=$(cd "$out" && ls | grep -E '^(crash|leak|timeout)-' || true)
  if [ $rc -ne 0 ] || [ -n "$found" ]; then
    echo "FAIL: fuzz_$name (exit status $rc) found an input that breaks it: $found (log: $out/fuzz_$name.log)"
    status=1
  fi
done
[ $status = 0 ] && echo "fuzzing: no crash, no failed property"
exit $status
