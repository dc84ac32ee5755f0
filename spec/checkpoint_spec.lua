-- Checkpoints of mastra-platform as the upstream client uses them (issue
-- 12, docs/platform.md "Checkpoints"): every step through curl (an
-- independent HTTP client) and ws-exec, then the Lua client's side of it
-- (start's restored flag, getInfo, destroy{keepCheckpoint = false}, clones
-- of a seeded template). Needs MASTRA_PLATFORM and MASTRA_WS_EXEC.
local mastra = require "mastra"
local platform = require "spec.support.platform"

local null = platform.null
local P = "/v1/railway/projects/proj-ck"

-- {====== helpers ======

local function fresh_server(args, dir)
  dir = dir or platform.tmpdir()
  local srv = platform.start{ dataDir = dir .. "/data", tokenFile = dir .. "/token", args = args }
  return dir, srv
end

local function create(srv, body, prefix)
  local r = srv:json("POST", (prefix or P) .. "/sandbox", body)
  assert.are.equal(201, r.status, "POST /sandbox: " .. r.body)
  return r.json
end

local function run(srv, sb, command, prefix)
  local w = srv:wsExec(srv:lease(prefix or P, sb.id), command)
  assert.are.equal(0, w.exitCode, command .. ": " .. w.stderr)
  return w.stdout
end

local function capture(srv, sb, key)
  local r = srv:json("POST", P .. "/sandbox/" .. sb.id .. "/checkpoint", { id = key })
  assert.are.equal(200, r.status, "POST checkpoint: " .. r.body)
  assert.are.equal("captured", r.json.status)
  assert.matches("^mastra%-checkpoint%-%x+%-%x+$", r.json.checkpointName)
  return r.json.checkpointName
end

local function delete_checkpoint(srv, sb, key)
  return srv:json("DELETE", P .. "/sandbox/" .. sb.id .. "/checkpoint", { id = key })
end

local function destroy(srv, sb)
  local r = srv:curl("DELETE", P .. "/sandbox/" .. sb.id)
  assert.are.equal(204, r.status, "DELETE /sandbox: " .. r.body)
end

-- the names in DATA/checkpoints (and seeds/), sorted
local function files(srv, sub)
  local r = srv:sh("ls -A " .. mastra.quote(srv.dataDir .. "/checkpoints" .. (sub or "")))
  local out = {}
  for line in r.stdout:gmatch("[^\n]+") do out[#out + 1] = line end
  table.sort(out)
  return out
end

local function has(list, name)
  for _, v in ipairs(list) do if v == name then return true end end
  return false
end

-- a new sandbox with key starts empty and says it was not restored
local function assert_starts_empty(srv, key, extra)
  local body = { id = key, environmentId = "env" }
  for k, v in pairs(extra or {}) do body[k] = v end
  local sb = create(srv, body)
  assert.are.equal(false, sb.restoredFromCheckpoint)
  assert.are.equal(null, sb.restoredCheckpointName)
  assert.are.equal("0\n", run(srv, sb, "ls -A | wc -l"))
  destroy(srv, sb)
end

-- }======

describe("checkpoints: an explicit delete is final", function()
  local dir, srv

  setup(function() dir, srv = fresh_server() end)
  teardown(function()
    if srv then srv:close() end
    platform.rm_rf(dir)
  end)

  it("capture, explicit delete, then destroy: the same id starts empty", function()
    local sb = create(srv, { id = "k-del", environmentId = "env" })
    run(srv, sb, "echo data > f.txt")
    local name = capture(srv, sb, "k-del")
    local key_tar = name:sub(1, 38) .. ".tar"
    assert.is_true(has(files(srv), key_tar))
    local d = delete_checkpoint(srv, sb, "k-del")
    assert.are.equal(204, d.status, d.body)
    assert.is_false(has(files(srv), key_tar))
    local g = srv:curl("GET", P .. "/sandbox/" .. sb.id)
    assert.are.equal(true, g.json.checkpointDeleted)
    destroy(srv, sb) -- no capture: the delete holds
    assert.is_false(has(files(srv), key_tar), "the DELETE captured the checkpoint again")
    assert_starts_empty(srv, "k-del")
  end)

  it("a destroy with an emptied tree drops the key's older checkpoint", function()
    local sb = create(srv, { id = "k-emptied", environmentId = "env" })
    run(srv, sb, "echo data > f.txt")
    destroy(srv, sb)
    local again = create(srv, { id = "k-emptied", environmentId = "env" })
    assert.are.equal(true, again.restoredFromCheckpoint)
    assert.are.equal("data\n", run(srv, again, "cat f.txt"))
    local key_tar = again.restoredCheckpointName:sub(1, 38) .. ".tar"
    assert.is_true(has(files(srv), key_tar))
    run(srv, again, "rm f.txt")
    destroy(srv, again) -- nothing to keep: the older archive goes
    assert.is_false(has(files(srv), key_tar))
    assert_starts_empty(srv, "k-emptied")
  end)

  it("holds against the capture that follows commands", function()
    local sb = create(srv, { id = "k-debounce", environmentId = "env" })
    run(srv, sb, "echo data > f.txt")
    -- the capture after commands is due two seconds after the last one
    local d = delete_checkpoint(srv, sb, "k-debounce")
    assert.is_true(d.status == 204 or d.status == 404, d.body)
    mastra.sleep(3000)
    run(srv, sb, "echo more > g.txt")
    mastra.sleep(3000)
    destroy(srv, sb)
    assert_starts_empty(srv, "k-debounce")
  end)

  it("a later POST /checkpoint captures again", function()
    local sb = create(srv, { id = "k-again", environmentId = "env" })
    run(srv, sb, "echo one > f.txt")
    local d = delete_checkpoint(srv, sb, "k-again")
    assert.is_true(d.status == 204 or d.status == 404, d.body)
    capture(srv, sb, "k-again")
    run(srv, sb, "echo two > f.txt")
    destroy(srv, sb) -- captures: the explicit POST lifted the mark
    local again = create(srv, { id = "k-again", environmentId = "env" })
    assert.are.equal(true, again.restoredFromCheckpoint)
    assert.are.equal("two\n", run(srv, again, "cat f.txt"))
    destroy(srv, again)
  end)

  it("the delete holds across a restart of the server", function()
    local sb = create(srv, { id = "k-restart", environmentId = "env" })
    run(srv, sb, "echo data > f.txt")
    capture(srv, sb, "k-restart")
    assert.are.equal(204, delete_checkpoint(srv, sb, "k-restart").status)
    srv:stop() -- shutdown captures live sandboxes: not this one
    srv = select(2, fresh_server(nil, dir))
    local g = srv:curl("GET", P .. "/sandbox/" .. sb.id)
    assert.are.equal(200, g.status)
    assert.are.equal(null, g.json.destroyedAt)
    assert.are.equal(true, g.json.checkpointDeleted)
    assert.are.equal("data\n", run(srv, sb, "cat f.txt"))
    destroy(srv, sb)
    assert_starts_empty(srv, "k-restart")
  end)

  it("the delete holds against idle reaping; without it reaping keeps the checkpoint",
    function()
      local function reaped(sb)
        return platform.waitUntil(function()
          local g = srv:curl("GET", P .. "/sandbox/" .. sb.id)
          return type(g.json.destroyedAt) == "string"
        end, 20000, 200)
      end
      -- 6 s: long enough for the first command to arrive on a slow build
      -- (ASan, the namespaces driver), short enough to wait for
      local kept = create(srv, { id = "k-reap-kept", environmentId = "env",
        idleTimeoutMinutes = 0.1 })
      local gone = create(srv, { id = "k-reap-gone", environmentId = "env",
        idleTimeoutMinutes = 0.1 })
      run(srv, kept, "echo kept > f.txt")
      run(srv, gone, "echo gone > f.txt")
      capture(srv, gone, "k-reap-gone")
      assert.are.equal(204, delete_checkpoint(srv, gone, "k-reap-gone").status)
      assert.is_true(reaped(kept), "not reaped")
      assert.is_true(reaped(gone), "not reaped")
      assert_starts_empty(srv, "k-reap-gone")
      local back = create(srv, { id = "k-reap-kept", environmentId = "env" })
      assert.are.equal(true, back.restoredFromCheckpoint)
      assert.are.equal("kept\n", run(srv, back, "cat f.txt"))
      destroy(srv, back)
    end)

  it("a delete after the sandbox was reaped removes what the reaping captured", function()
    local sb = create(srv, { id = "k-late", environmentId = "env", idleTimeoutMinutes = 0.02 })
    run(srv, sb, "echo late > f.txt")
    assert.is_true(platform.waitUntil(function()
      local g = srv:curl("GET", P .. "/sandbox/" .. sb.id)
      return type(g.json.destroyedAt) == "string"
    end, 20000, 200))
    local d = delete_checkpoint(srv, sb, "k-late")
    assert.are.equal(204, d.status, d.body)
    assert_starts_empty(srv, "k-late")
  end)

  it("the temporaries of a capture that a crash interrupted are removed at start", function()
    local sb = create(srv, { id = "k-crash", environmentId = "env" })
    run(srv, sb, "echo v1 > f.txt")
    capture(srv, sb, "k-crash")
    srv:kill9()
    local ck = dir .. "/data/checkpoints"
    for _, f in ipairs{ ck .. "/.mastra-tmp-0123456789abcdef", ck .. "/seeds/.mastra-tmp-42" } do
      platform.writeFile(f, "a torn archive")
    end
    srv = select(2, fresh_server(nil, dir))
    for _, f in ipairs(files(srv)) do assert.is_nil(f:match("^%.mastra%-tmp"), f) end
    for _, f in ipairs(files(srv, "/seeds")) do assert.is_nil(f:match("^%.mastra%-tmp"), f) end
    destroy(srv, sb)
    local back = create(srv, { id = "k-crash", environmentId = "env" })
    assert.are.equal("v1\n", run(srv, back, "cat f.txt"))
    destroy(srv, back)
  end)

  it("a sandbox whose restore a crash interrupted is destroyed at start", function()
    local sb = create(srv, { id = "k-torn", environmentId = "env" })
    srv:kill9()
    local rec = dir .. "/data/state/sandboxes/" .. sb.id .. ".json"
    local text = platform.readFile(rec)
    platform.writeFile(rec, (text:gsub("}%s*$", ', "restoring": true}')))
    srv = select(2, fresh_server(nil, dir))
    local g = srv:curl("GET", P .. "/sandbox/" .. sb.id)
    assert.are.equal(200, g.status)
    assert.is_string(g.json.destroyedAt)
    assert.matches("was being restored", srv.stderrTail)
  end)

  it("a delete without a checkpoint answers 404 naming the key", function()
    local sb = create(srv, { id = "k-none", environmentId = "env" })
    local d = delete_checkpoint(srv, sb, "k-none")
    assert.are.equal(404, d.status)
    assert.are.equal("not_found", d.json.error.type)
    assert.matches("k%-none", d.json.error.message)
    destroy(srv, sb)
  end)
end)

describe("checkpoints: seeds", function()
  local dir, srv, name, source

  setup(function()
    dir, srv = fresh_server()
    source = create(srv, { id = "template-key", environmentId = "env" })
    run(srv, source, "mkdir -p src && echo v1 > src/app.txt")
    name = capture(srv, source, "template-key")
  end)
  teardown(function()
    if srv then srv:close() end
    platform.rm_rf(dir)
  end)

  it("a create with a fresh id and seedCheckpointName has the seed's files", function()
    local sb = create(srv, { id = "fresh-1", seedCheckpointName = name, environmentId = "env" })
    assert.are.equal(true, sb.restoredFromCheckpoint)
    assert.are.equal(name, sb.restoredCheckpointName)
    assert.are.equal("v1\n", run(srv, sb, "cat src/app.txt"))
    local g = srv:curl("GET", P .. "/sandbox/" .. sb.id)
    assert.are.equal(name, g.json.restoredCheckpointName)
    destroy(srv, sb)
  end)

  it("the name stays valid: later captures and deletes of its key do not change it", function()
    run(srv, source, "echo v2 > src/app.txt")
    local newer = capture(srv, source, "template-key")
    assert.are_not.equal(name, newer)
    assert.are.equal(204, delete_checkpoint(srv, source, "template-key").status)
    local a = create(srv, { id = "fresh-2", seedCheckpointName = name, environmentId = "env" })
    local b = create(srv, { id = "fresh-3", seedCheckpointName = newer, environmentId = "env" })
    assert.are.equal("v1\n", run(srv, a, "cat src/app.txt"))
    assert.are.equal("v2\n", run(srv, b, "cat src/app.txt"))
    destroy(srv, a)
    destroy(srv, b)
  end)

  it("an id with its own checkpoint restores that one; the seed is ignored", function()
    local sb = create(srv, { id = "fresh-own", seedCheckpointName = name, environmentId = "env" })
    run(srv, sb, "echo mine > src/app.txt")
    destroy(srv, sb)
    local again = create(srv, { id = "fresh-own", seedCheckpointName = name,
      environmentId = "env" })
    assert.are.equal(true, again.restoredFromCheckpoint)
    assert.are_not.equal(name, again.restoredCheckpointName)
    assert.are.equal("mine\n", run(srv, again, "cat src/app.txt"))
    destroy(srv, again)
    -- and an unknown seed is not even looked at then
    local third = create(srv, { id = "fresh-own", seedCheckpointName = "nope",
      environmentId = "env" })
    assert.are.equal("mine\n", run(srv, third, "cat src/app.txt"))
    destroy(srv, third)
  end)

  it("an unknown seed name answers 400 with a message naming it", function()
    -- a well-formed name one digit away from the real one
    local near = name:sub(1, -2) .. (name:sub(-1) == "0" and "1" or "0")
    for _, bad in ipairs{ "no-such-checkpoint", near, "../../token",
      name:sub(1, 38) } do
      local r = srv:json("POST", P .. "/sandbox", { id = "fresh-x-" .. #bad,
        seedCheckpointName = bad, environmentId = "env" })
      assert.are.equal(400, r.status, bad .. ": " .. r.body)
      assert.are.equal("invalid_request", r.json.error.type)
      assert.is_truthy(r.json.error.message:find(bad, 1, true), r.json.error.message)
    end
    local r = srv:json("POST", P .. "/sandbox", { seedCheckpointName = 7, environmentId = "env" })
    assert.are.equal(400, r.status)
    assert.matches("seedCheckpointName", r.json.error.message)
  end)

  it("a seed is not visible from another project or environment", function()
    for _, c in ipairs{ { "/v1/railway/projects/other", "env" }, { P, "env-2" } } do
      local r = srv:json("POST", c[1] .. "/sandbox", { id = "fresh-y",
        seedCheckpointName = name, environmentId = c[2] })
      assert.are.equal(400, r.status, r.body)
    end
  end)

  it("a clone of a template carrying seedCheckpointName starts with its files", function()
    local template = mastra.PlatformSandbox.new{ accessToken = srv.token, proxyUrl = srv.url,
      projectId = "proj-ck", environmentId = "env", seedCheckpointName = name }
    for i = 1, 2 do
      local c = template:clone{ id = "seeded-clone-" .. i }
      local res = c:start()
      assert.are.equal("created", res.outcome)
      assert.are.equal(true, res.restored)
      assert.are.equal(name, res.checkpointName)
      assert.are.equal("v1\n", c:executeCommand("cat src/app.txt").stdout)
      c:destroy{ keepCheckpoint = false }
    end
  end)
end)

describe("checkpoints: retention", function()
  local dir, srv

  setup(function() dir, srv = fresh_server{ "--checkpoint-retention", "0.0001" } end)
  teardown(function()
    if srv then srv:close() end
    platform.rm_rf(dir)
  end)

  it("removes unused checkpoints, seeds and records; keeps those of live sandboxes", function()
    local used = create(srv, { id = "ret-used", environmentId = "env" })
    local unused = create(srv, { id = "ret-unused", environmentId = "env" })
    run(srv, used, "echo u > f.txt")
    run(srv, unused, "echo n > f.txt")
    local used_name = capture(srv, used, "ret-used")
    local unused_name = capture(srv, unused, "ret-unused")
    destroy(srv, unused)
    local unused_key = unused_name:sub(1, 38)
    local used_key = used_name:sub(1, 38)
    local before = files(srv)
    assert.is_true(has(before, unused_key .. ".tar") and has(before, unused_key .. ".json"))
    assert.is_true(has(files(srv, "/seeds"), unused_name .. ".tar"))
    -- 0.0001 days is 8.6 s; the sweep runs every quarter of it
    assert.is_true(platform.waitUntil(function()
      local now = files(srv)
      return not has(now, unused_key .. ".tar") and not has(now, unused_key .. ".json")
        and not has(files(srv, "/seeds"), unused_name .. ".tar")
    end, 30000, 500), "unused checkpoints are still there: " .. table.concat(files(srv), " "))
    local now = files(srv)
    assert.is_true(has(now, used_key .. ".tar"), "the live sandbox's checkpoint went")
    assert.is_false(has(files(srv, "/seeds"), unused_name .. ".json"))
    assert_starts_empty(srv, "ret-unused")
    destroy(srv, used)
    local back = create(srv, { id = "ret-used", environmentId = "env" })
    assert.are.equal("u\n", run(srv, back, "cat f.txt"))
    destroy(srv, back)
  end)

  it("refuses a retention that is not a number of days", function()
    for _, v in ipairs{ "x", "-1", "" } do
      local r = srv:sh(mastra.quote(platform.binary()) .. " serve --checkpoint-retention "
        .. mastra.quote(v) .. " --data-dir " .. mastra.quote(dir .. "/unused"))
      assert.are.equal(2, r.exitCode, v)
      assert.matches("%-%-checkpoint%-retention wants a number of days", r.stderr)
    end
  end)
end)

describe("checkpoints: a capture that fails", function()
  local dir, srv, mounted, why

  setup(function()
    dir = platform.tmpdir()
    local ck = dir .. "/data/checkpoints"
    os.execute("mkdir -p " .. mastra.quote(ck))
    local ok = os.execute("mount -t tmpfs -o size=1m tmpfs " .. mastra.quote(ck)
      .. " 2>/dev/null")
    if ok then
      mounted = ck
      srv = select(2, fresh_server(nil, dir))
    else
      why = "mounting a small tmpfs is not permitted here (needs root and mount rights)"
    end
  end)
  teardown(function()
    if srv then srv:close() end
    if mounted then os.execute("umount " .. mastra.quote(mounted)) end
    platform.rm_rf(dir)
  end)

  it("on a full disk, DELETE fails with a message and keeps the sandbox", function()
    if not srv then return pending(why) end
    local sb = create(srv, { id = "k-full", environmentId = "env" })
    run(srv, sb, "echo v1 > small.txt")
    local name = capture(srv, sb, "k-full")
    run(srv, sb, "head -c 3000000 /dev/urandom > big.bin")
    local d = srv:curl("DELETE", P .. "/sandbox/" .. sb.id)
    assert.are.equal(507, d.status, d.body)
    assert.are.equal("insufficient_storage", d.json.error.type)
    assert.matches("capturing the checkpoint of " .. sb.id .. " failed", d.json.error.message)
    assert.matches("the sandbox is kept", d.json.error.message)
    local g = srv:curl("GET", P .. "/sandbox/" .. sb.id)
    assert.are.equal(null, g.json.destroyedAt)
    assert.are.equal("3000000\n", run(srv, sb, "wc -c < big.bin"))
    assert.is_truthy(srv.stderrTail:find("capturing the checkpoint of " .. sb.id .. " failed", 1,
      true))
    -- no temporary is left behind; the older checkpoint is intact
    for _, f in ipairs(files(srv)) do assert.is_nil(f:match("^%.mastra%-tmp"), f) end
    -- (a create with the key would answer with the live sandbox: the
    -- archive itself is read)
    local key_tar = mastra.quote(srv.dataDir .. "/checkpoints/" .. name:sub(1, 38) .. ".tar")
    local t = srv:sh("m=$(tar -tf " .. key_tar .. " | grep 'small.txt$') && tar -xOf "
      .. key_tar .. ' "$m" && tar -tf ' .. key_tar)
    assert.are.equal(0, t.exitCode, t.stderr)
    assert.matches("^v1\n", t.stdout)
    assert.is_nil(t.stdout:find("big.bin", 1, true))
    -- an explicit capture fails too, and says so
    local c = srv:json("POST", P .. "/sandbox/" .. sb.id .. "/checkpoint", { id = "k-full" })
    assert.are.equal(507, c.status, c.body)
    assert.are.equal("insufficient_storage", c.json.error.type)
    -- once there is room, the DELETE succeeds and captures the tree as it is
    run(srv, sb, "rm big.bin && echo v2 > small.txt")
    destroy(srv, sb)
    local again = create(srv, { id = "k-full", environmentId = "env" })
    assert.are.equal(true, again.restoredFromCheckpoint)
    assert.are.equal("v2\n", run(srv, again, "cat small.txt"))
    destroy(srv, again)
  end)

  it("idle reaping that cannot capture keeps the sandbox", function()
    if not srv then return pending(why) end
    local sb = create(srv, { id = "k-full-reap", environmentId = "env",
      idleTimeoutMinutes = 0.05 })
    run(srv, sb, "head -c 3000000 /dev/urandom > big.bin")
    assert.is_true(platform.waitUntil(function()
      return srv.stderrTail:find("capturing the checkpoint of " .. sb.id .. " failed", 1,
        true) ~= nil
    end, 15000, 200), "no failed reaping in the log")
    local g = srv:curl("GET", P .. "/sandbox/" .. sb.id)
    assert.are.equal(null, g.json.destroyedAt)
    assert.are.equal("3000000\n", run(srv, sb, "wc -c < big.bin"))
    run(srv, sb, "rm big.bin")
    destroy(srv, sb)
  end)

  it("a DELETE of the checkpoint during a failing capture lets the destroys go on", function()
    if not srv then return pending(why) end
    -- the three requests wait in the stopped server's backlog, so that it
    -- takes them in one go: the first DELETE's capture (bound to fail on
    -- the full disk) is still running when the checkpoint's DELETE and a
    -- second DELETE of the sandbox come
    local sb = create(srv, { id = "k-race", environmentId = "env" })
    run(srv, sb, "head -c 3000000 /dev/urandom > big.bin")
    local url, auth = srv.url .. P .. "/sandbox/" .. sb.id, "Authorization: Bearer " .. srv.token
    local out = platform.tmpdir()
    local function req(extra, path, name)
      return ("curl -s -o /dev/null -w '%%{http_code}' -X DELETE -H %s %s %s > %s &")
        :format(mastra.quote(auth), extra, mastra.quote(path), mastra.quote(out .. "/" .. name))
    end
    local r = srv:sh(("kill -STOP %d; %s sleep 0.2; %s sleep 0.2; %s sleep 0.2; kill -CONT %d;"
      .. " wait; cd %s && cat first ckpt second"):format(srv.pid, req("", url, "first"),
      req("-H 'Content-Type: application/json' -d '{\"id\":\"k-race\"}'", url .. "/checkpoint",
        "ckpt"), req("", url, "second"), srv.pid, mastra.quote(out)))
    platform.rm_rf(out)
    -- the capture failed, but the checkpoint is deleted: both DELETEs 204
    local first, ckpt, second = r.stdout:match("^(%d%d%d)(%d%d%d)(%d%d%d)$")
    assert.are.same({ "204", "204" }, { first, second }, r.stdout .. "\n" .. srv.stderrTail)
    assert.truthy(ckpt == "204" or ckpt == "404", r.stdout)
    assert.are_not.equal(null, srv:curl("GET", P .. "/sandbox/" .. sb.id).json.destroyedAt)
    -- and no checkpoint came of it
    local again = create(srv, { id = "k-race", environmentId = "env" })
    assert.are.equal(false, again.restoredFromCheckpoint)
    destroy(srv, again)
  end)
end)

