-- Checkpoints and the data disk's room (issue 30, item 4; docs/platform.md,
-- "Checkpoints"): a sparse file is stored sparse and restored so, and a
-- tree that the data disk has no room for fails its capture once, before
-- tar writes anything, answers 507, is recorded as a failure, keeps the
-- sandbox, and the idle reaper does not try it again each minute; a create
-- and a restore on a full disk answer 507. The small disk is a tmpfs of 96
-- MiB mounted for the test (root only).
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local P = "/v1/railway/projects/proj"
local trim = util.trim

local sh = util.sh

local function create(srv, body)
  local r = srv:json("POST", P .. "/sandbox", body)
  assert.are.equal(201, r.status, "POST /sandbox: " .. r.body)
  return r.json
end

local function run(srv, sb, command)
  local w = srv:wsExec(srv:lease(P, sb.id), command)
  assert.are.equal(0, w.exitCode, command .. ": " .. w.stderr)
  return w.stdout
end

-- the sizes of DATA/checkpoints' archives (*.tar) and temporaries, in bytes
local function archives(srv)
  local out = sh("find " .. mastra.quote(srv.dataDir .. "/checkpoints")
    .. " -maxdepth 1 -type f -printf '%s %f\\n'")
  local sizes = {}
  for size, name in out:gmatch("(%d+) (%S+)\n") do
    if name:match("%.tar$") or name:find(".mastra-tmp-", 1, true) then
      sizes[name] = tonumber(size)
    end
  end
  return sizes
end

describe("checkpoints of sparse files", function()
  local srv
  setup(function() srv = platform.start{} end)
  teardown(function() if srv then srv:close() end end)

  it("stores a sparse file sparse, and restores it sparse", function()
    local sb = create(srv, { id = "sparse-big", environmentId = "env" })
    run(srv, sb, "truncate -s 4G /workspace/big && printf end >> /workspace/big")
    local r = srv:curl("DELETE", P .. "/sandbox/" .. sb.id)
    assert.are.equal(204, r.status, r.body)
    local total = 0
    for _, size in pairs(archives(srv)) do total = total + size end
    assert.is_true(total > 0)
    assert.is_true(total < 1024 * 1024, "the archives hold " .. total .. " bytes")
    local again = create(srv, { id = "sparse-big", environmentId = "env" })
    assert.are.equal(true, again.restoredFromCheckpoint)
    local out = run(srv, again, "stat -c %s /workspace/big; du -k /workspace/big | cut -f1;"
      .. " tail -c 3 /workspace/big; echo")
    local size, kib, tail = out:match("^(%d+)\n(%d+)\n(.-)\n$")
    assert.are.equal(tostring(4 * 1024 * 1024 * 1024 + 3), size, out)
    assert.is_true(tonumber(kib) < 1024, "restored as " .. tostring(kib) .. " KiB")
    assert.are.equal("end", tail)
    srv:curl("DELETE", P .. "/sandbox/" .. again.id)
  end)
end)

