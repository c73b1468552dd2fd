#!/usr/bin/env bash
# The installed package, as a project outside ringtree sees it:
#   1. meson setup of this source tree with -Dauto_features=disabled and a
#      plain `meson install` (no --no-rebuild): it must compile nothing;
#   2. the installed headers, ringtree.pc, ringtree-mpi.pc, ringtreeConfig.cmake
#      and ringtreeConfigVersion.cmake are there, and pkg-config ringtree-mpi's
#      flags (-std=c++20 from ringtree, MPI's, no MPI C++ bindings) compile
#      the umbrella and the MPI header;
#   3. with -Dprebuilt=true, `meson install` adds the compiled part:
#      libringtree-prebuilt.a (and -prebuilt-mpi.a), ringtree-prebuilt.pc,
#      whose flags build and link a program that runs. Given BUILD_DIR (the
#      build that runs this test) configured so, its install is staged
#      (--destdir, nothing compiled: its libraries were built for the
#      tests); else the build of step 1 is reconfigured and compiles them
#      (3 minutes here);
#   4. the prefix is moved (the CMake package must be relocatable) and
#      tests/package/cmake_consumer (find_package(ringtree CONFIG REQUIRED),
#      ringtree::ringtree, and ringtree::mpi with COMPONENTS mpi) is configured,
#      built and run: a 2-rank local_world allreduce, and a 2-rank
#      mpi_transport allreduce under mpirun; and the same two against
#      ringtree::prebuilt and ringtree::prebuilt_mpi.
# Usage: cmake_consumer.sh SOURCE_DIR [BUILD_DIR]. Exit 77 (skip) without cmake.
set -euo pipefail
src=$(cd "${1:?usage: cmake_consumer.sh SOURCE_DIR [BUILD_DIR]}" && pwd)
main_build=${2:-}
command -v cmake >/dev/null || { echo "SKIP: cmake is not installed (apt-get install cmake; scripts/ringtree installs it)"; exit 77; }
tmp=$(mktemp -d /tmp/ringtree-cmake-consumer-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export RINGTREE_CACHE_DIR=$tmp/cache   # calibrated models stay in here
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
fail() { echo "FAIL: $*"; exit 1; }
run_logged() {  # log, then the command: its output only if it fails
  local log=$1; shift
  "$@" >"$log" 2>&1 || { cat "$log"; fail "$*"; }
}
option_of() {  # build dir, option name: its value
  meson introspect --buildoptions "$1" | python3 -c \
    'import json,sys; print(next((o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]), ""))' "$2"
}
t0=$SECONDS

run_logged "$tmp/setup.log" nice -n 19 meson setup "$tmp/build" "$src" -Dauto_features=disabled --prefix="$tmp/prefix"
run_logged "$tmp/install.log" nice -n 19 meson install -C "$tmp/build"
if compiled=$(find "$tmp/build" -name '*.o' | head -3) && [ -n "$compiled" ]; then
  fail "meson install compiled something: $compiled"
fi
echo "meson setup + install: $((SECONDS - t0)) s, nothing compiled"

inc=$tmp/prefix/$(option_of "$tmp/build" includedir)
[ -f "$inc/ringtree/ringtree.hpp" ] || fail "no ringtree/ringtree.hpp under $inc"
[ -f "$inc/ringtree/core/cxx20.hpp" ] || fail "no ringtree/core/cxx20.hpp under $inc"
pc=$(find "$tmp/prefix" -name ringtree.pc -path '*/pkgconfig/*')
[ -n "$pc" ] || fail "no ringtree.pc installed"
config=$(find "$tmp/prefix" -name ringtreeConfig.cmake -path '*/cmake/ringtree/*')
[ -n "$config" ] || fail "no cmake/ringtree/ringtreeConfig.cmake installed"
[ -f "$(dirname "$config")/ringtreeConfigVersion.cmake" ] || fail "no ringtreeConfigVersion.cmake next to $config"

# pkg-config: the flags carry C++20 (and for ringtree-mpi, MPI without its C++ bindings).
export PKG_CONFIG_PATH=$(dirname "$pc")
cxx=${CXX:-c++}
cflags=$(pkg-config --cflags ringtree)
case " $cflags " in *" -std=c++20 "*) ;; *) fail "pkg-config --cflags ringtree has no -std=c++20: $cflags" ;; esac
[ -f "$(pkg-config --variable=includedir ringtree)/ringtree/ringtree.hpp" ] || fail "pkg-config's includedir has no ringtree/ringtree.hpp"
with_mpi=OFF
mpi_pc=""
for m in mpi ompi-c ompi mpich; do [ -z "$mpi_pc" ] && pkg-config --exists "$m" 2>/dev/null && mpi_pc=$m; done
if [ -n "$mpi_pc" ] || [ -f "$(dirname "$pc")/ringtree-mpi.pc" ]; then
  [ -f "$(dirname "$pc")/ringtree-mpi.pc" ] || fail "MPI has a pkg-config module ($mpi_pc) but ringtree-mpi.pc was not installed"
  mpi_cflags=$(pkg-config --cflags ringtree-mpi) || fail "pkg-config ringtree-mpi does not resolve"
  pkg-config --libs ringtree-mpi >/dev/null || fail "pkg-config --libs ringtree-mpi does not resolve"
  case " $mpi_cflags " in *" -DOMPI_SKIP_MPICXX=1 "*) ;; *) fail "pkg-config --cflags ringtree-mpi: no -DOMPI_SKIP_MPICXX=1: $mpi_cflags" ;; esac
  printf '#include <ringtree/ringtree.hpp>\n#include <ringtree/transport/mpi.hpp>\n' |
    nice -n 19 $cxx $mpi_cflags -fsyntax-only -x c++ - || fail "transport/mpi.hpp does not compile with pkg-config ringtree-mpi's flags"
  command -v mpirun >/dev/null && with_mpi=ON
