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

--- A buffer that keeps the newest max bytes (default: everything). The
-- bytes are kept in one block of C memory (core.retained,
-- src/core/retained.h), not as the list of their chunks: the chunks can
-- then be collected and their memory reused, and a big block takes huge
-- pages where the kernel has them, so 256 MB kept no longer touches
-- 512 MB of fresh pages.
function output.new(max)
  max = max or math.huge
  return setmetatable({
    buf = max > 0 and core.retained(max) or nil, -- nil: nothing is kept
    dropped = 0,  -- bytes dropped, oldest first
    joined = nil, -- text(), until the next append
  }, Retained)
end

--- Keep s (the newest bytes), dropping the oldest beyond max. A cut keeps
-- a tail that does not start inside a UTF-8 sequence (up to 3 continuation
-- bytes more are dropped): text stays text.
function Retained:append(s)
  local n = #s
  if n == 0 then return end
  local buf = self.buf
  if buf == nil then
    if self.released then error("mastra.output: append after release", 2) end
    self.dropped = self.dropped + n
    return
  end
  self.dropped = buf:append(s)
  self.joined = nil
end

--- The retained bytes as one string (made once until the next append).
function Retained:text()
  local s = self.joined
  if s == nil then
    s = self.buf and self.buf:text() or ""
    self.joined = s
  end
  return s
end

--- Keep only text() and free the block: nothing may be appended after.
function Retained:release()
  self:text()
  if self.buf then self.buf:free() end
  self.buf, self.released = nil, true
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
-- stdoutDroppedBytes, stderrDroppedBytes), and release both (their blocks
-- are freed: the result holds the strings). Returns r.
function output.fill(r, out, err)
  out:release()
  err:release()
  r.stdout, r.stderr = out:text(), err:text()
  r.stdoutTruncated, r.stderrTruncated = out:truncated(), err:truncated()
  r.stdoutDroppedBytes, r.stderrDroppedBytes = out.dropped, err.dropped
  return r
end

return output