describe("a capture the data disk has no room for", function()
  if trim(sh("id -u")) ~= "0" then
    pending("a small data disk (a tmpfs mount) needs root: skipped")
    return
  end

  local disk, srv
  setup(function()
    disk = platform.tmpdir()
    local out, ok = sh("mount -t tmpfs -o size=96m mastra-ckpt-space " .. mastra.quote(disk))
    assert(ok, out)
    srv = platform.start{ dataDir = disk .. "/data", args = { "--warm-pool", "0" } }
  end)
  teardown(function()
    if srv then srv:close() end
    if disk then
      sh("umount " .. mastra.quote(disk))
      platform.rm_rf(disk)
    end
  end)

  it("fails once with 507, records it, keeps the sandbox, and is not retried"
    .. " by the idle reaper", function()
    local sb = create(srv, { id = "no-room", environmentId = "env",
      idleTimeoutMinutes = 0.02 })
    -- 56 MiB of real data: the archive would need more than is left
    run(srv, sb, "head -c 58720256 /dev/urandom > /workspace/full")
    local r = srv:curl("DELETE", P .. "/sandbox/" .. sb.id)
    assert.are.equal(507, r.status, r.body)
    assert.matches("insufficient_storage", r.body)
    assert.matches("no room for the checkpoint", r.body)
    -- measured before tar started: it says how much the tree holds
    assert.matches("the tree holds %d+ KiB and the data disk has %d+ KiB free", r.body)
    -- no archive was written, nor left half-written
    assert.are.same({}, archives(srv))
    -- the sandbox is kept, tree and all
    local g = srv:json("GET", P .. "/sandbox/" .. sb.id)
    assert.are.equal(200, g.status, g.body)
    assert.are.equal("58720256\n", run(srv, sb, "stat -c %s /workspace/full"))
    -- past its idle timeout (1.2 s) the reaper tries once, then leaves it
    -- be: one more failure in the log, and no more
    util.wait_until(function()
      local _, n = srv.stderrTail:gsub("capturing the checkpoint of " .. sb.id .. " failed", "")
      return n >= 2
    end, 10000)
    local _, tries = srv.stderrTail:gsub("capturing the checkpoint of " .. sb.id .. " failed", "")
    assert.are.equal(2, tries, srv.stderrTail)
    assert.are.equal(200, srv:json("GET", P .. "/sandbox/" .. sb.id).status)
    -- recorded as failures of its environment
    local f = srv:curl("GET", srv.info.inspector .. "api/failures?project=proj&environment=env")
    assert.are.equal(200, f.status, f.body)
    local n = 0
    for _, item in ipairs(f.json.failures or {}) do
      if item.kind == "checkpoint" and item.subject == sb.id then n = n + 1 end
    end
    assert.are.equal(2, n, f.body)
    -- with room again (its file gone), a destroy captures and ends it
    run(srv, sb, "rm /workspace/full")
    r = srv:curl("DELETE", P .. "/sandbox/" .. sb.id)
    assert.are.equal(204, r.status, r.body)
  end)

  it("answers 507 to a create and to a restore on a full disk", function()
    local sb = create(srv, { id = "full-restore", environmentId = "env" })
    run(srv, sb, "head -c 8388608 /dev/urandom > /workspace/data")
    local r = srv:curl("DELETE", P .. "/sandbox/" .. sb.id)
    assert.are.equal(204, r.status, r.body)
    -- the trash emptied first (it frees the destroyed trees' room later)
    assert.is_true(util.wait_until(function()
      return sh("ls -A " .. mastra.quote(srv.dataDir .. "/trash") .. " 2>/dev/null") == ""
    end, 10000, 100))
    local fill = mastra.quote(disk .. "/filler")
    sh("dd if=/dev/zero of=" .. fill .. " bs=1M")
    -- a create: its record cannot be written
    r = srv:json("POST", P .. "/sandbox", { environmentId = "env" })
    assert.are.equal(507, r.status, r.body)
    assert.are.equal("insufficient_storage", r.json.error.type)
    -- room for a record, not for the 8 MiB its checkpoint restores
    assert(select(2, sh("truncate -s -1M " .. fill)))
    r = srv:json("POST", P .. "/sandbox", { id = "full-restore", environmentId = "env" })
    assert.are.equal(507, r.status, r.body)
    assert.are.equal("insufficient_storage", r.json.error.type)
    assert.matches("restoring its checkpoint failed", r.json.error.message)
    -- with room again, the restore brings it all back
    os.remove(disk .. "/filler")
    local again = create(srv, { id = "full-restore", environmentId = "env" })
    assert.are.equal(true, again.restoredFromCheckpoint)
    assert.are.equal("8388608\n", run(srv, again, "stat -c %s /workspace/data"))
    r = srv:curl("DELETE", P .. "/sandbox/" .. again.id)
    assert.are.equal(204, r.status, r.body)
  end)
end)
