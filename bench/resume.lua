-- exec-resume/1 (issue 27): what exactly-once costs, and how fast a cut
-- heals (bench/README.md, "Exec resume"). Not part of bench/run.
--
--   mastra-lua bench/resume.lua [PLATFORM_BIN [REPS]]
--
-- Two local platforms: one as it is (its lease lists "exec-resume/1") and
-- one with --exec-stdin off (no extension: the old direct exec). Samples
-- are interleaved, one of each in turn:
--   - exec `true`, with the extension and without (REPS each, default 200);
--   - stdout throughput of 64 MiB (`head -c`), with offsets and without;
--   - the time from a cut (spec/support/fault_proxy.py cuts the server's
--     stream after 100000 bytes of a 1 MB output) to the first byte the
--     reattach delivers to onStdout; the client's first backoff (250 ms)
--     is part of it, and is shown taken away too.
-- MASTRA_BENCH_SERVE_ARGS adds flags to both servers (e.g. "--driver
-- process"); the data directory is under MASTRA_BENCH_TMPDIR (default
-- /var/tmp). All traffic is loopback.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local core = require "mastra.core"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local reps = tonumber(arg[2] or "200")
local base = os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp"
local q = mastra.quote

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

-- the processes run in host's working directory: absolute paths
bin = sh("realpath " .. q(bin)):gsub("%s+$", "")
here = sh("realpath " .. q(here)):gsub("%s+$", "") .. "/"
local dir = sh("mktemp -d " .. q(base .. "/mastra-resume-bench.XXXXXX")):gsub("%s+$", "")
local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()

