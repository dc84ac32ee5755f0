-- Pieces shared by the sandbox, filesystem and workspace classes: ids,
-- the command arguments and options, and configured instructions.
local core = require "mastra.core"
local options = require "mastra.options"
local output = require "mastra.output"

local common = {}

local DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"

function common.base36(n)
  local s = ""
  repeat
    local d = n % 36
    s = DIGITS:sub(d + 1, d + 1) .. s
    n = n // 36
  until n == 0
  return s
end

--- n random base-36 digits.
function common.randomDigits(n)
  local r = {}
  for i = 1, n do
    local d = math.random(1, 36)
    r[i] = DIGITS:sub(d, d)
  end
  return table.concat(r)
end

--- "<prefix>-<ms since the epoch, base 36>-<6 random base-36 digits>"
function common.newId(prefix)
  return ("%s-%s-%s"):format(prefix, common.base36(core.time()), common.randomDigits(6))
end

local function stdin_option(v)
  return type(v) == "string" or type(v) == "function",
    "a string, or a function that returns the next chunk (nil at the end)"
end

--- The options of processes:spawn.
common.SPAWN_OPTS = {
  cwd = options.string,
  env = options.env,
  timeout = options.ms,
  maxRetainedBytes = output.checkMax,
  onStdout = options.func,
  onStderr = options.func,
}

--- The options of executeCommand: those of spawn, and stdin.
common.EXEC_OPTS = { stdin = stdin_option }
for k, v in pairs(common.SPAWN_OPTS) do common.EXEC_OPTS[k] = v end

--- args of executeCommand: nil or a list of strings. Raises at the caller
-- of the function that calls it.
function common.checkArgs(where, args, level)
  level = level or 3
  if args == nil then return end
  if type(args) ~= "table" then
    error(("%s: argument #2 (args) must be a list of strings (got %s)")
      :format(where, options.describe(args)), level)
  end
  for k in pairs(args) do
    if math.type(k) ~= "integer" or k < 1 or k > #args then
      error(("%s: argument #2 (args) must be a list of strings, but it has the key %s;"
        .. " options go third: %s(command, nil, {%s = ...})")
        :format(where, options.describe(k), where:match("[%w_]+$"), tostring(k)), level)
    end
  end
  for i = 1, #args do
    if type(args[i]) ~= "string" then
      error(("%s: argument #2 (args) item %d must be a string (got %s)")
        :format(where, i, options.describe(args[i])), level)
    end
  end
end

--- The checks executeCommand starts with, in both sandboxes: self (an
-- instance of class), the command, its args and the options (returned).
-- Errors point at the caller of executeCommand.
function common.checkExec(where, class, self, command, args, opts)
  options.self(where, self, class, 4)
  options.arg(where, 1, "command", command, options.string, 4)
  common.checkArgs(where, args, 4)
  local checked = options.check(where, opts, common.EXEC_OPTS, 4)
  return checked -- not a tail call: level 4 is the caller of executeCommand
end

local STDIN_CHUNK = 65536
local STDIN_MAX = 524288 -- a stdin frame stays under the 1 MiB message limit

--- The stdin option as a source: a function that returns the next chunk
-- (64 KiB pieces of a string; what a function returns, cut to 512 KiB),
-- nil at the end. A function may also return false and a key: nothing
-- now, wake the key (task.wake) when there is (the queue of a
-- PlatformSandbox background process's sendStdin; direct_exec.lua waits).
function common.stdinSource(stdin)
  if type(stdin) == "function" then
    local done = false
    local big, pos = nil, 1
    return function()
      if big then
        local piece = big:sub(pos, pos + STDIN_MAX - 1)
        pos = pos + #piece
        if pos > #big then big = nil end
        return piece
      end
      if done then return nil end
      local chunk, wake = stdin()
      if chunk == false and wake ~= nil then return false, wake end
      if chunk == nil or chunk == "" then
        done = true
        return nil
      end
      if type(chunk) ~= "string" then
        error(("executeCommand: the stdin function must return strings, or nil at the end"
          .. " (got %s)"):format(options.describe(chunk)), 0)
      end
      if #chunk > STDIN_MAX then
        big, pos = chunk, STDIN_MAX + 1
        return chunk:sub(1, STDIN_MAX)
      end
      return chunk
    end
  end
  local pos = 1
  return function()
    if pos > #stdin then return nil end
    local chunk = stdin:sub(pos, pos + STDIN_CHUNK - 1)
    pos = pos + #chunk
    return chunk
  end
end

--- The keys of set in the order of their ranks (rank(key, value), a
-- number; default: the value): what is done to each member of a set is
-- done in a fixed order, never in the order of pairs(). nil gives an
-- empty list.
function common.inOrder(set, rank)
  local list = {}
  for k, v in pairs(set or {}) do list[#list + 1] = { k, rank and rank(k, v) or v } end
  table.sort(list, function(a, b) return a[2] < b[2] end)
  for i, e in ipairs(list) do list[i] = e[1] end
  return list
end

--- The instructions: the configured string, or what the configured
-- function makes of {defaultInstructions}, or the default.
function common.instructions(where, custom, default)
  if type(custom) == "string" then return custom end
  if type(custom) == "function" then
    local text = custom{ defaultInstructions = default }
    if type(text) ~= "string" then
      error(("%s: the instructions function must return a string (got %s)")
        :format(where, options.describe(text)), 3)
    end
    return text
  end
  return default
end

--- Standard base64 (with padding) of the bytes s, for bytes that travel in
-- command lines (the C encoder of src/core/hash.c).
function common.base64(s)
  return core.base64Encode(s)
end

return common
