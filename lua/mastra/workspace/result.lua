-- What a workspace tool returns to the model: the text helpers the tools
-- share (counts, lines, cutting at a character boundary) and failures as
-- results (a tool's own failure, the text of any error, and the errors
-- that are raised instead: cancellation).
local errors = require "mastra.errors"

local result = {}

--- "1 file", "2 files" (or the given plural).
function result.plural(n, one, many)
  return ("%d %s"):format(n, n == 1 and one or (many or one .. "s"))
end

--- Lines of text: a final newline does not make an extra empty line.
function result.lines(text)
  local lines, pos, n = {}, 1, #text
  while pos <= n do
    local nl = text:find("\n", pos, true)
    if not nl then
      lines[#lines + 1] = text:sub(pos)
      break
    end
    lines[#lines + 1] = text:sub(pos, nl - 1)
    pos = nl + 1
  end
  return lines
end

--- line cut for display at a UTF-8 character boundary, "..." after it.
function result.cut(line, max)
  if #line <= max then return line end
  local n = max
  while n > 0 do
    local b = line:byte(n + 1)
    if not b or b < 0x80 or b >= 0xC0 then break end
    n = n - 1
  end
  return line:sub(1, n) .. "..."
end

--- Whether err is raised through a tool rather than reported to the model.
function result.fatal(err)
  return errors.CancelledError:is(err) or errors.InterruptedError:is(err)
end

--- The text of an error for the model: the message, without a Lua position.
function result.errorText(err)
  if type(err) == "table" and err.message ~= nil then
    return tostring(err.message)
  end
  local s = tostring(err)
  s = s:gsub("^[^\n:]+%.lua:%d+: ", "")
  return s
end

-- A failure the tool reports itself (not a filesystem error).
local ToolError = {}

--- Raise the tool's own failure: fmt formatted with the rest.
function result.fail(fmt, ...)
  error(setmetatable({ message = fmt:format(...) }, ToolError), 0)
end

--- Whether err was raised by result.fail.
function result.isToolError(err)
  return getmetatable(err) == ToolError
end

return result
