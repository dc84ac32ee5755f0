-- mastra.Agent's loop on both wires (Anthropic Messages, OpenAI Chat
-- Completions) against the scripted model server
-- (spec/support/model_server.lua), with a real LocalSandbox workspace:
-- what the agent sends turn by turn, how it reads the stream, and the
-- loop's rules (docs/api.md "mastra.Agent").
local core = require "mastra.core"
local mastra = require "mastra"
local ms = require "spec.support.model_server"
local util = require "spec.support.util"

local WIRES = { "anthropic", "openai" }

-- Start the server on turns (for `wire`), a workspace (a LocalFilesystem
-- and a LocalSandbox over one directory) and run fn(env); everything is
-- stopped afterwards, whatever fn did.
local function with_agent(wire, turns, agent_opts, fn)
  local srv = ms.start{ [wire] = turns }
  local dir, base = util.tmpdir()
  local ws = mastra.Workspace.new{
    filesystem = mastra.LocalFilesystem.new{ basePath = dir },
    sandbox = mastra.LocalSandbox.new{ workingDirectory = dir },
  }
  local ok, err = pcall(function()
    ws:init()
    local o = { id = "test-agent", name = "Test Agent", instructions = "You are a test agent.",
      model = srv:model(wire), workspace = ws }
    for k, v in pairs(agent_opts or {}) do o[k] = v end
    local agent = mastra.Agent.new(o)
    fn{ agent = agent, srv = srv, ws = ws, dir = dir,
      calls = function() return srv:calls(wire) end }
  end)
  pcall(ws.destroy, ws)
  srv:close()
  util.rm_rf(dir, base)
  if not ok then error(err, 0) end
end

