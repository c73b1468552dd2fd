#!/usr/bin/env bash
# Regenerates the figures and tables of docs/algorithms.md from the tools,
# so that none is drawn by hand:
#   <!-- generated: ringtree-trace ARGS -->   ... <!-- end generated -->
#   <!-- generated: ringtree-model ARGS -->   ... <!-- end generated -->
# Usage: docs/figures.sh BUILD_DIR [FILE]   rewrites FILE (docs/algorithms.md)
#        docs/figures.sh BUILD_DIR --check  fails if the file is not up to date
set -eu
build=${1:?build dir}
doc=$(dirname "$0")/algorithms.md
check=0
[ "${2:-}" = --check ] && check=1
[ -n "${2:-}" ] && [ "$2" != --check ] && doc=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
skipping=0
while IFS= read -r line; do
  if [[ $line =~ ^'<!-- generated: '(ringtree-trace|ringtree-model)' '(.*)' -->'$ ]]; then
    tool=${BASH_REMATCH[1]} args=${BASH_REMATCH[2]}
    printf '%s\n' "$line" >>"$out"
    if [ "$tool" = ringtree-trace ]; then
      { echo '```text'; "$build/bench/$tool" $args; echo '```'; } >>"$out"
    else
      "$build/bench/$tool" $args >>"$out"
    fi
    skipping=1
    continue
  fi
  if [ "$line" = '<!-- end generated -->' ]; then skipping=0; fi
  [ $skipping = 1 ] || printf '%s\n' "$line" >>"$out"
done <"$doc"
if [ $check = 1 ]; then
  diff -u "$doc" "$out" || { echo "docs/algorithms.md is out of date: run docs/figures.sh $build"; exit 1; }
  echo "docs/algorithms.md figures: up to date"
else
  cp "$out" "$doc"
fi
