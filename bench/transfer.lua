-- Workspace:upload and Workspace:download at 100 MB: a bucket object goes
-- bucket -> sandbox -> bucket, and the peak RSS of the client and of the
-- server is measured per step (bench/README.md, "Transfers"). Not part of
-- bench/run: it writes 300 MB and takes a few seconds.
--
--   mastra-lua bench/transfer.lua [PLATFORM_BIN [MB [METHOD]]]
--   mastra-lua bench/transfer.lua dirs [PLATFORM_BIN [FILES [MB]]]
--
-- PLATFORM_BIN: the mastra-platform to measure (default: build/mastra-platform
-- beside this checkout); MB: the size (default 100); METHOD: "stdin"
-- (default) or "commands" (the fallback of a platform without stdin). The
-- object is put into the bucket and its hashes are taken with curl and
-- sha256sum, outside this process, so the figures are the transfers'
-- own. The data directory is under MASTRA_BENCH_TMPDIR (default /var/tmp).
--
-- `dirs`: Workspace:uploadDir and Workspace:downloadDir (host directory <->
-- sandbox) of a tree of FILES small files (default 2000, 1 to 4 KiB each)
-- and of one MB file (default 100), through stdin and through the commands
-- of a platform without stdin (method "commands", what "auto" takes there),
-- beside the limit: `tar -c | tar -x` through a pipe on the host, with the
-- CPU seconds of each step (the client's, the server's: cpu_s). Every
-- tree is checked (modes, links, sha256 of every file) after each step.
-- MASTRA_BENCH_SERVE_ARGS adds flags to `mastra-platform serve` (e.g.
-- "--driver process", or "--base DIR" for the namespaces driver).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local dirs = arg[1] == "dirs"
if dirs then table.remove(arg, 1) end
local bin = arg[1] or (here .. "../build/mastra-platform")
local mb = tonumber(arg[2] or "100")
local method = arg[3] or "stdin"
local files, big_mb = tonumber(arg[2] or "2000"), tonumber(arg[3] or "100")
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
  .. " " .. (os.getenv("MASTRA_BENCH_SERVE_ARGS") or "")
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

-- {====== dirs ======

-- modes, kinds, link targets and the sha256 of every file of a tree, as
-- one text (the same command on the host and in the sandbox)
local MANIFEST = [[cd -- "$1" && find . -mindepth 1 -printf '%y %m %p -> %l\n' | LC_ALL=C sort &&
find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum]]

-- CPU seconds (user + system, with the children it has waited for) of a
-- process: the client's tar processes are its children; the process
-- driver's commands are the server's (the namespaces driver's are its
-- keepers' until the sandbox ends, so they are not counted there)
local function cpu_s(pid)
  local stat = lib.slurp("/proc/" .. pid .. "/stat"):match("%) (.*)$")
  local f = {}
  for x in stat:gmatch("%S+") do f[#f + 1] = x end -- from the state (a letter) on
  -- utime stime cutime cstime, in ticks of 1/100 s
  return (tonumber(f[12]) + tonumber(f[13]) + tonumber(f[14]) + tonumber(f[15])) / 100
end

local function manifest(sb, path)
  return lib.must(sb:executeCommand("sh", { "-c", MANIFEST, "sh", path })).stdout
end

local function bench_dirs()
  local o = { accessToken = token, proxyUrl = url, projectId = "bench", environmentId = "bench" }
  local sb = mastra.PlatformSandbox.new(o)
  local ws <close> = mastra.Workspace.new{ sandbox = sb }
  ws:init()
  -- the trees, on the host
  local small, large = dir .. "/small", dir .. "/large"
  assert(os.execute(("mkdir -p %s %s && cd %s && for d in $(seq 0 19); do mkdir d$d;"
    .. " done"):format(q(small), q(large), q(small))))
  local rnd = assert(io.open("/dev/urandom", "rb"))
  local small_bytes = 0
  for i = 1, files do
    local f = assert(io.open(("%s/d%d/f%04d.bin"):format(small, i % 20, i), "wb"))
    local data = rnd:read(1024 + (i * 7919) % 3072)
    small_bytes = small_bytes + #data
    f:write(data)
    f:close()
  end
  rnd:close()
  assert(os.execute(("head -c %d /dev/urandom > %s/big.bin"):format(big_mb * 1048576, q(large))))
  local cases = {
    { name = ("%d files of 1-4 KiB (%.1f MB)"):format(files, small_bytes / 1e6), path = small,
      mb = small_bytes / 1048576 },
    { name = ("one file of %d MB"):format(big_mb), path = large, mb = big_mb },
  }
  print(("directory transfers (the platform's driver: %s)"):format(sb:getInfo().metadata
    and sb:getInfo().metadata.driver or "?"))
  print("| tree | step | time | MB/s | CPU client | CPU server |")
  print("|---|---|--:|--:|--:|--:|")
  for _, c in ipairs(cases) do
    local want = manifest(host, c.path)
    local c0, s0
    local function start()
      c0, s0 = cpu_s("self"), cpu_s(spid)
      return lib.now()
    end
    local function row(step, ms)
      print(("| %s | %s | %.2f s | %.1f | %.2f s | %.2f s |"):format(c.name, step, ms / 1000,
        c.mb / (ms / 1000), cpu_s("self") - c0, cpu_s(spid) - s0))
    end
    -- the limit: tar | tar through a pipe on the host
    local t0 = start()
    lib.must(host:executeCommand(("mkdir %s && tar -c -f - -C %s . | tar -x -f - -C %s")
      :format(q(c.path .. ".pipe"), q(c.path), q(c.path .. ".pipe")), nil, { timeout = 0 }))
    row("`tar -c | tar -x` through a pipe (the limit)", lib.now() - t0)
    assert(manifest(host, c.path .. ".pipe") == want, "the pipe's copy differs")
    for _, m in ipairs{ "stdin", "commands" } do
      t0 = start()
      local up = ws:uploadDir(c.path, "tree-" .. m, { method = m })
      row(("`uploadDir`, %s (%.1f MB of tar)"):format(m == "stdin" and "stdin"
        or "commands (no stdin)", up.bytes / 1e6), lib.now() - t0)
      assert(up.method == m)
      assert(manifest(sb, "tree-" .. m) == want, "the sandbox's copy differs (" .. m .. ")")
    end
    t0 = start()
    ws:downloadDir("tree-stdin", c.path .. ".back")
    row("`downloadDir`", lib.now() - t0)
    assert(manifest(host, c.path .. ".back") == want, "the host's copy differs")
    lib.must(sb:executeCommand("rm", { "-rf", "tree-stdin", "tree-commands" }))
  end
  print("every copy's modes, links and sha256 equal the source's")
end

-- }======

local ok, err = pcall(dirs and bench_dirs or function()
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
