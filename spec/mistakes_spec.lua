-- The mistakes a first script makes get a message that says how to fix
-- them (issue 15, part 4): options where args go, spawn's args, a missing
-- setting (named by its environment variable), an unknown region, a sleep
-- given a string, a tool called by its short name.
local mastra = require "mastra"
local util = require "spec.support.util"

local function err_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

describe("mistakes", function()
  local dir, base, sb

  before_each(function()
    dir, base = util.tmpdir()
    sb = mastra.LocalSandbox.new{ workingDirectory = dir }
  end)

  after_each(function()
    sb:destroy()
    util.rm_rf(dir, base)
  end)

  it("options where args go are an error that says where options go", function()
    assert.are.equal("LocalSandbox:executeCommand: argument #2 (args) must be a list of"
      .. ' strings, but it has the key string "cwd"; options go third:'
      .. " executeCommand(command, nil, {cwd = ...})",
      err_of(sb.executeCommand, sb, "pwd", { cwd = "/tmp" }):gsub("^[^:]*:%d+: ", ""))
    local p = mastra.PlatformSandbox.new{ accessToken = "t", proxyUrl = "http://127.0.0.1:1",
      projectId = "p", environmentId = "e" }
    assert.matches("options go third: executeCommand(command, nil, {timeout = ...})",
      err_of(p.executeCommand, p, "pwd", { timeout = 5 }), 1, true)
  end)

  it("processes:spawn takes args like executeCommand, and options alone", function()
    local h = sb.processes:spawn("printf", { "%s|", "a b", "it's" })
    assert.are.equal("a b|it's|", h:wait().stdout)
    local h2 = sb.processes:spawn("echo $X", { env = { X = "from opts" } })
    assert.are.equal("from opts\n", h2:wait().stdout)
    local h3 = sb.processes:spawn("echo", { "x" }, { env = { Y = "1" } })
    assert.are.equal("x\n", h3:wait().stdout)
  end)

  it("a missing setting names its environment variable", function()
    local saved = {}
    local unset = { "MASTRA_PROJECT_ID", "MASTRA_ENVIRONMENT_ID" }
    for _, k in ipairs(unset) do saved[k] = os.getenv(k) end
    if saved.MASTRA_PROJECT_ID or saved.MASTRA_ENVIRONMENT_ID then
      pending("MASTRA_PROJECT_ID or MASTRA_ENVIRONMENT_ID is set here")
      return
    end
    assert.matches("projectId is required (option projectId, or set MASTRA_PROJECT_ID)",
      err_of(mastra.PlatformSandbox.new, { accessToken = "t", proxyUrl = "http://x" }), 1, true)
    assert.matches("environmentId is required (option environmentId, or set"
      .. " MASTRA_ENVIRONMENT_ID)", err_of(mastra.PlatformSandbox.new,
        { accessToken = "t", proxyUrl = "http://x", projectId = "p" }), 1, true)
  end)

  it("an unknown MASTRA_PLATFORM_REGION lists the known ones", function()
    local lua = os.getenv("MASTRA_LUA")
    local r = sb:executeCommand(lua, { "-e", 'require("mastra").PlatformSandbox.new{'
      .. 'accessToken = "t", projectId = "p", environmentId = "e"}' }, { env = {
        MASTRA_PLATFORM_REGION = "mars", LUA_PATH_5_4 = os.getenv("LUA_PATH_5_4"),
        LUA_CPATH_5_4 = os.getenv("LUA_CPATH_5_4") } })
    assert.are_not.equal(0, r.exitCode)
    assert.matches('MASTRA_PLATFORM_REGION is "mars", which is not a known region (known:'
      .. " eu, us; unset it for https://workspaces.mastra.ai, or set"
      .. " MASTRA_WORKSPACE_PROXY_URL)", r.stderr, 1, true)
  end)

  it("mastra.sleep says a string came, and what to pass", function()
    assert.matches('(got a string, "100": pass a number, mastra.sleep(100))',
      err_of(mastra.sleep, "100"), 1, true)
  end)

  it("ws:callTool takes the short names Workspace.new{tools = ...} takes", function()
    local fs = mastra.LocalFilesystem.new{ basePath = dir }
    local ws = mastra.Workspace.new{ filesystem = fs, sandbox = sb,
      tools = { write_file = { requireApproval = false } } }
    ws:init()
    local out, is_err = ws:callTool("write_file", { path = "n.txt", content = "hi" })
    assert.is_nil(is_err, out)
    assert.are.equal("hi", (ws:callTool("read_file", { path = "n.txt" }):match("hi")))
    local bad, bad_err = ws:callTool("nope", {})
    assert.is_true(bad_err)
    assert.matches("unknown tool 'nope'", bad, 1, true)
  end)
end)
