-- Checkpoints: a sandbox with a stable `id` keeps its files across
-- destroy() and start(). The first start creates it; destroy() releases it
-- and keeps a checkpoint under the id; the next start restores it.
--
--   build/mastra-lua examples/checkpoint.lua
--
-- At the end, destroy{keepCheckpoint = false} removes the checkpoint too,
-- so every run starts empty.
local mastra = require "mastra"

local sandbox <close> = mastra.PlatformSandbox.new{ id = "checkpoint-example" }

-- start() answers {outcome = "created"}, with restored = true and the
-- checkpointName when the creation restored a checkpoint
local function how(started)
  if started.restored then return "restored from " .. started.checkpointName end
  return started.outcome .. ", empty"
end

print("1. start: " .. how(sandbox:start()))
sandbox:executeCommand("sh", { "-c", "echo 'notes from the first start' > notes.txt" })
print("   wrote notes.txt")

sandbox:destroy() -- the checkpoint of "checkpoint-example" is kept
print("2. destroyed; status " .. sandbox.status)

print("3. start: " .. how(sandbox:start()))
local notes = sandbox:executeCommand("cat", { "notes.txt" })
print("   notes.txt: " .. notes.stdout:gsub("\n$", ""))

sandbox:destroy{ keepCheckpoint = false }
print("4. destroyed with its checkpoint; the next run starts empty")
