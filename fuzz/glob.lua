-- Glob and grep patterns from an agent: the input is "pattern\0subject".
-- Matching a glob answers a boolean quickly (libFuzzer's -timeout catches
-- a runaway), or refuses a pattern of too many {} alternatives; a grep pattern either
-- compiles or is refused with a message, and matching it (with PCRE2's
-- match and depth limits) returns positions inside the subject or nil.
local core = require "mastra.core"
local Workspace = require "mastra.workspace"

return function(input)
  local pattern, subject = input:match("^([^%z]*)%z(.*)$")
  if not pattern then pattern, subject = input, "" end
  local ok, m = pcall(Workspace.globMatch, pattern, subject)
  if ok then
    assert(type(m) == "boolean", "globMatch answered a " .. type(m))
  else -- the one refusal it has
    assert(tostring(m):find("alternatives in its {}", 1, true), "globMatch raised: " .. tostring(m))
  end

  local re, msg = core.regexCompile(pattern, #subject % 2 == 1)
  if not re then
    assert(type(msg) == "string" and #msg > 0, "a refused pattern without a message")
    return
  end
  local okm, s, e = pcall(core.regexMatch, re, subject)
  if not okm then
    -- only the documented limit errors may come out of a match
    assert(tostring(s):find("regex:", 1, true), "regexMatch raised: " .. tostring(s))
    return
  end
  if s ~= nil then
    assert(math.type(s) == "integer" and math.type(e) == "integer", "positions are not integers")
    assert(s >= 1 and e >= s - 1 and e <= #subject, ("match %d..%d outside a subject of %d bytes")
      :format(s, e, #subject))
  end
end
