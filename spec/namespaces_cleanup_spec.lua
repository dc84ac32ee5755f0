-- The namespaces driver leaves nothing on the host (docs/platform.md,
-- "Drivers"): no mount, cgroup or process of a sandbox, nor a bridge, veth
-- or hosts file of a PRIVATE network ("Networks"), after a destroy, after
-- the server's exit, and after a kill -9 of the server followed by a
-- restart on the same data directory. Skipped, saying why, where the
-- driver cannot run (not root).
local lfs = require "lfs"
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local trim = util.trim

local is_root = util.is_root

-- the host's pids of the processes of sandbox id: its commands carry
-- MASTRA_SANDBOX_ID=id in their environment; its keeper (a child of the
-- server) names it on its command line, and the keeper's child is its init
local function host_pids(srv, id)
  local pids, marker = {}, "MASTRA_SANDBOX_ID=" .. id
  for name in lfs.dir("/proc") do
    local pid = tonumber(name)
    if pid then
      local env = util.read_file("/proc/" .. name .. "/environ") or ""
      local stat = util.read_file("/proc/" .. name .. "/stat") or ""
      local ppid = tonumber(stat:match("%) %a (%d+)") or "")
      local cmd = util.read_file("/proc/" .. name .. "/cmdline") or ""
      if ("\0" .. env .. "\0"):find("\0" .. marker .. "\0", 1, true) then
        pids[#pids + 1] = pid
      elseif ppid == srv.pid and cmd:find(id, 1, true) then
        pids[#pids + 1] = pid
        local kids = util.read_file(("/proc/%d/task/%d/children"):format(pid, pid)) or ""
        for k in kids:gmatch("%d+") do pids[#pids + 1] = tonumber(k) end
      end
    end
  end
  return pids
end

-- the cgroup directories at path under mastra-platform/ (v1 and v2)
local function cg_ls(path)
  local p = io.popen("ls -d /sys/fs/cgroup/*/mastra-platform/" .. path
    .. " /sys/fs/cgroup/mastra-platform/" .. path .. " 2>/dev/null")
  local out = p:read("a")
  p:close()
  return out
end

local function cgroups(id)
  return cg_ls("*/" .. id)
end

local mounts = util.mounts

-- the PRIVATE networks' tag of data directory dir (net.c's state file)
local function net_tag(dir)
  local tag = (util.read_file(dir .. "/net/state") or ""):match("\ntag (%x+)\n")
  assert(tag, "no tag in " .. dir .. "/net/state")
  return tag
end

-- the host's links named after tag (bridges mpb-<tag>N, veths mpv-<tag>N),
-- and the hosts files of dir's environments
local function net_left(dir, tag)
  local p = io.popen("ip -o link show 2>&1")
  local out = p:read("a")
  p:close()
  local left = {}
  for name in out:gmatch("%d+: (mp[bv]%-[^:@%s]+)") do
    if name:sub(5, 4 + #tag) == tag then left[#left + 1] = name end
  end
  if lfs.attributes(dir .. "/net/hosts") then
    for f in lfs.dir(dir .. "/net/hosts") do
      if f ~= "." and f ~= ".." then left[#left + 1] = "hosts/" .. f end
    end
  end
  return left
end

local DETACHED = "setsid sleep 300 >/dev/null 2>&1 < /dev/null &"

-- host_pids of a sandbox that ran DETACHED: its keeper, its init and the
-- detached sleep, waited for (the command answers once sh exits, and the
-- sleep may still be inside its execve, whose new image has no environment
-- to read yet)
local function detached_pids(srv, id)
  local pids
  util.wait_until(function()
    pids = host_pids(srv, id)
    return #pids >= 3
  end, 5000)
  assert.is_true(#pids >= 3, "pids of " .. id .. ": " .. #pids)
  return pids
end

-- the first 12 hex of the SHA-256 of dir: its cgroup's name
local function hex_of(dir)
  local p = io.popen("printf %s " .. mastra.quote(dir) .. " | sha256sum | cut -c1-12")
  local hex = trim(p:read("a"))
  p:close()
  return hex
end

-- the data directory dir's own cgroups (mastra-platform/<12 hex>)
local function data_cgroups(dir)
  return cg_ls(hex_of(dir))
end

-- the server's children that are zombies (a keeper it did not reap)
local function zombies(pid)
  local kids = util.read_file(("/proc/%d/task/%d/children"):format(pid, pid)) or ""
  local z = {}
  for k in kids:gmatch("%d+") do
    local stat = util.read_file("/proc/" .. k .. "/stat") or ""
    if stat:match("%) (%a) ") == "Z" then z[#z + 1] = k end
  end
  return z
end

local last_alive
local function all_gone(pids)
  for _, p in ipairs(pids) do
    if util.alive(p) then
      last_alive = ("%d (%s)"):format(p, (util.read_file("/proc/" .. p .. "/cmdline") or "")
        :gsub("%z", " "))
      return false
    end
  end
  return true
end

describe("the namespaces driver's cleanup", function()
  if not is_root() then
    pending("the namespaces driver needs root here: skipped")
    return
  end

  it("leaves nothing after a destroy and after the server's exit", function()
    local srv = platform.start{ args = { "--driver", "namespaces" } }
    local ok, err = pcall(function()
      local a, b = srv:startSandbox(), srv:startSandbox({ networkIsolation = "PRIVATE" })
      -- a setsid'd child escapes the command's group, not the sandbox
      assert.are.equal(0, a:executeCommand(DETACHED).exitCode)
      assert.are.equal(0, b:executeCommand(DETACHED).exitCode)
      local aid, bid = a.sandboxId, b.sandboxId
      local apids, bpids = detached_pids(srv, aid), detached_pids(srv, bid)
      assert.are_not.equal("", cgroups(aid))
      a:destroy()
      -- the setsid'd child is a stray, killed before the checkpoint's capture
      local stray = "sandbox " .. aid .. ": killed 1 stray process"
      assert.is_true(util.wait_until(function()
        return srv.stderrTail:find(stray, 1, true) ~= nil
      end, 5000), "no stray killed: " .. srv.stderrTail)
      assert.is_true(util.wait_until(function() return all_gone(apids) end, 5000),
        "still alive: " .. tostring(last_alive))
      assert.is_true(util.wait_until(function() return cgroups(aid) == "" end, 5000))
      assert.is_true(all_gone(apids))
      local tag = net_tag(srv.dataDir)
      -- b is a member of its environment's network
      assert.matches("\nveth mpv%-" .. tag, util.read_file(srv.dataDir .. "/net/state"))
      srv:stop() -- b is still live: its processes, cgroups go with the server
      assert.is_true(all_gone(bpids))
      assert.are.equal("", cgroups(bid))
      assert.are.same({}, mounts(srv.dataDir))
      assert.are.same({}, net_left(srv.dataDir, tag))
      -- and the data directory's own cgroup (mastra-platform/<12 hex>)
      assert.are.equal("", data_cgroups(srv.dataDir))
    end)
    srv:close()
    assert(ok, err)
  end)

  it("a forgotten destroyed record's keeper is reaped and its cgroups removed", function()
    -- --destroyed-max 1: each destroy forgets the record destroyed before,
    -- whose keeper and cgroups may still be on their way out
    local srv = platform.start{ args = { "--driver", "namespaces", "--destroyed-max", "1" } }
    local ok, err = pcall(function()
      local boxes, ids, pids = {}, {}, {}
      for i = 1, 4 do
        boxes[i] = srv:startSandbox()
        assert.are.equal(0, boxes[i]:executeCommand(DETACHED).exitCode)
        ids[i] = boxes[i].sandboxId
        for _, p in ipairs(detached_pids(srv, ids[i])) do pids[#pids + 1] = p end
      end
      for i = 1, 4 do boxes[i]:destroy() end
      assert.is_true(util.wait_until(function() return all_gone(pids) end, 5000),
        "still alive: " .. tostring(last_alive))
      for i = 1, 4 do
        assert.is_true(util.wait_until(function() return cgroups(ids[i]) == "" end, 5000),
          "cgroups left: " .. cgroups(ids[i]))
      end
      assert.is_true(util.wait_until(function() return #zombies(srv.pid) == 0 end, 5000),
        "unreaped children: " .. table.concat(zombies(srv.pid), " "))
      -- and it still serves
      assert.are.equal("ok\n", srv:startSandbox():executeCommand("echo ok").stdout)
    end)
    srv:close()
    assert(ok, err)
  end)

  it("sweeps the cgroups of a deleted data directory whose server was killed,"
    .. " never a live server's", function()
    local gone_dir = platform.tmpdir()
    local dead = platform.start{ dataDir = gone_dir .. "/data", tokenFile = gone_dir .. "/token",
      args = { "--driver", "namespaces" } }
    local live = platform.start{ args = { "--driver", "namespaces" } }
    local ok, err = pcall(function()
      local a = dead:startSandbox()
      assert.are.equal(0, a:executeCommand("true").exitCode)
      local aid, apids = a.sandboxId, host_pids(dead, a.sandboxId)
      dead:kill9()
      assert.is_true(util.wait_until(function() return all_gone(apids) end, 5000))
      platform.rm_rf(gone_dir) -- its data directory goes: no server of it will start
      assert.are_not.equal("", cgroups(aid))
      -- a live server's sandbox whose init exited: its cgroups are empty
      local b = live:startSandbox()
      assert.are.equal(0, b:executeCommand("true").exitCode)
      local bid, bpids = b.sandboxId, host_pids(live, b.sandboxId)
      for _, p in ipairs(bpids) do os.execute("kill -KILL " .. p .. " 2>/dev/null") end
      assert.is_true(util.wait_until(function() return all_gone(bpids) end, 5000))
      assert.are_not.equal("", cgroups(bid))
      -- a third server's start sweeps the dead one's, not the live one's
      local third = platform.start{ args = { "--driver", "namespaces" } }
      third:stop()
      assert.are.equal("", cgroups(aid))
      assert.are.equal("", data_cgroups(gone_dir .. "/data"))
      assert.are_not.equal("", cgroups(bid))
      assert.are_not.equal("", data_cgroups(live.dataDir))
      -- and the live one's sandbox runs again (a new init, same cgroups)
      assert.are.equal("back\n", b:executeCommand("echo back").stdout)
      live:stop()
      assert.are.equal("", cgroups(bid))
      assert.are.equal("", data_cgroups(live.dataDir))
    end)
    live:close()
    dead:close()
    platform.rm_rf(gone_dir)
    assert(ok, err)
  end)

  it("kill -9 of the server while its keepers start leaves no process of it", function()
    -- a keeper forks a child for each user namespace it maps (ns_sys.c);
    -- killed with the server in that child's life, it left the child in
    -- pause() forever, holding the server's stdout and stderr (a waiter
    -- for the server's output then waited forever too). 16 warm keepers
    -- start with each server: the kills land among them
    math.randomseed(7)
    local left = {}
    for round = 1, 12 do
      local srv = platform.start{ args = { "--driver", "namespaces", "--warm-pool", "16" } }
      mastra.sleep(math.random(0, 60))
      local dir = srv.dataDir
      srv:sh("kill -KILL " .. srv.pid)
      local function of_server()
        local found = {}
        for name in lfs.dir("/proc") do
          local pid = tonumber(name)
          local cmd = pid and util.read_file("/proc/" .. name .. "/cmdline") or ""
          if pid and pid ~= srv.pid and cmd:find(dir, 1, true)
              and (util.read_file("/proc/" .. name .. "/stat") or ""):match("%) (%a) ") ~= "Z" then
            found[#found + 1] = pid
          end
        end
        return found
      end
      local gone = util.wait_until(function() return #of_server() == 0 end, 5000)
      if not gone then
        for _, pid in ipairs(of_server()) do
          left[#left + 1] = ("round %d: %d %s"):format(round, pid,
            (util.read_file("/proc/" .. pid .. "/cmdline") or ""):gsub("%z", " "):sub(1, 120))
          util.sh("kill -KILL " .. pid) -- or the server's output never ends
        end
      end
      srv:kill9()
      srv:close()
    end
    assert.are.same({}, left)
  end)

  it("after kill -9 of the server, the next start removes what was left", function()
    local dir = platform.tmpdir() -- outlives the first server's scratch
    local srv = platform.start{ dataDir = dir .. "/data", tokenFile = dir .. "/token",
      args = { "--driver", "namespaces" } }
    local sb = srv:startSandbox({ networkIsolation = "PRIVATE" })
    assert.are.equal(0, sb:executeCommand(DETACHED).exitCode)
    -- it is on its environment's network
    assert.matches("10%.231%.", sb:executeCommand("cat /etc/hosts").stdout)
    local tag = net_tag(srv.dataDir)
    local id = sb.sandboxId
    local pids = detached_pids(srv, id)
    srv:kill9()
    -- the keeper dies with the server, the init with the keeper, the rest
    -- with their pid namespace
    assert.is_true(util.wait_until(function() return all_gone(pids) end, 5000))
    assert.are_not.equal("", cgroups(id)) -- left: the next start removes it
    -- (the sandbox stays live: its init starts again at its next command)
    local again = platform.start{ dataDir = srv.dataDir, tokenFile = srv.tokenFile,
      args = { "--driver", "namespaces" } }
    local ok, err = pcall(function()
      assert.are.equal("", cgroups(id))
      assert.are.same({}, net_left(again.dataDir, tag))
      -- the sandbox is still live, and runs commands again
      local back = again:startSandbox({ sandboxId = id })
      assert.are.equal("again\n", back:executeCommand("echo again").stdout)
      local newpids = host_pids(again, id)
      local tag2 = net_tag(again.dataDir)
      again:stop()
      assert.is_true(all_gone(newpids))
      assert.are.equal("", cgroups(id))
      assert.are.same({}, mounts(again.dataDir))
      assert.are.same({}, net_left(again.dataDir, tag2))
    end)
    again:close()
    srv:close()
    platform.rm_rf(dir)
    assert(ok, err)
  end)
end)
