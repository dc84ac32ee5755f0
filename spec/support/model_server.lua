-- A scripted model server for the agent's specs: the Anthropic Messages
-- API and OpenAI Chat Completions, streamed as SSE chunk by chunk, split
-- where a spec says, with delays, stalls, cuts and error statuses. It runs
-- on spec/support/fault-platform.c (RESPONSE "chunks"), as a process of
-- its own that logs every request (body and headers) to a file; see
-- spec/support/fault.lua for starting and stopping it.
--
--   local ms = require "spec.support.model_server"
--   local srv = ms.start{
--     anthropic = { ms.anthropic.toolUse{ { id = "t1", name = "x", input = {} } },
--                   ms.anthropic.text("done") },
--     openai = { ms.openai.text("hi", { split = { 3, 7 }, delayMs = 20 }) },
--   }
--   srv:model("anthropic")  -- {id = "anthropic/claude-test", url = ..., apiKey = "k", api = ...}
--   srv:bodies("anthropic") -- the decoded JSON body of each request, in order
--   srv:stop()
--
-- A turn is a fault-platform RESPONSE: ms.<wire>.text/toolUse/... build
-- a streamed 200; {status = 429, headers = {...}, json = {...}} is an
-- error; ms.stream(events, opts) streams any SSE text (opts.split: byte
-- offsets to cut at, opts.every: pieces of n bytes, opts.delayMs: before
-- every piece but the first, opts.firstDelayMs: before the first, after
-- the head, opts.after: a CHUNK ending like {drop=true}).
local core = require "mastra.core"
local fault = require "spec.support.fault"

local ms = { anthropic = {}, openai = {} }

local PATHS = { anthropic = "/anthropic/v1/messages", openai = "/openai/v1/chat/completions" }
local BASES = { anthropic = "/anthropic/v1", openai = "/openai/v1" }
ms.PATHS = PATHS

local function ordered(order, t) return setmetatable(t, { __jsonorder = order }) end

