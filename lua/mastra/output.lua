-- The retained output of one stream of a command (stdout or stderr): the
-- newest `maxRetainedBytes` bytes of it. Older bytes are dropped and
-- counted, as upstream's RetainedOutputBuffer does (CommandOptions
-- maxRetainedBytes; CommandResult stdoutTruncated, stdoutDroppedBytes):
-- a long-running process keeps bounded memory, and a command whose output
-- only goes to onStdout can keep none (maxRetainedBytes = 0).
local core = require "mastra.core"

local output = {}

local Retained = {}
Retained.__index = Retained

--- The options checker of maxRetainedBytes: an integer >= 0, or math.huge.
function output.checkMax(v)
  return (math.type(v) == "integer" and v >= 0) or v == math.huge,
    "an integer >= 0 (bytes), or math.huge (keep everything)"
end

--- A buffer that keeps the newest max bytes (default: everything).
function output.new(max)
  return setmetatable({
    max = max or math.huge,
    chunks = {},  -- chunks[head..#chunks]: the retained bytes, oldest first
    head = 1,
    bytes = 0,    -- retained
    dropped = 0,  -- dropped, oldest first
  }, Retained)
end

-- Drop the oldest bytes down to max. A cut chunk keeps its tail, which
-- does not start inside a UTF-8 sequence (up to 3 continuation bytes more
-- are dropped): text stays text.
local function trim(b)
  local chunks = b.chunks
  while b.bytes > b.max do
    local c = chunks[b.head]
    local over = b.bytes - b.max
    if #c <= over then
      chunks[b.head] = false
      b.head = b.head + 1
      b.bytes, b.dropped = b.bytes - #c, b.dropped + #c
    else
      local cut, stop = over, math.min(#c, over + 3)
      while cut < stop and c:byte(cut + 1) & 0xC0 == 0x80 do cut = cut + 1 end
      chunks[b.head] = c:sub(cut + 1)
      b.bytes, b.dropped = b.bytes - cut, b.dropped + cut
      if cut == #c then
        chunks[b.head] = false
        b.head = b.head + 1
      end
    end
  end
  -- move the live chunks down once the dropped slots are the majority
  if b.head > 32 and b.head * 2 > #chunks then
    local n = 0
    for i = b.head, #chunks do
      n = n + 1
      chunks[n] = chunks[i]
    end
    for i = #chunks, n + 1, -1 do chunks[i] = nil end
    b.head = 1
  end
end

--- Keep s (the newest bytes), dropping the oldest beyond max.
function Retained:append(s)
  local n = #s
  if n == 0 then return end
  if self.max == 0 then
    self.dropped = self.dropped + n
    return
  end
  self.chunks[#self.chunks + 1] = s
  self.bytes = self.bytes + n
  if self.bytes > self.max then trim(self) end
end

--- The retained bytes as one string (joined once, then kept joined).
function Retained:text()
  local chunks, head = self.chunks, self.head
  local n = #chunks - head + 1
  if n <= 0 then return "" end
  if n > 1 then
    local s = core.concat(chunks, head) -- one allocation of its size
    for i = #chunks, 1, -1 do chunks[i] = nil end
    chunks[1], self.head = s, 1
  end
  return chunks[self.head]
end

--- Whether older bytes were dropped.
function Retained:truncated()
  return self.dropped > 0
end

--- A handle's two streams, each keeping max bytes: {stdout = ..., stderr = ...}.
function output.pair(max)
  return { stdout = output.new(max), stderr = output.new(max) }
end

--- The __index of a handle class whose objects keep output.pair() in _out:
-- h.stdout and h.stderr are the retained text, the rest comes from class.
function output.index(class)
  return function(h, k)
    if k == "stdout" or k == "stderr" then return h._out[k]:text() end
    return class[k]
  end
end

--- Put the retained text of out and err, and what they dropped, in the
-- result r (stdout, stderr, stdoutTruncated, stderrTruncated,
-- stdoutDroppedBytes, stderrDroppedBytes). Returns r.
function output.fill(r, out, err)
  r.stdout, r.stderr = out:text(), err:text()
  r.stdoutTruncated, r.stderrTruncated = out:truncated(), err:truncated()
  r.stdoutDroppedBytes, r.stderrDroppedBytes = out.dropped, err.dropped
  return r
end

return output
