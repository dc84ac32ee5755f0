-- mastra-platform, the local server of the Mastra Platform API (the
-- sandbox routes, exec leases, the exec WebSocket, the /fs bucket routes and
-- the error bodies: docs/platform.md), driven
-- over the wire: curl for HTTP, spec/support/ws-exec for the exec
-- WebSocket. Needs MASTRA_PLATFORM and MASTRA_WS_EXEC (set by CTest).
--
-- Every describe has its own data directory and server(s); teardown stops
-- them (SIGTERM must give exit status 0) and removes the directories.
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local null = platform.null

-- MASTRA_SPEC_FIGURES=1: print timings (1,000 PUTs, 100 execs ...) on stderr
local function figure(fmt, ...)
  if os.getenv("MASTRA_SPEC_FIGURES") then
    io.stderr:write(("[figures] " .. fmt .. "\n"):format(...))
  end
end

-- {====== helpers ======

local function rails(project) return "/v1/railway/projects/" .. project end

-- seconds since the epoch of a UTC civil date (no dependence on TZ)
local function utc_seconds(y, mo, d, h, mi, s)
  y = mo <= 2 and y - 1 or y
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local doy = (153 * (mo + (mo > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  local days = era * 146097 + doe - 719468
  return days * 86400 + h * 3600 + mi * 60 + s
end

-- ISO-8601 UTC ("2030-01-01T00:00:00.000Z") -> seconds, or nil
local function iso_seconds(s)
  if type(s) ~= "string" then return nil end
  local y, mo, d, h, mi, sec, frac =
    s:match("^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)(%.?%d*)Z$")
  if y == nil then return nil end
  return utc_seconds(tonumber(y), tonumber(mo), tonumber(d), tonumber(h), tonumber(mi),
    tonumber(sec)) + (tonumber("0" .. frac) or 0)
end

local MONTHS = { Jan = 1, Feb = 2, Mar = 3, Apr = 4, May = 5, Jun = 6, Jul = 7, Aug = 8,
  Sep = 9, Oct = 10, Nov = 11, Dec = 12 }

-- RFC 7231 IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") -> seconds, or nil
local function http_date_seconds(s)
  if type(s) ~= "string" then return nil end
  local d, mon, y, h, mi, sec =
    s:match("^%a%a%a, (%d%d) (%a%a%a) (%d%d%d%d) (%d%d):(%d%d):(%d%d) GMT$")
  if d == nil or MONTHS[mon] == nil then return nil end
  return utc_seconds(tonumber(y), MONTHS[mon], tonumber(d), tonumber(h), tonumber(mi),
    tonumber(sec))
end

-- {"error":{"message":<non-empty string>,"type":<type>}} with status;
-- ctx: what was sent (for the failure message)
local function assert_error(r, status, type_, mentions, ctx)
  assert.are.equal(status, r.status, (ctx and (ctx .. ": ") or "") .. "status; body: "
    .. tostring(r.body))
  assert.is_table(r.json, "a JSON error body; got: " .. tostring(r.body))
  assert.is_table(r.json.error, "an 'error' object; got: " .. tostring(r.body))
  assert.is_string(r.json.error.message)
  assert.is_true(#r.json.error.message > 0, "an empty error message")
  if type_ then assert.are.equal(type_, r.json.error.type, "error type; body: " .. r.body) end
  if mentions then
    assert.is_truthy(r.json.error.message:find(mentions, 1, true),
      ("the message should name %q: %s"):format(mentions, r.json.error.message))
  end
  assert.matches("^application/json", r.headers["content-type"] or "")
end

local function create(srv, prefix, body)
  local r = srv:json("POST", prefix .. "/sandbox", body)
  assert.are.equal(201, r.status, "POST /sandbox: " .. r.body)
  return r.json, r
end

-- Pseudo-random bytes (deterministic), with runs of NUL bytes in them.
local function binary_blob(n, seed)
  local rng = seed or 12345
  local parts, have = {}, 0
  while have < n do
    rng = (rng * 6364136223846793005 + 1442695040888963407) & 0xffffffffffffffff
    local chunk = string.pack("<i8", rng) .. "\0\0\0\r\n\255"
    parts[#parts + 1] = chunk
    have = have + #chunk
  end
  return table.concat(parts):sub(1, n)
end

-- Every path under dir (relative), sorted, but the server's own state and
-- checkpoints (written on their own schedule).
local function tree(srv, dir)
  local r = srv:sh("find", { dir, "-mindepth", "1", "-printf", "%P\\n" })
  local out = {}
  for line in r.stdout:gmatch("[^\n]+") do
    if not line:match("^data/state") and not line:match("^data/checkpoints") then
      out[#out + 1] = line
    end
  end
  table.sort(out)
  return out
end

-- Alive and not a zombie
local function alive(pid)
  local s = platform.readFile("/proc/" .. tostring(pid) .. "/stat")
  if not s then return false end
  local state = s:match(".*%) (%a)")
  return state ~= nil and state ~= "Z"
end

-- The data plane and shutdown specs have their commands write pid files into
-- the host's scratch directory and watch host pids: the process driver's
-- semantics (the namespaces driver's are in namespaces_spec.lua).
local HOST_PATHS = { "--driver", "process" }

-- A fresh directory and a server on it; returns dir, server.
local function fresh_server(args)
  local dir = platform.tmpdir()
  local ok, srv = pcall(platform.start, {
    dataDir = dir .. "/data", tokenFile = dir .. "/token", args = args,
  })
  if not ok then
    platform.rm_rf(dir)
    error(srv, 0)
  end
  return dir, srv
end

-- Stop every server (SIGTERM, exit status 0 expected), then remove dirs;
-- the first failure is raised after everything was cleaned.
local function shutdown(servers, dirs)
  local failure
  for _, srv in pairs(servers) do
    local ok, err = pcall(srv.stop, srv)
    if not ok then
      srv:kill9()
      failure = failure or err
    end
  end
  for _, d in pairs(dirs) do platform.rm_rf(d) end
  if failure then error(failure, 0) end
end

-- }======

describe("mastra-platform control plane", function()
  local dir, srv

  setup(function()
    dir, srv = fresh_server()
  end)

  teardown(function()
    shutdown({ srv }, { dir })
  end)

  for _, prefix in ipairs{ "/v1/railway/projects/proj-a", "/v1/e2b/projects/proj-a",
    "/v1/projects/proj-a" } do
    describe("under " .. prefix, function()
      local sb, created, before -- the record made in setup, its response

      setup(function()
        before = os.time()
        created = srv:json("POST", prefix .. "/sandbox", { id = "recovery-key-1",
          environmentId = "env-1", env = platform.object() })
        sb = created.json
      end)

      it("POST /sandbox answers 201 with the server's own sbx_ id", function()
        assert.are.equal(201, created.status, created.body)
        assert.matches("^application/json", created.headers["content-type"])
        assert.is_table(sb)
        assert.is_string(sb.id)
        assert.matches("^sbx_", sb.id)
        assert.are_not.equal("recovery-key-1", sb.id)
        assert.is_string(sb.providerResourceId)
        assert.is_true(#sb.providerResourceId > 0)
        assert.are.equal("ready", sb.status)
        local t = iso_seconds(sb.createdAt)
        assert.is_number(t, "createdAt is not ISO-8601 UTC: " .. tostring(sb.createdAt))
        assert.is_true(t >= before - 5 and t <= os.time() + 5,
          "createdAt is not now: " .. sb.createdAt)
        assert.are.equal(null, sb.destroyedAt, "destroyedAt must be present and null")
      end)

      it("POST /sandbox twice gives two different ids", function()
        local a = create(srv, prefix, { environmentId = "env-1" })
        local b = create(srv, prefix, { environmentId = "env-1" })
        assert.are_not.equal(a.id, b.id)
        assert.are.equal(204, srv:curl("DELETE", prefix .. "/sandbox/" .. a.id).status)
        assert.are.equal(204, srv:curl("DELETE", prefix .. "/sandbox/" .. b.id).status)
      end)

      it("GET /sandbox/:id answers 200 with the same record", function()
        local r = srv:curl("GET", prefix .. "/sandbox/" .. sb.id)
        assert.are.equal(200, r.status)
        assert.matches("^application/json", r.headers["content-type"])
        assert.are.equal(sb.id, r.json.id)
        assert.are.equal(sb.providerResourceId, r.json.providerResourceId)
        assert.are.equal(sb.createdAt, r.json.createdAt)
        assert.are.equal("ready", r.json.status)
        assert.are.equal(null, r.json.destroyedAt)
      end)

      it("GET of an unknown sandbox answers 404 not_found", function()
        assert_error(srv:curl("GET", prefix .. "/sandbox/sbx_doesnotexist"), 404, "not_found")
      end)

      it("POST exec-lease answers 200 with a railway lease; each lease is new", function()
        local r = srv:curl("POST", prefix .. "/sandbox/" .. sb.id .. "/exec-lease")
        assert.are.equal(200, r.status, r.body)
        assert.matches("^application/json", r.headers["content-type"])
        local l = r.json
        assert.are.equal("railway", l.provider)
        assert.are.equal(sb.id, l.sandboxId)
        assert.are.equal(sb.providerResourceId, l.providerResourceId)
        assert.is_string(l.jwt)
        assert.matches("^%x+$", l.jwt)
        assert.is_true(#l.jwt >= 32, "jwt too short: " .. l.jwt)
        assert.are.equal(("ws://127.0.0.1:%d/ws/exec"):format(srv.port), l.wsEndpoint)
        assert.are.equal("railway-shell", l.subprotocol)
        local exp = iso_seconds(l.expiresAt)
        assert.is_number(exp, "expiresAt is not ISO-8601 UTC: " .. tostring(l.expiresAt))
        assert.is_true(exp > os.time() + 60, "expiresAt is not in the future: " .. l.expiresAt)
        local again = srv:lease(prefix, sb.id)
        assert.are_not.equal(l.jwt, again.jwt)
      end)

      it("POST exec-lease of an unknown sandbox answers 404 not_found", function()
        assert_error(srv:curl("POST", prefix .. "/sandbox/sbx_nope/exec-lease"), 404, "not_found")
      end)

      it("POST checkpoint captures, DELETE checkpoint removes it", function()
        local path = prefix .. "/sandbox/" .. sb.id .. "/checkpoint"
        local r = srv:json("POST", path, { id = "recovery-key-1" })
        assert.are.equal(200, r.status, r.body)
        assert.is_string(r.json.checkpointName)
        assert.is_true(#r.json.checkpointName > 0)
        assert.are.equal("captured", r.json.status)
        local d = srv:json("DELETE", path, { id = "recovery-key-1" })
        assert.are.equal(204, d.status, d.body)
        assert.are.equal("", d.body)
        assert_error(srv:json("DELETE", path, { id = "recovery-key-1" }), 404, "not_found")
      end)

      it("POST checkpoint of a sandbox without a recovery key is skipped", function()
        local other = create(srv, prefix, { environmentId = "env-1" })
        local r = srv:curl("POST", prefix .. "/sandbox/" .. other.id .. "/checkpoint")
        assert.are.equal(200, r.status, r.body)
        assert.are.equal("skipped", r.json.status)
        assert.are.equal(204, srv:curl("DELETE", prefix .. "/sandbox/" .. other.id).status)
      end)

      it("legacy POST /sandbox/:id/exec runs the command", function()
        local r = srv:json("POST", prefix .. "/sandbox/" .. sb.id .. "/exec",
          { command = "echo hi; echo oops >&2; exit 7", timeoutSec = 30 })
        assert.are.equal(200, r.status, r.body)
        assert.are.equal(7, r.json.exitCode)
        assert.are.equal("hi\n", r.json.stdout)
        assert.are.equal("oops\n", r.json.stderr)
        assert.are.equal(false, r.json.truncated)
        assert.are.equal(false, r.json.timedOut)
      end)

      it("legacy exec honours cwd and env", function()
        local r = srv:json("POST", prefix .. "/sandbox/" .. sb.id .. "/exec",
          { command = "mkdir -p sub && echo \"$GREETING\"",
            env = { GREETING = "hello there" } })
        assert.are.equal(200, r.status, r.body)
        assert.are.equal(0, r.json.exitCode)
        assert.are.equal("hello there\n", r.json.stdout)
        r = srv:json("POST", prefix .. "/sandbox/" .. sb.id .. "/exec",
          { command = "basename \"$PWD\"", cwd = "sub" })
        assert.are.equal(200, r.status, r.body)
        assert.are.equal("sub\n", r.json.stdout)
      end)

      it("legacy exec with timeoutSec times out", function()
        local t0 = mastra.now()
        local r = srv:json("POST", prefix .. "/sandbox/" .. sb.id .. "/exec",
          { command = "sleep 20", timeoutSec = 1 })
        assert.are.equal(200, r.status, r.body)
        assert.are.equal(true, r.json.timedOut)
        assert.is_true(r.json.exitCode == null or r.json.exitCode == 124,
          "exitCode after a timeout: " .. tostring(r.json.exitCode))
        assert.is_true(mastra.now() - t0 < 10000, "the timeout took too long")
      end)

      it("another project cannot see, lease or delete the sandbox", function()
        local other = prefix:gsub("proj%-a$", "proj-b")
        assert_error(srv:curl("GET", other .. "/sandbox/" .. sb.id), 404, "not_found")
        assert_error(srv:curl("POST", other .. "/sandbox/" .. sb.id .. "/exec-lease"), 404,
          "not_found")
        assert_error(srv:curl("DELETE", other .. "/sandbox/" .. sb.id), 404, "not_found")
        assert_error(srv:json("POST", other .. "/sandbox/" .. sb.id .. "/exec",
          { command = "true" }), 404, "not_found")
        local r = srv:curl("GET", prefix .. "/sandbox/" .. sb.id)
        assert.are.equal(200, r.status)
        assert.are.equal(null, r.json.destroyedAt)
      end)

      it("DELETE answers 204; then GET shows destroyedAt, lease and checkpoint 410", function()
        local t0 = os.time()
        local d = srv:curl("DELETE", prefix .. "/sandbox/" .. sb.id)
        assert.are.equal(204, d.status, d.body)
        assert.are.equal("", d.body)
        local r = srv:curl("GET", prefix .. "/sandbox/" .. sb.id)
        assert.are.equal(200, r.status)
        assert.are.equal(sb.id, r.json.id)
        local destroyed = iso_seconds(r.json.destroyedAt)
        assert.is_number(destroyed, "destroyedAt: " .. tostring(r.json.destroyedAt))
        assert.is_true(destroyed >= t0 - 5 and destroyed <= os.time() + 5)
        assert_error(srv:curl("POST", prefix .. "/sandbox/" .. sb.id .. "/exec-lease"), 410,
          "sandbox_destroyed")
        assert_error(srv:json("POST", prefix .. "/sandbox/" .. sb.id .. "/checkpoint",
          { id = "recovery-key-1" }), 410, "sandbox_destroyed")
        assert_error(srv:json("POST", prefix .. "/sandbox/" .. sb.id .. "/exec",
          { command = "true" }), 410, "sandbox_destroyed")
      end)
    end)
  end

  it("an unknown route answers 404 not_found", function()
    assert_error(srv:curl("GET", "/v1/railway/projects/p/nothing-here"), 404, "not_found")
    assert_error(srv:curl("GET", "/v2/whatever"), 404, "not_found")
  end)
end)

describe("mastra-platform checkpoint recovery", function()
  local dir, srv
  local P = rails("proj-ckpt")

  setup(function()
    dir, srv = fresh_server()
  end)

  teardown(function()
    shutdown({ srv }, { dir })
  end)

  local function run(sb, command)
    return srv:wsExec(srv:lease(P, sb.id), command)
  end

  it("a sandbox created again with the same id starts from the checkpoint", function()
    local first = create(srv, P, { id = "k1", environmentId = "env" })
    local w = run(first, "echo data > f.txt")
    assert.are.equal(0, w.exitCode, w.stderr)
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. first.id).status)
    local second = create(srv, P, { id = "k1", environmentId = "env" })
    assert.are_not.equal(first.id, second.id)
    local r = run(second, "cat f.txt")
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal("data\n", r.stdout)
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. second.id).status)
  end)

  it("an unknown id starts fresh", function()
    local sb = create(srv, P, { id = "never-seen-before", environmentId = "env" })
    local r = run(sb, "if [ -e f.txt ]; then echo present; else echo absent; fi; ls -A | wc -l")
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal("absent\n0\n", r.stdout)
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. sb.id).status)
  end)

  it("no id starts fresh", function()
    local sb = create(srv, P, { environmentId = "env" })
    local r = run(sb, "ls -A | wc -l")
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal("0\n", r.stdout)
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. sb.id).status)
  end)

  it("a tree emptied before the destroy leaves no checkpoint behind (no tar of nothing)",
    function()
      local function tars()
        local r = srv:sh("ls " .. mastra.quote(srv.dataDir .. "/checkpoints")
          .. " | grep -c '[.]tar$' || true")
        return tonumber(r.stdout)
      end
      local first = create(srv, P, { id = "k-empty", environmentId = "env" })
      assert.are.equal(0, run(first, "echo x > f.txt").exitCode)
      local before = tars()
      assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. first.id).status)
      assert.are.equal(before + 1, tars())
      local second = create(srv, P, { id = "k-empty", environmentId = "env" })
      assert.are.equal("x\n", run(second, "cat f.txt").stdout)
      assert.are.equal(0, run(second, "rm f.txt").exitCode)
      assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. second.id).status)
      assert.are.equal(before, tars())
      local third = create(srv, P, { id = "k-empty", environmentId = "env" })
      assert.are.equal("0\n", run(third, "ls -A | wc -l").stdout)
      assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. third.id).status)
    end)

  it("the same id in another project starts fresh", function()
    local sb = create(srv, rails("proj-other"), { id = "k1", environmentId = "env" })
    local r = srv:wsExec(srv:lease(rails("proj-other"), sb.id),
      "if [ -e f.txt ]; then echo present; else echo absent; fi")
    assert.are.equal("absent\n", r.stdout)
    assert.are.equal(204, srv:curl("DELETE", rails("proj-other") .. "/sandbox/" .. sb.id).status)
  end)
