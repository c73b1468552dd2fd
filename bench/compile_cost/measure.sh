#!/usr/bin/env bash
# What a trainer's file pays to compile with ringtree, against none.cpp (the
# same program without ringtree): one.cpp (the umbrella, one float
# all-reduce on local_world), shm.cpp (the same on shared memory) and
# any.cpp (shm.cpp through any_communicator, where the include dir has it),
# in the modes of core/compiled.hpp:
#   header    header-only (the default: no build step)
#   prebuilt  RINGTREE_PREBUILT: the cold code and the communicators are
#             compiled elsewhere (the ringtree-prebuilt library, or the
#             program's one file with RINGTREE_IMPLEMENTATION)
# and that one file itself (src/prebuilt.cpp, the library's: compiled once
# per program).
# CPU time (user + sys), the least of ROUNDS compiles (the implementation
# file: one), g++ -O2: wall time on a shared machine is noise.
#   bench/compile_cost/measure.sh [INCLUDE_DIR...]    (default: include/)
# Several include dirs (an older checkout's, say) are measured in the same
# run, alternating, for before/after.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=${ROUNDS:-3}
cxx=${CXX:-g++}
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=("$root/include")
out=$(mktemp -d /tmp/ringtree-compile-cost-XXXXXX)
trap 'rm -rf "$out"' EXIT
cpu() {  # cpu FILE FLAGS... -> seconds
  local f=$1; shift
  { /usr/bin/time -f '%U %S' "$cxx" -std=c++20 -O2 "$@" -c "$f" -o "$out/x.o"; } 2>&1 >/dev/null | tail -1 | awk '{print $1 + $2}'
}
least() { awk -v a="$1" -v b="${2:-99999}" 'BEGIN{print (a<b)?a:b}'; }
declare -A best
rows=()
for ((k = 0; k < rounds; ++k)); do
  best[none]=$(least "$(cpu "$here/none.cpp")" "${best[none]:-}")
  for i in "${!dirs[@]}"; do
    for file in one shm any; do
      [ $file = any ] && [ ! -f "${dirs[$i]}/ringtree/any_communicator.hpp" ] && continue
      for mode in header prebuilt; do
        flags=(-I"${dirs[$i]}"); [ $mode = prebuilt ] && flags+=(-DRINGTREE_PREBUILT)
        key="$i $file.cpp ($mode)"
        [ $k -eq 0 ] && rows+=("$key")
        best[$key]=$(least "$(cpu "$here/$file.cpp" "${flags[@]}")" "${best[$key]:-}")
      done
    done
  done
done
for i in "${!dirs[@]}"; do  # once: a program compiles it once
  if [ -f "${dirs[$i]}/ringtree/core/compiled.hpp" ]; then
    key="$i src/prebuilt.cpp, RINGTREE_IMPLEMENTATION (once)"
    rows+=("$key")
    best[$key]=$(cpu "$root/src/prebuilt.cpp" -I"${dirs[$i]}")
  fi
done
printf '%-64s %8s %8s\n' "file (mode), include dir" "seconds" "ratio"
printf '%-64s %8s %8s\n' "none.cpp (no ringtree)" "${best[none]}" "1.0x"
for key in "${rows[@]}"; do
  i=${key%% *}
  printf '%-64s %8s %8s\n' "${key#* }, ${dirs[$i]}" "${best[$key]}" "$(awk -v a="${best[$key]}" -v b="${best[none]}" 'BEGIN{printf "%.1fx", a/b}')"
done
