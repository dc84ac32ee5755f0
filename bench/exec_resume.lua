-- exec-resume/1 on the local platform (issue 27 point 5): the same exec
-- WebSocket client (spec/support/ws-exec, a C client, one process a run)
-- with and without an exec_id, samples interleaved: exec `true`; 64 MiB
-- of stdout (offset frames of 32 KiB against plain frames of 64 KiB); a
-- reattach to an exec that ended, to its exit frame (the time from a new
-- socket to the replay). Not part of bench/run.
--
--   mastra-lua bench/exec_resume.lua [BUILD_DIR [REPS]]
--
-- BUILD_DIR: where mastra-platform and spec-support/ws-exec are (default
-- build/ beside this checkout); REPS: samples of each exec figure
-- (default 40). MASTRA_BENCH_SERVE_ARGS adds flags to `serve` (e.g.
-- "--driver process", or "--base DIR"; without it, BUILD_DIR/test-base is
-- the base when it exists, so no base is built). The data directory is under
-- MASTRA_BENCH_TMPDIR (default /dev/shm). All traffic is loopback.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"

local here = arg[0]:match("(.*/)") or "./"
local build = arg[1] or (here .. "../build")
if build:sub(1, 1) ~= "/" then build = (os.getenv("PWD") or ".") .. "/" .. build end
local reps = math.tointeger(tonumber(arg[2] or "40")) or 40
local base = os.getenv("MASTRA_BENCH_TMPDIR") or "/dev/shm"
local q = mastra.quote
local wsexec = build .. "/spec-support/ws-exec"
local serve_args = os.getenv("MASTRA_BENCH_SERVE_ARGS")
if serve_args == nil and io.open(build .. "/test-base/.") then
  serve_args = "--base " .. q(build .. "/test-base")
end

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

local dir = sh("mktemp -d " .. q(base .. "/mastra-resume-bench.XXXXXX")):gsub("%s+$", "")
local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()
local out = {}
local server = host.processes:spawn("exec " .. q(build .. "/mastra-platform")
  .. " serve --listen 127.0.0.1:0 --inspector off"
  .. " --data-dir " .. q(dir .. "/data") .. " --token-file " .. q(dir .. "/token")
  .. " " .. (serve_args or "")
  .. " 2>" .. q(dir .. "/platform.log"), { onStdout = function(s) out[#out + 1] = s end })
local line
for _ = 1, 600 do
  line = table.concat(out):match("^([^\n]*)\n")
  if line or server.exitCode then break end
  mastra.sleep(50)
end
local function finish()
  server:kill()
  server:wait()
  os.execute("rm -rf " .. q(dir))
end
if not line then
  local log = sh("cat " .. q(dir .. "/platform.log"))
  finish()
  error("mastra-platform did not start: " .. log, 0)
end
local url = line:match('"url":"([^"]+)"')
local token = sh("cat " .. q(dir .. "/token")):gsub("%s+$", "")
local prefix = url .. "/v1/railway/projects/bench"
local function post(path, body)
  return sh("curl -s -X POST -H " .. q("Authorization: Bearer " .. token)
    .. " -H 'Content-Type: application/json' --data " .. q(body) .. " " .. q(prefix .. path))
end
local sid = post("/sandbox", '{"environmentId":"bench"}'):match('"id":"(sbx_[^"]+)"')
assert(sid, "no sandbox")
local lease = post("/sandbox/" .. sid .. "/exec-lease", "{}")
local ws, jwt = lease:match('"wsEndpoint":"([^"]+)"'), lease:match('"jwt":"([^"]+)"')

-- one ws-exec run: its wall time in ms (raises unless it ended as want)
local function run(command, init, want, redirect)
  local words = { wsexec }
  if init then
    words[#words + 1] = "--init-json"
    words[#words + 1] = init
  end
  for _, w in ipairs{ "--", ws, jwt, command } do words[#words + 1] = w end
  for i, w in ipairs(words) do words[i] = q(w) end
  local t0 = mastra.now()
  local r = host:executeCommand(table.concat(words, " ") .. (redirect or ""))
  local ms = mastra.now() - t0
  if r.exitCode ~= (want or 0) then
    finish()
    error(("ws-exec %s: exit %s: %s"):format(command, tostring(r.exitCode), r.stderr), 0)
  end
  return ms
end

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end

local n = 0
local function id()
  n = n + 1
  return ('{"exec_id":"bench-%d"}'):format(n)
end

run("true") -- warm
local plain, resumed = {}, {}
for _ = 1, reps do
  plain[#plain + 1] = run("true")
  resumed[#resumed + 1] = run("true", id())
end
local p, r = median(plain), median(resumed)
print(("exec true (ws-exec wall)  plain %6.2f ms   exec_id %6.2f ms   %+5.1f%%   (%d each)")
  :format(p, r, (r - p) / p * 100, reps))

local bytes = 64 * 1024 * 1024
local cmd = "head -c " .. bytes .. " /dev/zero"
local tp, tr = {}, {}
for _ = 1, 3 do
  tp[#tp + 1] = run(cmd, nil, 0, " > /dev/null")
  tr[#tr + 1] = run(cmd, id(), 0, " > /dev/null")
end
p, r = median(tp), median(tr)
print(("64 MiB stdout             plain %6.0f MB/s  offsets %6.0f MB/s  (3 each, medians)")
  :format(bytes / 1e6 / (p / 1000), bytes / 1e6 / (r / 1000)))

local re = {}
for i = 1, reps do
  local name = "bench-re-" .. i
  run("echo x", ('{"exec_id":"%s"}'):format(name), 0, " > /dev/null")
  re[#re + 1] = run(":", ('{"durable_session_name":"%s","resume":{"stdout":1}}'):format(name),
    0, " > /dev/null")
end
print(("reattach to an ended exec, to its exit  %6.2f ms  (%d, median; a new ws-exec"
  .. " process, handshake, attached, replay, exit)"):format(median(re), reps))
finish()
