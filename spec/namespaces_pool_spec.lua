-- The warm pool of the namespaces driver (docs/platform.md, "Drivers"):
-- keepers and inits of ISOLATED sandboxes started ahead under DATA/pool,
-- taken by fresh creates. A taken one is its sandbox in every way (hostname,
-- tree, cgroups, command line), the pool refills, nothing of it outlives the
-- server (exit, kill -9 and the next start), and what cannot use it (a
-- restore, a PRIVATE sandbox) does not touch it. Skipped, saying why, where
-- the driver cannot run (not root).
local lfs = require "lfs"
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local is_root = util.is_root

-- the names in dir, sorted ({} when it does not exist)
local function ls(dir)
  local out = {}
  if lfs.attributes(dir, "mode") ~= "directory" then return out end
  for name in lfs.dir(dir) do
    if name ~= "." and name ~= ".." then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

-- the cgroup directories named name (a glob) of data directory dir (its
-- cgroup: mastra-platform/<the first 12 hex of the SHA-256 of dir>; v1 and
-- v2)
local function cgroups(dir, name)
  local p = io.popen("printf %s " .. mastra.quote(dir) .. " | sha256sum | cut -c1-12")
  local hex = util.trim(p:read("a"))
  p:close()
  p = io.popen("ls -d /sys/fs/cgroup/*/mastra-platform/" .. hex .. "/" .. name
    .. " /sys/fs/cgroup/mastra-platform/" .. hex .. "/" .. name .. " 2>/dev/null")
  local out = p:read("a")
  p:close()
  return out
end

-- the server's children whose command line has text, as { pid = cmdline }
local function children_with(srv, text)
  local found = {}
  for name in lfs.dir("/proc") do
    local pid = tonumber(name)
    if pid then
      local stat = util.read_file("/proc/" .. name .. "/stat") or ""
      local cmd = (util.read_file("/proc/" .. name .. "/cmdline") or ""):gsub("%z", " ")
      if tonumber(stat:match("%) %a (%d+)") or "") == srv.pid and cmd:find(text, 1, true) then
        found[pid] = cmd
      end
    end
  end
  return found
end

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local function has(list, x)
  for _, v in ipairs(list) do if v == x then return true end end
  return false
end

local function overlay_mounts(dir) return #util.mounts(dir) end

-- stop srv: the pool's keepers (pids) are gone, and no tree under pool,
-- no pool cgroup and no overlay of its data directory is left
local function stop_clean(srv, pool, keepers)
  srv:stop()
  for pid in pairs(keepers) do assert.is_false(util.alive(pid), "keeper " .. pid) end
  assert.are.same({}, ls(pool))
  assert.are.equal("", cgroups(srv.dataDir, "pool-*"))
  assert.are.equal(0, overlay_mounts(srv.dataDir))
end

