-- Server-sent events, parsed as the HTML standard says
-- (https://html.spec.whatwg.org/multipage/server-sent-events.html):
-- lines end with CRLF, LF or CR; a line that starts with ':' is a comment;
-- `field: value` (one space after the colon dropped) or `field` alone;
-- `data` lines are joined with "\n"; an empty line dispatches the event
-- (none when no data came); `event` names it (default "message"); `id`
-- and `retry` are kept; unknown fields are ignored.
--
--   local p = sse.new()
--   for _, ev in ipairs(p:feed(bytes)) do ... ev.event, ev.data, ev.id ... end
--   p:finish()  -- the end of the stream: an event without its blank line is dropped
--
-- Bytes may be cut anywhere between two feeds (inside a CRLF, a UTF-8
-- character, a JSON string): only complete lines are parsed, and lines are
-- found by their ASCII CR and LF, which never occur inside a UTF-8
-- character.
local sse = {}

local Parser = {}
Parser.__index = Parser

function sse.new()
  return setmetatable({
    buf = "",          -- bytes after the last complete line
    skip_lf = false,   -- the last feed ended with CR: a LF first is its pair
    data = nil,        -- the data lines of the event so far (a list)
    event = nil,
    id = nil,          -- the last event id (kept across events, as the standard says)
    retry = nil,
  }, Parser)
end

local function line(self, l, out)
  if l == "" then
    if self.data then
      out[#out + 1] = { event = self.event or "message", data = table.concat(self.data, "\n"),
        id = self.id }
    end
    self.data, self.event = nil, nil
    return
  end
  if l:byte(1) == 58 then return end -- ':' comment
  local field, value
  local colon = l:find(":", 1, true)
  if colon then
    field = l:sub(1, colon - 1)
    value = l:sub(colon + 1)
    if value:byte(1) == 32 then value = value:sub(2) end
  else
    field, value = l, ""
  end
  if field == "data" then
    local d = self.data
    if d then d[#d + 1] = value else self.data = { value } end
  elseif field == "event" then
    self.event = value
  elseif field == "id" then
    if not value:find("\0", 1, true) then self.id = value end
  elseif field == "retry" then
    if value:match("^%d+$") then self.retry = tonumber(value) end
  end
end

--- Parse the bytes that arrived; returns the events completed by them.
function Parser:feed(bytes)
  local out = {}
  if bytes == nil or bytes == "" then return out end
  local s = bytes
  if self.skip_lf then
    self.skip_lf = false
    if s:byte(1) == 10 then s = s:sub(2) end
  end
  if self.buf ~= "" then s = self.buf .. s end
  local pos, n = 1, #s
  while pos <= n do
    local e = s:find("[\r\n]", pos)
    if not e then break end
    line(self, s:sub(pos, e - 1), out)
    if s:byte(e) == 13 then
      if e == n then
        self.skip_lf = true -- the LF of a CRLF may come in the next feed
      elseif s:byte(e + 1) == 10 then
        e = e + 1
      end
    end
    pos = e + 1
  end
  self.buf = pos <= n and s:sub(pos) or ""
  return out
end

--- The end of the stream. The standard drops an event whose blank line
-- never came; returns whether bytes were left over (a cut stream).
function Parser:finish()
  local left = self.buf ~= "" or self.data ~= nil
  self.buf, self.data, self.event = "", nil, nil
  return left
end

return sse
