-- A host uid range per sandbox, with root (docs/platform.md, "Host uids"):
-- each sandbox's ids are a range of host uids of its own, recorded in its
-- record and given to another sandbox only once it is gone, so what the
-- kernel keeps per uid is its own: a key that sandbox A sets is out of
-- sandbox B's reach, and A's inotify instances leave B's budget alone.
-- Checkpoints restore into another range with the same owners, and the
-- warm pool's members have a range of their own. Skipped, saying why,
-- where the namespaces driver cannot run as root, or where the server
-- says every sandbox has the same host uids here.
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local trim = util.trim

local sh = util.sh

local SHARED = "every sandbox has the same host uid"

-- a sandbox's record, as the server keeps it
local function record(srv, id)
  local text = util.read_file(srv.dataDir .. "/state/sandboxes/" .. id .. ".json")
  assert.is_not_nil(text, "the record of " .. id)
  return platform.decode(text)
end

describe("a host uid range per sandbox", function()
  if trim(sh("id -u")) ~= "0" then
    pending("the namespaces driver runs as root here only as root: skipped")
    return
  end

  -- the host uid of the sandbox's root: the first line of its uid_map, as
  -- the sandbox reads it ("0 <host uid> 65536")
  local function host_uid(sb)
    local r = sb:executeCommand("head -n 1 /proc/self/uid_map")
    assert.are.equal(0, r.exitCode, r.stderr)
    local inside, outside, count = r.stdout:match("^%s*(%d+)%s+(%d+)%s+(%d+)")
    assert.are.equal("0", inside)
    assert.are.equal("65536", count)
    return tonumber(outside)
  end


  local function skip_if_shared(srv)
    if srv.stderrTail:find(SHARED, 1, true) then
      pending("the server shares one range here: " .. srv.stderrTail)
      return true
    end
    return false
  end

  describe("with the default ranges and a warm pool", function()
    local srv
    setup(function()
      srv = platform.start{ args = { "--driver", "namespaces", "--warm-pool", "1" } }
    end)
    teardown(function()
      if srv then srv:close() end
    end)

    it("gives each sandbox its own range, recorded, the pool's members too", function()
      if skip_if_shared(srv) then return end
      -- the pool's member is ready: the first create takes it
      platform.waitUntil(function()
        local r = srv:curl("GET", srv.info.inspector .. "api/health")
        return r.status == 200 and r.json.warmPool.ready == 1
      end, 20000)
      local a = srv:startSandbox{ id = "uids-a" }
      local b = srv:startSandbox{ id = "uids-b" }
      local ua, ub = host_uid(a), host_uid(b)
      assert.are_not.equal(ua, ub)
      assert.is_true(ua >= 100000 and ub >= 100000)
      assert.are.equal(0, (ua - 100000) % 65536)
      assert.are.equal(0, (ub - 100000) % 65536)
      assert.are.equal(ua, record(srv, a.sandboxId).hostUidBase)
      assert.are.equal(ub, record(srv, b.sandboxId).hostUidBase)
      -- the inspector's health counts them (two sandboxes, the pool's member)
      local h = srv:curl("GET", srv.info.inspector .. "api/health")
      assert.are.equal(200, h.status, h.body)
      assert.are.same({ own = true, first = 100000, ranges = 1024 },
        { own = h.json.hostUids.own, first = h.json.hostUids.first,
          ranges = h.json.hostUids.ranges })
      assert.is_true(h.json.hostUids.taken >= 2, h.body)
      -- the inits (pid 1 of each) run as their sandbox's root, as the host sees them
      local owners = sh("ps -eo uid=,args= | grep '[m]astra-init'")
      assert.matches("%f[%d]" .. ua .. "%f[%D]", owners)
      assert.matches("%f[%d]" .. ub .. "%f[%D]", owners)
      a:destroy()
      b:destroy()
    end)

    it("keeps one sandbox's keys out of another's reach", function()
      if skip_if_shared(srv) then return end
      if select(3, os.execute("command -v keyctl > /dev/null")) ~= 0 then
        pending("keyctl is missing here (keyutils: scripts/setup installs it)")
        return
      end
      local a = srv:startSandbox{ id = "keys-a" }
      local b = srv:startSandbox{ id = "keys-b" }
      local r = a:executeCommand("keyctl add user mastra-secret s3cret @u")
      assert.are.equal(0, r.exitCode, r.stderr)
      local serial = trim(r.stdout)
      assert.matches("^%d+$", serial)
      -- every permission for its owner's uid (possessor and user: all), as a
      -- program that trusts its own uid would leave it
      r = a:executeCommand("keyctl setperm " .. serial .. " 0x3f3f0000")
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.are.equal("s3cret", trim(a:executeCommand("keyctl pipe " .. serial).stdout))
      -- B reads, changes, revokes none of it, does not see it, and does not
      -- find it
      assert.are_not.equal(0, b:executeCommand("keyctl describe " .. serial).exitCode)
      assert.are_not.equal(0,
        b:executeCommand("keyctl setperm " .. serial .. " 0x3f3f3f3f").exitCode)
      local read = b:executeCommand("keyctl pipe " .. serial)
      assert.are_not.equal(0, read.exitCode)
      assert.is_nil(read.stdout:find("s3cret", 1, true))
      assert.are_not.equal(0, b:executeCommand("keyctl update " .. serial .. " planted").exitCode)
      assert.are_not.equal(0, b:executeCommand("keyctl revoke " .. serial).exitCode)
      assert.are_not.equal(0,
        b:executeCommand("keyctl search @u user mastra-secret").exitCode)
      -- A's key is as it was
      assert.are.equal("s3cret", trim(a:executeCommand("keyctl pipe " .. serial).stdout))
      a:destroy()
      b:destroy()
    end)

    it("counts one sandbox's inotify instances against its own budget only", function()
      if skip_if_shared(srv) then return end
      local a = srv:startSandbox{ id = "inotify-a" }
      local b = srv:startSandbox{ id = "inotify-b" }
      -- A takes every instance its uid may have and holds them
      local hold = [[
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init()
    if fd < 0:
        break
    fds.append(fd)
print(len(fds), ctypes.get_errno(), flush=True)
time.sleep(60)
]]
      assert.are.equal(0, a:executeCommand("cat > /tmp/hold.py <<'EOF'\n" .. hold .. "EOF\n"
        .. "python3 /tmp/hold.py > /tmp/held 2>&1 &").exitCode)
      local held
      platform.waitUntil(function()
        held = a:executeCommand("cat /tmp/held").stdout
        return held:find("\n", 1, true) ~= nil
      end, 10000)
      local n, errno = held:match("^(%d+) (%d+)")
      assert.is_not_nil(n, held)
      assert.is_true(tonumber(n) >= 1, held)
      assert.are.equal("24", errno, held) -- EMFILE: A's budget is spent
      -- B's is whole
      local one = "import ctypes; l = ctypes.CDLL(None, use_errno=True);"
        .. " fd = l.inotify_init(); print(fd >= 0, ctypes.get_errno())"
      assert.are.equal("True 0", trim(b:executeCommand("python3 -c " .. mastra.quote(one)).stdout))
      assert.matches("^False 24", trim(a:executeCommand("python3 -c " .. mastra.quote(one)).stdout))
      a:destroy()
      b:destroy()
    end)

    it("runs a template's sandboxes in ranges of their own, with its layer's owners",
      function()
      if skip_if_shared(srv) then return end
      local t = mastra.Template.new():runCmd("mkdir -p /opt/t && echo one > /opt/t/f"
        .. " && chown 1000:1001 /opt/t/f && chmod 640 /opt/t/f")
      local built = t:build(srv:sandboxOptions())
      assert.are.equal("ready", built.status, srv.stderrTail)
      local a = srv:startSandbox{ template = t }
      local b = srv:startSandbox{ template = t }
      assert.are_not.equal(host_uid(a), host_uid(b))
      for _, sb in ipairs{ a, b } do
        local r = sb:executeCommand("stat -c '%u:%g %a' /opt/t/f && echo two >> /opt/t/f"
          .. " && stat -c '%u:%g' /opt/t/f && cat /opt/t/f")
        assert.are.equal(0, r.exitCode, r.stderr)
        assert.are.equal("1000:1001 640\n1000:1001\none\ntwo\n", r.stdout)
        -- the copy-up is in its own layer, with the layers' ids on the host
        local up = srv.dataDir .. "/sandboxes/" .. sb.sandboxId .. "/upper/opt/t/f"
        assert.are.equal("101000:101001", trim(sh("stat -c %u:%g " .. mastra.quote(up))))
      end
      a:destroy()
      b:destroy()
    end)

    it("restores a checkpoint into another range with the same owners", function()
      if skip_if_shared(srv) then return end
      local a = srv:startSandbox{ id = "owners-ckpt" }
      local first = host_uid(a)
      -- another sandbox takes a range meanwhile: the restore lands on a new one
      local other = srv:startSandbox{ id = "owners-other" }
      local setup_cmd = "mkdir -p /workspace/o && cd /workspace/o"
        .. " && touch f && chown 1000:1001 f && chmod 4755 f"
        .. " && mkdir d && chown 2000:0 d && ln -s f l && chown -h 1000:1001 l"
        .. " && touch /etc/owned && chown 33:33 /etc/owned"
      local r = a:executeCommand(setup_cmd)
      assert.are.equal(0, r.exitCode, r.stderr)
      local listing = "cd /workspace/o && stat -c '%n %u:%g %a' f d l /etc/owned"
      local before = a:executeCommand(listing).stdout
      -- on the host, the layer's owners are the layers' ids (100000 + k)
      local upper = srv.dataDir .. "/sandboxes/" .. a.sandboxId .. "/upper"
      assert.are.equal("101000:101001", trim(sh("stat -c %u:%g "
        .. mastra.quote(upper .. "/workspace/o/f"))))
      a:destroy()
      local again = srv:startSandbox{ id = "owners-ckpt" }
      local second = host_uid(again)
      assert.are_not.equal(first, second)
      assert.are.equal(before, again:executeCommand(listing).stdout)
      -- root there still owns and writes its files
      r = again:executeCommand("echo x >> /workspace/o/f && chown 1002 /workspace/o/f"
        .. " && stat -c %u /workspace/o/f")
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.are.equal("1002", trim(r.stdout))
      again:destroy()
      other:destroy()
    end)
  end)

  describe("across a restart", function()
    local dir, srv
    local function serve()
      return platform.start{ dataDir = dir .. "/data", tokenFile = dir .. "/token",
        args = { "--driver", "namespaces", "--warm-pool", "2" } }
    end
    setup(function()
      dir = platform.tmpdir()
      srv = serve()
    end)
    teardown(function()
      if srv then srv:close() end
      platform.rm_rf(dir)
    end)

    local function pool_ready(n)
      platform.waitUntil(function()
        local h = srv:curl("GET", srv.info.inspector .. "api/health")
        return h.status == 200 and h.json.warmPool.ready == n
      end, 20000)
    end

    it("gives a live sandbox its recorded range again, before the warm pool", function()
      if skip_if_shared(srv) then return end
      -- a member's range: the first that the new server's pool would take
      pool_ready(2)
      local sb = srv:startSandbox{ id = "restart-kept" }
      local before = host_uid(sb)
      assert.are.equal(100000, before)
      local r = sb:executeCommand("echo kept > /workspace/f && chown 1000 /workspace/f")
      assert.are.equal(0, r.exitCode, r.stderr)
      local id = sb.sandboxId
      srv:stop() -- the sandbox stays live in its record
      srv = serve()
      pool_ready(2)
      local again = mastra.PlatformSandbox.new(srv:sandboxOptions{ id = "restart-kept" })
      again:start()
      assert.are.equal(id, again.sandboxId)
      assert.are.equal(before, host_uid(again))
      assert.are.equal(before, record(srv, id).hostUidBase)
      assert.are.equal("kept 1000\n", again:executeCommand(
        "printf '%s ' $(cat /workspace/f); stat -c %u /workspace/f").stdout)
      again:destroy()
    end)
  end)

  describe("with two ranges", function()
    local srv
    setup(function()
      srv = platform.start{ args = { "--driver", "namespaces", "--warm-pool", "0",
        "--sandbox-uid-ranges", "300000:2" } }
    end)
    teardown(function()
      if srv then srv:close() end
    end)

    it("gives a range to another sandbox only once its sandbox is gone", function()
      if skip_if_shared(srv) then return end
      local a = srv:startSandbox{ id = "two-a" }
      local b = srv:startSandbox{ id = "two-b" }
      local ua, ub = host_uid(a), host_uid(b)
      local got = { [ua] = true, [ub] = true }
      assert.is_true(got[300000] and got[365536])
      -- a third: no range is free, and the error says which flag gives more
      local c = mastra.PlatformSandbox.new(srv:sandboxOptions{ id = "two-c" })
      local ok, err = pcall(c.start, c)
      assert.is_false(ok)
      assert.matches("no free host uid range", tostring(err))
      assert.matches("--sandbox-uid-ranges", tostring(err), 1, true)
      -- a's processes gone, its range is c's
      a:executeCommand("sleep 100 > /dev/null 2>&1 &")
      a:destroy()
      platform.waitUntil(function()
        return not sh("ps -o uid= -e"):find("%f[%d]" .. ua .. "%f[%D]")
      end, 10000)
      local ok2
      platform.waitUntil(function()
        c = mastra.PlatformSandbox.new(srv:sandboxOptions{ id = "two-c" })
        ok2 = pcall(c.start, c)
        return ok2
      end, 10000, 200)
      assert.is_true(ok2)
      assert.are.equal(ua, host_uid(c))
      c:destroy()
      b:destroy()
    end)
  end)

  it("rejects a malformed --sandbox-uid-ranges, saying what it wants", function()
    for _, v in ipairs{ "5:1", "100000", "100000:0", "4294900000:2", "x:1", "100000:-1" } do
      local r = mastra.LocalSandbox.new{}
      r:start()
      local res = r:executeCommand(mastra.quote(platform.binary())
        .. " serve --sandbox-uid-ranges " .. mastra.quote(v)
        .. " --data-dir /nonexistent-mastra-dir")
      r:destroy()
      assert.are_not.equal(0, res.exitCode, v)
      assert.matches("%-%-sandbox%-uid%-ranges wants FIRST:COUNT", res.stderr)
      assert.is_truthy(res.stderr:find("(got '" .. v .. "')", 1, true), res.stderr)
    end
  end)
