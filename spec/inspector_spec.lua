-- The inspector of mastra-platform (docs/inspector.md) over plain HTTP:
-- who may see and change what (the one-time login link, the cookie, the
-- CSRF header, the Origin and Host checks, the bearer token), and what its
-- JSON endpoints show (sessions, failures and Retry, checkpoints,
-- sandboxes, the bucket). The page in a real browser is
-- test/browser/inspector.test.js.
local mastra = require "mastra"
local platform = require "spec.support.platform"

local function rails(path) return "/v1/railway/projects/proj" .. path end

-- the inspector's address and a login link, from the ready line
local function inspector_of(srv)
  assert.is_string(srv.info.inspector)
  assert.is_string(srv.info.inspectorLogin)
  return srv.info.inspector, srv.info.inspectorLogin
end

local function q(t)
  local parts = {}
  for k, v in pairs(t) do
    parts[#parts + 1] = k .. "=" .. tostring(v):gsub("[^%w%-._~]", function(c)
      return ("%%%02X"):format(c:byte())
    end)
  end
  table.sort(parts)
  return table.concat(parts, "&")
end

-- log in through a link: the cookie ("name=value") and the CSRF token
local function log_in(srv, base, link)
  local r = srv:curl("GET", link, { token = false })
  assert.are.equal(303, r.status)
  local cookie = r.headers["set-cookie"]
  assert.is_string(cookie)
  local pair = cookie:match("^([^;]+)")
  local s = srv:curl("GET", base .. "api/session", { token = false,
    headers = { Cookie = pair } })
  assert.are.equal(200, s.status)
  assert.is_string(s.json.csrf)
  return pair, s.json.csrf, cookie
end

local function create(srv, body)
  body.environmentId = body.environmentId or "env"
  return srv:json("POST", rails("/sandbox"), body)
end

