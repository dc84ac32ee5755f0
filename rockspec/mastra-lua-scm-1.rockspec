-- luarocks make --lua-version=5.4 rockspec/mastra-lua-scm-1.rockspec
-- builds the C module from the tree alone (nothing is downloaded).
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
}
build = {
  type = "builtin",
  modules = {
    ["mastra"] = "lua/mastra/init.lua",
    ["mastra.errors"] = "lua/mastra/errors.lua",
    ["mastra.options"] = "lua/mastra/options.lua",
    ["mastra.common"] = "lua/mastra/common.lua",
    ["mastra.fs_common"] = "lua/mastra/fs_common.lua",
    ["mastra.shell"] = "lua/mastra/shell.lua",
    ["mastra.task"] = "lua/mastra/task.lua",
    ["mastra.output"] = "lua/mastra/output.lua",
    ["mastra.process"] = "lua/mastra/process.lua",
    ["mastra.local_sandbox"] = "lua/mastra/local_sandbox.lua",
    ["mastra.local_platform"] = "lua/mastra/local_platform.lua",
    ["mastra.platform_client"] = "lua/mastra/platform_client.lua",
    ["mastra.direct_exec"] = "lua/mastra/direct_exec.lua",
    ["mastra.platform_sandbox"] = "lua/mastra/platform_sandbox.lua",
    ["mastra.workspace"] = "lua/mastra/workspace/init.lua",
    ["mastra.workspace.glob"] = "lua/mastra/workspace/glob.lua",
    ["mastra.workspace.schema"] = "lua/mastra/workspace/schema.lua",
    ["mastra.workspace.result"] = "lua/mastra/workspace/result.lua",
    ["mastra.workspace.fs_tools"] = "lua/mastra/workspace/fs_tools.lua",
    ["mastra.workspace.sandbox_tools"] = "lua/mastra/workspace/sandbox_tools.lua",
    ["mastra.platform_filesystem"] = "lua/mastra/platform_filesystem.lua",
    ["mastra.local_filesystem"] = "lua/mastra/local_filesystem.lua",
    ["mastra.core"] = {
      sources = { "src/loop.c", "src/proc.c", "src/sha1.c", "src/http.c", "src/ws.c",
        "src/lcore.c", "src/ljson.c", "src/lnet.c", "src/lregex.c", "src/lfs.c" },
      incdirs = { "include", "src", "$(CJSON_INCDIR)", "$(WSLAY_INCDIR)" },
      libdirs = { "$(CURL_LIBDIR)" },
      libraries = { "curl", "cjson", "wslay", "pcre2-8" },
    },
  },
}
test = {
  type = "command",
  command = "scripts/test",
}
