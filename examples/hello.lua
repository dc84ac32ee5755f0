-- Hello from a sandbox: run with `scripts/example` (or build/mastra-lua
-- examples/hello.lua). The sandbox prints the greeting and its working
-- directory; `<close>` destroys it at the end of the script.
local mastra = require "mastra"

local sandbox <close> = mastra.LocalSandbox.new{
  env = { GREETING = "Hello, world!" },
}
sandbox:start()

local result = sandbox:executeCommand('printf "%s\\n" "$GREETING"; pwd')
io.write(result.stdout)
if not result.success then
  error(("the command failed with exit code %d: %s"):format(result.exitCode, result.stderr))
end
