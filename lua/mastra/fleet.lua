-- mastra.fleet: one sandbox per member, cloned from a template, with a
-- bounded concurrency (docs/api.md "mastra.fleet").
--
--   local summary = mastra.fleet(template, { "api", "web", { id = "db" } },
--     function(sb, member) return sb:executeCommand("make").exitCode end,
--     { concurrency = 8 })
--   summary:print()
--
-- Each member gets template:clone{id = member.id}: the stable id is the
-- recovery key, so a second run restores each member's checkpoint. A
-- member is started, fn(sandbox, member) runs, and the sandbox is
-- destroyed (its checkpoint kept) whatever fn did. A failure is that
-- member's error; the others go on unless failFast is set, which cancels
-- the members in flight and starts no more.
--
-- The members run in tasks of their own under mastra.map (the groups of
-- mastra.task), in the order of the list; the fleet uses only public
-- methods of the sandboxes (isStarting, waitTeardown where they exist).
--
-- Cleanup: a member's sandbox is a `<close>` variable of its task. A member
-- that ends (result or error) destroys it inline; a member that is
-- cancelled (failFast, Ctrl-C, SIGTERM) hands it to the teardown queue of
-- mastra.task, and the fleet then destroys whatever is still held before
-- it returns (waiting for a queued destroy on the teardown itself, not by
-- polling). An interrupt cancels the fleet itself: the queue is drained
-- by mastra.run or the close of the state (docs/decisions.md "Teardown").
local core = require "mastra.core"
local errors = require "mastra.errors"
local options = require "mastra.options"
local task = require "mastra.task"

local fleet = {}

--- Enough to keep a platform busy; each member holds a few descriptors (an
-- exec socket is three), so 32 stays far below the default `ulimit -n` of
-- 1024 even when fn opens some of its own.
fleet.DEFAULT_CONCURRENCY = 32

local PROGRESS_EVERY_MS = 1000
local QUEUED_WAIT_MS = 30000 -- a queued destroy of a cancelled member

local OPTS = {
  concurrency = options.positive_integer,
  failFast = options.boolean,
  quiet = options.boolean,
  label = options.string,
  progressStream = function(v)
    return io.type(v) == "file", "a file (io.stderr, io.stdout, ...)"
  end,
}

