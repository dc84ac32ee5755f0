#!/bin/sh
# expect.sh EXPECTED COMMAND [ARGS...]: the command exits 0 and its standard
# output is exactly EXPECTED (lines separated by \n).
set -u
expected="$1"
shift
out=$("$@")
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "expect: '$*' exited with $rc" >&2
  exit 1
fi
if [ "$out" != "$(printf '%b' "$expected")" ]; then
  echo "expect: '$*' printed:" >&2
  printf '%s\n' "$out" >&2
  echo "expect: instead of:" >&2
  printf '%b\n' "$expected" >&2
  exit 1
fi
