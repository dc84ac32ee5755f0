-- getOrCreate by id (issue 28 item 3, docs/decisions.md): a create whose
-- `id` a live sandbox of the same project and environment holds answers
-- with that sandbox (200, its sbx_ id, outcome "connected"), so a retried
-- create, a second instance with the same id and concurrent creates (also
-- while the first is still restoring its checkpoint, or while the holder
-- is being destroyed) land on one sandbox; a create whose id's sandbox is
-- destroyed makes a new one from its checkpoint, as before. Over real
-- HTTP (curl), then from the Lua client.
local mastra = require "mastra"
local platform = require "spec.support.platform"

local quote = mastra.quote
local P = "/v1/railway/projects/proj"

describe("getOrCreate by id", function()
  local srv

  setup(function() srv = platform.start{} end)
  teardown(function() if srv then srv:stop() end end)

  local function create(body, prefix)
    local r = srv:json("POST", (prefix or P) .. "/sandbox", body)
    assert.is_true(r.status == 200 or r.status == 201, r.body)
    return r.json, r.status
  end

  local function destroy(id, prefix)
    local r = srv:curl("DELETE", (prefix or P) .. "/sandbox/" .. id)
    assert.are.equal(204, r.status, r.body)
  end

  local function run(id, command)
    local w = srv:wsExec(srv:lease(P, id), command)
    assert.are.equal(0, w.exitCode, command .. ": " .. w.stderr)
    return w.stdout
  end

  -- the live sandboxes whose recovery key is `key`
  local function live_of(key)
    local dir = srv.dataDir .. "/state/sandboxes"
    local out = {}
    for name in srv:sh("ls -A " .. quote(dir)).stdout:gmatch("[^\n]+") do
      local rec = platform.decode(platform.readFile(dir .. "/" .. name) or "")
      if type(rec) == "table" and rec.recoveryKey == key and (rec.destroyedMs or 0) == 0 then
        out[#out + 1] = rec.id
      end
    end
    return out
  end

  -- n creates of `body` at once (curl processes in parallel): {status, json}
  local function concurrent(n, body)
    local dir = platform.tmpdir()
    platform.writeFile(dir .. "/body", platform.encode(body))
    local script = {}
    for i = 1, n do
      script[#script + 1] = ("curl -s -o %s/out%d -w '%%{http_code}' -X POST"
        .. " -H 'Authorization: Bearer %s' -H 'Content-Type: application/json'"
        .. " --data-binary @%s/body %s%s/sandbox > %s/code%d &")
        :format(dir, i, srv.token, dir, srv.url, P, dir, i)
    end
    script[#script + 1] = "wait"
    local r = srv:sh(table.concat(script, "\n"), nil, { timeout = 120000 })
    assert.are.equal(0, r.exitCode, r.stderr)
    local out = {}
    for i = 1, n do
      out[i] = { status = tonumber(platform.readFile(dir .. "/code" .. i)),
        json = platform.decode(platform.readFile(dir .. "/out" .. i)) }
    end
    platform.rm_rf(dir)
    return out
  end

  it("a create with the id of a live sandbox answers with it", function()
    local a, sa = create{ id = "goc-1", environmentId = "env" }
    assert.are.equal(201, sa)
    assert.are.equal("created", a.outcome)
    run(a.id, "echo one > f.txt")
    local b, sb = create{ id = "goc-1", environmentId = "env", env = { X = "ignored" } }
    assert.are.equal(200, sb)
    assert.are.equal("connected", b.outcome)
    assert.are.equal(a.id, b.id)
    assert.are.equal("one\n", run(b.id, "cat f.txt"))
    assert.are.same({ a.id }, live_of("goc-1"))
    -- another environment or project, or no id: a sandbox of its own
    local other_env = create{ id = "goc-1", environmentId = "env2" }
    assert.are_not.equal(a.id, other_env.id)
    assert.are.equal("created", other_env.outcome)
    local P2 = "/v1/railway/projects/proj2"
    local other_project = create({ id = "goc-1", environmentId = "env" }, P2)
    assert.are_not.equal(a.id, other_project.id)
    local n1, n2 = create{ environmentId = "env" }, create{ environmentId = "env" }
    assert.are_not.equal(n1.id, n2.id)
    for _, s in ipairs{ other_env, n1, n2 } do destroy(s.id) end
    destroy(other_project.id, P2)
    -- destroyed: the next create is a new sandbox from its checkpoint
    destroy(a.id)
    local c, sc = create{ id = "goc-1", environmentId = "env" }
    assert.are.equal(201, sc)
    assert.are_not.equal(a.id, c.id)
    assert.are.equal(true, c.restoredFromCheckpoint)
    assert.are.equal("one\n", run(c.id, "cat f.txt"))
    destroy(c.id)
  end)

  it("concurrent creates with one id converge on one sandbox", function()
    local res = concurrent(8, { id = "goc-burst", environmentId = "env" })
    local created, id = 0, res[1].json.id
    for _, r in ipairs(res) do
      assert.is_true(r.status == 200 or r.status == 201, tostring(r.status))
      assert.are.equal(id, r.json.id)
      if r.status == 201 then created = created + 1 end
    end
    assert.are.equal(1, created)
    assert.are.same({ id }, live_of("goc-burst"))
    destroy(id)
  end)

  it("creates that come while the first restores its checkpoint join it", function()
    local a = create{ id = "goc-restore", environmentId = "env" }
    -- enough to keep tar busy for a moment
    run(a.id, "head -c 64000000 /dev/urandom > big.bin; echo ok > f.txt")
    destroy(a.id)
    local res = concurrent(6, { id = "goc-restore", environmentId = "env" })
    local created, id = 0, res[1].json.id
    for _, r in ipairs(res) do
      assert.are.equal(id, r.json.id)
      assert.are.equal(true, r.json.restoredFromCheckpoint)
      if r.status == 201 then created = created + 1 end
    end
    assert.are.equal(1, created)
    assert.are.same({ id }, live_of("goc-restore"))
    assert.are.equal("ok\n", run(id, "cat f.txt"))
    destroy(id)
  end)

  it("a create that comes while its id's sandbox is destroyed waits, then restores",
    function()
      local a = create{ id = "goc-dying", environmentId = "env" }
      run(a.id, "head -c 64000000 /dev/urandom > big.bin; echo newest > f.txt")
      local d = platform.tmpdir()
      platform.writeFile(d .. "/body", platform.encode{ id = "goc-dying", environmentId = "env" })
      local auth = "-H 'Authorization: Bearer " .. srv.token .. "'"
      local r = srv:sh(("curl -s -o /dev/null -X DELETE %s %s%s/sandbox/%s &\n"
        .. "sleep 0.05\n"
        .. "curl -s -o %s/out -w '%%{http_code}' -X POST %s -H 'Content-Type: application/json'"
        .. " --data-binary @%s/body %s%s/sandbox\nwait")
        :format(auth, srv.url, P, a.id, d, auth, d, srv.url, P), nil, { timeout = 120000 })
      assert.are.equal("201", r.stdout, r.stderr)
      local b = platform.decode(platform.readFile(d .. "/out"))
      platform.rm_rf(d)
      assert.are_not.equal(a.id, b.id)
      assert.are.equal(true, b.restoredFromCheckpoint)
      assert.are.equal("newest\n", run(b.id, "cat f.txt"))
      assert.are.same({ b.id }, live_of("goc-dying"))
      destroy(b.id)
    end)

  it("the upstream client's new instance after stop() (which sends nothing) reattaches",
    function()
      -- the newest upstream stop() leaves the VM running; a new instance
      -- constructed with the same id sends a plain create
      local first = create{ id = "mc-session-7", environmentId = "env", env = platform.object() }
      run(first.id, "echo work > notes.txt")
      local second, status = create{ id = "mc-session-7", environmentId = "env",
        env = platform.object() }
      assert.are.equal(200, status)
      assert.are.equal(first.id, second.id)
      assert.are.equal("work\n", run(second.id, "cat notes.txt"))
      destroy(second.id)
    end)

  describe("from the Lua client", function()
    local function new(extra)
      return mastra.PlatformSandbox.new(srv:sandboxOptions(extra))
    end

    it("a second instance with the same id lands on the same sandbox", function()
      local a <close> = new{ id = "goc-lua" }
      assert.are.same({ outcome = "created" }, a:start())
      a:executeCommand("echo shared > f.txt")
      local b = new{ id = "goc-lua" }
      assert.are.same({ outcome = "connected" }, b:start())
      assert.are.equal(a.sandboxId, b.sandboxId)
      assert.are.equal("shared\n", b:executeCommand("cat f.txt").stdout)
      -- one sandbox: b's destroy is a's too; a's next command says so, and
      -- the one after provisions again (from the checkpoint)
      b:destroy()
      local ok, err = pcall(a.executeCommand, a, "true")
      assert.is_false(ok)
      assert.is_true(mastra.errors.SandboxDestroyedError:is(err), tostring(err))
      assert.are.equal("shared\n", a:executeCommand("cat f.txt").stdout)
    end)

    it("concurrent starts of instances with one id share one sandbox", function()
      local list = {}
      for i = 1, 4 do list[i] = new{ id = "goc-lua-many" } end
      local ids = mastra.map(list, function(s)
        s:start()
        return s.sandboxId
      end)
      for i = 2, 4 do assert.are.equal(ids[1], ids[i]) end
      for _, s in ipairs(list) do s:destroy() end -- the first one's goes; the rest: 204
    end)
  end)
end)
