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
    assert.are.equal("sbx_w", sb.sandboxId) -- the queued DELETE is not answered yet
    -- a bound shorter than the DELETE: false, and the destroy goes on
    local t0 = mastra.now()
    assert.is_false(sb:waitTeardown(20))
    assert.is_true(mastra.now() - t0 >= 20)
    assert.are.equal("sbx_w", sb.sandboxId)
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