end)

describe("mastra-platform errors", function()
  local dir, srv, sb
  local P = rails("proj-err")

  setup(function()
    dir, srv = fresh_server()
    sb = create(srv, P, { id = "err-key", environmentId = "env" })
    local r = srv:curl("PUT", P .. "/fs/bkt/present.txt", { body = "present" })
    assert.are.equal(200, r.status, r.body)
  end)

  teardown(function()
    shutdown({ srv }, { dir })
  end)

  describe("authentication", function()
    local routes = {
      { "POST", "/sandbox", '{"environmentId":"env"}' },
      { "GET", "/sandbox/{id}" },
      { "DELETE", "/sandbox/{id}" },
      { "POST", "/sandbox/{id}/exec-lease" },
      { "POST", "/sandbox/{id}/checkpoint", '{"id":"err-key"}' },
      { "DELETE", "/sandbox/{id}/checkpoint", '{"id":"err-key"}' },
      { "POST", "/sandbox/{id}/exec", '{"command":"touch pwned"}' },
      { "GET", "/fs/bkt/present.txt" },
      { "HEAD", "/fs/bkt/present.txt" },
      { "PUT", "/fs/bkt/new.txt", "new" },
      { "DELETE", "/fs/bkt/present.txt" },
      { "POST", "/fs/bkt/present.txt?op=copy", '{"destination":"copy.txt"}' },
      { "POST", "/fs/bkt/dir?op=mkdir" },
      { "GET", "/fs/bkt/?delimiter=%2F" },
      { "GET", "/nothing/here" },
    }
    local creds = {
      { "no Authorization header", false },
      { "a wrong token", "0000000000000000000000000000000000000000000000000000000000000000" },
      { "the token with one more character", "{token}x" },
      { "a prefix of the token", "{token-1}" },
      { "an empty token", "" },
    }
    for _, route in ipairs(routes) do
      local method, path, body = route[1], route[2], route[3]
      it(("%s %s answers 401 authentication_error"):format(method, path), function()
        for _, c in ipairs(creds) do
          local token = c[2]
          if token == "{token}x" then token = srv.token .. "x" end
          if token == "{token-1}" then token = srv.token:sub(1, -2) end
          local r = srv:curl(method, P .. path:gsub("{id}", sb.id), { body = body, token = token })
          if method == "HEAD" then
            assert.are.equal(401, r.status, c[1])
          else
            assert.are.equal(401, r.status, c[1] .. ": " .. r.body)
            assert_error(r, 401, "authentication_error")
          end
        end
        -- nothing happened
        local g = srv:curl("GET", P .. "/sandbox/" .. sb.id)
        assert.are.equal(200, g.status)
        assert.are.equal(null, g.json.destroyedAt)
        assert.are.equal(404, srv:curl("HEAD", P .. "/fs/bkt/new.txt").status)
        assert.are.equal(404, srv:curl("HEAD", P .. "/fs/bkt/copy.txt").status)
        assert.are.equal(404, srv:curl("HEAD", P .. "/fs/bkt/dir/").status)
        assert.are.equal("present", srv:curl("GET", P .. "/fs/bkt/present.txt").body)
        local w = srv:wsExec(srv:lease(P, sb.id), "ls -A")
        assert.are.equal(0, w.exitCode, w.stderr)
        assert.are.equal("", w.stdout, "a refused request ran a command")
      end)
    end

    it("a Basic Authorization header is refused", function()
      local r = srv:curl("GET", P .. "/sandbox/" .. sb.id,
        { token = false, headers = { Authorization = "Basic " .. srv.token } })
      assert_error(r, 401, "authentication_error")
    end)

    it("the right token is accepted with any case of 'Bearer'", function()
      local r = srv:curl("GET", P .. "/sandbox/" .. sb.id,
        { token = false, headers = { Authorization = "bearer " .. srv.token } })
      assert.are.equal(200, r.status)
    end)
  end)

  describe("request bodies", function()
    it("malformed JSON answers 400 invalid_request", function()
      for _, body in ipairs{ '{"id":', "not json", '{"environmentId":"env",}', "[1,2]", '"str"',
        "null" } do
        assert_error(srv:json("POST", P .. "/sandbox", body), 400, "invalid_request")
      end
      assert_error(srv:json("POST", P .. "/sandbox/" .. sb.id .. "/checkpoint", "{oops"), 400,
        "invalid_request")
      assert_error(srv:json("POST", P .. "/sandbox/" .. sb.id .. "/exec", "{oops"), 400,
        "invalid_request")
      assert_error(srv:json("POST", P .. "/fs/bkt/present.txt?op=copy", "{oops"), 400,
        "invalid_request")
    end)

    it("networkIsolation other than ISOLATED or PRIVATE answers 400", function()
      assert_error(srv:json("POST", P .. "/sandbox",
        { environmentId = "env", networkIsolation = "FOO" }), 400, "invalid_request",
        "networkIsolation")
      assert_error(srv:json("POST", P .. "/sandbox",
        { environmentId = "env", networkIsolation = 3 }), 400, "invalid_request",
        "networkIsolation")
      for _, v in ipairs{ "ISOLATED", "PRIVATE" } do
        local r = srv:json("POST", P .. "/sandbox", { environmentId = "env", networkIsolation = v })
        assert.are.equal(201, r.status, r.body)
        assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. r.json.id).status)
      end
    end)

    it("idleTimeoutMinutes that is not a number answers 400", function()
      assert_error(srv:json("POST", P .. "/sandbox",
        { environmentId = "env", idleTimeoutMinutes = "x" }), 400, "invalid_request",
        "idleTimeoutMinutes")
      assert_error(srv:json("POST", P .. "/sandbox",
        { environmentId = "env", idleTimeoutMinutes = -1 }), 400, "invalid_request",
        "idleTimeoutMinutes")
    end)

    it("a missing environmentId answers 400 naming it", function()
      assert_error(srv:json("POST", P .. "/sandbox", { id = "x" }), 400, "invalid_request",
        "environmentId")
    end)

    it("env that is not an object of strings answers 400 naming it", function()
      assert_error(srv:json("POST", P .. "/sandbox", { environmentId = "env", env = { A = 1 } }),
        400, "invalid_request", "env")
      assert_error(srv:json("POST", P .. "/sandbox", { environmentId = "env", env = "A=1" }),
        400, "invalid_request", "env")
    end)

    it("a 50 MB JSON body answers 413 quickly, and the server goes on", function()
      local big = dir .. "/big.json"
      platform.writeFile(big, '{"environmentId":"env","id":"' .. ("a"):rep(50 * 1024 * 1024)
        .. '"}')
      -- with Expect: 100-continue (curl's default for big bodies) and without
      for _, headers in ipairs{ { ["Content-Type"] = "application/json" },
        { ["Content-Type"] = "application/json", Expect = "" } } do
        local t0 = mastra.now()
        local r = srv:curl("POST", P .. "/sandbox", { bodyFile = big, headers = headers,
          allowFail = true, maxTime = 30 })
        local ms = mastra.now() - t0
        assert.are.equal(413, r.status, ("Expect: %s; curl exit %s: %s"):format(
          headers.Expect and "none" or "100-continue", r.curlExit, r.curlError))
        assert_error(r, 413)
        assert.is_true(ms < 10000, ("413 took %.0f ms"):format(ms))
        figure("50 MB body (Expect: %s): 413 after %.0f ms",
          headers.Expect and "none" or "100-continue", ms)
      end
      -- chunked: no Content-Length up front
      local t0 = mastra.now()
      local r = srv:curl("POST", P .. "/sandbox", { bodyFile = big, allowFail = true,
        maxTime = 30, headers = { ["Content-Type"] = "application/json",
          ["Transfer-Encoding"] = "chunked", Expect = "" } })
      assert.are.equal(413, r.status, ("curl exit %s: %s"):format(r.curlExit, r.curlError))
      assert_error(r, 413)
      assert.is_true(mastra.now() - t0 < 10000)
      figure("50 MB chunked body: 413 after %.0f ms", mastra.now() - t0)
      os.remove(big)
      assert.are.equal(200, srv:curl("GET", P .. "/sandbox/" .. sb.id).status)
    end)
  end)

  describe("keys", function()
    local bad = {
      { "..%2F..%2Fetc", "an encoded ../../" },
      { "a%00b", "a NUL byte" },
      { "%00", "only a NUL byte" },
      { "a/../../b", "a raw ../" },
      { "../../../escaped", "a raw ../ out of the bucket" },
      { "a/./b", "a . segment" },
      { "a//b", "an empty segment" },
      { "%2Fabs", "a leading slash" },
      { "a%2", "a bad percent-escape" },
    }

    local before -- the files under dir before the bad requests

    setup(function()
      before = tree(srv, dir)
    end)

    for _, b in ipairs(bad) do
      local path = P .. "/fs/bkt/" .. b[1]

      it(("a key with %s (%s) answers 400 to every method"):format(b[2], b[1]), function()
        for _, m in ipairs{ "PUT", "GET", "DELETE" } do
          local r = srv:curl(m, path, { raw = true, body = m == "PUT" and "x" or nil })
          assert_error(r, 400, "invalid_request", nil, m .. " " .. b[1])
        end
        assert.are.equal(400, srv:curl("HEAD", path, { raw = true }).status, b[2])
        assert_error(srv:json("POST", path .. "?op=copy", { destination = "ok.txt" },
          { raw = true }), 400, "invalid_request", nil, "copy from " .. b[1])
        assert_error(srv:curl("POST", path .. "?op=mkdir", { raw = true }), 400,
          "invalid_request", nil, "mkdir " .. b[1])
      end)

      -- a copy or rename destination is a raw (unencoded) key
      if not b[1]:match("%%2$") then
        local dest = b[1]:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)
        it(("a destination with %s answers 400 to copy and rename"):format(b[2]), function()
          for _, op in ipairs{ "copy", "rename" } do
            assert_error(srv:json("POST", P .. "/fs/bkt/present.txt?op=" .. op,
              { destination = dest }), 400, "invalid_request", nil,
              ("%s to the destination %q"):format(op, dest))
          end
          assert.are.equal("present", srv:curl("GET", P .. "/fs/bkt/present.txt").body)
        end)
      end
    end

    it("nothing was written by the bad requests, in the bucket or outside", function()
      assert.are.same(before, tree(srv, dir))
      -- the temp dirs of this spec (spec/support/run-busted: $TMPDIR), and /tmp
      local escaped = srv:sh("find", { util.tmproot(), "-maxdepth", "6", "-name", "escaped" })
      assert.are.equal("", escaped.stdout)
      escaped = srv:sh("find", { "/tmp", "-maxdepth", "3", "-name", "escaped" })
      assert.are.equal("", escaped.stdout)
      local listing = srv:curl("GET", P .. "/fs/bkt/")
      local keys = {}
      for _, e in ipairs(listing.json.contents) do keys[#keys + 1] = e.key end
      assert.are.same({ "present.txt" }, keys)
    end)
  end)

  describe("idle and slow clients", function()
    it("clients that send nothing are timed out; others are served meanwhile", function()
      local idle = {}
      local function hold(script)
        local h = srv.sandbox.processes:spawn("exec bash -c " .. mastra.quote(script))
        idle[#idle + 1] = h
      end
      local open = ("exec 3<>/dev/tcp/127.0.0.1/%d || exit 9; "):format(srv.port)
      for _ = 1, 8 do
        hold(open .. "cat <&3 >/dev/null; echo closed")
      end
      for _ = 1, 4 do -- half a request head, then silence
        hold(open .. "printf 'GET " .. P .. "/sandbox/x HTTP/1.1\\r\\nHost: a\\r\\n' >&3;"
          .. " cat <&3 >/dev/null; echo closed")
      end
      mastra.sleep(300)
      for i, h in ipairs(idle) do
        assert.is_nil(h.exitCode, ("idle client %d ended early: %s"):format(i, h.stderr))
      end
      local t0 = mastra.now()
      for _ = 1, 20 do
        local r = srv:curl("GET", P .. "/sandbox/" .. sb.id)
        assert.are.equal(200, r.status)
        assert.is_true(r.timeMs < 3000, ("a request took %.0f ms"):format(r.timeMs))
      end
      assert.is_true(mastra.now() - t0 < 15000)
      figure("20 requests with 12 idle connections open: %.0f ms", mastra.now() - t0)
      local w = srv:wsExec(srv:lease(P, sb.id), "echo still served")
      assert.are.equal("still served\n", w.stdout)
      -- the server drops them after its connection timeout
      local done = platform.waitUntil(function()
        for _, h in ipairs(idle) do
          if h.exitCode == nil then return false end
        end
        return true
      end, 90000, 250)
      assert.is_true(done, "idle connections are still open after 90 s")
      figure("idle connections dropped %.0f ms after they opened", mastra.now() - t0)
      for i, h in ipairs(idle) do
        assert.are.equal("closed\n", h.stdout, ("idle client %d: %s"):format(i, h.stderr))
      end
      assert.are.equal(200, srv:curl("GET", P .. "/sandbox/" .. sb.id).status)
    end)
  end)
end)

