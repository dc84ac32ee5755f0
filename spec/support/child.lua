-- Child processes of the specs that run scripts under mastra-lua or
-- lua5.4 with the module of this build (teardown, cold start, descriptor
-- limits).
--
--   local child = require "spec.support.child"
--   local ctx = child.context{ platform = true }  -- in setup()
--   ctx.sb:executeCommand(..., { env = ctx:env() }); ctx:close()  -- teardown()
local mastra = require "mastra"
local platform = require "spec.support.platform"

local child = {}

--- The runner binary: MASTRA_LUA (CTest sets it) for "mastra-lua", else
-- "lua5.4".
function child.binary(runner)
  if runner ~= "mastra-lua" then return "lua5.4" end
  local bin = os.getenv("MASTRA_LUA")
  assert(bin and bin ~= "", "MASTRA_LUA must be set (CTest sets it)")
  return bin
end

local Context = {}
Context.__index = Context

--- A scratch directory, a LocalSandbox in it that runs the children, and
-- (opts.platform) a mastra-platform they use.
function child.context(opts)
  child.binary("mastra-lua")
  local self = setmetatable({}, Context)
  if opts and opts.platform then self.srv = platform.start() end
  self.dir = platform.tmpdir()
  self.sb = mastra.LocalSandbox.new{ workingDirectory = self.dir, timeout = 60000 }
  self.sb:start()
  return self
end

--- The environment of a child: the module of this build, the sanitizer
-- settings, the tests' base and driver for the local platforms it starts
-- (a server never builds a base inside a test), the platform (if any) as
-- project "proj", environment "env", then `extra`.
function Context:env(extra)
  local e = {
    LUA_PATH_5_4 = os.getenv("LUA_PATH_5_4"),
    LUA_CPATH_5_4 = os.getenv("LUA_CPATH_5_4"),
  }
  if self.srv then
    e.MASTRA_PLATFORM_ACCESS_TOKEN = self.srv.token
    e.MASTRA_WORKSPACE_PROXY_URL = self.srv.url
    e.MASTRA_PROJECT_ID = "proj"
    e.MASTRA_ENVIRONMENT_ID = "env"
  end
  for _, name in ipairs{ "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "LD_PRELOAD",
    "MASTRA_PLATFORM_BASE", "MASTRA_PLATFORM_DRIVER" } do
    e[name] = os.getenv(name)
  end
  for k, v in pairs(extra or {}) do e[k] = v end
  return e
end

function Context:close()
  if self.sb then self.sb:destroy() end
  if self.srv then self.srv:close() end
  if self.dir then platform.rm_rf(self.dir) end
end

return child
