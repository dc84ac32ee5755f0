-- The base's owners with root (docs/platform.md, "The base"): the base and
-- the host's /usr are the overlay's lower layers through idmapped mounts,
-- so root in a sandbox owns what the host's root owns: it writes
-- /usr/local and /etc and chowns what it made, the host's /usr and the
-- base stay unchanged, and a checkpoint brings the changes back. Skipped,
-- saying why, where the namespaces driver cannot run as root, or where the
-- server says idmapped mounts do not work here.
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local trim = util.trim

local sh = util.sh

describe("the base's owners with root", function()
  if trim(sh("id -u")) ~= "0" then
    pending("the namespaces driver runs as root here only as root: skipped")
    return
  end

  local srv
  setup(function()
    srv = platform.start{ args = { "--driver", "namespaces" } }
  end)
  teardown(function()
    if srv then srv:close() end
  end)

  local function run(sb, cmd)
    return sb:executeCommand(cmd)
  end

  it("lets root in a sandbox write /usr/local and /etc, in its own layer", function()
    if srv.stderrTail:find("the base's files belong to nobody", 1, true) then
      pending("idmapped mounts do not work here: " .. srv.stderrTail)
      return
    end
    local base = os.getenv("MASTRA_PLATFORM_BASE") or (srv.dataDir .. "/base")
    local host_motd = sh("sha256sum /etc/motd " .. mastra.quote(base .. "/etc/motd"))
    local sb = mastra.PlatformSandbox.new{ accessToken = srv.token, proxyUrl = srv.url,
      projectId = "proj", environmentId = "env", id = "idmap-owners" }
    sb:start()
    local marker = "mastra-idmap-" .. sb.sandboxId
    -- the host's root shows as root, not nobody
    assert.are.equal("0 0 0\n", run(sb, "stat -c %u /usr/bin/env /etc/passwd /usr | tr '\\n' ' '"
      .. " | sed 's/ $//'; echo").stdout)
    local r = run(sb, ("touch /usr/local/bin/%s && chown 1000 /usr/local/bin/%s"
      .. " && echo a >> /etc/motd && apt-get --version >/dev/null")
      :format(marker, marker))
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal("1000\n", run(sb, "stat -c %u /usr/local/bin/" .. marker).stdout)
    -- the host and the base are unchanged
    assert.is_nil(util.read_file("/usr/local/bin/" .. marker))
    assert.are.equal(host_motd, sh("sha256sum /etc/motd " .. mastra.quote(base .. "/etc/motd")))
    -- the copy-ups belong to the sandbox's ids on the host (not host root)
    local upper = srv.dataDir .. "/sandboxes/" .. sb.sandboxId .. "/upper"
    assert.are_not.equal("0", trim(sh("stat -c %u " .. mastra.quote(upper .. "/etc/motd"))))
    assert.are_not.equal("0", trim(sh("stat -c %u "
      .. mastra.quote(upper .. "/usr/local/bin/" .. marker))))
    local before = run(sb, "sha256sum /etc/motd; stat -c '%u %a' /usr/local/bin/" .. marker)
    sb:destroy()
    -- a checkpoint brings them back
    sb:start()
    local after = run(sb, "sha256sum /etc/motd; stat -c '%u %a' /usr/local/bin/" .. marker)
    assert.are.equal(before.stdout, after.stdout)
    assert.matches("\n1000 ", after.stdout)
    sb:destroy()
  end)
end)
