-- The agent's SSE parser (lua/mastra/agent/sse.lua) on its own: the
-- rules of the standard, and every way of cutting a stream into pieces.
local core = require "mastra.core"
local sse = require "mastra.agent.sse"

local function parse(pieces)
  local p, out = sse.new(), {}
  for _, s in ipairs(pieces) do
    for _, ev in ipairs(p:feed(s)) do out[#out + 1] = ev end
  end
  return out, p:finish()
end

local function summary(events)
  local out = {}
  for i, e in ipairs(events) do out[i] = e.event .. "|" .. e.data end
  return out
end

describe("agent SSE parsing", function()
  it("dispatches on a blank line with LF, CRLF or CR line ends", function()
    for _, nl in ipairs{ "\n", "\r\n", "\r" } do
      local text = ("data: a%sdata: b%s%sevent: done%sdata: c%s%s"):format(nl, nl, nl, nl, nl, nl)
      assert.are.same({ "message|a\nb", "done|c" }, summary((parse{ text })), "line end "
        .. ("%q"):format(nl))
    end
  end)

  it("ignores comments, unknown fields and data-less events; keeps ids; strips a space", function()
    local evs = parse{ ": comment\n\nfoo: bar\nevent: x\n\nid: 7\ndata:  two spaces\n"
      .. "data\n\n" }
    assert.are.same({ "message| two spaces\n" }, summary(evs))
    assert.are.equal("7", evs[1].id)
  end)

  it("drops an event whose blank line never came, and says bytes were left", function()
    local evs, left = parse{ "data: 1\n\ndata: cut" }
    assert.are.same({ "message|1" }, summary(evs))
    assert.is_true(left)
    local _, left2 = parse{ "data: 1\n\n" }
    assert.is_false(left2)
  end)

  it("gives the same events however the bytes are cut (CRLF, UTF-8, JSON strings)", function()
    local json = core.jsonEncode{ text = "héllo “wörld” 🎉", n = 1 }
    local text = "event: message_start\r\ndata: " .. json .. "\r\n\r\n: ping\r\n\r\n"
      .. "data: {\"a\":\r\ndata: \"é\"}\r\n\r\ndata: [DONE]\n\n"
    local want = summary((parse{ text }))
    assert.are.same({ "message_start|" .. json, "message|{\"a\":\n\"é\"}", "message|[DONE]" },
      want)
    for i = 1, #text - 1 do -- one cut, at every byte
      assert.are.same(want, summary((parse{ text:sub(1, i), text:sub(i + 1) })), "cut at " .. i)
    end
    local bytes = {} -- and one byte at a time
    for i = 1, #text do bytes[i] = text:sub(i, i) end
    assert.are.same(want, summary((parse(bytes))))
  end)
end)
