-- The namespaces driver against the process driver and against its limit,
-- on the same run (bench/README.md, "The namespaces driver"): create to
-- first exec, an exec of `true` on a running sandbox, a fleet of 100 at
-- concurrency 16, and the memory per live idle sandbox. Not part of
-- bench/run: it needs root and a base.
--
--   mastra-lua bench/namespaces.lua [PLATFORM_BIN [BASE [N]]]
--
-- PLATFORM_BIN: default build/mastra-platform beside this checkout; BASE: a
-- base directory ("" or absent: a minimal one built into the scratch
-- directory, `mastra-platform base build --minimal`, removed at the end);
-- N: samples per figure (default 100). Three servers run at once: the
-- process driver, the namespaces driver, and the namespaces driver without
-- its warm pool (`--warm-pool 0`, "ns-cold"); the samples alternate
-- between them (one of each in turn), so a noisy neighbour hits all
-- alike. Requests go over HTTP from this process (client.request: POST
-- /sandbox, then the legacy POST /sandbox/{id}/exec), so each figure
-- includes one HTTP round trip per request; the fleet goes through PlatformSandbox:clone, start,
-- executeCommand and destroy, as bench/platform.lua's does. The limit is
-- bench/ns_limit (built by CMake beside mastra-platform's build, or
-- MASTRA_BENCH_NS_LIMIT), run between the rounds. Prints one line per
-- figure, and the load average before and after.
-- MASTRA_BENCH_NS_BEFORE=OTHER_PLATFORM_BIN adds a fourth server, the
-- namespaces driver of another build ("ns-before", with its warm pool), to
-- the same interleaved rounds: a change measured against its parent on
-- the same run.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local client = require "mastra.platform_client"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local given_base = arg[2] ~= "" and arg[2] or nil
local n = tonumber(arg[3] or "100")
local tmp = os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp"
local FLEET, FLEET_C, FLEET_ROUNDS = 100, 16, 3

local sh = lib.sh

local function load_avg()
  return (sh("cat /proc/loadavg"):match("^(%S+ %S+ %S+)"))
end

-- the server runs in a sandbox with its own working directory
if bin:sub(1, 1) ~= "/" then bin = sh("pwd"):gsub("%s+$", "") .. "/" .. bin end
local limit_bin = os.getenv("MASTRA_BENCH_NS_LIMIT")
  or (bin:match("^(.*)/[^/]*$") .. "/bench/ns_limit")

local dir = sh("mktemp -d " .. mastra.quote(tmp .. "/mastra-ns-bench.XXXXXX")):gsub("%s+$", "")
sh("chmod 755 " .. mastra.quote(dir)) -- the mapped root of ns_limit reaches its layers
local base = given_base or (dir .. "/base")
if not given_base then
  sh(mastra.quote(bin) .. " base build --minimal --base " .. mastra.quote(base) .. " 2>&1")
end

local pct = lib.pct

local function rss_kb(pid)
  local s = sh("grep VmRSS /proc/" .. pid .. "/status 2>/dev/null")
  return tonumber(s:match("(%d+)")) or 0
end

local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()

-- a server named name with `driver` (and extra flags): its url, pid,
-- client config and helpers
local function serve(name, driver, extra, other_bin)
  local s = lib.serve(host, { bin = other_bin or bin, base = base, driver = driver,
    data = dir .. "/data-" .. name, log = dir .. "/platform-" .. name .. ".log", extra = extra })
  s.driver = name
  function s.create()
    return client.request(s.cfg, "POST", "/sandbox",
      { json = { environmentId = "bench" } }).json.id
  end
  function s.exec(id, cmd)
    local r = client.request(s.cfg, "POST", "/sandbox/" .. id .. "/exec",
      { json = { command = cmd } }).json
    assert(r.exitCode == 0, driver .. ": " .. cmd .. " exited with "
      .. tostring(r.exitCode) .. ": " .. tostring(r.stderr))
  end
  function s.destroy(id)
    client.request(s.cfg, "DELETE", "/sandbox/" .. id)
  end
  s.f = { first = {}, exec = {}, fleet = {} }
  return s
end

-- the namespaces driver with its warm pool (the default, 2), and without
-- (every create starts its keeper and init: the cold figure)
local servers = { serve("process", "process"), serve("namespaces", "namespaces"),
  serve("ns-cold", "namespaces", " --warm-pool 0") }
