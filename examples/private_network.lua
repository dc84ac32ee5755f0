-- Two PRIVATE sandboxes talk to each other: sandboxes created with
-- networkIsolation = "PRIVATE" share a private network of their own, and
-- one serves a line that the other fetches.
--
--   build/mastra-lua examples/private_network.lua
--
-- It needs a platform whose driver isolates networks. Where it cannot (the
-- local platform's `process` driver runs every sandbox on the host's
-- network), it says so and exits 0 without running the exchange.
local mastra = require "mastra"

local function skip(why)
  print("skipped: " .. why)
end

-- the sandboxes are <close> variables of main(): however it returns, they
-- are destroyed
local function main()
  local server <close> = mastra.PlatformSandbox.new{ networkIsolation = "PRIVATE" }
  local ok, err = pcall(server.start, server)
  if not ok then
    return skip("the platform refused a PRIVATE sandbox: " .. tostring(err))
  end
  local info = server:getInfo()
  local driver = info.metadata and info.metadata.driver
  if driver == nil or driver == "process" then
    return skip(("the platform's driver (%s) cannot isolate networks; PRIVATE sandboxes need a"
      .. " driver that can, such as mastra-platform serve --driver namespaces")
      :format(driver or "not reported: the process driver"))
  end

  local client <close> = mastra.PlatformSandbox.new{ networkIsolation = "PRIVATE" }
  client:start()
  -- the server sandbox serves its working directory; the client finds it by
  -- its sandbox id (a hosts entry of their environment's network)
  local page = server:executeCommand("sh",
    { "-c", "printf 'hello from the other sandbox\\n' > hello.txt" })
  if not page.success then error("cannot write hello.txt: " .. page.stderr) end
  local listener = server.processes:spawn("exec python3 -m http.server 8080")
  print(("server sandbox %s serves http://%s:8080/hello.txt"):format(server.sandboxId,
    server.sandboxId))
  -- the server takes a moment to listen: the client tries for up to 10 s
  local r = client:executeCommand("python3", { "-c", [[
import sys, time, urllib.request
for i in range(50):
    try:
        sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())
        sys.exit(0)
    except Exception as e:
        err = e
        time.sleep(0.2)
sys.exit("fetch failed: %s" % err)
]], ("http://%s:8080/hello.txt"):format(server.sandboxId) }, { timeout = 30000 })
  listener:kill()
  if not r.success then error("the client could not reach the server: " .. r.stderr) end
  print(("client sandbox %s received: %s"):format(client.sandboxId, r.stdout:gsub("%s+$", "")))
end

main()
