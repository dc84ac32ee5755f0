-- The platform from the shell (issue 29, point 5; man/mastra-platform.1):
-- `mastra-platform ps`, `destroy ID...` and `logs` against a running
-- platform of a data directory, --help, and flags checked before any work.
local mastra = require "mastra"
local platform = require "spec.support.platform"

local P = "/v1/railway/projects/proj-shell"

describe("mastra-platform from the shell", function()
  local srv, dir

  after_each(function()
    if srv then srv:close() end
    srv = nil
    if dir then platform.rm_rf(dir) end
    dir = nil
  end)

  -- the binary with args, in the spec's LocalSandbox (srv's, or a new one)
  local function run(args)
    local sb = srv and srv.sandbox or mastra.LocalSandbox.new{}
    local r = sb:executeCommand(platform.binary(), args, { timeout = 60000 })
    if not srv then sb:destroy() end
    return r
  end

  it("ps lists the live sandboxes, logs their commands, destroy ends them", function()
    dir = platform.tmpdir()
    local data = dir .. "/data"
    srv = platform.start{ dataDir = data, tokenFile = dir .. "/token" }
    local a = srv:json("POST", P .. "/sandbox", { environmentId = "env-a", id = "project-a" })
    local b = srv:json("POST", P .. "/sandbox", { environmentId = "env-b" })
    assert.are.equal(201, a.status, a.body)
    assert.are.equal(201, b.status, b.body)
    local w = srv:wsExec(srv:lease(P, a.json.id), "echo from-a")
    assert.are.equal(0, w.exitCode, w.stderr)

    local ps = run{ "ps", "--data-dir", data }
    assert.are.equal(0, ps.exitCode, ps.stderr)
    assert.matches("^ID +PROJECT +ENVIRONMENT +KEY", ps.stdout)
    local line_a = ps.stdout:match("\n(" .. a.json.id .. "[^\n]*)")
    assert.is_not_nil(line_a, ps.stdout)
    assert.matches("proj%-shell +env%-a +project%-a +ISOLATED +idle", line_a)
    assert.matches("\n" .. b.json.id .. " +proj%-shell +env%-b +%- ", ps.stdout)

    local logs = run{ "logs", "--data-dir", data }
    assert.are.equal(0, logs.exitCode, logs.stderr)
    assert.matches(a.json.id .. " proj%-shell/env%-a exited exit 0 %d+ ms: echo from%-a\n",
      logs.stdout)
    local only_b = run{ "logs", "--data-dir", data, "--sandbox", b.json.id }
    assert.are.equal("", only_b.stdout)

    local d = run{ "destroy", "--data-dir", data, a.json.id, "sbx_unknown" }
    assert.are.equal(1, d.exitCode) -- one of the two is unknown
    assert.matches(a.json.id .. ": destroying", d.stdout)
    assert.matches("sbx_unknown: no live sandbox has that id", d.stderr)
    assert.is_true(platform.waitUntil(function()
      local g = srv:json("GET", P .. "/sandbox/" .. a.json.id)
      return g.json and g.json.destroyedAt ~= platform.null
    end, 20000), "the sandbox was not destroyed")
    ps = run{ "ps", "--data-dir", data }
    assert.is_nil(ps.stdout:find(a.json.id, 1, true), ps.stdout)
    assert.is_not_nil(ps.stdout:find(b.json.id, 1, true), ps.stdout)
  end)

  it("says that no platform runs on a data directory, and what to do", function()
    dir = platform.tmpdir()
    local r = run{ "ps", "--data-dir", dir }
    assert.are.equal(1, r.exitCode)
    assert.matches("no platform with an inspector runs on " .. dir:gsub("%p", "%%%0"), r.stderr)
    assert.matches("mastra%-platform serve", r.stderr)
  end)

  it("--help exits 0; a bad flag exits 2 before any work", function()
    assert.are.equal(0, run{ "--help" }.exitCode)
    assert.are.equal(0, run{ "ps", "--help" }.exitCode)
    assert.are.equal(2, run{ "ps", "--bogus" }.exitCode)
    assert.are.equal(2, run{ "destroy" }.exitCode)
    dir = platform.tmpdir()
    local t0 = mastra.now()
    -- checked before the data directory is made or a base is built
    local r = run{ "serve", "--data-dir", dir .. "/data", "--listen", "nope" }
    assert.are.equal(2, r.exitCode)
    assert.are.equal("mastra-platform: --listen wants HOST:PORT (got 'nope')\n", r.stderr)
    r = run{ "serve", "--data-dir", dir .. "/data", "--inspector", "1.2.3:4" }
    assert.are.equal(2, r.exitCode)
    assert.matches("%-%-inspector '1%.2%.3' is not an IP address", r.stderr)
    assert.is_nil(io.open(dir .. "/data"), "the data directory was made")
    assert.is_true(mastra.now() - t0 < 5000)
  end)
end)
