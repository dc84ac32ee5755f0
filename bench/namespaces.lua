-- The namespaces driver against the process driver, on the same run
-- (bench/README.md, "The namespaces driver"): create to first exec, an exec
-- of `true` on a running sandbox, and the server's memory per live idle
-- sandbox. Not part of bench/run: it needs root and a base.
--
--   mastra-lua bench/namespaces.lua [PLATFORM_BIN [BASE [N]]]
--
-- PLATFORM_BIN: default build/mastra-platform beside this checkout; BASE: a
-- base directory (default: a minimal one built into the scratch directory,
-- `mastra-platform base build --minimal`, removed at the end); N: samples
-- per figure (default 100). Requests go over HTTP from this process
-- (client.request: POST /sandbox, then the legacy POST /sandbox/{id}/exec),
-- so each figure includes one HTTP round trip per request. Prints one line
-- per figure.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local client = require "mastra.platform_client"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local given_base = arg[2]
local n = tonumber(arg[3] or "100")
local tmp = os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp"

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

-- the server runs in a sandbox with its own working directory
if bin:sub(1, 1) ~= "/" then bin = sh("pwd"):gsub("%s+$", "") .. "/" .. bin end

local dir = sh("mktemp -d " .. mastra.quote(tmp .. "/mastra-ns-bench.XXXXXX")):gsub("%s+$", "")
local base = given_base or (dir .. "/base")
if not given_base then
  sh(mastra.quote(bin) .. " base build --minimal --base " .. mastra.quote(base) .. " 2>&1")
end

local function pct(xs, p)
  table.sort(xs)
  return xs[math.max(1, math.ceil(#xs * p))]
end

local function rss_kb(pid)
  local s = sh("grep VmRSS /proc/" .. pid .. "/status 2>/dev/null")
  return tonumber(s:match("(%d+)")) or 0
end

local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()

-- one server with `driver`: returns its figures
local function measure(driver)
  local data = dir .. "/data-" .. driver
  local out = {}
  local server = host.processes:spawn("exec " .. mastra.quote(bin) .. " serve --listen 127.0.0.1:0"
    .. " --driver " .. driver .. " --base " .. mastra.quote(base)
    .. " --data-dir " .. mastra.quote(data) .. " --default-idle-minutes 0"
    .. " 2>" .. mastra.quote(dir .. "/platform-" .. driver .. ".log"),
    { onStdout = function(s) out[#out + 1] = s end })
  local line
  for _ = 1, 400 do
    line = table.concat(out):match("^([^\n]*)\n")
    if line or server.exitCode then break end
    mastra.sleep(50)
  end
  assert(line, "mastra-platform did not start: "
    .. sh("cat " .. mastra.quote(dir .. "/platform-" .. driver .. ".log")))
  local url = line:match('"url":"([^"]+)"')
  local pid = tonumber(line:match('"pid":(%d+)'))
  local token = sh("cat " .. mastra.quote(data .. "/token")):gsub("%s+$", "")
  local cfg = client.resolve({ accessToken = token, proxyUrl = url, projectId = "bench" },
    "bench")
  local function create()
    return client.request(cfg, "POST", "/sandbox",
      { json = { environmentId = "bench" } }).json.id
  end
  local function exec(id, cmd)
    local r = client.request(cfg, "POST", "/sandbox/" .. id .. "/exec",
      { json = { command = cmd } }).json
    assert(r.exitCode == 0, driver .. ": " .. cmd .. " exited with "
      .. tostring(r.exitCode) .. ": " .. tostring(r.stderr))
  end
  local function destroy(id)
    client.request(cfg, "DELETE", "/sandbox/" .. id)
  end
  local f = { driver = driver }
  -- create to first exec (each sandbox destroyed after, outside the timing)
  local first = {}
  for i = 1, n do
    local t0 = mastra.now()
    local id = create()
    exec(id, "true")
    first[i] = mastra.now() - t0
    destroy(id)
  end
  f.first50, f.first99 = pct(first, 0.5), pct(first, 0.99)
  -- exec of true on a running sandbox
  local id = create()
  exec(id, "true")
  local execs = {}
  for i = 1, n do
    local t0 = mastra.now()
    exec(id, "true")
    execs[i] = mastra.now() - t0
  end
  destroy(id)
  f.exec50, f.exec99 = pct(execs, 0.5), pct(execs, 0.99)
  -- the server's RSS per live idle sandbox (each ran one command)
  local before = rss_kb(pid)
  local ids = {}
  for i = 1, n do
    ids[i] = create()
    exec(ids[i], "true")
  end
  f.rss = (rss_kb(pid) - before) / n
  -- and the keeper and init of each (namespaces only)
  local kids = sh("ps -o rss= --ppid " .. pid .. " 2>/dev/null; for k in $(pgrep -P " .. pid
    .. "); do ps -o rss= --ppid $k; done")
  local total = 0
  for v in kids:gmatch("%d+") do total = total + tonumber(v) end
  f.helpers = total / n
  for _, x in ipairs(ids) do destroy(x) end
  host:executeCommand("kill -TERM " .. pid)
  server:wait()
  return f
end

local p = measure("process")
local ns = measure("namespaces")
for _, f in ipairs{ p, ns } do
  print(("%-10s create->first exec p50 %.1f ms p99 %.1f ms | exec true p50 %.2f ms p99 %.2f ms"
    .. " | server RSS per idle sandbox %.1f KiB | keeper+init RSS per sandbox %.0f KiB")
    :format(f.driver, f.first50, f.first99, f.exec50, f.exec99, f.rss, f.helpers))
end
print(("exec true, namespaces / process (p50): %.2fx"):format(ns.exec50 / p.exec50))
sh("rm -rf " .. mastra.quote(dir))
