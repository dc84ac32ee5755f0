-- The sandbox tools of a Workspace: execute_command (in the foreground, or
-- in the background when the sandbox has `processes`), get_process_output
-- and kill_process. Each runs as run(ws, args, id) on the workspace `ws`
-- (its sandbox) with arguments that schema.validate checked, and returns
-- the text for the model (and true when it reports a failure); other
-- failures are raised (see result.lua). `sandbox_tools.defs` lists the
-- tools with their parameters.
local result = require "mastra.workspace.result"
local plural, fail = result.plural, result.fail

local sandbox_tools = {}

local KILL_TAIL_LINES = 50

-- The last n lines of text, and whether any were cut.
local function last_lines(text, n)
  local lines = result.lines(text)
  if #lines <= n then return text, false end
  return table.concat(lines, "\n", #lines - n + 1), true
end

local function command_output(r, tail)
  local stdout = (r.stdout or ""):gsub("\n$", "")
  local stderr = (r.stderr or ""):gsub("\n$", "")
  local text
  if stdout ~= "" and stderr ~= "" then
    text = stdout .. "\n\n[stderr]\n" .. stderr
  elseif stderr ~= "" then
    text = "[stderr]\n" .. stderr
  else
    text = stdout
  end
  if tail then
    local cut_text, was_cut = last_lines(text, tail)
    if was_cut then text = ("[showing the last %s]\n"):format(plural(tail, "line")) .. cut_text end
  end
  return text
end

local function execute_command(self, a)
  local sb = self.sandbox
  local opts = { cwd = a.cwd }
  if a.timeout then opts.timeout = math.floor(a.timeout * 1000 + 0.5) end
  if a.background then
    if not sb.processes then fail("This sandbox cannot run background processes") end
    local h = sb.processes:spawn(a.command, opts)
    return ("Started background process (PID: %s)"):format(tostring(h.pid))
  end
  local r = sb:executeCommand(a.command, nil, opts)
  local text = command_output(r, a.tail)
  if r.timedOut then
    text = text .. (text ~= "" and "\n\n" or "")
      .. ("[Command timed out after %gs and was killed]"):format((opts.timeout or 0) / 1000)
    return text, true
  end
  if not r.success then
    text = text .. (text ~= "" and "\n\n" or "") .. ("[Exit code: %s]"):format(tostring(r.exitCode))
    return text, true
  end
  if text == "" then text = "(no output)" end
  return text
end

local function no_process(pid)
  fail("No background process with PID %s (it never existed, or it exited and its output "
    .. "was already read)", pid)
end

local function process_state(h)
  if h.exitCode == nil then return "running" end
  if h.timedOut then return ("timed out (exit code %s)"):format(tostring(h.exitCode)) end
  if h.killed then return ("killed (exit code %s)"):format(tostring(h.exitCode)) end
  return ("exited with code %s"):format(tostring(h.exitCode))
end

local function get_process_output(self, a)
  local procs = self.sandbox.processes
  local h = procs:get(a.pid)
  if not h then no_process(a.pid) end
  if a.wait and h.exitCode == nil then
    h:wait()
    procs:get(a.pid) -- exited and read: forget it
  end
  local text = command_output(h, a.tail)
  if text == "" then text = "(no output yet)" end
  return ("Process %s (%s): %s\n\n%s"):format(tostring(h.pid), tostring(h.command or "?"),
    process_state(h), text)
end

local function kill_process(self, a)
  local procs = self.sandbox.processes
  local h = procs:get(a.pid)
  if not h then no_process(a.pid) end
  local head
  if h.exitCode ~= nil then
    head = ("Process %s had already %s."):format(tostring(h.pid), process_state(h))
  else
    procs:kill(a.pid)
    head = ("Killed process %s."):format(tostring(h.pid))
  end
  local text = command_output(h, KILL_TAIL_LINES)
  if text == "" then return head .. " It wrote no output." end
  return head .. "\n\nLast output:\n" .. text
end

-- the tools, in the order Workspace:tools lists them
sandbox_tools.defs = {
  { short = "execute_command", needs = "executeCommand", run = execute_command,
    description = "Run a shell command in the sandbox and return its output.",
    params = {
      { name = "command", type = "string", required = true,
        description = "The shell command line to run" },
      { name = "timeout", type = "number", minimum = 0,
        description = "Kill the command after this many seconds" },
      { name = "cwd", type = "string", description = "The directory to run the command in" },
      { name = "tail", type = "integer", minimum = 1,
        description = "Return only the last N lines of output" },
      { name = "background", type = "boolean", default = false, processes = true,
        description = "Start the command in the background and return its PID at once" },
    } },
  { short = "get_process_output", needs = "processes", run = get_process_output,
    description = "Show the state and output of a background process.",
    params = {
      { name = "pid", type = "string", required = true, description = "The PID of the process" },
      { name = "tail", type = "integer", minimum = 1,
        description = "Return only the last N lines of output" },
      { name = "wait", type = "boolean", default = false,
        description = "Wait for the process to exit first" },
    } },
  { short = "kill_process", needs = "processes", run = kill_process,
    description = "Kill a background process and show the last 50 lines of its output.",
    params = {
      { name = "pid", type = "string", required = true, description = "The PID of the process" },
    } },
}

return sandbox_tools
