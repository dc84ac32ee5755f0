-- mastra.Agent with a PlatformSandbox workspace (a local mastra-platform,
-- spec/support/platform.lua) on both wires: the model's commands run in
-- the remote sandbox, their output goes back turn by turn, its file tools
-- see the sandbox's own tree (filesystem = "sandbox"), and a cancelled run
-- leaves no command running there.
local mastra = require "mastra"
local ms = require "spec.support.model_server"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

describe("mastra.Agent with a PlatformSandbox workspace", function()
  local psrv
  setup(function() psrv = platform.start() end)
  teardown(function() if psrv then psrv:close() end end)

  for _, wire in ipairs{ "anthropic", "openai" } do
    local W = ms[wire]
    it("runs the model's commands in the sandbox (" .. wire .. ")", function()
      local srv = ms.start{ [wire] = {
        W.toolUse({ { id = "w1", name = "mastra_workspace_execute_command",
          input = { command = "echo from-the-sandbox > note.txt && cat note.txt && pwd" } } }),
        W.toolUse({ { id = "w2", name = "mastra_workspace_execute_command",
          input = { command = "wc -c < note.txt" } } }),
        W.text("the note has 17 bytes"),
      } }
      local ws = mastra.Workspace.new{ sandbox = mastra.PlatformSandbox.new(
        psrv:sandboxOptions()) }
      local ok, err = pcall(function()
        ws:init()
        local agent = mastra.Agent.new{ instructions = "Work in the sandbox.",
          model = srv:model(wire), workspace = ws }
        local r = agent:generate("write a note and count its bytes")
        assert.are.equal("the note has 17 bytes", r.text)
        assert.are.equal(3, #r.steps)
        assert.matches("from-the-sandbox", r.toolResults[1].output, 1, true)
        assert.matches("17", r.toolResults[2].output, 1, true)
        local calls = srv:calls(wire)
        assert.are.equal(3, #calls)
        assert.matches("from-the-sandbox", calls[2].raw, 1, true)
        local system = wire == "anthropic" and calls[1].body.system
          or calls[1].body.messages[1].content
        assert.matches(ws.sandbox:getInstructions(), system, 1, true)
      end)
      pcall(ws.destroy, ws)
      srv:close()
      if not ok then error(err, 0) end
    end)
  end

  it('writes a file the sandbox\'s commands then run (filesystem = "sandbox")', function()
    local srv = ms.start{ anthropic = {
      ms.anthropic.toolUse({ { id = "f1", name = "mastra_workspace_write_file",
        input = { path = "/proj/hello.sh", content = "echo \"hi from $0\"\n" } } }),
      ms.anthropic.toolUse({ { id = "f2", name = "mastra_workspace_execute_command",
        input = { command = "sh proj/hello.sh" } } }),
      ms.anthropic.text("it says hi"),
    } }
    local ws = mastra.Workspace.new{ sandbox = mastra.PlatformSandbox.new(psrv:sandboxOptions()),
      filesystem = "sandbox" }
    local ok, err = pcall(function()
      ws:init()
      local agent = mastra.Agent.new{ model = srv:model("anthropic"), workspace = ws }
      local r = agent:generate("write a script and run it")
      assert.are.equal("it says hi", r.text)
      assert.are.equal("Created /proj/hello.sh (18 bytes)", r.toolResults[1].output)
      assert.are.equal("hi from proj/hello.sh", r.toolResults[2].output)
      -- the file is the sandbox's, not a local one
      assert.are.equal("echo \"hi from $0\"\n",
        ws.sandbox:executeCommand("cat proj/hello.sh").stdout)
    end)
    pcall(ws.destroy, ws)
    srv:close()
    if not ok then error(err, 0) end
  end)

  it("a cancelled run kills its command in the sandbox", function()
    local srv = ms.start{ openai = { ms.openai.toolUse({ { id = "c1",
      name = "mastra_workspace_execute_command",
      input = { command = "touch started; sleep 30; touch finished" } } }) } }
    local ws = mastra.Workspace.new{ sandbox = mastra.PlatformSandbox.new(psrv:sandboxOptions()) }
    local ok, err = pcall(function()
      ws:init()
      local agent = mastra.Agent.new{ model = srv:model("openai"), workspace = ws }
      local t = mastra.spawn(function() return agent:generate("go") end)
      assert.is_true(util.wait_until(function()
        return ws.sandbox:executeCommand("test -e started").exitCode == 0
      end, 10000))
      t:cancel()
      local ok2, e = pcall(t.wait, t)
      assert.is_false(ok2)
      assert.is_true(mastra.errors.CancelledError:is(e))
      -- the remote command was killed: no sleep runs in the sandbox
      assert.is_true(util.wait_until(function()
        local r = ws.sandbox:executeCommand("ps -eo args | grep -c '^sleep 30' || true")
        return tonumber(r.stdout) == 0
      end, 10000))
      assert.are.equal(1, ws.sandbox:executeCommand("test -e finished").exitCode)
      local last = e.result.messages[#e.result.messages]
      assert.are.equal("tool", last.role)
      assert.are.equal("c1", last.content[1].toolCallId)
    end)
    pcall(ws.destroy, ws)
    srv:close()
    if not ok then error(err, 0) end
  end)
end)
