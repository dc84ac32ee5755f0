-- The LocalSandbox figures of bench/run (the same round trips as the peer,
-- bench/peers/local-sandbox.mjs): one round of them.
--   mastra-lua bench/local.lua SAMPLES WORKDIR [quick]
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local lib = require "lib"

local samples, workdir, mode = arg[1], arg[2], arg[3]
assert(samples and workdir, "usage: local.lua SAMPLES WORKDIR [quick]")
local quick = mode == "quick"
local function q(full, small) return quick and small or full end
lib.open(samples)

local must = lib.must

-- create -> first exec (one warm-up first)
do
  local warm = mastra.LocalSandbox.new{ workingDirectory = workdir .. "/warm" }
  must(warm:executeCommand("true"))
  warm:destroy()
  local xs = {}
  for i = 1, q(20, 3) do
    local sb = mastra.LocalSandbox.new{ workingDirectory = workdir .. "/c" .. i }
    xs[i] = lib.time(function()
      sb:start()
      must(sb:executeCommand("true"))
    end)
    sb:destroy()
  end
  lib.emit("local.create_first_exec", "ms", xs)
end

local sb <close> = mastra.LocalSandbox.new{ workingDirectory = workdir .. "/run" }
sb:start()
lib.execFigures("local.", sb, q(200, 10), q(2, 1), q(10, 1))

-- stdout throughput through the LocalSandbox pipe, as onStdout sees it
lib.stdoutFigures("local.", sb, q(256, 16) * 1024 * 1024, q(2, 1))

-- client memory per unstarted handle
do
  local before = lib.kib()
  local hs = {}
  for i = 1, 1000 do hs[i] = mastra.LocalSandbox.new{ workingDirectory = workdir .. "/m" } end
  lib.emit("local.mem_handle", "KiB", { (lib.kib() - before) / #hs })
end
