-- Egress of the namespaces driver (issue 25), end to end: sandboxes reach
-- "the internet" through the server's egress proxy, and nothing else.
--
-- THE NETWORK RULE OF THE TESTS: no test, example or benchmark sends a
-- packet beyond this machine. This spec makes its own internet: a network
-- namespace (mpt-<n>) behind a veth from the host's namespace, with the
-- addresses 198.18.N.2-.6 (198.18.0.0/15, the benchmarking range, never
-- routed on the internet) and, as /32s routed to it, one address in each of
-- the private and special ranges that sandboxes must not reach. In it,
-- spec/support/fake_internet.py serves HTTP (80, 8080), HTTPS with a
-- certificate made here for *.test (443) and DNS for *.test (53), and the
-- servers are pointed at it with --egress-dns. Every destination a sandbox
-- is sent to is inside that namespace, the server's switch, or the
-- sandbox itself; a refused destination that the proxy let through by
-- mistake would answer from the fake internet, and the test would see it.
-- Everything started here is stopped here (the namespace, its processes,
-- the servers), with bounded waits.
--
-- Needs root (network namespaces and a veth for the fake internet); the
-- non-root server runs as an unprivileged uid, as in
-- spec/namespaces_user_spec.lua. Otherwise every case is pending.
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local trim = util.trim
local N = 100 + (tonumber(tostring(os.time()):sub(-2)) or 0) -- 198.18.N.0/29
local UID = 48000 + (tonumber(tostring(os.time()):sub(-3)) or 0)
local NS = ("mpt-%d-%d"):format(N, math.random(1e6))
local VETH = ("mptv%d"):format(math.random(1e6))
local HOST = ("198.18.%d.1"):format(N)
local FAKE = ("198.18.%d.2"):format(N)
local function fake(i) return ("198.18.%d.%d"):format(N, i) end
-- one address of each refused range, routed (as /32s) to the fake internet
local RESERVED = {
  ("10.255.%d.77"):format(N), ("172.31.%d.77"):format(N), ("192.168.%d.77"):format(N),
  ("100.127.%d.77"):format(N), ("169.254.%d.77"):format(N),
}

-- host commands run without the sanitizers' preload (the busted of the
-- sanitizers' build has LD_PRELOAD=libasan): pgrep with it preloaded hung
-- in a futex reading a killed server's processes
local sh = util.sh

local function must(cmd)
  local out, ok = sh(cmd)
  assert(ok, cmd .. ": " .. out)
  return out
end

local function skip_reason()
  if trim(sh("id -u")) ~= "0" then
    return "the fake internet needs root (a network namespace and a veth): skipped"
  end
  local _, ok = sh("command -v openssl && command -v ip && command -v python3")
  if not ok then return "needs openssl, ip and python3: skipped" end
  return nil
end

-- {====== the fake internet ======
local inet = {}

function inet.start()
  inet.dir = platform.tmpdir()
  must(("chmod 755 %s"):format(inet.dir))
  must(("openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=secure.test"
    .. " -addext subjectAltName=DNS:secure.test,DNS:*.test -days 1"
    .. " -keyout %s/key.pem -out %s/cert.pem"):format(inet.dir, inet.dir))
  inet.cert = util.read_file(inet.dir .. "/cert.pem")
  must(("ip netns add %s"):format(NS))
  inet.made = true
  must(("ip link add %s type veth peer name eth0 netns %s"):format(VETH, NS))
  must(("ip addr add %s/29 dev %s && ip link set %s up"):format(HOST, VETH, VETH))
  must(("ip -n %s link set lo up && ip -n %s link set eth0 up"):format(NS, NS))
  for i = 2, 6 do must(("ip -n %s addr add %s/29 dev eth0"):format(NS, fake(i))) end
  for _, a in ipairs(RESERVED) do
    must(("ip -n %s addr add %s/32 dev eth0"):format(NS, a))
    must(("ip route add %s/32 via %s dev %s"):format(a, FAKE, VETH))
  end
  -- its stdin is our pipe: it exits when we close it (or the spec dies)
  inet.proc = assert(io.popen(("unset LD_PRELOAD; exec ip netns exec %s python3 %s %s %s/cert.pem"
    .. " %s/key.pem > %s/log 2>&1"):format(NS, "spec/support/fake_internet.py", FAKE,
    inet.dir, inet.dir, inet.dir), "w"))
  for _ = 1, 100 do
    if (util.read_file(inet.dir .. "/log") or ""):find("ready") then return end
    sh("sleep 0.1")
  end
  error("the fake internet did not start: " .. tostring(util.read_file(inet.dir .. "/log")))
end

function inet.stop()
  if inet.proc then pcall(inet.proc.close, inet.proc) end
  if inet.made then
    sh(("ip netns pids %s | xargs -r kill -9"):format(NS))
    sh(("ip netns del %s"):format(NS)) -- the veth and the routes through it go with it
    sh(("ip link del %s"):format(VETH))
  end
  if inet.dir then platform.rm_rf(inet.dir) end
end
-- }======

