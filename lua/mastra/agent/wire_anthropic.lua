-- The Anthropic Messages API (POST {url}/messages, stream = true): the
-- request body from the agent's conversation, and the step that its
-- stream of events makes (text, tool_use blocks, stop_reason, usage).
--
-- The conversation is kept in one neutral shape (lua/mastra/agent/init.lua,
-- the AI SDK's model messages: user, assistant with text and tool-call
-- parts, tool with tool-result parts), so that r.messages continues on
-- either wire; this file turns it into Anthropic's blocks: tool results
-- go back as tool_result blocks of a user turn (is_error set for errors),
-- and consecutive turns of one role are merged, as the API requires.
local core = require "mastra.core"
local errors = require "mastra.errors"
local model = require "mastra.agent.model"

local wire = { name = "anthropic" }

local function ordered(order, t) return setmetatable(t, { __jsonorder = order }) end
local function array(t) return setmetatable(t, core.jsonArray) end

local DEFAULT_MAX_TOKENS = 4096

local function text_of(content)
  if type(content) == "string" then return content end
  local parts = {}
  for _, p in ipairs(content or {}) do
    if p.type == "text" then parts[#parts + 1] = p.text end
  end
  return table.concat(parts)
end

local function blocks_of(m)
  local out = {}
  local content = m.content
  if type(content) == "string" then
    if content ~= "" then
      out[1] = ordered({ "type", "text" }, { type = "text", text = content })
    end
    return out
  end
  for _, p in ipairs(content or {}) do
    if p.type == "text" then
      if p.text ~= "" then
        out[#out + 1] = ordered({ "type", "text" }, { type = "text", text = p.text })
      end
    elseif p.type == "tool-call" then
      out[#out + 1] = ordered({ "type", "id", "name", "input" }, { type = "tool_use",
        id = p.toolCallId, name = p.toolName,
        input = type(p.input) == "table" and p.input or {} })
    elseif p.type == "tool-result" then
      local o = p.output or {}
      out[#out + 1] = ordered({ "type", "tool_use_id", "content", "is_error" }, {
        type = "tool_result", tool_use_id = p.toolCallId, content = tostring(o.value or ""),
        is_error = (o.type == "error-text" or o.type == "error-json") or nil })
    end
  end
  return out
end

