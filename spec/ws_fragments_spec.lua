-- The WebSocket client (src/core/ws_client.c) builds data messages from
-- their frames itself (wslay buffers none of them): a message split into
-- continuation frames, with a ping between two of them, arrives whole and
-- once; empty messages arrive; a fragmented message past maxMessage is
-- never delivered and ends the socket. mastra-platform sends one frame a
-- message, so a scripted server sends these (spec/support/ws_fragments.py).
local core = require "mastra.core"
local mastra = require "mastra"

-- everything socket ws delivers until it is closed (at most 5 s), as
-- "kind:length:text-or-first-bytes-in-hex"
local function drain(ws)
  local got, deadline = {}, mastra.now() + 5000
  while mastra.now() < deadline do
    local d, kind = ws:receive()
    if d then
      local shown = kind == "text" and d
        or d:sub(1, 4):gsub(".", function(c) return ("%02x"):format(c:byte()) end)
      got[#got + 1] = ("%s:%d:%s"):format(kind, #d, shown)
    elseif ws:state() == "closed" then
      break
    else
      mastra.sleep(5)
    end
  end
  return got
end

describe("the WebSocket client", function()
  local host, server, port

  setup(function()
    host = mastra.LocalSandbox.new{}
    host:start()
    local out = {}
    server = host.processes:spawn("exec python3 spec/support/ws_fragments.py",
      { onStdout = function(s) out[#out + 1] = s end, cwd = (os.getenv("PWD")) })
    local deadline = mastra.now() + 10000
    while not table.concat(out):find("\n") and mastra.now() < deadline do mastra.sleep(10) end
    port = tonumber(table.concat(out):match("^(%d+)\n"))
    assert(port, "spec/support/ws_fragments.py printed no port")
  end)

  teardown(function()
    if host then host:destroy() end
  end)

  it("assembles fragmented messages, empty ones too, around a ping", function()
    local ws = assert(core.websocket{ url = "ws://127.0.0.1:" .. port .. "/" })
    assert.are.same({ "text:11:hello world", "binary:80000:00010001", "binary:0:", "text:0:" },
      drain(ws))
    local code, reason = ws:closeInfo()
    assert.are.equal(1000, code)
    assert.are.equal("bye", reason)
    ws:close()
  end)

  it("drops a fragmented message past maxMessage and ends the socket", function()
    local ws = assert(core.websocket{ url = "ws://127.0.0.1:" .. port .. "/", maxMessage = 1000 })
    assert.are.same({}, drain(ws))
    assert.are.equal("closed", ws:state())
    assert.are_not.equal(1000, (ws:closeInfo()))
    ws:close()
    server:wait()
    assert.are.equal(0, server.exitCode)
  end)
end)