describe("checkpoints through PlatformSandbox", function()
  local dir, srv

  setup(function() dir, srv = fresh_server() end)
  teardown(function()
    if srv then srv:close() end
    platform.rm_rf(dir)
  end)

  local function new(extra)
    local o = { accessToken = srv.token, proxyUrl = srv.url, projectId = "proj-ck",
      environmentId = "env" }
    for k, v in pairs(extra or {}) do o[k] = v end
    return mastra.PlatformSandbox.new(o)
  end

  it("start() of a restored sandbox says so, and getInfo tells from what", function()
    local sb = new{ id = "lua-restored" }
    assert.are.same({ outcome = "created" }, sb:start())
    local info = sb:getInfo()
    assert.are.equal(false, info.metadata.restoredFromCheckpoint)
    assert.is_nil(info.metadata.restoredCheckpointName)
    sb:executeCommand("echo kept > state.txt")
    sb:destroy()
    local res = sb:start()
    assert.are.equal("created", res.outcome)
    assert.are.equal(true, res.restored)
    assert.matches("^mastra%-checkpoint%-%x+$", res.checkpointName)
    info = sb:getInfo()
    assert.are.equal(true, info.metadata.restoredFromCheckpoint)
    assert.are.equal(res.checkpointName, info.metadata.restoredCheckpointName)
    assert.are.equal("kept\n", sb:executeCommand("cat state.txt").stdout)
    sb:destroy{ keepCheckpoint = false }
  end)

  it("destroy{keepCheckpoint = false} then start with the same id starts empty", function()
    local sb = new{ id = "lua-drop" }
    sb:start()
    sb:executeCommand("echo x > f.txt")
    local first = sb.sandboxId
    sb:destroy{ keepCheckpoint = false }
    assert.are.equal("destroyed", sb.status)
    local g = srv:curl("GET", P .. "/sandbox/" .. first)
    assert.is_string(g.json.destroyedAt)
    assert.are.same({ outcome = "created" }, sb:start())
    assert.are.equal("0\n", sb:executeCommand("ls -A | wc -l").stdout)
    sb:destroy{ keepCheckpoint = false }
    -- a fresh object with the same id: empty as well
    local other = new{ id = "lua-drop" }
    assert.are.same({ outcome = "created" }, other:start())
    other:destroy()
  end)

  it("destroy() keeps the checkpoint; destroy{keepCheckpoint = true} too", function()
    local sb = new{ id = "lua-keep" }
    sb:start()
    sb:executeCommand("echo y > f.txt")
    sb:destroy{ keepCheckpoint = true }
    assert.is_true(sb:start().restored)
    assert.are.equal("y\n", sb:executeCommand("cat f.txt").stdout)
    sb:destroy{ keepCheckpoint = false }
  end)

  it("destroy validates its options", function()
    local sb = new()
    assert.has_error(function() sb:destroy{ keepCheckpiont = false } end,
      "PlatformSandbox:destroy: unknown option 'keepCheckpiont' (known options: keepCheckpoint)")
    assert.has_error(function() sb:destroy{ keepCheckpoint = "no" } end)
    assert.has_error(function() sb:destroy(false) end)
    sb:destroy()
  end)
end)