describe("mastra-platform bucket", function()
  local dir, srv
  local P = rails("proj-fs")
  local B = P .. "/fs/bkt/"

  setup(function()
    dir, srv = fresh_server()
  end)

  teardown(function()
    shutdown({ srv }, { dir })
  end)

  local function put(key, body, headers)
    local r = srv:curl("PUT", B .. key, { body = body, headers = headers })
    assert.are.equal(200, r.status, ("PUT %s: %s"):format(key, r.body))
    return r
  end

  local function get(key)
    return srv:curl("GET", B .. key)
  end

  it("PUT then GET gives the bytes back (NUL bytes, CR, 0xff)", function()
    local body = "a\0b\r\n\255\0\0end"
    put("bin/small.bin", body)
    local r = get("bin/small.bin")
    assert.are.equal(200, r.status)
    assert.are.equal(body, r.body)
  end)

  it("an empty object round-trips", function()
    put("empty.txt", "")
    local r = get("empty.txt")
    assert.are.equal(200, r.status)
    assert.are.equal("", r.body)
    assert.are.equal("0", srv:curl("HEAD", B .. "empty.txt").headers["content-length"])
  end)

  it("a 10 MB binary object round-trips byte for byte", function()
    local body = binary_blob(10 * 1024 * 1024, 42)
    assert.is_truthy(body:find("\0", 1, true))
    local t0 = mastra.now()
    put("bin/big.bin", body, { ["Content-Type"] = "application/octet-stream" })
    local r = get("bin/big.bin")
    assert.are.equal(200, r.status)
    assert.are.equal(#body, #r.body)
    assert.is_true(body == r.body, "the 10 MB object came back different")
    assert.is_true(mastra.now() - t0 < 30000)
  end)

  it("PUT again overwrites", function()
    put("over.txt", "one")
    put("over.txt", "two, longer")
    assert.are.equal("two, longer", get("over.txt").body)
  end)

  it("HEAD answers content-length, last-modified and content-type", function()
    local before = os.time()
    put("head/x.json", '{"a":1}', { ["Content-Type"] = "application/x-test+json" })
    local r = srv:curl("HEAD", B .. "head/x.json")
    assert.are.equal(200, r.status)
    assert.are.equal("7", r.headers["content-length"])
    assert.are.equal("application/x-test+json", r.headers["content-type"])
    local lm = http_date_seconds(r.headers["last-modified"])
    assert.is_number(lm, "last-modified: " .. tostring(r.headers["last-modified"]))
    assert.is_true(lm >= before - 5 and lm <= os.time() + 5)
    -- GET says the same
    local g = get("head/x.json")
    assert.are.equal("application/x-test+json", g.headers["content-type"])
    assert.are.equal(r.headers["last-modified"], g.headers["last-modified"])
    assert.are.equal(404, srv:curl("HEAD", B .. "head/missing.json").status)
  end)

  it("GET of a missing object answers 404 not_found", function()
    assert_error(get("no/such/object.txt"), 404, "not_found")
  end)

  it("PUT with If-None-Match: * answers 412 when the key exists, content unchanged", function()
    put("inm.txt", "original")
    local r = srv:curl("PUT", B .. "inm.txt", { body = "replacement",
      headers = { ["If-None-Match"] = "*" } })
    assert_error(r, 412)
    assert.are.equal("original", get("inm.txt").body)
    local n = srv:curl("PUT", B .. "inm-new.txt", { body = "fresh",
      headers = { ["If-None-Match"] = "*" } })
    assert.are.equal(200, n.status, n.body)
    assert.are.equal("fresh", get("inm-new.txt").body)
  end)

  it("DELETE answers 204, then the object is gone", function()
    put("del.txt", "bye")
    local d = srv:curl("DELETE", B .. "del.txt")
    assert.are.equal(204, d.status)
    assert.are.equal("", d.body)
    assert_error(get("del.txt"), 404, "not_found")
    assert_error(srv:curl("DELETE", B .. "del.txt"), 404, "not_found")
  end)

  it("DELETE ?recursive=true removes a whole prefix and nothing else", function()
    for _, k in ipairs{ "tree/a.txt", "tree/b/c.txt", "tree/b/d/e.txt", "treehouse.txt",
      "other/tree/x.txt" } do
      put(k, k)
    end
    local d = srv:curl("DELETE", B .. "tree/?recursive=true")
    assert.are.equal(204, d.status, d.body)
    for _, k in ipairs{ "tree/a.txt", "tree/b/c.txt", "tree/b/d/e.txt" } do
      assert.are.equal(404, get(k).status, k)
    end
    assert.are.equal("treehouse.txt", get("treehouse.txt").body)
    assert.are.equal("other/tree/x.txt", get("other/tree/x.txt").body)
    local l = srv:curl("GET", B .. "?prefix=tree%2F")
    assert.are.equal(200, l.status)
    assert.are.same({}, l.json.contents)
  end)

  it("POST ?op=copy copies, the source stays", function()
    local body = binary_blob(5000, 7)
    put("cp/src.bin", body)
    local r = srv:json("POST", B .. "cp/src.bin?op=copy", { destination = "cp/dst dir/dst.bin" })
    assert.are.equal(204, r.status, r.body)
    assert.are.equal(body, get("cp/src.bin").body)
    assert.is_true(get("cp/dst%20dir/dst.bin").body == body)
    -- the destination is overwritten
    put("cp/other.bin", "other")
    r = srv:json("POST", B .. "cp/other.bin?op=copy", { destination = "cp/src.bin" })
    assert.are.equal(204, r.status, r.body)
    assert.are.equal("other", get("cp/src.bin").body)
    assert_error(srv:json("POST", B .. "cp/missing?op=copy", { destination = "cp/x" }), 404,
      "not_found")
    assert_error(srv:json("POST", B .. "cp/other.bin?op=copy", platform.object()), 400,
      "invalid_request", "destination")
  end)

  it("POST ?op=rename moves", function()
    put("mv/src.txt", "moving")
    local r = srv:json("POST", B .. "mv/src.txt?op=rename", { destination = "mv/dst.txt" })
    assert.are.equal(204, r.status, r.body)
    assert_error(get("mv/src.txt"), 404, "not_found")
    assert.are.equal("moving", get("mv/dst.txt").body)
    assert_error(srv:json("POST", B .. "mv/src.txt?op=rename", { destination = "mv/x.txt" }),
      404, "not_found")
  end)

  it("POST ?op=mkdir makes a directory that listings show", function()
    local r = srv:curl("POST", B .. "made/dir?op=mkdir")
    assert.are.equal(201, r.status, r.body)
    local l = srv:curl("GET", B .. "?delimiter=%2F&prefix=made%2F")
    assert.are.equal(200, l.status)
    assert.are.same({ "made/dir/" }, l.json.commonPrefixes)
    assert.are.equal(200, srv:curl("HEAD", B .. "made/dir/").status)
  end)

  it("POST with an unknown op answers 400", function()
    put("op.txt", "x")
    assert_error(srv:curl("POST", B .. "op.txt?op=explode"), 400, "invalid_request")
  end)

  it("GET of a prefix lists contents and commonPrefixes", function()
    local before = os.time()
    put("dir/a.txt", "aaa")
    put("dir/b.txt", "bb")
    put("dir/sub/c.txt", "c")
    put("dir/sub/deeper/d.txt", "d")
    put("dirx.txt", "not in dir")
    put("zother/e.txt", "e")
    local r = srv:curl("GET", B .. "?delimiter=%2F&prefix=dir%2F")
    assert.are.equal(200, r.status, r.body)
    assert.matches("^application/json", r.headers["content-type"])
    local c = r.json.contents
    assert.are.equal(2, #c, r.body)
    assert.are.equal("dir/a.txt", c[1].key)
    assert.are.equal(3, c[1].size)
    assert.are.equal("dir/b.txt", c[2].key)
    assert.are.equal(2, c[2].size)
    for _, e in ipairs(c) do
      local t = iso_seconds(e.lastModified)
      assert.is_number(t, "lastModified: " .. tostring(e.lastModified))
      assert.is_true(t >= before - 5 and t <= os.time() + 5)
    end
    assert.are.same({ "dir/sub/" }, r.json.commonPrefixes)
    -- without a delimiter: everything under the prefix, no rollup
    local all = srv:curl("GET", B .. "?prefix=dir%2F")
    local keys = {}
    for _, e in ipairs(all.json.contents) do keys[#keys + 1] = e.key end
    assert.are.same({ "dir/a.txt", "dir/b.txt", "dir/sub/c.txt", "dir/sub/deeper/d.txt" }, keys)
    assert.are.same({}, all.json.commonPrefixes or {})
    -- the root with a delimiter
    local root = srv:curl("GET", B .. "?delimiter=%2F")
    local prefixes = {}
    for _, p in ipairs(root.json.commonPrefixes) do prefixes[p] = true end
    assert.is_true(prefixes["dir/"])
    assert.is_true(prefixes["zother/"])
    local rootKeys = {}
    for _, e in ipairs(root.json.contents) do rootKeys[e.key] = true end
    assert.is_true(rootKeys["dirx.txt"])
    assert.is_nil(rootKeys["dir/a.txt"])
    -- the key part of the URL is the prefix when there is no ?prefix=
    local viaPath = srv:curl("GET", B .. "dir/?delimiter=%2F")
    assert.are.same(r.json, viaPath.json)
  end)

  it("an unknown bucket lists as empty or 404, never as another bucket", function()
    put("iso.txt", "in bkt")
    local r = srv:curl("GET", P .. "/fs/another-bucket/?delimiter=%2F")
    if r.status == 200 then
      assert.are.same({}, r.json.contents)
    else
      assert_error(r, 404, "not_found")
    end
    assert_error(srv:curl("GET", P .. "/fs/another-bucket/iso.txt"), 404, "not_found")
    assert_error(srv:curl("GET", rails("proj-fs-other") .. "/fs/bkt/iso.txt"), 404, "not_found")
  end)

  it("keys are percent-decoded", function()
    put("dir%20with%20space/a%26b.txt", "space and ampersand")
    put("notes/why%3F.txt", "question")
    put("notes/tag%23one.md", "hash")
    put("caf%C3%A9/%E2%9C%93.txt", "utf-8")
    local r = srv:curl("GET", B .. "?prefix=dir%20with%20space%2F")
    assert.are.equal(200, r.status)
    assert.are.equal("dir with space/a&b.txt", r.json.contents[1].key)
    local n = srv:curl("GET", B .. "?prefix=notes%2F")
    local keys = {}
    for _, e in ipairs(n.json.contents) do keys[#keys + 1] = e.key end
    assert.are.same({ "notes/tag#one.md", "notes/why?.txt" }, keys)
    assert.are.equal("question", get("notes/why%3F.txt").body)
    assert.are.equal("hash", get("notes/tag%23one.md").body)
    assert.are.equal("space and ampersand", get("dir%20with%20space/a%26b.txt").body)
    local u = srv:curl("GET", B .. "?prefix=caf%C3%A9%2F")
    assert.are.equal("café/✓.txt", u.json.contents[1].key)
    -- a copy destination is a raw key
    local c = srv:json("POST", B .. "notes/why%3F.txt?op=copy",
      { destination = "notes/copy of why?.txt" })
    assert.are.equal(204, c.status, c.body)
    assert.are.equal("question", get("notes/copy%20of%20why%3F.txt").body)
  end)

  it("1,000 PUTs survive kill -9: all read back identical, no temporary files", function()
    local src = dir .. "/objects"
    local got = dir .. "/readback"
    assert(require("lfs").mkdir(src))
    assert(require("lfs").mkdir(got))
    local puts, gets, bodies = {}, {}, {}
    for i = 1, 1000 do
      local body = ("object %04d\n"):format(i) .. binary_blob(i * 7 % 4096, i)
      bodies[i] = body
      platform.writeFile(("%s/%d"):format(src, i), body)
      local key = ("durable/%02d/obj-%04d.bin"):format(i % 17, i)
      puts[i] = { method = "PUT", path = B .. key, bodyFile = ("%s/%d"):format(src, i) }
      gets[i] = { method = "GET", path = B .. key, output = ("%s/%d"):format(got, i) }
    end
    local t0 = mastra.now()
    local statuses, run = srv:curlMany(puts)
    local putMs = mastra.now() - t0
    assert.are.equal(0, run.exitCode, run.stderr)
    assert.are.equal(1000, #statuses)
    for i, st in ipairs(statuses) do
      assert.is_true(st >= 200 and st < 300, ("PUT %d answered %d"):format(i, st))
    end
    figure("1,000 PUTs over one connection: %.0f ms", putMs)
    srv:kill9()
    assert.are.equal(9, srv.signal, "the server was not killed by SIGKILL")
    srv = platform.start{ dataDir = dir .. "/data", tokenFile = dir .. "/token" }
    local codes, run2 = srv:curlMany(gets)
    assert.are.equal(0, run2.exitCode, run2.stderr)
    assert.are.equal(1000, #codes)
    local bad = {}
    for i = 1, 1000 do
      if codes[i] ~= 200 or platform.readFile(("%s/%d"):format(got, i)) ~= bodies[i] then
        bad[#bad + 1] = ("%d (status %s)"):format(i, tostring(codes[i]))
      end
    end
    assert.are.equal(0, #bad, "objects lost or changed: " .. table.concat(bad, ", ", 1,
      math.min(#bad, 20)))
    local tmp = srv:sh("find", { dir .. "/data", "(", "-name", ".mpb-tmp-*", "-o", "-name",
      "*.tmp*", ")" })
    assert.are.equal(0, tmp.exitCode, tmp.stderr)
    assert.are.equal("", tmp.stdout, "temporary files left behind")
    local listing = srv:curl("GET", B .. "?prefix=durable%2F")
    assert.are.equal(1000, #listing.json.contents)
    platform.rm_rf(src, got)
  end)
end)

describe("mastra-platform data plane (exec WebSocket)", function()
  local dir, srv, sb, lease
  local P = rails("proj-ws")

  setup(function()
    dir, srv = fresh_server(HOST_PATHS)
    sb = create(srv, P, { id = "ws-key", environmentId = "env",
      env = { BASE_VAR = "from-create" } })
    lease = srv:lease(P, sb.id)
  end)

  teardown(function()
    shutdown({ srv }, { dir })
  end)

  it("create, lease, exec `echo hello`, DELETE", function()
    local own = create(srv, P, { environmentId = "env" })
    local l = srv:lease(P, own.id)
    local r = srv:wsExec(l, "echo hello")
    assert.are.equal(0, r.exitCode, table.concat(r.summary.log, "\n"))
    assert.are.equal("hello\n", r.stdout)
    assert.are.equal("", r.stderr)
    assert.is_true(r.summary.opened)
    assert.are.equal(1000, r.summary.close)
    assert.are.equal(0, r.status)
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. own.id).status)
    -- the lease died with its sandbox
    local after = srv:wsExec(l, "echo too late")
    assert.are.equal(401, after.summary.httpStatus)
    assert.is_nil(after.exitCode)
    assert.are.equal("", after.stdout)
  end)

  it("stdout and stderr come in their own frames", function()
    local r = srv:wsExec(lease, "echo out; echo err >&2; echo out2; printf tail >&2")
    assert.are.equal(0, r.exitCode)
    assert.are.equal("out\nout2\n", r.stdout)
    assert.are.equal("err\ntail", r.stderr)
  end)

  it("the exit code comes in the exit frame", function()
    local r = srv:wsExec(lease, "echo before; exit 3")
    assert.are.equal(3, r.exitCode)
    assert.are.equal(3, r.status)
    assert.are.equal("before\n", r.stdout)
    assert.are.equal(1, srv:wsExec(lease, "false").exitCode)
    assert.are.equal(127, srv:wsExec(lease, "no-such-command-here 2>/dev/null").exitCode)
  end)

  it("output bytes are passed through as they are", function()
    local r = srv:wsExec(lease, "printf 'a\\000b\\377\\r\\n'")
    assert.are.equal(0, r.exitCode)
    assert.are.equal("a\0b\255\r\n", r.stdout)
    local big = srv:wsExec(lease, "head -c 3000000 /dev/zero | tr '\\000' x")
    assert.are.equal(0, big.exitCode)
    assert.are.equal(3000000, #big.stdout)
    assert.are.equal(("x"):rep(3000000), big.stdout)
  end)

  it("cwd and env of init_exec apply, over the creation env", function()
    assert.are.equal(0, srv:wsExec(lease, "mkdir -p work/sub").exitCode)
    local r = srv:wsExec(lease, 'basename "$PWD"; echo "$FOO|$BASE_VAR"',
      { cwd = "work/sub", env = { FOO = "bar baz" } })
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal("sub\nbar baz|from-create\n", r.stdout)
    local o = srv:wsExec(lease, 'echo "$BASE_VAR"', { env = { BASE_VAR = "per-call" } })
    assert.are.equal("per-call\n", o.stdout)
  end)

  it("the command reads end of file on stdin", function()
    local r = srv:wsExec(lease, "cat; echo done", { timeout = 20000 })
    assert.are.equal(0, r.exitCode, "stdin was not closed: " .. table.concat(r.summary.log, " / "))
    assert.are.equal("done\n", r.stdout)
  end)

  it("100 execs at once all complete with the right output", function()
    local items = {}
    for i = 1, 100 do items[i] = i end
    local t0 = mastra.now()
    local results = mastra.map(items, function(i)
      return srv:wsExec(lease, ("echo job-%d; echo err-%d >&2; exit %d"):format(i, i, i % 7),
        { timeout = 30000 })
    end, { concurrency = 100 })
    local ms = mastra.now() - t0
    figure("100 concurrent WebSocket execs: %.0f ms", ms)
    local wrong = {}
    for i, r in ipairs(results) do
      if r.exitCode ~= i % 7 or r.stdout ~= ("job-%d\n"):format(i)
        or r.stderr ~= ("err-%d\n"):format(i) then
        wrong[#wrong + 1] = ("%d: exit %s stdout %q stderr %q; ws-exec: status %s, %s")
          :format(i, tostring(r.exitCode), r.stdout, r.stderr, tostring(r.status),
            table.concat(r.summary.log, " / "))
      end
    end
    assert.are.equal(100, #results)
    assert.are.equal(0, #wrong, table.concat(wrong, "\n", 1, math.min(#wrong, 10)))
    assert.is_true(ms < 60000)
  end)

  -- Start command (which writes a pid to pidfile) with ws-exec closing the
  -- socket closeAfterMs after the handshake; returns the pid, the time
  -- (mastra.now) when that pid was first seen dead, t0 (just before
  -- ws-exec started) and the ws-exec handle.
  local function close_mid_command(command, pidfile, closeAfterMs, deadlineMs)
    local t0 = mastra.now()
    local h = srv:wsExecSpawn(lease, command, { closeAfterMs = closeAfterMs })
    local pid
    assert.is_true(platform.waitUntil(function()
      pid = tonumber(platform.readFile(pidfile) or "")
      return pid ~= nil
    end, 10000, 5), "the command never wrote its pid")
    local deadAt
    platform.waitUntil(function()
      if not alive(pid) then deadAt = mastra.now() end
      return deadAt ~= nil
    end, deadlineMs, 5)
    assert.is_true(platform.waitUntil(function() return h.exitCode ~= nil end, 15000),
      "ws-exec did not finish")
    local res = platform.wsResult(h.stdout, h.stderr, h.exitCode)
    assert.is_true(res.summary.opened, table.concat(res.summary.log, " / "))
    assert.is_nil(res.exitCode, "the command should not have finished by itself")
    return pid, deadAt, t0
  end

  it("closing the socket mid-command kills the command within a second", function()
    local pidfile = srv.scratch .. "/sleeper.pid"
    -- the close goes out 300 ms after the handshake; allow the handshake
    -- 700 ms on a busy machine, then one second
    local pid, deadAt, t0 = close_mid_command(
      "echo $$ > " .. mastra.quote(pidfile) .. "; exec sleep 30", pidfile, 300, 2000)
    assert.is_not_nil(deadAt, ("the command (pid %d) still runs %.0f ms after ws-exec started"
      .. " (it closes the socket after 300 ms)"):format(pid, mastra.now() - t0))
    figure("command gone %.0f ms after ws-exec started (close at +300 ms)", deadAt - t0)
    -- and the sandbox is still fine
    assert.are.equal("ok\n", srv:wsExec(lease, "echo ok").stdout)
  end)

  it("closing the socket kills the command's whole process group", function()
    local pidfile = srv.scratch .. "/grandchild.pid"
    local pid, deadAt = close_mid_command(
      "sleep 30 & echo $! > " .. mastra.quote(pidfile) .. "; wait", pidfile, 300, 2000)
    assert.is_not_nil(deadAt, ("the background child (pid %d) outlived the socket"):format(pid))
  end)

  it("closing the socket kills a command that ignores SIGTERM too", function()
    local pidfile = srv.scratch .. "/stubborn.pid"
    local pid, deadAt = close_mid_command("trap '' TERM; echo $$ > " .. mastra.quote(pidfile)
      .. "; while :; do sleep 0.1; done", pidfile, 300, 6000)
    assert.is_not_nil(deadAt, ("a command ignoring SIGTERM (pid %d) outlived the socket by 5 s")
      :format(pid))
  end)

  it("a wrong lease token fails the upgrade with 401", function()
    local r = srv:wsExec(lease, "touch pwned", { jwt = ("0"):rep(64) })
    assert.are.equal(401, r.summary.httpStatus)
    assert.is_false(r.summary.opened)
    assert.is_nil(r.exitCode)
    local body = platform.decode(r.summary.httpBody or "")
    assert.is_table(body, "an error body: " .. tostring(r.summary.httpBody))
    assert.are.equal("authentication_error", body.error.type)
    -- the API token is not a lease
    assert.are.equal(401, srv:wsExec(lease, "true", { jwt = srv.token }).summary.httpStatus)
    -- a truncated lease
    assert.are.equal(401, srv:wsExec(lease, "true", { jwt = lease.jwt:sub(1, -2) })
      .summary.httpStatus)
    -- the first subprotocol must be railway-shell
    assert.are.equal(401, srv:wsExec(lease, "true", { protocol = "other-shell" })
      .summary.httpStatus)
    local ls = srv:wsExec(lease, "ls pwned 2>/dev/null | wc -l")
    assert.are.equal("0\n", ls.stdout)
  end)

  it("an expired lease fails the upgrade with 401", function()
    local d2, s2 = fresh_server{ "--lease-ttl", "1" }
    local ok, err = pcall(function()
      local own = create(s2, P, { environmentId = "env" })
      local l = s2:lease(P, own.id)
      local exp = iso_seconds(l.expiresAt)
      assert.is_true(exp <= os.time() + 3, "expiresAt ignores --lease-ttl: " .. l.expiresAt)
      assert.are.equal("fresh\n", s2:wsExec(l, "echo fresh").stdout)
      mastra.sleep(2200)
      local r = s2:wsExec(l, "echo stale")
      assert.are.equal(401, r.summary.httpStatus)
      assert.are.equal("", r.stdout)
      assert.are.equal("new\n", s2:wsExec(s2:lease(P, own.id), "echo new").stdout)
    end)
    shutdown({ s2 }, { d2 })
    if not ok then error(err, 0) end
  end)
end)

describe("mastra-platform shutdown and restart", function()
  local dir, srv
  local P = rails("proj-term")

  setup(function()
    dir, srv = fresh_server(HOST_PATHS)
  end)

  teardown(function()
    shutdown({ srv }, { dir })
  end)

  it("SIGTERM exits 0 and the state survives a restart", function()
    local sb = create(srv, P, { id = "term-key", environmentId = "env" })
    local w = srv:wsExec(srv:lease(P, sb.id), "echo kept > kept.txt")
    assert.are.equal(0, w.exitCode)
    assert.are.equal(200, srv:curl("PUT", P .. "/fs/bkt/kept.bin",
      { body = "kept\0object" }).status)
    local token = srv.token
    assert.are.equal(0, srv:stop())
    srv = platform.start{ dataDir = dir .. "/data", tokenFile = dir .. "/token",
      args = HOST_PATHS }
    assert.are.equal(token, srv.token)
    local r = srv:curl("GET", P .. "/sandbox/" .. sb.id)
    assert.are.equal(200, r.status, r.body)
    assert.are.equal(sb.id, r.json.id)
    assert.are.equal(sb.createdAt, r.json.createdAt)
    assert.are.equal(null, r.json.destroyedAt)
    assert.are.equal("kept\0object", srv:curl("GET", P .. "/fs/bkt/kept.bin").body)
    local c = srv:wsExec(srv:lease(P, sb.id), "cat kept.txt")
    assert.are.equal(0, c.exitCode, c.stderr)
    assert.are.equal("kept\n", c.stdout)
  end)

  it("a destroyed sandbox stays destroyed after a restart", function()
    local sb = create(srv, P, { environmentId = "env" })
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. sb.id).status)
    assert.are.equal(0, srv:stop())
    srv = platform.start{ dataDir = dir .. "/data", tokenFile = dir .. "/token",
      args = HOST_PATHS }
    local r = srv:curl("GET", P .. "/sandbox/" .. sb.id)
    assert.are.equal(200, r.status)
    assert.is_number(iso_seconds(r.json.destroyedAt))
    assert_error(srv:curl("POST", P .. "/sandbox/" .. sb.id .. "/exec-lease"), 410,
      "sandbox_destroyed")
  end)

  it("SIGTERM with a command running exits 0 promptly and ends the command", function()
    local sb = create(srv, P, { environmentId = "env" })
    local pidfile = srv.scratch .. "/term-sleeper.pid"
    srv:wsExecSpawn(srv:lease(P, sb.id),
      "echo $$ > " .. mastra.quote(pidfile) .. "; exec sleep 60")
    local pid
    assert.is_true(platform.waitUntil(function()
      pid = tonumber(platform.readFile(pidfile) or "")
      return pid ~= nil
    end, 10000))
    assert.is_true(alive(pid))
    local t0 = mastra.now()
    assert.are.equal(0, srv:stop())
    local ms = mastra.now() - t0
    assert.is_true(ms < 10000, ("SIGTERM took %.0f ms"):format(ms))
    assert.is_true(platform.waitUntil(function() return not alive(pid) end, 2000),
      "the command outlived the server")
    srv = platform.start{ dataDir = dir .. "/data", tokenFile = dir .. "/token",
      args = HOST_PATHS }
    assert.are.equal(200, srv:curl("GET", P .. "/sandbox/" .. sb.id).status)
  end)
end)
