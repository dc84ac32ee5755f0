-- bench/compare: the medians of two samples files of bench/run, key by key.
-- Run as a child (lua5.4 bench/compare A B [tolerance]) on files written here.
local util = require "spec.support.util"

local SOURCE = os.getenv("MASTRA_SOURCE_DIR") or "."

--- Run bench/compare; returns its stdout and its exit status.
local function compare(...)
  local args = { "lua5.4", SOURCE .. "/bench/compare" }
  for _, a in ipairs{ ... } do args[#args + 1] = a end
  for i, a in ipairs(args) do args[i] = "'" .. a:gsub("'", "'\\''") .. "'" end
  local p = assert(io.popen(table.concat(args, " ") .. " 2>&1"))
  local out = p:read("a")
  local _, _, status = p:close()
  return out, status
end

describe("bench/compare", function()
  local dir, base
  before_each(function() dir, base = util.tmpdir() end)
  after_each(function() util.rm_rf(dir, base) end)

  local function write(name, text)
    local path = dir .. "/" .. name
    local f = assert(io.open(path, "w"))
    f:write(text)
    f:close()
    return path
  end

  it("passes when every median is within the tolerance, merging the lines of a key", function()
    local a = write("a.tsv", "# bench/run: commit x\nk\tms\t1 2 3\nk\tms\t4 5\nr\tops/s\t100\n")
    local b = write("b.tsv", "k\tms\t3.2 3.4 3\nr\tops/s\t110\n")
    local out, status = compare(a, b)
    assert.equal(0, status)
    -- k: median of 1..5 is 3, of 3, 3.2, 3.4 is 3.2
    assert.matches("\nk%s+ms%s+3%s+3%.2%s+1%.07\n", out)
    assert.matches("0 of 2 keys outside 20%%", out)
  end)

  it("flags a median that moved by more than the tolerance, either way", function()
    local a = write("a.tsv", "up\tms\t1\ndown\tms\t10\nsame\tms\t5\n")
    local b = write("b.tsv", "up\tms\t1.3\ndown\tms\t8\nsame\tms\t5.5\n")
    local out, status = compare(a, b)
    assert.equal(1, status)
    assert.matches("up[^\n]*1%.30  <%- outside", out)
    -- 10 -> 8 is 0.80: outside, since 1.25 (its inverse) is more than 1.20
    assert.matches("down[^\n]*0%.80  <%- outside", out)
    assert.not_matches("same[^\n]*outside", out)
    assert.matches("2 of 3 keys outside 20%%", out)
    -- a wider tolerance lets both through
    local out2, status2 = compare(a, b, "0.5")
    assert.equal(0, status2)
    assert.matches("0 of 3 keys outside 50%%", out2)
  end)

  it("flags a key that one run has and the other lacks", function()
    local a = write("a.tsv", "both\tms\t1\nold\tms\t1\n")
    local b = write("b.tsv", "both\tms\t1\nnew\tms\t1\n")
    local out, status = compare(a, b)
    assert.equal(1, status)
    assert.matches("old[^\n]*<%- missing", out)
    assert.matches("new[^\n]*<%- missing", out)
    assert.matches("2 of 3 keys outside", out)
  end)

  it("says what is wrong with its arguments", function()
    local out, status = compare()
    assert.equal(2, status)
    assert.matches("usage: bench/compare A%.tsv B%.tsv", out)
    out, status = compare(dir .. "/nope.tsv", dir .. "/nope.tsv")
    assert.equal(2, status)
    assert.matches("nope%.tsv", out)
    local a = write("a.tsv", "k\tms\t1\n")
    out, status = compare(a, a, "lots")
    assert.equal(2, status)
    assert.matches("usage", out)
  end)
end)
