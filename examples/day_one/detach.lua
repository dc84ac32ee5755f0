-- Leaving a sandbox running for a later script: the first run starts a
-- sandbox, leaves some state in it and detach()es it (so neither the end
-- of the script nor <close> destroys it), printing its sandboxId; a later
-- run attaches with PlatformSandbox.new{sandboxId = ...}, finds the state,
-- and destroys the sandbox. The idle timeout reaps it if no run comes.
--
--   build/mastra-lua examples/day_one/detach.lua          # prints an id
--   build/mastra-lua examples/day_one/detach.lua sbx_...  # attaches
local mastra = require "mastra"

local id = arg[1]
if id == nil then
  local sb = mastra.PlatformSandbox.new{ idleTimeoutMinutes = 10 }
  sb:start()
  sb:executeCommand("sh", { "-c", "echo 'left by the first run' > state.txt" })
  print("sandboxId: " .. sb:detach())
  return
end

local sb <close> = mastra.PlatformSandbox.new{ sandboxId = id }
print(("attached: %s"):format(sb:start().outcome))
print("state.txt: " .. sb:executeCommand("cat", { "state.txt" }).stdout:gsub("\n$", ""))
-- <close> destroys it now
