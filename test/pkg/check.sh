#!/bin/sh
# Install the build into a temporary prefix, then build test/pkg/host.c
# against it as an embedder would, and run it:
#   pkgconfig: cc host.c $(pkg-config --cflags --libs mastra)
#   cmake:     find_package(mastra), mastra::mastra and mastra::mastra_static
# Usage: check.sh pkgconfig|cmake BUILD_DIR C_COMPILER VERSION [FLAGS]
# FLAGS: what the host needs besides, e.g. the build's -fsanitize= option.
set -eu
mode="$1"
build="$2"
cc="$3"
version="$4"
flags_extra="${5:-}"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

run() { # run LABEL COMMAND...: log the output, show it on failure
  label="$1"
  shift
  "$@" >"$work/$label.log" 2>&1 || {
    echo "pkg $mode: $label failed: $*" >&2
    cat "$work/$label.log" >&2
    exit 1
  }
}

expect() { # expect HOST: the version twice (Lua and C) and a task that ran
  out=$("$@")
  if [ "$out" != "mastra $version $version stepped" ]; then
    echo "pkg $mode: $*: expected 'mastra $version $version stepped', got '$out'" >&2
    exit 1
  fi
  echo "pkg $mode: $(basename "$1"): $out"
}

loads() { # loads HOST LIBDIR: the host runs on the installed libmastra.so
  ldd "$1" | grep -q "$2/libmastra.so" || {
    echo "pkg $mode: $1 does not load $2/libmastra.so:" >&2
    ldd "$1" >&2
    exit 1
  }
}

run install cmake --install "$build" --prefix "$prefix"
case "$mode" in
pkgconfig)
  pc=$(find "$prefix" -name mastra.pc)
  [ -n "$pc" ] || { echo "pkg: no mastra.pc under $prefix" >&2; exit 1; }
  export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  flags=$(pkg-config --cflags --libs mastra)
  libdir=$(pkg-config --variable=libdir mastra)
  # shellcheck disable=SC2086 # the flags are words
  run compile "$cc" -Wall -Wextra -Werror $flags_extra -o "$work/host" "$here/host.c" $flags
  export LD_LIBRARY_PATH="$libdir"
  expect "$work/host"
  loads "$work/host" "$libdir"
  ;;
cmake)
  run configure cmake -S "$here" -B "$work/build" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror $flags_extra" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags_extra"
  run build cmake --build "$work/build" -j2
  expect "$work/build/host"
  loads "$work/build/host" "$(dirname "$(find "$prefix" -name libmastra.so)")"
  expect "$work/build/host_static"
  if ldd "$work/build/host_static" | grep -q libmastra.so; then
    echo "pkg cmake: host_static loads libmastra.so" >&2
    exit 1
  fi
  ;;
*)
  echo "usage: check.sh pkgconfig|cmake BUILD_DIR C_COMPILER VERSION [FLAGS]" >&2
  exit 2
  ;;
esac
