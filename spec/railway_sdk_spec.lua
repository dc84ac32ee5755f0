-- Railway's own TypeScript SDK (npm `railway` 3.11.0: the exec client
-- that upstream Mastra's direct exec mirrors) against the local
-- platform's exec WebSocket (issue 27: "the Railway SDK's frames against
-- our server"). test/railway_sdk/exec.mjs runs one scenario a call, over
-- the SDK's real WebSocket client; only the SDK's GraphQL control plane,
-- which the platform does not serve, is answered in that script (the
-- sandbox's record, and the exec lease's JWT as its shell token).
-- scripts/setup installs the SDK (npm ci); without it the spec is skipped,
-- unless MASTRA_REQUIRE_RAILWAY_SDK is set (CI sets it).
local platform = require "spec.support.platform"
local util = require "spec.support.util"
local mastra = require "mastra"

local P = "/v1/railway/projects/proj"
local DIR = (os.getenv("MASTRA_SOURCE_DIR") or ".") .. "/test/railway_sdk"

local function installed()
  local f = io.open(DIR .. "/node_modules/railway/package.json")
  if f then f:close() end
  return f ~= nil
end

describe("Railway's SDK (npm railway) against the local platform", function()
  if not installed() then
    assert(not os.getenv("MASTRA_REQUIRE_RAILWAY_SDK"),
      "test/railway_sdk/node_modules is missing: run scripts/setup")
    pending("test/railway_sdk/node_modules is missing (scripts/setup installs it): skipped")
    return
  end

  local srv, sb

  setup(function()
    srv = platform.start{}
    sb = srv:startSandbox{}
  end)
  teardown(function()
    if sb then pcall(sb.destroy, sb) end
    if srv then srv:close() end
  end)

  -- one scenario of exec.mjs with a fresh lease: {ok, result | error}
  local function sdk(scenario, arg)
    local lease = srv:lease(P, sb.sandboxId)
    local q = mastra.quote
    local out, ok = util.sh(("MASTRA_RW_WS=%s MASTRA_RW_JWT=%s MASTRA_RW_SANDBOX=%s"
      .. " MASTRA_RW_ARG=%s node %s %s 2>&1"):format(q(lease.wsEndpoint), q(lease.jwt),
      q(sb.sandboxId), q(arg or ""), q(DIR .. "/exec.mjs"), scenario))
    local line = out:match("([^\n]*)\n?$")
    local v = platform.decode(line)
    assert(ok and type(v) == "table", "exec.mjs " .. scenario .. ": " .. out)
    return v
  end

  local function exists(name)
    return sb:executeCommand("test -e " .. name).exitCode == 0
  end

  it("a fresh exec: its stdout, stderr and exit code", function()
    local r = sdk("run", "echo out; echo err >&2; echo run >> count-run; exit 3")
    assert.is_true(r.ok, r.error and r.error.message)
    assert.are.equal(3, r.result.exitCode)
    assert.are.equal("out\n", r.result.stdout)
    assert.are.equal("err\n", r.result.stderr)
    assert.are.equal("run\n", sb:executeCommand("cat count-run").stdout)
  end)

  it("a reattach by sessionName: the full replay, then from the last read", function()
    local started = srv:json("POST", P .. "/sandbox/" .. sb.sandboxId .. "/execs",
      { command = "echo first; sleep 1; echo second" },
      { headers = { ["Idempotency-Key"] = "railway-sdk-1" } })
    assert.are.equal(201, started.status, started.body)
    assert.is_true(platform.waitUntil(function()
      return srv:json("GET", P .. "/sandbox/" .. sb.sandboxId .. "/execs/railway-sdk-1")
        .json.state == "exited"
    end, 10000), "the exec did not end")
    local full = sdk("attach", "railway-sdk-1")
    assert.is_true(full.ok, full.error and full.error.message)
    assert.are.equal(0, full.result.exitCode)
    assert.are.equal("first\nsecond\n", full.result.stdout)
    -- everything went out on that socket: nothing is left past its last read
    local rest = sdk("lastRead", "railway-sdk-1")
    assert.is_true(rest.ok, rest.error and rest.error.message)
    assert.are.equal(0, rest.result.exitCode)
    assert.are.equal("", rest.result.stdout)
  end)

  it("a reattach to a name the platform does not hold fails with close 1008", function()
    local r = sdk("attach", "never-started")
    assert.is_false(r.ok)
    assert.are.equal("ExecInterruptedError", r.error.name)
    assert.are.equal(1008, r.error.closeCode)
  end)

  it("kill('KILL') ends the command and settles the handle with its exit", function()
    local r = sdk("kill")
    assert.is_true(r.ok, r.error and r.error.message)
    assert.are_not.equal(0, r.result.exitCode)
    assert.are.equal("started\n", r.result.stdout)
  end)

  it("detach() of a plain exec: no durable session, and the close ends the command", function()
    -- upstream Mastra's rule for the exec it does not name: the SDK says
    -- it cannot reattach, and the command does not run on
    local r = sdk("detach", "echo started; sleep 2; echo ran >> detached-ran")
    assert.is_true(r.ok, r.error and r.error.message)
    assert.matches("did not return a durable session", r.result.detachError, 1, true)
    mastra.sleep(3000)
    assert.is_false(exists("detached-ran"))
  end)
end)
