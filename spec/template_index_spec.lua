-- Templates that install packages (issue 26, point 6; docs/platform.md
-- "Templates"): npmInstall and pipInstall built against a package index
-- that this spec serves itself, never a real registry. The index is a
-- directory (an npm package's metadata and tarball, a pip "simple" page and
-- a wheel, all made here) behind `python3 -m http.server` in a network
-- namespace of the spec's own (198.18.N.2, the benchmarking range, behind a
-- veth), as spec/egress_spec.lua's fake internet. The build reaches it
-- through the server's egress proxy; the registries are named by
-- templateBuildEnvs (build-only, as a user would pass a private index), and
-- the server's --egress-dns points at an address with no DNS server, so a
-- name such as registry.npmjs.org cannot even be resolved. Everything
-- started here is stopped here. Needs root; else pending.
local lfs = require "lfs"
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local N = 150 + math.random(40)
local NS = ("mpti-%d-%d"):format(N, math.random(1e6))
local VETH = ("mptiv%d"):format(math.random(1e6))
local HOST, INDEX = ("198.18.%d.9"):format(N), ("198.18.%d.10"):format(N)
local PORT = 8080
local URL = ("http://%s:%d"):format(INDEX, PORT)

local sh = util.sh

local function must(cmd)
  local out, ok = sh(cmd)
  assert(ok, cmd .. ": " .. out)
  return out
end

local function write(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

-- the index's files: npm/mp-local-pkg (metadata), its tarball, and
-- pip/simple/mp-local-pkg/ with a wheel
local MAKE = [[
import hashlib, io, json, os, sys, tarfile, zipfile, base64
root, url = sys.argv[1], sys.argv[2]
os.makedirs(root + "/npm", exist_ok=True)
os.makedirs(root + "/pip/simple/mp-local-pkg", exist_ok=True)
pkg = json.dumps({"name": "mp-local-pkg", "version": "1.0.0", "main": "index.js"}).encode()
js = b"module.exports = 'from the local index (npm)';\n"
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    for name, data in (("package/package.json", pkg), ("package/index.js", js)):
        info = tarfile.TarInfo(name); info.size = len(data); info.mode = 0o644
        t.addfile(info, io.BytesIO(data))
tgz = buf.getvalue()
open(root + "/npm/mp-local-pkg-1.0.0.tgz", "wb").write(tgz)
integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
meta = {"name": "mp-local-pkg", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": {
    "name": "mp-local-pkg", "version": "1.0.0", "main": "index.js",
    "dist": {"tarball": url + "/npm/mp-local-pkg-1.0.0.tgz",
             "shasum": hashlib.sha1(tgz).hexdigest(), "integrity": integrity}}}}
open(root + "/npm/mp-local-pkg", "w").write(json.dumps(meta))
files = {
    "mp_local_pkg/__init__.py": b"WHERE = 'from the local index (pip)'\n",
    "mp_local_pkg-1.0.dist-info/METADATA":
        b"Metadata-Version: 2.1\nName: mp-local-pkg\nVersion: 1.0\n",
    "mp_local_pkg-1.0.dist-info/WHEEL":
        b"Wheel-Version: 1.0\nGenerator: spec\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = ""
for name, data in files.items():
    d = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += "%s,sha256=%s,%d\n" % (name, d, len(data))
record += "mp_local_pkg-1.0.dist-info/RECORD,,\n"
whl = root + "/pip/mp_local_pkg-1.0-py3-none-any.whl"
with zipfile.ZipFile(whl, "w") as z:
    for name, data in files.items(): z.writestr(name, data)
    z.writestr("mp_local_pkg-1.0.dist-info/RECORD", record)
h = hashlib.sha256(open(whl, "rb").read()).hexdigest()
open(root + "/pip/simple/mp-local-pkg/index.html", "w").write(
    '<html><body><a href="../../mp_local_pkg-1.0-py3-none-any.whl#sha256=%s">'
    'mp_local_pkg-1.0-py3-none-any.whl</a></body></html>\n' % h)
]]

local index = {}

