-- Reconnecting: a sandbox outlives the script that made it, and another
-- run attaches to it by its sandboxId.
--
--   build/mastra-lua examples/reconnect.lua              # prints a sandboxId
--   build/mastra-lua examples/reconnect.lua sbx_...      # attaches, destroys
--
-- The first run leaves the sandbox running (with a 10 minute idle timeout,
-- so it goes away by itself if the second run never comes); the second run
-- reads what the first one wrote, then destroys it.
local mastra = require "mastra"

local id = arg[1]
if id == nil then
  local sandbox = mastra.PlatformSandbox.new{ idleTimeoutMinutes = 10 }
  sandbox:start()
  sandbox:executeCommand("sh", { "-c", "date -u +%H:%M:%S > first-run.txt" })
  -- a started sandbox is destroyed when the script ends, unless detached
  local sandboxId = sandbox:detach()
  print("sandboxId: " .. sandboxId)
  print("left running; attach with:")
  print("  build/mastra-lua examples/reconnect.lua " .. sandboxId)
  return
end

local sandbox <close> = mastra.PlatformSandbox.new{ sandboxId = id }
local how = sandbox:start()
print(("attached to %s: %s"):format(id, how.outcome))
local r = sandbox:executeCommand("cat", { "first-run.txt" })
if not r.success then error("first-run.txt is gone: " .. r.stderr) end
print("the first run wrote at " .. r.stdout:gsub("\n$", ""))
print("destroying it")
