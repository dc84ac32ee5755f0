-- mastra.output: the retained output of a stream (the newest
-- maxRetainedBytes bytes; older ones dropped and counted).
local output = require "mastra.output"

--- Append every chunk of list to a fresh buffer of max bytes.
local function fill(max, list)
  local b = output.new(max)
  for _, s in ipairs(list) do b:append(s) end
  return b
end

describe("mastra.output", function()
  it("keeps everything by default", function()
    local b = fill(nil, { "ab", "", "cd", "e" })
    assert.are.equal("abcde", b:text())
    assert.are.equal(0, b.dropped)
    assert.is_false(b:truncated())
    assert.are.equal("", output.new():text())
  end)

  it("keeps the newest bytes across chunk boundaries, and counts the others", function()
    local b = fill(5, { "abc", "defg", "hi" })
    assert.are.equal("efghi", b:text())
    assert.are.equal(4, b.dropped)
    assert.is_true(b:truncated())
    -- more after a read: the joined text goes on being trimmed
    b:append("jk")
    assert.are.equal("ghijk", b:text())
    assert.are.equal(6, b.dropped)
    -- a chunk bigger than the limit keeps its own tail
    b:append("0123456789")
    assert.are.equal("56789", b:text())
    assert.are.equal(16, b.dropped)
  end)

  it("keeps nothing with 0, and still counts", function()
    local b = fill(0, { "abc", "de" })
    assert.are.equal("", b:text())
    assert.are.equal(5, b.dropped)
    assert.is_true(b:truncated())
  end)

  it("does not keep the tail of a cut UTF-8 character", function()
    -- "é" is C3 A9: a cut after C3 drops A9 too (4 bytes kept of 5 asked)
    local b = fill(5, { "xé", "abcd" })
    assert.are.equal("abcd", b:text())
    assert.are.equal(3, b.dropped)
    -- "😀" is F0 9F 98 80: a cut after F0 drops its three continuation bytes
    b = fill(4, { "😀xyz" })
    assert.are.equal("xyz", b:text())
    -- binary data full of continuation bytes loses at most 3 more than asked
    b = fill(4, { ("\x80"):rep(10) })
    assert.are.equal(1, #b:text())
    assert.are.equal(9, b.dropped)
  end)

  it("stays right over many small chunks, in a block that stays small", function()
    local b = output.new(1000)
    local n = 20000
    for i = 1, n do b:append(("%05d\n"):format(i)) end
    local text = b:text()
    -- the newest 1000 bytes: the last 4 of line n - 166, then 166 whole lines
    assert.are.equal(1000, #text)
    assert.are.equal(n * 6 - 1000, b.dropped)
    assert.are.equal(("%05d\n"):format(n - 166):sub(3) .. ("%05d\n"):format(n - 165),
      text:sub(1, 10))
    assert.are.equal(("%05d\n"):format(n), text:sub(-6))
    assert.is_true(b.buf:capacity() <= 4096, "the block grew to " .. b.buf:capacity())
  end)

  it("keeps megabytes whole, past the block of its own (a mapping of 2 MiB and more)",
    function()
    local parts = {}
    for i = 1, 300 do parts[i] = string.char(i % 251) .. ("%06d"):format(i):rep(5000) end
    local all = table.concat(parts)
    local b = fill(nil, parts)
    assert.are.equal(#all, #b:text())
    assert.is_true(b:text() == all, "the kept bytes differ")
    assert.is_true(b.buf:capacity() >= 2 * 1048576)
    b = fill(3 * 1048576, parts) -- the newest 3 MiB, the block moved to its start
    assert.is_true(b:text() == all:sub(-3 * 1048576), "the kept tail differs")
    assert.are.equal(#all - 3 * 1048576, b.dropped)
  end)

  it("frees its block at release, keeps the text, and refuses more", function()
    local b = fill(nil, { "abc", "def" })
    b:release()
    assert.are.equal("abcdef", b:text())
    assert.is_nil(b.buf)
    assert.has_error(function() b:append("g") end, "mastra.output: append after release")
    assert.are.equal("abcdef", b:text())
  end)

  it("checks core.retained's limit", function()
    local core = require "mastra.core"
    assert.has_error(function() core.retained(-1) end)
    assert.has_error(function() core.retained(1.5) end)
    assert.are.equal(0, core.retained(math.huge):size())
  end)

  it("checks a maxRetainedBytes as an options checker", function()
    for _, good in ipairs{ 0, 1, 1048576, math.huge } do
      assert.is_true((output.checkMax(good)))
    end
    for _, bad in ipairs{ -1, 1.5, "1", 0 / 0, -math.huge, true } do
      local ok, expected = output.checkMax(bad)
      assert.is_false(ok)
      assert.are.equal("an integer >= 0 (bytes), or math.huge (keep everything)", expected)
    end
  end)

  it("joins many small chunks in order", function()
    local many = {}
    for i = 1, 100000 * 2 + 7 do many[i] = tostring(i % 10) .. (i % 3 == 0 and "" or "x") end
    assert.are.equal(table.concat(many), fill(nil, many):text())
  end)
end)
