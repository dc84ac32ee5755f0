-- Checkpoint retention by use (issue 28 item 4, docs/platform.md
-- "Checkpoints"): a key's checkpoint that nothing asked for (no create
-- restored it, no POST /checkpoint captured it, its create did not say the
-- id is the caller's own) goes after --checkpoint-retention-unused; one
-- that was asked for stays for --checkpoint-retention; a record of an
-- older server keeps the longer one. Every step over real HTTP (curl), the
-- rule read back from the inspector's API and the files. Needs
-- MASTRA_PLATFORM and MASTRA_WS_EXEC.
local mastra = require "mastra"
local platform = require "spec.support.platform"

local json = platform.json
local P = "/v1/railway/projects/proj-ret"
local function explicit() return { ["x-mastra-recovery-key"] = "explicit" } end

local function fresh_server(args)
  local dir = platform.tmpdir()
  local srv = platform.start{ dataDir = dir .. "/data", tokenFile = dir .. "/token", args = args }
  return dir, srv
end

local function create(srv, key, headers)
  local r = srv:json("POST", P .. "/sandbox", { id = key, environmentId = "env" },
    { headers = headers })
  assert.is_true(r.status == 201 or r.status == 200, "POST /sandbox: " .. r.body)
  return r.json
end

local function run(srv, sb, command)
  local w = srv:wsExec(srv:lease(P, sb.id), command)
  assert.are.equal(0, w.exitCode, command .. ": " .. w.stderr)
  return w.stdout
end

local function destroy(srv, sb)
  local r = srv:curl("DELETE", P .. "/sandbox/" .. sb.id)
  assert.are.equal(204, r.status, "DELETE /sandbox: " .. r.body)
end

-- a sandbox of key that writes a file and is destroyed (its checkpoint
-- captured by the DELETE)
local function leave(srv, key, headers)
  local sb = create(srv, key, headers)
  run(srv, sb, "echo " .. key .. " > f.txt")
  destroy(srv, sb)
  return sb
end

local function inspector_api(srv, path)
  local r = srv:curl("GET", srv.info.inspector .. "api/" .. path)
  assert.are.equal(200, r.status, path .. ": " .. r.body)
  return r.json
end

-- the inspector's entries of the key checkpoints (not the named ones), by key
local function listing(srv)
  local out = {}
  local r = inspector_api(srv, "checkpoints?project=proj-ret&environment=env")
  for _, c in ipairs(r.checkpoints) do
    if not c.named then out[c.key] = c end
  end
  return out
end

local function record_path(srv, name)
  return srv.dataDir .. "/checkpoints/" .. name .. ".json"
end

local function exists(srv, path)
  return srv:sh("test -e " .. mastra.quote(path)).exitCode == 0
end

