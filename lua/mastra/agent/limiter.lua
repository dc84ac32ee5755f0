-- A request rate shared by the agents of a process (or any group of
-- them): mastra.Agent.rateLimiter{requestsPerMinute = n}, given to
-- Agent.new{rateLimiter = ...}. Each model request takes a slot (requests
-- are spaced 60000/n ms apart); a 429 from the API holds every request of
-- the limiter back for the retry-after the server asked (else a second).
-- It lives in this process's memory: agents in other processes do not
-- see it.
local core = require "mastra.core"
local options = require "mastra.options"
local task = require "mastra.task"

local limiter = {}

local Limiter = { __name = "mastra.Agent.RateLimiter" }
Limiter.__index = Limiter

local OPTS = {
  requestsPerMinute = function(v)
    return type(v) == "number" and v > 0 and v < math.huge, "a number > 0"
  end,
}

function limiter.new(opts)
  options.check("Agent.rateLimiter", opts, OPTS)
  if not (opts and opts.requestsPerMinute) then
    error("Agent.rateLimiter: option 'requestsPerMinute' is required", 2)
  end
  return setmetatable({ requestsPerMinute = opts.requestsPerMinute,
    interval = 60000 / opts.requestsPerMinute, nextAt = 0, blockedUntil = 0,
    requests = 0, penalties = 0 }, Limiter)
end

function limiter.is(v) return getmetatable(v) == Limiter end

--- Wait for a slot (in the calling task).
function Limiter:acquire()
  local now = core.now()
  local at = math.max(now, self.nextAt, self.blockedUntil)
  self.nextAt = at + self.interval
  self.requests = self.requests + 1
  if at > now then task.sleep(at - now) end
end

--- A 429: hold every request back for ms (default 1000).
function Limiter:penalize(ms)
  self.penalties = self.penalties + 1
  self.blockedUntil = math.max(self.blockedUntil, core.now() + (ms or 1000))
end

return limiter
