-- The agent loop: a step asks the model (call.lua), runs the tool calls
-- it made, and goes on while it made some.
--
-- The rules (docs/api.md "mastra.Agent"):
--   * the loop goes on when a step produced tool calls, never because of
--     finish_reason alone: "tool_calls" with no calls ends the run, "stop"
--     with calls (Ollama) runs them;
--   * up to toolCallConcurrency calls run at once, each as a task; the
--     results go back in call order, exactly one per call id;
--   * an unknown tool, arguments that do not parse (not executed; when the
--     step ended for length the result says they were truncated at the
--     output token limit) and a tool's error go back as error results;
--   * the same call with the same arguments more than loopGuard.maxRepeats
--     times in a row (3) gets an error result instead of a run; a model
--     that repeats it once more ends the run (stoppedBy = "loopGuard");
--   * a tool that requires approval asks onApproval(call); with no
--     callback (and no decision in toolApprovals) the run stops, suspended,
--     with the pending calls; r.messages then ends with the assistant turn
--     whose calls wait, and generate(r.messages, {toolApprovals = ...})
--     runs them and goes on;
--   * a run never stops silently: stoppedBy is model, maxSteps, loopGuard,
--     abort, error or suspended; reaching maxSteps adds a warning;
--   * a cancelled run cancels its running tool calls and raises the
--     CancelledError with err.result: the partial result, whose messages
--     are valid for both APIs (every call has one result).
local core = require "mastra.core"
local errors = require "mastra.errors"
local task = require "mastra.task"
local call = require "mastra.agent.call"

local loop = {}

local function array(t) return setmetatable(t, core.jsonArray) end

local function fatal(err)
  return errors.CancelledError:is(err) or errors.InterruptedError:is(err)
end

