-- A server in a sandbox: a background process serves the sandbox's files
-- over HTTP, and a command in the same sandbox reaches it with curl on
-- 127.0.0.1 (a sandbox's own loopback); then the server is stopped.
local mastra = require "mastra"

local sb <close> = mastra.PlatformSandbox.new{}
sb:start()
sb:executeCommand("sh", { "-c", "mkdir -p site && echo 'hello over HTTP' > site/index.txt" })

local server = sb.processes:spawn("exec python3 -m http.server 8000 --bind 127.0.0.1",
  nil, { cwd = "site" })

-- wait (up to 10 s) until it answers
local r
for _ = 1, 100 do
  r = sb:executeCommand("curl", { "-sf", "http://127.0.0.1:8000/index.txt" })
  if r.success then break end
  mastra.sleep(100)
end
print("curl in the sandbox got: " .. r.stdout:gsub("\n$", ""))

server:kill()
print("server stopped: exit code " .. server:wait().exitCode)
