-- The soak of mastra-platform (issue 14): TOTAL sandboxes created and
-- destroyed over time against one server of its own, with the server's
-- resident memory, the p99 latency of a GET and the time of an exec
-- WebSocket handshake measured as the count grows. Each must stay flat:
-- no request walks every record or lease, and destroyed records are
-- freed after --destroyed-ttl.
--
--   mastra-lua bench/soak.lua PLATFORM TOTAL OUT_MD [DRIVER] [TTL_S] [ATTACK]
--
-- PLATFORM: the mastra-platform executable; DRIVER: its --driver
-- (default process); TTL_S: its --destroyed-ttl (default 60); ATTACK:
-- spec/support/attack.c built: with it, the soak ends with 4,100
-- slowloris connections held open while a PlatformSandbox start()s and
-- runs a command (issue 14's check: within 2 s). Writes a
-- markdown section to OUT_MD (bench/run puts it into RESULTS.md) and
-- prints it. 16 workers each loop: create, GET, mint a lease, DELETE.
-- The figures are taken at 0, TOTAL/50, TOTAL/2 and TOTAL sandboxes.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local core = require "mastra.core"
local task = require "mastra.task"
local lib = require "lib"

local bin, total, out_md = arg[1], math.tointeger(tonumber(arg[2] or "")), arg[3]
local driver, ttl, attack = arg[4] or "process", arg[5] or "60", arg[6]
assert(bin and total and total >= 50 and out_md,
  "usage: soak.lua PLATFORM TOTAL(>= 50) OUT_MD [DRIVER] [TTL_S]")
local function absolute(path)
  if path and path:sub(1, 1) ~= "/" then return (os.getenv("PWD") or ".") .. "/" .. path end
  return path
end
bin, attack = absolute(bin), absolute(attack)

local WORKERS = 16
local GETS = 500
local HANDSHAKES = 50
local P = "/v1/projects/soak"

-- {====== the server ======

local scratch = os.tmpname()
os.remove(scratch)
assert(os.execute("mkdir -p " .. mastra.quote(scratch .. "/wd")))
local host = mastra.LocalSandbox.new{ workingDirectory = scratch .. "/wd", timeout = 0 }
host:start()
local out = {}
local server = host.processes:spawn(("exec %s serve --listen 127.0.0.1:0 --data-dir %s"
  .. " --driver %s --destroyed-ttl %s 2>%s"):format(mastra.quote(bin),
  mastra.quote(scratch .. "/data"), mastra.quote(driver), ttl,
  mastra.quote(scratch .. "/server.log")), {
  onStdout = function(s) out[#out + 1] = s end })
local line
for _ = 1, 300 do
  line = table.concat(out):match("^([^\n]*)\n")
  if line or server.exitCode then break end
  mastra.sleep(50)
end
assert(line, "mastra-platform did not start: " .. tostring(server.exitCode))
local info = core.jsonDecode(line)
local url, pid = info.url, info.pid
local token = lib.slurp(scratch .. "/data/token"):match("^%s*(.-)%s*$")

local function http(method, path, body)
  local req <close> = assert(core.http{ method = method, url = url .. P .. path,
    headers = { authorization = "Bearer " .. token, ["content-type"] = "application/json" },
    body = body })
  while true do
    local status, headers, resp = req:result()
    if status then return status, resp end
    if headers then error(headers .. " (" .. resp .. ")") end
    task.wait(req:id())
  end
end

local function rss_kib()
  local s = lib.slurp("/proc/" .. pid .. "/status") or ""
  return tonumber(s:match("VmRSS:%s*(%d+)"))
end

local function create()
  local status, body = http("POST", "/sandbox", '{"environmentId":"soak"}')
  assert(status == 201, body)
  return core.jsonDecode(body).id
end

-- }======

-- {====== the figures ======

local function percentile(xs, p)
  local s = { table.unpack(xs) }
  table.sort(s)
  return s[math.max(1, math.ceil(#s * p))]
end

-- one handshake: mint a lease, open the exec socket until the 101
local function handshake(id)
  local status, body = http("POST", "/sandbox/" .. id .. "/exec-lease")
  assert(status == 200, body)
  local lease = core.jsonDecode(body)
  local t0 = lib.now()
  local ws <close> = assert(core.websocket{ url = lease.wsEndpoint,
    protocols = { "railway-shell", lease.jwt }, timeout = 30000 })
  while ws:state() == "connecting" do task.wait(ws:id()) end
  local ms = lib.now() - t0
  assert(ws:opened(), "the handshake failed")
  ws:close(1000, "")
  return ms
end

local rows = {}
local function measure(at)
  local id = create()
  local gets, shakes = {}, {}
  for i = 1, GETS do
    gets[i] = lib.time(function() assert(http("GET", "/sandbox/" .. id) == 200) end)
  end
  for i = 1, HANDSHAKES do shakes[i] = handshake(id) end
  assert(http("DELETE", "/sandbox/" .. id) == 204)
  local records = 0
  for _ in io.popen("ls " .. mastra.quote(scratch .. "/data/state/sandboxes")):lines() do
    records = records + 1
  end
  local r = { at = at, rss = rss_kib(), get50 = percentile(gets, 0.5),
    get99 = percentile(gets, 0.99), shake50 = percentile(shakes, 0.5),
    shake99 = percentile(shakes, 0.99), records = records }
  rows[#rows + 1] = r
  io.stderr:write(("soak: %6d sandboxes: RSS %d KiB, GET p50 %.3f p99 %.3f ms, handshake"
    .. " p50 %.3f p99 %.3f ms, %d record files\n"):format(at, r.rss, r.get50, r.get99,
    r.shake50, r.shake99, records))
end

-- }======

-- the soak itself; whatever happens, the server and the scratch go after it
local function soak()
  local marks = { total // 50, total // 2, total }
  local done, next_mark = 0, 1
  local t0 = lib.now()
  measure(0)
  while next_mark <= #marks do
    local goal = marks[next_mark]
    local workers = {}
    for w = 1, WORKERS do
      workers[w] = function()
        while done < goal do
          done = done + 1
          local id = create()
          assert(http("GET", "/sandbox/" .. id) == 200)
          assert(http("POST", "/sandbox/" .. id .. "/exec-lease") == 200)
          assert(http("DELETE", "/sandbox/" .. id) == 204)
        end
      end
    end
    mastra.all(workers)
    measure(goal)
    next_mark = next_mark + 1
  end
  local wall = (lib.now() - t0) / 1000

  -- 4,100 slowloris connections (a head sent a byte every 5 s), then a
  -- client that starts a sandbox and runs a command
  local slow
  if attack then
    local h = host.processes:spawn(("exec %s slow %d 4100 30 5"):format(mastra.quote(attack),
      tonumber(url:match(":(%d+)$"))))
    for _ = 1, 600 do
      if h.stdout:match("open %d+\n") or h.exitCode then break end
      mastra.sleep(50)
    end
    local open = tonumber(h.stdout:match("open (%d+)")) or 0
    mastra.sleep(500)
    local ms = lib.time(function()
      local sb = mastra.PlatformSandbox.new{ accessToken = token, proxyUrl = url,
        projectId = "soak", environmentId = "soak" }
      sb:start()
      lib.must(sb:executeCommand("true"))
      sb:destroy()
    end)
    slow = { open = open, ms = ms, rss = rss_kib() }
    io.stderr:write(("soak: start() + exec + destroy with %d slow connections open: %.1f ms\n")
      :format(open, ms))
    h:kill()
  end
  return wall, slow
end
local ok, wall, slow = pcall(soak)

server:kill()
for _ = 1, 200 do
  if server.exitCode then break end
  mastra.sleep(50)
end
host:destroy()
os.execute("rm -rf " .. mastra.quote(scratch))
if not ok then error(wall, 0) end

local f = assert(io.open(out_md, "w"))
f:write(("## Soak: %d sandboxes created and destroyed (bench/soak.lua)\n\n"):format(total))
f:write(("Driver `%s`, `--destroyed-ttl %s`; %d workers each create, GET, mint a lease and"
  .. " DELETE; %.0f s in all (%.0f sandboxes/s). At each count: the server's RSS, %d GETs"
  .. " of a live sandbox and %d exec WebSocket handshakes (lease minted first, not"
  .. " timed).\n\n"):format(driver, ttl, WORKERS, wall, total / wall, GETS, HANDSHAKES))
f:write("| sandboxes so far | server RSS | GET p50 | GET p99 | handshake p50 | handshake p99"
  .. " | record files |\n|---|---|---|---|---|---|---|\n")
for _, r in ipairs(rows) do
  f:write(("| %d | %.1f MiB | %.3f ms | %.3f ms | %.3f ms | %.3f ms | %d |\n"):format(r.at,
    r.rss / 1024, r.get50, r.get99, r.shake50, r.shake99, r.records))
end
f:write("\n")
if slow then
  f:write(("With %d slowloris connections open (each sends its request head a byte every"
    .. " 5 s; the server's --header-timeout, 30 s, closes them), a PlatformSandbox"
    .. " start(), `executeCommand(\"true\")` and destroy() took %.1f ms; the server's RSS"
    .. " was %.1f MiB.\n\n"):format(slow.open, slow.ms, slow.rss / 1024))
end
f:close()
io.stdout:write(lib.slurp(out_md))