function index.start()
  index.dir = platform.tmpdir()
  must(("chmod 755 %s"):format(index.dir))
  write(index.dir .. "/make.py", MAKE)
  must(("python3 %s/make.py %s/www %s"):format(index.dir, index.dir, URL))
  must(("ip netns add %s"):format(NS))
  index.made = true
  must(("ip link add %s type veth peer name eth0 netns %s"):format(VETH, NS))
  must(("ip addr add %s/29 dev %s && ip link set %s up"):format(HOST, VETH, VETH))
  must(("ip -n %s link set lo up && ip -n %s link set eth0 up && ip -n %s addr add %s/29 dev"
    .. " eth0"):format(NS, NS, NS, INDEX))
  -- our pipe to it is its stdin; index.stop kills it
  index.proc = assert(io.popen(("unset LD_PRELOAD; exec ip netns exec %s python3 -m http.server"
    .. " %d --bind %s --directory %s/www > %s/log 2>&1"):format(NS, PORT, INDEX, index.dir,
    index.dir), "w"))
  for _ = 1, 100 do
    local _, ok = sh(("curl -sf -o /dev/null %s/npm/mp-local-pkg"):format(URL))
    if ok then return end
    sh("sleep 0.1")
  end
  error("the index did not start: " .. tostring(util.read_file(index.dir .. "/log")))
end

function index.stop()
  -- http.server does not end at its stdin's EOF: kill it first, then the
  -- pipe's close (which waits for it) returns
  if index.made then sh(("ip netns pids %s | xargs -r kill -9"):format(NS)) end
  if index.proc then pcall(index.proc.close, index.proc) end
  if index.made then
    sh(("ip netns del %s"):format(NS))
    sh(("ip link del %s"):format(VETH))
  end
  if index.dir then platform.rm_rf(index.dir) end
end

describe("templates that install from a package index", function()
  local why
  if util.trim((sh("id -u"))) ~= "0" then
    why = "a network namespace for the index needs root: skipped"
  elseif not select(2, sh("command -v ip && command -v python3 && command -v curl")) then
    why = "needs ip, python3 and curl: skipped"
  end
  if why then
    pending(why)
    return
  end

  local srv
  setup(function() index.start() end)
  teardown(function()
    if srv then pcall(srv.close, srv) end
    index.stop()
  end)

  it("builds npmInstall and pipInstall from it, and the sandboxes have the packages",
    function()
    srv = platform.start{ args = { "--driver", "namespaces", "--warm-pool", "0",
      "--egress-dns", INDEX } }
    local probe = srv:startSandbox()
    local has = probe:executeCommand("command -v npm && python3 -m pip --version")
    if has.exitCode ~= 0 then
      probe:destroy()
      return pending("the base has no npm or no pip (a minimal base): skipped")
    end
    -- a sandbox reaches the index through the egress proxy
    local reach = probe:executeCommand("curl -sS -m 10 " .. URL .. "/npm/mp-local-pkg")
    probe:destroy()
    assert.are.equal(0, reach.exitCode, reach.stderr)
    assert.matches('"mp%-local%-pkg"', reach.stdout)
    local t = mastra.Template.new()
      :setWorkdir("/opt/proj")
      :runCmd("echo '{\"name\": \"proj\", \"version\": \"1.0.0\"}' > package.json")
      :npmInstall("mp-local-pkg")
      :pipInstall("mp-local-pkg")
      :setEnvs({
        npm_config_registry = URL .. "/npm/",
        npm_config_update_notifier = "false",
        PIP_INDEX_URL = URL .. "/pip/simple/",
        PIP_TRUSTED_HOST = INDEX,
      }, { ephemeral = true })
    local r = t:build(srv:sandboxOptions{ timeout = 150000 })
    assert.are.equal("ready", r.status, srv.stderrTail)
    local sb = srv:startSandbox{ template = t }
    local got = sb:executeCommand("node -e \"console.log(require('mp-local-pkg'))\"; python3"
      .. " -c 'import mp_local_pkg; print(mp_local_pkg.WHERE)'", nil, { timeout = 60000 })
    assert.are.equal(0, got.exitCode, got.stderr)
    assert.are.equal("from the local index (npm)\nfrom the local index (pip)\n", got.stdout)
    -- the index's address was a build-only value: not in the kept definition
    local keys = {}
    for k in lfs.dir(srv.dataDir .. "/templates") do
      if k:match("^%x+$") then keys[#keys + 1] = k end
    end
    local def = util.read_file(srv.dataDir .. "/templates/" .. keys[1] .. "/definition.json")
    assert.is_nil(def:find(INDEX, 1, true), def)
    -- the build went to the index and nowhere else
    local log = util.read_file(index.dir .. "/log") or ""
    assert.matches("GET /npm/mp%-local%-pkg ", log)
    assert.matches("GET /pip/mp_local_pkg%-1%.0%-py3%-none%-any%.whl ", log)
    sb:destroy()
  end)
end)
