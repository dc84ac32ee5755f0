-- Fairness between sandboxes of the namespaces driver (bench/README.md,
-- "Fairness"; issue 30, point 6): the exec latency of one sandbox while
-- its neighbour is idle, spins on every CPU, or holds a fork bomb at its
-- pids limit, each as a ratio to the idle figure of the same run (the
-- target: within 2x). Not part of bench/run: it needs root and a base.
--
--   mastra-lua bench/fairness.lua [PLATFORM_BIN [BASE [N]]]
--
-- PLATFORM_BIN: default build/mastra-platform beside this checkout; BASE:
-- a base directory ("" or absent: a minimal one built into the scratch
-- directory and removed at the end); N: execs of `true` per phase (default
-- 200). One server with its defaults (--sandbox-cpu-max: half the host's
-- CPUs, at least one; --sandbox-pids-max 1024); the neighbour's load runs
-- as a background command of its own sandbox and is killed by the
-- sandbox's destroy. Prints one line per phase, and the load average.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local client = require "mastra.platform_client"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local given_base = arg[2] ~= "" and arg[2] or nil
local n = tonumber(arg[3] or "200")
local tmp = os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp"

local sh, pct = lib.sh, lib.pct

-- the server runs in a directory of its own: relative paths are this one's
local cwd = sh("pwd"):gsub("%s+$", "")
local function absolute(p) return p:sub(1, 1) == "/" and p or (cwd .. "/" .. p) end
bin = absolute(bin)
given_base = given_base and absolute(given_base)
local dir = sh("mktemp -d " .. mastra.quote(tmp .. "/mastra-fair-bench.XXXXXX")):gsub("%s+$", "")
sh("chmod 755 " .. mastra.quote(dir))
local base = given_base or (dir .. "/base")
if not given_base then
  sh(mastra.quote(bin) .. " base build --minimal --base " .. mastra.quote(base) .. " 2>&1")
end

local ncpu = tonumber((sh("nproc"):gsub("%s+$", ""))) or 1
-- the neighbour's loads: a spinner per CPU, and a fork bomb that the pids
-- limit holds (each child forks again until fork fails, then sleeps)
local LOADS = {
  { name = "idle neighbour" },
  { name = ("a spinner per CPU (%d)"):format(ncpu),
    command = ("for i in $(seq %d); do (while :; do :; done) & done; wait"):format(ncpu) },
  { name = "a fork bomb at the pids limit",
    command = "b() { b & b & sleep 1000; }; b" },
}

local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()

local ok, err = pcall(function()
  local srv = lib.serve(host, { bin = bin, base = base, data = dir .. "/data",
    log = dir .. "/platform.log", extra = " --egress off" })
  local cfg = srv.cfg
  local function create()
    return client.request(cfg, "POST", "/sandbox", { json = { environmentId = "bench" } }).json.id
  end
  local function exec(id, cmd, timeout)
    return client.request(cfg, "POST", "/sandbox/" .. id .. "/exec",
      { json = { command = cmd, timeoutSec = timeout } }).json
  end
  local measured = create()
  assert(exec(measured, "true").exitCode == 0)
  local figures = {}
  for i, load in ipairs(LOADS) do
    local neighbour = create()
    if load.command then
      -- the load as a background command of the neighbour (the legacy
      -- exec waits: it runs in a task, ended by the destroy below)
      mastra.spawn(function() pcall(exec, neighbour, load.command, 3600) end)
      mastra.sleep(2000) -- the load is up (the bomb at its limit)
    end
    local xs = {}
    for j = 1, n do
      local t0 = mastra.now()
      assert(exec(measured, "true").exitCode == 0)
      xs[j] = mastra.now() - t0
    end
    client.request(cfg, "DELETE", "/sandbox/" .. neighbour)
    figures[i] = { p50 = pct(xs, 0.5), p90 = pct(xs, 0.9), max = pct(xs, 1) }
  end
  local idle = figures[1]
  for i, load in ipairs(LOADS) do
    local f = figures[i]
    print(("exec `true` beside %-32s p50 %6.1f ms (%4.1fx)  p90 %6.1f ms (%4.1fx)  max %7.1f ms"
      .. "  (n=%d)"):format(load.name, f.p50, f.p50 / idle.p50, f.p90, f.p90 / idle.p90, f.max, n))
  end
  print("load average after: " .. (sh("cat /proc/loadavg"):match("^(%S+ %S+ %S+)")))
  client.request(cfg, "DELETE", "/sandbox/" .. measured)
end)
host:destroy()
sh("rm -rf " .. mastra.quote(dir))
assert(ok, err)
