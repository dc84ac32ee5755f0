#!/bin/sh
# The rock builds from the tree alone (LuaRocks cannot download here) through
# CMake, and works from a plain lua5.4: luarocks make into a temporary tree,
# from a copy of what the CMake build reads (luarocks builds inside the
# source tree), then run a command through a LocalSandbox, and the runner
# and the platform binary the rock installs.
#
# Then, as a new user would, with a fresh HOME and a PATH with nothing of
# ours: examples/hello.lua under plain lua5.4 starts the mastra-platform
# that the rock installed (found in the tree's bin/); the same from a
# binary rock packed from that tree and installed into another; and
# `luarocks remove` leaves nothing of the rock in either tree.
set -eu
src="$1"
work=$(mktemp -d)
# the local platforms the hello runs start (daemons, not our children)
cleanup() {
  for f in "$work"/home*/.local/state/mastra/platform.state; do
    [ -f "$f" ] || continue
    pid=$(sed -n 's/^pid=//p' "$f")
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/src"
cp -R "$src/CMakeLists.txt" "$src/cmake" "$src/src" "$src/include" "$src/lua" "$src/man" \
  "$src/rockspec" "$work/src/"
cd "$work/src"
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
  luarocks --lua-version=5.4 --tree "$work/tree" make rockspec/mastra-lua-scm-1.rockspec \
  >"$work/make.log" 2>&1 || {
  cat "$work/make.log"
  exit 1
}
out=$(cd "$work" && env -u LD_PRELOAD \
  LUA_PATH_5_4="$work/tree/share/lua/5.4/?.lua;$work/tree/share/lua/5.4/?/init.lua" \
  LUA_CPATH_5_4="$work/tree/lib/lua/5.4/?.so" \
  lua5.4 -e '
    local mastra = require "mastra"
    assert(package.searchpath("mastra.core", package.cpath):find("/tree/", 1, true))
    assert(package.searchpath("mastra", package.path):find("/tree/", 1, true))
    local sb <close> = mastra.LocalSandbox.new{ workingDirectory = "sbx" }
    io.write(sb:executeCommand("echo", { "from the rock" }).stdout)')
if [ "$out" != "from the rock" ]; then
  echo "rock: expected 'from the rock', got '$out'" >&2
  exit 1
fi
# the binaries: the runner has the same modules built in
version=$(env -u LD_PRELOAD \
  LUA_PATH_5_4="$work/tree/share/lua/5.4/?.lua;$work/tree/share/lua/5.4/?/init.lua" \
  LUA_CPATH_5_4="$work/tree/lib/lua/5.4/?.so" \
  lua5.4 -e 'io.write(require("mastra")._VERSION)')
out=$(env -u LD_PRELOAD LUA_PATH_5_4= LUA_CPATH_5_4= \
  "$work/tree/bin/mastra-lua" -e 'io.write(require("mastra")._VERSION)')
if [ -z "$version" ] || [ "$out" != "$version" ]; then
  echo "rock: expected mastra-lua to print the module's version '$version', got '$out'" >&2
  exit 1
fi
[ -x "$work/tree/bin/mastra-platform" ] || {
  echo "rock: no mastra-platform in $work/tree/bin" >&2
  exit 1
}
for page in mastra-lua.1 mastra-platform.1; do
  [ -n "$(find "$work/tree/lib/luarocks" -name "$page")" ] || {
    echo "rock: the man page $page is not in the rock's directory" >&2
    exit 1
  }
done

# hello.lua under plain lua5.4: HOME fresh, only the tree's Lua paths (and
# the tests' base of the namespaces driver, when CTest names one: a server
# never builds a base inside a test)
hello() { # tree home
  mkdir -p "$2"
  out=$(cd "$2" && env -i HOME="$2" PATH=/usr/bin:/bin \
    ${MASTRA_PLATFORM_BASE:+MASTRA_PLATFORM_BASE="$MASTRA_PLATFORM_BASE"} \
    LUA_PATH_5_4="$1/share/lua/5.4/?.lua;$1/share/lua/5.4/?/init.lua" \
    LUA_CPATH_5_4="$1/lib/lua/5.4/?.so" \
    lua5.4 "$src/examples/hello.lua" 2>"$2/stderr") || {
    echo "rock: examples/hello.lua failed from $1:" >&2
    cat "$2/stderr" >&2
    exit 1
  }
  case "$out" in
  "Hello, world!"*) ;;
  *)
    echo "rock: expected hello.lua to print 'Hello, world!', got '$out'" >&2
    cat "$2/stderr" >&2
    exit 1
    ;;
  esac
  state="$2/.local/state/mastra/platform.state"
  pid=$(sed -n 's/^pid=//p' "$state")
  exe=$(readlink "/proc/$pid/exe")
  if [ "$exe" != "$(readlink -f "$1/bin/mastra-platform")" ]; then
    echo "rock: the local platform runs $exe, not the rock's $1/bin/mastra-platform" >&2
    exit 1
  fi
  grep -q "^bin=$exe\$" "$state" || {
    echo "rock: $state does not record bin=$exe" >&2
    exit 1
  }
  # stop it, and wait until it has gone (it is not our child)
  kill "$pid"
  i=0
  while kill -0 "$pid" 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -gt 150 ]; then
      echo "rock: the local platform $pid did not stop within 15 s" >&2
      exit 1
    fi
    sleep 0.1
  done
}
hello "$work/tree" "$work/home1"

# a binary rock packed from the tree, installed into another tree
mkdir "$work/pack"
(cd "$work/pack" && luarocks --lua-version=5.4 --tree "$work/tree" pack mastra-lua \
  >"$work/pack.log" 2>&1) || {
  cat "$work/pack.log"
  exit 1
}
rockfile=$(ls "$work"/pack/mastra-lua-*.rock)
luarocks --lua-version=5.4 --tree "$work/tree2" install "$rockfile" >"$work/install.log" 2>&1 || {
  cat "$work/install.log"
  exit 1
}
hello "$work/tree2" "$work/home2"

# luarocks remove takes everything the rock installed
for t in "$work/tree" "$work/tree2"; do
  luarocks --lua-version=5.4 --tree "$t" remove mastra-lua >"$work/remove.log" 2>&1 || {
    cat "$work/remove.log"
    exit 1
  }
  left=$(cd "$t" && find . -type f ! -path './lib/luarocks/*')
  if [ -n "$left" ]; then
    echo "rock: luarocks remove left files in $t:" >&2
    echo "$left" >&2
    exit 1
  fi
done
echo "rock: built, ran hello.lua from the tree and from a packed rock, and removed it ($work)"
