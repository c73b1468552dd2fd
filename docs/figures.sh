#!/usr/bin/env bash
# Regenerates the figures and tables of docs/algorithms.md from the tools,
# so that none is drawn by hand:
#   <!-- generated: ringtree-trace ARGS -->   ... <!-- end generated -->
#   <!-- generated: ringtree-model ARGS -->   ... <!-- end generated -->
#   <!-- generated: bench/sim_predicted.sh --> ... <!-- end generated -->  (ringtree-sim's tables)
#   <!-- figure: figures/NAME.svg = ringtree-trace ARGS -->
#       every step of the call as one SVG, drawn by the interactive page's
#       own renderer (ringtree-trace --print-renderer) under Node.js
#   <!-- page: pages/NAME.html = ringtree-trace ARGS -->
#       the interactive page itself (ringtree-trace --html)
# docs/errors.md's generated lists (the algorithm names) come the same way,
# and so do README.md's tables of the algorithms and the RINGTREE_* variables.
# Usage: docs/figures.sh BUILD_DIR [FILE]   rewrites FILE (default: docs/algorithms.md, docs/errors.md, README.md)
#                                            and its figures and pages
#        docs/figures.sh BUILD_DIR --check  fails if any of them is not up to date
set -eu
build=${1:?build dir}
docs=$(cd "$(dirname "$0")" && pwd)
check=0
[ "${2:-}" = --check ] && check=1
files=("$docs/algorithms.md" "$docs/errors.md" "$docs/../README.md")
[ -n "${2:-}" ] && [ "$2" != --check ] && files=("$2")
out=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$out" "$work"' EXIT
stale=0
# made FILE: compare it with, or write it to, docs/FILE
made() {
  if [ $check = 1 ]; then
    cmp -s "$work/made" "$docs/$1" || { echo "docs/$1 is out of date"; stale=1; }
  else
    mkdir -p "$(dirname "$docs/$1")" && cp "$work/made" "$docs/$1"
  fi
}
renderer=""
for doc in "${files[@]}"; do
: >"$out"
skipping=0
while IFS= read -r line; do
  if [[ $line =~ ^'<!-- figure: '([^ ]+)' = ringtree-trace '(.*)' -->'$ ]]; then
    file=${BASH_REMATCH[1]} args=${BASH_REMATCH[2]}
    command -v node >/dev/null || { echo "docs/figures.sh: no node (Debian: nodejs) to draw $file"; exit 1; }
    if [ -z "$renderer" ]; then renderer=$work/renderer.js; "$build/tools/ringtree-trace" --print-renderer >"$renderer"; fi
    # shellcheck disable=SC2086  # ARGS: words on purpose
    "$build/tools/ringtree-trace" $args --json "$work/story.json" >/dev/null
    node -e 'const RT = require(process.argv[1]); process.stdout.write(RT.strip(JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"))));' \
      "$renderer" "$work/story.json" >"$work/made"
    made "$file"
  elif [[ $line =~ ^'<!-- page: '([^ ]+)' = ringtree-trace '(.*)' -->'$ ]]; then
    file=${BASH_REMATCH[1]} args=${BASH_REMATCH[2]}
    # shellcheck disable=SC2086
    "$build/tools/ringtree-trace" $args --html "$work/made" >/dev/null
    made "$file"
  fi
  if [ "$line" = '<!-- generated: bench/sim_predicted.sh -->' ]; then  # the simulator's tables (about 20 s)
    printf '%s\n' "$line" >>"$out"
    "$docs/../bench/sim_predicted.sh" "$build" >>"$out"
    skipping=1
    continue
  fi
  if [[ $line =~ ^'<!-- generated: '(ringtree-trace|ringtree-model)' '(.*)' -->'$ ]]; then
    tool=${BASH_REMATCH[1]} args=${BASH_REMATCH[2]}
    printf '%s\n' "$line" >>"$out"
    if [ "$tool" = ringtree-trace ]; then
      { echo '```text'; "$build/tools/$tool" $args; echo '```'; } >>"$out"
    else
      "$build/tools/$tool" $args >>"$out"
    fi
    skipping=1
    continue
  fi
  if [ "$line" = '<!-- end generated -->' ]; then skipping=0; fi
  [ $skipping = 1 ] || printf '%s\n' "$line" >>"$out"
done <"$doc"
if [ $check = 1 ]; then
  diff -u "$doc" "$out" || stale=1
else
  cp "$out" "$doc"
fi
done
if [ $check = 1 ]; then
  [ $stale = 0 ] || { echo "docs/algorithms.md, docs/errors.md, README.md or the figures are out of date: run docs/figures.sh $build"; exit 1; }
  echo "docs/algorithms.md, docs/errors.md and README.md: generated parts up to date"
fi
