-- Workspace:upload and Workspace:download at 100 MB: a bucket object goes
-- bucket -> sandbox -> bucket, and the peak RSS of the client and of the
-- server is measured per step (bench/README.md, "Transfers"). Not part of
-- bench/run: it writes 300 MB and takes a few seconds.
--
--   mastra-lua bench/transfer.lua [PLATFORM_BIN [MB [METHOD]]]
--
-- PLATFORM_BIN: the mastra-platform to measure (default: build/mastra-platform
-- beside this checkout); MB: the size (default 100); METHOD: "stdin"
-- (default) or "commands" (the fallback of a platform without stdin). The
-- object is put into the bucket and its hashes are taken with curl and
-- sha256sum, outside this process, so the figures are the transfers'
-- own. The data directory is under MASTRA_BENCH_TMPDIR (default /var/tmp).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local mb = tonumber(arg[2] or "100")
local method = arg[3] or "stdin"
local base = os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp"
local q = mastra.quote

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

-- The peak resident set of a process (this one by default) since the
-- last reset, in MiB.
local function peak_mib(pid)
  local status = lib.slurp("/proc/" .. (pid or "self") .. "/status")
  return tonumber(status:match("VmHWM:%s*(%d+)")) / 1024
end

local function reset_peak(pid)
  if pid == nil then collectgarbage("collect") end
  local f = io.open("/proc/" .. (pid or "self") .. "/clear_refs", "w")
  if f then
    f:write("5")
    f:close()
  end
end

local dir = sh("mktemp -d " .. q(base .. "/mastra-transfer-bench.XXXXXX")):gsub("%s+$", "")
local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()
local out = {}
local server = host.processes:spawn("exec " .. q(bin) .. " serve --listen 127.0.0.1:0"
  .. " --data-dir " .. q(dir .. "/data") .. " --token-file " .. q(dir .. "/token")
  .. " 2>" .. q(dir .. "/platform.log"), { onStdout = function(s) out[#out + 1] = s end })
local line
for _ = 1, 600 do -- 30 s: a loaded machine checks the base slowly
  line = table.concat(out):match("^([^\n]*)\n")
  if line or server.exitCode then break end
  mastra.sleep(50)
end
if not line then
  local log = sh("cat " .. q(dir .. "/platform.log"))
  os.execute("rm -rf " .. q(dir))
  error("mastra-platform did not start: " .. log, 0)
end
local url = line:match('"url":"([^"]+)"')
local spid = line:match('"pid":(%d+)') -- the server's
local token = sh("cat " .. q(dir .. "/token")):gsub("%s+$", "")
local object = url .. "/v1/railway/projects/bench/fs/bench/"
local auth = "Authorization: Bearer " .. token

local ok, err = pcall(function()
  local file = dir .. "/data.bin"
  assert(os.execute(("head -c %d /dev/urandom > %s"):format(mb * 1048576, q(file))))
  local want = sh("sha256sum " .. q(file)):match("^(%x+)")
  assert(os.execute(("curl -sSf -o /dev/null -H %s -T %s %s"):format(q(auth), q(file),
    q(object .. "in.bin"))))
  os.remove(file)

  local o = { accessToken = token, proxyUrl = url, projectId = "bench" }
  local fs = mastra.PlatformFilesystem.new{ accessToken = token, proxyUrl = url,
    projectId = "bench", bucketName = "bench" }
  o.environmentId = "bench"
  local sb = mastra.PlatformSandbox.new(o)
  local ws <close> = mastra.Workspace.new{ filesystem = fs, sandbox = sb }
  ws:init()
  local baseline = peak_mib()
  reset_peak(spid)
  local server_base = peak_mib(spid)

  reset_peak()
  reset_peak(spid)
  local t0 = lib.now()
  local up = ws:upload("/in.bin", "copy.bin", { method = method })
  local up_ms = lib.now() - t0
  local up_peak, up_server = peak_mib(), peak_mib(spid)
  local got = sb:executeCommand("sha256sum", { "copy.bin" }).stdout:match("^(%x+)")

  reset_peak()
  reset_peak(spid)
  t0 = lib.now()
  ws:download("copy.bin", "/out.bin")
  local down_ms = lib.now() - t0
  local down_peak, down_server = peak_mib(), peak_mib(spid)
  local back = sh(("curl -sSf -H %s %s | sha256sum"):format(q(auth), q(object .. "out.bin")))
    :match("^(%x+)")

  assert(got == want, "the sandbox's copy has another sha256")
  assert(back == want, "the bucket's copy has another sha256")
  print(("transfer of %d MB (%s): sha256 equal on all three sides"):format(mb, up.method))
  print(("  baseline RSS            %7.1f MiB (server %.1f MiB)"):format(baseline, server_base))
  print(("  upload   bucket->sandbox %6.0f ms  %6.1f MB/s  peak RSS %7.1f MiB  server %7.1f MiB")
    :format(up_ms, mb / (up_ms / 1000), up_peak, up_server))
  print(("  download sandbox->bucket %6.0f ms  %6.1f MB/s  peak RSS %7.1f MiB  server %7.1f MiB")
    :format(down_ms, mb / (down_ms / 1000), down_peak, down_server))
end)
server:kill()
server:wait()
os.execute("rm -rf " .. q(dir))
if not ok then error(err, 0) end
