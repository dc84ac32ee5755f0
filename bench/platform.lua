-- The PlatformSandbox figures of bench/run, against one mastra-platform: one
-- round of them (bench/run runs several and pools the samples).
--   mastra-lua bench/platform.lua SAMPLES DRIVER URL TOKEN_FILE [quick]
-- Every key starts with the driver's name, so that drivers slot in.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local core = require "mastra.core"
local task = require "mastra.task"
local lib = require "lib"

local samples, driver, url, token_file, mode = arg[1], arg[2], arg[3], arg[4], arg[5]
assert(samples and driver and url and token_file, "usage: platform.lua SAMPLES DRIVER URL TOKEN")
local quick = mode == "quick"
local function q(full, small) return quick and small or full end
lib.open(samples)
local token = lib.slurp(token_file):match("^%s*(.-)%s*$")
local data_dir = token_file:match("^(.*)/[^/]*$") or "." -- the platform's --data-dir
local K = driver .. "."

local base = {
  accessToken = token, proxyUrl = url, projectId = "bench", environmentId = "bench",
}
local function new_sandbox()
  local o = {}
  for k, v in pairs(base) do o[k] = v end
  return mastra.PlatformSandbox.new(o)
end

local must = lib.must

-- 1. sandbox create -> first exec (destroy is not timed; one warm-up first)
do
  local warm = new_sandbox()
  warm:start()
  must(warm:executeCommand("true"))
  warm:destroy()
  local xs = {}
  local start = lib.now()
  for i = 1, q(20, 3) do
    local sb = new_sandbox()
    xs[i] = lib.time(function()
      sb:start()
      must(sb:executeCommand("true"))
    end)
    sb:destroy()
    if i >= 3 and lib.now() - start > 60000 then break end
  end
  lib.emit(K .. "create_first_exec", "ms", xs)
end

-- 2. exec round trip of `true` on a running sandbox: sequential, then 50 at once
local sb <close> = new_sandbox()
sb:start()
lib.execFigures(K, sb, q(200, 10), q(2, 1), q(10, 1))

-- The physical limits that go with sections 3 and 4 are measured between
-- their repetitions, so that a noisy neighbour hits both alike.
local baseline = os.getenv("MASTRA_BENCH_BASELINE") -- build-bench/bench/baseline

-- 3. stdout throughput through the exec WebSocket (counted by onStdout),
-- kept in the result, and not kept (maxRetainedBytes = 0)
lib.stdoutFigures(K, sb, q(256, 16) * 1024 * 1024, q(2, 1))

-- 4. a fleet of 100: clone, start, exec `true`, destroy; wall time. The
-- platform keeps the record of every sandbox it has seen, so the order of
-- the sections matters: keep it.
for _, conc in ipairs{ 1, 16, 100 } do
  local size = q(100, 10)
  local walls = {}
  for r = 1, q(2, 1) do
    if baseline then -- three times: one takes 40 to 70 ms, a short window
      for _ = 1, 3 do
        os.execute(("%s spawn spawn.fleet_c%d %d %d /bin/sh -c true >> %s"):format(
          baseline, conc, size, conc, samples))
      end
    end
    local list = {}
    for i = 1, size do list[i] = i end
    walls[r] = lib.time(function()
      mastra.map(list, function()
        local s <close> = sb:clone{}
        s:start()
        must(s:executeCommand("true"))
      end, { concurrency = conc })
    end)
  end
  lib.emit(K .. "fleet_c" .. conc, "ms", walls)
end

-- 4b. the same fleet through mastra.fleet (lua/mastra/fleet.lua), as a
-- user runs one: 100 members cloned from sb, each started, runs `true` and
-- is destroyed, 16 at a time. The member ids are recovery keys: fresh ones
-- each repetition, so that every member is a create, not a restore.
do
  local walls = {}
  for r = 1, q(2, 1) do
    local members = {}
    for i = 1, q(100, 10) do members[i] = ("f%d-%d-%d"):format(os.time(), r, i) end
    local summary
    walls[r] = lib.time(function()
      summary = mastra.fleet(sb, members, function(s) must(s:executeCommand("true")) end,
        { concurrency = 16, quiet = true })
    end)
    assert(summary.failed == 0 and summary.succeeded == #members,
      ("mastra.fleet: %d of %d members failed: %s"):format(summary.failed, #members,
        summary.errors[1] and tostring(summary.errors[1].error) or "?"))
  end
  lib.emit(K .. "fleet_api_c16", "ms", walls)
end

-- 5. bucket PUT and GET of 4 KB and 4 MB objects, as a user makes them:
-- PlatformFilesystem's writeFile and readFile
local fs = mastra.PlatformFilesystem.new{ bucketName = "b", accessToken = token,
  proxyUrl = url, projectId = "bench" }
for _, size in ipairs{ { "4k", 4096, q(200, 10) }, { "4m", 4 << 20, q(30, 2) } } do
  local name, bytes, n = size[1], size[2], size[3]
  local body = ("x"):rep(bytes)
  local prefix = "/obj-" .. name .. "-"
  if baseline then -- the storage's limit, in the directory the platform writes to
    os.execute(("%s write disk.put_%s %s %d %d >> %s"):format(
      baseline, name, data_dir, bytes, n, samples))
  end
  lib.emit(K .. "bucket_put_" .. name, "ms", lib.reps(n, 20000, function(i)
    fs:writeFile(prefix .. i, body)
  end))
  lib.emit(K .. "bucket_get_" .. name, "ms", lib.reps(n, 20000, function(i)
    assert(#fs:readFile(prefix .. i) == bytes)
  end))
end

-- 6. one HTTP request from Lua (core.http) to the platform's 404 route,
-- beside the same request from C with libcurl
local function http(method, path)
  local req <close> = core.http{ method = method, url = url .. path,
    headers = { authorization = "Bearer " .. token } }
  while true do
    local status, headers, resp = req:result()
    if status then return status end
    if headers then error(headers .. " (" .. resp .. ")") end
    task.wait(req:id())
  end
end
for _ = 1, 10 do assert(http("GET", "/nope") == 404) end
lib.emit(K .. "http_404", "ms", lib.reps(q(500, 20), 10000, function()
  assert(http("GET", "/nope") == 404)
end))

-- 7. client memory per idle PlatformSandbox handle
do
  -- a started handle, idle after one command (its lease is cached)
  local xs = {}
  for i = 1, q(2, 1) do
    local before = lib.kib()
    local s = new_sandbox()
    s:start()
    must(s:executeCommand("true"))
    xs[i] = lib.kib() - before
    s:destroy()
  end
  lib.emit(K .. "mem_started_handle", "KiB", xs)
  -- 10,000 unstarted handles in one state (deterministic: once a round
  -- is plenty); the first one is made before, so that what handles share
  -- (the interned cfg) is not counted
  local hs = { new_sandbox() }
  local before = lib.kib()
  for i = 2, 10001 do hs[i] = new_sandbox() end
  local delta = lib.kib() - before
  assert(#hs == 10001) -- alive until here
  lib.emit(K .. "mem_handle", "KiB", { delta / 10000 })
  lib.emit(K .. "mem_10000_handles", "KiB", { delta })
end