-- {====== the summary ======

local Summary = { __name = "mastra.FleetSummary" }
Summary.__index = Summary

local function message_of(err)
  if type(err) == "table" and type(err.message) == "string" then
    return (err.name and err.name ~= "" and (err.name .. ": ") or "") .. err.message
  end
  return tostring(err)
end

local function seconds(ms)
  if ms < 1000 then return ("%dms"):format(math.floor(ms)) end
  local s = ms / 1000
  if s < 60 then return ("%.1fs"):format(s) end
  return ("%dm%02ds"):format(math.floor(s // 60), math.floor(s % 60))
end

--- A plain table that core.jsonEncode takes: counts, and per member its
-- id, status, outcome, sandboxId, elapsedMs, and the error's message.
function Summary:toTable()
  local members = {}
  for i, m in ipairs(self.members) do
    members[i] = {
      id = m.id, status = m.status, outcome = m.outcome, sandboxId = m.sandboxId,
      elapsedMs = m.elapsedMs, error = m.error ~= nil and message_of(m.error) or nil,
    }
    local r = m.result
    if type(r) == "string" or type(r) == "number" or type(r) == "boolean" then
      members[i].result = r
    end
  end
  return {
    label = self.label, total = self.total, succeeded = self.succeeded,
    failed = self.failed, cancelled = self.cancelled, skipped = self.skipped,
    created = self.created, restored = self.restored, elapsedMs = self.elapsedMs,
    members = members,
  }
end

--- The summary as JSON text.
function Summary:toJSON()
  return core.jsonEncode(self:toTable())
end

--- Print one line per member, then the totals (to io.stdout, or `file`).
function Summary:print(file)
  file = file or io.stdout
  local width = 2
  for _, m in ipairs(self.members) do width = math.max(width, #m.id) end
  for _, m in ipairs(self.members) do
    local detail = ""
    if m.error ~= nil then
      detail = "  " .. message_of(m.error):gsub("\n.*", "")
    elseif m.result ~= nil and type(m.result) ~= "table" then
      detail = "  " .. tostring(m.result):gsub("\n.*", "")
    end
    file:write(("%-" .. width .. "s  %-9s  %-9s  %7s%s\n"):format(m.id, m.status,
      m.outcome or "-", m.elapsedMs and seconds(m.elapsedMs) or "-", detail))
  end
  file:write(("%s: %d members, %d ok, %d failed%s%s in %s (%d created, %d restored)\n")
    :format(self.label, self.total, self.succeeded, self.failed,
      self.cancelled > 0 and (", %d cancelled"):format(self.cancelled) or "",
      self.skipped > 0 and (", %d skipped"):format(self.skipped) or "",
      seconds(self.elapsedMs), self.created, self.restored))
end

function Summary.__tostring(self)
  return ("mastra.FleetSummary: %d members, %d ok, %d failed"):format(self.total,
    self.succeeded, self.failed)
end

-- }======

-- {====== progress ======

local function is_terminal(file)
  if file ~= io.stderr and file ~= io.stdout then return false end
  local target = core.fsReadlink(file == io.stderr and "/proc/self/fd/2" or "/proc/self/fd/1")
  return type(target) == "string" and (target:find("^/dev/pts/") ~= nil
    or target:find("^/dev/tty") ~= nil)
end

local function progress_line(st)
  local elapsed = core.now() - st.started
  local done = st.done
  local eta = ""
  if done > 0 and done < st.total then
    eta = ", ETA " .. seconds(elapsed / done * (st.total - done))
  end
  local bar_width = 20
  local filled = st.total > 0 and math.floor(bar_width * done / st.total) or bar_width
  return ("\r\27[K%s [%s%s] %d/%d, %d failed, %d running, %s%s"):format(st.label,
    ("="):rep(filled), (" "):rep(bar_width - filled), done, st.total, st.failed,
    st.running, seconds(elapsed), eta)
end

-- }======

local function member_id(where, m, i)
  if type(m) == "string" then return m end
  if type(m) == "table" and type(m.id) == "string" then return m.id end
  error(("%s: member %d must be an id (a string) or a table with a string id (got %s)")
    :format(where, i, options.describe(m)), 4)
end

local function is_cancel(err)
  return errors.CancelledError:is(err) or errors.InterruptedError:is(err)
end

-- The remote sandbox of sb may still exist (public fields and methods
-- only: a template may be any sandbox with clone). sandboxId is set only
-- while it runs: a destroy that failed (status "error") may have left it.
local function holds(sb)
  return sb.sandboxId ~= nil or sb.status == "error"
    or (type(sb.isStarting) == "function" and sb:isStarting() == true)
end

-- Wait for the destroy that a cancelled member's sandbox handed to the
-- teardown queue: on the teardown itself, not by polling.
local function wait_queued(sb)
  if type(sb.waitTeardown) == "function" then sb:waitTeardown(QUEUED_WAIT_MS) end
end

--- Run fn(sandbox, member) for every member on a clone of template.
-- Returns the summary: members (in the order given) with id, status ("ok",
-- "error", "cancelled", "skipped"), outcome ("created", "restored",
-- "connected"), result or error, sandboxId, elapsedMs; results and errors
-- ({id, result} / {id, error} lists); the counts; print(), toTable(),
-- toJSON().
function fleet.run(template, members, fn, opts)
  local where = "mastra.fleet"
  if type(template) ~= "table" or type(template.clone) ~= "function" then
    error(("%s: argument #1 (template) must be a sandbox with a clone method, such as a"
      .. " PlatformSandbox (got %s)"):format(where, options.describe(template)), 3)
  end
  if type(members) ~= "table" then
    error(("%s: argument #2 (members) must be a list of ids or tables with an id (got %s)")
      :format(where, options.describe(members)), 3)
  end
  options.arg(where, 3, "fn", fn, options.func, 3)
  opts = options.check(where, opts, OPTS, 3)
  local entries, seen = {}, {}
  for i = 1, #members do
    local id = member_id(where, members[i], i)
    if seen[id] then
      error(("%s: member id %q appears twice (ids are recovery keys: each must be unique)")
        :format(where, id), 3)
    end
    seen[id] = true
    entries[i] = { id = id, member = members[i], status = "skipped" }
  end
  local total = #entries
  local concurrency = math.min(opts.concurrency or fleet.DEFAULT_CONCURRENCY,
    math.max(total, 1))
  local stream = opts.progressStream or io.stderr
  local st = { label = opts.label or "fleet", total = total, done = 0, failed = 0,
    running = 0, started = core.now() }
  local show = not opts.quiet and total > 0 and is_terminal(stream)
  local function draw()
    if show then
      stream:write(progress_line(st))
      stream:flush()
    end
  end

  local stop = false
  local function run_member(e)
    local t0 = core.now()
    local sb <close> = template:clone{ id = e.id }
    e.sandbox = sb
    e.status = "running"
    st.running = st.running + 1
    local ok, err = pcall(function()
      local outcome = sb:start() or {}
      e.outcome = outcome.restored and "restored" or outcome.outcome or "created"
      e.sandboxId = sb.sandboxId
      e.result = fn(sb, e.member)
    end)
    st.running = st.running - 1
    e.elapsedMs = math.floor(core.now() - t0)
    if not ok and is_cancel(err) then
      e.status = "cancelled"
      error(err, 0) -- the scope ends by an error: the teardown queue destroys sb
    end
    if ok then
      e.status = "ok"
    else
      e.status, e.error = "error", err
    end
  end -- sb:destroy() here, inline

  -- the members in flight, in the order of the list, are cancelled in
  -- that order (failFast, or the fleet itself cancelled)
  local function cancel_members(except)
    for _, e in ipairs(entries) do
      if e.task and e ~= except then e.task:cancel() end
    end
  end

  local function wait_done(t)
    while not t:done() do task.wait(t) end
  end

  -- one member, in a task of its own (so that failFast can cancel it),
  -- run by a worker of mastra.map
  local function run_entry(e)
    if stop then return end -- skipped
    local t = task.spawn(run_member, e)
    e.task = t
    -- only this worker's own cancellation raises here (the fleet is
    -- cancelled or fails): the member goes too
    local waited, werr = pcall(wait_done, t)
    e.task = nil
    if not waited then
      t:cancel()
      error(werr, 0)
    end
    local ok, err = pcall(t.wait, t) -- finished: its end, at once
    if not ok and is_cancel(err) then return end -- cancelled (failFast): not done
    if not ok then
      -- the destroy failed: the member's error, unless it had one
      e.status = "error"
      e.error = e.error or err
    end
    st.done = st.done + 1
    if e.status == "error" then
      st.failed = st.failed + 1
      if opts.failFast and not stop then
        stop = true
        cancel_members(e)
      end
    end
    draw()
  end

  local ticker
  local function finish()
    if ticker then ticker:cancel() end
    if show then
      stream:write("\r\27[K")
      stream:flush()
    end
  end
  -- the fleet itself fails or is cancelled (an interrupt): its members go
  -- too, and hand their sandboxes to the teardown queue
  local cleanup <close> = setmetatable({}, { __close = function(_, err) -- luacheck: ignore 211
    if err ~= nil then
      stop = true
      cancel_members()
      finish()
    end
  end })
  draw()
  if show then
    ticker = task.spawn(function()
      while true do
        task.sleep(PROGRESS_EVERY_MS)
        draw()
      end
    end)
  end
  -- the groups of mastra.task run the members: in the order of the list,
  -- at most `concurrency` at a time
  task.map(entries, run_entry, { concurrency = concurrency })
  -- the members cancelled by failFast queued their destroy: wait for it,
  -- and destroy what is still held
  for _, e in ipairs(entries) do
    local sb = e.sandbox
    if sb then wait_queued(sb) end
    if sb and holds(sb) then
      local ok, err = pcall(sb.destroy, sb)
      if not ok and e.error == nil then e.error = err end
    end
    if e.status == "running" then e.status = "cancelled" end
    e.sandbox = nil
  end
  finish()

  local summary = setmetatable({ label = st.label, total = total, succeeded = 0, failed = 0,
    cancelled = 0, skipped = 0, created = 0, restored = 0,
    elapsedMs = math.floor(core.now() - st.started),
    members = {}, results = {}, errors = {} }, Summary)
  for i, e in ipairs(entries) do
    local m = { id = e.id, status = e.status, outcome = e.outcome, result = e.result,
      error = e.error, sandboxId = e.sandboxId, elapsedMs = e.elapsedMs }
    summary.members[i] = m
    if e.status == "ok" then
      summary.succeeded = summary.succeeded + 1
      summary.results[#summary.results + 1] = { id = e.id, result = e.result }
    elseif e.status == "error" then
      summary.failed = summary.failed + 1
      summary.errors[#summary.errors + 1] = { id = e.id, error = e.error }
    elseif e.status == "cancelled" then
      summary.cancelled = summary.cancelled + 1
    else
      summary.skipped = summary.skipped + 1
    end
    if e.outcome == "restored" then
      summary.restored = summary.restored + 1
    elseif e.outcome == "created" then
      summary.created = summary.created + 1
    end
  end
  return summary
end

return setmetatable(fleet, { __call = function(_, ...) return fleet.run(...) end })
