-- Hello from a sandbox: run with `scripts/example` (or build/mastra-lua
-- examples/hello.lua). With no platform credentials set, the sandbox lives
-- on the local platform, which the runtime finds or starts (it says so on
-- stderr). The sandbox prints the greeting and its working directory;
-- `<close>` destroys it at the end of the script.
local mastra = require "mastra"

local sandbox <close> = mastra.PlatformSandbox.new{
  env = { GREETING = "Hello, world!" },
}
sandbox:start()

local result = sandbox:executeCommand('printf "%s\\n" "$GREETING"; pwd')
io.write(result.stdout)
if not result.success then
  error(("the command failed with exit code %d: %s"):format(result.exitCode, result.stderr))
end
