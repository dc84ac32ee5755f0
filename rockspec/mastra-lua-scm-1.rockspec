-- luarocks make --lua-version=5.4 rockspec/mastra-lua-scm-1.rockspec
-- builds from the tree alone (nothing is downloaded) with CMake:
-- CMakeLists.txt is the one list of the Lua modules and the C sources. The
-- rock installs mastra.core, the Lua modules, and the mastra-lua and
-- mastra-platform binaries (into the tree's bin/, where the runtime finds
-- the platform: lua5.4 examples/hello.lua works with no other step), and
-- the man pages (in the rock's own directory). docs/guide-rock.md;
-- test/rock.sh (CTest: rock) installs, runs, packs and removes it.
rockspec_format = "3.0"
package = "mastra-lua"
version = "scm-1"
source = {
  url = "git+https://example.invalid/mastra-lua.git",
}
description = {
  summary = "Drive Mastra Platform sandboxes and workspaces from Lua 5.4",
  detailed = [[
A C core (event loop, child processes, libcurl, wslay, cJSON) with a Lua
facade: LocalSandbox, tasks (mastra.spawn, mastra.map, ...), and, on the
platform, PlatformSandbox and PlatformFilesystem.
]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
external_dependencies = {
  -- library only: Debian keeps curl.h in a multiarch directory that the
  -- header check does not search
  CURL = { library = "curl" },
  CJSON = { header = "cjson/cJSON.h" },
  WSLAY = { header = "wslay/wslay.h" },
  PCRE2 = { header = "pcre2.h" },
  MHD = { header = "microhttpd.h" },   -- mastra-platform
}
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    CMAKE_INSTALL_BINDIR = "$(BINDIR)",
    MASTRA_INSTALL_CMOD = "$(LIBDIR)",    -- mastra/core.so
    MASTRA_INSTALL_LMOD = "$(LUADIR)",    -- mastra/*.lua
    MASTRA_INSTALL_EMBEDDING = "OFF",     -- libmastra is for cmake --install
    MASTRA_LUA_INCDIR = "$(LUA_INCDIR)",
    BUILD_TESTING = "OFF",                -- no busted or luacheck needed
    MASTRA_BUILD_EXAMPLES = "OFF",
  },
}
test = {
  type = "command",
  command = "scripts/test",
}
