-- Thousands of injected cuts (issue 27: "0 double executions, 0 lost and
-- 0 duplicated bytes over thousands of injected cuts"). Not part of
-- bench/run.
--
--   mastra-lua bench/cuts.lua [PLATFORM_BIN [ROUNDS [CONCURRENCY]]]
--
-- One local platform (MASTRA_BENCH_SERVE_ARGS adds flags; the namespaces
-- driver over MASTRA_BENCH_BASE or build/test-base, else the process one) behind
-- spec/support/fault_proxy.py, and CONCURRENCY (default 8) PlatformSandboxes
-- through the proxy. Each round (default 16) runs one exec in each: a
-- line appended to a counter file, then spec/support/streams.py's seeded
-- stdout and stderr (64 KiB to 2 MiB). Odd rounds cut the server's stream
-- of every socket after a seeded 40 to 160 KB (past one whole 32 KiB
-- frame, so each socket moves the exec on, and an exec is cut again and
-- again); even rounds cut the client's stream of alternate upgrades at a
-- seeded byte from 1 to 600 (inside init_exec or just after it: the start
-- that may or may not have reached the server). Per exec it checks the
-- counter (ran once), and that what onStdout and onStderr got, and the
-- result, are the generator's bytes exactly. Prints the totals. Loopback
-- only; the data directory is under MASTRA_BENCH_TMPDIR (default /var/tmp).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local core = require "mastra.core"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local rounds = math.tointeger(tonumber(arg[2] or "16")) or 16
local conc = math.tointeger(tonumber(arg[3] or "8")) or 8
local q = mastra.quote

local function sh(cmd) return lib.sh(cmd) end
bin = sh("realpath " .. q(bin)):gsub("%s+$", "")
here = sh("realpath " .. q(here)):gsub("%s+$", "") .. "/"
local gen = lib.slurp(here .. "../spec/support/streams.py")
local dir = sh("mktemp -d " .. q((os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp")
  .. "/mastra-cuts-bench.XXXXXX")):gsub("%s+$", "")
local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()

-- the namespaces driver over MASTRA_BENCH_BASE (default: the build's
-- test-base), or the process driver where there is none
local base = os.getenv("MASTRA_BENCH_BASE") or (here .. "../build/test-base")
if not io.open(base .. "/.mastra-base") then base = nil end
local srv = lib.serve(host, { bin = bin, data = dir .. "/data", log = dir .. "/platform.log",
  base = base, driver = base and "namespaces" or "process",
  extra = " " .. (os.getenv("MASTRA_BENCH_SERVE_ARGS") or "") })

local plan = dir .. "/plan.json"
local said = {}
local proxy = host.processes:spawn(("exec python3 %s --watch-stdin %s %s"):format(
  q(here .. "../spec/support/fault_proxy.py"), q(srv.url:match("^http://(.*)$")), q(plan)),
  { onStdout = function(s) said[#said + 1] = s end })
local purl
for _ = 1, 400 do
  purl = table.concat(said):match('^{[^\n]*"url":%s*"([^"]+)"')
  if purl or proxy.exitCode then break end
  mastra.sleep(50)
end
assert(purl, "fault_proxy.py did not start")

local function set_plan(id, ws)
  local f = assert(io.open(plan .. ".tmp", "wb"))
  f:write(core.jsonEncode{ id = id, ws = ws })
  f:close()
  assert(os.rename(plan .. ".tmp", plan))
end

local function cuts_so_far()
  local n = 0
  for l in table.concat(said):gmatch("([^\n]*)\n") do
    if l:find('"event":%s*"cut"') then n = n + 1 end
  end
  return n
end

-- the generator's streams, run here
local function expected(seed, bytes, share)
  local err = dir .. "/expected.err"
  local out = sh(("python3 -c %s %d %d %s 2>%s"):format(q(gen), seed, bytes, share, q(err)))
  return out, lib.slurp(err)
end

local sandboxes = {}
for i = 1, conc do
  sandboxes[i] = mastra.PlatformSandbox.new{ accessToken = srv.token, proxyUrl = purl,
    projectId = "bench", environmentId = "bench", execDetachTimeout = 60000 }
end
set_plan(0, {})
mastra.map(sandboxes, function(sb) sb:start() end, { concurrency = conc })

local tally = { execs = 0, failed = 0, twice = 0, never = 0, wrong = 0, reattaches = 0,
  bytes = 0, errors = {} }
local t0 = lib.now()
local cuts0 = cuts_so_far()
math.randomseed(27)
for round = 1, rounds do
  local ws
  if round % 2 == 1 then
    -- past one whole frame (32 KiB): each socket moves the exec on
    ws = { { cut = "down", at = math.random(40000, 160000) } }
  else
    ws = {}
    for k = 1, 2 * conc do
      ws[k] = k % 2 == 1 and { cut = "up", at = math.random(1, 600) } or {}
    end
  end
  set_plan(round, ws)
  local jobs = {}
  for i = 1, conc do
    jobs[i] = { sb = sandboxes[i], seed = round * 1000 + i,
      bytes = math.random(65536, 2097152), name = ("count-%d-%d"):format(round, i) }
  end
  mastra.map(jobs, function(j)
    local want_out, want_err = expected(j.seed, j.bytes, 0.3)
    local got_out, got_err = {}, {}
    local ok, r = pcall(j.sb.executeCommand, j.sb, ("echo run >> %s; python3 -c %s %d %d 0.3")
      :format(j.name, q(gen), j.seed, j.bytes), nil, {
        onStdout = function(s) got_out[#got_out + 1] = s end,
        onStderr = function(s) got_err[#got_err + 1] = s end })
    tally.execs = tally.execs + 1
    if not ok then
      tally.failed = tally.failed + 1
      tally.errors[#tally.errors + 1] = tostring(r)
    else
      tally.reattaches = tally.reattaches + r.reattaches
      tally.bytes = tally.bytes + #want_out + #want_err
      if r.exitCode ~= 0 or table.concat(got_out) ~= want_out
          or table.concat(got_err) ~= want_err or r.stdout ~= want_out
          or r.stderr ~= want_err then
        tally.wrong = tally.wrong + 1
      end
    end
    j.result = { ok = ok }
  end, { concurrency = conc })
  -- the counters, with nothing cut
  set_plan(-round, {})
  for _, j in ipairs(jobs) do
    local c = j.sb:executeCommand("cat " .. j.name .. " 2>/dev/null | wc -l")
    local n = tonumber(c.stdout) or -1
    if n > 1 then tally.twice = tally.twice + 1 end
    if n < 1 then tally.never = tally.never + 1 end
  end
end
local wall = lib.now() - t0
local cuts = cuts_so_far() - cuts0

print(("%d execs in %d rounds of %d, %d injected cuts (%d reattaches), %.1f MB of output"
  .. " checked, %.0f s"):format(tally.execs, rounds, conc, cuts, tally.reattaches,
  tally.bytes / 1e6, wall / 1000))
print(("ran twice: %d; never ran: %d; output lost, doubled or out of order: %d;"
  .. " calls that raised: %d"):format(tally.twice, tally.never, tally.wrong, tally.failed))
for i = 1, math.min(3, #tally.errors) do print("  error: " .. tally.errors[i]) end

for _, sb in ipairs(sandboxes) do pcall(sb.destroy, sb) end
host:destroy()
os.execute("rm -rf " .. q(dir))
