#!/usr/bin/env bash
# A cache directory that cannot be used is no error (docs/errors.md): with
# HOME=/dev/null and no RINGTREE_CACHE_DIR or XDG_CACHE_HOME, the cache is
# /dev/null/.cache/ringtree (ENOTDIR). The README's first example must run
# and succeed, measuring in memory, with exactly one warning that names the
# path and the errno.
#   cache_unusable.sh EXAMPLE   (build/examples/local_allreduce)
set -u
prog=$1
fail() { echo "FAIL: cache_unusable.sh: $*"; exit 1; }
err=$(mktemp)
trap 'rm -f "$err"' EXIT
out=$(env -u RINGTREE_CACHE_DIR -u XDG_CACHE_HOME -u RINGTREE_MODEL_FILE HOME=/dev/null "$prog" 2>"$err")
rc=$?
cat "$err"
echo "$out"
[ $rc -eq 0 ] || fail "the example exited $rc"
grep -q "mean over 4 ranks: 1.5" <<<"$out" || fail "the example printed no result"
warnings=$(grep -c "warning" "$err")
[ "$warnings" -eq 1 ] || fail "$warnings warnings, expected one"
grep -q "/dev/null/.cache/ringtree" "$err" || fail "the warning does not name the path"
grep -q "Not a directory" "$err" || fail "the warning does not name the errno (ENOTDIR)"
echo "ok: an unusable cache is one warning, and the example ran"
