-- A command's environment never reaches mastra-ns-init as it is (issue 30;
-- docs/platform.md "What a `namespaces` sandbox is"): the program starts as
-- host root, and a dynamic loader or libc of a build that is not static
-- would act on an LD_PRELOAD, GLIBC_TUNABLES or GCONV_PATH that a request
-- set, naming a file the sandbox wrote. The server hands it every entry
-- under MASTRA_NS_ENV_, and the program strips that for the command's
-- /bin/sh. Seen on the relay of a sandbox's first command after a restore
-- (__ns-exec, which lives as long as the command): its environment, as the
-- kernel keeps it, has only prefixed entries, and the command sees its own.
-- Skipped without root.
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local is_root = util.is_root

describe("the namespaces driver's program", function()
  local srv

  after_each(function()
    if srv then srv:close() end
    srv = nil
  end)

  it("sees the command's environment only under MASTRA_NS_ENV_", function()
    if not is_root() then
      pending("the namespaces driver's relay is root's here")
      return
    end
    srv = platform.start{ args = { "--driver", "namespaces", "--warm-pool", "0" } }
    local key = "env-" .. math.random(1, 1e9)
    local sb = srv:startSandbox{ id = key }
    assert.are.equal(0, sb:executeCommand("echo kept > /workspace/f").exitCode)
    sb:destroy() -- its checkpoint is kept
    -- restored: its first command starts the init and goes through the relay
    sb = srv:startSandbox{ id = key }
    local h = sb.processes:spawn("echo \"$LD_PRELOAD|$GCONV_PATH|$MINE\"; exec sleep 37.25",
      { env = { LD_PRELOAD = "/workspace/none.so", GCONV_PATH = "/workspace",
        MINE = "mine" } })
    assert.is_true(util.wait_until(function() return h.stdout ~= "" end, 15000), h.stderr)
    assert.are.equal("/workspace/none.so|/workspace|mine\n", h.stdout)
    local r = srv:sh("for p in $(pgrep -f '^mastra-ns-exec __ns-exec'); do"
      .. " tr '\\0' '\\n' < /proc/$p/environ; echo; done")
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.matches("MASTRA_NS_ENV_LD_PRELOAD=/workspace/none.so\n", r.stdout)
    assert.matches("MASTRA_NS_ENV_MINE=mine\n", r.stdout)
    for line in r.stdout:gmatch("[^\n]+") do
      assert.matches("^MASTRA_NS_ENV_", line)
    end
    h:kill()
    sb:destroy()
  end)
  it("a first command through the relay with a missing cwd raises, as on a running one",
    function()
      if not is_root() then
        pending("the namespaces driver's relay is root's here")
        return
      end
      srv = platform.start{ args = { "--driver", "namespaces", "--warm-pool", "0" } }
      local key = "cwd-" .. math.random(1, 1e9)
      local sb = srv:startSandbox{ id = key }
      assert.are.equal(0, sb:executeCommand("true").exitCode)
      sb:destroy()
      -- restored: its init starts at this command, which mastra-ns-init
      -- runs and whose chdir it reports ("...: ENOENT")
      sb = srv:startSandbox{ id = key }
      local ok, err = pcall(sb.executeCommand, sb, "pwd", nil, { cwd = "/no/such/dir" })
      assert.is_false(ok)
      assert.is_true(require("mastra").errors.DirectoryNotFoundError:is(err), tostring(err))
      assert.are.equal("ENOENT", err.code)
      sb:destroy()
    end)
end)
