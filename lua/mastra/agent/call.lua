-- One model call of an agent's step: the streamed HTTP request, its SSE
-- events fed to the wire's step, the timeouts, and the retries.
--
-- Retried (up to maxRetries, default 2): 408, 409, 429, 5xx, 529, a
-- connection that failed and a first chunk that did not come in time,
-- and an error event the API marks as transient (overloaded) -- only while
-- nothing of the step's content has arrived. The wait: the server's
-- retry-after-ms, else retry-after, capped at maxRetryDelay (30 s); else
-- 0.5 s doubling, jittered. x-should-retry is obeyed. Never retried: 400,
-- 401, 403, a spend-limit 429, a context error, and a stream cut after
-- content arrived (an error that keeps the partial text: a second request
-- would show the model's answer twice).
local core = require "mastra.core"
local errors = require "mastra.errors"
local task = require "mastra.task"
local sse = require "mastra.agent.sse"
local model = require "mastra.agent.model"

local call = {}

local function timeout_error(ctx, which, ms)
  local what = ({ total = "the run's timeout", step = "the step's timeout (stepTimeout)",
    firstChunk = "the first chunk's timeout (firstChunkTimeout)",
    chunk = "the timeout between chunks (chunkTimeout)" })[which]
  return errors.TimeoutError:new{
    message = ("model %s: %s of %d ms passed (%s)"):format(ctx.model.id, what,
      math.floor(ms), ctx.model.url),
    timeout = which, ms = ms, url = ctx.model.url,
    retryable = which == "firstChunk",
  }
end

-- Wait on the request until it signals or the nearest deadline passes
-- (a TimeoutError naming it). deadlines: list of {at, which, ms}.
local function wait_req(ctx, req, deadlines)
  local at, hit
  for i = 1, #deadlines do
    local d = deadlines[i]
    if d.at and (at == nil or d.at < at) then at, hit = d.at, d end
  end
  if at == nil then
    task.wait(req:id())
    return
  end
  local left = at - core.now()
  if left <= 0 then error(timeout_error(ctx, hit.which, hit.ms), 0) end
  local timer <close> = core.timer(math.ceil(left))
  task.wait(req:id(), timer:id())
  if core.now() >= at then
    -- the request may have signalled at the same time: look once more
    local st, a = req:result()
    if st == nil and a == nil and req:read() == nil then
      error(timeout_error(ctx, hit.which, hit.ms), 0)
    end
  end
end

local function network_error(ctx, msg, name, fields)
  local why = ("model %s: cannot reach %s: %s (%s)"):format(ctx.model.id, ctx.model.url, msg, name)
  local limit = errors.descriptorLimit(why, name, name == "CURLE_COULDNT_CONNECT")
  if limit then return limit end
  local e = { message = why, url = ctx.model.url, code = name, retryable = true }
  for k, v in pairs(fields or {}) do e[k] = v end
  return errors.NetworkError:new(e)
end

local function is_fatal(err)
  return errors.CancelledError:is(err) or errors.InterruptedError:is(err)
    or type(err) ~= "table" -- a bug (a string error): not a model failure
end

-- One request. Returns the wire step's result, or nil, the error, and
-- whether content had arrived (no retry then).
local function attempt(ctx, body, step_deadline)
  local m = ctx.model
  if ctx.limiter then ctx.limiter:acquire() end
  local req <close>, msg, name = core.http{ method = "POST", url = m.url, headers = m.headers,
    body = body, timeout = 0, streamResponse = true }
  if not req then return nil, network_error(ctx, msg, name), false end
  local started = core.now()
  local first = ctx.firstChunkTimeout
  local deadlines = {
    { at = ctx.deadline, which = "total", ms = ctx.timeout },
    { at = step_deadline, which = "step", ms = ctx.stepTimeout },
    { at = first and started + first, which = "firstChunk", ms = first },
    { at = nil, which = "chunk", ms = ctx.chunkTimeout }, -- set once bytes came
  }
  -- the head
  local status, headers, early
  while true do
    status, headers = req:head()
    if status then break end
    local st, a, b = req:result()
    if st then status, headers = st, a break end
    if a then
      -- a response that began and failed before this task looked: its
      -- head is gone, but its bytes are there and are read as the stream
      -- (text that arrived must not be asked for a second time)
      early = req:read()
      if early == nil then return nil, network_error(ctx, a, b), false end
      status, headers = 200, {}
      break
    end
    local ok, err = pcall(wait_req, ctx, req, deadlines)
    if not ok then return nil, err, false end
  end
  ctx.lastHeaders = headers
  if status < 200 or status > 299 then
    local parts = {}
    while true do
      local d = req:read()
      if d then
        parts[#parts + 1] = d
      else
        local st, a = req:result()
        if st ~= nil or a ~= nil then
          d = req:read()
          if d then parts[#parts + 1] = d else break end
        else
          local ok, err = pcall(wait_req, ctx, req, deadlines)
          if not ok then return nil, err, false end
        end
      end
    end
    return nil, model.apiError(m, status, headers, table.concat(parts)), false
  end
  local step = ctx.wire.step(m, ctx.emitText, headers)
  local parser = sse.new()
  local got, last = false, nil
  local over, failure, ended = false, nil, false
  while not over do
    local d = early or req:read()
    early = nil
    if d then
      if not got then
        got = true
        deadlines[3].at = nil
      end
      last = core.now()
      local ok, err = pcall(function()
        for _, ev in ipairs(parser:feed(d)) do
          if step:event(ev) then
            over = true
            return
          end
        end
      end)
      if not ok then
        if is_fatal(err) then error(err, 0) end
        return nil, err, step.content
      end
    elseif ended then
      break
    else
      -- the end (or a failure) comes after the bytes before it: read them
      local st, a, b = req:result()
      if st ~= nil then
        ended = true
      elseif a ~= nil then
        failure, ended = { a, b }, true
      else
        local chunk = ctx.chunkTimeout
        deadlines[4].at = got and chunk and last + chunk or nil
        local ok, err = pcall(wait_req, ctx, req, deadlines)
        if not ok then
          if is_fatal(err) then error(err, 0) end
          if errors.TimeoutError:is(err) and step.content then err.retryable = false end
          err.partialText = step:result().text
          return nil, err, step.content
        end
      end
    end
  end
  local r = step:result()
  r.status, r.headers = status, headers
  if over or (failure == nil and r.finished) then return r end
  -- cut: the connection failed, or ended before the model finished
  local err
  if failure then
    err = network_error(ctx, failure[1], failure[2], {
      message = ("model %s: the stream from %s was cut (%s, %s)%s"):format(m.id, m.url,
        failure[1], failure[2], step.content and (" after " .. #r.text
          .. " bytes of text: the partial text is kept in err.partialText") or ""),
    })
  else
    err = errors.ModelAPIError:new{
      message = ("model %s: the stream from %s ended before the model finished%s"):format(m.id,
        m.url, step.content and (" (after " .. #r.text .. " bytes of text)") or ""),
      status = status, headers = headers, url = m.url, retryable = true,
    }
  end
  err.partialText = r.text
  err.retryable = err.retryable and not step.content
  return nil, err, step.content
end

--- The step's model call with its retries: the wire step's result, with
-- `attempts`. Raises the last error (its `attempts` set).
function call.run(ctx, body)
  local step_deadline = ctx.stepTimeout and core.now() + ctx.stepTimeout or nil
  local max = ctx.maxRetries
  local n = 0
  while true do
    n = n + 1
    local r, err, content = attempt(ctx, body, step_deadline)
    if r then
      r.attempts = n
      return r
    end
    if ctx.limiter and errors.ModelRateLimitError:is(err) and not err.spendLimit then
      ctx.limiter:penalize(err.retryAfterMs)
    end
    err.attempts = n
    if content or not err.retryable or n > max then error(err, 0) end
    local wait = model.backoff(n, err, ctx.maxRetryDelay)
    local now = core.now()
    if (ctx.deadline and now + wait >= ctx.deadline)
        or (step_deadline and now + wait >= step_deadline) then
      error(err, 0)
    end
    if ctx.onRetry then ctx.onRetry{ attempt = n, error = err, delayMs = wait } end
    if wait > 0 then task.sleep(wait) end
  end
end

return call
