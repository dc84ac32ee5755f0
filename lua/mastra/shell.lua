-- Command lines as the platform client builds them: the command, then each
-- argument quoted.
local shell = {}

--- Quote one argument: safe words stay as they are, anything else goes in
-- single quotes with each ' written as '\''.
function shell.quote(arg)
  if arg:find("^[a-zA-Z0-9._/=:@%-]+$") then return arg end
  return "'" .. arg:gsub("'", "'\\''") .. "'"
end

--- command used verbatim as shell text, then the quoted args.
function shell.commandLine(command, args)
  if args == nil or #args == 0 then return command end
  local parts = { command }
  for i, a in ipairs(args) do parts[i + 1] = shell.quote(a) end
  return table.concat(parts, " ")
end

return shell
