-- Argument quoting: arguments (the input split at NUL bytes) quoted by
-- mastra.shell and read back by /bin/sh are the same bytes, one by one.
local shell = require "mastra.shell"

local function split(input)
  local args = {}
  for a in (input .. "\0"):gmatch("([^%z]*)%z") do args[#args + 1] = a end
  return args
end

-- the output goes through a file: libFuzzer's SIGALRM would interrupt a
-- read from a pipe
local out_path = os.tmpname()

return function(input)
  local args = split(input)
  if #args > 16 then return end
  local line = shell.commandLine("printf '%s\\0'", args)
  assert(os.execute(line .. " >" .. out_path), "sh refused: " .. line)
  local f = assert(io.open(out_path, "rb"))
  local out = f:read("a")
  f:close()
  local got = split(out:sub(1, -2))
  if #args == 1 and args[1] == "" then got = { "" } end
  assert(#got == #args, ("%d arguments went in, %d came out of: %s")
    :format(#args, #got, line))
  for i = 1, #args do
    assert(got[i] == args[i], ("argument %d: %q came back as %q"):format(i, args[i], got[i]))
  end
end
