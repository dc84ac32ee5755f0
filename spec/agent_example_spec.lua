-- examples/agent.lua and examples/agent_fleet.lua end to end under a plain
-- lua5.4, against the scripted model server (OPENAI_BASE_URL points at
-- it), and without any model configured (a clear message, exit status 2).
local mastra = require "mastra"
local ms = require "spec.support.model_server"
local util = require "spec.support.util"

local root = os.getenv("MASTRA_SOURCE_DIR") or "."

local function run_example(name, env)
  local sb, dir, base = util.tempSandbox()
  local e = { LUA_PATH_5_4 = os.getenv("LUA_PATH_5_4") or "", LUA_CPATH_5_4 =
    os.getenv("LUA_CPATH_5_4") or "", PATH = os.getenv("PATH"), TMPDIR = dir,
    -- the sanitizers' build: lua5.4 loads an instrumented core.so
    ASAN_OPTIONS = os.getenv("ASAN_OPTIONS"), LD_PRELOAD = os.getenv("MASTRA_TEST_PRELOAD") }
  for k, v in pairs(env or {}) do e[k] = v end
  local r = sb:executeCommand("lua5.4", { root .. "/examples/" .. name .. ".lua" },
    { env = e, timeout = 60000 })
  util.dropSandbox(sb, dir, base)
  return r
end

describe("the agent examples", function()
  it("say what to set when no model is configured", function()
    local r = run_example("agent")
    assert.are.equal(2, r.exitCode)
    assert.matches("no model is configured", r.stderr, 1, true)
    assert.matches("ANTHROPIC_API_KEY", r.stderr, 1, true)
    assert.matches("OPENAI_BASE_URL", r.stderr, 1, true)
  end)

  it("examples/agent.lua runs against a model server", function()
    local O = ms.openai
    local srv = ms.start{ openai = {
      O.toolUse({ { id = "x1", name = "mastra_workspace_execute_command",
        input = { command = "echo 'Hello, world!' && pwd" } } }),
      O.text("Done: it printed Hello, world!"),
    } }
    local ok, err = pcall(function()
      local r = run_example("agent", { OPENAI_BASE_URL = srv.url .. "/openai/v1" })
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.matches("model: openai/gpt%-4o%-mini", r.stdout)
      assert.matches("step 1: mastra_workspace_execute_command", r.stdout, 1, true)
      assert.matches("Done: it printed Hello, world!", r.stdout, 1, true)
      assert.matches("(2 steps, stopped by model, 36 tokens)", r.stdout, 1, true)
      local calls = srv:calls("openai")
      assert.are.equal(2, #calls)
      assert.are.equal("gpt-4o-mini", calls[1].body.model)
      assert.matches("Hello, world!", calls[2].raw, 1, true)
    end)
    srv:close()
    if not ok then error(err, 0) end
  end)

  it("examples/agent_fleet.lua runs one agent per project at once", function()
    local O = ms.openai
    local first = O.toolUse({ { id = "f1", name = "mastra_workspace_execute_command",
      input = { command = "sh test.sh" } } }, { firstDelayMs = 100 })
    first.times = 5
    local answer = O.text("checked")
    answer.times = 5
    local srv = ms.start{ openai = { first, answer } }
    local ok, err = pcall(function()
      local t0 = mastra.now()
      local r = run_example("agent_fleet", { OPENAI_BASE_URL = srv.url .. "/openai/v1" })
      assert.are.equal(0, r.exitCode, r.stderr)
      for _, p in ipairs{ "api", "web", "worker", "docs", "cli" } do
        assert.matches("\n?" .. p .. " +checked %(2 steps%)", r.stdout)
      end
      assert.is_true(mastra.now() - t0 < 20000)
      local calls = srv:calls("openai")
      assert.are.equal(10, #calls)
      local failed = 0
      for _, c in ipairs(calls) do
        if c.raw:find("queue test failed", 1, true) then failed = failed + 1 end
      end
      assert.are.equal(1, failed)
    end)
    srv:close()
    if not ok then error(err, 0) end
  end)
end)
