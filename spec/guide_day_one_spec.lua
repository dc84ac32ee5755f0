-- docs/guide-day-one.md cannot drift from what CTest runs: each of its Lua
-- blocks follows a `<!-- snippet: examples/day_one/NAME.lua -->` line and
-- is that file exactly; every file of examples/day_one/ is shown; its shell
-- blocks only run those files (test/example-run.sh runs each one as
-- example_day_one_NAME and checks its output).
local lfs = require "lfs"

local root = os.getenv("MASTRA_SOURCE_DIR") or "."

local function read(path)
  local f = assert(io.open(root .. "/" .. path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- The fenced blocks of a markdown text: {lang, body, snippet} in order,
-- snippet being the path named by the marker line just before the fence.
local function blocks(text)
  local out, lines = {}, {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  local i = 1
  while i <= #lines do
    local lang = lines[i]:match("^```(%w*)$")
    if lang and lang ~= "" then
      local body = {}
      i = i + 1
      while i <= #lines and lines[i] ~= "```" do
        body[#body + 1] = lines[i]
        i = i + 1
      end
      assert(i <= #lines, "an unclosed ``` block in the guide")
      local marker = out.prev_line and out.prev_line:match("^<!%-%- snippet: (%S+) %-%->$")
      out[#out + 1] = { lang = lang, body = table.concat(body, "\n") .. "\n", snippet = marker }
    end
    out.prev_line = lines[i] -- the line before the next fence, if it is one
    i = i + 1
  end
  return out
end

describe("docs/guide-day-one.md", function()
  local guide = read("docs/guide-day-one.md")
  local found = blocks(guide)

  it("shows every file of examples/day_one/ as it is, and nothing else as Lua", function()
    local files = {}
    for name in lfs.dir(root .. "/examples/day_one") do
      if name:match("%.lua$") then files["examples/day_one/" .. name] = false end
    end
    assert.is_not_nil(next(files))
    for _, b in ipairs(found) do
      if b.lang == "lua" then
        assert.is_string(b.snippet, "a Lua block without a snippet marker:\n" .. b.body)
        assert.is_not_nil(files[b.snippet], b.snippet .. " is not a file of examples/day_one/")
        assert.are.equal(read(b.snippet), b.body, b.snippet .. " differs from the guide")
        files[b.snippet] = true
      end
    end
    for path, shown in pairs(files) do
      assert.is_true(shown, path .. " is not in the guide")
    end
  end)

  it("has shell blocks that only run those files", function()
    local n = 0
    for _, b in ipairs(found) do
      assert.is_true(b.lang == "lua" or b.lang == "sh", "a ```" .. b.lang .. " block")
      if b.lang == "sh" then
        for line in b.body:gmatch("[^\n]+") do
          local name = line:match("^build/mastra%-lua (examples/day_one/[%w_]+%.lua)[ %w_.]*%s*#?")
          assert.is_string(name, "a command the tests do not run: " .. line)
          assert.is_truthy(lfs.attributes(root .. "/" .. name), name)
          n = n + 1
        end
      end
    end
    assert.is_true(n >= 4)
  end)

  it("is linked from README.md's guides", function()
    assert.matches("[Day one](docs/guide-day-one.md)", read("README.md"), 1, true)
  end)
end)
