-- mastra.Agent's failures on both wires, against the scripted model server:
-- configuration errors, retries (which statuses, how long), API errors in
-- a status or inside the stream, cut streams, timeouts, and cancellation
-- (the HTTP request ends, running commands die, r.messages stays valid).
local mastra = require "mastra"
local errors = mastra.errors
local ms = require "spec.support.model_server"
local util = require "spec.support.util"

local WIRES = { "anthropic", "openai" }

local function with_server(wire, turns, fn)
  local srv = ms.start{ [wire] = turns }
  local ok, err = pcall(fn, srv)
  srv:close()
  if not ok then error(err, 0) end
end

local function agent_for(srv, wire, extra)
  local o = { id = "err-agent", instructions = "test", model = srv:model(wire) }
  for k, v in pairs(extra or {}) do o[k] = v end
  return mastra.Agent.new(o)
end

-- The SSE of a text answer, up to the end of the event that carries the
-- text (the rest never comes).
local function upto(W, text)
  local all = ms.sse(W.events({ { text = text } }))
  local at = all:find(text, 1, true)
  return all:sub(1, all:find("\n\n", at, true) + 1)
end

local function api_error(wire, status, etype, message)
  return { status = status, json = wire == "anthropic"
    and { type = "error", error = { type = etype, message = message } }
    or { error = { message = message, type = etype, code = etype } } }
end

describe("mastra.Agent's model configuration", function()
  it("names the variable of a missing key or URL, before any request", function()
    local none = function() return nil end
    local ok, err = pcall(mastra.Agent.resolveModel, "openai/gpt-4o", none)
    assert.is_false(ok)
    assert.is_true(errors.ModelConfigError:is(err))
    assert.are.equal("OPENAI_API_KEY", err.variable)
    assert.matches("set OPENAI_API_KEY", err.message, 1, true)
    ok, err = pcall(mastra.Agent.resolveModel, "my-proxy/model-1", none)
    assert.is_false(ok)
    assert.are.equal("MY_PROXY_BASE_URL", err.variable)
    -- the conventions: <PROVIDER>_BASE_URL, key optional for a configured URL
    local m = mastra.Agent.resolveModel("groq/llama-3", function(n)
      return ({ GROQ_API_KEY = "gk", GROQ_BASE_URL = "http://127.0.0.1:9/v1/" })[n]
    end)
    assert.are.equal("openai", m.api)
    assert.are.equal("http://127.0.0.1:9/v1/chat/completions", m.url)
    assert.are.equal("Bearer gk", m.headers.authorization)
    assert.are.equal("llama-3", m.modelId)
    local a = mastra.Agent.resolveModel("anthropic/claude-x", function(n)
      return n == "ANTHROPIC_API_KEY" and "ak" or nil
    end)
    assert.are.equal("https://api.anthropic.com/v1/messages", a.url)
    assert.are.equal("ak", a.headers["x-api-key"])
    assert.are.equal("http://127.0.0.1:11434/v1/chat/completions",
      mastra.Agent.resolveModel("ollama/llama3.2", none).url)
    -- through an agent, when the environment has no key for the provider
    if os.getenv("DEEPSEEK_API_KEY") == nil and os.getenv("DEEPSEEK_BASE_URL") == nil then
      local agent = mastra.Agent.new{ model = "deepseek/deepseek-chat" }
      ok, err = pcall(agent.generate, agent, "hi")
      assert.is_false(ok)
      assert.are.equal("DEEPSEEK_API_KEY", err.variable)
    end
  end)

  it("checks its options: unknown keys are errors naming the key", function()
    assert.has_error(function() mastra.Agent.new{ model = "openai/x", modle = 1 } end)
    local ok, err = pcall(mastra.Agent.new, { model = "openai/x", modle = 1 })
    assert.is_false(ok)
    assert.matches("unknown option 'modle'", err, 1, true)
    ok, err = pcall(mastra.Agent.new, { model = "no-slash" })
    assert.is_false(ok)
    assert.matches("provider/model", err, 1, true)
    local agent = mastra.Agent.new{ model = { id = "x/y", url = "http://127.0.0.1:9" } }
    ok, err = pcall(agent.generate, agent, "hi", { maxStep = 3 })
    assert.is_false(ok)
    assert.matches("unknown option 'maxStep'", err, 1, true)
  end)
end)