describe("checkpoints on the wire (the scripted fault server)", function()
  local fault = require "spec.support.fault"
  local WP = "/v1/railway/projects/p"
  local srv

  local function created(extra)
    local j = { id = "sbx_1", status = "ready", createdAt = "2026-01-01T00:00:00.000Z" }
    for k, v in pairs(extra or {}) do j[k] = v end
    return { status = 201, json = j }
  end

  local function sandbox(extra)
    local o = { accessToken = "tok", proxyUrl = srv.url, projectId = "p",
      environmentId = "env1", id = "mc-session-42" }
    for k, v in pairs(extra or {}) do o[k] = v end
    return mastra.PlatformSandbox.new(o)
  end

  after_each(function()
    if srv then srv:stop() end
    srv = nil
  end)

  it("destroy{keepCheckpoint = false}: DELETE checkpoint with the key, then DELETE sandbox",
    function()
      srv = fault.start{ routes = {
        { method = "POST", path = WP .. "/sandbox", responses = { created() } },
        { method = "DELETE", path = WP .. "/sandbox/sbx_1/checkpoint",
          responses = { { status = 204 } } },
        { method = "DELETE", path = WP .. "/sandbox/sbx_1", responses = { { status = 204 } } },
      } }
      local sb = sandbox()
      sb:start()
      sb:destroy{ keepCheckpoint = false }
      local reqs = srv:requests()
      assert.are.equal(3, #reqs)
      assert.are.same({ "DELETE", WP .. "/sandbox/sbx_1/checkpoint" },
        { reqs[2].method, reqs[2].path })
      assert.are.equal('{"id":"mc-session-42"}', reqs[2].body)
      assert.are.equal("application/json", reqs[2].header["content-type"])
      assert.are.same({ "DELETE", WP .. "/sandbox/sbx_1" }, { reqs[3].method, reqs[3].path })
      assert.are.equal("destroyed", sb.status)
    end)

  it("a 404 on the checkpoint delete is no error; a 500 is raised after the sandbox DELETE",
    function()
      srv = fault.start{ routes = {
        { method = "POST", path = WP .. "/sandbox", responses = { created(), created() } },
        { method = "DELETE", path = WP .. "/sandbox/sbx_1/checkpoint", responses = {
          { status = 404, json = { error = { message = "none", type = "not_found" } } },
          { status = 500, json = { error = { message = "disk", type = "internal_error" } } } } },
        { method = "DELETE", path = WP .. "/sandbox/sbx_1",
          responses = { { status = 204 }, { status = 204 } } },
      } }
      local sb = sandbox()
      sb:start()
      sb:destroy{ keepCheckpoint = false }
      assert.are.equal("destroyed", sb.status)
      sb:start()
      local ok, err = pcall(sb.destroy, sb, { keepCheckpoint = false })
      assert.is_false(ok)
      assert.is_true(mastra.errors.PlatformApiError:is(err))
      assert.are.equal(500, err.status)
      assert.are.equal("destroyed", sb.status)
      local reqs = srv:requests()
      assert.are.equal(6, #reqs)
      assert.are.equal(WP .. "/sandbox/sbx_1", reqs[6].path)
    end)

  it("start() maps restoredFromCheckpoint; getInfo maps the name", function()
    local rec = { id = "sbx_1", status = "ready", createdAt = "2026-01-01T00:00:00.000Z",
      restoredFromCheckpoint = true, restoredCheckpointName = "mastra-checkpoint-abc" }
    srv = fault.start{ routes = {
      { method = "POST", path = WP .. "/sandbox", responses = { { status = 201, json = rec } } },
      { method = "GET", path = WP .. "/sandbox/sbx_1",
        responses = { { status = 200, json = rec } } },
    } }
    local sb = sandbox()
    assert.are.same({ outcome = "created", restored = true,
      checkpointName = "mastra-checkpoint-abc" }, sb:start())
    local info = sb:getInfo()
    assert.are.equal(true, info.metadata.restoredFromCheckpoint)
    assert.are.equal("mastra-checkpoint-abc", info.metadata.restoredCheckpointName)
  end)
end)
