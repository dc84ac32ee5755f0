-- Upstream's newer client rules on our PlatformSandbox (issue 28 item 5,
-- upstream-2026-12.md A.1; docs/api.md "PlatformSandbox"): a 410 on the
-- reattach GET provisions as a 404 does; getInfo() answers locally until
-- the sandbox runs; sandboxId is set only while it runs; the
-- sandbox_destroyed error type is understood. And item 4's client side:
-- an explicit id says so at create (x-mastra-recovery-key: explicit), a
-- generated one does not. First through a fetch function that counts
-- every request, then against the real local platform (MASTRA_PLATFORM,
-- MASTRA_WS_EXEC).
local mastra = require "mastra"
local platform = require "spec.support.platform"

local errors = mastra.errors
local P = "https://proxy.test/v1/railway/projects/p"

local function destroyed_body(kind)
  return '{"error":{"message":"sandbox sbx_old was destroyed","type":"' .. (kind or
    "sandbox_destroyed") .. '"}}'
end

-- A sandbox on a fake platform: answers[method .. " " .. path] is a
-- response {status, body} or a function(req) returning one; log gets
-- every request.
local function fake(log, answers, extra)
  local o = { accessToken = "t", proxyUrl = "https://proxy.test", projectId = "p",
    environmentId = "e", createRetryDelayMs = 1 }
  for k, v in pairs(extra or {}) do o[k] = v end
  o.fetch = function(req)
    log[#log + 1] = req
    local path = req.url:sub(#P + 1)
    local a = answers[req.method .. " " .. path]
    if type(a) == "function" then a = a(req) end
    if a == nil then
      return { status = 404, body = '{"error":{"message":"no","type":"not_found"}}' }
    end
    return a
  end
  return mastra.PlatformSandbox.new(o)
end

local function created(id) return { status = 201, body = '{"id":"' .. id .. '"}' } end
local NO_CONTENT = { status = 204, body = "" }

local function calls(log)
  local out = {}
  for i, r in ipairs(log) do out[i] = r.method .. " " .. r.url:sub(#P + 1) end
  return out
end

describe("PlatformSandbox: a 410 on the reattach GET", function()
  for _, case in ipairs{
    { what = "410 sandbox_destroyed", status = 410, body = destroyed_body() },
    { what = "410 gone (an older platform)", status = 410, body = destroyed_body("gone") },
    { what = "404", status = 404, body = '{"error":{"message":"no","type":"not_found"}}' },
  } do
    it(case.what .. " provisions a new sandbox", function()
      local log = {}
      local sb = fake(log, {
        ["GET /sandbox/sbx_old"] = { status = case.status, body = case.body },
        ["POST /sandbox"] = created("sbx_new"),
        ["DELETE /sandbox/sbx_new"] = NO_CONTENT,
      }, { sandboxId = "sbx_old" })
      assert.are.same({ outcome = "created" }, sb:start())
      assert.are.same({ "GET /sandbox/sbx_old", "POST /sandbox" }, calls(log))
      assert.are.equal("sbx_new", sb.sandboxId)
      assert.are.equal("running", sb.status)
      sb:destroy()
    end)
  end

  it("another error is raised, and nothing is provisioned", function()
    local log = {}
    local sb = fake(log, {
      ["GET /sandbox/sbx_old"] = { status = 500,
        body = '{"error":{"message":"boom","type":"internal_error"}}' },
    }, { sandboxId = "sbx_old" })
    local ok, err = pcall(sb.start, sb)
    assert.is_false(ok)
    assert.is_true(errors.PlatformApiError:is(err))
    assert.are.equal(500, err.status)
    assert.are.same({ "GET /sandbox/sbx_old" }, calls(log))
  end)
end)

describe("PlatformSandbox:getInfo() until the sandbox runs", function()
  it("makes no request before start, with or without a sandboxId hint", function()
    for _, extra in ipairs{ {}, { sandboxId = "sbx_hint" }, { id = "mine" } } do
      local log = {}
      local sb = fake(log, {}, extra)
      local info = sb:getInfo()
      assert.are.equal(0, #log)
      assert.are.equal(sb.id, info.id)
      assert.are.equal("pending", info.status)
      assert.are.equal("PlatformSandbox", info.name)
      assert.are.equal("platform", info.provider)
      assert.is_nil(info.metadata)
    end
  end)

  it("asks the platform while it runs, and answers locally after destroy and detach", function()
    local log = {}
    local sb = fake(log, {
      ["POST /sandbox"] = created("sbx_1"),
      ["GET /sandbox/sbx_1"] = { status = 200, body = '{"id":"sbx_1","status":"ready"}' },
      ["DELETE /sandbox/sbx_1"] = NO_CONTENT,
    })
    sb:start()
    assert.are.equal("sbx_1", sb:getInfo().metadata.sandboxId)
    assert.are.equal(2, #log)
    sb:destroy()
    local n = #log
    assert.are.equal("destroyed", sb:getInfo().status)
    assert.are.equal(n, #log)
    sb:start()
    sb:detach()
    n = #log
    assert.are.equal("detached", sb:getInfo().status)
    assert.are.equal(n, #log)
  end)

  it("a 410 sandbox_destroyed while it runs raises SandboxDestroyedError; start provisions",
    function()
      local log = {}
      local sb = fake(log, {
        ["POST /sandbox"] = function()
          return created(#log == 1 and "sbx_1" or "sbx_2")
        end,
        ["GET /sandbox/sbx_1"] = { status = 410, body = destroyed_body() },
        ["DELETE /sandbox/sbx_2"] = NO_CONTENT,
      })
      sb:start()
      local ok, err = pcall(sb.getInfo, sb)
      assert.is_false(ok)
      assert.is_true(errors.SandboxDestroyedError:is(err), tostring(err))
      assert.are.equal("sbx_1", err.sandboxId)
      assert.are.equal(410, err.status)
      assert.are.equal("sandbox_destroyed", err.code)
      assert.are.equal("stopped", sb.status)
      assert.is_nil(sb.sandboxId)
      assert.are.equal("created", sb:start().outcome)
      assert.are.equal("sbx_2", sb.sandboxId)
      sb:destroy()
    end)
end)

describe("PlatformSandbox.sandboxId", function()
  it("is set only while the sandbox runs", function()
    local log = {}
    local sb = fake(log, {
      ["GET /sandbox/sbx_hint"] = { status = 200, body = '{"id":"sbx_hint"}' },
      ["DELETE /sandbox/sbx_hint"] = NO_CONTENT,
      ["POST /sandbox"] = created("sbx_2"),
    }, { sandboxId = "sbx_hint" })
    assert.is_nil(sb.sandboxId) -- a hint, not confirmed yet
    assert.matches("sbx_hint", tostring(sb)) -- but the object holds it
    assert.are.equal("connected", sb:start().outcome)
    assert.are.equal("sbx_hint", sb.sandboxId)
    sb:destroy()
    assert.is_nil(sb.sandboxId)
    sb:start()
    assert.are.equal("sbx_2", sb.sandboxId)
    assert.are.equal("sbx_2", sb:detach())
    assert.is_nil(sb.sandboxId)
  end)

  it("is nil while a destroy fails, and the next destroy sends the DELETE again", function()
    local log, deletes = {}, 0
    local sb = fake(log, {
      ["POST /sandbox"] = created("sbx_1"),
      ["DELETE /sandbox/sbx_1"] = function()
        deletes = deletes + 1
        if deletes == 1 then
          return { status = 500, body = '{"error":{"message":"later","type":"internal_error"}}' }
        end
        return NO_CONTENT
      end,
    })
    sb:start()
    assert.is_false(pcall(sb.destroy, sb))
    assert.are.equal("error", sb.status)
    assert.is_nil(sb.sandboxId)
    sb:destroy()
    assert.are.equal(2, deletes)
    assert.are.equal("destroyed", sb.status)
  end)

  it("a fleet member whose destroy failed is destroyed again at the end of its scope", function()
    local deletes = 0
    local template = fake({}, {
      ["POST /sandbox"] = created("sbx_f"),
      ["DELETE /sandbox/sbx_f"] = function()
        deletes = deletes + 1
        if deletes == 1 then
          return { status = 500, body = '{"error":{"message":"later","type":"internal_error"}}' }
        end
        return NO_CONTENT
      end,
    })
    local summary = mastra.fleet.run(template, { "m1" }, function(sb)
      sb:start()
      pcall(sb.destroy, sb) -- fails: status "error", the sandbox may be there
      return sb.status
    end)
    assert.are.equal("error", summary.members[1].result)
    assert.are.equal(2, deletes)
  end)
end)

describe("PlatformSandbox: the sandbox_destroyed error type", function()
  it("on the exec lease, whatever the status: SandboxDestroyedError", function()
    for _, status in ipairs{ 410, 404 } do
      local log = {}
      local sb = fake(log, {
        ["POST /sandbox"] = created("sbx_1"),
        ["POST /sandbox/sbx_1/exec-lease"] = { status = status, body = destroyed_body() },
      })
      local ok, err = pcall(sb.executeCommand, sb, "true")
      assert.is_false(ok)
      assert.is_true(errors.SandboxDestroyedError:is(err), tostring(err))
      assert.are.equal(status, err.status)
      assert.are.equal("sandbox_destroyed", err.code)
      assert.are.equal("stopped", sb.status)
      assert.is_nil(sb.sandboxId)
    end
  end)

  it("on the sandbox DELETE: already gone, the destroy succeeds", function()
    local log = {}
    local sb = fake(log, {
      ["POST /sandbox"] = created("sbx_1"),
      ["DELETE /sandbox/sbx_1"] = { status = 410, body = destroyed_body() },
    })
    sb:start()
    sb:destroy()
    assert.are.equal("destroyed", sb.status)
  end)
end)

describe("PlatformSandbox: an explicit id says so at create", function()
  local function create_header(extra, clone)
    local log = {}
    local sb = fake(log, { ["POST /sandbox"] = created("sbx_1") }, extra)
    if clone then sb = sb:clone(clone) end
    sb:start()
    return log[#log].headers["x-mastra-recovery-key"], log[#log].body
  end

  it("new{id}, clone{id} and clone{checkpointName} send the header; a generated id not", function()
    assert.are.equal("explicit", (create_header{ id = "project-a" }))
    assert.are.equal("explicit", (create_header({}, { id = "c-1" })))
    assert.are.equal("explicit", (create_header({}, { checkpointName = "c-2" })))
    assert.is_nil((create_header{}))
    assert.is_nil((create_header({ id = "parent" }, {}))) -- a clone's id is its own
    -- the body stays upstream's
    local _, body = create_header{ id = "project-a" }
    assert.are.equal('{"id":"project-a","environmentId":"e","env":{}}', body)
  end)
end)

describe("PlatformSandbox on the local platform: retention and sandbox_destroyed", function()
  local dir, srv

  setup(function()
    dir = platform.tmpdir()
    srv = platform.start{ dataDir = dir .. "/data", tokenFile = dir .. "/token" }
  end)
  teardown(function()
    if srv then srv:close() end
    platform.rm_rf(dir)
  end)

  local function checkpoints()
    local r = srv:curl("GET", srv.info.inspector .. "api/checkpoints?project=proj&environment=env")
    assert.are.equal(200, r.status, r.body)
    local out = {}
    for _, c in ipairs(r.json.checkpoints) do
      if not c.named then out[c.key] = c end
    end
    return out
  end

  it("an explicit id's checkpoint is asked for; a generated id's is not", function()
    local mine = srv:startSandbox{ id = "rules-explicit" }
    mine:executeCommand("echo a > f.txt")
    mine:destroy()
    local auto = srv:startSandbox()
    auto:executeCommand("echo b > f.txt")
    local auto_id = auto.id
    auto:destroy()
    local c = checkpoints()
    assert.is_true(c["rules-explicit"].asked)
    assert.are.equal(7, c["rules-explicit"].retentionDays)
    assert.is_false(c[auto_id].asked)
    assert.are.equal(1, c[auto_id].retentionDays)
    -- a later create with the explicit id restores it
    local back = srv:startSandbox{ id = "rules-explicit" }
    assert.are.equal("a\n", back:executeCommand("cat f.txt").stdout)
    back:destroy()
    assert.are.equal(1, checkpoints()["rules-explicit"].restores)
  end)

  it("a sandbox destroyed behind its back: SandboxDestroyedError (sandbox_destroyed)", function()
    local sb = srv:startSandbox()
    local id = sb.sandboxId
    local r = srv:curl("DELETE", "/v1/railway/projects/proj/sandbox/" .. id)
    assert.are.equal(204, r.status)
    local ok, err = pcall(sb.executeCommand, sb, "true")
    assert.is_false(ok)
    assert.is_true(errors.SandboxDestroyedError:is(err), tostring(err))
    assert.are.equal("sandbox_destroyed", err.code)
    assert.is_nil(sb.sandboxId)
    assert.are.equal("stopped", sb.status)
    -- reattaching by its id provisions a new one (GET says destroyedAt)
    local again = mastra.PlatformSandbox.new(srv:sandboxOptions{ sandboxId = id })
    assert.is_nil(again.sandboxId)
    assert.are.equal("created", again:start().outcome)
    assert.are_not.equal(id, again.sandboxId)
    again:destroy()
    sb:destroy()
  end)
end)