-- a background process of host that prints a JSON line first: its fields
local function first_line(command, what)
  local out = {}
  local h = host.processes:spawn(command, { onStdout = function(s) out[#out + 1] = s end })
  local line
  for _ = 1, 600 do
    line = table.concat(out):match("^([^\n]*)\n")
    if line or h.exitCode then break end
    mastra.sleep(50)
  end
  if not line then
    local log = sh("cat " .. q(dir) .. "/*/platform.log 2>/dev/null")
    os.execute("rm -rf " .. q(dir))
    error(what .. " did not start: " .. log, 0)
  end
  return core.jsonDecode(line), out
end

local function serve(name, extra)
  local d = dir .. "/" .. name
  assert(os.execute("mkdir -p " .. q(d)))
  local info = first_line("exec " .. q(bin) .. " serve --listen 127.0.0.1:0 --data-dir "
    .. q(d .. "/data") .. " --token-file " .. q(d .. "/token") .. " " .. extra .. " "
    .. (os.getenv("MASTRA_BENCH_SERVE_ARGS") or "") .. " 2>" .. q(d .. "/platform.log"),
    "mastra-platform " .. name)
  return info.url, sh("cat " .. q(d .. "/token")):gsub("%s+$", "")
end

local url_a, token_a = serve("with", "")
local url_b, token_b = serve("without", "--exec-stdin off")
local plan = dir .. "/plan.json"
local proxy, proxy_out = first_line(("exec python3 %s --watch-stdin %s %s"):format(
  q(here .. "../spec/support/fault_proxy.py"), q(url_a:match("^http://(.*)$")), q(plan)),
  "fault_proxy.py")

local function sandbox(url, token)
  local sb = mastra.PlatformSandbox.new{ accessToken = token, proxyUrl = url,
    projectId = "bench", environmentId = "bench" }
  sb:start()
  return sb
end
local with <close> = sandbox(url_a, token_a)
local without <close> = sandbox(url_b, token_b)
local proxied <close> = sandbox(proxy.url, token_a)

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2] or 0 / 0
end
local function p90(xs)
  table.sort(xs)
  return xs[math.max(1, math.ceil(#xs * 0.9))] or 0 / 0
end

-- exec `true`, interleaved; `plain`: the old exec on the same server (a
-- command given stdin takes it: no exec id, nothing spooled)
local t_with, t_plain, t_without = {}, {}, {}
local r = with:executeCommand("true")
assert(r.execId, "the platform's lease does not list exec-resume/1")
assert(without:executeCommand("true").execId == nil, "--exec-stdin off still resumes")
local deadline = lib.now() + 60000
for _ = 1, reps do
  local t0 = lib.now()
  lib.must(with:executeCommand("true"))
  local t1 = lib.now()
  lib.must(with:executeCommand("true", nil, { stdin = "" }))
  local t2 = lib.now()
  lib.must(without:executeCommand("true"))
  local t3 = lib.now()
  t_with[#t_with + 1], t_plain[#t_plain + 1], t_without[#t_without + 1] = t1 - t0, t2 - t1,
    t3 - t2
  if lib.now() > deadline then break end
end

-- stdout throughput, 64 MiB
local bytes = 64 * 1048576
local mb_with, mb_plain, mb_without = {}, {}, {}
local function throughput(sb, stdin)
  local n = 0
  local t0 = lib.now()
  lib.must(sb:executeCommand(("head -c %d /dev/zero"):format(bytes), nil,
    { maxRetainedBytes = 0, onStdout = function(s) n = n + #s end, stdin = stdin }))
  assert(n == bytes, "short output")
  return bytes / 1048576 / ((lib.now() - t0) / 1000)
end
for _ = 1, 5 do
  mb_with[#mb_with + 1] = throughput(with)
  mb_plain[#mb_plain + 1] = throughput(with, "")
  mb_without[#mb_without + 1] = throughput(without)
end

-- from a cut to the first replayed byte
local heal = {}
for i = 1, 20 do
  local f = assert(io.open(plan .. ".tmp", "wb"))
  f:write(core.jsonEncode{ id = i, ws = { { cut = "down", at = 100000 }, { pass = true } } })
  f:close()
  assert(os.rename(plan .. ".tmp", plan))
  local stamps = {}
  local res = lib.must(proxied:executeCommand("head -c 1000000 /dev/zero", nil, {
    maxRetainedBytes = 0, onStdout = function() stamps[#stamps + 1] = core.time() end }))
  assert(res.reattaches == 1, "the cut did not strike")
  -- the cut, and the upgrade of the reattach after it: bytes of the first
  -- socket may still be delivered after the cut
  local cut, again
  for l in table.concat(proxy_out):gmatch("([^\n]*)\n") do
    local ev = core.jsonDecode(l)
    if ev and ev.event == "cut" and ev.how == "cut" then cut, again = ev.t, nil end
    if ev and ev.event == "ws" and cut and not again then again = ev.t end
  end
  assert(cut and again, "no cut and reattach in the proxy's events")
  for _, t in ipairs(stamps) do
    if t >= again then
      heal[#heal + 1] = t - cut
      break
    end
  end
end

print(("exec-resume/1 on %s (%d exec samples each)"):format(
  with:getInfo().metadata and with:getInfo().metadata.driver or "the default driver",
  #t_with))
print("| figure | exec-resume/1 | plain exec, same server | ratio | --exec-stdin off |")
print("|---|--:|--:|--:|--:|")
print(("| exec `true`, median | %.2f ms | %.2f ms | %.3f | %.2f ms |"):format(median(t_with),
  median(t_plain), median(t_with) / median(t_plain), median(t_without)))
print(("| exec `true`, p90 | %.2f ms | %.2f ms | %.3f | %.2f ms |"):format(p90(t_with),
  p90(t_plain), p90(t_with) / p90(t_plain), p90(t_without)))
print(("| stdout of 64 MiB, median | %.0f MiB/s | %.0f MiB/s | %.3f | %.0f MiB/s |"):format(
  median(mb_with), median(mb_plain), median(mb_with) / median(mb_plain), median(mb_without)))
print(("| cut -> first replayed byte, median (p90) | %.1f ms (%.1f) | | | |"):format(
  median(heal), p90(heal)))
print(("| the same less the 250 ms first backoff | %.1f ms | | | |"):format(median(heal) - 250))

with:destroy()
without:destroy()
proxied:destroy()
host:destroy()
os.execute("rm -rf " .. q(dir))