describe("the namespaces driver's warm pool", function()
  if not is_root() then
    pending("the namespaces driver needs root here: skipped")
    return
  end

  local function serve(extra)
    local args = { "--driver", "namespaces" }
    for _, a in ipairs(extra or {}) do args[#args + 1] = a end
    return platform.start{ args = args }
  end

  -- the inspector's word on the pool of srv: {size, ready, warming}
  local function warm_pool(srv)
    local r = srv:curl("GET", srv.info.inspector .. "api/health")
    assert.are.equal(200, r.status, r.body)
    return r.json.warmPool
  end

  -- the pool of srv holds n members whose keepers run and which a create
  -- can take (the server says they are ready: a member still starting is
  -- passed over, and a create takes the oldest ready one)
  local function wait_pool(srv, n)
    local pool = srv.dataDir .. "/pool"
    local last
    assert.is_true(util.wait_until(function()
      last = warm_pool(srv)
      return last.ready == n and #ls(pool) == n
        and count(children_with(srv, pool .. "/")) == n
    end, 10000), "pool: " .. table.concat(ls(pool), " ") .. "; ready "
      .. tostring(last and last.ready) .. "; log: " .. srv.stderrTail)
    return ls(pool)
  end

  it("a create takes a warm sandbox, which is its own in every way; the pool refills",
    function()
      local srv = serve{ "--warm-pool", "2" }
      local ok, err = pcall(function()
        local pool = srv.dataDir .. "/pool"
        local members = wait_pool(srv, 2)
        local wp = warm_pool(srv)
        assert.are.same({ size = 2, ready = 2, warming = 0, perTemplate = 1, templateMax = 4 },
          { size = wp.size, ready = wp.ready, warming = wp.warming,
            perTemplate = wp.perTemplate, templateMax = wp.templateMax })
        assert.are.same({}, wp.templates)
        -- keepers and inits get oom_score_adj -1000 where the server has
        -- CAP_SYS_RESOURCE (bit 24; some containers' root lacks it); else
        -- it says so once
        local eff = (util.read_file("/proc/" .. srv.pid .. "/status") or "")
          :match("CapEff:%s*(%x+)")
        local _, said = srv.stderrTail:gsub("cannot have oom_score_adj %-1000", "")
        assert.are.equal(tonumber(eff, 16) & (1 << 24) ~= 0 and 0 or 1, said, srv.stderrTail)
        local oldest = members[1]
        assert.are_not.equal("", cgroups(srv.dataDir, "pool-" .. oldest))
        local a = srv:startSandbox()
        local id = a.sandboxId
        -- the oldest member is the sandbox now: its directory and cgroups
        -- carry the sandbox's id, and its keeper's command line names it
        assert.is_false(has(ls(pool), oldest))
        assert.are.equal("", cgroups(srv.dataDir, "pool-" .. oldest))
        assert.are_not.equal("", cgroups(srv.dataDir, id))
        local r = a:executeCommand(
          "hostname; ls -A /workspace | wc -l; id -u; stat -c %U /workspace")
        assert.are.equal(0, r.exitCode, r.stderr)
        assert.are.equal(id .. "\n0\n0\nroot\n", r.stdout)
        assert.are.equal("directory",
          lfs.attributes(srv.dataDir .. "/sandboxes/" .. id .. "/upper/workspace", "mode"))
        assert.are.equal(1, count(children_with(srv, "__ns-init " .. srv.pid .. " " .. id)))
        -- what it writes lands in its own layer, not another member's
        assert.are.equal(0, a:executeCommand("echo mine > /workspace/a.txt").exitCode)
        assert.are.equal("mine\n", util.read_file(srv.dataDir .. "/sandboxes/" .. id
          .. "/upper/workspace/a.txt"))
        -- the pool is back to two, with a new member
        local after = wait_pool(srv, 2)
        assert.is_false(has(after, oldest))
        local b = srv:startSandbox()
        assert.are_not.equal(id, b.sandboxId)
        local rb = b:executeCommand("hostname; test -e /workspace/a.txt; echo $?")
        assert.are.equal(b.sandboxId .. "\n1\n", rb.stdout)
        -- a destroy ends it as any sandbox
        local pids = children_with(srv, id)
        a:destroy()
        assert.is_true(util.wait_until(function()
          for pid in pairs(pids) do if util.alive(pid) then return false end end
          return cgroups(srv.dataDir, id) == ""
        end, 5000), "left: " .. cgroups(srv.dataDir, id))
        -- the server's exit ends the members too, and removes their tree
        wait_pool(srv, 2)
        stop_clean(srv, pool, children_with(srv, pool .. "/"))
      end)
      srv:close()
      assert(ok, err)
    end)

  it("--warm-pool 0 keeps none, and sandboxes start as without it", function()
    local srv = serve{ "--warm-pool", "0" }
    local ok, err = pcall(function()
      local sb = srv:startSandbox()
      local r = sb:executeCommand("hostname")
      assert.are.equal(sb.sandboxId .. "\n", r.stdout)
      assert.are.same({}, ls(srv.dataDir .. "/pool"))
      assert.are.equal(0, count(children_with(srv, srv.dataDir .. "/pool/")))
      -- a cold keeper names its sandbox from the start
      assert.are.equal(1, count(children_with(srv, " " .. sb.sandboxId .. " ")))
      -- nor members of a template: its sandboxes start cold too
      local t = mastra.Template.new():runCmd("echo cold > /opt/cold.txt")
      for _ = 1, 2 do
        local ts = srv:startSandbox{ template = t }
        assert.are.equal("cold\n", ts:executeCommand("cat /opt/cold.txt").stdout)
        assert.are.equal(1, count(children_with(srv, " " .. ts.sandboxId .. " ")))
        ts:destroy()
      end
      assert.are.same({}, ls(srv.dataDir .. "/pool"))
      local wp = warm_pool(srv)
      assert.are.same({ 0, 0 }, { wp.perTemplate, wp.templateMax })
      assert.are.same({}, wp.templates)
    end)
    srv:close()
    assert(ok, err)
  end)

  it("a restore and a PRIVATE sandbox leave the pool alone", function()
    local srv = serve{ "--warm-pool", "2" }
    local ok, err = pcall(function()
      local members = wait_pool(srv, 2)
      local p = srv:startSandbox({ networkIsolation = "PRIVATE" })
      assert.matches("10%.231%.", p:executeCommand("cat /etc/hosts").stdout)
      assert.are.same(members, ls(srv.dataDir .. "/pool"))
      -- a first sandbox with a key takes a member; its restore does not
      local k = srv:startSandbox({ id = "pool-key" })
      assert.are.equal(0, k:executeCommand("echo kept > /workspace/k.txt").exitCode)
      k:destroy()
      local now = wait_pool(srv, 2)
      local back = mastra.PlatformSandbox.new(srv:sandboxOptions{ id = "pool-key" })
      assert.are.equal(true, back:start().restored)
      assert.are.equal(true, back:getInfo().metadata.restoredFromCheckpoint)
      assert.are.equal("kept\n", back:executeCommand("cat /workspace/k.txt").stdout)
      assert.are.equal(back.sandboxId .. "\n", back:executeCommand("hostname").stdout)
      assert.are.same(now, ls(srv.dataDir .. "/pool"))
    end)
    srv:close()
    assert(ok, err)
  end)

  it("a warm keeper that dies is replaced, and creates go on", function()
    local srv = serve{ "--warm-pool", "1" }
    local ok, err = pcall(function()
      local pool = srv.dataDir .. "/pool"
      local member = wait_pool(srv, 1)[1]
      local victim = next(children_with(srv, pool .. "/" .. member .. " "))
      assert.is_truthy(victim)
      os.execute("kill -KILL " .. victim)
      assert.is_true(util.wait_until(function()
        return srv.stderrTail:find("a warm sandbox failed: its keeper exited", 1, true) ~= nil
      end, 5000), srv.stderrTail)
      local again = wait_pool(srv, 1)
      assert.are_not.equal(member, again[1])
      assert.is_true(util.wait_until(function()
        return cgroups(srv.dataDir, "pool-" .. member) == ""
      end, 5000))
      local sb = srv:startSandbox()
      assert.are.equal(sb.sandboxId .. "\n", sb:executeCommand("hostname").stdout)
    end)
    srv:close()
    assert(ok, err)
  end)

  it("members that cannot start are dropped, and after three in a row the pool is off",
    function()
      -- a base of its own (the host's tools: a moment), moved away under it
      local dir = platform.tmpdir()
      local base = dir .. "/base"
      local built = os.execute(mastra.quote(platform.binary()) .. " base build --minimal --base "
        .. mastra.quote(base) .. " >/dev/null 2>&1")
      assert.is_true(built == true or built == 0, "base build --minimal failed")
      local srv = platform.start{ base = false, args = { "--driver", "namespaces",
        "--base", base, "--warm-pool", "2" } }
      local ok, err = pcall(function()
        local pool = srv.dataDir .. "/pool"
        wait_pool(srv, 2)
        assert(os.rename(base, base .. ".away"))
        for pid in pairs(children_with(srv, pool .. "/")) do os.execute("kill -KILL " .. pid) end
        assert.is_true(util.wait_until(function()
          return srv.stderrTail:find("the warm pool is off", 1, true) ~= nil
        end, 10000), srv.stderrTail)
        -- a refill's keeper said why it could not start
        assert.matches("a warm sandbox failed: [^\n]*" .. base:gsub("%p", "%%%0"), srv.stderrTail)
        -- nothing of the members is left (the last refill's fail too), and
        -- no new one comes
        assert.is_true(util.wait_until(function()
          return #ls(pool) == 0 and cgroups(srv.dataDir, "pool-*") == ""
            and count(children_with(srv, pool .. "/")) == 0
        end, 5000), "pool: " .. table.concat(ls(pool), " "))
        assert(os.rename(base .. ".away", base))
        -- creates start cold
        local sb = srv:startSandbox()
        assert.are.equal(sb.sandboxId .. "\n", sb:executeCommand("hostname").stdout)
        assert.are.equal(0, #ls(pool))
      end)
      srv:close()
      platform.rm_rf(dir)
      assert(ok, err)
    end)

  it("after kill -9 of the server its members die, and the next start removes them",
    function()
      local dir = platform.tmpdir()
      local srv = platform.start{ dataDir = dir .. "/data", tokenFile = dir .. "/token",
        args = { "--driver", "namespaces", "--warm-pool", "2" } }
      local again
      local ok, err = pcall(function()
        local pool = srv.dataDir .. "/pool"
        local old = wait_pool(srv, 2)
        local keepers = children_with(srv, pool .. "/")
        srv:kill9()
        assert.is_true(util.wait_until(function()
          for pid in pairs(keepers) do if util.alive(pid) then return false end end
          return true
        end, 5000))
        assert.are.same(old, ls(pool)) -- left: the next start removes them
        again = platform.start{ dataDir = srv.dataDir, tokenFile = srv.tokenFile,
          args = { "--driver", "namespaces", "--warm-pool", "0" } }
        assert.are.same({}, ls(pool))
        for _, m in ipairs(old) do assert.are.equal("", cgroups(srv.dataDir, "pool-" .. m)) end
        local sb = again:startSandbox()
        assert.are.equal(0, sb:executeCommand("true").exitCode)
        again:stop()
        assert.are.equal(0, overlay_mounts(srv.dataDir))
      end)
      if again then again:close() end
      srv:close()
      platform.rm_rf(dir)
      assert(ok, err)
    end)

  -- {{ the pools of templates

  -- the members of srv's pool whose root links to a template's layer, as
  -- { name = keeper pid } (a member still starting may have no keeper yet)
  local function template_members(srv)
    local pool, out = srv.dataDir .. "/pool", {}
    for _, m in ipairs(ls(pool)) do
      if lfs.symlinkattributes(pool .. "/" .. m .. "/template", "mode") == "link" then
        out[m] = next(children_with(srv, pool .. "/" .. m .. " ")) or false
      end
    end
    return out
  end

  -- the warm pool's word on template key: {ready, warming}, or nil
  local function of_template(srv, key)
    for _, t in ipairs(warm_pool(srv).templates) do
      if t.key == key then return t end
    end
  end

  -- srv's pool holds n ready members of template key, with keepers running
  local function wait_template(srv, key, n)
    local last
    assert.is_true(util.wait_until(function()
      last = of_template(srv, key)
      local keepers = 0
      for _, pid in pairs(template_members(srv)) do if pid then keepers = keepers + 1 end end
      return last ~= nil and last.ready == n and last.warming == 0 and keepers == n
    end, 15000), "template " .. key .. ": " .. platform.encode(last or {})
      .. "; log: " .. srv.stderrTail)
  end

  -- the file `leaf` of sandbox id's cgroup in hierarchy `tree` (v1) or the
  -- unified one (v2: leaf2), or nil without cgroups
  local function cgroup_file(id, tree, leaf, leaf2)
    local p = io.popen("find /sys/fs/cgroup/" .. tree .. "/mastra-platform"
      .. " /sys/fs/cgroup/mastra-platform -maxdepth 2 -type d -name " .. id
      .. " 2>/dev/null | head -1")
    local d = util.trim(p:read("a"))
    p:close()
    if d == "" then return nil end
    local f = lfs.attributes(d .. "/" .. leaf2, "mode") and leaf2 or leaf
    return util.trim(util.read_file(d .. "/" .. f) or "")
  end

  local P = "/v1/railway/projects/proj"

  it("a template's second create takes a warm member of it: its files, its limits",
    function()
      local srv = serve{ "--warm-pool", "1", "--template-retention", "0" }
      local ok, err = pcall(function()
        local pool = srv.dataDir .. "/pool"
        wait_pool(srv, 1)
        local t = mastra.Template.new():runCmd("mkdir -p /opt/tp && echo warm > /opt/tp/f")
          :setWorkdir("/opt/tp"):cpuCount(2):memoryMB(256)
        local built = t:build(srv:sandboxOptions())
        assert.are.equal("ready", built.status, srv.stderrTail)
        local key = ls(srv.dataDir .. "/templates")[1]
        -- built, not yet used: the pool keeps none of it
        assert.is_nil(of_template(srv, key))
        -- the first create starts cold; the pool then keeps one member of it
        local a = srv:startSandbox{ template = t }
        assert.are.equal("warm\n", a:executeCommand("cat f").stdout)
        wait_template(srv, key, 1)
        local member, keeper = next(template_members(srv))
        assert.is_truthy(keeper)
        assert.are.equal(srv.dataDir .. "/templates/" .. key .. "/layer",
          lfs.symlinkattributes(pool .. "/" .. member .. "/template", "target"))
        -- the plain pool is as it was: its members are not the template's
        assert.are.equal(1, warm_pool(srv).ready)
        -- the second create is that member: its keeper ran before the create
        -- (it names the sandbox in its command line before its "R", which
        -- the first command waits for)
        local b = srv:startSandbox{ template = t }
        assert.is_false(has(ls(pool), member))
        local r = b:executeCommand("hostname; pwd; cat f; ls /opt/tp")
        assert.are.equal(0, r.exitCode, r.stderr)
        assert.are.equal(b.sandboxId .. "\n/opt/tp\nwarm\nf\n", r.stdout)
        assert.is_truthy(children_with(srv, "__ns-init " .. srv.pid .. " " .. b.sandboxId)[keeper],
          "the member's keeper " .. keeper .. " is not the sandbox's")
        -- what it writes is its own, the layer stays as built
        assert.are.equal(0, b:executeCommand("echo mine > f").exitCode)
        assert.are.equal("warm\n", a:executeCommand("cat f").stdout)
        assert.are.equal("warm\n", util.read_file(srv.dataDir .. "/templates/" .. key
          .. "/layer/opt/tp/f"))
        -- its limits are the template's
        local quota = cgroup_file(b.sandboxId, "cpu", "cpu.cfs_quota_us", "cpu.max")
        if quota ~= nil then
          assert.matches("^200000", quota)
          assert.are.equal(tostring(256 * 1024 * 1024),
            cgroup_file(b.sandboxId, "memory", "memory.limit_in_bytes", "memory.max"))
        end
        -- a plain create takes a plain member, never the template's
        wait_template(srv, key, 1)
        local member2 = next(template_members(srv))
        local c = srv:startSandbox()
        assert.are.equal("1\n", c:executeCommand("test -e /opt/tp/f; echo $?").stdout)
        assert.is_true(has(ls(pool), member2))
        -- while a sandbox uses it the template stays; once none does, a
        -- DELETE removes it, its members first: nothing of them is left
        local tpath = P .. "/sandbox/templates/" .. built.templateId
        assert.are.equal(409, srv:json("DELETE", tpath).status)
        a:destroy()
        b:destroy()
        c:destroy()
        wait_template(srv, key, 1)
        local members = template_members(srv)
        assert.are.equal(204, srv:json("DELETE", tpath).status)
        assert.is_nil(of_template(srv, key))
        assert.is_true(util.wait_until(function()
          for m, pid in pairs(members) do
            if util.alive(pid) or cgroups(srv.dataDir, "pool-" .. m) ~= ""
              or has(ls(pool), m) then
              return false
            end
          end
          return next(template_members(srv)) == nil
        end, 5000), "left: " .. platform.encode(template_members(srv)))
        assert.are.same({}, ls(srv.dataDir .. "/templates"))
        -- and the plain pool goes on
        wait_pool(srv, 1)
        local d = srv:startSandbox()
        assert.are.equal(d.sandboxId .. "\n", d:executeCommand("hostname").stdout)
      end)
      srv:close()
      assert(ok, err)
    end)

  it("retention drops a template's members first; the least recently used goes;"
    .. " the server's exit ends them all", function()
      -- 0.00005 days: 4.3 s, swept every second
      local srv = serve{ "--warm-pool", "1", "--warm-pool-templates", "2",
        "--warm-pool-template-max", "1", "--template-retention", "0.00005" }
      local ok, err = pcall(function()
        local pool = srv.dataDir .. "/pool"
        local one = mastra.Template.new():runCmd("echo one > /opt/one.txt")
        local two = mastra.Template.new():runCmd("echo two > /opt/two.txt")
        -- one in use keeps its template, and two members of it
        local a = srv:startSandbox{ template = one }
        local key1 = ls(srv.dataDir .. "/templates")[1]
        wait_template(srv, key1, 2)
        local b = srv:startSandbox{ template = one }
        assert.are.equal("one\n", b:executeCommand("cat /opt/one.txt").stdout)
        wait_template(srv, key1, 2)
        -- a second template, with --warm-pool-template-max 1: the first's
        -- members go, its sandboxes stay
        local old = template_members(srv)
        local c = srv:startSandbox{ template = two }
        local key2
        for _, k in ipairs(ls(srv.dataDir .. "/templates")) do
          if k ~= key1 then key2 = k end
        end
        wait_template(srv, key2, 2)
        assert.is_nil(of_template(srv, key1))
        for m, pid in pairs(old) do
          assert.is_true(util.wait_until(function() return not util.alive(pid) end, 5000), m)
        end
        assert.are.equal("one\n", a:executeCommand("cat /opt/one.txt").stdout)
        -- unused, the second goes by retention, its members first
        c:destroy()
        local members = template_members(srv)
        assert.is_true(util.wait_until(function()
          return lfs.attributes(srv.dataDir .. "/templates/" .. key2, "mode") == nil
        end, 10000), srv.stderrTail)
        assert.is_nil(of_template(srv, key2))
        assert.is_true(util.wait_until(function()
          for m, pid in pairs(members) do
            if util.alive(pid) or has(ls(pool), m) then return false end
          end
          return true
        end, 5000), "left: " .. platform.encode(template_members(srv)))
        -- the first, in use, stays; a create of it brings its members back
        assert.are.equal("ready", srv:json("GET", P .. "/sandbox/templates/"
          .. srv:json("GET", P .. "/sandbox/templates").json[1].templateId).json.status)
        local d = srv:startSandbox{ template = one }
        wait_template(srv, key1, 2)
        -- the server's exit ends every member, and leaves no tree, cgroup or mount
        local keepers = children_with(srv, pool .. "/")
        assert.are.equal(3, count(keepers))
        for _, sb in ipairs{ a, b, d } do sb:destroy() end
        stop_clean(srv, pool, keepers)
      end)
      srv:close()
      assert(ok, err)
    end)

  -- }}

  it("refuses a --warm-pool that is not a count from 0 to 64, saying so", function()
    for _, bad in ipairs{ "x", "-1", "65", "" } do
      local ok, err = pcall(platform.start, { args = { "--driver", "namespaces",
        "--warm-pool", bad } })
      assert.is_false(ok, bad)
      assert.matches("--warm-pool wants a number of sandboxes from 0 to 64 (got '"
        .. bad .. "')", tostring(err), 1, true)
    end
    for _, case in ipairs{ { "--warm-pool-templates", "sandboxes", "17" },
      { "--warm-pool-template-max", "templates", "-1" },
      { "--warm-pool-templates", "sandboxes", "a" } } do
      local ok, err = pcall(platform.start, { args = { "--driver", "namespaces",
        case[1], case[3] } })
      assert.is_false(ok, case[1] .. " " .. case[3])
      assert.matches(case[1] .. " wants a number of " .. case[2] .. " from 0 to 16 (got '"
        .. case[3] .. "')", tostring(err), 1, true)
    end
  end)
end)
