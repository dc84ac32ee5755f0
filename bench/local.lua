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
for _ = 1, 20 do must(sb:executeCommand("true")) end -- warm-up
lib.emit("local.exec_seq", "ms", lib.reps(q(200, 10), 30000, function()
  must(sb:executeCommand("true"))
end))

do
  local conc, per = 50, q(10, 1)
  local list, lat, rates = {}, {}, {}
  for i = 1, conc do list[i] = i end
  for r = 1, q(2, 1) do
    local n0, t0 = #lat, lib.now()
    mastra.map(list, function()
      for _ = 1, per do
        local ms = lib.time(function() must(sb:executeCommand("true")) end)
        lat[#lat + 1] = ms -- after the call: other tasks append while it waits
      end
    end, { concurrency = conc })
    rates[r] = (#lat - n0) / ((lib.now() - t0) / 1000)
  end
  lib.emit("local.exec_conc", "ms", lat)
  lib.emit("local.exec_conc_rate", "ops/s", rates)
end

-- stdout throughput through the LocalSandbox pipe, as onStdout sees it,
-- kept in the result and not kept (with the pipe baseline between the
-- repetitions)
do
  local bytes = q(256, 16) * 1024 * 1024
  local xs, ys = {}, {}
  for i = 1, q(2, 1) do
    lib.pipeBaseline(bytes)
    xs[i] = lib.stdoutMbps(sb, bytes)
    ys[i] = lib.stdoutMbps(sb, bytes, 0)
  end
  lib.emit("local.stdout_mbps", "MB/s", xs)
  lib.emit("local.stdout_noretain_mbps", "MB/s", ys)
end

-- client memory per unstarted handle
do
  local function kib()
    collectgarbage("collect")
    collectgarbage("collect")
    return collectgarbage("count")
  end
  local before = kib()
  local hs = {}
  for i = 1, 1000 do hs[i] = mastra.LocalSandbox.new{ workingDirectory = workdir .. "/m" } end
  lib.emit("local.mem_handle", "KiB", { (kib() - before) / #hs })
end