end)

describe("host uids without root", function()
  local UID = 47000 + (tonumber(tostring(os.time()):sub(-3)) or 0)
  local reason
  if trim(sh("id -u")) ~= "0" then
    reason = "a server of another uid needs root to start: skipped"
  else
    local out = sh(("setpriv --reuid=%d --regid=%d --clear-groups unshare -Urnmp --fork"
      .. " true && echo ok"):format(UID, UID))
    if not out:find("ok\n$") then
      reason = "no unprivileged user namespaces (" .. trim(out) .. "): skipped"
    end
  end
  if reason then
    pending(reason)
    return
  end

  local scratch = platform.tmpdir()
  local base = scratch .. "/base"
  local srv
  setup(function()
    sh(("chown %d:%d %s"):format(UID, UID, mastra.quote(scratch)))
    local out = sh(("setpriv --reuid=%d --regid=%d --clear-groups %s base build --minimal"
      .. " --base %s && echo built"):format(UID, UID, mastra.quote(platform.binary()),
      mastra.quote(base)))
    assert(out:find("built\n$"), out)
    srv = platform.start{ user = UID, base = false,
      args = { "--driver", "namespaces", "--base", base, "--sandbox-uid-ranges", "300000:4" } }
  end)
  teardown(function()
    if srv then srv:close() end
    platform.rm_rf(scratch)
  end)

  it("gives every sandbox the server's uid, says so, and records it", function()
    assert.is_truthy(srv.stderrTail:find("every sandbox has the same host uid ("
      .. UID .. ", the server's)", 1, true), srv.stderrTail)
    local h = srv:curl("GET", srv.info.inspector .. "api/health")
    assert.are.equal(200, h.status, h.body)
    assert.are.equal(false, h.json.hostUids.own)
    assert.are.equal(UID, h.json.hostUids.first)
    local a = srv:startSandbox()
    local b = srv:startSandbox()
    for _, sb in ipairs{ a, b } do
      local r = sb:executeCommand("cat /proc/self/uid_map")
      assert.are.equal(0, r.exitCode, r.stderr)
      -- one id (the outside one is the server's, seen from the parent
      -- namespace the server may have made for its networks)
      assert.matches("^%s*0%s+%d+%s+1%s*$", r.stdout)
      assert.are.equal(UID, record(srv, sb.sandboxId).hostUidBase)
    end
    -- as the host sees them: both inits are the server's uid
    local owners = {}
    for uid in sh("ps -eo uid=,args= | grep '[m]astra-init'"):gmatch("(%d+)%s") do
      owners[tonumber(uid)] = (owners[tonumber(uid)] or 0) + 1
    end
    assert.is_true((owners[UID] or 0) >= 2)
    a:destroy()
    b:destroy()
  end)
end)
