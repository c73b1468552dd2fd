#!/usr/bin/env bash
# ringtree as a Meson subproject, the way a project outside ringtree uses it:
# a temporary project whose subprojects/ringtree is a symlink to this source
# tree, with dependency('ringtree') and dependency('ringtree-mpi') (falling
# back to the subproject; --force-fallback-for so that an installed ringtree
# is not picked instead). It checks that
#   - the subproject configures no tests, tools, benchmarks or examples and
#     never looks for doctest;
#   - the consumer sets no C++ standard, yet compiles: the C++20 requirement
#     comes with the dependency (tests/package/cmake_consumer/main.cpp
#     static_asserts it); and a consumer on a newer standard keeps its own;
#   - the programs run: a 2-rank local_world allreduce, and the MPI one under
#     mpirun -np 2 when MPI is there.
# Usage: meson_subproject.sh SOURCE_DIR
set -euo pipefail
src=$(cd "${1:?usage: meson_subproject.sh SOURCE_DIR}" && pwd)
tmp=$(mktemp -d /tmp/ringtree-meson-subproject-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export RINGTREE_CACHE_DIR=$tmp/cache   # calibrated models stay in here
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
fail() { echo "FAIL: $*"; exit 1; }
t0=$SECONDS

proj=$tmp/consumer
mkdir -p "$proj/subprojects"
ln -s "$src" "$proj/subprojects/ringtree"
cp "$src/tests/package/cmake_consumer/main.cpp" "$src/tests/package/cmake_consumer/mpi_main.cpp" "$proj/"
cat >"$proj/meson.build" <<'MESON'
project('consumer', 'cpp')   # no cpp_std: C++20 must come with the dependency
ringtree_dep = dependency('ringtree', fallback: 'ringtree')
executable('local_consumer', 'main.cpp', dependencies: ringtree_dep)
ringtree_mpi_dep = dependency('ringtree-mpi', fallback: 'ringtree', required: false)
if ringtree_mpi_dep.found()
  executable('mpi_consumer', 'mpi_main.cpp', dependencies: ringtree_mpi_dep)
endif
MESON

setup() {  # build dir, then meson options
  local dir=$1; shift
  nice -n 19 meson setup "$dir" "$proj" --force-fallback-for=ringtree -Dbuildtype=plain "$@" >"$dir.log" 2>&1 ||
    { cat "$dir.log"; fail "meson setup of the consumer project"; }
}
setup "$tmp/build"
log=$tmp/build/meson-logs/meson-log.txt
if grep -qi doctest "$log"; then grep -i doctest "$log" | head -3; fail "the subproject looked for doctest"; fi
targets=$(meson introspect --targets "$tmp/build" | python3 -c 'import json,sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
for t in $targets; do
  # ringtree-prebuilt(-mpi): the optional compiled part, built only when a target links it
  case $t in local_consumer|mpi_consumer|ringtree-prebuilt|ringtree-prebuilt-mpi) ;; *) fail "the subproject configured target $t (targets: $targets)" ;; esac
done
tests=$(meson introspect --tests "$tmp/build" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$tests" = 0 ] || fail "the subproject registered $tests tests"
grep -q "^Executing subproject ringtree" "$tmp/build.log" && grep -q "^Dependency ringtree found: YES .*(overridden)" "$tmp/build.log" ||
  { cat "$tmp/build.log"; fail "dependency('ringtree') did not come from the subproject"; }
echo "configure: $((SECONDS - t0)) s; targets: $targets; no tests, no doctest"

nice -n 19 ninja -C "$tmp/build" >"$tmp/ninja.log" 2>&1 || { cat "$tmp/ninja.log"; fail "building the consumer"; }
grep -q -- '-std=\(gnu\|c\)++20' "$tmp/build/compile_commands.json" || fail "no -std=...20 in the consumer's compile commands"
echo "build: $((SECONDS - t0)) s"
"$tmp/build/local_consumer" || fail "local_consumer"
if [ -x "$tmp/build/mpi_consumer" ]; then
  mpirun --oversubscribe -np 2 "$tmp/build/mpi_consumer" || fail "mpi_consumer under mpirun -np 2"
else
  echo "no MPI: dependency('ringtree-mpi') not tried"
fi

# A consumer already on a newer standard keeps it: no -std=c++20 after its
# own (configure only).
setup "$tmp/build-2b" -Dcpp_args=-std=c++2b   # Meson 1.0 has no cpp_std=c++2b
python3 - "$tmp/build-2b/compile_commands.json" <<'PY' || fail "a c++2b consumer did not keep its standard"
import json, sys
cmds = [c['command'] for c in json.load(open(sys.argv[1])) if c['file'].endswith('main.cpp')]
if not cmds:
    sys.exit('no compile command for main.cpp')
for cmd in cmds:
    if '-std=c++2b' not in cmd or '++20' in cmd:
        sys.exit(cmd)
PY
echo "meson_subproject: all checks passed in $((SECONDS - t0)) s"
