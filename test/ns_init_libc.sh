#!/bin/sh
# test/ns_init_libc.sh BINARY: the musl build of mastra-ns-init
# (CMakeLists.txt) is static and holds nothing of glibc.
set -eu
bin=$1
if readelf -l "$bin" | grep -q INTERP; then
  echo "ns_init_libc: $bin is dynamically linked (want a static musl program)" >&2
  exit 1
fi
if grep -a -q -e GLIBC_ -e 'GNU C Library' "$bin"; then
  echo "ns_init_libc: $bin holds glibc (want musl: is musl-gcc the linker?)" >&2
  exit 1
fi
echo "ns_init_libc: $bin is static musl"
