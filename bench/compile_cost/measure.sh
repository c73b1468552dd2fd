#!/usr/bin/env bash
# What a trainer's file pays to compile with ringtree: one.cpp (the
# umbrella and one float all-reduce on local_world) against none.cpp (the
# same program without ringtree), header-only and with the prebuilt part
# declared (RINGTREE_PREBUILT: its calls are compiled once, in the
# library). CPU time (user + sys), the least of ROUNDS compiles, g++ -O2:
# wall time on a shared machine is noise.
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
declare -A best
for ((k = 0; k < rounds; ++k)); do
  for key in none; do
    t=$(cpu "$here/none.cpp"); b=${best[none]:-99}; best[none]=$(awk -v a="$t" -v b="$b" 'BEGIN{print (a<b)?a:b}')
  done
  for i in "${!dirs[@]}"; do
    for mode in header prebuilt; do
      flags=(-I"${dirs[$i]}"); [ $mode = prebuilt ] && flags+=(-DRINGTREE_PREBUILT)
      t=$(cpu "$here/one.cpp" "${flags[@]}"); b=${best[$i.$mode]:-99}
      best[$i.$mode]=$(awk -v a="$t" -v b="$b" 'BEGIN{print (a<b)?a:b}')
    done
  done
done
printf '%-52s %8s %8s\n' "include dir" "seconds" "ratio"
printf '%-52s %8s %8s\n' "(none.cpp: no ringtree)" "${best[none]}" "1.0"
for i in "${!dirs[@]}"; do
  for mode in header prebuilt; do
    printf '%-52s %8s %8s\n' "${dirs[$i]} ($mode)" "${best[$i.$mode]}" "$(awk -v a="${best[$i.$mode]}" -v b="${best[none]}" 'BEGIN{printf "%.1fx", a/b}')"
  done
done
