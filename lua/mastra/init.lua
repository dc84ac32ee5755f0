-- mastra: Mastra Platform workspaces for Lua 5.4.
--
--   local mastra = require "mastra"
--   local sb <close> = mastra.LocalSandbox.new{}
--   print(sb:executeCommand("echo", { "hello" }).stdout)
--
-- Blocking-looking calls yield inside a task (mastra.spawn, mastra.run) and
-- drive the event loop themselves outside one. See docs/api.md.
local core = require "mastra.core"
local task = require "mastra.task"

local mastra = {
  _NAME = "mastra",
  _VERSION = core._VERSION,

  errors = require "mastra.errors",
  LocalSandbox = require "mastra.local_sandbox",
  PlatformSandbox = require "mastra.platform_sandbox",
  PlatformFilesystem = require "mastra.platform_filesystem",
  Template = require "mastra.template",
  LocalFilesystem = require "mastra.local_filesystem",
  SandboxFilesystem = require "mastra.sandbox_filesystem",
  Workspace = require "mastra.workspace",
  localPlatform = require("mastra.local_platform").ensure,
  fleet = require "mastra.fleet",

  spawn = task.spawn,
  all = task.all,
  map = task.map,
  sleep = task.sleep,
  run = task.run,
  step = task.step,
  nextTimeout = task.nextTimeout,
  currentTask = task.current,
  isTask = task.isTask,
  now = core.now,
  quote = require("mastra.shell").quote,
}

-- mastra.Agent (lua/mastra/agent/) is loaded when first used: scripts that
-- drive sandboxes only do not load the model wires
setmetatable(mastra, {
  __index = function(t, k)
    if k == "Agent" then
      local Agent = require "mastra.agent"
      rawset(t, "Agent", Agent)
      return Agent
    end
  end,
})

return mastra
