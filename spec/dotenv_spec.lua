-- .env files (lua/mastra/dotenv.lua): the syntax, and a plain lua5.4
-- script whose PlatformSandbox is configured by the ./.env of its current
-- directory, against a real mastra-platform (the real environment wins).
local dotenv = require "mastra.dotenv"
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local quote = mastra.quote

local function write_file(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function values(vars)
  local t = {}
  for _, v in ipairs(vars) do t[v.name] = v.value end
  return t
end

describe("mastra.dotenv", function()
  describe("parse", function()
    it("reads dotenv's syntax", function()
      local vars = dotenv.parse(table.concat({
        "# a comment",
        "",
        "PLAIN=value",
        "  SPACED  =   spaced value   ",
        "export EXPORTED=yes",
        "COMMENTED=kept # dropped",
        "HASH=a#b",
        "EMPTY=",
        "SINGLE='no $escapes \\n here'",
        'DOUBLE="tab\\there \\"quoted\\" \\\\ \\$"',
        'MULTI="line one',
        'line two"',
        "BACKTICK=`it's`",
        "AFTER='x' # comment after a quote",
        "CRLF=windows\r",
        "PLAIN=again",
      }, "\n"))
      local v = values(vars)
      assert.are.equal("again", v.PLAIN)
      assert.are.equal("spaced value", v.SPACED)
      assert.are.equal("yes", v.EXPORTED)
      assert.are.equal("kept", v.COMMENTED)
      assert.are.equal("a#b", v.HASH)
      assert.are.equal("", v.EMPTY)
      assert.are.equal("no $escapes \\n here", v.SINGLE)
      assert.are.equal('tab\there "quoted" \\ $', v.DOUBLE)
      assert.are.equal("line one\nline two", v.MULTI)
      assert.are.equal("it's", v.BACKTICK)
      assert.are.equal("x", v.AFTER)
      assert.are.equal("windows", v.CRLF)
      -- the order of the file; a repeated name keeps its first place
      assert.are.equal("PLAIN", vars[1].name)
      assert.are.equal(12, #vars)
    end)

    it("names the file and the line of a mistake, never a value", function()
      local cases = {
        { "A=1\n\n1BAD=secret-1", "f.env:3: expected NAME=value" },
        { "A=1\nNOEQUALS secret-2", "f.env:2: expected '=' after NOEQUALS" },
        { "A='x\ny\n'secret-3' trailing", "f.env:3: unexpected text after the closing quote of A" },
        { "A=1\nB=\"secret-4\n\n", "f.env:2: the value of B has no closing \" quote" },
      }
      for _, c in ipairs(cases) do
        local ok, err = pcall(dotenv.parse, c[1], "f.env")
        assert.is_false(ok)
        assert.truthy(err:find(c[2], 1, true), err)
        assert.is_nil(err:find("secret", 1, true), err)
      end
      assert.has_error(function() dotenv.parse(42) end,
        "mastra.dotenv.parse: text must be a string (got number)")
    end)
  end)

  describe("load", function()
    local dir, base
    before_each(function() dir, base = util.tmpdir() end)
    after_each(function() util.rm_rf(dir, base) end)

    it("sets what the environment lacks; the environment wins", function()
      local path = dir .. "/x.env"
      local name = "MASTRA_DOTENV_SPEC_" .. tostring(math.random(1e9))
      write_file(path, ("%s_NEW=from-file\nPATH=/not/this\n"):format(name))
      local set, read = dotenv.load(path)
      assert.are.same({ name .. "_NEW" }, set)
      assert.are.equal(path, read)
      assert.are.equal("from-file", os.getenv(name .. "_NEW"))
      assert.are_not.equal("/not/this", os.getenv("PATH"))
      assert.are.same({}, dotenv.load(false))
      local ok, err = pcall(dotenv.load, dir .. "/missing.env")
      assert.is_false(ok)
      assert.truthy(err:find("missing.env", 1, true), err)
      assert.has_error(function() dotenv.load(42) end,
        "mastra.dotenv.load: file must be a path, false or nil (got number)")
    end)
  end)

  describe("under a plain lua5.4", function()
    local srv, dir, base, sb

    setup(function()
      srv = platform.start()
      dir, base = util.tmpdir()
      sb = mastra.LocalSandbox.new{ workingDirectory = dir, env = {
        LUA_PATH_5_4 = os.getenv("LUA_PATH_5_4"), LUA_CPATH_5_4 = os.getenv("LUA_CPATH_5_4"),
        -- the state dir of a local platform, should the .env not be read
        MASTRA_PLATFORM_STATE_DIR = dir .. "/state", MASTRA_PLATFORM_BIN = "/nonexistent",
        ASAN_OPTIONS = os.getenv("ASAN_OPTIONS"), LD_PRELOAD = os.getenv("MASTRA_TEST_PRELOAD"),
      } }
      write_file(dir .. "/hello.lua", [[
local mastra = require "mastra"
local s <close> = mastra.PlatformSandbox.new{}
s:start()
io.write(s:executeCommand("printf %s", { "ran on the platform" }).stdout)
]])
    end)

    teardown(function()
      if sb then sb:destroy() end
      if srv then srv:stop() end
      util.rm_rf(dir, base)
    end)

    local function dotenv_file(token)
      write_file(dir .. "/.env", table.concat({
        "MASTRA_PLATFORM_ACCESS_TOKEN=" .. token,
        "MASTRA_WORKSPACE_PROXY_URL=" .. srv.url,
        "MASTRA_PROJECT_ID=proj-dotenv",
        "export MASTRA_ENVIRONMENT_ID='env-dotenv'",
      }, "\n"))
    end

    it("a PlatformSandbox is configured by ./.env", function()
      dotenv_file(srv.token)
      local r = sb:executeCommand("lua5.4 hello.lua", nil, { timeout = 30000 })
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.are.equal("ran on the platform", r.stdout)
      -- no local platform was started
      assert.is_nil(r.stderr:find("local platform", 1, true), r.stderr)
    end)

    it("a variable of the real environment wins over the file", function()
      dotenv_file("wrong-token-from-the-file")
      local r = sb:executeCommand("MASTRA_PLATFORM_ACCESS_TOKEN=" .. quote(srv.token)
        .. " lua5.4 hello.lua", nil, { timeout = 30000 })
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.are.equal("ran on the platform", r.stdout)
      -- and the wrong token of the file is used, without its value in the error
      r = sb:executeCommand("lua5.4 hello.lua", nil, { timeout = 30000 })
      assert.are_not.equal(0, r.exitCode)
      assert.is_nil(r.stderr:find("wrong-token-from-the-file", 1, true), r.stderr)
      r = sb:executeCommand("MASTRA_ENV_FILE= lua5.4 hello.lua", nil, { timeout = 30000 })
      assert.are_not.equal(0, r.exitCode)
      assert.truthy(r.stderr:find("MASTRA_PLATFORM_BIN", 1, true), r.stderr)
    end)
  end)
end)
