-- The local platform's files are its user's alone (issue 30, point 5;
-- docs/platform.md "Files"): the data directory is 0700, and what it keeps
-- of its own (records with their env, bucket objects, checkpoints and their
-- records, the inspector's state, run files) is 0600, so that no other
-- user of the host reads a sandbox's secrets, objects or trees. The
-- embedded default's state is local_platform_spec.lua's.
local platform = require "spec.support.platform"

local P = "/v1/railway/projects/proj-private"

describe("mastra-platform's files", function()
  local srv, dir

  after_each(function()
    if srv then srv:close() end
    srv = nil
    if dir then platform.rm_rf(dir) end
  end)

  -- "MODE TYPE PATH" of everything under the data directory but the
  -- sandboxes' own trees (live, or in the trash), the base, the warm pool
  -- and the hosts files that sandboxes read
  local function modes(data)
    local r = srv:sh("find", { data, "-path", data .. "/sandboxes/*", "-prune", "-o",
      "-path", data .. "/base", "-prune", "-o", "-path", data .. "/pool", "-prune", "-o",
      "-path", data .. "/net", "-prune", "-o", "-path", data .. "/trash/*", "-prune", "-o",
      "-printf", "%m %y %P\\n" })
    assert.are.equal(0, r.exitCode, r.stderr)
    local out = {}
    for mode, kind, path in r.stdout:gmatch("(%d+) (%a) ([^\n]*)\n") do
      out[#out + 1] = { mode = mode, kind = kind, path = path }
    end
    return out
  end

  it("keeps its data directory 0700 and its records, objects and checkpoints 0600",
    function()
      dir = platform.tmpdir()
      local data = dir .. "/data"
      srv = platform.start{ dataDir = data, tokenFile = dir .. "/token" }
      local c = srv:json("POST", P .. "/sandbox",
        { environmentId = "env", id = "keep", env = { SECRET = "s3cret" } })
      assert.are.equal(201, c.status, c.body)
      local w = srv:wsExec(srv:lease(P, c.json.id), "echo kept > /workspace/f")
      assert.are.equal(0, w.exitCode, w.stderr)
      assert.are.equal(200, srv:curl("PUT", P .. "/fs/bkt/obj", { body = "object" }).status)
      assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. c.json.id).status)
      local seen, kinds = modes(data), {}
      assert.is_true(#seen > 5, "too few files under " .. data)
      for _, e in ipairs(seen) do
        local want = e.kind == "d" and "700" or "600"
        if e.path == "" then want = "700" end
        assert.are.equal(want, e.mode, ("%s (%s) is %s"):format(e.path, e.kind, e.mode))
        kinds[e.path:match("^[^/]*") .. ":" .. e.kind] = true
      end
      -- what was looked at: the record, the object, the checkpoint
      assert.is_true(kinds["state:f"], "no state file was checked")
      assert.is_true(kinds["buckets:f"], "no bucket object was checked")
      assert.is_true(kinds["checkpoints:f"], "no checkpoint was checked")
    end)

  it("makes an existing data directory 0700 at start", function()
    dir = platform.tmpdir()
    local data = dir .. "/data"
    assert.is_true(os.execute("mkdir -m 0755 " .. data))
    srv = platform.start{ dataDir = data, tokenFile = dir .. "/token" }
    local r = srv:sh("stat", { "-c", "%a", data })
    assert.are.equal("700\n", r.stdout)
  end)
end)
