-- What the ended execs a sandbox retains (--exec-retain, 15 min by
-- default) cost the execs after them: the sequential latency of exec
-- `true` in a fresh sandbox, then again after every STEP execs run 50 at
-- a time, with the server's descriptors and resident memory at each step
-- (bench/RESULTS.md, "Ended execs hold no descriptor"). Not part of
-- bench/run.
--
--   mastra-lua bench/retained_execs.lua [PLATFORM_BIN [STEPS [STEP [N]]]]
--
-- PLATFORM_BIN: default build/mastra-platform beside this checkout, run
-- with the process driver; STEPS: how many steps (default 2); STEP:
-- execs a step (default 10000); N: sequential samples a step (default
-- 300). MASTRA_BENCH_RETAINED_BEFORE=OTHER_PLATFORM_BIN runs the same on
-- another build first: a change against its parent on the same machine.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local steps = tonumber(arg[2] or "2")
local step = tonumber(arg[3] or "10000")
local n = tonumber(arg[4] or "300")
local tmp = os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp"
local CONCURRENCY = 50

local sh = lib.sh
if bin:sub(1, 1) ~= "/" then bin = sh("pwd"):gsub("%s+$", "") .. "/" .. bin end
local dir = sh("mktemp -d " .. mastra.quote(tmp .. "/mastra-retained-bench.XXXXXX"))
  :gsub("%s+$", "")

local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()

local function proc_figures(pid)
  local fds = tonumber(sh("ls /proc/" .. pid .. "/fd | wc -l"):match("%d+"))
  local rss = tonumber(sh("grep VmRSS /proc/" .. pid .. "/status"):match("%d+"))
  return fds, rss
end

-- One build: its rows, or the row where an exec failed (the build of
-- before this change ran out of descriptors at its RLIMIT_NOFILE).
local function run(name, which)
  local s = lib.serve(host, { bin = which, driver = "process", data = dir .. "/data-" .. name,
    log = dir .. "/platform-" .. name .. ".log" })
  local sb = mastra.PlatformSandbox.new{ accessToken = s.token, proxyUrl = s.url,
    projectId = "bench", environmentId = "bench" }
  print(("%s (%s)"):format(name, which))
  print("| execs retained | exec `true` p50 | p90 | server descriptors | server RSS |")
  print("|--:|--:|--:|--:|--:|")
  local done = 0
  local ok, err = pcall(function()
    sb:start()
    for _ = 1, 20 do lib.must(sb:executeCommand("true")) end
    done = 20
    local slots = {}
    for i = 1, CONCURRENCY do slots[i] = i end
    for k = 0, steps do
      if k > 0 then
        mastra.map(slots, function()
          for _ = 1, step // CONCURRENCY do
            lib.must(sb:executeCommand("true"))
            done = done + 1
          end
        end, { concurrency = CONCURRENCY })
      end
      local xs = lib.reps(n, 60000, function()
        lib.must(sb:executeCommand("true"))
        done = done + 1
      end)
      local fds, rss = proc_figures(s.pid)
      print(("| %d | %.2f ms | %.2f ms | %d | %.1f MiB |"):format(done,
        lib.pct(xs, 0.5), lib.pct(xs, 0.9), fds, rss / 1024))
    end
  end)
  if not ok then
    local fds = proc_figures(s.pid)
    print(("| %d | failed: %s | | %d | |"):format(done,
      tostring(err):match("^[^\n]*"):gsub("|", "/"), fds))
  end
  pcall(sb.destroy, sb)
  s.server:kill()
  s.server:wait()
end

local ok, err = pcall(function()
  local before = os.getenv("MASTRA_BENCH_RETAINED_BEFORE")
  if before and before ~= "" then run("before", before) end
  run("this build", bin)
end)
sh("rm -rf " .. mastra.quote(dir))
assert(ok, err)
