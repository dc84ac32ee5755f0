-- mastra.Agent: a model drives the Workspace tools in a loop, in the shape
-- of upstream's Agent (docs/api.md "mastra.Agent", docs/guide-agent.md).
--
--   local agent = mastra.Agent.new{ id = "code-agent", name = "Code Agent",
--     instructions = "You are a coding assistant working in this workspace.",
--     model = "anthropic/claude-sonnet-4-6", workspace = ws }
--   local r = agent:generate('Print "Hello, world!" and show the current directory.')
--   print(r.text)
--
-- An agent holds its configuration only: every run has its own state, so
-- one agent serves many runs at once (mastra.map over prompts). The files
-- of this folder: sse.lua (the event stream), model.lua (providers, keys,
-- URLs, API errors), wire_anthropic.lua and wire_openai.lua (the two
-- APIs), call.lua (one model call: streaming, timeouts, retries),
-- loop.lua (steps and tool calls), limiter.lua (a shared request rate).
local core = require "mastra.core"
local options = require "mastra.options"
local task = require "mastra.task"
local model = require "mastra.agent.model"
local loop = require "mastra.agent.loop"
local limiter = require "mastra.agent.limiter"

local WIRES = {
  anthropic = require "mastra.agent.wire_anthropic",
  openai = require "mastra.agent.wire_openai",
}

local Agent = { __name = "mastra.Agent" }
Agent.__index = Agent

Agent.rateLimiter = limiter.new
Agent.resolveModel = model.resolve

local DEFAULTS = {
  maxSteps = 5, toolCallConcurrency = 10, maxRetries = 2, maxRetryDelay = 30000,
  maxToolOutputTokens = 8000,
}

local function is_table(what)
  return function(v) return type(v) == "table", what end
end

local function nonneg_integer(v)
  return math.type(v) == "integer" and v >= 0, "an integer >= 0"
end

local function tool_choice(v)
  if v == "auto" or v == "none" or v == "required" then return true end
  if type(v) == "table" and v.type == "tool" and type(v.toolName) == "string" then return true end
  return false, '"auto", "none", "required" or {type = "tool", toolName = name}'
end

local function loop_guard(v)
  if v == false then return true end
  if type(v) == "table" and math.type(v.maxRepeats) == "integer" and v.maxRepeats >= 1 then
    for k in pairs(v) do
      if k ~= "maxRepeats" then
        return false, "false or {maxRepeats = n} (unknown key " .. tostring(k) .. ")"
      end
    end
    return true
  end
  return false, "false or {maxRepeats = n}"
end

local function positive_ms(v)
  return type(v) == "number" and v > 0 and v < math.huge, "a number of milliseconds > 0"
end

local GEN_OPTS = {
  maxSteps = options.positive_integer,
  toolChoice = tool_choice,
  toolCallConcurrency = options.positive_integer,
  onStepFinish = options.func,
  onChunk = options.func,
  onApproval = options.func,
  onRetry = options.func,
  maxRetries = nonneg_integer,
  maxRetryDelay = options.ms,
  timeout = positive_ms,
  stepTimeout = positive_ms,
  firstChunkTimeout = positive_ms,
  chunkTimeout = positive_ms,
  maxOutputTokens = options.positive_integer,
  temperature = function(v) return type(v) == "number", "a number" end,
  maxToolOutputTokens = options.positive_integer,
  loopGuard = loop_guard,
  requestContext = is_table("a table"),
  toolApprovals = is_table("a table of toolCallId = true | false"),
  instructions = options.string_or_function,
  providerOptions = is_table("a table"),
}

local function tools_option(v)
  if type(v) ~= "table" then
    return false, "a table of tools (name = {description, inputSchema, execute})"
  end
  return true
end

local NEW_OPTS = {
  id = options.string,
  name = options.string,
  description = options.string,
  instructions = options.string_or_function,
  model = function(v)
    return type(v) == "string" or type(v) == "table", 'a "provider/model" string or a table'
  end,
  workspace = is_table("a mastra.Workspace"),
  tools = tools_option,
  defaultOptions = is_table("a table of generate options"),
  rateLimiter = function(v) return limiter.is(v), "a limiter from mastra.Agent.rateLimiter" end,
}

local TOOL_OPTS = {
  id = options.string,
  name = options.string,
  description = options.string,
  inputSchema = is_table("a JSON schema table"),
  execute = options.func,
  requireApproval = options.boolean,
}