for _, wire in ipairs(WIRES) do
  local W = ms[wire]
  describe("mastra.Agent's model errors on the " .. wire .. " wire", function()
    it("retries 5xx, 529, 408, 409 and 429, waiting what the server asks", function()
      with_server(wire, {
        api_error(wire, 503, "api_error", "busy"),
        { status = 529, json = { error = { type = "overloaded_error", message = "o" } } },
        { status = 429, headers = { ["retry-after-ms"] = "300", ["retry-after"] = "9" },
          json = { error = { type = "rate_limit_error", message = "slow down" } } },
        { status = 408, headers = { ["retry-after-ms"] = "0" }, body = "timeout" },
        { status = 409, headers = { ["retry-after-ms"] = "0" }, body = "conflict" },
        W.text("finally"),
      }, function(srv)
        local retries = {}
        local t0 = mastra.now()
        local r = agent_for(srv, wire):generate("go", { maxRetries = 5,
          onRetry = function(x) retries[#retries + 1] = x end })
        assert.are.equal("finally", r.text)
        assert.are.equal(6, r.steps[1].attempts)
        assert.are.equal(6, #srv:calls(wire))
        assert.are.equal(5, #retries)
        assert.are.same({ 503, 529, 429, 408, 409 }, { retries[1].error.status,
          retries[2].error.status, retries[3].error.status, retries[4].error.status,
          retries[5].error.status })
        assert.are.equal(0, retries[5].delayMs)
        assert.are.equal(300, retries[3].delayMs) -- retry-after-ms over retry-after
        assert.is_true(retries[1].delayMs >= 375 and retries[1].delayMs <= 500)
        assert.is_true(retries[2].delayMs >= 750 and retries[2].delayMs <= 1000)
        assert.is_true(mastra.now() - t0 >= 300 + 375 + 750)
      end)
    end)

    it("caps the server's wait, obeys x-should-retry, and gives up after maxRetries", function()
      with_server(wire, {
        { status = 429, headers = { ["retry-after"] = "60" },
          json = { error = { type = "rate_limit_error", message = "wait a minute" } } },
        { status = 500, headers = { ["x-should-retry"] = "false", ["request-id"] = "req_77" },
          json = { error = { type = "api_error", message = "do not retry" } } },
      }, function(srv)
        local waited
        local t0 = mastra.now()
        local ok, err = pcall(agent_for(srv, wire).generate, agent_for(srv, wire), "go",
          { maxRetryDelay = 200, onRetry = function(x) waited = x.delayMs end })
        assert.is_false(ok)
        assert.are.equal(200, waited)
        assert.is_true(mastra.now() - t0 < 5000)
        assert.is_true(errors.ModelAPIError:is(err))
        assert.are.equal(500, err.status)
        assert.are.equal("req_77", err.requestId)
        assert.are.equal("req_77", err.headers["request-id"])
        assert.are.equal("api_error", err.type)
        assert.are.equal(2, err.attempts)
        assert.are.equal("error", err.result.stoppedBy)
        assert.are.equal(2, #srv:calls(wire))
      end)
      with_server(wire, { api_error(wire, 503, "api_error", "busy") }, function(srv)
        local ok, err = pcall(agent_for(srv, wire).generate, agent_for(srv, wire), "go",
          { maxRetries = 1, maxRetryDelay = 10 })
        assert.is_false(ok)
        assert.are.equal(2, err.attempts)
        assert.are.equal(2, #srv:calls(wire))
      end)
    end)

    it("does not retry 400, 401, 403, a spend limit or a context error", function()
      local cases = {
        { api_error(wire, 400, "invalid_request_error", "bad field"), errors.ModelAPIError },
        { api_error(wire, 401, "authentication_error", "bad key"), errors.ModelAPIError },
        { api_error(wire, 403, "permission_error", "no"), errors.ModelAPIError },
        { api_error(wire, 429, "insufficient_quota", "You exceeded your current quota"),
          errors.ModelRateLimitError },
        { wire == "openai"
            and api_error(wire, 400, "context_length_exceeded", "maximum context length is 8k")
            or api_error(wire, 400, "invalid_request_error", "prompt is too long: 210000 tokens"),
          errors.ModelContextError },
      }
      for _, c in ipairs(cases) do
        with_server(wire, { c[1], W.text("never") }, function(srv)
          local ok, err = pcall(agent_for(srv, wire).generate, agent_for(srv, wire), "go",
            { maxRetryDelay = 10 })
          assert.is_false(ok)
          assert.is_true(c[2]:is(err), tostring(err))
          assert.are.equal(c[1].status, err.status)
          assert.are.equal(1, #srv:calls(wire), "status " .. c[1].status .. " was retried")
        end)
      end
    end)

    it("raises an error sent inside the stream; a transient one before content is retried",
      function()
        with_server(wire, {
          W.streamError("overloaded_error", "overloaded"),
          W.text("after overload"),
          W.streamError("invalid_request_error", "the stream says no"),
        }, function(srv)
          local a = agent_for(srv, wire)
          local r = a:generate("go", { maxRetryDelay = 10 })
          assert.are.equal("after overload", r.text)
          local ok, err = pcall(a.generate, a, "again", { maxRetryDelay = 10 })
          assert.is_false(ok)
          assert.is_true(errors.ModelAPIError:is(err))
          assert.are.equal("invalid_request_error", err.type)
          assert.matches("the stream says no", err.message, 1, true)
          assert.are.equal(3, #srv:calls(wire))
        end)
      end)

    it("retries a connection dropped before content, never a stream cut after text", function()
      with_server(wire, {
        { drop = true },
        W.text("second try"),
        ms.stream(upto(W, "partial answer that is cut"), { after = { reset = true } }),
      }, function(srv)
        local a = agent_for(srv, wire)
        local r = a:generate("go", { maxRetryDelay = 10 })
        assert.are.equal("second try", r.text)
        local text = ""
        local ok, err = pcall(a.generate, a, "again", { maxRetryDelay = 10, onChunk = function(c)
          if c.type == "text-delta" then text = text .. c.text end
        end })
        assert.is_false(ok)
        assert.is_true(errors.NetworkError:is(err), tostring(err))
        assert.are.equal("partial answer that is cut", err.partialText)
        assert.are.equal("partial answer that is cut", text)
        assert.are.equal("partial answer that is cut", err.result.text)
        assert.are.equal(3, #srv:calls(wire)) -- no second request for the cut one
      end)
    end)

    it("times out a first chunk that never comes, and a stall between chunks", function()
      with_server(wire, {
        ms.stream("", { after = { stall = true } }),
        ms.stream(upto(W, "begun and then"), { after = { stall = true } }),
      }, function(srv)
        local a = agent_for(srv, wire)
        local ok, err = pcall(a.generate, a, "go", { maxRetries = 0, firstChunkTimeout = 200 })
        assert.is_false(ok)
        assert.is_true(errors.TimeoutError:is(err), tostring(err))
        assert.are.equal("firstChunk", err.timeout)
        local t0 = mastra.now()
        ok, err = pcall(a.generate, a, "go", { maxRetries = 0, chunkTimeout = 200 })
        assert.is_false(ok)
        assert.are.equal("chunk", err.timeout)
        assert.is_true(mastra.now() - t0 < 3000)
        assert.is_true(#err.partialText > 0)
      end)
    end)

    it("ends a stream that trickles on at stepTimeout, and a run at its timeout", function()
      -- a chunk every 150 ms: no chunk timeout fires, the step's and the
      -- run's deadlines do, with what came so far
      local text = ms.sse(W.events({ { text = { "a", "b", "c", "d", "e", "f", "g", "h", "i",
        "j", "k", "l" } } }))
      with_server(wire, { ms.stream(text, { every = 40, delayMs = 150 }),
        ms.stream(text, { every = 40, delayMs = 150 }) }, function(srv)
        local a = agent_for(srv, wire)
        for _, case in ipairs{ { opt = "stepTimeout", which = "step" },
          { opt = "timeout", which = "total" } } do
          local t0 = mastra.now()
          local ok, err = pcall(a.generate, a, "go", { maxRetries = 0, chunkTimeout = 1000,
            [case.opt] = 400 })
          local took = mastra.now() - t0
          assert.is_false(ok)
          assert.is_true(errors.TimeoutError:is(err), tostring(err))
          assert.are.equal(case.which, err.timeout)
          assert.are.equal(400, err.ms)
          assert.matches(case.opt == "stepTimeout" and "(stepTimeout)" or "the run's timeout",
            err.message, 1, true)
          assert.is_true(took >= 390 and took < 3000, case.opt .. " ended after " .. took)
        end
        assert.are.equal(2, #srv:calls(wire)) -- neither is retried
      end)
    end)

    it("cancellation ends the HTTP request", function()
      local text = ms.sse(W.events({ { text = { "a", "b", "c", "d", "e", "f", "g", "h" } } }))
      with_server(wire, { ms.stream(text, { every = 40, delayMs = 150 }) }, function(srv)
        local a = agent_for(srv, wire)
        local got = 0
        local t = mastra.spawn(function()
          return a:generate("go", { onChunk = function(c)
            if c.type == "text-delta" then got = got + 1 end
          end })
        end)
        assert.is_true(util.wait_until(function() return got > 0 end, 5000))
        t:cancel()
        local ok, err = pcall(t.wait, t)
        assert.is_false(ok)
        assert.is_true(errors.CancelledError:is(err))
        assert.are.equal("abort", err.result.stoppedBy)
        local ends = srv:waitFor(function()
          return #srv:ends() > 0
        end, 5000)
        assert.is_true(#ends > 0)
        local e = srv:ends()[1]
        assert.are_not.equal("completed", e.how)
      end)
    end)

    it("cancellation kills running commands and leaves messages valid for both APIs",
      function()
        local dir, base = util.tmpdir()
        local ws = mastra.Workspace.new{ sandbox = mastra.LocalSandbox.new{
          workingDirectory = dir } }
        ws:init()
        local ok0, err0 = pcall(with_server, wire, {
          W.toolUse({
            { id = "q1", name = "mastra_workspace_execute_command",
              input = { command = "echo quick" } },
            { id = "q2", name = "mastra_workspace_execute_command",
              input = { command = "echo $$ > pid; exec sleep 30" } },
          }),
        }, function(srv)
          local a = agent_for(srv, wire, { workspace = ws })
          local t = mastra.spawn(function() return a:generate("go") end)
          -- the shell makes the file before it writes: wait for the number
          local pid
          assert.is_true(util.wait_until(function()
            pid = tonumber((util.read_file(dir .. "/pid") or ""):match("%d+"))
            return pid ~= nil
          end, 5000), "the command wrote its pid")
          assert.is_true(util.alive(pid))
          t:cancel()
          local ok, err = pcall(t.wait, t)
          assert.is_false(ok)
          assert.is_true(errors.CancelledError:is(err))
          assert.is_true(util.wait_until(function() return not util.alive(pid) end, 5000),
            "the command's process died")
          local r = err.result
          assert.are.equal("abort", r.stoppedBy)
          local last = r.messages[#r.messages]
          assert.are.equal("tool", last.role)
          assert.are.equal(2, #last.content) -- one result per call
          assert.are.equal("q1", last.content[1].toolCallId)
          assert.matches("quick", last.content[1].output.value, 1, true)
          assert.are.equal("error-text", last.content[2].output.type)
          assert.matches("cancelled", last.content[2].output.value, 1, true)
          -- both wires take them
          for _, w in ipairs(WIRES) do
            local srv2 = ms.start{ [w] = { ms[w].text("resumed") } }
            local ok2, e2 = pcall(function()
              local a2 = mastra.Agent.new{ model = srv2:model(w), workspace = ws }
              local msgs = r.messages
              msgs[#msgs + 1] = { role = "user", content = "go on" }
              assert.are.equal("resumed", a2:generate(msgs).text)
              msgs[#msgs] = nil
            end)
            srv2:close()
            if not ok2 then error(e2, 0) end
          end
        end)
        ws:destroy()
        util.rm_rf(dir, base)
        if not ok0 then error(err0, 0) end
      end)

    it("a shared rate limiter spaces requests and holds back after a 429", function()
      with_server(wire, {
        { status = 429, headers = { ["retry-after-ms"] = "250" },
          json = { error = { type = "rate_limit_error", message = "slow" } } },
        W.text("1"), W.text("2"), W.text("3"),
      }, function(srv)
        local limiter = mastra.Agent.rateLimiter{ requestsPerMinute = 600 } -- 100 ms apart
        local a = agent_for(srv, wire, { rateLimiter = limiter })
        local t0 = mastra.now()
        mastra.map({ 1, 2, 3 }, function() return a:generate("go") end, { concurrency = 3 })
        assert.are.equal(4, limiter.requests)
        assert.are.equal(1, limiter.penalties)
        assert.is_true(mastra.now() - t0 >= 300, "4 requests, 100 ms apart")
        local calls = srv:calls(wire)
        assert.are.equal(4, #calls)
      end)
    end)
  end)
end
