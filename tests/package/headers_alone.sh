#!/usr/bin/env bash
# Every public header compiles alone, and includes ringtree/core/cxx20.hpp (the
# C++20 check), directly or through another ringtree header. For each header H
# under include/ringtree (recursively), a translation unit holding only
# `#include <H>` compiles with
#   -std=c++20 -fsyntax-only -Wall -Wextra -Werror -Iinclude
# under g++ and clang++ (Debian 12: clang 14). Headers that include <mpi.h>,
# directly or through another ringtree header, get MPI's include flags
# (pkg-config mpi, else mpicxx --showme:compile) and -DOMPI_SKIP_MPICXX=1
# -DMPICH_SKIP_MPICXX=1, as ringtree-mpi gives them; headers that include
# <cuda_runtime.h> compile with nvcc (-c, it has no syntax-only mode) when it
# is found, and are skipped with a message otherwise; headers that include
# <ucp/api/ucp.h> get UCX's flags (pkg-config ucx), or are skipped with a
# message without it. Two compiles at a time,
# niced. Usage: headers_alone.sh SOURCE_DIR
set -euo pipefail
src=$(cd "${1:?usage: headers_alone.sh SOURCE_DIR}" && pwd)
tmp=$(mktemp -d /tmp/ringtree-headers-alone-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
t0=$SECONDS
cd "$src/include"

# header, then its needs: "mpi", "cuda", both or neither (transitively, over
# ringtree's own #include <ringtree/...> lines).
python3 - >"$tmp/headers" <<'PY'
import pathlib, re
root = pathlib.Path('.')
headers = sorted(str(p) for p in root.glob('ringtree/**/*.hpp'))
inc = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
direct = {h: inc.findall(pathlib.Path(h).read_text()) for h in headers}
def needs(h, seen):
    out = set()
    for i in direct.get(h, []):
        if i == 'mpi.h': out.add('mpi')
        elif i == 'cuda_runtime.h': out.add('cuda')
        elif i == 'ucp/api/ucp.h': out.add('ucx')
        elif i in direct and i not in seen:
            seen.add(i)
            out |= needs(i, seen)
    return out
def reaches(h, target, seen):
    for i in direct.get(h, []):
        if i == target:
            return True
        if i in direct and i not in seen:
            seen.add(i)
            if reaches(i, target, seen):
                return True
    return False
for h in headers:
    n = needs(h, {h})
    if h != 'ringtree/core/cxx20.hpp' and not reaches(h, 'ringtree/core/cxx20.hpp', {h}):
        n.add('no-cxx20')
    print(h, ','.join(sorted(n)) or '-')
PY

mpi_flags=""
if pkg-config --exists mpi 2>/dev/null; then mpi_flags=$(pkg-config --cflags mpi)
elif command -v mpicxx >/dev/null; then mpi_flags=$(mpicxx --showme:compile 2>/dev/null || true); fi
[ -n "$mpi_flags" ] && mpi_flags="$mpi_flags -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1"
ucx_flags=""
ucx_found=0
if pkg-config --exists ucx 2>/dev/null; then ucx_flags=$(pkg-config --cflags ucx); ucx_found=1; fi
nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
compilers=()
for c in "${CXX:-g++}" clang++; do
  if command -v "$c" >/dev/null; then compilers+=("$c"); else echo "SKIPPED compiler $c: not installed"; fi
done

: >"$tmp/jobs"
n=0
while read -r h need; do
  if [[ $need == *no-cxx20* ]]; then
    echo "FAIL $h: does not include <ringtree/core/cxx20.hpp> (directly, or through core/error.hpp or core/dtype.hpp): a C++17 build would not get ringtree's message" \
      >"$tmp/cxx20_${h//\//_}.fail"
  fi
  if [[ $need == *mpi* && -z $mpi_flags ]]; then echo "SKIPPED $h: needs MPI, which is not installed"; continue; fi
  if [[ $need == *ucx* && $ucx_found == 0 ]]; then echo "SKIPPED $h: needs UCX (libucx-dev), which is not installed"; continue; fi
  flags=""
  [[ $need == *mpi* ]] && flags=$mpi_flags
  [[ $need == *ucx* ]] && flags="$flags $ucx_flags"
  if [[ $need == *cuda* ]]; then
    if [ -z "$nvcc" ]; then echo "SKIPPED $h: includes <cuda_runtime.h> and nvcc is not found"; continue; fi
    printf '%s\t%s\t%s\n' "$nvcc" "$h" "$flags" >>"$tmp/jobs"; n=$((n + 1))
    continue
  fi
  for c in "${compilers[@]}"; do printf '%s\t%s\t%s\n' "$c" "$h" "$flags" >>"$tmp/jobs"; n=$((n + 1)); done
done <"$tmp/headers"

compile_one() {  # compiler, header, extra flags
  local cc=$1 h=$2 flags=$3 id
  id=$(basename "$cc")_${h//\//_}
  local out=$tmp/$id
  printf '#include <%s>\n' "$h" >"$out.tu"
  local rc=0
  if [[ $cc == *nvcc ]]; then
    # shellcheck disable=SC2086
    nice -n 19 "$cc" -x cu -std=c++20 --expt-relaxed-constexpr -I. $flags -Xcompiler -Wall,-Wextra,-Werror \
      -c "$out.tu" -o "$out.o" >"$out.log" 2>&1 || rc=$?
  else
    # shellcheck disable=SC2086
    nice -n 19 "$cc" -x c++ -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I. $flags "$out.tu" >"$out.log" 2>&1 || rc=$?
  fi
  if [ $rc -ne 0 ]; then
    { printf 'FAIL %s %s: ' "$(basename "$cc")" "$h"; grep -m1 -E 'error|warning' "$out.log" || head -1 "$out.log"; } >"$out.fail"
  fi
}
export -f compile_one
export tmp
tr '\t' '\n' <"$tmp/jobs" | xargs -d '\n' -n 3 -P 2 bash -c 'compile_one "$@"' _

fails=$(cat "$tmp"/*.fail 2>/dev/null || true)
echo "compiled $n header/compiler pairs (${compilers[*]}${nvcc:+ nvcc}) in $((SECONDS - t0)) s"
if [ -n "$fails" ]; then
  echo "$fails"
  for f in "$tmp"/*.fail; do
    [ -f "${f%.fail}.log" ] || continue
    echo "--- ${f%.fail}.log"; head -20 "${f%.fail}.log"
  done
  exit 1
fi
echo "every public header compiles alone"
