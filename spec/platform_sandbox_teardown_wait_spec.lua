-- The public state of a PlatformSandbox's start and queued destroy that
-- mastra.fleet is built on (docs/api.md "sb:isStarting(),
-- sb:waitTeardown(timeoutMs)"): no private field, no polling. The platform
-- here is a fetch function whose answers take as long as the case needs.
local mastra = require "mastra"

local root = os.getenv("MASTRA_SOURCE_DIR") or "."

-- A sandbox on a fake platform: POST /sandbox and DELETE /sandbox/:id
-- each take delays.create / delays.delete ms; log gets "POST" / "DELETE".
local function sandbox(log, delays)
  return mastra.PlatformSandbox.new{
    accessToken = "t", proxyUrl = "https://proxy.test", projectId = "p",
    environmentId = "e",
    fetch = function(req)
      log[#log + 1] = req.method
      if req.method == "POST" then
        mastra.sleep(delays.create or 0)
        return { status = 201, body = '{"id":"sbx_w"}' }
      end
      mastra.sleep(delays.delete or 0)
      return { status = 204, body = "" }
    end,
  }
end

describe("PlatformSandbox:isStarting", function()
  it("is true while a start is under way, and only then", function()
    local log = {}
    local sb = sandbox(log, { create = 50 })
    assert.is_false(sb:isStarting())
    local t = mastra.spawn(function() return sb:start() end)
    mastra.step(0)
    assert.is_true(sb:isStarting())
    assert.is_nil(sb.sandboxId) -- the sandbox may exist: sandboxId does not say so yet
    t:wait()
    assert.is_false(sb:isStarting())
    assert.are.equal("sbx_w", sb.sandboxId)
    sb:destroy()
  end)
end)

describe("PlatformSandbox:waitTeardown", function()
  it("returns true at once when no destroy was queued", function()
    local sb = sandbox({}, {})
    assert.is_true(sb:waitTeardown())
    assert.is_true(sb:waitTeardown(0))
  end)

  it("waits for the destroy that a cancelled task's <close> queued", function()
    local log = {}
    local sb = sandbox(log, { delete = 150 })
    local t = mastra.spawn(function()
      local s <close> = sb
      s:start()
      mastra.sleep(10000)
    end)
    while sb.sandboxId == nil do mastra.step(10) end
    t:cancel()
    assert.has_error(function() t:wait() end)
    -- the queued DELETE is not answered yet
    assert.are_not.equal("destroyed", sb.status)
    -- a bound shorter than the DELETE: false, and the destroy goes on
    local t0 = mastra.now()
    assert.is_false(sb:waitTeardown(20))
    assert.is_true(mastra.now() - t0 >= 20)
    assert.are.equal("destroying", sb.status)
    assert.is_nil(sb.sandboxId) -- set only while it runs
    assert.is_true(sb:waitTeardown(10000))
    assert.is_nil(sb.sandboxId)
    assert.are.equal("destroyed", sb.status)
    assert.are.same({ "POST", "DELETE" }, log)
    assert.is_true(sb:waitTeardown(0)) -- nothing queued any more
  end)

  it("waits inside a task too, and checks its argument", function()
    local log = {}
    local sb = sandbox(log, { delete = 30 })
    mastra.run(function()
      local t = mastra.spawn(function()
        local s <close> = sb
        s:start()
        error("the work fails", 0)
      end)
      pcall(t.wait, t)
      assert.is_true(sb:waitTeardown())
      assert.is_nil(sb.sandboxId)
    end)
    assert.has_error(function() sb:waitTeardown(-1) end,
      "PlatformSandbox:waitTeardown: argument #1 (timeoutMs) must be a finite number of"
        .. " milliseconds >= 0 (got number -1)")
    assert.has_error(function() sb.waitTeardown({}) end,
      "PlatformSandbox:waitTeardown: expected a mastra.PlatformSandbox as self (call it with"
        .. " ':')")
  end)
end)

describe("mastra.fleet", function()
  -- a fake platform that hands out sbx_1, sbx_2, ... and records what is
  -- still live
  local function platform()
    local live, n = {}, 0
    local template = mastra.PlatformSandbox.new{
      accessToken = "t", proxyUrl = "https://proxy.test", projectId = "p",
      environmentId = "e",
      fetch = function(req)
        mastra.sleep(1)
        if req.method == "POST" then
          n = n + 1
          live["sbx_" .. n] = true
          return { status = 201, body = ('{"id":"sbx_%d"}'):format(n) }
        end
        live[req.url:match("/sandbox/([^/]+)$")] = nil
        return { status = 204, body = "" }
      end,
    }
    return template, live
  end

  it("a member whose fn raises a cancellation ends so; the others go on", function()
    local template, live = platform()
    local s = mastra.fleet(template, { "a", "b", "c" }, function(_, id)
      if id == "b" then
        local t = mastra.spawn(function() mastra.sleep(10000) end)
        t:cancel()
        t:wait() -- raises the CancelledError of t, in this member
      end
      return id
    end, { concurrency = 1, quiet = true })
    assert.are.same({ "ok", "cancelled", "ok" },
      { s.members[1].status, s.members[2].status, s.members[3].status })
    assert.are.equal(2, s.succeeded)
    assert.are.same({}, live) -- b's destroy went through the queue, and was waited for
  end)

  it("failFast cancels the members in flight and destroys their sandboxes", function()
    local template, live = platform()
    local ids = {}
    for i = 1, 8 do ids[i] = "m" .. i end
    local s = mastra.fleet(template, ids, function(_, id)
      if id == "m2" then
        mastra.sleep(20)
        error("m2 breaks", 0)
      end
      mastra.sleep(10000)
    end, { concurrency = 3, failFast = true, quiet = true })
    assert.are.equal(1, s.failed)
    assert.are.equal(2, s.cancelled)
    assert.are.equal(5, s.skipped)
    assert.are.same({}, live)
  end)

  it("reads no private field of another module (lua/mastra/fleet.lua)", function()
    local f = assert(io.open(root .. "/lua/mastra/fleet.lua", "rb"))
    local src = f:read("a")
    f:close()
    local code = src:gsub("%-%-[^\n]*", "") -- comments may name anything
    local private = {}
    for name in code:gmatch("[%w_%)%]]%s*[%.:]%s*(_[%w_]*)") do
      -- metamethods of its own classes (Summary.__index) are not fields
      if not name:find("^__") then private[#private + 1] = name end
    end
    for name in code:gmatch("%[%s*[\"'](_[%w_]*)[\"']%s*%]") do private[#private + 1] = name end
    assert.are.same({}, private)
    -- and waits for a queued destroy without a sleep loop
    assert.is_nil(code:find("sleep%s*%(%s*QUEUED"))
  end)
end)
