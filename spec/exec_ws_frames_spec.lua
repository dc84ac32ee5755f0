-- How the local platform reads a client's frames on the exec WebSocket
-- (docs/platform.md "Frames in"; src/server/http/ws_reader.c): fragments
-- with a ping between them make one init_exec, and the ping is answered;
-- a frame that breaks RFC 6455 gets close 1002, text that is not UTF-8
-- 1007; a message over 1 MiB gets 1009 with a reason, the server reads on
-- until the client answers, and the connection then ends with a FIN, not
-- a reset; a client's close is echoed. The command of a session that
-- ends so is killed. Against a real mastra-platform, with a raw client
-- (spec/support/ws_raw_client.py) for the frames wslay would not send.
local platform = require "spec.support.platform"

local P = "/v1/railway/projects/proj"
local CLIENT = (os.getenv("MASTRA_SOURCE_DIR") or ".") .. "/spec/support/ws_raw_client.py"

describe("the exec WebSocket's frames in", function()
  local srv, sb, lease

  local function raw(scenario)
    local r = srv:sh("python3", { CLIENT, lease.wsEndpoint, lease.jwt,
      scenario }, { timeout = 60000 })
    assert.are.equal(0, r.exitCode, r.stderr)
    local out = platform.decode(r.stdout:match("[^\n]+"))
    assert.is_table(out, r.stdout)
    assert.is_nil(out.error, out.error)
    return out
  end

  -- the pid the scenario's command wrote (it printed "started" after
  -- it) is gone
  local function gone(file)
    local pid = sb:executeCommand("cat " .. file).stdout:match("^(%d+)")
    assert.is_truthy(pid, file .. " holds no pid")
    return platform.waitUntil(function()
      return sb:executeCommand("kill -0 " .. pid).exitCode ~= 0
    end, 10000, 100)
  end

  setup(function()
    srv = platform.start{}
    sb = srv:startSandbox{}
    lease = srv:lease(P, sb.sandboxId)
  end)
  teardown(function()
    if sb then pcall(sb.destroy, sb) end
    if srv then srv:close() end
  end)

  it("joins fragments across a ping, and answers the ping", function()
    local r = raw("fragments")
    assert.are.equal("hi\n", r.stdout)
    assert.are.same({ "p1" }, r.pongs)
    local exit
    for _, t in ipairs(r.texts) do if t.type == "exit" then exit = t end end
    assert.is_table(exit, "no exit frame")
    assert.are.equal(0, exit.data.exit_code)
    assert.are.equal(1000, r.close)
    assert.are.equal("fin", r["end"])
  end)

  it("answers an unmasked frame with 1002 and runs nothing", function()
    local r = raw("unmasked")
    assert.are.equal(1002, r.close)
    assert.are.equal("", r.stdout)
  end)

  it("answers text that is not UTF-8 with 1007", function()
    assert.are.equal(1007, raw("badutf8").close)
  end)

  it("ends a message over 1 MiB with 1009, reads on, and kills the command", function()
    local r = raw("toobig")
    assert.are.equal(1009, r.close)
    assert.are.equal("started\n", r.stdout)
    assert.are.equal("a message over 1048576 bytes", r.reason)
    -- the megabyte was read, not left in the socket: no reset
    assert.are.equal("fin", r["end"])
    assert.is_true(gone("toobig.pid"), "the command of the session still runs")
  end)

  it("echoes the client's close, and kills the command", function()
    local r = raw("close")
    assert.are.equal("started\n", r.stdout)
    assert.are.equal(4000, r.close)
    assert.are.equal("bye", r.reason)
    assert.are.equal("fin", r["end"])
    assert.is_true(gone("close.pid"), "the command of the session still runs")
  end)
end)