--- SSE text of events: {event = name, data = table | string} or a raw string.
function ms.sse(events)
  local out = {}
  for _, e in ipairs(events) do
    if type(e) == "string" then
      out[#out + 1] = e
    else
      local data = type(e.data) == "table" and core.jsonEncode(e.data) or e.data
      out[#out + 1] = (e.event and ("event: " .. e.event .. "\n") or "") .. "data: " .. data
        .. "\n\n"
    end
  end
  return table.concat(out)
end

--- Pieces of text: cut at the byte offsets of split (after that many
-- bytes), or every n bytes.
function ms.split(text, split, every)
  local pieces, pos = {}, 1
  if every then
    while pos <= #text do
      pieces[#pieces + 1] = text:sub(pos, pos + every - 1)
      pos = pos + every
    end
    return pieces
  end
  for _, at in ipairs(split or {}) do
    pieces[#pieces + 1] = text:sub(pos, at)
    pos = at + 1
  end
  pieces[#pieces + 1] = text:sub(pos)
  return pieces
end

--- A streamed 200 response of SSE text (or events).
function ms.stream(events, opts)
  opts = opts or {}
  local text = type(events) == "string" and events or ms.sse(events)
  local chunks = {}
  for i, p in ipairs(ms.split(text, opts.split, opts.every)) do
    local delay
    if i == 1 then delay = opts.firstDelayMs else delay = opts.delayMs end
    chunks[i] = { data = p, delayMs = delay }
  end
  if opts.after then chunks[#chunks + 1] = opts.after end
  return { status = opts.status or 200, headers = opts.headers, chunks = chunks }
end

-- {====== Anthropic ======

local A = ms.anthropic

--- The events of a message: opts.blocks = list of {text = s} or {id, name,
-- input (a table, sent whole) or json = {pieces}}; opts.stop (end_turn,
-- tool_use ...), opts.usage (false: none), opts.raw = true: the events only.
function A.events(blocks, opts)
  opts = opts or {}
  local ev = {}
  local usage_start = opts.usage ~= false and { input_tokens = opts.inputTokens or 11,
    output_tokens = 1 } or nil
  ev[#ev + 1] = { event = "message_start", data = { type = "message_start", message = {
    id = opts.id or "msg_1", type = "message", role = "assistant", model = "claude-test",
    content = setmetatable({}, core.jsonArray), usage = usage_start } } }
  ev[#ev + 1] = ": a comment line\n\n"
  ev[#ev + 1] = { event = "ping", data = { type = "ping" } }
  for i, b in ipairs(blocks) do
    local index = i - 1
    if b.text then
      ev[#ev + 1] = { event = "content_block_start", data = { type = "content_block_start",
        index = index, content_block = { type = "text", text = "" } } }
      for _, piece in ipairs(type(b.text) == "table" and b.text or { b.text }) do
        ev[#ev + 1] = { event = "content_block_delta", data = { type = "content_block_delta",
          index = index, delta = { type = "text_delta", text = piece } } }
      end
    else
      ev[#ev + 1] = { event = "content_block_start", data = { type = "content_block_start",
        index = index, content_block = { type = "tool_use", id = b.id, name = b.name,
          input = b.json and {} or (b.input or {}) } } }
      for _, piece in ipairs(b.json or {}) do
        ev[#ev + 1] = { event = "content_block_delta", data = { type = "content_block_delta",
          index = index, delta = { type = "input_json_delta", partial_json = piece } } }
      end
    end
    ev[#ev + 1] = { event = "content_block_stop", data = { type = "content_block_stop",
      index = index } }
  end
  ev[#ev + 1] = { event = "some_future_event", data = { type = "some_future_event" } }
  ev[#ev + 1] = { event = "message_delta", data = { type = "message_delta",
    delta = { stop_reason = opts.stop or "end_turn" },
    usage = opts.usage ~= false and { output_tokens = opts.outputTokens or 7 } or nil } }
  if not opts.noStop then
    ev[#ev + 1] = { event = "message_stop", data = { type = "message_stop" } }
  end
  return ev
end

function A.text(text, opts)
  opts = opts or {}
  return ms.stream(A.events({ { text = text } }, opts), opts)
end

--- calls: list of {id, name, input | json}; opts.text: text before them.
function A.toolUse(calls, opts)
  opts = opts or {}
  local blocks = {}
  if opts.text then blocks[1] = { text = opts.text } end
  for _, c in ipairs(calls) do blocks[#blocks + 1] = c end
  opts.stop = opts.stop or "tool_use"
  return ms.stream(A.events(blocks, opts), opts)
end

--- An error event inside a 200 stream.
function A.streamError(etype, message, opts)
  return ms.stream({ { event = "error", data = { type = "error",
    error = { type = etype, message = message } } } }, opts)
end

-- }======

-- {====== OpenAI ======

local O = ms.openai

local function chunk(delta, finish, extra)
  local choice = ordered({ "index", "delta", "finish_reason" }, { index = 0, delta = delta,
    finish_reason = finish or core.null })
  local t = { id = "chatcmpl-1", object = "chat.completion.chunk", model = "gpt-test",
    choices = { choice } }
  for k, v in pairs(extra or {}) do t[k] = v end
  return { data = t }
end
O.chunk = chunk

--- The chunks of a completion: pieces = list of {text = s} or {index, id,
-- name, args = {pieces} | object}, or raw chunk tables {data = ...};
-- opts.finish ("stop", "tool_calls", ...), opts.usage (false: none),
-- opts.noDone: no [DONE].
function O.events(pieces, opts)
  opts = opts or {}
  local ev = { chunk({ role = "assistant", content = "" }) }
  ev[#ev + 1] = ": keep-alive\n\n"
  for _, p in ipairs(pieces) do
    if p.data then
      ev[#ev + 1] = p
    elseif p.text then
      for _, t in ipairs(type(p.text) == "table" and p.text or { p.text }) do
        ev[#ev + 1] = chunk({ content = t })
      end
    else
      local args = p.args
      local first = { index = p.index or 0, id = p.id, type = "function",
        ["function"] = { name = p.name, arguments = type(args) == "table" and args.object
          or (type(args) == "table" and args[1]) or (type(args) == "string" and args) or "" } }
      ev[#ev + 1] = chunk({ tool_calls = { first } })
      if type(args) == "table" and not args.object then
        for i = 2, #args do
          ev[#ev + 1] = chunk({ tool_calls = { { index = p.index or 0,
            ["function"] = { arguments = args[i] } } } })
        end
      end
    end
  end
  ev[#ev + 1] = chunk({}, opts.finish or "stop")
  if opts.usage ~= false then
    ev[#ev + 1] = { data = { id = "chatcmpl-1", object = "chat.completion.chunk",
      model = "gpt-test", choices = setmetatable({}, core.jsonArray),
      usage = { prompt_tokens = opts.inputTokens or 11, completion_tokens = opts.outputTokens or 7,
        total_tokens = (opts.inputTokens or 11) + (opts.outputTokens or 7) } } }
  end
  if not opts.noDone then ev[#ev + 1] = "data: [DONE]\n\n" end
  return ev
end

function O.text(text, opts)
  opts = opts or {}
  return ms.stream(O.events({ { text = text } }, opts), opts)
end

--- calls: list of {id, name, input | json} as A.toolUse takes them.
function O.toolUse(calls, opts)
  opts = opts or {}
  local pieces = {}
  if opts.text then pieces[1] = { text = opts.text } end
  for i, c in ipairs(calls) do
    pieces[#pieces + 1] = { index = c.index or (i - 1), id = c.id, name = c.name,
      args = c.json or core.jsonEncode(c.input or {}) }
  end
  opts.finish = opts.finish or "tool_calls"
  return ms.stream(O.events(pieces, opts), opts)
end

function O.streamError(etype, message, opts)
  return ms.stream({ { data = { error = { type = etype, code = etype, message = message } } } },
    opts)
end

-- }======

--- Start a server: turns = {anthropic = {RESPONSE...}, openai = {...},
-- routes = {extra fault-platform routes}}.
function ms.start(turns)
  local routes = {}
  for _, wire in ipairs{ "anthropic", "openai" } do
    if turns[wire] then
      routes[#routes + 1] = { method = "POST", path = PATHS[wire], responses = turns[wire] }
    end
  end
  for _, r in ipairs(turns.routes or {}) do routes[#routes + 1] = r end
  local srv = fault.start{ routes = routes }

  --- The model table of an Agent that talks to this server.
  function srv.model(a, b)
    local wire = b or a
    if type(wire) ~= "string" then wire = b end
    return { id = wire == "anthropic" and "anthropic/claude-test" or "openai/gpt-test",
      url = srv.url .. BASES[wire],
      apiKey = "test-key-" .. wire, api = wire }
  end

  --- The requests of a wire, decoded: {body = json, header = {...}, raw}.
  function srv.calls(a, b)
    local wire = b or a
    if type(wire) ~= "string" then wire = b end
    local out = {}
    for _, ev in ipairs(srv.requests()) do
      if ev.path == PATHS[wire] then
        out[#out + 1] = { body = core.jsonDecode(ev.body), header = ev.header, raw = ev.body,
          seq = ev.seq }
      end
    end
    return out
  end

  --- The http-end lines (how each streamed response ended).
  function srv.ends()
    local out = {}
    for _, ev in ipairs(srv.log()) do
      if ev.type == "http-end" then out[#out + 1] = ev end
    end
    return out
  end
  return srv
end

return ms
