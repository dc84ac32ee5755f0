-- What N ended execs that retain output cost the two server paths that
-- used to walk every retained exec (bench/RESULTS.md, "Room made and
-- eviction walk only their execs"):
--   - a 64 MiB stdout stream, not kept: the client acknowledges every
--     MiB, and each ack makes room (the server looks for commands
--     waiting with output);
--   - one exec of 64 KiB under --exec-log-total 64k: it evicts the ended
--     execs one by one, oldest first, to make its room.
-- Each ended exec is an `echo x` (2 bytes retained, never acknowledged).
-- Process driver, rounds alternating with another build when one is
-- given. Not part of bench/run.
--
--   mastra-lua bench/retained_walks.lua [PLATFORM_BIN [N [ROUNDS]]]
--
-- PLATFORM_BIN: default build/mastra-platform beside this checkout; N:
-- ended execs (default 20000); ROUNDS: default 3.
-- MASTRA_BENCH_RETAINED_BEFORE=OTHER_PLATFORM_BIN alternates with
-- another build: a change against its parent on the same machine.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local n = tonumber(arg[2] or "20000")
local rounds = tonumber(arg[3] or "3")
local tmp = os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp"
local CONCURRENCY = 50
local STREAM = 64 * 1048576

local sh = lib.sh
local function absolute(path)
  if path:sub(1, 1) == "/" then return path end
  return sh("pwd"):gsub("%s+$", "") .. "/" .. path
end
bin = absolute(bin)
local dir = sh("mktemp -d " .. mastra.quote(tmp .. "/mastra-walks-bench.XXXXXX"))
  :gsub("%s+$", "")

local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()

-- fn(sb) in a fresh sandbox of a fresh server of build `which` with
-- `extra` flags, after `count` ended execs of `echo x` in it
local function with_server(which, extra, count, fn)
  local s = lib.serve(host, { bin = which, driver = "process", data = dir .. "/data",
    log = dir .. "/platform.log", extra = extra })
  local sb = mastra.PlatformSandbox.new{ accessToken = s.token, proxyUrl = s.url,
    projectId = "bench", environmentId = "bench" }
  local ok, err = pcall(function()
    sb:start()
    local slots = {}
    for i = 1, CONCURRENCY do slots[i] = i end
    mastra.map(slots, function(i)
      for _ = 1, count // CONCURRENCY + (i <= count % CONCURRENCY and 1 or 0) do
        local r = lib.must(sb:executeCommand("echo x"))
        assert(r.stdout == "x\n", r.stdout)
      end
    end, { concurrency = CONCURRENCY })
    fn(sb)
  end)
  pcall(sb.destroy, sb)
  s.server:kill()
  s.server:wait()
  sh("rm -rf " .. mastra.quote(dir .. "/data"))
  assert(ok, err)
end

local function stream_ms(sb)
  local got = 0
  local ms = lib.time(function()
    lib.must(sb:executeCommand("head", { "-c", tostring(STREAM), "/dev/zero" }, {
      onStdout = function(chunk) got = got + #chunk end, maxRetainedBytes = 0 }))
  end)
  assert(got == STREAM, ("stdout: got %d of %d bytes"):format(got, STREAM))
  return ms
end

local function evict_ms(sb)
  local r
  local ms = lib.time(function()
    r = lib.must(sb:executeCommand("head -c 65536 /dev/zero | tr '\\0' a"))
  end)
  assert(#r.stdout == 65536, "the evicting exec lost output")
  return ms
end

local function round(name, which)
  local row = { name }
  for _, count in ipairs({ 0, n }) do
    with_server(which, "", count, function(sb)
      local xs = {}
      for i = 1, 3 do xs[i] = stream_ms(sb) end
      row[#row + 1] = ("%.0f ms"):format(lib.pct(xs, 0.5))
    end)
  end
  with_server(which, " --exec-log-total 64k", n, function(sb)
    row[#row + 1] = ("%.1f ms"):format(evict_ms(sb))
  end)
  print("| " .. table.concat(row, " | ") .. " |")
end

local ok, err = pcall(function()
  local before = os.getenv("MASTRA_BENCH_RETAINED_BEFORE")
  print(("| build | 64 MiB stdout, 0 ended (p50 of 3) | the same, %d ended"
    .. " | 64 KiB exec evicting %d ended |"):format(n, n))
  print("|---|--:|--:|--:|")
  for _ = 1, rounds do
    if before and before ~= "" then round("before", absolute(before)) end
    round("this build", bin)
  end
end)
sh("rm -rf " .. mastra.quote(dir))
assert(ok, err)
