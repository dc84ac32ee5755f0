-- The namespaces driver without root (docs/platform.md, "Drivers", "Without
-- root"): a server run as an unprivileged uid (setpriv) makes its sandboxes
-- in user namespaces of its own and isolates them as root does: the data
-- directory and the token are out of reach, `ps` shows the sandbox alone,
-- the hostname is the id, writes stay in the sandbox's layer, a checkpoint
-- restores exactly, and destroy, the server's exit and kill -9 + restart
-- leave no process or mount. The pids limit holds in a cgroup delegated to
-- the server; without one, the server says there are no limits. Skipped,
-- saying why, where this spec cannot switch uid (not root) or the kernel
-- forbids unprivileged user namespaces.
local lfs = require "lfs"
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local trim = util.trim

-- a uid with no passwd entry, for this spec alone
local UID = 47000 + (tonumber(tostring(os.time()):sub(-3)) or 0)

local sh = util.sh

-- shell text that must succeed
local function must(cmd)
  local out, ok = sh(cmd)
  assert(ok, cmd .. ": " .. out)
  return out
end

local function skip_reason()
  local uid = trim(sh("id -u"))
  if uid ~= "0" then
    return "switching to an unprivileged uid needs root here (uid " .. uid .. "): skipped"
  end
  local out, ok = sh(("setpriv --reuid=%d --regid=%d --clear-groups unshare -Urnmp --fork true")
    :format(UID, UID))
  if not ok then
    return "unprivileged user namespaces are not available (" .. trim(out) .. "): skipped"
  end
  return nil
end

-- every directory above path must be reachable by UID
local function reachable(path)
  local out, ok = sh(("setpriv --reuid=%d --regid=%d --clear-groups test -x %s")
    :format(UID, UID, mastra.quote(path)))
  return ok, out
end

local mounts = util.mounts

-- the host pids of uid UID
local function user_pids(uid)
  local pids = {}
  for name in lfs.dir("/proc") do
    if tonumber(name) then
      local status = util.read_file("/proc/" .. name .. "/status") or ""
      if tonumber(status:match("\nUid:%s+(%d+)") or "") == uid then pids[#pids + 1] = name end
    end
  end
  return pids
end

-- the pids of uid's processes of sandbox id: its keeper (whose command
-- line names it) and the keeper's child, its init; and its commands (with
-- MASTRA_SANDBOX_ID=id in their environment)
local function sandbox_pids(uid, id)
  local pids, marker = {}, "\0MASTRA_SANDBOX_ID=" .. id .. "\0"
  for _, pid in ipairs(user_pids(uid)) do
    local cmd = (util.read_file("/proc/" .. pid .. "/cmdline") or ""):gsub("%z", " ")
    local env = "\0" .. (util.read_file("/proc/" .. pid .. "/environ") or "") .. "\0"
    if cmd:find("__ns%-init %d+ " .. id) then
      pids[#pids + 1] = pid
      local kids = util.read_file(("/proc/%s/task/%s/children"):format(pid, pid)) or ""
      for k in kids:gmatch("%d+") do pids[#pids + 1] = k end
    elseif env:find(marker, 1, true) then
      pids[#pids + 1] = pid
    end
  end
  return pids
end

local function alive_of(pids)
  local left = {}
  for _, pid in ipairs(pids) do
    if util.alive(tonumber(pid)) then left[#left + 1] = pid end
  end
  return left
end

local function run(sb, cmd, opts)
  return sb:executeCommand(cmd, nil, opts)
end

local DETACHED = "setsid sleep 300 >/dev/null 2>&1 < /dev/null &"
-- a digest of /workspace and /etc: paths, types, modes, link targets and
-- contents
local DIGEST = "cd / && find workspace etc -printf '%p %y %m %l\\n' | LC_ALL=C sort | sha256sum;"
  .. " find workspace etc -type f -readable -print0 | LC_ALL=C sort -z | xargs -0 sha256sum"
  .. " | sha256sum"

describe("the namespaces driver without root", function()
  local why = skip_reason()
  if why then
    pending(why)
    return
  end

  -- a minimal base that uid UID builds (base builds never run inside the
  -- servers of tests: a forced start would build a full one, npm and all):
  -- its files are UID's, root's in UID's sandboxes
  local scratch = platform.tmpdir()
  local base = scratch .. "/base"

  -- a server of uid UID (or opts.user) on that base
  local function start(opts)
    opts = opts or {}
    local o = { user = opts.user or UID, base = false, cgroup = opts.cgroup,
      dataDir = opts.dataDir, tokenFile = opts.tokenFile,
      args = { "--driver", "namespaces", "--base", base, "--sandbox-pids-max", "64" } }
    for _, a in ipairs(opts.args or {}) do o.args[#o.args + 1] = a end
    return platform.start(o)
  end

  local srv
  setup(function()
    must(("chown %d:%d %s"):format(UID, UID, mastra.quote(scratch)))
    must(("setpriv --reuid=%d --regid=%d --clear-groups %s base build --minimal --base %s")
      :format(UID, UID, mastra.quote(platform.binary()), mastra.quote(base)))
    srv = start()
    local reached, why_not = reachable(srv.dataDir)
    assert(reached, srv.dataDir .. " is not reachable by uid " .. UID .. ": " .. why_not)
  end)

  teardown(function()
    if srv then srv:close() end
    platform.rm_rf(scratch)
  end)

  it("runs the namespaces driver and says it has no limits", function()
    local sb = srv:startSandbox()
    local info = sb:getInfo()
    assert.are.equal("namespaces", info.metadata.driver)
    assert.are.equal("none: cgroups not delegated", info.metadata.limits)
    assert.matches("no limits: the cgroups of this server %(uid " .. UID
      .. "%) are not delegated", srv.stderrTail)
    -- said once: what the keepers cannot have without CAP_SYS_RESOURCE
    local _, said = srv.stderrTail:gsub("cannot have oom_score_adj %-1000", "")
    assert.are.equal(1, said, srv.stderrTail)
    -- root inside, uid UID outside
    assert.are.equal("0\n", run(sb, "id -u").stdout)
    assert.are.equal(0, run(sb, "echo a > owned.txt").exitCode)
    local st = lfs.attributes(srv.dataDir .. "/sandboxes/" .. sb.sandboxId
      .. "/upper/workspace/owned.txt")
    assert.is_table(st)
    assert.are.equal(UID, st.uid)
    assert.are.equal(sb.sandboxId, trim(run(sb, "hostname").stdout))
    sb:destroy()
  end)

  -- the links of the network namespaces that pid holds (its own and its
  -- descriptors'): "ns link" lines, root's view (nsenter)
  local function links_held_by(pid)
    local seen, out = {}, {}
    local paths = { "/proc/" .. pid .. "/ns/net" }
    for fd in lfs.dir("/proc/" .. pid .. "/fd") do
      local target = lfs.symlinkattributes("/proc/" .. pid .. "/fd/" .. fd, "target") or ""
      if target:match("^net:") then paths[#paths + 1] = "/proc/" .. pid .. "/fd/" .. fd end
    end
    for _, path in ipairs(paths) do
      local ns = lfs.symlinkattributes(path, "target")
      if ns and not seen[ns] then
        seen[ns] = true
        local text = sh("nsenter --net=" .. path .. " ip -o link show")
        for name in text:gmatch("%d+: ([%w%-_.@]+):") do out[#out + 1] = ns .. " " .. name end
      end
    end
    return out
  end

  -- the host's links of the platform (mpb-, mpv-)
  local function host_links()
    return trim(sh("ip -o link show | grep -oE ' mp[bv]-[0-9a-f]+' || true"))
  end

  it("runs PRIVATE networks: an environment's sandboxes reach each other, no one else",
    function()
      local token = ("private-%d-%d"):format(os.time(), math.random(1e9))
      local host_before = host_links()
      local made = {}
      local function make(env, network)
        local sb = srv:startSandbox({ environmentId = env, networkIsolation = network })
        made[#made + 1] = sb
        return sb
      end
      local server
      local ok, err = pcall(function()
        local A = make("nsu-e", "PRIVATE")
        assert.are.equal(0, run(A, "printf %s " .. mastra.quote(token) .. " > page.txt").exitCode)
        server = A.processes:spawn("exec python3 -m http.server 8000")
        local own = run(A, "getent hosts $(hostname) | cut -d' ' -f1")
        local addr = trim(own.stdout)
        assert.matches("^10%.231%.%d+%.%d+$", addr, own.stderr)
        -- fetches by sandbox id and by address, trying while the server starts
        local function fetch(sb, host, tries)
          return run(sb, ("for i in $(seq %d); do python3 -c 'import sys, urllib.request;"
            .. " sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())'"
            .. " http://%s:8000/page.txt 2>/dev/null && exit 0; sleep 0.2; done; exit 1")
            :format(tries, host), { timeout = 60000 })
        end
        local B = make("nsu-e", "PRIVATE")
        for _, host in ipairs{ A.sandboxId, addr } do
          local r = fetch(B, host, 50)
          assert.are.equal(0, r.exitCode, host .. ": " .. r.stderr)
          assert.are.equal(token, r.stdout)
        end
        -- an ISOLATED sandbox of E (loopback, and eth0: its own link to the
        -- egress proxy, not on E's subnet) and a PRIVATE one of F cannot
        local C, D = make("nsu-e", "ISOLATED"), make("nsu-f", "PRIVATE")
        local links = run(C, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort")
        assert.are.equal("eth0\nlo", trim(links.stdout))
        local dnet = trim(run(D, "getent hosts $(hostname) | cut -d' ' -f1").stdout)
        assert.matches("^10%.231%.%d+%.%d+$", dnet)
        assert.are_not.equal(addr:match("^(.*)%.%d+$"), dnet:match("^(.*)%.%d+$"))
        for _, sb in ipairs{ C, D } do
          for _, host in ipairs{ A.sandboxId, addr } do
            local r = fetch(sb, host, 1)
            assert.are_not.equal(0, r.exitCode, host)
            assert.is_nil(r.stdout:find(token, 1, true))
          end
          -- not even with a route of its own to A's subnet (D is root in it)
          run(sb, "ip route add " .. addr:match("^(.*)%.%d+$") .. ".0/24 dev eth0 2>/dev/null")
          assert.are_not.equal(0, fetch(sb, addr, 1).exitCode)
        end
        -- the bridges and veths are in the server's switch, not the host's
        local held = table.concat(links_held_by(srv.pid), "\n")
        assert.matches(" mpb%-", held)
        assert.matches(" mpv%-", held)
        assert.are.equal(host_before, host_links())
        server:kill()
        server = nil
        for _, sb in ipairs(made) do sb:destroy() end
        made = {}
        -- a destroy removes the links (off the loop: soon)
        assert.is_true(util.wait_until(function()
          return not table.concat(links_held_by(srv.pid), "\n"):find(" mp[bv]%-")
        end, 5000), table.concat(links_held_by(srv.pid), "\n"))
        assert.are.equal(host_before, host_links())
      end)
      if server then pcall(server.kill, server) end
      for _, sb in ipairs(made) do pcall(sb.destroy, sb) end
      assert(ok, err)
    end)

  it("takes --egress off; egress itself works without root (spec/egress_spec.lua)", function()
    local off = start({ args = { "--egress", "off" } })
    local sb = off:startSandbox()
    local links = run(sb, "python3 -c \"import socket; print(' '.join(sorted(n for _, n in"
      .. " socket.if_nameindex())))\"")
    assert.are.equal("lo\n", links.stdout) -- loopback only, as before egress
    off:close()
    local ok, err = pcall(start, { args = { "--egress", "maybe" } })
    assert.is_false(ok)
    assert.matches("%-%-egress wants on or off", tostring(err))
  end)

  it("hides the data directory and the token; ps shows only the sandbox", function()
    local a, b = srv:startSandbox(), srv:startSandbox()
    assert.are.equal(0, run(a, "echo secret-a > mine.txt").exitCode)
    local adir = srv.dataDir .. "/sandboxes/" .. a.sandboxId
    for _, path in ipairs{ srv.dataDir, srv.tokenFile, adir, adir .. "/upper/workspace/mine.txt",
      "/root/.bashrc" } do
      local r = run(b, "cat " .. mastra.quote(path) .. " || ls " .. mastra.quote(path))
      assert.are_not.equal(0, r.exitCode, path .. " is visible: " .. r.stdout)
      assert.is_nil(r.stdout:find(srv.token, 1, true))
    end
    local r = run(b, "grep -rl --devices=skip " .. mastra.quote(srv.token)
      .. " /etc /root /home /workspace /tmp /var /run /opt 2>/dev/null | head -3")
    assert.are.equal("", r.stdout)
    local ps = run(b, "ps -e -o pid=,comm=")
    assert.are.equal(0, ps.exitCode, ps.stderr)
    local n = 0
    for line in ps.stdout:gmatch("[^\n]+") do
      n = n + 1
      assert.is_true(tonumber(line:match("^%s*(%d+)")) < 100, "a host pid is visible: " .. line)
      assert.is_nil(line:find("mastra%-platform"), line)
    end
    assert.is_true(n >= 2 and n <= 6, ps.stdout)
    -- its init (the server's uid, dumpable) shows none of the server's
    -- environment or paths
    local init = run(b, "tr '\\0' '\\n' < /proc/1/environ | grep -c =;"
      .. " tr '\\0' ' ' < /proc/1/cmdline")
    assert.are.equal("0\nmastra-init\n", (init.stdout:gsub(" +$", "\n")))
    -- the server runs as the same uid, but the sandbox cannot name it
    assert.are_not.equal(0, run(b, "kill -0 " .. srv.pid).exitCode)
    assert.is_true(srv:running())
    -- its mountinfo names no path of the data directory (the overlays name
    -- their layers relative to the sandbox's directory) but the sources of
    -- the read-only files on /etc (resolv.conf, a PRIVATE network's hosts)
    local mi = run(b, "cat /proc/self/mountinfo")
    assert.matches("lowerdir=lower%-base", mi.stdout)
    for line in mi.stdout:gmatch("[^\n]+") do
      if line:find(srv.dataDir, 1, true) then assert.matches(" /etc/[%w.]+ ro,", line) end
    end
    a:destroy()
    b:destroy()
  end)

  it("writes only into its own layer", function()
    local sb = srv:startSandbox()
    local marker = "mastra-nsu-" .. sb.sandboxId
    local r = run(sb, ("touch /usr/bin/%s; echo x > /etc/%s && rm /etc/hostname;"
      .. " echo ok > /tmp/%s; touch /usr/local/bin/%s"):format(marker, marker, marker, marker))
    -- a base of the server's uid is root's inside: /usr/local/bin (the base's
    -- layer of /usr) is writable; the host's /usr/bin is not
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.is_truthy(r.stderr:find("/usr/bin/" .. marker .. "': Permission denied", 1, true),
      r.stderr)
    assert.is_not_nil(util.read_file(srv.dataDir .. "/sandboxes/" .. sb.sandboxId
      .. "/upper/usr/local/bin/" .. marker))
    assert.is_nil(util.read_file("/usr/local/bin/" .. marker))
    assert.is_nil(util.read_file("/usr/bin/" .. marker))
    assert.is_nil(util.read_file("/etc/" .. marker))
    assert.is_nil(util.read_file(base .. "/etc/" .. marker), r.stderr)
    assert.are.equal("x\n", util.read_file(srv.dataDir .. "/sandboxes/" .. sb.sandboxId
      .. "/upper/etc/" .. marker), r.stderr)
    assert.is_not_nil(util.read_file(base .. "/etc/hostname"))
    assert.is_nil(util.read_file("/tmp/" .. marker))
    -- loopback, and eth0: its link to the egress proxy (spec/egress_spec.lua)
    local net = run(sb, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' | sort")
    assert.are.equal("eth0\nlo", trim(net.stdout))
    sb:destroy()
  end)

  it("restores a checkpoint exactly", function()
    local sb = srv:startSandbox({ id = "nsu-exact" })
    assert.are.equal(0, run(sb, table.concat({
      "printf 'hello\\nworld\\n' > text.txt",
      "head -c 65536 /dev/urandom > binary.bin",
      "printf '#!/bin/sh\\necho run\\n' > script.sh && chmod 0755 script.sh",
      "ln -s text.txt link",
      "mkdir -p empty/inner /etc/gone.d",
      "echo doomed > gone.txt",
      "echo doomed > /etc/gone.d/x",
      "chmod 0640 text.txt",
    }, " && ")).exitCode)
    sb:destroy()
    sb:start()
    -- deleted: a file of the layer, a file of the base, a directory that
    -- comes back empty (opaque)
    local del = run(sb, "rm gone.txt /etc/hostname && rm -r /etc/gone.d && mkdir /etc/gone.d")
    assert.are.equal(0, del.exitCode, del.stderr)
    local before = run(sb, DIGEST)
    assert.are.equal(0, before.exitCode, before.stderr)
    sb:destroy()
    sb:start()
    local after = run(sb, DIGEST)
    assert.are.equal(before.stdout, after.stdout)
    assert.are_not.equal(0, run(sb, "test -e gone.txt || test -e /etc/hostname").exitCode)
    assert.are.equal("", run(sb, "ls -A /etc/gone.d").stdout)
    assert.are.equal("run\n", run(sb, "./script.sh").stdout)
    sb:destroy()
  end)

  it("leaves no process or mount after a destroy, the server's exit and kill -9", function()
    -- a uid of its own: its processes are the servers' of this case alone
    local uid = UID + 1
    local function user_pids_() return user_pids(uid) end
    local dir = platform.tmpdir()
    must(("chown %d:%d %s"):format(uid, uid, mastra.quote(dir)))
    local one = start{ user = uid, dataDir = dir .. "/data", tokenFile = dir .. "/token" }
    local ok, err = pcall(function()
      -- b is on a private network: its switch goes with the server
      local a = one:startSandbox()
      local b = one:startSandbox({ networkIsolation = "PRIVATE", environmentId = "nsu-k" })
      assert.are.equal(0, run(a, DETACHED).exitCode)
      assert.are.equal(0, run(b, DETACHED).exitCode)
      local function state() return util.read_file(one.dataDir .. "/net/state") or "" end
      local tag = state():match("\ntag (%x+)\n")
      assert.is_string(tag, state())
      assert.matches("\nveth mpv%-" .. tag .. "%x+ 10%.231%.%d+%.%d+ " .. b.sandboxId .. "\n",
        state())
      local aid = a.sandboxId
      local apids = sandbox_pids(uid, aid)
      assert.is_true(#apids >= 3, "the keeper, init and setsid'd child of A: "
        .. table.concat(apids, " "))
      a:destroy()
      assert.is_true(util.wait_until(function() return #alive_of(apids) == 0 end, 5000),
        "the processes of a destroyed sandbox: " .. table.concat(alive_of(apids), " "))
      assert.is_true(util.wait_until(function()
        return lfs.attributes(one.dataDir .. "/sandboxes/" .. aid) == nil
      end, 5000))
      local id = b.sandboxId
      one:kill9()
      assert.is_true(util.wait_until(function() return #user_pids_() == 0 end, 5000),
        "left after kill -9: " .. table.concat(user_pids_(), " "))
      assert.are.same({}, mounts(dir))
      assert.is_nil(host_links():find(tag, 1, true))
      local two = start{ user = uid, dataDir = dir .. "/data", tokenFile = dir .. "/token" }
      local ok2, err2 = pcall(function()
        -- the sweep of the new server: the old tag is gone, its own recorded
        local now = util.read_file(one.dataDir .. "/net/state") or ""
        assert.is_nil(now:find(tag, 1, true), now)
        assert.matches("\ntag %x+\n", now)
        local back = two:startSandbox({ sandboxId = id, networkIsolation = "PRIVATE",
          environmentId = "nsu-k" })
        assert.are.equal("again\n", run(back, "echo again").stdout)
        assert.matches("^10%.231%.%d+%.%d+$", trim(run(back,
          "getent hosts $(hostname) | cut -d' ' -f1").stdout))
        assert.are.equal(0, run(back, DETACHED).exitCode)
        two:stop()
        assert.is_true(util.wait_until(function() return #user_pids_() == 0 end, 5000),
          "left after the exit: " .. table.concat(user_pids_(), " "))
        assert.are.same({}, mounts(dir))
      end)
      two:close()
      assert(ok2, err2)
    end)
    one:close()
    platform.rm_rf(dir)
    assert(ok, err)
  end)

  it("holds the pids limit in a cgroup delegated to it", function()
    local v2 = trim(sh("stat -f -c %T /sys/fs/cgroup")) == "cgroup2fs"
    local parent = v2 and "/sys/fs/cgroup" or "/sys/fs/cgroup/pids"
    if not lfs.attributes(parent .. "/cgroup.procs") then
      pending("no pids cgroup here: skipped")
      return
    end
    local cg = ("%s/mastra-nsu-%d-%d"):format(parent, UID, os.time())
    assert(lfs.mkdir(cg))
    local srv2
    local ok, err = pcall(function()
      -- delegated: the directory and its procs (and v2's control files)
      must(("chown %d:%d %s %s/cgroup.procs %s"):format(UID, UID, cg, cg,
        v2 and (cg .. "/cgroup.subtree_control " .. cg .. "/cgroup.threads") or ""))
      srv2 = start{ cgroup = cg }
      local sb = srv2:startSandbox()
      local limits = sb:getInfo().metadata.limits
      assert.matches("^cgroup v[12] %(delegated%)$", limits)
      -- the shell counts the sandbox's processes with builtins alone (no
      -- fork is left for ps once the limit is reached)
      -- (sh gives up at the first fork that fails: in a subshell)
      local r = run(sb, "(for i in $(seq 100); do sleep 30 >/dev/null 2>&1 & done) 2>/dev/null;"
        .. " n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n", { timeout = 30000 })
      local count = tonumber(trim(r.stdout))
      -- 64 at most: the init, the shell and the sleeps that could start
      assert.is_true(count ~= nil and count <= 64, r.stdout .. r.stderr)
      assert.is_true(count > 10, r.stdout)
      sb:destroy()
      srv2:stop()
    end)
    if srv2 then srv2:close() end
    -- what the server made in it is gone; then ours
    local left = sh("find " .. cg .. " -mindepth 1 -type d")
    os.execute("rmdir " .. cg .. "/*/*/* " .. cg .. "/*/* " .. cg .. "/* " .. cg
      .. " 2>/dev/null")
    assert(ok, err)
    assert.are.equal("", left)
  end)
end)
