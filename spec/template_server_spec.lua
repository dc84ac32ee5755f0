-- Templates on the local platform (docs/platform.md "Templates"), with the
-- namespaces driver: a recipe that needs no network (runCmd writing files,
-- setWorkdir, setEnvs) is built once in a build sandbox, its layer kept
-- read-only under DATA/templates/<key>/layer; sandboxes of it boot with
-- base + that layer + their own upper layer; concurrent creates wait for
-- one build (templatePending, retryAfterMs); a failing operation keeps its
-- log and answers failed, never ready, and leaves no layer and no process;
-- a restart mid-build does the same. Skipped, saying why, without root.
local lfs = require "lfs"
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local P = "/v1/railway/projects/proj"

local function is_root()
  local p = io.popen("id -u")
  local uid = util.trim(p:read("a"))
  p:close()
  return uid == "0"
end

local function ls(dir)
  local out = {}
  if lfs.attributes(dir, "mode") ~= "directory" then return out end
  for name in lfs.dir(dir) do
    if name ~= "." and name ~= ".." then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

-- the server's processes (children and their children) other than itself
local function descendants(pid)
  local kids, found = { [pid] = true }, {}
  local changed = true
  while changed do
    changed = false
    for name in lfs.dir("/proc") do
      local p = tonumber(name)
      if p and not kids[p] then
        local stat = util.read_file("/proc/" .. name .. "/stat") or ""
        local ppid = tonumber(stat:match("%) %a (%d+)") or "")
        if ppid and kids[ppid] then
          kids[p] = true
          found[#found + 1] = (util.read_file("/proc/" .. name .. "/cmdline") or "")
            :gsub("%z", " ")
          changed = true
        end
      end
    end
  end
  return #found, table.concat(found, "; ")
end

local function no_process(srv)
  local n, what
  local ok = util.wait_until(function()
    n, what = descendants(srv.pid)
    return n == 0
  end, 5000)
  assert.is_true(ok, "left: " .. tostring(what))
end

describe("templates on the local platform", function()
  if not is_root() then
    pending("the namespaces driver needs root here: skipped")
    return
  end

  local srv
  local function serve(o)
    o = o or {}
    local args = { "--driver", "namespaces", "--warm-pool", "0" } -- no keeper left but ours
    for _, a in ipairs(o.extra or {}) do args[#args + 1] = a end
    o.args, o.extra = args, nil
    srv = platform.start(o)
    return srv
  end
  after_each(function()
    if srv then pcall(srv.close, srv) end
    srv = nil
  end)

  local function recipe(marker)
    return mastra.Template.new()
      :runCmd("mkdir -p /opt/app && echo built-" .. marker .. " > /opt/app/ready.txt")
      :setWorkdir("/opt/project")
      :runCmd("pwd > where.txt && echo \"$GREETING-$SECRET\" > greeting.txt")
      :setEnvs({ GREETING = "hello" })
      :setEnvs({ SECRET = "s3" }, { ephemeral = true })
      :runCmd("echo \"$GREETING-$SECRET\" > /opt/project/greeting.txt")
  end

  it("builds once, and sandboxes boot with base + template layer + their own", function()
    serve()
    local t = recipe("a")
    local progress = {}
    local r = t:build(srv:sandboxOptions{ onProgress = function(p)
      progress[#progress + 1] = p.status
    end })
    assert.are.equal("ready", r.status, srv.stderrTail)
    assert.matches("^tpl_%x+$", r.templateId)
    assert.are.equal("ready", progress[#progress])
    -- the layer is kept, read-only, under DATA/templates/<key>/layer
    local keys = ls(srv.dataDir .. "/templates")
    assert.are.equal(1, #keys)
    local layer = srv.dataDir .. "/templates/" .. keys[1] .. "/layer"
    assert.are.equal("built-a\n", util.read_file(layer .. "/opt/app/ready.txt"))
    -- a second build of the same definition costs nothing
    local t0 = mastra.now()
    assert.are.equal(r.templateId, t:build(srv:sandboxOptions()).templateId)
    assert.is_true(mastra.now() - t0 < 1000)
    -- sandboxes of it see the layer, and write only to their own
    local a = srv:startSandbox{ template = t }
    local b = srv:startSandbox{ template = t }
    local ra = a:executeCommand("cat /opt/app/ready.txt /opt/project/where.txt"
      .. " /opt/project/greeting.txt; echo $GREETING; echo x > /opt/app/ready.txt")
    assert.are.equal(0, ra.exitCode, ra.stderr)
    assert.are.equal("built-a\n/opt/project\nhello-s3\nhello\n", ra.stdout)
    local rb = b:executeCommand("cat /opt/app/ready.txt")
    assert.are.equal("built-a\n", rb.stdout)
    assert.are.equal("built-a\n", util.read_file(layer .. "/opt/app/ready.txt"))
    assert.are.equal("x\n", util.read_file(srv.dataDir .. "/sandboxes/" .. a.sandboxId
      .. "/upper/opt/app/ready.txt"))
    -- the definition kept has no build-only value
    local def = util.read_file(srv.dataDir .. "/templates/" .. keys[1] .. "/definition.json")
    assert.is_nil(def:find("s3", 1, true))
    -- the older routes see it too; a used template is not removed
    local g = srv:json("GET", P .. "/templates/" .. r.templateId .. "?environmentId=env")
    assert.are.equal(200, g.status)
    assert.are.equal("ready", g.json.status)
    local d = srv:json("DELETE", P .. "/sandbox/templates/" .. r.templateId)
    assert.are.equal(409, d.status)
    a:destroy()
    b:destroy()
    d = srv:json("DELETE", P .. "/sandbox/templates/" .. r.templateId)
    assert.are.equal(204, d.status)
  end)

  it("many concurrent creates of a building template wait for one build", function()
    serve()
    local t = mastra.Template.new():runCmd("sleep 1; echo one >> /opt/builds.txt")
    local results = mastra.map({ 1, 2, 3, 4, 5, 6 }, function()
      local sb <close> = mastra.PlatformSandbox.new(srv:sandboxOptions{ template = t })
      sb:start()
      return sb:executeCommand("cat /opt/builds.txt").stdout
    end, { concurrency = 6 })
    for i = 1, 6 do assert.are.equal("one\n", results[i]) end
    local _, n = srv.stderrTail:gsub("building template", "")
    assert.are.equal(1, n, srv.stderrTail)
  end)

  it("a failing operation keeps its log, answers failed, and leaves no layer", function()
    serve()
    local t = mastra.Template.new():runCmd("echo step-one > /opt/one.txt")
      :runCmd("echo about to fail; echo oops >&2; exit 7")
    local ok, err = pcall(t.build, t, srv:sandboxOptions())
    assert.is_false(ok)
    assert.is_true(mastra.errors.PlatformTemplateBuildError:is(err), tostring(err))
    assert.matches("operation #2 %(runCmd%) exited with 7", err.message)
    assert.matches("oops", err.message)
    local keys = ls(srv.dataDir .. "/templates")
    local dir = srv.dataDir .. "/templates/" .. keys[1]
    assert.are.same({ "build.log", "definition.json", "state.json" }, ls(dir))
    assert.matches("about to fail", util.read_file(dir .. "/build.log"))
    -- a create of it fails with the same error, and is not retried as ready
    local sb = mastra.PlatformSandbox.new(srv:sandboxOptions{ template = t })
    ok, err = pcall(sb.start, sb)
    assert.is_false(ok)
    assert.is_true(mastra.errors.PlatformTemplateBuildError:is(err), tostring(err))
    -- no build sandbox and no process is left
    no_process(srv)
    local list = srv:json("GET", P .. "/sandbox/templates")
    assert.are.equal("failed", list.json[1].status)
  end)

  it("a restart mid-build leaves no layer marked ready and no process", function()
    local dir = platform.tmpdir()
    finally(function() platform.rm_rf(dir) end)
    serve{ dataDir = dir .. "/data", tokenFile = dir .. "/token" }
    local t = mastra.Template.new():runCmd("echo started > /opt/s.txt; sleep 30")
    local b = srv:json("POST", P .. "/sandbox/templates/builds",
      { environmentId = "env", templateDefinition = t:definition() })
    assert.are.equal("pending", b.json.status)
    assert.is_true(util.wait_until(function()
      return srv.stderrTail:find("building template", 1, true) ~= nil
    end, 5000))
    local data = srv.dataDir
    srv:stop()
    serve{ dataDir = data, tokenFile = dir .. "/token" }
    local g = srv:json("GET", P .. "/sandbox/templates/" .. b.json.templateId)
    assert.are.equal("failed", g.json.status)
    assert.matches("stopped during it", g.json.error)
    local keys = ls(data .. "/templates")
    assert.are.same({ "build.log", "definition.json", "state.json" },
      ls(data .. "/templates/" .. keys[1]))
    no_process(srv)
    -- a retry builds it again
    b = srv:json("POST", P .. "/sandbox/templates/builds",
      { environmentId = "env", templateDefinition = t:definition(), retry = true })
    assert.are.equal("pending", b.json.status)
    assert.are.equal(204, srv:json("DELETE", P .. "/sandbox/templates/"
      .. b.json.templateId).status)
    no_process(srv)
  end)

  -- the file `leaf` of sandbox id's cgroup in hierarchy `tree` (v1: cpu,
  -- memory) or the unified one (v2: leaf2), or nil without cgroups
  local function cgroup_file(id, tree, leaf, leaf2)
    local r = srv:sh("find /sys/fs/cgroup/" .. tree .. "/mastra-platform"
      .. " /sys/fs/cgroup/mastra-platform -maxdepth 2 -type d -name " .. id
      .. " 2>/dev/null | head -1")
    local d = util.trim(r.stdout)
    if d == "" then return nil end
    local f = lfs.attributes(d .. "/" .. leaf2, "mode") and leaf2 or leaf
    return util.trim(util.read_file(d .. "/" .. f) or "")
  end

  it("makes cpuCount and memoryMB its sandboxes' cgroup limits", function()
    local dir = platform.tmpdir()
    finally(function() platform.rm_rf(dir) end)
    serve{ dataDir = dir .. "/data", tokenFile = dir .. "/token" }
    local t = mastra.Template.new():runCmd("echo sized > /opt/sized.txt")
      :cpuCount(3):memoryMB(300)
    local plain = srv:startSandbox()
    local sb = srv:startSandbox{ template = t }
    assert.are.equal(0, sb:executeCommand("true").exitCode)
    assert.are.equal(0, plain:executeCommand("true").exitCode)
    -- the sandbox JSON says them; a plain one has none
    local g = srv:json("GET", P .. "/sandbox/" .. sb.sandboxId)
    assert.are.equal(3, g.json.cpuCount)
    assert.are.equal(300, g.json.memoryMB)
    local gp = srv:json("GET", P .. "/sandbox/" .. plain.sandboxId)
    assert.is_nil(gp.json.cpuCount)
    assert.is_nil(gp.json.memoryMB)
    local quota = cgroup_file(sb.sandboxId, "cpu", "cpu.cfs_quota_us", "cpu.max")
    if quota == nil then
      pending("no cgroups for the sandboxes here")
      return
    end
    assert.matches("^300000", quota)
    assert.are.equal(tostring(300 * 1024 * 1024),
      cgroup_file(sb.sandboxId, "memory", "memory.limit_in_bytes", "memory.max"))
    -- the plain one keeps the server's defaults
    assert.are_not.equal(tostring(300 * 1024 * 1024),
      cgroup_file(plain.sandboxId, "memory", "memory.limit_in_bytes", "memory.max"))
    assert.is_nil(cgroup_file(plain.sandboxId, "cpu", "cpu.cfs_quota_us", "cpu.max")
      :match("^300000"))
    -- the limits survive a restart of the server (the record keeps them)
    local id = sb.sandboxId
    sb:destroy()
    plain:destroy()
    srv:stop()
    serve{ dataDir = dir .. "/data", tokenFile = dir .. "/token" }
    g = srv:json("GET", P .. "/sandbox/" .. id)
    assert.are.equal(3, g.json.cpuCount)
    assert.are.equal(300, g.json.memoryMB)
  end)

  it("makes the last setWorkdir its sandboxes' default cwd", function()
    serve()
    local t = mastra.Template.new():setWorkdir("/opt/wd/first"):setWorkdir("/opt/wd/app")
      :runCmd("echo here > marker.txt")
    local sb = srv:startSandbox{ template = t }
    local r = sb:executeCommand("pwd; cat marker.txt")
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal("/opt/wd/app\nhere\n", r.stdout)
    -- a relative cwd is under it; an absolute one is itself
    sb:executeCommand("mkdir -p sub /tmp/abs")
    assert.are.equal("/opt/wd/app/sub\n", sb:executeCommand("pwd", nil, { cwd = "sub" }).stdout)
    assert.are.equal("/tmp/abs\n", sb:executeCommand("pwd", nil, { cwd = "/tmp/abs" }).stdout)
    -- the sandbox JSON says it; a plain sandbox stays in /workspace
    assert.are.equal("/opt/wd/app", srv:json("GET", P .. "/sandbox/" .. sb.sandboxId).json.workdir)
    local plain = srv:startSandbox()
    assert.are.equal("/workspace\n", plain:executeCommand("pwd").stdout)
  end)

  -- the records of the key checkpoints (DATA/checkpoints/*.json)
  local function checkpoint_records()
    local out = {}
    for _, name in ipairs(ls(srv.dataDir .. "/checkpoints")) do
      if name:match("%.json$") then
        out[#out + 1] = { name = name:gsub("%.json$", ""),
          json = platform.json.decode(
            util.read_file(srv.dataDir .. "/checkpoints/" .. name)) }
      end
    end
    return out
  end

  it("checkpoints a template's sandbox as its own layer, and restores over the template",
    function()
    serve()
    local t = mastra.Template.new():runCmd("mkdir -p /opt/app && echo from-template"
      .. " > /opt/app/base.txt"):setWorkdir("/opt/app")
    local r = t:build(srv:sandboxOptions())
    local a = srv:startSandbox{ id = "keep-1", template = t }
    assert.are.equal(0, a:executeCommand("echo mine > mine.txt").exitCode)
    local cp = srv:json("POST", P .. "/sandbox/" .. a.sandboxId .. "/checkpoint", { id = "keep-1" })
    assert.are.equal(200, cp.status, cp.body)
    local seed = cp.json.checkpointName
    a:destroy()
    -- the checkpoint holds only the sandbox's layer, and names its template
    local recs = checkpoint_records()
    assert.are.equal(1, #recs)
    local keys = ls(srv.dataDir .. "/templates")
    assert.are.equal(keys[1], recs[1].json.template)
    assert.are.equal("setWorkdir", recs[1].json.templateDefinition.operations[2].method)
    local tar = srv.dataDir .. "/checkpoints/" .. recs[1].name .. ".tar"
    local list = srv:sh("tar -tf " .. tar).stdout
    assert.matches("opt/app/mine.txt", list)
    assert.is_nil(list:find("base.txt", 1, true), list)
    -- a create of that id without the template restores over it
    local b = srv:startSandbox{ id = "keep-1" }
    local rb = b:executeCommand("cat base.txt mine.txt; pwd")
    assert.are.equal("from-template\nmine\n/opt/app\n", rb.stdout, rb.stderr)
    b:destroy()
    -- so does a create seeded with its named copy, under another id
    local seeded = platform.decode(util.read_file(srv.dataDir .. "/checkpoints/seeds/" .. seed
      .. ".json"))
    assert.are.equal(keys[1], seeded.template)
    local sd = srv:startSandbox{ id = "other-1", seedCheckpointName = seed }
    assert.are.equal("from-template\nmine\n", sd:executeCommand("cat base.txt mine.txt").stdout)
    sd:destroy()
    -- the template gone, a restore rebuilds it from the kept definition
    assert.are.equal(204, srv:json("DELETE", P .. "/sandbox/templates/" .. r.templateId).status)
    assert.are.same({}, ls(srv.dataDir .. "/templates"))
    local c = srv:startSandbox{ id = "keep-1" }
    local rc = c:executeCommand("cat base.txt mine.txt")
    assert.are.equal("from-template\nmine\n", rc.stdout, rc.stderr)
    local _, builds = srv.stderrTail:gsub("building template", "")
    assert.are.equal(2, builds, srv.stderrTail)
    c:destroy()
    -- without a kept definition, it fails saying so, and creates nothing
    assert.are.equal(204, srv:json("DELETE", P .. "/sandbox/templates/" .. r.templateId).status)
    local path = srv.dataDir .. "/checkpoints/" .. recs[1].name .. ".json"
    local rec = platform.decode(util.read_file(path))
    rec.templateDefinition = nil
    local f = assert(io.open(path, "w"))
    f:write(platform.json.encode(rec))
    f:close()
    local before = #ls(srv.dataDir .. "/state/sandboxes")
    local res = srv:json("POST", P .. "/sandbox", { id = "keep-1", environmentId = "env" })
    assert.are.equal(409, res.status)
    assert.matches("taken over template " .. keys[1], res.json.error.message)
    assert.matches("templateDefinition", res.json.error.message)
    assert.are.equal(before, #ls(srv.dataDir .. "/state/sandboxes"))
  end)

  it("lists templates in the inspector; retention removes unused ones, never one in use",
    function()
    -- 0.00002 days: 1.7 s, swept every second
    serve{ extra = { "--template-retention", "0.00002" } }
    local base = srv.info.inspector
    local function templates()
      local r = srv:curl("GET", base .. "api/templates?project=proj&environment=env")
      assert.are.equal(200, r.status, r.body)
      local by = {}
      for _, t in ipairs(r.json.templates) do by[t.templateId] = t end
      return by, #r.json.templates
    end
    local used = mastra.Template.new():runCmd("echo used > /opt/used.txt"):withFamily("fam-a")
    local unused = mastra.Template.new():runCmd("echo unused > /opt/unused.txt")
    local ru, rn = used:build(srv:sandboxOptions()), unused:build(srv:sandboxOptions())
    local sb = srv:startSandbox{ template = used }
    local by, n = templates()
    assert.are.equal(2, n)
    local u = by[ru.templateId]
    assert.are.equal("ready", u.status)
    assert.are.equal("fam-a", u.family)
    assert.is_true(u.sizeBytes > 0)
    assert.are.equal("number", type(u.builtAt))
    assert.are.equal("number", type(u.lastUsedAt))
    assert.are.same({ sb.sandboxId }, u.usedBy)
    assert.are.equal(platform.null, u.removeAt)
    assert.are.same({}, by[rn.templateId].usedBy)
    assert.are.equal("number", type(by[rn.templateId].removeAt))
    -- the unused one goes; the one in use stays, however long
    assert.is_true(util.wait_until(function()
      local b = templates()
      return b[rn.templateId] == nil
    end, 10000), srv.stderrTail)
    mastra.sleep(2500)
    by, n = templates()
    assert.are.equal(1, n)
    assert.is_not_nil(by[ru.templateId])
    assert.are.equal(1, #ls(srv.dataDir .. "/templates"))
    assert.are.equal("used\n", sb:executeCommand("cat /opt/used.txt").stdout)
    -- the inspector's Remove refuses one in use; once unused it goes by retention
    local d = srv:curl("DELETE", base .. "api/template?project=proj&environment=env&id="
      .. ru.templateId)
    assert.are.equal(409, d.status)
    sb:destroy()
    assert.is_true(util.wait_until(function()
      local _, c = templates()
      return c == 0
    end, 10000), srv.stderrTail)
    assert.are.same({}, ls(srv.dataDir .. "/templates"))
  end)

  -- the pids of processes (anyone's) whose command line has `marker`
  local function processes_with(marker)
    local found = {}
    for name in lfs.dir("/proc") do
      if tonumber(name) then
        local cmd = (util.read_file("/proc/" .. name .. "/cmdline") or ""):gsub("%z", " ")
        if cmd:find(marker, 1, true) and not cmd:find("find", 1, true) then
          found[#found + 1] = name .. ": " .. cmd
        end
      end
    end
    return found
  end

  it("a cancelled build leaves no layer, no record and no process", function()
    serve()
    local t = mastra.Template.new():runCmd("echo started > /opt/c.txt; sleep 30.25")
    local b = srv:json("POST", P .. "/sandbox/templates/builds",
      { environmentId = "env", templateDefinition = t:definition() })
    assert.are.equal("pending", b.json.status)
    assert.is_true(util.wait_until(function() return #processes_with("sleep 30.25") > 0 end,
      10000), srv.stderrTail)
    local d = srv:json("DELETE", P .. "/sandbox/templates/" .. b.json.templateId)
    assert.are.equal(204, d.status)
    assert.matches("its build is cancelled", srv.stderrTail)
    assert.are.same({}, ls(srv.dataDir .. "/templates"))
    no_process(srv)
    assert.is_true(util.wait_until(function() return #processes_with("sleep 30.25") == 0 end,
      5000), table.concat(processes_with("sleep 30.25"), "; "))
    assert.are.equal(404, srv:json("GET", P .. "/sandbox/templates/" .. b.json.templateId).status)
    -- asked for again, it builds from the start, never from a half layer
    b = srv:json("POST", P .. "/sandbox/templates/builds",
      { environmentId = "env", templateDefinition = t:definition() })
    assert.are.equal("pending", b.json.status)
    assert.are.equal(204,
      srv:json("DELETE", P .. "/sandbox/templates/" .. b.json.templateId).status)
    no_process(srv)
  end)

  it("a kill -9 mid-build: the next start fails it, removes its layers, leaves nothing running",
    function()
    local dir = platform.tmpdir()
    finally(function() platform.rm_rf(dir) end)
    serve{ dataDir = dir .. "/data", tokenFile = dir .. "/token" }
    local t = mastra.Template.new():runCmd("mkdir -p /opt/half && echo x > /opt/half/a.txt;"
      .. " sleep 31.25")
    local b = srv:json("POST", P .. "/sandbox/templates/builds",
      { environmentId = "env", templateDefinition = t:definition() })
    assert.are.equal("pending", b.json.status)
    assert.is_true(util.wait_until(function() return #processes_with("sleep 31.25") > 0 end,
      10000), srv.stderrTail)
    local data = srv.dataDir
    local key = ls(data .. "/templates")[1]
    srv:kill9()
    -- as if it died while keeping the layer: a half one, and one under the final name
    for _, leaf in ipairs{ "layer.tmp", "layer" } do
      assert.is_true(lfs.mkdir(data .. "/templates/" .. key .. "/" .. leaf))
    end
    serve{ dataDir = data, tokenFile = dir .. "/token" }
    local g = srv:json("GET", P .. "/sandbox/templates/" .. b.json.templateId)
    assert.are.equal("failed", g.json.status)
    assert.matches("stopped during it", g.json.error)
    assert.are.same({ "build.log", "definition.json", "state.json" },
      ls(data .. "/templates/" .. key))
    -- a create of it is refused with that error, not booted over a half layer
    local c = srv:json("POST", P .. "/sandbox", { environmentId = "env",
      templateDefinition = t:definition() })
    assert.are.equal(422, c.status)
    assert.is_true(util.wait_until(function() return #processes_with("sleep 31.25") == 0 end,
      5000), table.concat(processes_with("sleep 31.25"), "; "))
    no_process(srv)
  end)

  it("a build that fills the disk fails saying so, keeps its log, leaves no layer,"
    .. " process or mount", function()
    local dir = platform.tmpdir()
    local data = dir .. "/data"
    assert(lfs.mkdir(data))
    local out, mounted = util.sh("mount -t tmpfs -o size=16m mastra-tpl-full "
      .. mastra.quote(data) .. " 2>&1")
    if not mounted then
      platform.rm_rf(dir)
      pending("mount -t tmpfs refused: " .. util.trim(out))
      return
    end
    finally(function()
      if srv then pcall(srv.close, srv) end
      local _, unmounted = util.sh("umount " .. mastra.quote(data))
      if not unmounted then util.sh("umount -l " .. mastra.quote(data)) end
      platform.rm_rf(dir)
    end)
    serve{ dataDir = data, tokenFile = dir .. "/token" }
    local t = mastra.Template.new():runCmd("echo before > /opt/before.txt")
      :runCmd("head -c 64m /dev/zero > /opt/fill")
    local ok, err = pcall(t.build, t, srv:sandboxOptions())
    assert.is_false(ok)
    assert.is_true(mastra.errors.PlatformTemplateBuildError:is(err), tostring(err))
    assert.matches("operation #2 %(runCmd%) exited with 1", err.message)
    assert.matches("the data disk is full", err.message)
    assert.matches("No space left on device", err.message)
    local key = ls(data .. "/templates")[1]
    local tdir = data .. "/templates/" .. key
    assert.are.same({ "build.log", "definition.json", "state.json" }, ls(tdir))
    assert.matches("== operation #2 %(runCmd%)", util.read_file(tdir .. "/build.log"))
    -- failed, never ready: in the server and, once there is room, on disk
    local g = srv:json("GET", P .. "/sandbox/templates/" .. err.templateId)
    assert.are.equal("failed", g.json.status, g.body)
    no_process(srv)
    -- no mount of the build is left (its namespace went with its processes)
    assert.are.equal(1, #util.mounts(data)) -- the tmpfs itself
    -- a create that needs it gets the failure
    local sb = mastra.PlatformSandbox.new(srv:sandboxOptions{ template = t })
    ok, err = pcall(sb.start, sb)
    assert.is_false(ok)
    assert.is_true(mastra.errors.PlatformTemplateBuildError:is(err), tostring(err))
    assert.matches("the data disk is full", err.message)
    no_process(srv)
    srv:stop()
    local st = platform.decode(util.read_file(tdir .. "/state.json"))
    assert.are.equal("failed", st.status)
    assert.matches("the data disk is full", st.error)
  end)

  it("refuses a wrong definition, naming the operation", function()
    serve()
    local r = srv:json("POST", P .. "/sandbox/templates/builds", { environmentId = "env",
      templateDefinition = { schemaVersion = 1, operations = {
        { method = "runCmd", args = { "true" } }, { method = "fly", args = {} } } } })
    assert.are.equal(400, r.status)
    assert.matches("operation #2 %(fly%): unknown method", r.json.error.message)
  end)
end)

describe("templates on the process driver", function()
  it("are refused, limits and all, saying which driver runs them", function()
    local srv = platform.start{ args = { "--driver", "process" } }
    finally(function() srv:close() end)
    local def = mastra.Template.new():runCmd("true"):cpuCount(2):memoryMB(512):definition()
    local b = srv:json("POST", P .. "/sandbox/templates/builds",
      { environmentId = "env", templateDefinition = def })
    assert.are.equal(400, b.status)
    assert.matches("the process driver does not run templates: start mastra%-platform with"
      .. " %-%-driver namespaces", b.json.error.message)
    local c = srv:json("POST", P .. "/sandbox", { environmentId = "env",
      templateDefinition = def })
    assert.are.equal(400, c.status)
    assert.matches("does not run templates", c.json.error.message)
    assert.are.same({}, ls(srv.dataDir .. "/templates"))
  end)
end)
