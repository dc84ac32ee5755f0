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
  local addr = server:executeCommand("sh", { "-c",
    "hostname -I 2>/dev/null | cut -d' ' -f1" }).stdout:gsub("%s+$", "")
  if addr == "" then return skip("the server sandbox has no address on its private network") end
  print(("server sandbox %s listens on %s:8080"):format(server.sandboxId, addr))
  local listener = server.processes:spawn("sh", { "-c",
    "printf 'hello from the other sandbox\\n' | nc -l -p 8080 || printf 'hello from the other"
    .. " sandbox\\n' | nc -l 8080" })
  mastra.sleep(300)
  local r = client:executeCommand("nc", { "-w", "3", addr, "8080" }, { timeout = 10000 })
  listener:kill()
  if not r.success then error("the client could not reach the server: " .. r.stderr) end
  print(("client sandbox %s received: %s"):format(client.sandboxId, r.stdout:gsub("%s+$", "")))
end

main()