local before_bin = os.getenv("MASTRA_BENCH_NS_BEFORE")
if before_bin and before_bin ~= "" then
  servers[#servers + 1] = serve("ns-before", "namespaces", nil, before_bin)
end
local load_before = load_avg()

-- the limit: bench/ns_limit, N samples of unshare + overlay + exec of
-- /bin/true, and of the namespaces alone
local limit = {}
local function run_limit(count)
  local out = sh(mastra.quote(limit_bin) .. " ns.limit " .. count .. " /usr "
    .. mastra.quote(dir .. "/limit") .. " 2>&1")
  for key, xs in out:gmatch("(ns%.limit%S*)\tms\t([^\n]*)") do
    limit[key] = limit[key] or {}
    for x in xs:gmatch("%S+") do table.insert(limit[key], tonumber(x)) end
  end
  if not out:match("ns%.limit\tms") then limit.err = out end
end

-- warm-up: one sandbox each
for _, s in ipairs(servers) do
  local id = s.create()
  s.exec(id, "true")
  s.destroy(id)
end

-- the servers of round i, in an order that rotates with i: a command's
-- first cgroup write pays an RCU grace period (about 10 ms here) unless
-- another cgroup migration on the machine just paid it (the lock is
-- global), so a fixed order let a server profit from the one before it
local function in_turn(i)
  local k, list = #servers, {}
  for j = 1, k do list[j] = servers[(i + j - 2) % k + 1] end
  return ipairs(list)
end

-- create to first exec, interleaved (each sandbox destroyed after, outside
-- the timing), PAUSE_MS between rounds: the warm pool refills 100 ms after
-- a take (docs/platform.md, "The warm pool"), and an agent's creates come
-- further apart than this loop's; the limit in two halves around it
local PAUSE_MS = 150
run_limit(math.max(5, n // 4))
for i = 1, n do
  for _, s in in_turn(i) do
    local t0 = mastra.now()
    local id = s.create()
    s.exec(id, "true")
    s.f.first[i] = mastra.now() - t0
    s.destroy(id)
  end
  mastra.sleep(PAUSE_MS)
end
run_limit(math.max(5, n // 4))

-- exec of true on a running sandbox, interleaved
for _, s in ipairs(servers) do
  s.live = s.create()
  s.exec(s.live, "true")
end
for i = 1, n do
  for _, s in in_turn(i) do
    local t0 = mastra.now()
    s.exec(s.live, "true")
    s.f.exec[i] = mastra.now() - t0
  end
end
for _, s in ipairs(servers) do s.destroy(s.live) end

-- the server's RSS per live idle sandbox (each ran one command), and the
-- RSS of the keeper and init of each (namespaces); before the fleet, whose
-- freed memory the next sandboxes would reuse
for _, s in ipairs(servers) do
  local before = rss_kb(s.pid)
  local ids = {}
  for i = 1, n do
    ids[i] = s.create()
    s.exec(ids[i], "true")
  end
  s.f.rss = (rss_kb(s.pid) - before) / n
  local kids = sh("ps -o rss= --ppid " .. s.pid .. " 2>/dev/null; for k in $(pgrep -P "
    .. s.pid .. "); do ps -o rss= --ppid $k; done")
  local total = 0
  for v in kids:gmatch("%d+") do total = total + tonumber(v) end
  s.f.helpers = total / n
  for _, x in ipairs(ids) do s.destroy(x) end
end
-- a fleet of 100 (clone, start, exec `true`, destroy) at concurrency 16,
-- the rounds alternating between the drivers
for _, s in ipairs(servers) do
  s.proto = mastra.PlatformSandbox.new{ accessToken = s.token, proxyUrl = s.url,
    projectId = "bench", environmentId = "bench" }
  s.proto:start()
end
for r = 1, FLEET_ROUNDS do
  for _, s in ipairs(servers) do
    local list = {}
    for i = 1, FLEET do list[i] = i end
    local t0 = mastra.now()
    mastra.map(list, function()
      local c <close> = s.proto:clone{}
      c:start()
      local res = c:executeCommand("true")
      assert(res.exitCode == 0, s.driver .. ": fleet member: " .. tostring(res.stderr))
    end, { concurrency = FLEET_C })
    s.f.fleet[r] = mastra.now() - t0
  end
end
for _, s in ipairs(servers) do s.proto:destroy() end

local load_after = load_avg()

for _, s in ipairs(servers) do
  host:executeCommand("kill -TERM " .. s.pid)
  s.server:wait()
end

local p, ns, cold = servers[1].f, servers[2].f, servers[3].f
print(("load average before %s, after %s; N = %d"):format(load_before, load_after, n))
local full, bare = limit["ns.limit"], limit["ns.limit.unshare"]
if full then
  print(("limit (bench/ns_limit)   unshare+overlay+exec /bin/true p50 %.2f ms p99 %.2f ms"
    .. " | the namespaces alone p50 %.2f ms p99 %.2f ms"):format(pct(full, 0.5),
    pct(full, 0.99), pct(bare, 0.5), pct(bare, 0.99)))
else
  print("limit (bench/ns_limit): not measured: " .. tostring(limit.err))
end
for _, s in ipairs(servers) do
  local f = s.f
  print(("%-10s create->first exec p50 %.1f ms p99 %.1f ms | exec true p50 %.2f ms p99 %.2f ms"
    .. " | fleet of %d at c%d p50 %.0f ms (%d rounds) | server RSS per idle sandbox %.1f KiB"
    .. " | keeper+init RSS per sandbox %.0f KiB")
    :format(s.driver, pct(f.first, 0.5), pct(f.first, 0.99), pct(f.exec, 0.5),
      pct(f.exec, 0.99), FLEET, FLEET_C, pct(f.fleet, 0.5), FLEET_ROUNDS, f.rss, f.helpers))
end
if full then
  print(("create->first exec, namespaces / limit (p50): %.2fx; without the pool: %.2fx"):format(
    pct(ns.first, 0.5) / pct(full, 0.5), pct(cold.first, 0.5) / pct(full, 0.5)))
end
print(("exec true, namespaces / process (p50): %.2fx"):format(
  pct(ns.exec, 0.5) / pct(p.exec, 0.5)))
if servers[4] then
  print(("exec true, namespaces / ns-before (p50): %.2fx; p99: %.2fx"):format(
    pct(ns.exec, 0.5) / pct(servers[4].f.exec, 0.5),
    pct(ns.exec, 0.99) / pct(servers[4].f.exec, 0.99)))
end
print(("fleet, namespaces / process (p50): %.2fx"):format(
  pct(ns.fleet, 0.5) / pct(p.fleet, 0.5)))
sh("rm -rf " .. mastra.quote(dir))