else
  echo '#include <ringtree/ringtree.hpp>' | nice -n 19 $cxx $cflags -fsyntax-only -x c++ - || fail "the umbrella does not compile with pkg-config's flags"
fi
echo "pkg-config ringtree$([ $with_mpi = ON ] && echo ' and ringtree-mpi'): $((SECONDS - t0)) s"

# The compiled part, installed on request.
prefix=$tmp/prefix
pkgconf=(pkg-config)
if [ -n "$main_build" ] && [ "$(option_of "$main_build" prebuilt)" = True ] &&
   { [ $with_mpi = OFF ] || [ "$(option_of "$main_build" mpi)" != disabled ]; }; then
  run_logged "$tmp/install2.log" meson install -C "$main_build" --no-rebuild --destdir "$tmp/stage"
  prefix=$tmp/stage$(option_of "$main_build" prefix)
  pc=$(find "$prefix" -name ringtree.pc -path '*/pkgconfig/*')
  [ -n "$pc" ] || fail "meson install of $main_build staged no ringtree.pc under $prefix"
  export PKG_CONFIG_PATH=$(dirname "$pc")
  # (the .pc files name the prefix that the build was configured with)
  pkgconf=(pkg-config "--define-variable=prefix=$prefix")
  echo "-Dprebuilt=true: $main_build's install, staged"
else
  mpi_option=()
  [ $with_mpi = ON ] && mpi_option=(-Dmpi=enabled)
  run_logged "$tmp/configure.log" nice -n 19 meson configure "$tmp/build" -Dprebuilt=true "${mpi_option[@]}"
  run_logged "$tmp/install2.log" nice -n 19 meson install -C "$tmp/build"
fi
[ -n "$(find "$prefix" -name libringtree-prebuilt.a)" ] || fail "-Dprebuilt=true installed no libringtree-prebuilt.a"
[ -f "$(dirname "$pc")/ringtree-prebuilt.pc" ] || fail "-Dprebuilt=true installed no ringtree-prebuilt.pc"
case " $("${pkgconf[@]}" --cflags ringtree-prebuilt) " in *" -DRINGTREE_PREBUILT "*) ;; *) fail "pkg-config --cflags ringtree-prebuilt has no -DRINGTREE_PREBUILT" ;; esac
# shellcheck disable=SC2046
nice -n 19 $cxx $("${pkgconf[@]}" --cflags ringtree-prebuilt) "$src/tests/package/cmake_consumer/main.cpp" \
  $("${pkgconf[@]}" --libs ringtree-prebuilt) -o "$tmp/pc_prebuilt" || fail "main.cpp does not build with pkg-config ringtree-prebuilt"
"$tmp/pc_prebuilt" | grep -q '(prebuilt) local_world allreduce over 2 ranks: ok' || fail "pkg-config ringtree-prebuilt's program"
if [ $with_mpi = ON ]; then
  [ -f "$(dirname "$pc")/ringtree-prebuilt-mpi.pc" ] || fail "-Dprebuilt=true with MPI installed no ringtree-prebuilt-mpi.pc"
fi
echo "-Dprebuilt=true, pkg-config ringtree-prebuilt: $((SECONDS - t0)) s"

# CMake, from a moved prefix.
mv "$prefix" "$tmp/moved"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
[ $with_mpi = ON ] || echo "no MPI (mpirun, or MPI's pkg-config module): ringtree::mpi is not tried"
run_logged "$tmp/cmake.log" nice -n 19 cmake -S "$src/tests/package/cmake_consumer" -B "$tmp/consumer" "${gen[@]}" \
  -DCMAKE_PREFIX_PATH="$tmp/moved" -DWITH_MPI=$with_mpi -DWITH_PREBUILT=ON
run_logged "$tmp/cmake-build.log" nice -n 19 cmake --build "$tmp/consumer" -j 2
grep -rqs -- '-std=\(gnu\|c\)++20' "$tmp/consumer/build.ninja" "$tmp/consumer/CMakeFiles" ||
  fail "cxx_std_20 did not reach the consumer's compile command"
"$tmp/consumer/local_consumer" || fail "local_consumer"
"$tmp/consumer/local_prebuilt_consumer" | grep -q '(prebuilt) local_world allreduce over 2 ranks: ok' || fail "local_prebuilt_consumer"
if [ $with_mpi = ON ]; then
  mpirun --oversubscribe -np 2 "$tmp/consumer/mpi_consumer" || fail "mpi_consumer under mpirun -np 2"
  mpirun --oversubscribe -np 2 "$tmp/consumer/mpi_prebuilt_consumer" || fail "mpi_prebuilt_consumer under mpirun -np 2"
fi
echo "cmake_consumer: all checks passed in $((SECONDS - t0)) s"
