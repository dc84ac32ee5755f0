-- OpenAI Chat Completions (POST {url}/chat/completions, stream = true),
-- which every provider but anthropic speaks (groq, mistral, openrouter,
-- deepseek, ollama, lmstudio, vLLM, llama.cpp ...): the request body from
-- the agent's neutral conversation (see wire_anthropic.lua), and the step
-- that the stream of chunks makes.
--
-- Tool calls come in pieces keyed by `index`; servers differ, and all of
-- these are accepted: the id and name in the first piece and the
-- arguments spread over the next ones; a call sent whole in one piece;
-- arguments as an object rather than JSON text (some local servers); no
-- arguments, or "" (meaning {}); a new id under an index already used (a
-- new call, not more of the old one); finish_reason "stop" with calls
-- (Ollama). The arguments are parsed by the loop, once the step is over.
local core = require "mastra.core"
local errors = require "mastra.errors"
local model = require "mastra.agent.model"

local wire = { name = "openai" }

local function ordered(order, t) return setmetatable(t, { __jsonorder = order }) end
local function array(t) return setmetatable(t, core.jsonArray) end

local function text_of(content)
  if type(content) == "string" then return content end
  local parts = {}
  for _, p in ipairs(content or {}) do
    if p.type == "text" then parts[#parts + 1] = p.text end
  end
  return table.concat(parts)
end

--- The body of a request (req as wire_anthropic.body takes it).
function wire.body(req)
  local msgs = {}
  if req.system and req.system ~= "" then
    msgs[1] = ordered({ "role", "content" }, { role = "system", content = req.system })
  end
  for _, m in ipairs(req.messages) do
    if m.role == "system" or m.role == "user" then
      msgs[#msgs + 1] = ordered({ "role", "content" },
        { role = m.role, content = text_of(m.content) })
    elseif m.role == "assistant" then
      local text, calls = {}, {}
      if type(m.content) == "string" then
        text[1] = m.content
      else
        for _, p in ipairs(m.content or {}) do
          if p.type == "text" then
            text[#text + 1] = p.text
          elseif p.type == "tool-call" then
            calls[#calls + 1] = ordered({ "id", "type", "function" }, { id = p.toolCallId,
              type = "function", ["function"] = ordered({ "name", "arguments" }, {
                name = p.toolName,
                arguments = core.jsonEncode(type(p.input) == "table" and p.input or {}) }) })
          end
        end
      end
      local t = table.concat(text)
      msgs[#msgs + 1] = ordered({ "role", "content", "tool_calls" }, { role = "assistant",
        content = (t ~= "" or #calls == 0) and t or core.null,
        tool_calls = #calls > 0 and array(calls) or nil })
    elseif m.role == "tool" then
      for _, p in ipairs(m.content or {}) do
        if p.type == "tool-result" then
          local o = p.output or {}
          msgs[#msgs + 1] = ordered({ "role", "tool_call_id", "content" }, { role = "tool",
            tool_call_id = p.toolCallId, content = tostring(o.value or "") })
        end
      end
    end
  end
  local body = {
    model = req.modelId, messages = array(msgs), temperature = req.temperature,
    max_tokens = req.maxOutputTokens, stream = true,
    stream_options = { include_usage = true },
  }
  if req.tools and #req.tools > 0 then
    local tools = {}
    for i, t in ipairs(req.tools) do
      tools[i] = ordered({ "type", "function" }, { type = "function",
        ["function"] = ordered({ "name", "description", "parameters" }, { name = t.name,
          description = t.description, parameters = t.inputSchema }) })
    end
    body.tools = array(tools)
    local c = req.toolChoice
    if type(c) == "table" then
      body.tool_choice = ordered({ "type", "function" }, { type = "function",
        ["function"] = { name = c.toolName } })
    else
      body.tool_choice = c
    end
  end
  for k, v in pairs(req.providerOptions or {}) do body[k] = v end
  return ordered({ "model", "messages", "tools", "tool_choice", "temperature", "max_tokens",
    "stream", "stream_options" }, body)
end

local FINISH = { stop = "stop", length = "length", tool_calls = "tool-calls",
  function_call = "tool-calls", content_filter = "content-filter" }

local Step = {}
Step.__index = Step

function wire.step(m, emit, headers)
  return setmetatable({ m = m, emit = emit, headers = headers, text = {}, calls = {},
    byIndex = {}, content = false }, Step)
end

function Step:_call(tc, pos)
  local idx = math.tointeger(tc.index) or pos - 1
  local cur = self.byIndex[idx]
  local id = type(tc.id) == "string" and tc.id ~= "" and tc.id or nil
  if cur == nil or (id and cur.id and id ~= cur.id) then
    cur = { id = id, parts = {} }
    self.calls[#self.calls + 1] = cur
    self.byIndex[idx] = cur
  elseif id and not cur.id then
    cur.id = id
  end
  self.content = true
  local f = type(tc["function"]) == "table" and tc["function"] or {}
  if type(f.name) == "string" and f.name ~= "" then
    if cur.name == nil then cur.name = f.name
    elseif cur.name ~= f.name then cur.name = cur.name .. f.name end
  end
  local a = f.arguments
  if type(a) == "string" then
    cur.parts[#cur.parts + 1] = a
  elseif type(a) == "table" then
    cur.input = a
  end
end

function Step:event(ev)
  if ev.data == "[DONE]" then
    self.done = true
    return true
  end
  local d, err = core.jsonDecode(ev.data)
  if d == nil then
    errors.ModelAPIError:raise({ message = ("model %s: the stream of %s sent data that is"
      .. " not JSON (%s): %s"):format(self.m.id, self.m.url, err, ev.data:sub(1, 200)),
      url = self.m.url, headers = self.headers, retryable = false }, 0)
  end
  if type(d) ~= "table" then return false end
  if d.error ~= nil or ev.event == "error" then
    error(model.apiError(self.m, nil, self.headers, d, true), 0)
  end
  self.id = self.id or d.id
  self.modelId = self.modelId or d.model
  if type(d.usage) == "table" then
    local u = d.usage
    self.usage = { inputTokens = math.tointeger(u.prompt_tokens) or u.prompt_tokens,
      outputTokens = math.tointeger(u.completion_tokens) or u.completion_tokens,
      totalTokens = u.total_tokens,
      cachedInputTokens = type(u.prompt_tokens_details) == "table"
        and u.prompt_tokens_details.cached_tokens or nil }
  end
  local choice = type(d.choices) == "table" and d.choices[1] or nil
  if type(choice) ~= "table" then return false end
  local delta = type(choice.delta) == "table" and choice.delta
    or type(choice.message) == "table" and choice.message or {}
  if type(delta.content) == "string" and delta.content ~= "" then
    self.text[#self.text + 1] = delta.content
    self.content = true
    self.emit{ type = "text-delta", text = delta.content }
  end
  if type(delta.tool_calls) == "table" then
    for pos, tc in ipairs(delta.tool_calls) do
      if type(tc) == "table" then self:_call(tc, pos) end
    end
  end
  if type(choice.finish_reason) == "string" then self.rawFinish = choice.finish_reason end
  return false
end

function Step:result()
  local calls = {}
  for i, c in ipairs(self.calls) do
    local args = table.concat(c.parts)
    calls[i] = { id = c.id, name = c.name, argsText = args ~= "" and args or nil,
      input = args == "" and c.input or nil }
  end
  return {
    text = table.concat(self.text), toolCalls = calls, usage = self.usage,
    rawFinishReason = self.rawFinish,
    finishReason = self.rawFinish and (FINISH[self.rawFinish] or "other") or nil,
    responseId = self.id, modelId = self.modelId,
    -- [DONE], or a finish_reason (a server that ends without [DONE])
    finished = self.done == true or self.rawFinish ~= nil,
  }
end

return wire
