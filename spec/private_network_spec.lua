-- PRIVATE networks of the namespaces driver, end to end (issue 13, part 4):
-- sandbox A of environment "net-a" serves HTTP with `python3 -m http.server`;
-- PRIVATE sandbox B of the same environment fetches from it by sandbox id (a
-- hosts entry) and by address; an ISOLATED sandbox of the same environment
-- and a PRIVATE sandbox of another environment cannot.
-- The process driver has no networks of its own: while the server does not
-- run sandboxes under the namespaces driver (not root, or not built with
-- it), every case is pending with the reason.
local mastra = require "mastra"
local platform = require "spec.support.platform"

local PORT = 8000

-- fetch URL (argv[1]), trying argv[2] times; prints the body, or exits 1
local FETCH = [[
import sys, time, urllib.request
url, tries = sys.argv[1], int(sys.argv[2])
err = None
for i in range(tries):
    try:
        sys.stdout.write(urllib.request.urlopen(url, timeout=3).read().decode())
        sys.exit(0)
    except Exception as e:
        err = e
        time.sleep(0.2)
sys.stderr.write("fetch failed: %s\n" % err)
sys.exit(1)
]]

describe("PRIVATE networks (namespaces driver)", function()
  local srv, why
  local A, server, addr
  local token = ("token-%d-%d"):format(os.time(), math.random(1e9))
  local made = {}

  local function new(env, network)
    local sb = mastra.PlatformSandbox.new{ accessToken = srv.token, proxyUrl = srv.url,
      projectId = "proj", environmentId = env, networkIsolation = network }
    made[#made + 1] = sb
    return sb
  end

  -- the driver that runs sb: the server's first line, its record, getInfo
  local function driver_of(sb)
    if srv.info.driver then return srv.info.driver end
    local rec = srv:curl("GET", "/v1/railway/projects/proj/sandbox/" .. sb.sandboxId)
    if rec.json and rec.json.driver then return rec.json.driver end
    local info = sb:getInfo()
    return info.metadata and info.metadata.driver
  end

  local function fetch(sb, host, tries)
    return sb:executeCommand("python3", { "-c", FETCH,
      ("http://%s:%d/page.txt"):format(host, PORT), tostring(tries) }, { timeout = 60000 })
  end

  -- a sandbox's own address: its host name (the sandbox id) through the
  -- hosts file
  local function own_address(sb)
    local r = sb:executeCommand("python3", { "-c",
      "import socket; print(socket.gethostbyname(socket.gethostname()))" })
    assert.are.equal(0, r.exitCode, r.stderr)
    return (r.stdout:gsub("%s+$", ""))
  end

  -- sb fetches nothing from A, by address or by sandbox id, while a new
  -- PRIVATE member of A's environment does
  local function assert_cannot_reach_A(sb)
    assert.are.equal(0, fetch(new("net-a", "PRIVATE"), A.sandboxId, 50).exitCode)
    for _, host in ipairs{ addr, A.sandboxId } do
      local r = fetch(sb, host, 1)
      assert.are_not.equal(0, r.exitCode)
      assert.is_nil(r.stdout:find(token, 1, true))
    end
  end

  setup(function()
    local ok, s = pcall(platform.start, { args = { "--driver", "namespaces" } })
    if not ok then
      -- as root the driver runs: a server that does not start is a failure
      local p = io.popen("id -u")
      local root = p:read("a"):match("^0%s") ~= nil
      p:close()
      assert(not root, s)
      why = "mastra-platform does not run the namespaces driver here (needs root and the"
        .. " driver): " .. tostring(s):gsub("%s+", " "):sub(1, 300)
      return
    end
    srv = s
    A = new("net-a", "PRIVATE")
    A:start()
    local driver = driver_of(A)
    if driver ~= "namespaces" then
      why = ("the server runs sandboxes under the %s driver, which has no PRIVATE"
        .. " networks"):format(tostring(driver or "process"))
      return
    end
    local w = A:executeCommand("printf %s " .. mastra.quote(token) .. " > page.txt")
    assert.are.equal(0, w.exitCode, w.stderr)
    -- in the sandbox's working directory (/workspace), where page.txt is
    server = A.processes:spawn(("exec python3 -m http.server %d"):format(PORT))
    addr = own_address(A)
    assert.matches("^10%.231%.%d+%.%d+$", addr)
  end)

  teardown(function()
    if server then pcall(server.kill, server) end
    for _, sb in ipairs(made) do pcall(sb.destroy, sb) end
    if srv then srv:close() end
  end)

  it("a PRIVATE sandbox of the same environment fetches by sandbox id and by address",
    function()
      if why then return pending(why) end
      local B = new("net-a", "PRIVATE")
      local r = fetch(B, A.sandboxId, 50)
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.are.equal(token, r.stdout)
      r = fetch(B, addr, 5)
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.are.equal(token, r.stdout)
      -- A's hosts file names B too (it sees members that came later)
      local hosts = A:executeCommand("cat /etc/hosts").stdout
      assert.matches("%s" .. (B.sandboxId:gsub("%p", "%%%0")) .. "\n", hosts)
    end)

  it("an ISOLATED sandbox of the same environment cannot", function()
    if why then return pending(why) end
    local C = new("net-a", "ISOLATED")
    assert_cannot_reach_A(C)
    -- loopback, and (egress is on by default) eth0, its own link to the
    -- way out, 10.232.x.y, not on A's subnet (spec/egress_spec.lua)
    local links = C:executeCommand("python3", { "-c",
      "import socket; print(' '.join(sorted(n for _, n in socket.if_nameindex())))" })
    assert.are.equal("eth0 lo\n", links.stdout)
    local own = C:executeCommand("python3", { "-c", "import socket; s = socket.socket("
      .. "socket.AF_INET, socket.SOCK_DGRAM); s.connect(('10.232.0.1', 9));"
      .. " print(s.getsockname()[0])" }) -- a UDP connect sends nothing
    assert.matches("^10%.232%.", own.stdout)
  end)

  it("a PRIVATE sandbox of another environment cannot", function()
    if why then return pending(why) end
    local D = new("net-b", "PRIVATE")
    assert_cannot_reach_A(D)
    -- and its own network is another subnet
    local own = own_address(D)
    assert.are_not.equal(addr:match("^(%d+%.%d+%.%d+)%."), own:match("^(%d+%.%d+%.%d+)%."))
  end)
end)
