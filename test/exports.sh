#!/bin/sh
# libmastra exports the mastra_ embedding API and luaopen_* and nothing else;
# every function that include/mastra.h marks MASTRA_API is among them, and
# the C module exports luaopen_mastra_core; libmastra has a versioned soname.
# Usage: exports.sh LIBMASTRA CORE_SO MASTRA_H
set -eu
lib="$1"
core="$2"
header="$3"
status=0

defined() { nm -D --defined-only "$1" | awk 'NF == 3 { print $3 }'; }

extra=$(defined "$lib" | grep -Ev '^(mastra_|luaopen_)' || true)
if [ -n "$extra" ]; then
  echo "exports: $lib exports more than mastra_* and luaopen_*:" >&2
  echo "$extra" >&2
  status=1
fi
# a versioned soname: libmastra.so.MAJOR (from 1.0) or libmastra.so.0.MINOR
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
case "$soname" in
libmastra.so.[0-9]*) ;;
*)
  echo "exports: $lib has no versioned soname (SONAME '$soname')" >&2
  status=1
  ;;
esac
api=$(sed -n 's/^MASTRA_API .*[ *]\([A-Za-z_0-9]*\)(.*/\1/p' "$header")
if [ -z "$api" ]; then
  echo "exports: no MASTRA_API function in $header" >&2
  exit 1
fi
for sym in $api; do
  if ! defined "$lib" | grep -qx "$sym"; then
    echo "exports: $lib does not export $sym" >&2
    status=1
  fi
done
if ! defined "$core" | grep -qx luaopen_mastra_core; then
  echo "exports: $core does not export luaopen_mastra_core" >&2
  status=1
fi
[ "$status" = 0 ] && echo "exports: $(defined "$lib" | wc -l) symbols, all mastra_* or luaopen_*"
exit "$status"