-- The tool results a request carries, in order: {id, text, isError}.
local function results_sent(wire, body)
  local out = {}
  for _, m in ipairs(body.messages) do
    if wire == "anthropic" and m.role == "user" and type(m.content) == "table" then
      for _, b in ipairs(m.content) do
        if b.type == "tool_result" then
          out[#out + 1] = { id = b.tool_use_id, text = b.content, isError = b.is_error == true }
        end
      end
    elseif wire == "openai" and m.role == "tool" then
      out[#out + 1] = { id = m.tool_call_id, text = m.content }
    end
  end
  return out
end

local function tool_names(wire, body)
  local out = {}
  for i, t in ipairs(body.tools or {}) do
    out[i] = wire == "anthropic" and t.name or t["function"].name
  end
  return out
end

-- A custom tool that records what it was given.
local function probe(log, opts)
  opts = opts or {}
  return {
    description = "Record the input.",
    inputSchema = { type = "object", properties = { x = { type = "string" } } },
    requireApproval = opts.requireApproval,
    execute = function(input)
      log[#log + 1] = input
      if opts.sleep then mastra.sleep(opts.sleep) end
      if opts.fail then error("probe failed on purpose") end
      return "probe got " .. core.jsonEncode(input)
    end,
  }
end

for _, wire in ipairs(WIRES) do
  local W = ms[wire]
  describe("mastra.Agent on the " .. wire .. " wire", function()
    it("runs a workspace command and answers: what it sends, turn by turn", function()
      with_agent(wire, {
        W.toolUse({ { id = "call_1", name = "mastra_workspace_execute_command",
          input = { command = "echo 'Hello, world!'; pwd" } } }, { text = "Running it.",
          inputTokens = 20, outputTokens = 5 }),
        W.text("It printed Hello, world!", { inputTokens = 40, outputTokens = 9 }),
      }, nil, function(e)
        local r = e.agent:generate('Print "Hello, world!" and show the current directory.')
        assert.are.equal("It printed Hello, world!", r.text)
        assert.are.equal("model", r.stoppedBy)
        assert.are.equal("stop", r.finishReason)
        assert.are.equal(2, #r.steps)
        assert.are.equal("tool-calls", r.steps[1].finishReason)
        assert.are.same({ inputTokens = 20, outputTokens = 5, totalTokens = 25 },
          { inputTokens = r.steps[1].usage.inputTokens,
            outputTokens = r.steps[1].usage.outputTokens,
            totalTokens = r.steps[1].usage.totalTokens })
        assert.are.equal(60, r.usage.inputTokens)
        assert.are.equal(14, r.usage.outputTokens)
        assert.are.equal(1, #r.toolCalls)
        assert.are.equal("call_1", r.toolResults[1].toolCallId)
        assert.matches("Hello, world!", r.toolResults[1].output, 1, true)
        assert.are.same({}, r.warnings)
        local calls = e.calls()
        assert.are.equal(2, #calls)
        local b1 = calls[1].body
        assert.are.equal(wire == "anthropic" and "claude-test" or "gpt-test", b1.model)
        assert.is_true(b1.stream)
        local system = wire == "anthropic" and b1.system or b1.messages[1].content
        assert.matches("^You are a test agent%.", system)
        assert.matches(e.ws:getInstructions(), system, 1, true)
        local names = tool_names(wire, b1)
        assert.is_true(#names >= 9)
        assert.are.equal("mastra_workspace_read_file", names[1])
        if wire == "anthropic" then
          assert.are.equal("test-key-anthropic", calls[1].header["x-api-key"])
          assert.are.equal("2023-06-01", calls[1].header["anthropic-version"])
        else
          assert.are.equal("Bearer test-key-openai", calls[1].header.authorization)
          assert.is_true(b1.stream_options.include_usage)
        end
        -- the second turn: the command's real output went back, for its id
        local sent = results_sent(wire, calls[2].body)
        assert.are.equal(1, #sent)
        assert.are.equal("call_1", sent[1].id)
        assert.matches("Hello, world!", sent[1].text, 1, true)
        assert.matches(e.dir, sent[1].text, 1, true)
        -- r.messages: the user turn, the assistant's call, its result, the answer
        assert.are.same({ "user", "assistant", "tool", "assistant" },
          { r.messages[1].role, r.messages[2].role, r.messages[3].role, r.messages[4].role })
      end)
    end)

    it("reads text cut inside UTF-8 characters and JSON strings, and streams it", function()
      local text = "Grüße, 世界! “quoted” 🎉 done"
      with_agent(wire, { W.text({ "Grüße, 世", "界! “quoted” 🎉 done" }, { every = 7,
        delayMs = 2 }) }, nil, function(e)
        local deltas = {}
        local kinds = {}
        local r = e.agent:stream("hi", { onChunk = function(c)
          kinds[#kinds + 1] = c.type
          if c.type == "text-delta" then deltas[#deltas + 1] = c.text end
        end })
        assert.are.equal(text, r.text)
        assert.are.equal(text, table.concat(deltas))
        assert.are.equal("step-finish", kinds[#kinds - 1])
        assert.are.equal("finish", kinds[#kinds])
      end)
    end)

    it("assembles tool calls however they come, and parses arguments once complete", function()
      local seen = {}
      local first
      if wire == "anthropic" then
        first = ms.stream(W.events({
          { id = "t1", name = "probe", json = { '{"x": "a', 'é b', 'c"}' } }, -- split pieces
          { id = "t2", name = "probe", input = { x = "whole" } },            -- whole at start
          { id = "t3", name = "probe", json = { "" } },                       -- "" means {}
        }, { stop = "tool_use" }), { every = 13, delayMs = 1 })
      else
        first = ms.stream(W.events({
          { index = 0, id = "c1", name = "probe", args = { '{"x": "a', 'é b', 'c"}' } },
          { index = 1, id = "c2", name = "probe", args = '{"x":"whole"}' },
          { index = 2, id = "c3", name = "probe", args = "" },
          { index = 3, id = "c4", name = "probe", args = { object = { x = "object" } } },
          -- a new id under index 3: a new call, not more arguments of c4
          { index = 3, id = "c5", name = "probe", args = '{"x":"new id"}' },
        }, { finish = "tool_calls" }), { every = 11, delayMs = 1 })
      end
      with_agent(wire, { first, W.text("ok") }, { tools = { probe = probe(seen) } },
        function(e)
          local r = e.agent:generate("go")
          assert.are.equal("ok", r.text)
          local want = { { x = "aé bc" }, { x = "whole" }, {} }
          if wire == "openai" then
            want[4], want[5] = { x = "object" }, { x = "new id" }
          end
          table.sort(seen, function(a, b) return core.jsonEncode(a) < core.jsonEncode(b) end)
          table.sort(want, function(a, b) return core.jsonEncode(a) < core.jsonEncode(b) end)
          assert.are.same(want, seen)
          -- one result per call id, in call order
          local sent = results_sent(wire, e.calls()[2].body)
          local ids = {}
          for i, s in ipairs(sent) do ids[i] = s.id end
          assert.are.same(wire == "anthropic" and { "t1", "t2", "t3" }
            or { "c1", "c2", "c3", "c4", "c5" }, ids)
        end)
    end)

    it("goes on because of tool calls, never because of the finish reason", function()
      local seen = {}
      -- a finish reason that claims tool calls, with none: the run ends
      local no_calls = wire == "anthropic"
        and ms.stream(W.events({ { text = "nothing to run" } }, { stop = "tool_use" }))
        or ms.stream(W.events({ { text = "nothing to run" } }, { finish = "tool_calls" }))
      with_agent(wire, { no_calls, W.text("never asked") }, nil, function(e)
        local r = e.agent:generate("go")
        assert.are.equal(1, #r.steps)
        assert.are.equal("nothing to run", r.text)
        assert.are.equal("model", r.stoppedBy)
        assert.are.equal(1, #e.calls())
      end)
      -- calls with a finish reason of "stop" (Ollama): they run
      with_agent(wire, {
        W.toolUse({ { id = "s1", name = "probe", input = { x = "1" } } },
          wire == "anthropic" and { stop = "end_turn" } or { finish = "stop" }),
        W.text("after"),
      }, { tools = { probe = probe(seen) } }, function(e)
        local r = e.agent:generate("go")
        assert.are.equal(2, #r.steps)
        assert.are.same({ { x = "1" } }, seen)
        assert.are.equal("after", r.text)
      end)
    end)

    it("sends toolChoice as the wire says it (defaultOptions, then the run's own)", function()
      local want = wire == "anthropic"
        and { required = { type = "any" }, none = { type = "none" },
              tool = { type = "tool", name = "probe" } }
        or { required = "required", none = "none",
             tool = { type = "function", ["function"] = { name = "probe" } } }
      with_agent(wire, { W.text("a"), W.text("b"), W.text("c") },
        { tools = { probe = probe({}) }, defaultOptions = { toolChoice = "required" } },
        function(e)
        e.agent:generate("one")
        e.agent:generate("two", { toolChoice = "none" })
        e.agent:generate("three", { toolChoice = { type = "tool", toolName = "probe" } })
        local calls = e.calls()
        assert.are.equal(3, #calls)
        assert.are.same(want.required, calls[1].body.tool_choice)
        assert.are.same(want.none, calls[2].body.tool_choice)
        assert.are.same(want.tool, calls[3].body.tool_choice)
      end)
    end)

    it("cuts a tool's output at maxToolOutputTokens (4 characters each), saying so", function()
      local big = {
        description = "Print a lot.",
        inputSchema = { type = "object", properties = {} },
        execute = function() return string.rep("x", 1000) end,
      }
      with_agent(wire, {
        W.toolUse({ { id = "b1", name = "big", input = {} } }),
        W.text("read it"),
      }, { tools = { big = big } }, function(e)
        local r = e.agent:generate("go", { maxToolOutputTokens = 10 })
        assert.are.equal("read it", r.text)
        local sent = results_sent(wire, e.calls()[2].body)
        assert.are.equal(1, #sent)
        assert.are.equal(string.rep("x", 40), sent[1].text:sub(1, 40))
        assert.are.equal("\n", sent[1].text:sub(41, 41))
        assert.matches("[output truncated: 40 of 1000 characters shown", sent[1].text, 1, true)
      end)
    end)

    it("runs up to toolCallConcurrency calls at once, results in call order", function()
      local running, peak, order = 0, 0, {}
      local slow = {
        description = "Wait, then answer.",
        inputSchema = { type = "object", properties = { n = { type = "integer" } } },
        execute = function(input)
          running = running + 1
          peak = math.max(peak, running)
          mastra.sleep(input.n == 1 and 150 or 50) -- the first finishes last
          running = running - 1
          order[#order + 1] = input.n
          return "done " .. input.n
        end,
      }
      local calls = {}
      for i = 1, 5 do calls[i] = { id = "k" .. i, name = "slow", input = { n = i } } end
      with_agent(wire, { W.toolUse(calls), W.text("ok") }, { tools = { slow = slow } },
        function(e)
          local t0 = mastra.now()
          local r = e.agent:generate("go", { toolCallConcurrency = 2 })
          assert.are.equal(2, peak)
          assert.is_true(mastra.now() - t0 < 600)
          assert.are_not.equal(1, order[1]) -- they ran at once: 1 finished later
          local sent = results_sent(wire, e.calls()[2].body)
          for i = 1, 5 do
            assert.are.equal("k" .. i, sent[i].id)
            assert.are.equal("done " .. i, sent[i].text)
          end
          assert.are.equal(5, #r.toolResults)
        end)
    end)

    it("sends unknown tools, bad arguments and tool errors back as error results", function()
      local seen = {}
      local length = wire == "anthropic" and { stop = "max_tokens" } or { finish = "length" }
      with_agent(wire, {
        W.toolUse({
          { id = "e1", name = "no_such_tool", input = {} },
          { id = "e2", name = "probe", json = { '{"x": "cut' } },
          { id = "e3", name = "failing", input = { x = "y" } },
        }, length),
        W.text("handled"),
      }, { tools = { probe = probe(seen), failing = probe({}, { fail = true }) } }, function(e)
        local r = e.agent:generate("go")
        assert.are.equal("handled", r.text)
        assert.are.same({}, seen) -- the call with bad arguments was not run
        local sent = results_sent(wire, e.calls()[2].body)
        assert.are.equal(3, #sent)
        assert.matches("unknown tool 'no_such_tool'", sent[1].text, 1, true)
        assert.matches("truncated at the output token limit", sent[2].text, 1, true)
        assert.matches("probe failed on purpose", sent[3].text, 1, true)
        if wire == "anthropic" then
          assert.is_true(sent[1].isError and sent[2].isError and sent[3].isError)
        end
        for _, t in ipairs(r.toolResults) do assert.is_true(t.isError) end
      end)
    end)

    it("stops at maxSteps with a warning, and refuses a fourth identical call", function()
      local seen = {}
      local same = { id = nil, name = "probe", input = { x = "again" } }
      local turns = {}
      for i = 1, 6 do
        same.id = "r" .. i
        turns[i] = W.toolUse({ { id = same.id, name = same.name, input = same.input } })
      end
      with_agent(wire, turns, { tools = { probe = probe(seen) } }, function(e)
        local r = e.agent:generate("go", { maxSteps = 2 })
        assert.are.equal("maxSteps", r.stoppedBy)
        assert.matches("maxSteps %(2%)", r.warnings[1])
        assert.are.equal(2, #seen)
      end)
      seen = {}
      with_agent(wire, turns, { tools = { probe = probe(seen) } }, function(e)
        local r = e.agent:generate("go", { maxSteps = 10 })
        assert.are.equal(3, #seen) -- the fourth was refused
        assert.are.equal("loopGuard", r.stoppedBy)
        assert.are.equal(5, #r.steps)
        assert.matches("same arguments 3 times in a row", r.toolResults[4].output, 1, true)
        assert.is_true(r.toolResults[4].isError)
      end)
      seen = {}
      with_agent(wire, turns, { tools = { probe = probe(seen) } }, function(e)
        local r = e.agent:generate("go", { maxSteps = 5, loopGuard = { maxRepeats = 1 } })
        assert.are.equal(1, #seen)
        assert.are.equal("loopGuard", r.stoppedBy)
      end)
    end)

    it("asks onApproval, and suspends without it; toolApprovals resumes", function()
      local seen = {}
      local tools = { guarded = probe(seen, { requireApproval = true }) }
      local turns = {
        W.toolUse({ { id = "p1", name = "guarded", input = { x = "1" } } }),
        W.text("denied noted"),
        W.toolUse({ { id = "p2", name = "guarded", input = { x = "2" } } }),
        W.text("approved done"),
      }
      with_agent(wire, turns, { tools = tools }, function(e)
        local asked = {}
        local r = e.agent:generate("go", { onApproval = function(c)
          asked[#asked + 1] = c.toolName
          return false, "not today"
        end })
        assert.are.same({ "guarded" }, asked)
        assert.are.same({}, seen)
        assert.matches("did not approve.*not today", r.toolResults[1].output)
        -- no callback: suspended with the pending call
        local s = e.agent:generate("again")
        assert.are.equal("suspended", s.finishReason)
        assert.are.equal("suspended", s.stoppedBy)
        assert.are.equal("p2", s.pendingToolCalls[1].toolCallId)
        assert.are.same({}, seen)
        local done = e.agent:generate(s.messages, { toolApprovals = { p2 = true } })
        assert.are.same({ { x = "2" } }, seen)
        assert.are.equal("approved done", done.text)
        local sent = results_sent(wire, e.calls()[4].body)
        assert.are.equal("p2", sent[#sent].id)
      end)
    end)

    it("continues a conversation from r.messages, also on the other wire", function()
      local other = wire == "anthropic" and "openai" or "anthropic"
      local seen = {}
      with_agent(wire, {
        W.toolUse({ { id = "m1", name = "probe", input = { x = "v" } } }),
        W.text("first answer"),
        W.text("second answer"),
      }, { tools = { probe = probe(seen) } }, function(e)
        local r1 = e.agent:generate("first question")
        local r2 = e.agent:generate(r1.messages)
        assert.are.equal("second answer", r2.text)
        local b3 = e.calls()[3].body
        local sent = results_sent(wire, b3)
        assert.are.equal("m1", sent[1].id)
        -- the same messages on the other wire
        local O = ms[other]
        local srv2 = ms.start{ [other] = { O.text("other wire answer") } }
        local ok, err = pcall(function()
          local a2 = mastra.Agent.new{ model = srv2:model(other), tools = { probe = probe(seen) } }
          local messages = r1.messages
          messages[#messages + 1] = { role = "user", content = "and now?" }
          local r3 = a2:generate(messages)
          assert.are.equal("other wire answer", r3.text)
          local b = srv2:calls(other)[1].body
          local s2 = results_sent(other, b)
          assert.are.equal("m1", s2[1].id)
          assert.matches("probe got", s2[1].text, 1, true)
        end)
        srv2:close()
        if not ok then error(err, 0) end
      end)
    end)

    it("gives the chunks to an iterator inside a task", function()
      with_agent(wire, {
        W.toolUse({ { id = "i1", name = "mastra_workspace_write_file",
          input = { path = "/a.txt", content = "x" } } }),
        W.text("written"),
      }, nil, function(e)
        local kinds = {}
        local r = mastra.spawn(function()
          local s = e.agent:stream("write it")
          for c in s:chunks() do kinds[#kinds + 1] = c.type end
          return s:result()
        end):wait()
        assert.are.equal("written", r.text)
        local set = {}
        for _, k in ipairs(kinds) do set[k] = (set[k] or 0) + 1 end
        assert.are.equal(1, set["tool-call"])
        assert.are.equal(1, set["tool-result"])
        assert.are.equal(2, set["step-finish"], table.concat(kinds, " "))
        assert.are.equal("finish", kinds[#kinds])
        assert.are.equal("x", util.read_file(e.dir .. "/a.txt"))
      end)
    end)

    it("reports usage as nil, not 0, when the server sends none", function()
      with_agent(wire, { W.text("no usage", { usage = false }) }, nil, function(e)
        local r = e.agent:generate("go")
        assert.are.equal("no usage", r.text)
        assert.is_nil(r.steps[1].usage)
        assert.is_nil(r.usage)
      end)
    end)

    it("runs many agents' runs at once on one thread (mastra.map)", function()
      local turns = {}
      for i = 1, 8 do turns[i] = W.text("answer", { firstDelayMs = 100 }) end
      with_agent(wire, turns, nil, function(e)
        local t0 = mastra.now()
        local rs = mastra.map({ 1, 2, 3, 4, 5, 6, 7, 8 }, function(i)
          return e.agent:generate("q" .. i)
        end, { concurrency = 8 })
        assert.is_true(mastra.now() - t0 < 700, "8 runs of 100 ms each overlapped")
        for i = 1, 8 do assert.are.equal("answer", rs[i].text) end
      end)
    end)
  end)
end