local function check_tool(where, key, t)
  options.check(("%s: tools.%s"):format(where, tostring(key)), t, TOOL_OPTS, 5)
  local name = t.name or (type(key) == "string" and key) or t.id
  if type(name) ~= "string" or not name:match("^[%w_%-]+$") or #name > 64 then
    error(("%s: tool %s needs a name of 1 to 64 letters, digits, '_' or '-'")
      :format(where, tostring(key)), 4)
  end
  if type(t.execute) ~= "function" then
    error(("%s: tool '%s' needs an execute function"):format(where, name), 4)
  end
  return { id = t.id or name, name = name, description = t.description or "",
    inputSchema = t.inputSchema or setmetatable({ type = "object", properties = {} },
      { __jsonorder = { "type", "properties" } }),
    execute = t.execute, requireApproval = t.requireApproval or false }
end

function Agent.new(opts)
  local where = "Agent.new"
  if type(opts) ~= "table" then
    error(("%s: expected an options table (got %s)"):format(where, options.describe(opts)), 2)
  end
  options.check(where, opts, NEW_OPTS)
  if opts.model == nil then
    error(where .. ': option \'model\' is required ("provider/model" or a table)', 2)
  end
  model.check(where, opts.model)
  local tools = {}
  if opts.tools then
    local keys = {}
    for k in pairs(opts.tools) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do tools[#tools + 1] = check_tool(where, k, opts.tools[k]) end
  end
  if opts.defaultOptions then
    options.check(where .. ": defaultOptions", opts.defaultOptions, GEN_OPTS)
  end
  local id = opts.id or ("agent-" .. core.newid())
  return setmetatable({
    id = id,
    name = opts.name or id,
    description = opts.description,
    instructions = opts.instructions,
    model = opts.model,
    workspace = opts.workspace,
    tools = tools,
    defaultOptions = opts.defaultOptions or {},
    rateLimiter = opts.rateLimiter or false, -- false: not the class's Agent.rateLimiter
  }, Agent)
end

local function check_self(where, self)
  options.self(where, self, Agent, 4)
end

function Agent.__tostring(self)
  return ("mastra.Agent: %s (%s)"):format(self.id, type(self.model) == "string" and self.model
    or tostring(self.model.id))
end

--- The system prompt of a run: the agent's instructions (a string, or
-- instructions{requestContext, agent}), then the workspace's.
function Agent:getInstructions(opts)
  check_self("Agent:getInstructions", self)
  opts = opts or {}
  local parts = {}
  local ins = opts.instructions or self.instructions
  if type(ins) == "function" then
    ins = ins{ requestContext = opts.requestContext or {}, agent = self }
    if ins ~= nil and type(ins) ~= "string" then
      error("Agent:getInstructions: the instructions function must return a string (got "
        .. type(ins) .. ")", 2)
    end
  end
  if ins and ins ~= "" then parts[#parts + 1] = ins end
  local ws = self.workspace
  if ws and type(ws.getInstructions) == "function" then
    local w = ws:getInstructions()
    if w and w ~= "" then parts[#parts + 1] = w end
  end
  return table.concat(parts, "\n\n")
end

--- The toolset of a run: the workspace's tools, then the agent's own.
function Agent:getTools()
  check_self("Agent:getTools", self)
  local list = {}
  if self.workspace and type(self.workspace.tools) == "function" then
    for _, t in ipairs(self.workspace:tools()) do list[#list + 1] = t end
  end
  for _, t in ipairs(self.tools) do list[#list + 1] = t end
  return list
end

-- The conversation a run starts from: a copy of the messages given, then
-- the prompt as a user message.
local function conversation(where, input)
  local out = {}
  if type(input) == "string" then
    out[1] = { role = "user", content = input }
    return out
  end
  if type(input) ~= "table" then
    error(("%s: argument #1 must be a prompt (a string) or a list of messages (got %s)")
      :format(where, options.describe(input)), 4)
  end
  if input.role then input = { input } end
  for i, m in ipairs(input) do
    if type(m) ~= "table" or (m.role ~= "user" and m.role ~= "assistant" and m.role ~= "tool"
        and m.role ~= "system") then
      error(("%s: message %d must be a table with role user, assistant, tool or system")
        :format(where, i), 4)
    end
    out[i] = m
  end
  if #out == 0 then error(where .. ": the list of messages is empty", 4) end
  return out
end

local function merged(self, where, opts)
  options.check(where, opts, GEN_OPTS, 4)
  local o = {}
  for k, v in pairs(DEFAULTS) do o[k] = v end
  for k, v in pairs(self.defaultOptions) do o[k] = v end
  for k, v in pairs(opts or {}) do o[k] = v end
  if o.loopGuard == nil then o.loopGuard = { maxRepeats = 3 } end
  return o
end

-- The settings of one run (nothing of it is shared with another run).
function Agent:_context(where, o, emit)
  local m = model.resolve(self.model)
  local wire = WIRES[m.api]
  local tools = self:getTools()
  local by_name, names = {}, {}
  for _, t in ipairs(tools) do
    if by_name[t.name] then
      error(("%s: two tools are named '%s'"):format(where, t.name), 4)
    end
    by_name[t.name] = t
    names[#names + 1] = t.name
  end
  local system = self:getInstructions{ requestContext = o.requestContext,
    instructions = o.instructions }
  local ctx = {
    agent = self, model = m, wire = wire, emit = emit,
    toolsByName = by_name, toolNames = names,
    maxSteps = o.maxSteps, toolCallConcurrency = o.toolCallConcurrency,
    maxRetries = o.maxRetries, maxRetryDelay = o.maxRetryDelay,
    timeout = o.timeout, stepTimeout = o.stepTimeout,
    firstChunkTimeout = o.firstChunkTimeout, chunkTimeout = o.chunkTimeout,
    deadline = o.timeout and core.now() + o.timeout or nil,
    onStepFinish = o.onStepFinish, onApproval = o.onApproval, onRetry = o.onRetry,
    toolApprovals = o.toolApprovals, requestContext = o.requestContext or {},
    loopGuard = o.loopGuard, limiter = self.rateLimiter or nil,
    maxToolOutputChars = o.maxToolOutputTokens * 4,
  }
  ctx.emitText = function(c)
    c.stepNumber = ctx.stepNumber
    emit(c)
  end
  local req = { modelId = m.modelId, system = system, tools = tools, toolChoice = o.toolChoice,
    maxOutputTokens = o.maxOutputTokens or m.maxOutputTokens, temperature = o.temperature,
    providerOptions = o.providerOptions or m.providerOptions }
  ctx.body = function(messages)
    req.messages = messages
    return core.jsonEncode(wire.body(req))
  end
  return ctx
end

local function run(self, where, input, opts, emit)
  local o = merged(self, where, opts)
  local messages = conversation(where, input)
  local on_chunk = o.onChunk
  local out = emit or on_chunk or function() end
  local ctx = self:_context(where, o, out)
  return loop.run(ctx, messages)
end

--- Run the loop on a prompt (or a list of messages) and return the result:
-- {text, steps, toolCalls, toolResults, usage, finishReason, stoppedBy,
-- messages, response, warnings, pendingToolCalls}.
function Agent:generate(input, opts)
  check_self("Agent:generate", self)
  local r = run(self, "Agent:generate", input, opts)
  return r -- not a tail call: errors point at the caller
end

-- {====== streams ======

local Stream = { __name = "mastra.Agent.Stream" }
Stream.__index = Stream

--- The same run as chunks: with onChunk, they go to it and the result is
-- returned; without, a stream object: s:chunks() iterates them (waiting
-- in the calling task), s:result() waits for the result, s:cancel().
function Agent:stream(input, opts)
  local where = "Agent:stream"
  check_self(where, self)
  if type(opts) == "table" and opts.onChunk then
    local r = run(self, where, input, opts)
    return r
  end
  -- check the options and the model now, in the caller
  merged(self, where, opts)
  model.resolve(self.model)
  local s = setmetatable({ _queue = {}, _head = 1, _tail = 0, _key = core.newid(),
    _finished = false }, Stream)
  local function emit(c)
    s._tail = s._tail + 1
    s._queue[s._tail] = c
    task.wake(s._key)
  end
  s.task = task.spawn(function()
    local ok, r = pcall(run, self, where, input, opts, emit)
    s._finished = true
    task.wake(s._key)
    if not ok then error(r, 0) end
    return r
  end)
  return s
end

--- An iterator over the chunks, in order; it ends after "finish" or
-- "error" (then s:result() raises the error).
function Stream:chunks()
  return function()
    while true do
      local c = self._queue[self._head]
      if c then
        self._queue[self._head] = nil
        self._head = self._head + 1
        return c
      end
      if self._finished or self.task:done() then return nil end
      task.wait(self._key, self.task)
    end
  end
end

--- The run's result (waits for it); raises its error.
function Stream:result()
  local r = self.task:wait()
  return r
end

--- Cancel the run (its HTTP request and tool calls end).
function Stream:cancel()
  return self.task:cancel()
end

-- }======

return Agent
