-- mastra.fleet against the real local platform: results and errors per
-- member, created vs restored, failFast, cancellation, SIGINT/SIGTERM to a
-- runner in the middle of a fleet, the progress line on a terminal only,
-- and the mistakes. After each case the platform's own records (every
-- sandbox it ever made, state/sandboxes/*.json) must show no live sandbox.
local mastra = require "mastra"
local core = require "mastra.core"
local platform = require "spec.support.platform"
local child = require "spec.support.child"

local quote = mastra.quote

describe("mastra.fleet", function()
  local ctx, srv, sb

  setup(function()
    ctx = child.context{ platform = true }
    srv, sb = ctx.srv, ctx.sb
  end)

  teardown(function()
    if ctx then ctx:close() end
  end)

  -- The ids of the sandboxes the platform holds that are not destroyed.
  local function live()
    local dir = srv.dataDir .. "/state/sandboxes"
    local out = {}
    for _, name in ipairs(core.fsReaddir(dir) or {}) do
      if name:match("%.json$") then
        local rec = platform.decode(platform.readFile(dir .. "/" .. name) or "null")
        if type(rec) == "table" and (rec.destroyedMs or 0) == 0 then out[#out + 1] = rec.id end
      end
    end
    table.sort(out)
    return out
  end

  local function template(extra)
    return mastra.PlatformSandbox.new(srv:sandboxOptions(extra))
  end

  local function ids(prefix, n)
    local out = {}
    for i = 1, n do out[i] = prefix .. i end
    return out
  end

  it("runs 50 members, 5 of them failing: 45 results, 5 errors, nothing left", function()
    local members = ids("m", 50)
    members[7] = { id = "m7", extra = "a table member" }
    local seen = {}
    local s = mastra.fleet(template(), members, function(box, member)
      local id = type(member) == "table" and member.id or member
      seen[id] = box.id
      if id:match("^m%d*0$") then error("member " .. id .. " fails on purpose") end
      return box:executeCommand("echo", { id }).stdout:gsub("\n$", "")
    end, { quiet = true })
    assert.are.equal(50, s.total)
    assert.are.equal(45, #s.results)
    assert.are.equal(5, #s.errors)
    assert.are.equal(45, s.succeeded)
    assert.are.equal(5, s.failed)
    for _, r in ipairs(s.results) do assert.are.equal(r.id, r.result) end
    for _, e in ipairs(s.errors) do
      assert.matches("member " .. e.id .. " fails on purpose", tostring(e.error), 1, true)
    end
    -- each member's sandbox is a clone with its stable id
    for i = 1, 50 do assert.are.equal("m" .. i, seen["m" .. i]) end
    assert.are.equal(50, s.created)
    assert.are.same({}, live())
    -- the serialisable form
    local t = core.jsonDecode(s:toJSON())
    assert.are.equal(45, t.succeeded)
    assert.are.equal("error", t.members[10].status)
    assert.matches("fails on purpose", t.members[10].error, 1, true)
    assert.are.equal("m1", t.members[1].result)
  end)

  it("says which members were restored from their checkpoint", function()
    local tmpl = template()
    local function build(box)
      local r = box:executeCommand("sh", { "-c", "test -f out.txt && echo again"
        .. " || { echo built > out.txt; echo first; }" })
      return (r.stdout:gsub("\n$", ""))
    end
    local first = mastra.fleet(tmpl, { "ra", "rb" }, build, { quiet = true })
    assert.are.same({ "created", "created" },
      { first.members[1].outcome, first.members[2].outcome })
    assert.are.same({ "first", "first" }, { first.members[1].result, first.members[2].result })
    local again = mastra.fleet(tmpl, { "ra", "rb" }, build, { quiet = true })
    assert.are.same({ "restored", "restored" },
      { again.members[1].outcome, again.members[2].outcome })
    assert.are.same({ "again", "again" }, { again.members[1].result, again.members[2].result })
    assert.are.equal(2, again.restored)
    local out = {}
    again:print({ write = function(_, s) out[#out + 1] = s end })
    local text = table.concat(out)
    assert.matches("ra%s+ok%s+restored", text)
    assert.matches("fleet: 2 members, 2 ok, 0 failed in .- %(0 created, 2 restored%)", text)
    assert.are.same({}, live())
  end)

  it("with failFast, cancels the members in flight and starts no more", function()
    local started = 0
    local s = mastra.fleet(template(), ids("f", 20), function(box, id)
      started = started + 1
      if id == "f3" then
        mastra.sleep(100)
        error("f3 breaks")
      end
      box:executeCommand("sleep", { "30" })
    end, { concurrency = 4, failFast = true, quiet = true })
    assert.are.equal(1, s.failed)
    assert.are.equal(3, s.cancelled)
    assert.are.equal(16, s.skipped)
    assert.are.equal(4, started)
    assert.are.same({}, live())
  end)

  it("leaves nothing when the task running it is cancelled", function()
    local running = 0
    local t = mastra.spawn(function()
      return mastra.fleet(template(), ids("c", 6), function(box)
        running = running + 1
        box:executeCommand("sleep", { "30" })
      end, { concurrency = 3, quiet = true })
    end)
    assert.is_true(platform.waitUntil(function() return running == 3 end, 15000))
    t:cancel()
    assert.is_true(platform.waitUntil(function() return t.state == "done" end, 15000))
    assert.is_true(platform.waitUntil(function() return #live() == 0 end, 15000),
      "live after the cancel: " .. table.concat(live(), ", "))
  end)

  for _, c in ipairs{ { "INT", 130 }, { "TERM", 143 } } do
    it(("SIG%s to mastra-lua mid-fleet leaves zero live sandboxes and exits %d")
      :format(c[1], c[2]), function()
      local dir = ctx.dir .. "/sig" .. c[1]
      assert(os.execute("mkdir -p " .. quote(dir)))
      platform.writeFile(dir .. "/script.lua", [[
local mastra = require "mastra"
local members = {}
for i = 1, 12 do members[i] = "s" .. i end
local running = 0
mastra.fleet(mastra.PlatformSandbox.new{}, members, function(box)
  running = running + 1
  if running == 4 then assert(io.open("ready", "w")):close() end
  box:executeCommand("sleep", { "30" })
end, { concurrency = 4 })
]])
      local h = sb.processes:spawn(("cd %s && exec %s script.lua"):format(quote(dir),
        quote(child.binary("mastra-lua"))), { env = ctx:env(), timeout = 60000 })
      finally(function()
        if h.exitCode == nil then
          sb:executeCommand("kill -KILL " .. h.pid)
          h:wait()
        end
      end)
      assert.is_true(platform.waitUntil(function()
        return platform.readFile(dir .. "/ready") ~= nil or h.exitCode ~= nil
      end, 15000), "the fleet did not start")
      assert.are.equal(4, #live())
      assert.are.equal(0, sb:executeCommand("kill -" .. c[1] .. " " .. h.pid).exitCode)
      local r = h:wait()
      assert.are.equal(c[2], r.exitCode, r.stderr)
      assert.are.same({}, live())
    end)
  end

  it("draws a progress line on a terminal, and nothing elsewhere", function()
    local dir = ctx.dir .. "/tty"
    assert(os.execute("mkdir -p " .. quote(dir)))
    platform.writeFile(dir .. "/script.lua", [[
local mastra = require "mastra"
local s = mastra.fleet(mastra.PlatformSandbox.new{}, { "p1", "p2", "p3" }, function(box, id)
  if id == "p2" then error("p2 fails") end
  mastra.sleep(1200)
end, { concurrency = 1, label = "demo" })
io.stdout:write("done ", s.succeeded, " ", s.failed, "\n")
]])
    local cmd = ("cd %s && %s script.lua"):format(quote(dir), quote(child.binary("mastra-lua")))
    -- under script(1), stderr is a pseudo-terminal
    local tty = sb:executeCommand("script", { "-qec", cmd, "/dev/null" },
      { env = ctx:env(), timeout = 60000 })
    assert.are.equal(0, tty.exitCode, tty.stderr)
    assert.matches("demo [=", tty.stdout, 1, true)
    assert.matches("3/3, 1 failed", tty.stdout, 1, true)
    assert.matches("/3, %d failed, %d running, [%d.]+s, ETA", tty.stdout)
    assert.matches("done 2 1", tty.stdout, 1, true)
    -- a pipe: no progress at all
    local piped = sb:executeCommand(cmd, nil, { env = ctx:env(), timeout = 60000 })
    assert.are.equal(0, piped.exitCode, piped.stderr)
    assert.are.equal("", piped.stderr)
    assert.are.equal("done 2 1\n", piped.stdout)
    assert.are.same({}, live())
  end)

  it("says what is wrong with its arguments", function()
    local tmpl = template()
    local function fn() end
    assert.has_error(function() mastra.fleet(tmpl, { "a", "a" }, fn) end,
      'mastra.fleet: member id "a" appears twice (ids are recovery keys: each must be unique)')
    assert.has_error(function() mastra.fleet(tmpl, { "a", 5 }, fn) end,
      "mastra.fleet: member 2 must be an id (a string) or a table with a string id"
        .. " (got number 5)")
    assert.has_error(function() mastra.fleet({}, { "a" }, fn) end,
      "mastra.fleet: argument #1 (template) must be a sandbox with a clone method, such as a"
        .. " PlatformSandbox (got table)")
    assert.has_error(function() mastra.fleet(tmpl, { "a" }, fn, { concurency = 2 }) end,
      "mastra.fleet: unknown option 'concurency' (known options: concurrency, failFast,"
        .. " label, progressStream, quiet)")
    assert.has_error(function() mastra.fleet(tmpl, { "a" }, "fn") end,
      'mastra.fleet: argument #3 (fn) must be a function (got string "fn")')
    local empty = mastra.fleet(tmpl, {}, fn)
    assert.are.equal(0, empty.total)
    assert.are.same({}, live())
  end)
end)
