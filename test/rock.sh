#!/bin/sh
# The rock builds from the tree alone (LuaRocks cannot download here) and
# works from a plain lua5.4: luarocks make into a temporary tree, from a
# copy of the sources (luarocks leaves objects next to them), then run a
# command through a LocalSandbox.
set -eu
src="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
cp -R "$src/rockspec" "$src/lua" "$src/include" "$work/src/"
mkdir "$work/src/src"
cp "$src"/src/*.c "$src"/src/*.h "$work/src/src/"
cd "$work/src"
luarocks --lua-version=5.4 --tree "$work/tree" make rockspec/mastra-lua-scm-1.rockspec >"$work/make.log" 2>&1 || {
  cat "$work/make.log"
  exit 1
}
out=$(cd "$work" && env -u LD_PRELOAD \
  LUA_PATH_5_4="$work/tree/share/lua/5.4/?.lua;$work/tree/share/lua/5.4/?/init.lua" \
  LUA_CPATH_5_4="$work/tree/lib/lua/5.4/?.so" \
  lua5.4 -e '
    local mastra = require "mastra"
    assert(package.searchpath("mastra.core", package.cpath):find("/tree/", 1, true))
    local sb <close> = mastra.LocalSandbox.new{ workingDirectory = "sbx" }
    io.write(sb:executeCommand("echo", { "from the rock" }).stdout)')
if [ "$out" != "from the rock" ]; then
  echo "rock: expected 'from the rock', got '$out'" >&2
  exit 1
fi
echo "rock: built and ran from $work/tree"