-- {====== tool calls ======

local function bound(ctx, text)
  local max = ctx.maxToolOutputChars
  if not max or #text <= max then return text end
  local n = max
  while n > 0 do -- not inside a UTF-8 character
    local b = text:byte(n + 1)
    if not b or b < 0x80 or b >= 0xC0 then break end
    n = n - 1
  end
  return text:sub(1, n) .. ("\n[output truncated: %d of %d characters shown; ask for less,"
    .. " e.g. with offset/limit or tail]"):format(n, #text)
end

-- A call as the step assembled it, made ready to run: its input parsed
-- (only now that the step is complete), its tool found.
local function prepare(ctx, raw, i, step_finish)
  local c = { toolCallId = raw.id, toolName = raw.name or "", index = i }
  if c.toolCallId == nil then
    c.toolCallId = ("call_%d_%d"):format(ctx.stepNumber, i)
  end
  local input = raw.input
  local text = raw.argsText
  if input == nil then
    if text == nil or not text:find("%S") then
      input = {}
    else
      local v, err = core.jsonDecode(text)
      if type(v) == "table" and getmetatable(v) ~= core.jsonArray then
        input = v
      else
        c.error = ("Error: the arguments of this call to %s are not a JSON object (%s)%s;"
          .. " it was not run. Call it again with complete arguments.")
          :format(c.toolName, v == nil and tostring(err) or ("got " .. type(v)),
            step_finish == "length"
              and ": they were truncated at the output token limit (finish reason length)"
              or "")
      end
    end
  end
  c.input = input or {}
  c.argsText = text
  if not c.error then
    local tool = ctx.toolsByName[c.toolName]
    if not tool then
      c.error = ("Error: unknown tool '%s' (available: %s)"):format(c.toolName,
        table.concat(ctx.toolNames, ", "))
    else
      c.tool = tool
    end
  end
  return c
end

-- The loop guard: the same call and arguments more than maxRepeats times
-- in a row gets an error result.
local function guard(ctx, c)
  local g = ctx.loopGuard
  if not g then return end
  local key = c.toolName .. "\0" .. core.jsonEncode(c.input)
  if key == ctx.lastCallKey then
    ctx.repeats = ctx.repeats + 1
  else
    ctx.lastCallKey, ctx.repeats = key, 1
  end
  if ctx.repeats > g.maxRepeats and not c.error then
    c.error = ("Error: %s was called with the same arguments %d times in a row; it was not"
      .. " run again. Use the results you have, or change the arguments."):format(c.toolName,
      ctx.repeats - 1)
    c.guarded = true
  end
end

local function run_one(ctx, c)
  local text, is_error
  if c.error then
    text, is_error = c.error, true
  else
    local ok, out, flag = pcall(c.tool.execute, c.input, { toolCallId = c.toolCallId,
      requestContext = ctx.requestContext, agent = ctx.agent })
    if not ok then
      if fatal(out) then error(out, 0) end
      text, is_error = "Error: " .. errors.message(out):gsub("^[^\n:]+%.lua:%d+: ", ""), true
    elseif type(out) == "string" then
      text, is_error = out, flag and true or false
    elseif out == nil then
      text, is_error = "", flag and true or false
    else
      local enc_ok, enc = pcall(core.jsonEncode, out)
      text, is_error = enc_ok and enc or tostring(out), flag and true or false
    end
  end
  local r = { toolCallId = c.toolCallId, toolName = c.toolName, input = c.input,
    output = bound(ctx, text), isError = is_error }
  ctx.emit{ type = "tool-result", toolCallId = r.toolCallId, toolName = r.toolName,
    input = r.input, output = r.output, isError = r.isError, stepNumber = ctx.stepNumber }
  return r
end

-- Run the calls, up to toolCallConcurrency at once, each in a task of its
-- own; results[i] is the result of calls[i]. A cancellation cancels the
-- running ones (their commands are killed) and leaves in `results` the
-- calls that finished.
local function run_calls(ctx, calls, results)
  local n = #calls
  if n == 0 then return end
  local nexti = 1
  local function worker()
    while nexti <= n do
      local i = nexti
      nexti = nexti + 1
      results[i] = run_one(ctx, calls[i])
    end
  end
  local width = math.min(ctx.toolCallConcurrency, n)
  if width == 1 then
    worker()
    return
  end
  local tasks = {}
  local settled = false
  local abandon <close> = setmetatable({}, { -- luacheck: ignore 211
    __close = function()
      if settled then return end
      for _, t in ipairs(tasks) do t:cancel() end
    end,
  })
  for w = 1, width do tasks[w] = task.spawn(worker) end
  while true do
    local pending = {}
    for _, t in ipairs(tasks) do
      if not t:done() then pending[#pending + 1] = t end
    end
    if #pending == 0 then break end
    task.wait(table.unpack(pending))
  end
  settled = true
  for _, t in ipairs(tasks) do t:wait() end -- a worker's failure (a bug) is raised
end

-- }======

-- {====== messages ======

local function assistant_message(text, calls)
  local content = {}
  if text ~= "" then content[1] = { type = "text", text = text } end
  for _, c in ipairs(calls) do
    content[#content + 1] = { type = "tool-call", toolCallId = c.toolCallId,
      toolName = c.toolName, input = c.input }
  end
  return { role = "assistant", content = array(content) }
end

local function tool_message(results)
  local content = {}
  for i, r in ipairs(results) do
    content[i] = { type = "tool-result", toolCallId = r.toolCallId, toolName = r.toolName,
      output = { type = r.isError and "error-text" or "text", value = r.output } }
  end
  return { role = "tool", content = array(content) }
end

-- The calls of the last assistant message that no tool message answers.
local function unanswered(messages)
  local last = messages[#messages]
  if not last or last.role ~= "assistant" or type(last.content) ~= "table" then return nil end
  local calls = {}
  for _, p in ipairs(last.content) do
    if p.type == "tool-call" then
      calls[#calls + 1] = { id = p.toolCallId, name = p.toolName, input = p.input or {} }
    end
  end
  return #calls > 0 and calls or nil
end

-- }======

local function add_usage(total, u)
  if not u then return total end
  total = total or {}
  for _, k in ipairs{ "inputTokens", "outputTokens", "totalTokens", "cachedInputTokens" } do
    if type(u[k]) == "number" then total[k] = (total[k] or 0) + u[k] end
  end
  return total
end

-- Approvals of a step's calls: true to run, or false (denied: an error
-- result), or nil (no decision: the run is suspended).
local function decide(ctx, c)
  if c.error or not c.tool.requireApproval then return true end
  local d = ctx.toolApprovals and ctx.toolApprovals[c.toolCallId]
  if d ~= nil then return d and true or false end
  if ctx.onApproval then
    local ok, reason = ctx.onApproval{ toolCallId = c.toolCallId, toolName = c.toolName,
      input = c.input, stepNumber = ctx.stepNumber }
    if not ok then
      c.error = ("Error: the user did not approve this call to %s%s"):format(c.toolName,
        type(reason) == "string" and (": " .. reason) or "")
      return false
    end
    return true
  end
  return nil
end

--- Run the loop. ctx: the run's settings (init.lua); messages: the
-- conversation so far (copied). Returns the result table.
function loop.run(ctx, messages)
  local r = {
    steps = {}, toolCalls = {}, toolResults = {}, warnings = {}, text = "",
    messages = messages, response = { messages = {} },
  }
  ctx.result = r
  local function push(m)
    messages[#messages + 1] = m
    r.response.messages[#r.response.messages + 1] = m
  end
  ctx.repeats, ctx.lastCallKey = 0, nil
  local guarded_before = false
  local pending = unanswered(messages) -- a suspended run goes on
  local stepNumber = 0
  local ok, err = pcall(function()
    while true do
      local step
      local raw_calls
      if pending then
        step = { stepNumber = stepNumber, text = "", finishReason = "tool-calls", resumed = true }
        raw_calls, pending = pending, nil
      else
        if stepNumber >= ctx.maxSteps then break end
        stepNumber = stepNumber + 1
        ctx.stepNumber = stepNumber
        local body = ctx.body(messages)
        local res = call.run(ctx, body)
        step = { stepNumber = stepNumber, text = res.text, finishReason = res.finishReason
          or "unknown", rawFinishReason = res.rawFinishReason, usage = res.usage,
          response = { id = res.responseId, modelId = res.modelId, headers = res.headers,
            status = res.status }, attempts = res.attempts, warnings = {} }
        raw_calls = res.toolCalls
      end
      ctx.stepNumber = step.stepNumber
      -- exactly one result per call id: a repeated id is dropped
      local calls, seen = {}, {}
      for i, raw in ipairs(raw_calls) do
        local c = prepare(ctx, raw, i, step.finishReason)
        if seen[c.toolCallId] then
          r.warnings[#r.warnings + 1] = ("step %d: the model sent tool call id %s twice; the"
            .. " second was dropped"):format(step.stepNumber, c.toolCallId)
        else
          seen[c.toolCallId] = true
          calls[#calls + 1] = c
        end
      end
      if not step.resumed then
        push(assistant_message(step.text, calls))
        r.text = step.text
      end
      step.toolCalls, step.toolResults = {}, {}
      for _, c in ipairs(calls) do
        local tc = { toolCallId = c.toolCallId, toolName = c.toolName, input = c.input }
        step.toolCalls[#step.toolCalls + 1] = tc
        r.toolCalls[#r.toolCalls + 1] = tc
        ctx.emit{ type = "tool-call", toolCallId = c.toolCallId, toolName = c.toolName,
          input = c.input, stepNumber = step.stepNumber }
      end
      -- approvals, then the loop guard
      local waiting = {}
      for _, c in ipairs(calls) do
        if decide(ctx, c) == nil then waiting[#waiting + 1] = c end
      end
      if #waiting > 0 then
        r.pendingToolCalls = {}
        for _, c in ipairs(waiting) do
          r.pendingToolCalls[#r.pendingToolCalls + 1] = { toolCallId = c.toolCallId,
            toolName = c.toolName, input = c.input }
        end
        r.steps[#r.steps + 1] = step
        r.finishReason, r.stoppedBy = "suspended", "suspended"
        ctx.emit{ type = "step-finish", stepNumber = step.stepNumber, finishReason = "suspended",
          usage = step.usage, text = step.text }
        return
      end
      local guarded = false
      for _, c in ipairs(calls) do
        guard(ctx, c)
        guarded = guarded or c.guarded == true
      end
      local results = {}
      ctx.running = { calls = calls, results = results }
      run_calls(ctx, calls, results)
      ctx.running = nil
      for _, res in ipairs(results) do
        step.toolResults[#step.toolResults + 1] = res
        r.toolResults[#r.toolResults + 1] = res
      end
      if #results > 0 then push(tool_message(results)) end
      r.steps[#r.steps + 1] = step
      r.usage = add_usage(r.usage, step.usage)
      r.finishReason = step.finishReason
      ctx.emit{ type = "step-finish", stepNumber = step.stepNumber,
        finishReason = step.finishReason, usage = step.usage, text = step.text }
      if ctx.onStepFinish then ctx.onStepFinish(step) end
      if #calls == 0 then
        r.stoppedBy = "model"
        return
      end
      if guarded and guarded_before then
        r.stoppedBy = "loopGuard"
        r.warnings[#r.warnings + 1] = ("the model repeated a refused tool call (%s); the run"
          .. " was stopped by the loop guard"):format(calls[#calls].toolName)
        return
      end
      guarded_before = guarded
    end
    r.stoppedBy = "maxSteps"
    r.warnings[#r.warnings + 1] = ("the run reached maxSteps (%d) while the model was still"
      .. " calling tools; raise maxSteps to let it finish"):format(ctx.maxSteps)
  end)
  if ok then
    ctx.emit{ type = "finish", finishReason = r.finishReason, stoppedBy = r.stoppedBy,
      usage = r.usage, text = r.text }
    return r
  end
  -- a failure or a cancellation: the conversation stays valid (every call
  -- of the last assistant turn gets a result), and the error carries the
  -- partial result
  local run = ctx.running
  if run then
    local results = {}
    for i, c in ipairs(run.calls) do
      results[i] = run.results[i] or { toolCallId = c.toolCallId, toolName = c.toolName,
        input = c.input, isError = true, output = fatal(err)
          and "Error: the run was cancelled before this call finished"
          or "Error: the run failed before this call finished" }
    end
    push(tool_message(results))
  end
  r.stoppedBy = fatal(err) and "abort" or "error"
  r.finishReason = r.finishReason or "error"
  if type(err) == "table" then
    if err.partialText then r.text = err.partialText end
    err.result = r
  end
  if not fatal(err) then
    pcall(ctx.emit, { type = "error", error = err })
  end
  error(err, 0)
end

return loop
