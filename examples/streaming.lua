-- Live output and a background process. executeCommand's onStdout sees
-- each chunk as the command prints it (the result still has all of it);
-- processes:spawn starts a command that keeps running while the script
-- goes on, and kill() ends it.
--
--   build/mastra-lua examples/streaming.lua
local mastra = require "mastra"

local sandbox <close> = mastra.PlatformSandbox.new{}
sandbox:start()
local t0 = mastra.now()
local function at() return ("[%5.1fs]"):format((mastra.now() - t0) / 1000) end

print(at() .. " a command that counts, one line every 0.3 s:")
local count = "for i in 1 2 3 4; do echo step $i; sleep 0.3; done"
local r = sandbox:executeCommand("sh", { "-c", count }, {
  onStdout = function(chunk)
    for line in chunk:gmatch("[^\n]+") do print(at() .. "   live: " .. line) end
  end })
print(("%s it exited with %d; the result kept %d bytes"):format(at(), r.exitCode, #r.stdout))

print(at() .. " a background process (a ticker):")
local ticker = sandbox.processes:spawn("sh", { "-c", "while true; do echo tick; sleep 0.2; done" })
mastra.sleep(700)
local so_far = select(2, ticker.stdout:gsub("tick", ""))
print(("%s   meanwhile the script ran on; the ticker printed %d ticks so far"):format(at(), so_far))
ticker:kill()
local done = ticker:wait()
print(("%s   killed: exit code %d"):format(at(), done.exitCode))
