-- The latency of an exec on one sandbox while another sandbox of the same
-- mastra-platform captures a large checkpoint (bench/README.md,
-- "Checkpoint capture and exec latency"). Not part of bench/run: it writes
-- hundreds of MB and takes about a minute.
--
--   mastra-lua bench/checkpoint.lua [PLATFORM_BIN [MB [CAPTURES]]]
--
-- PLATFORM_BIN: the mastra-platform to measure (default: build/mastra-platform
-- beside this checkout); MB: the size of the captured tree (default 200);
-- CAPTURES: how many POST /checkpoint in a row (default 10). The data
-- directory is under MASTRA_BENCH_TMPDIR (default /var/tmp: a disk, where a
-- capture costs what it costs users). Prints the figures, one line each.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local client = require "mastra.platform_client"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local mb = tonumber(arg[2] or "200")
local captures = tonumber(arg[3] or "10")
local base = os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp"

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

local dir = sh("mktemp -d " .. mastra.quote(base .. "/mastra-ckpt-bench.XXXXXX")):gsub("%s+$", "")
local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()
local out = {}
local server = host.processes:spawn("exec " .. mastra.quote(bin) .. " serve --listen 127.0.0.1:0"
  .. " --data-dir " .. mastra.quote(dir .. "/data") .. " --token-file "
  .. mastra.quote(dir .. "/token") .. " 2>" .. mastra.quote(dir .. "/platform.log"),
  { onStdout = function(s) out[#out + 1] = s end })
local line
for _ = 1, 200 do
  line = table.concat(out):match("^([^\n]*)\n")
  if line or server.exitCode then break end
  mastra.sleep(50)
end
assert(line, "mastra-platform did not start: "
  .. sh("cat " .. mastra.quote(dir .. "/platform.log")))
local url = line:match('"url":"([^"]+)"')
local token = sh("cat " .. mastra.quote(dir .. "/token")):gsub("%s+$", "")

local opts = { accessToken = token, proxyUrl = url, projectId = "bench", environmentId = "bench" }
local function new(id)
  local o = { id = id }
  for k, v in pairs(opts) do o[k] = v end
  return mastra.PlatformSandbox.new(o)
end

local big, probe = new("bench-big"), new("bench-probe")
big:start()
probe:start()
-- incompressible, in 50 files: tar reads and writes every byte
lib.must(big:executeCommand(("for i in $(seq 50); do head -c %d /dev/urandom > f$i.bin; done")
  :format(mb * 1048576 // 50), nil, { timeout = 600000 }))
lib.must(probe:executeCommand("true"))

local function stats(xs)
  local s = {}
  for i, x in ipairs(xs) do s[i] = x end
  table.sort(s)
  local function q(p) return s[math.max(1, math.ceil(#s * p))] or 0 end
  return ("n=%d median %.1f ms, p95 %.1f ms, max %.1f ms"):format(#s, q(0.5), q(0.95), s[#s] or 0)
end

-- execs alone
local idle = lib.reps(30, 10000, function() lib.must(probe:executeCommand("true")) end)

-- execs while captures run, back to back
local during, capture_ms = {}, {}
for _ = 1, captures do
  local done = false
  local t = mastra.spawn(function()
    local t0 = lib.now()
    client.request(big._cfg, "POST", "/sandbox/" .. big.sandboxId .. "/checkpoint",
      { json = { id = big.id } })
    capture_ms[#capture_ms + 1] = lib.now() - t0
    done = true
  end)
  mastra.sleep(20) -- the capture has begun
  while not done do
    during[#during + 1] = lib.time(function() lib.must(probe:executeCommand("true")) end)
  end
  t:wait()
end

print(("checkpoint bench: %s, %d MB tree on %s"):format(bin, mb,
  sh("findmnt -n -o FSTYPE -T " .. mastra.quote(dir)):gsub("%s+$", "")))
print("  capture (POST /checkpoint):  " .. stats(capture_ms))
print("  exec `true`, no capture:     " .. stats(idle))
print("  exec `true`, during capture: " .. stats(during))

big:destroy{ keepCheckpoint = false }
probe:destroy{ keepCheckpoint = false }
server:kill()
server:wait()
os.execute("rm -rf " .. mastra.quote(dir))