--- The body of a request: req = {modelId, system, messages, tools,
-- toolChoice, maxOutputTokens, temperature, providerOptions}.
function wire.body(req)
  local msgs, system = {}, { req.system }
  for _, m in ipairs(req.messages) do
    if m.role == "system" then
      system[#system + 1] = text_of(m.content)
    else
      local role = (m.role == "tool") and "user" or m.role
      local blocks = blocks_of(m)
      if #blocks > 0 then
        local last = msgs[#msgs]
        if last and last.role == role then
          for _, b in ipairs(blocks) do last.content[#last.content + 1] = b end
        else
          msgs[#msgs + 1] = ordered({ "role", "content" }, { role = role, content = array(blocks) })
        end
      end
    end
  end
  local sys = {}
  for _, s in ipairs(system) do if s ~= "" then sys[#sys + 1] = s end end
  local body = {
    model = req.modelId,
    max_tokens = req.maxOutputTokens or DEFAULT_MAX_TOKENS,
    system = #sys > 0 and table.concat(sys, "\n\n") or nil,
    messages = array(msgs),
    temperature = req.temperature,
    stream = true,
  }
  if req.tools and #req.tools > 0 then
    local tools = {}
    for i, t in ipairs(req.tools) do
      tools[i] = ordered({ "name", "description", "input_schema" }, { name = t.name,
        description = t.description, input_schema = t.inputSchema })
    end
    body.tools = array(tools)
    local c = req.toolChoice
    if c == "required" then body.tool_choice = { type = "any" }
    elseif c == "none" then body.tool_choice = { type = "none" }
    elseif type(c) == "table" then body.tool_choice = ordered({ "type", "name" },
      { type = "tool", name = c.toolName })
    elseif c == "auto" then body.tool_choice = { type = "auto" } end
  end
  for k, v in pairs(req.providerOptions or {}) do body[k] = v end
  return ordered({ "model", "max_tokens", "system", "messages", "tools", "tool_choice",
    "temperature", "stream" }, body)
end

local FINISH = { end_turn = "stop", stop_sequence = "stop", tool_use = "tool-calls",
  max_tokens = "length", refusal = "content-filter", pause_turn = "other" }

local Step = {}
Step.__index = Step

--- A step's stream: st:event(ev) for each SSE event (true once the stream
-- is over), st:result() at the end. emit(chunk) gets the text deltas.
function wire.step(m, emit, headers)
  return setmetatable({ m = m, emit = emit, headers = headers, text = {}, calls = {},
    byIndex = {}, content = false }, Step)
end

function Step:event(ev)
  local d, err = core.jsonDecode(ev.data)
  if d == nil then
    errors.ModelAPIError:raise({ message = ("model %s: the stream of %s sent an event that"
      .. " is not JSON (%s): %s"):format(self.m.id, self.m.url, err, ev.data:sub(1, 200)),
      url = self.m.url, headers = self.headers, retryable = false }, 0)
  end
  local kind = ev.event ~= "message" and ev.event or d.type
  if kind == "error" then
    error(model.apiError(self.m, nil, self.headers, d, true), 0)
  elseif kind == "message_start" then
    local msg = d.message or {}
    self.id, self.modelId = msg.id, msg.model
    local u = msg.usage
    if type(u) == "table" then
      self.inputTokens = u.input_tokens
      self.outputTokens = u.output_tokens
      self.cachedInputTokens = u.cache_read_input_tokens
    end
  elseif kind == "content_block_start" then
    local b = d.content_block or {}
    if b.type == "text" then
      if type(b.text) == "string" and b.text ~= "" then self:_text(b.text) end
    elseif b.type == "tool_use" then
      local call = { id = b.id, name = b.name, parts = {} }
      if type(b.input) == "table" and next(b.input) ~= nil then call.input = b.input end
      self.calls[#self.calls + 1] = call
      self.byIndex[d.index or #self.calls] = call
      self.content = true
    end
  elseif kind == "content_block_delta" then
    local delta = d.delta or {}
    if delta.type == "text_delta" and type(delta.text) == "string" then
      self:_text(delta.text)
    elseif delta.type == "input_json_delta" then
      local call = self.byIndex[d.index]
      if call and type(delta.partial_json) == "string" then
        call.parts[#call.parts + 1] = delta.partial_json
      end
    end
  elseif kind == "message_delta" then
    local delta = d.delta or {}
    if delta.stop_reason ~= nil and delta.stop_reason ~= core.null then
      self.rawFinish = delta.stop_reason
    end
    local u = d.usage
    if type(u) == "table" then
      if u.output_tokens then self.outputTokens = u.output_tokens end
      if u.input_tokens then self.inputTokens = u.input_tokens end
    end
  elseif kind == "message_stop" then
    self.done = true
    return true
  end
  return false
end

function Step:_text(s)
  self.text[#self.text + 1] = s
  self.content = true
  self.emit{ type = "text-delta", text = s }
end

function Step:result()
  local calls = {}
  for i, c in ipairs(self.calls) do
    local args = table.concat(c.parts)
    calls[i] = { id = c.id, name = c.name, argsText = args ~= "" and args or nil,
      input = args == "" and c.input or nil }
  end
  local usage
  if self.inputTokens or self.outputTokens then
    usage = { inputTokens = self.inputTokens, outputTokens = self.outputTokens,
      totalTokens = (self.inputTokens and self.outputTokens)
        and self.inputTokens + self.outputTokens or nil,
      cachedInputTokens = self.cachedInputTokens }
  end
  return {
    text = table.concat(self.text), toolCalls = calls, usage = usage,
    rawFinishReason = self.rawFinish,
    finishReason = self.rawFinish and (FINISH[self.rawFinish] or "other") or nil,
    responseId = self.id, modelId = self.modelId, finished = self.done == true,
  }
end

return wire
