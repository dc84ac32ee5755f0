-- JSON bodies: whatever mastra.core.jsonDecode accepts, jsonEncode writes,
-- and decoding that text gives the same value back (the encoding is stable).
-- Text it refuses is refused with a message, never an error or a crash;
-- so is text after the value.
local core = require "mastra.core"

return function(input)
  local ok, value, msg = pcall(core.jsonDecode, input)
  assert(ok, "jsonDecode raised instead of returning a failure: " .. tostring(value))
  if value == nil then
    assert(type(msg) == "string" and #msg > 0, "a refusal without a message")
    return
  end
  assert(core.jsonDecode(input .. " ]") == nil, "text after the value was accepted")
  local text = core.jsonEncode(value)
  local again, why = core.jsonDecode(text)
  assert(again ~= nil, "jsonEncode wrote text that jsonDecode refuses: " .. tostring(why))
  assert(core.jsonEncode(again) == text, "the encoding is not stable: " .. text)
end
