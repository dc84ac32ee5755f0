-- The egress proxy's cost (bench/README.md, "Egress"; issue 25, part 6),
-- on one run: create -> first exec with egress on against --egress off
-- (samples interleaved, the warm pool on), one TCP stream out of a sandbox
-- to a test host beside the same stream between two namespaces over a
-- veth, and the server's memory per idle sandbox, egress on and off. Needs
-- root (the test host's namespace) and a base. Not part of bench/run.
--
--   mastra-lua bench/egress.lua [PLATFORM_BIN [BASE [N [MIB]]]]
--
-- Nothing leaves this machine: the test host is a network namespace made
-- here (198.18.N.2, the benchmarking range, behind a veth), removed at the
-- end, as in spec/egress_spec.lua.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local client = require "mastra.platform_client"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local given_base = arg[2] ~= "" and arg[2] or nil
local n = tonumber(arg[3] or "60")
local MIB = tonumber(arg[4] or "512")
local tmp = os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp"
local N = 200 + math.random(50)
local NS, NS2 = "mpbench-" .. N, "mpbench2-" .. N
local VETH = "mpbv" .. N
local HOSTIP, TESTIP = ("198.18.%d.1"):format(N), ("198.18.%d.2"):format(N)

local function sh(cmd) return lib.sh(cmd, true) end

if bin:sub(1, 1) ~= "/" then bin = sh("pwd"):gsub("%s+$", "") .. "/" .. bin end
local dir = sh("mktemp -d " .. mastra.quote(tmp .. "/mastra-egress-bench.XXXXXX")):gsub("%s+$", "")
sh("chmod 755 " .. mastra.quote(dir))
local base = given_base or (dir .. "/base")
if not given_base then
  sh(mastra.quote(bin) .. " base build --minimal --base " .. mastra.quote(base))
end

-- the sink: reads and counts; one connection at a time
local SINK = [[
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5001)); s.listen(4)
while True:
    c, _ = s.accept()
    n = 0
    while True:
        b = c.recv(1 << 20)
        if not b: break
        n += len(b)
    c.sendall(str(n).encode()); c.close()
]]
-- the source: MIB MiB to ADDR:5001, prints MB/s
local SOURCE = [[
import socket, sys, time
addr, mib = sys.argv[1], int(sys.argv[2])
buf = b"x" * (1 << 20)
s = socket.create_connection((addr, 5001)); t = time.time()
for i in range(mib): s.sendall(buf)
s.shutdown(socket.SHUT_WR); got = int(s.recv(64)); dt = time.time() - t
assert got == mib << 20, got
print("%.0f" % (mib * 1.048576 / dt))
]]
local f = assert(io.open(dir .. "/sink.py", "w")); f:write(SINK); f:close()
f = assert(io.open(dir .. "/source.py", "w")); f:write(SOURCE); f:close()

local function netns_up()
  sh(("ip netns add %s && ip link add %s type veth peer name eth0 netns %s"
    .. " && ip addr add %s/30 dev %s && ip link set %s up && ip -n %s addr add %s/30 dev eth0"
    .. " && ip -n %s link set eth0 up && ip -n %s link set lo up"):format(NS, VETH, NS, HOSTIP,
    VETH, VETH, NS, TESTIP, NS, NS))
  sh(("ip netns add %s && ip link add v0 netns %s type veth peer name v1 netns %s"
    .. " && ip -n %s addr add 198.19.%d.1/30 dev v0 && ip -n %s link set v0 up"
    .. " && ip -n %s link set v1 up && ip -n %s addr add 198.19.%d.2/30 dev v1"):format(NS2, NS,
    NS2, NS, N, NS, NS2, NS2, N))
  sh(("setsid ip netns exec %s python3 %s/sink.py </dev/null >/dev/null 2>&1 &"):format(NS, dir))
  sh("sleep 0.5")
end

