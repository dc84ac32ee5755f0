#!/bin/sh
# The rock builds from the tree alone (LuaRocks cannot download here) through
# CMake, and works from a plain lua5.4: luarocks make into a temporary tree,
# from a copy of what the CMake build reads (luarocks builds inside the
# source tree), then run a command through a LocalSandbox, and the runner
# and the platform binary the rock installs.
set -eu
src="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
cp -R "$src/CMakeLists.txt" "$src/cmake" "$src/src" "$src/include" "$src/lua" \
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
echo "rock: built and ran from $work/tree"
