-- What a DELETE costs now that it answers once no process of the sandbox
-- is left on the host (docs/platform.md, "Destroy"): the DELETE of a
-- sandbox that ran `true`, and of one in a fork storm (100 sleepers deaf
-- to SIGTERM, a setsid'd daemon, a loop that forks), per driver, samples
-- interleaved. Not part of bench/run.
--
--   mastra-lua bench/destroy.lua [PLATFORM_BIN [BASE [N]]]
--
-- PLATFORM_BIN: default build/mastra-platform beside this checkout; BASE:
-- the namespaces driver's base ("" or absent: a minimal one built into
-- the scratch directory); N: samples per figure (default 30).
-- MASTRA_BENCH_DESTROY_BEFORE=OTHER_PLATFORM_BIN adds the same two drivers
-- of another build ("...-before"), in the same rounds: a change against
-- its parent on the same run. MASTRA_BENCH_KEEP=1 keeps the scratch
-- directory (the servers' logs). The namespaces driver needs root (skipped
-- without it). Requests go over HTTP from this process (client.request),
-- so each figure includes one round trip.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local client = require "mastra.platform_client"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local given_base = arg[2] ~= "" and arg[2] or nil
local n = tonumber(arg[3] or "30")
local tmp = os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp"

local STORM = table.concat({
  "(trap '' TERM; for i in $(seq 100); do sleep 30 & done; wait) </dev/null >/dev/null 2>&1 &",
  "(setsid sh -c 'trap \"\" TERM; while :; do sleep 30; done' </dev/null >/dev/null 2>&1 &)",
  "(trap '' TERM; while :; do sleep 30 & sleep 0.01; done) </dev/null >/dev/null 2>&1 &",
  "sleep 0.1",
}, "\n")

local sh = lib.sh

if bin:sub(1, 1) ~= "/" then bin = sh("pwd"):gsub("%s+$", "") .. "/" .. bin end
local root = sh("id -u"):gsub("%s", "") == "0"
local dir = sh("mktemp -d " .. mastra.quote(tmp .. "/mastra-destroy-bench.XXXXXX"))
  :gsub("%s+$", "")
local base = given_base or (dir .. "/base")
if root and not given_base then
  sh(mastra.quote(bin) .. " base build --minimal --base " .. mastra.quote(base) .. " 2>&1")
end

local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()

local function serve(name, driver, which)
  local s = lib.serve(host, { bin = which, driver = driver,
    base = driver == "namespaces" and base or nil, data = dir .. "/data-" .. name,
    log = dir .. "/platform-" .. name .. ".log" })
  s.name, s.idle, s.storm = name, {}, {}
  function s.create()
    return client.request(s.cfg, "POST", "/sandbox",
      { json = { environmentId = "bench" } }).json.id
  end
  function s.exec(id, cmd)
    local r = client.request(s.cfg, "POST", "/sandbox/" .. id .. "/exec",
      { json = { command = cmd } }).json
    assert(r.exitCode == 0, name .. ": " .. cmd .. ": " .. tostring(r.stderr))
  end
  function s.destroy(id)
    local t0 = mastra.now()
    client.request(s.cfg, "DELETE", "/sandbox/" .. id)
    return mastra.now() - t0
  end
  return s
end

local servers = {}
local before = os.getenv("MASTRA_BENCH_DESTROY_BEFORE")
for _, driver in ipairs(root and { "process", "namespaces" } or { "process" }) do
  servers[#servers + 1] = serve(driver, driver, bin)
  if before and before ~= "" then
    servers[#servers + 1] = serve(driver .. "-before", driver, before)
  end
end

local pct = lib.pct

local load0 = sh("cat /proc/loadavg"):match("^(%S+ %S+ %S+)")
for i = 1, n do
  for k = 0, #servers - 1 do -- the order rotates with i
    local s = servers[(i + k - 1) % #servers + 1]
    local id = s.create()
    s.exec(id, "true")
    s.idle[i] = s.destroy(id)
    id = s.create()
    s.exec(id, STORM)
    s.storm[i] = s.destroy(id)
  end
end
local load1 = sh("cat /proc/loadavg"):match("^(%S+ %S+ %S+)")

print(("DELETE latency, %d samples each (median / p90 ms); load %s -> %s"):format(n, load0, load1))
for _, s in ipairs(servers) do
  print(("  %-18s after `true`: %7.2f / %7.2f   in a fork storm: %7.2f / %7.2f"):format(
    s.name, pct(s.idle, 0.5), pct(s.idle, 0.9), pct(s.storm, 0.5), pct(s.storm, 0.9)))
end
host:destroy()
if os.getenv("MASTRA_BENCH_KEEP") == "1" then
  print("kept " .. dir .. " (the servers' logs: platform-*.log)")
else
  sh("rm -rf " .. mastra.quote(dir))
end