local function netns_down()
  for _, ns in ipairs{ NS, NS2 } do
    sh(("ip netns pids %s | xargs -r kill -9; ip netns del %s"):format(ns, ns))
  end
end

local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()

local function rss_kb(pid)
  return tonumber(sh("grep VmRSS /proc/" .. pid .. "/status"):match("(%d+)")) or 0
end

local pct = lib.pct

local function serve(name, extra)
  local s = lib.serve(host, { bin = bin, base = base, data = dir .. "/data-" .. name,
    log = dir .. "/platform-" .. name .. ".log", extra = extra })
  s.name, s.first = name, {}
  function s.create()
    return client.request(s.cfg, "POST", "/sandbox", { json = { environmentId = "bench" } }).json.id
  end
  function s.exec(id, cmd)
    local r = client.request(s.cfg, "POST", "/sandbox/" .. id .. "/exec",
      { json = { command = cmd, timeout = 600000 } }).json
    assert(r.exitCode == 0, name .. ": " .. cmd .. ": " .. tostring(r.stderr))
    return r.stdout
  end
  function s.destroy(id) client.request(s.cfg, "DELETE", "/sandbox/" .. id) end
  return s
end

netns_up()
local ok, err = pcall(function()
  local on, off = serve("egress-on", ""), serve("egress-off", " --egress off")
  local servers = { on, off }
  for _, s in ipairs(servers) do s.destroy((function() local id = s.create(); s.exec(id, "true")
    return id end)()) end
  for i = 1, n do
    for _, s in ipairs(servers) do
      local t0 = mastra.now()
      local id = s.create()
      local t1 = mastra.now()
      s.exec(id, "true")
      s.first[i] = mastra.now() - t0
      s.created = s.created or {}
      s.created[i] = t1 - t0
      s.destroy(id)
    end
    mastra.sleep(tonumber(os.getenv("MASTRA_BENCH_PAUSE_MS") or "150"))
  end
  for _, s in ipairs(servers) do
    print(("create->first exec  %-10s p50 %.1f ms  p90 %.1f ms  (n=%d; the create alone p50"
      .. " %.1f ms)"):format(s.name, pct(s.first, 0.5), pct(s.first, 0.9), n,
      pct(s.created, 0.5)))
  end
  -- one stream: out of a sandbox through the proxy, and over a veth
  local id = on.create()
  local src = sh("cat " .. mastra.quote(dir .. "/source.py"))
  on.exec(id, "cat > /tmp/source.py <<'EOF'\n" .. src .. "EOF")
  local through, direct = {}, {}
  for i = 1, 3 do
    through[i] = tonumber(on.exec(id, ("python3 /tmp/source.py %s %d"):format(TESTIP, MIB)))
    direct[i] = tonumber(sh(("ip netns exec %s python3 %s/source.py 198.19.%d.1 %d"):format(NS2,
      dir, N, MIB)))
  end
  on.destroy(id)
  print(("one TCP stream, %d MiB: through the egress proxy p50 %d MB/s; over a veth between"
    .. " two namespaces p50 %d MB/s"):format(MIB, pct(through, 0.5), pct(direct, 0.5)))
  -- the server's memory per idle sandbox (each made one connection out)
  for _, s in ipairs(servers) do
    local before, ids = rss_kb(s.pid), {}
    for i = 1, 40 do
      ids[i] = s.create()
      s.exec(ids[i], s == on and ("python3 -c \"import socket; socket.create_connection(('%s',"
        .. " 5001)).close()\""):format(TESTIP) or "true")
    end
    s.rss = (rss_kb(s.pid) - before) / 40
    for _, x in ipairs(ids) do s.destroy(x) end
  end
  print(("server RSS per idle sandbox: egress on %.1f KiB (one connection logged), off %.1f KiB")
    :format(on.rss, off.rss))
  for _, s in ipairs(servers) do s.server:kill() end
end)
netns_down()
sh("rm -rf " .. mastra.quote(dir))
assert(ok, err)