describe("checkpoints: retention by use", function()
  local dir, srv

  -- the longer retention 86.4 s (beyond the spec), the shorter one 8.6 s
  setup(function()
    dir, srv = fresh_server{ "--checkpoint-retention", "0.001",
      "--checkpoint-retention-unused", "0.0001" }
  end)
  teardown(function()
    if srv then srv:close() end
    platform.rm_rf(dir)
  end)

  it("shows both retentions in the inspector's health", function()
    local h = inspector_api(srv, "health")
    assert.are.equal(0.001, h.checkpointRetentionDays)
    assert.are.equal(0.0001, h.checkpointRetentionUnusedDays)
  end)

  it("removes what nothing asked for after the shorter retention, keeps the rest", function()
    leave(srv, "restored-1")
    local back = create(srv, "restored-1")
    assert.is_true(back.restoredFromCheckpoint)
    destroy(srv, back) -- captured again: still a restored key
    leave(srv, "explicit-1", explicit())
    local cap = create(srv, "captured-1")
    run(srv, cap, "echo c > f.txt")
    local r = srv:json("POST", P .. "/sandbox/" .. cap.id .. "/checkpoint", { id = "captured-1" })
    assert.are.equal(200, r.status, r.body)
    destroy(srv, cap)
    -- getOrCreate: a create that joins a live sandbox and says its id is
    -- its own makes that sandbox's checkpoint asked for
    local joined = create(srv, "joined-1")
    assert.are.equal(joined.id, create(srv, "joined-1", explicit()).id)
    run(srv, joined, "echo j > f.txt")
    destroy(srv, joined)
    -- last: these two must be looked at before the shorter retention
    leave(srv, "auto-1") -- upstream's auto id: never looked up again
    leave(srv, "legacy-1")

    local l = listing(srv)
    local auto = l["auto-1"]
    assert.is_false(auto.asked)
    assert.are.equal(0, auto.restores)
    assert.are.equal(platform.null, auto.lastRestoredAt)
    assert.are.equal(0.0001, auto.retentionDays)
    assert.are.equal(auto.lastUsedAt + 8640, auto.removeAt)
    local restored = l["restored-1"]
    assert.is_true(restored.asked)
    assert.are.equal(1, restored.restores)
    assert.is_number(restored.lastRestoredAt)
    assert.are.equal(0.001, restored.retentionDays)
    assert.are.equal(restored.lastUsedAt + 86400, restored.removeAt)
    for _, key in ipairs{ "explicit-1", "captured-1", "joined-1" } do
      assert.is_true(l[key].asked, key)
      assert.are.equal(0, l[key].restores, key)
      assert.are.equal(0.001, l[key].retentionDays, key)
    end
    assert.is_false(l["legacy-1"].asked)

    -- legacy-1's record as an older server wrote it: no restores, no asked
    local legacy = l["legacy-1"]
    local path = record_path(srv, legacy.name)
    platform.writeFile(path, json.encode{ projectId = "proj-ret", environmentId = "env",
      key = "legacy-1", lastUsedMs = legacy.lastUsedAt })
    l = listing(srv)
    assert.is_true(l["legacy-1"].asked)
    assert.are.equal(0.001, l["legacy-1"].retentionDays)

    -- the sweep (every quarter of the shorter retention) removes auto-1 only
    assert.is_true(platform.waitUntil(function()
      return not exists(srv, record_path(srv, auto.name))
        and not exists(srv, srv.dataDir .. "/checkpoints/" .. auto.name .. ".tar")
    end, 30000, 500), "auto-1's checkpoint is still there")
    l = listing(srv)
    assert.is_nil(l["auto-1"])
    for _, key in ipairs{ "restored-1", "explicit-1", "captured-1", "joined-1", "legacy-1" } do
      assert.is_table(l[key], key .. " went with the shorter retention")
      assert.is_true(exists(srv, srv.dataDir .. "/checkpoints/" .. l[key].name .. ".tar"), key)
    end
    local again = create(srv, "auto-1")
    assert.is_false(again.restoredFromCheckpoint)
    destroy(srv, again)
    local kept = create(srv, "explicit-1")
    assert.are.equal("explicit-1\n", run(srv, kept, "cat f.txt"))
    destroy(srv, kept)
    assert.are.equal(1, listing(srv)["explicit-1"].restores)
  end)
end)

describe("checkpoints: the retention flags", function()
  it("never keeps an unused checkpoint longer than a used one; 0 is forever", function()
    for _, case in ipairs{
      { args = { "--checkpoint-retention", "0.5", "--checkpoint-retention-unused", "3" },
        days = 0.5, unused = 0.5 },
      { args = { "--checkpoint-retention", "0.5", "--checkpoint-retention-unused", "0" },
        days = 0.5, unused = 0.5 },
      { args = { "--checkpoint-retention", "0", "--checkpoint-retention-unused", "0" },
        days = 0, unused = 0 },
      { args = { "--checkpoint-retention", "0" }, days = 0, unused = 1 },
      { args = {}, days = 7, unused = 1 },
    } do
      local dir, srv = fresh_server(case.args)
      local ok, err = pcall(function()
        local h = inspector_api(srv, "health")
        assert.are.equal(case.days, h.checkpointRetentionDays, table.concat(case.args, " "))
        assert.are.equal(case.unused, h.checkpointRetentionUnusedDays,
          table.concat(case.args, " "))
      end)
      srv:close()
      platform.rm_rf(dir)
      assert(ok, err)
    end
  end)

  it("refuses an unused retention that is not a number of days", function()
    local dir, srv = fresh_server()
    local ok, err = pcall(function()
      for _, v in ipairs{ "x", "-1", "" } do
        local r = srv:sh(mastra.quote(platform.binary()) .. " serve --checkpoint-retention-unused "
          .. mastra.quote(v) .. " --data-dir " .. mastra.quote(dir .. "/unused"))
        assert.are.equal(2, r.exitCode, v)
        assert.matches("%-%-checkpoint%-retention%-unused wants a number of days", r.stderr)
      end
    end)
    srv:close()
    platform.rm_rf(dir)
    assert(ok, err)
  end)
end)