local function run(sb, cmd, timeout)
  return sb:executeCommand(cmd, nil, { timeout = timeout or 60000 })
end

local function egress_of(srv, sb)
  local r = srv:curl("GET", "/v1/railway/projects/proj/sandbox/" .. sb.sandboxId .. "/egress")
  assert.are.equal(200, r.status, r.body)
  return r.json
end

local function find_entry(log, pred)
  for _, e in ipairs(log.entries or {}) do
    if pred(e) then return e end
  end
end

-- curl in sb; its exit code, output, and seconds taken
local function fetch(sb, args)
  local t0 = mastra.now()
  local r = run(sb, "curl -sS -m 8 " .. args .. " 2>&1")
  local t1 = mastra.now()
  return r.exitCode, r.stdout, (t1 - t0) / 1000
end

local function install_ca(sb)
  local w = run(sb, "cat > /tmp/ca.pem <<'EOF'\n" .. inet.cert .. "EOF")
  assert.are.equal(0, w.exitCode, w.stderr)
end

-- the cases both servers (root, not root) pass
local function outbound_cases(get)
  it("ISOLATED: DNS, HTTP and HTTPS reach the fake internet", function()
    local srv = get()
    if not srv then return pending(inet.why) end
    local sb = srv:startSandbox()
    local r = run(sb, "getent hosts web.test")
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.matches("^" .. FAKE:gsub("%.", "%%.") .. "%s+web%.test", r.stdout)
    local code, out = fetch(sb, "http://web.test/isolated")
    assert.are.equal(0, code, out)
    assert.are.equal("fake-internet web.test /isolated\n", out)
    install_ca(sb)
    code, out = fetch(sb, "--cacert /tmp/ca.pem https://secure.test/tls")
    assert.are.equal(0, code, out)
    assert.are.equal("fake-internet secure.test /tls\n", out)
    -- UDP other than DNS: a datagram out and its answer back
    r = run(sb, ("python3 -c \"import socket; s = socket.socket(socket.AF_INET,"
      .. " socket.SOCK_DGRAM); s.settimeout(5); s.connect(('%s', 7));"
      .. " s.send(b'ping'); print(s.recv(512).decode())\""):format(FAKE))
    assert.are.equal("echo ping\n", r.stdout, r.stderr)
    local info = sb:getInfo()
    assert.is_table(info.metadata.egress)
    assert.is_true(info.metadata.egress.connections >= 2)
  end)

  it("PRIVATE: the same, and the members still reach each other", function()
    local srv = get()
    if not srv then return pending(inet.why) end
    local a = srv:startSandbox{ networkIsolation = "PRIVATE", environmentId = "eg-p" }
    local b = srv:startSandbox{ networkIsolation = "PRIVATE", environmentId = "eg-p" }
    local code, out = fetch(a, "http://web.test/private")
    assert.are.equal(0, code, out)
    assert.are.equal("fake-internet web.test /private\n", out)
    local server = a.processes:spawn("exec python3 -m http.server 8000")
    local got
    for _ = 1, 50 do
      code, got = fetch(b, ("http://%s:8000/"):format(a.sandboxId))
      if code == 0 then break end
      run(b, "sleep 0.2")
    end
    pcall(server.kill, server)
    assert.are.equal(0, code, got)
  end)

  it("refuses the host, other sandboxes and private ranges at once, also after the"
    .. " sandbox's root changes its routes and addresses", function()
    local srv = get()
    if not srv then return pending(inet.why) end
    local sb, other = srv:startSandbox(), srv:startSandbox()
    local own = trim(run(other, "python3 -c \"import socket; s = socket.socket(socket.AF_INET,"
      .. " socket.SOCK_DGRAM); s.connect(('10.232.0.1', 9)); print(s.getsockname()[0])\"").stdout)
    assert.matches("^10%.232%.", own)
    run(other, "nohup python3 -m http.server 8000 >/dev/null 2>&1 &")
    local targets = { HOST, "10.232.0.1", own .. ":8000" }
    for _, a in ipairs(RESERVED) do targets[#targets + 1] = a end
    -- refused at once; after the root's own routes (without root it may
    -- route an address straight onto eth0, where nothing answers its ARP)
    -- refused all the same, within curl's bound
    local function check_all(when, bound)
      for _, t in ipairs(targets) do
        local code, out, secs = fetch(sb, "http://" .. t .. "/")
        assert.are_not.equal(0, code, when .. t .. ": " .. out)
        assert.is_nil(out:find("fake-internet", 1, true), when .. t .. ": " .. out)
        assert.is_true(secs < bound, when .. t .. " took " .. secs .. " s: " .. out)
      end
      -- UDP to a private address: an ICMP error at once
      local r = run(sb, ("python3 -c \"import socket, time; s = socket.socket(socket.AF_INET,"
        .. " socket.SOCK_DGRAM); s.settimeout(3); s.connect(('%s', 9)); s.send(b'x');"
        .. " t = time.time()\ntry: s.recv(10); print('answered')\nexcept socket.timeout:"
        .. " print('timeout')\nexcept OSError as e: print('refused', e.errno)\"")
        :format(RESERVED[1]))
      if bound <= 3 then
        assert.matches("^refused", r.stdout, when .. r.stderr)
      else
        assert.is_nil(r.stdout:find("answered", 1, true), when .. r.stdout)
      end
    end
    check_all("", 3)
    -- its root tries to route around the switch (with root the netns is not
    -- its to change; without root it is, and it gains nothing)
    run(sb, ("ip route add %s/32 dev eth0; ip route add 10.0.0.0/8 dev eth0;"
      .. " ip addr add %s/32 dev eth0; ip addr add %s/32 dev eth0"):format(HOST, own, fake(6)))
    check_all("after ip route/addr: ", 9)
    local log = egress_of(srv, sb)
    assert.is_true(log.refused >= #targets)
    assert.is_not_nil(find_entry(log, function(e)
      return e.address == HOST and e.allowed == false and e.reason == "an address of the host"
    end))
    assert.is_not_nil(find_entry(log, function(e)
      return e.address == RESERVED[1] and e.allowed == false and e.reason:find("private")
    end))
  end)

  it("logs each connection: time, destination, name, bytes, allowed", function()
    local srv = get()
    if not srv then return pending(inet.why) end
    local sb = srv:startSandbox()
    local code, out = fetch(sb, "http://web.test/big100000 -o /dev/null -w '%{size_download}'")
    assert.are.equal(0, code, out)
    assert.are.equal("100000", out)
    local log = egress_of(srv, sb)
    local e = find_entry(log, function(x) return x.protocol == "tcp" and x.port == 80 end)
    assert.is_not_nil(e, util.json_encode and util.json_encode(log) or "")
    assert.are.equal(FAKE, e.address)
    assert.are.equal("web.test", e.name)
    assert.is_true(e.allowed)
    assert.is_true(e.bytesIn > 100000)
    assert.is_true(e.bytesOut > 20)
    assert.matches("^%d+%-%d+%-%d+T", e.time)
    assert.is_not_nil(find_entry(log, function(x)
      return x.protocol == "dns" and x.name == "web.test" and x.allowed
    end))
    assert.is_true(log.connections >= 2 and log.bytesIn > 100000)
  end)
end

describe("egress (namespaces driver)", function()
  local why = skip_reason()
  local root, user, base, scratch
  inet.why = why

  setup(function()
    if why then return end
    inet.start()
    local ok, s = pcall(platform.start, { args = { "--driver", "namespaces",
      "--egress-dns", FAKE } })
    assert(ok, s)
    root = s
  end)

  teardown(function()
    if root then root:close() end
    if user then user:close() end
    inet.stop()
    if scratch then platform.rm_rf(scratch) end
  end)

  describe("a root server", function()
    outbound_cases(function() return root end)

    it("allows and denies by CIDR and by name; deny wins; DNS answers REFUSED", function()
      if why then return pending(why) end
      local p = platform.start{ args = { "--driver", "namespaces", "--egress-dns", FAKE,
        "--egress-allow", "*.test," .. fake(4) .. "/31", "--egress-deny",
        "deny.test", "--egress-deny", fake(5) } }
      local ok, err = pcall(function()
        local sb = p:startSandbox()
        local code, out = fetch(sb, "http://web.test/")          -- allowed by name
        assert.are.equal(0, code, out)
        code, out = fetch(sb, "http://" .. fake(4) .. "/")     -- allowed by CIDR
        assert.are.equal(0, code, out)
        code, out = fetch(sb, "http://" .. fake(3) .. "/")     -- neither
        assert.are_not.equal(0, code, out)
        code, out = fetch(sb, "http://" .. fake(5) .. "/")     -- in allow, denied by CIDR
        assert.are_not.equal(0, code, out)
        code, out = fetch(sb, "--resolve deny.test:80:" .. FAKE .. " http://deny.test/")
        assert.are_not.equal(0, code, out)                      -- Host denied: deny wins
        install_ca(sb)
        code, out = fetch(sb, "--cacert /tmp/ca.pem --resolve deny.test:443:" .. FAKE
          .. " https://deny.test/")
        assert.are_not.equal(0, code, out)                      -- SNI denied
        code, out = fetch(sb, "--cacert /tmp/ca.pem https://secure.test/")
        assert.are.equal(0, code, out)                          -- SNI allowed
        local r = run(sb, "getent hosts deny.test")             -- DNS: REFUSED
        assert.are_not.equal(0, r.exitCode)
        local log = egress_of(p, sb)
        local reasons = {}
        for _, e in ipairs(log.entries) do
          if not e.allowed then
            reasons[#reasons + 1] = (e.name or e.address) .. ": " .. e.reason
          end
        end
        local text = table.concat(reasons, "\n")
        assert.matches(fake(3):gsub("%.", "%%.") .. ": not in %-%-egress%-allow", text)
        assert.matches(fake(5):gsub("%.", "%%.") .. ": denied by %-%-egress%-deny", text)
        assert.matches("deny%.test: denied by %-%-egress%-deny", text)
        assert.matches("deny%.test: the name is denied", text)
      end)
      p:close()
      assert(ok, err)
    end)

    it("narrows the policy with a sandbox's own rules, set once at its start; a restart"
      .. " keeps them", function()
      if why then return pending(why) end
      local dir = platform.tmpdir()
      local args = { "--driver", "namespaces", "--egress-dns", FAKE }
      local p = platform.start{ args = args, dataDir = dir .. "/data", tokenFile = dir .. "/token" }
      local ok, err = pcall(function()
        local rules = { allow = { "*.test", fake(4) }, deny = { "deny.test", fake(4) .. "/32" } }
        local sb = p:startSandbox{ egress = rules }
        local other = p:startSandbox() -- the server's policy alone
        local function check(box)
          local code, out = fetch(box, "http://web.test/own")           -- allowed by name
          assert.are.equal(0, code, out)
          assert.are.equal("fake-internet web.test /own\n", out)
          code, out = fetch(box, "http://" .. fake(3) .. "/")          -- not in its list
          assert.are_not.equal(0, code, out)
          code, out = fetch(box, "http://" .. fake(4) .. "/")          -- allowed, then denied
          assert.are_not.equal(0, code, out)
          code, out = fetch(box, "--resolve deny.test:80:" .. FAKE .. " http://deny.test/")
          assert.are_not.equal(0, code, out)
          assert.are_not.equal(0, run(box, "getent hosts deny.test").exitCode) -- REFUSED
        end
        check(sb)
        local code, out = fetch(other, "http://" .. fake(3) .. "/")    -- its neighbour: open
        assert.are.equal(0, code, out)
        local reasons = {}
        for _, e in ipairs(egress_of(p, sb).entries) do
          if not e.allowed then
            reasons[#reasons + 1] = (e.name or e.address) .. ": " .. e.reason
          end
        end
        local text = table.concat(reasons, "\n")
        assert.matches(fake(3):gsub("%.", "%%.") .. ": not in the sandbox's egress allow list",
          text)
        assert.matches(fake(4):gsub("%.", "%%.") .. ": denied by the sandbox's egress rules", text)
        -- the sandbox says them; a second PUT is refused (no widening later)
        local path = "/v1/railway/projects/proj/sandbox/" .. sb.sandboxId
        local info = p:curl("GET", path)
        assert.are.same(rules, info.json.egressRules)
        local again = p:curl("PUT", path .. "/egress", { body = '{"allow": ["*"]}' })
        assert.are.equal(409, again.status, again.body)
        assert.matches("set once", again.json.error.message)
        -- a restart keeps them: the record has them, the new keeper takes them
        local id = sb.sandboxId
        p:stop()
        p = platform.start{ args = args, dataDir = dir .. "/data", tokenFile = dir .. "/token" }
        local back = mastra.PlatformSandbox.new(p:sandboxOptions{ sandboxId = id })
        back:start()
        check(back)
        back:destroy()
        -- bad rules: the error names the rule, and the start leaves no sandbox
        local live = #(p:curl("GET", p.info.inspector .. "api/sandboxes?project=proj"
          .. "&environment=env").json.sandboxes or {})
        local bad = mastra.PlatformSandbox.new(p:sandboxOptions{
          egress = { deny = { "1.2.3.4/99" } } })
        local sok, serr = pcall(bad.start, bad)
        assert.is_false(sok)
        assert.matches("1%.2%.3%.4/99", tostring(serr))
        assert.are.equal(live, #(p:curl("GET", p.info.inspector .. "api/sandboxes?project=proj"
          .. "&environment=env").json.sandboxes or {}))
      end)
      p:close()
      platform.rm_rf(dir)
      assert(ok, err)
    end)

    it("bounds a fork of many connections", function()
      if why then return pending(why) end
      local sb = root:startSandbox()
      local r = run(sb, ("python3 -c \"import socket\nsocks, ok, bad = [], 0, 0\n"
        .. "for i in range(300):\n  s = socket.socket(); s.settimeout(10)\n"
        .. "  try:\n    s.connect(('%s', 8080)); socks.append(s)\n  except OSError: bad += 1\n"
        .. "for s in socks:\n  try:\n    s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
        .. "    ok += 1 if s.recv(100).startswith(b'HTTP') else 0\n"
        .. "  except OSError: bad += 1\n"
        .. "print(ok, bad)\""):format(FAKE), 120000)
      assert.are.equal(0, r.exitCode, r.stderr)
      local ok, bad = r.stdout:match("^(%d+) (%d+)")
      ok, bad = tonumber(ok), tonumber(bad)
      assert.is_true(ok <= 256 and ok >= 200, r.stdout)
      assert.is_true(bad >= 44, r.stdout)
      local code, out = fetch(sb, "http://web.test/after") -- and it still works
      assert.are.equal(0, code, out)
      -- the refusals are counted (the log in memory keeps the newest 256
      -- entries: here the allowed ones, closed last)
      local log = egress_of(root, sb)
      assert.is_true(log.refused >= 44, tostring(log.refused))
    end)

    it("leaves no link, rule, process or namespace after destroy, exit and kill -9",
      function()
        if why then return pending(why) end
        local function host_links()
          return trim(sh("ip -o link | grep -oE 'mp[ebv]-[0-9a-f]+' | sort -u | tr '\\n' ' '"))
        end
        local function tables() return trim(sh("nft list tables | grep mastra || true")) end
        local before_links, before_tables = host_links(), tables()
        local p = platform.start{ args = { "--driver", "namespaces", "--egress-dns", FAKE,
          "--warm-pool", "0" } }
        local ok, err = pcall(function()
          local sb = p:startSandbox()
          assert.are.equal(0, (fetch(sb, "http://web.test/")))
          local pr = p:startSandbox{ networkIsolation = "PRIVATE", environmentId = "eg-c" }
          assert.are.equal(0, (fetch(pr, "http://web.test/")))
          -- the switch's links: in the server's own namespace, none in the host's
          -- (the descriptor of a network namespace that is not the host's)
          local nsfd = trim(sh(("h=$(readlink /proc/self/ns/net); for f in /proc/%d/fd/*; do"
            .. " l=$(readlink $f); case $l in net:*) [ \"$l\" != \"$h\" ] && echo $f;; esac;"
            .. " done | head -1"):format(p.pid)))
          assert.matches("/fd/", nsfd)
          local function switch_links()
            return trim(sh(("nsenter --net=%s ip -o link | grep -c 'mp[eb]-' || true")
              :format(nsfd)))
          end
          assert.is_true(tonumber(switch_links()) >= 2)
          assert.are.equal(before_links, host_links())
          sb:destroy()
          pr:destroy()
          for _ = 1, 50 do
            if switch_links() == "0" then break end
            sh("sleep 0.1")
          end
          assert.are.equal("0", switch_links())
          -- kill -9 with a sandbox: its namespaces, processes and links go
          local again = p:startSandbox()
          assert.are.equal(0, (fetch(again, "http://web.test/")))
          p:kill9()
          -- (a pattern that the shell's own command line does not match)
          local procs = ("pgrep -f '[%s]%s' | wc -l"):format(p.dataDir:sub(1, 1),
            p.dataDir:sub(2))
          for _ = 1, 50 do
            if trim(sh(procs)) == "0" then break end
            sh("sleep 0.1")
          end
          assert.are.equal("0", trim(sh(procs)))
          assert.are.equal(before_links, host_links())
          assert.are.equal(before_tables, tables())
        end)
        if ok then
          -- a restart on the same data directory has its way out again
          local q = platform.start{ dataDir = p.dataDir, tokenFile = p.tokenFile,
            args = { "--driver", "namespaces", "--egress-dns", FAKE } }
          ok, err = pcall(function()
            local sb = q:startSandbox()
            assert.are.equal(0, (fetch(sb, "http://web.test/restart")))
          end)
          q:close()
        end
        p:close()
        platform.rm_rf(p.scratch) -- the restart made its data directory again
        assert(ok, err)
        assert.are.equal(before_links, host_links())
        assert.are.equal(before_tables, tables())
      end)
  end)

  describe("a server without root", function()
    setup(function()
      if why then return end
      local out, ok = sh(("setpriv --reuid=%d --regid=%d --clear-groups unshare -Urn true")
        :format(UID, UID))
      if not ok then
        inet.why_user = "no unprivileged user namespaces (" .. trim(out) .. "): skipped"
        return
      end
      scratch = platform.tmpdir()
      base = scratch .. "/base"
      must(("chown %d:%d %s && chmod 755 %s"):format(UID, UID, scratch, scratch))
      must(("setpriv --reuid=%d --regid=%d --clear-groups %s base build --minimal --base %s")
        :format(UID, UID, mastra.quote(platform.binary()), mastra.quote(base)))
      user = platform.start{ user = UID, base = false, args = { "--driver", "namespaces",
        "--base", base, "--egress-dns", FAKE } }
    end)

    outbound_cases(function()
      if inet.why_user then inet.why = inet.why_user end
      return user
    end)
  end)
end)

-- needs no root: the process driver has no egress, so no egress rules
describe("egress rules on a platform without them", function()
  it("fail the start, say why, and leave no sandbox; bad options fail at new", function()
    local p = platform.start{ driver = "process" }
    local ok, err = pcall(function()
      local lease = p:json("POST", "/v1/railway/projects/proj/sandbox",
        { environmentId = "env" })
      local l = p:json("POST", "/v1/railway/projects/proj/sandbox/" .. lease.json.id
        .. "/exec-lease", {})
      for _, c in ipairs(l.json.capabilities) do assert.are_not.equal("egressRules", c) end
      local put = p:curl("PUT", "/v1/railway/projects/proj/sandbox/" .. lease.json.id
        .. "/egress", { body = '{"deny": ["198.18.0.1"]}' })
      assert.are.equal(404, put.status, put.body)
      assert.matches("process driver has no egress rules", put.json.error.message)
      local sb = mastra.PlatformSandbox.new(p:sandboxOptions{ egress = { deny = { "x.test" } } })
      local sok, serr = pcall(sb.start, sb)
      assert.is_false(sok)
      assert.matches('does not advertise "egressRules"', tostring(serr))
      local list = p:curl("GET", p.info.inspector .. "api/sandboxes?project=proj&environment=env")
      assert.are.equal(1, #list.json.sandboxes) -- the raw one above, not the failed start's
      assert.are.equal(204, p:json("DELETE", "/v1/railway/projects/proj/sandbox/"
        .. lease.json.id).status)
      for _, bad in ipairs{ { allw = {} }, {}, { deny = { "a b" } }, { allow = "x.test" },
        { deny = { 7 } } } do
        local nok, nerr = pcall(mastra.PlatformSandbox.new, p:sandboxOptions{ egress = bad })
        assert.is_false(nok)
        assert.matches("egress", tostring(nerr))
      end
    end)
    p:close()
    assert(ok, err)
  end)
end)
