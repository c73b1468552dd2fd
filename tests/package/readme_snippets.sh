#!/usr/bin/env bash
# Every ```cpp block of README.md compiles as written. The convention (keep
# README snippets to it):
#   - a block that defines `int main` is compiled as it is;
#   - any other block is a complete fragment: its #include lines go first,
#     the rest becomes the body of `int main(int argc, char** argv)`. So a
#     fragment declares everything it uses (argc and argv excepted) and
#     includes every header it needs.
# Compiled with g++ -std=c++20 -fsyntax-only -Wall -Wextra -Iinclude (but no
# unused-variable warnings: a fragment may name what it does not use; warnings
# are shown, not fatal); blocks that include an MPI header (<ringtree/mpi.hpp>, transport/mpi.hpp,
# shm_mpi.hpp, cluster.hpp, <mpi.h>) get MPI's flags as ringtree-mpi gives them; blocks that
# include cuda_ipc.hpp or <cuda_runtime.h> are compiled by nvcc (-c), or skipped
# with a message without it. Two compiles at a time, niced.
# Usage: readme_snippets.sh SOURCE_DIR
set -euo pipefail
src=$(cd "${1:?usage: readme_snippets.sh SOURCE_DIR}" && pwd)
tmp=$(mktemp -d /tmp/ringtree-readme-snippets-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
t0=$SECONDS

# One file per block: snippet-<README line>.{cpp,cu}, and its kind in $tmp/list.
python3 - "$src/README.md" "$tmp" >"$tmp/list" <<'PY'
import re, sys
readme, out = sys.argv[1], sys.argv[2]
lines = open(readme, encoding='utf-8').read().split('\n')
blocks, cur, start = [], None, 0
for no, line in enumerate(lines, 1):
    if cur is None and line.strip() == '```cpp':
        cur, start = [], no
    elif cur is not None and line.strip() == '```':
        blocks.append((start, cur)); cur = None
    elif cur is not None:
        cur.append(line)
if cur is not None:
    sys.exit(f'README.md:{start}: ```cpp block never closed')
for start, body in blocks:
    text = '\n'.join(body)
    cuda = re.search(r'#\s*include\s*[<"](ringtree/transport/cuda_ipc\.hpp|cuda_runtime\.h)[>"]', text)
    mpi = re.search(r'#\s*include\s*[<"](ringtree/(mpi|transport/(mpi|shm_mpi|cluster))\.hpp|mpi\.h)[>"]', text)
    if re.search(r'\bint\s+main\s*\(', text):
        tu = f'// README.md:{start}, as written\n#line {start + 1} "README.md"\n{text}\n'
    else:
        inc = [(i, l) for i, l in enumerate(body) if re.match(r'\s*#\s*include', l)]
        rest = [(i, l) for i, l in enumerate(body) if not re.match(r'\s*#\s*include', l)]
        tu = f'// README.md:{start}, wrapped\n'
        for i, l in inc:
            tu += f'#line {start + 1 + i} "README.md"\n{l}\n'
        tu += 'int main(int argc, char** argv) {\n  (void)argc, (void)argv;\n'
        for i, l in rest:
            tu += f'#line {start + 1 + i} "README.md"\n{l}\n'
        tu += '}\n'
    name = f'{out}/snippet-{start}.' + ('cu' if cuda else 'cpp')
    open(name, 'w').write(tu)
    print(name, 'mpi' if mpi else '-', 'cuda' if cuda else '-')
PY
n=$(wc -l <"$tmp/list")
[ "$n" -gt 0 ] || { echo "FAIL: no \`\`\`cpp block found in README.md"; exit 1; }

mpi_flags=""
if pkg-config --exists mpi 2>/dev/null; then mpi_flags=$(pkg-config --cflags mpi)
elif command -v mpicxx >/dev/null; then mpi_flags=$(mpicxx --showme:compile 2>/dev/null || true); fi
[ -n "$mpi_flags" ] && mpi_flags="$mpi_flags -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1"
nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)

: >"$tmp/jobs"
compiled=0
while read -r file mpi cuda; do
  where="README.md:${file##*snippet-}"; where=${where%.*}
  if [ "$mpi" = mpi ] && [ -z "$mpi_flags" ]; then echo "SKIPPED $where: needs MPI, which is not installed"; continue; fi
  if [ "$cuda" = cuda ] && [ -z "$nvcc" ]; then echo "SKIPPED $where: CUDA, and nvcc is not found"; continue; fi
  flags=""; [ "$mpi" = mpi ] && flags=$mpi_flags
  printf '%s\t%s\n' "$file" "$flags" >>"$tmp/jobs"; compiled=$((compiled + 1))
done <"$tmp/list"

compile_one() {  # file, extra flags
  local f=$1 flags=$2 rc=0
  if [[ $f == *.cu ]]; then
    # shellcheck disable=SC2086
    nice -n 19 "$nvcc" -std=c++20 --expt-relaxed-constexpr -I"$src/include" $flags -c "$f" -o "$f.o" >"$f.log" 2>&1 || rc=$?
  else
    # shellcheck disable=SC2086
    nice -n 19 "${CXX:-g++}" -std=c++20 -fsyntax-only -Wall -Wextra -Wno-unused-variable -Wno-unused-but-set-variable -I"$src/include" $flags "$f" >"$f.log" 2>&1 || rc=$?
  fi
  if [ $rc -ne 0 ]; then
    { printf 'FAIL %s (%s):\n' "$(head -1 "$f" | sed 's|^// ||')" "$f"; grep -m5 'error' "$f.log" || head -5 "$f.log"; } >"$f.fail"
  elif [ -s "$f.log" ]; then
    printf 'warnings from %s:\n' "$(head -1 "$f" | sed 's|^// ||')"; head -10 "$f.log"
  fi
}
export -f compile_one
export src nvcc
tr '\t' '\n' <"$tmp/jobs" | xargs -d '\n' -n 2 -P 2 bash -c 'compile_one "$@"' _

echo "compiled $compiled of the $n \`\`\`cpp blocks of README.md in $((SECONDS - t0)) s"
if ls "$tmp"/*.fail >/dev/null 2>&1; then
  cat "$tmp"/*.fail
  exit 1
fi
echo "every README snippet compiles"