describe("the inspector's door", function()
  local srv, base, link

  setup(function()
    srv = platform.start()
    base, link = inspector_of(srv)
  end)

  teardown(function() if srv then srv:stop() end end)

  it("is on its own loopback port, and the ready line still starts with the url", function()
    assert.truthy(base:match("^http://127%.0%.0%.1:%d+/$"))
    assert.are_not.equal(srv.url .. "/", base)
    assert.truthy(link:match("^" .. base:gsub("%p", "%%%0") .. "login%?code=%x+$"))
  end)

  it("shows nothing without the cookie or the token", function()
    for _, path in ipairs{ "", "index.html", "inspector.js", "api/session", "api/health",
      "api/sessions?project=proj&environment=env", "api/bucket?project=proj&bucket=b" } do
      local r = srv:curl("GET", base .. path, { token = false })
      assert.are.equal(401, r.status, path)
      assert.is_nil(r.body:find("inspector.js", 1, true), path)
    end
    local wrong = srv:curl("GET", base .. "api/health", { token = "0123" })
    assert.are.equal(401, wrong.status)
    local r = srv:curl("POST", base .. "api/object?" .. q{ project = "proj", bucket = "b",
      key = "x" }, { token = false, body = "nope" })
    assert.are.equal(401, r.status)
    local get = srv:curl("GET", rails("/fs/b/x"))
    assert.are.equal(404, get.status)
  end)

  it("takes the platform token instead of the cookie", function()
    local r = srv:curl("GET", base .. "api/health")
    assert.are.equal(200, r.status)
    -- the driver the server picked, as its sandboxes report it
    local c = create(srv, {}).json
    assert.truthy(c.driver == "process" or c.driver == "namespaces", tostring(c.driver))
    assert.are.equal(c.driver, r.json.driver)
    srv:json("DELETE", rails("/sandbox/" .. c.id))
  end)

  it("logs in once per link: an HttpOnly, SameSite=Strict cookie", function()
    local r = srv:curl("GET", base .. "api/session", { token = false })
    assert.are.equal(401, r.status)
    local pair, csrf, cookie = log_in(srv, base, link)
    assert.truthy(cookie:find("HttpOnly", 1, true))
    assert.truthy(cookie:find("SameSite=Strict", 1, true))
    assert.truthy(cookie:find("Path=/", 1, true))
    assert.are.equal(64, #csrf)
    -- the link is spent
    local again = srv:curl("GET", link, { token = false })
    assert.are.equal(401, again.status)
    assert.is_nil(again.headers["set-cookie"])
    -- the page itself, with the cookie
    local page = srv:curl("GET", base, { token = false, headers = { Cookie = pair } })
    assert.are.equal(200, page.status)
    assert.truthy(page.headers["content-type"]:find("text/html", 1, true))
    assert.truthy(page.body:find("<label for=\"env\">", 1, true))
    assert.truthy(page.headers["content-security-policy"]:find("default-src 'self'", 1, true))
    -- a made-up cookie is nobody
    local fake = srv:curl("GET", base .. "api/health", { token = false,
      headers = { Cookie = pair:gsub("=.*", "=" .. ("a"):rep(64)) } })
    assert.are.equal(401, fake.status)
  end)

  it("changes nothing without the CSRF header, or from another origin", function()
    local l = srv:curl("POST", base .. "api/login-links")
    assert.are.equal(201, l.status)
    local pair, csrf = log_in(srv, base, l.json.url)
    local path = base .. "api/object?" .. q{ project = "proj", bucket = "b", key = "c.txt" }
    local r = srv:curl("POST", path, { token = false, body = "one",
      headers = { Cookie = pair } })
    assert.are.equal(403, r.status)
    r = srv:curl("POST", path, { token = false, body = "one",
      headers = { Cookie = pair, ["X-Mastra-CSRF"] = ("0"):rep(64) } })
    assert.are.equal(403, r.status)
    r = srv:curl("POST", path, { token = false, body = "one",
      headers = { Cookie = pair, ["X-Mastra-CSRF"] = csrf, Origin = "http://evil.example" } })
    assert.are.equal(403, r.status)
    assert.are.equal(404, srv:curl("GET", rails("/fs/b/c.txt")).status)
    -- the page's own request goes through
    r = srv:curl("POST", path, { token = false, body = "one\0two",
      headers = { Cookie = pair, ["X-Mastra-CSRF"] = csrf, Origin = base:sub(1, -2) } })
    assert.are.equal(201, r.status)
    local get = srv:curl("GET", rails("/fs/b/c.txt"))
    assert.are.equal(200, get.status)
    assert.are.equal("one\0two", get.body)
    -- and so does a delete, with the header
    r = srv:curl("DELETE", path, { token = false, headers = { Cookie = pair } })
    assert.are.equal(403, r.status)
    r = srv:curl("DELETE", path, { token = false,
      headers = { Cookie = pair, ["X-Mastra-CSRF"] = csrf } })
    assert.are.equal(204, r.status)
    assert.are.equal(404, srv:curl("GET", rails("/fs/b/c.txt")).status)
  end)

  it("refuses a Host that is not its own (DNS rebinding)", function()
    local r = srv:curl("GET", base .. "api/health", { headers = { Host = "evil.example:80" } })
    assert.are.equal(421, r.status)
  end)

  it("answers two Content-Length headers with 400, and stores nothing", function()
    local port = tonumber(base:match(":(%d+)/"))
    local file = srv.scratch .. "/two-lengths"
    platform.writeFile(file, ("POST /api/object?%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
      .. "Authorization: Bearer %s\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\none")
      :format(q{ project = "proj", bucket = "b", key = "two.txt" }, port, srv.token))
    local r = srv:sh("bash -c " .. mastra.quote(("exec 3<>/dev/tcp/127.0.0.1/%d && cat %s >&3"
      .. " && timeout 5 cat <&3"):format(port, mastra.quote(file))))
    assert.matches("^HTTP/1.1 400", r.stdout)
    assert.matches("2 Content%-Length headers", r.stdout)
    assert.are.equal(404, srv:curl("GET", rails("/fs/b/two.txt")).status)
  end)

  it("gives login links only for the token", function()
    local l = srv:curl("POST", base .. "api/login-links")
    assert.are.equal(201, l.status)
    local pair, csrf = log_in(srv, base, l.json.url)
    local r = srv:curl("POST", base .. "api/login-links", { token = false,
      headers = { Cookie = pair, ["X-Mastra-CSRF"] = csrf } })
    assert.are.equal(403, r.status)
  end)

  it("prints a working login link with `mastra-platform inspect`", function()
    local r = srv:sh(platform.binary(), { "inspect", "--data-dir", srv.dataDir })
    assert.are.equal(0, r.exitCode, r.stderr)
    local url = r.stdout:match("^(%S+)\n$")
    assert.truthy(url and url:find(base .. "login?code=", 1, true), r.stdout)
    log_in(srv, base, url)
    local none = srv:sh(platform.binary(), { "inspect", "--data-dir", srv.scratch .. "/nothing" })
    assert.are.equal(1, none.exitCode)
    assert.truthy(none.stderr:find("no platform with an inspector", 1, true))
  end)
end)

describe("the inspector's views", function()
  local srv, base

  setup(function()
    srv = platform.start{ args = { "--session-history", "3" } }
    base = inspector_of(srv)
  end)

  teardown(function() if srv then srv:stop() end end)

  local function api(method, path, args, opts)
    return srv:curl(method, base .. "api/" .. path .. (args and ("?" .. q(args)) or ""), opts)
  end

  it("lists the sessions of an environment, newest first, the last N", function()
    local c = create(srv, {})
    assert.are.equal(201, c.status)
    local id = c.json.id
    for _, cmd in ipairs{ "exit 0", "echo hi; exit 3", "sleep 5" } do
      srv:json("POST", rails("/sandbox/" .. id .. "/exec"),
        { command = cmd, timeoutSec = cmd == "sleep 5" and 0.3 or nil })
    end
    srv:json("POST", rails("/sandbox/" .. id .. "/exec"), { command = "true" })
    local r = api("GET", "sessions", { project = "proj", environment = "env" })
    assert.are.equal(200, r.status)
    local s = r.json.sessions
    assert.are.equal(3, #s) -- --session-history 3: "exit 0" is gone
    assert.are.same({ "true", "sleep 5", "echo hi; exit 3" },
      { s[1].command, s[2].command, s[3].command })
    assert.are.same({ "exited", "timeout", "exited" }, { s[1].status, s[2].status, s[3].status })
    assert.are.equal(0, s[1].exitCode)
    assert.are.equal(3, s[3].exitCode)
    assert.are.equal(id, s[3].sandboxId)
    assert.is_true(s[2].durationMs >= 250)
    assert.is_true(s[1].startedAt >= s[3].startedAt)
    -- another environment sees none of them
    r = api("GET", "sessions", { project = "proj", environment = "other" })
    assert.are.same({}, r.json.sessions)
    -- the live sandbox, with the time of its reaping
    r = api("GET", "sandboxes", { project = "proj", environment = "env" })
    assert.are.equal(1, #r.json.sandboxes)
    assert.are.equal(id, r.json.sandboxes[1].id)
    assert.are.equal("ISOLATED", r.json.sandboxes[1].networkIsolation)
    assert.is_true(r.json.sandboxes[1].reapAt > r.json.sandboxes[1].createdAt)
    -- destroyed from the inspector
    r = api("DELETE", "sandbox", { id = id })
    assert.are.equal(202, r.status)
    assert.is_true(platform.waitUntil(function()
      return srv:curl("GET", rails("/sandbox/" .. id)).json.destroyedAt ~= platform.null
    end, 10000))
    r = api("GET", "sandboxes", { project = "proj", environment = "env" })
    assert.are.same({}, r.json.sandboxes)
  end)

  it("shows the outbound connections of the live sandboxes, newest first", function()
    local c = create(srv, { environmentId = "egress-view", id = "eg-key" })
    assert.are.equal(201, c.status)
    local id = c.json.id
    local function egress()
      local r = api("GET", "egress", { project = "proj", environment = "egress-view" })
      assert.are.equal(200, r.status, r.body)
      return r.json
    end
    if c.json.driver ~= "namespaces" then
      local e = egress()
      assert.is_false(e.available)
      assert.are.same({}, e.connections)
      srv:json("DELETE", rails("/sandbox/" .. id))
      return
    end
    -- two refused connections (a private range, then the metadata address):
    -- refused at once, logged, nothing leaves the machine
    local ok, err = pcall(function()
      for _, dst in ipairs{ "10.254.1.1", "169.254.169.254" } do
        local r = srv:json("POST", rails("/sandbox/" .. id .. "/exec"),
          { command = "curl -sS -m 5 http://" .. dst .. "/" })
        assert.are_not.equal(0, r.json.exitCode, r.body)
      end
      local e
      assert.is_true(platform.waitUntil(function()
        e = egress()
        return #e.connections >= 2
      end, 10000), "connections: " .. platform.encode(e and e.connections))
      assert.is_true(e.available)
      local newest, older = e.connections[1], e.connections[2]
      assert.are.equal("169.254.169.254", newest.address)
      assert.are.equal("10.254.1.1", older.address)
      for _, x in ipairs{ newest, older } do
        assert.are.equal(id, x.sandboxId)
        assert.are.equal("eg-key", x.recoveryKey)
        assert.are.equal(80, x.port)
        assert.is_false(x.allowed)
        assert.is_string(x.reason)
      end
      assert.is_true(newest.time >= older.time)
      assert.are.equal(1, #e.sandboxes)
      assert.are.equal(id, e.sandboxes[1].id)
      assert.is_true(e.sandboxes[1].refused >= 2)
      -- another environment sees none of them
      assert.are.same({}, api("GET", "egress", { project = "proj", environment = "env" })
        .json.connections)
    end)
    srv:json("DELETE", rails("/sandbox/" .. id))
    assert(ok, err)
  end)

  it("records a create that failed, and retries it", function()
    -- the sandboxes' directory becomes a file: prepare fails
    local dir = srv.dataDir .. "/sandboxes"
    assert(os.rename(dir, dir .. ".away"))
    platform.writeFile(dir, "in the way")
    local c = create(srv, { id = "retry-me", environmentId = "fenv" })
    assert.are.equal(500, c.status)
    local r = api("GET", "failures", { project = "proj", environment = "fenv" })
    assert.are.equal(1, #r.json.failures)
    local f = r.json.failures[1]
    assert.are.equal("create", f.kind)
    assert.are.equal("retry-me", f.subject)
    assert.truthy(f.message:find("cannot create", 1, true), f.message)
    assert.is_true(f.retryable)
    -- still broken: the retry fails, and says so
    r = api("POST", "failures/retry", { id = math.tointeger(f.id) })
    assert.are.equal(500, r.status)
    r = api("GET", "failures", { project = "proj", environment = "fenv" })
    assert.are.equal(1, r.json.failures[1].retries)
    -- mended: the retry creates the sandbox
    os.remove(dir)
    assert(os.rename(dir .. ".away", dir))
    r = api("POST", "failures/retry", { id = math.tointeger(f.id) })
    assert.are.equal(204, r.status)
    r = api("GET", "failures", { project = "proj", environment = "fenv" })
    assert.are.same({}, r.json.failures)
    r = api("GET", "sandboxes", { project = "proj", environment = "fenv" })
    assert.are.equal(1, #r.json.sandboxes)
    assert.are.equal("retry-me", r.json.sandboxes[1].recoveryKey)
    local sid = r.json.sandboxes[1].id
    r = api("POST", "failures/retry", { id = math.tointeger(f.id) })
    assert.are.equal(404, r.status)
    assert.are.equal(204, srv:curl("DELETE", rails("/sandbox/" .. sid)).status)
  end)

  it("records a restore that failed; Retry after the checkpoint is deleted starts empty", function()
    local c = create(srv, { id = "broken", environmentId = "renv" })
    srv:json("POST", rails("/sandbox/" .. c.json.id .. "/exec"), { command = "echo x > f" })
    assert.are.equal(204, srv:curl("DELETE", rails("/sandbox/" .. c.json.id)).status)
    local cps = api("GET", "checkpoints", { project = "proj", environment = "renv" }).json
    local name = cps.checkpoints[1].name
    platform.writeFile(srv.dataDir .. "/checkpoints/" .. name .. ".tar", "not a tar archive")
    c = create(srv, { id = "broken", environmentId = "renv" })
    assert.are.equal(500, c.status)
    local f = api("GET", "failures", { project = "proj", environment = "renv" }).json.failures
    assert.are.equal(1, #f)
    assert.are.equal("restore", f[1].kind)
    assert.are.equal("broken", f[1].subject)
    assert.truthy(f[1].message:find("could not be restored", 1, true), f[1].message)
    -- the retry starts a create that restores the same broken checkpoint:
    -- it answers once the create started, and the restore fails anew
    local first = f[1].id
    local r = api("POST", "failures/retry", { id = math.tointeger(first) })
    assert.are.equal(204, r.status)
    assert.is_true(platform.waitUntil(function()
      f = api("GET", "failures", { project = "proj", environment = "renv" }).json.failures
      return #f == 1 and f[1].id ~= first
    end, 10000))
    assert.are.equal("restore", f[1].kind)
    assert.are.same({}, api("GET", "sandboxes", { project = "proj", environment = "renv" })
      .json.sandboxes)
    assert.are.equal(204, api("DELETE", "checkpoint",
      { project = "proj", environment = "renv", name = name }).status)
    r = api("POST", "failures/retry", { id = math.tointeger(f[1].id) })
    assert.are.equal(204, r.status)
    local sbs = api("GET", "sandboxes", { project = "proj", environment = "renv" }).json
    assert.are.equal(1, #sbs.sandboxes)
    assert.are.equal(204, srv:curl("DELETE", rails("/sandbox/" .. sbs.sandboxes[1].id)).status)
  end)

  it("lists checkpoints by recovery key, and deletes them", function()
    local c = create(srv, { id = "keep-me", environmentId = "cenv" })
    assert.are.equal(201, c.status)
    srv:json("POST", rails("/sandbox/" .. c.json.id .. "/exec"),
      { command = "head -c 5000 /dev/urandom > blob" })
    assert.are.equal(204, srv:curl("DELETE", rails("/sandbox/" .. c.json.id)).status)
    local r = api("GET", "checkpoints", { project = "proj", environment = "cenv" })
    assert.are.equal(1, #r.json.checkpoints)
    local cp = r.json.checkpoints[1]
    assert.are.equal("keep-me", cp.key)
    assert.is_false(cp.named)
    assert.is_true(cp.size > 5000)
    assert.is_true(cp.removeAt > cp.lastUsedAt) -- 7 days of retention
    r = api("DELETE", "checkpoint", { project = "proj", environment = "other", name = cp.name })
    assert.are.equal(404, r.status)
    r = api("DELETE", "checkpoint", { project = "proj", environment = "cenv", name = cp.name })
    assert.are.equal(204, r.status)
    r = api("GET", "checkpoints", { project = "proj", environment = "cenv" })
    assert.are.same({}, r.json.checkpoints)
  end)

  it("browses the bucket by folders, and shows health", function()
    for _, k in ipairs{ "top.txt", "dir/a.txt", "dir/sub/b.txt" } do
      srv:curl("PUT", rails("/fs/bk/" .. k), { body = k })
    end
    local r = api("GET", "buckets", { project = "proj" })
    assert.are.same({ "bk" }, r.json.buckets)
    r = api("GET", "bucket", { project = "proj", bucket = "bk" })
    assert.are.same({ "dir/" }, { r.json.folders[1].prefix })
    assert.are.equal("top.txt", r.json.objects[1].key)
    assert.are.equal(7, r.json.objects[1].size)
    r = api("GET", "bucket", { project = "proj", bucket = "bk", prefix = "dir/" })
    assert.are.equal("sub/", r.json.folders[1].name)
    assert.are.equal("a.txt", r.json.objects[1].name)
    r = api("GET", "object", { project = "proj", bucket = "bk", key = "dir/a.txt" })
    assert.are.equal("dir/a.txt", r.body)
    assert.truthy(r.headers["content-disposition"]:find("a.txt", 1, true))
    r = api("DELETE", "object", { project = "proj", bucket = "bk", key = "dir/" })
    assert.are.equal(204, r.status)
    r = api("GET", "bucket", { project = "proj", bucket = "bk" })
    assert.are.same({}, r.json.folders)
    -- every environment the platform knows, for the page's picker
    r = api("GET", "session")
    local names = {}
    for _, e in ipairs(r.json.environments) do names[e.environmentId] = true end
    assert.is_true(names.env and names.fenv and names.cenv)
    -- disk use is measured off the server's thread, then shown
    assert.is_true(platform.waitUntil(function()
      return api("GET", "health").json.diskUseBytes ~= platform.null
    end, 10000))
    r = api("GET", "health")
    assert.is_true(r.json.diskUseBytes > 0)
    assert.are.equal(0, r.json.liveSandboxes)
  end)
end)
