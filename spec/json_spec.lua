-- mastra.core JSON: decode with cJSON, encode with key order kept
-- (the platform's request bodies are compared key by key, in order).
local core = require "mastra.core"

describe("core.jsonDecode", function()
  it("turns objects, arrays, strings, numbers, booleans into Lua values", function()
    local v = assert(core.jsonDecode(
      '{"a":1,"b":[1,2.5,"x",true,false],"c":{"d":"e"},"big":9007199254740993}'))
    assert.are.equal(1, v.a)
    assert.are.equal("integer", math.type(v.a))
    assert.are.same({ 1, 2.5, "x", true, false }, { table.unpack(v.b, 1, 5) })
    assert.are.equal("e", v.c.d)
    assert.are.equal("float", math.type(v.big))
  end)

  it("makes null an absent field in objects and core.null in arrays", function()
    local v = assert(core.jsonDecode('{"destroyedAt":null,"list":[1,null,3]}'))
    assert.is_nil(v.destroyedAt)
    assert.are.equal(3, #v.list)
    assert.are.equal(core.null, v.list[2])
  end)

  it("marks decoded arrays, so that an empty one encodes back as []", function()
    local v = assert(core.jsonDecode('{"contents":[],"o":{}}'))
    assert.are.equal(core.jsonArray, getmetatable(v.contents))
    assert.are.equal('{"contents":[],"o":{}}', core.jsonEncode(v))
  end)

  it("returns nil and the position of the first bad byte", function()
    local v, err = core.jsonDecode('{"a":1,}')
    assert.is_nil(v)
    assert.matches("invalid JSON at byte %d+", err)
    assert.is_nil((core.jsonDecode("")))
  end)

  it("refuses text after the value (found by fuzz/json.lua)", function()
    for _, text in ipairs{ "false]", "{} x", "[1] [2]", '"a"b' } do
      local v, err = core.jsonDecode(text)
      assert.is_nil(v, text)
      assert.matches("text after the value", err)
    end
    assert.same({ 1 }, (core.jsonDecode(" [1] \r\n\t")))
  end)

  it("refuses numbers that have no double instead of an infinity", function()
    local v, err = core.jsonDecode('{"n":1e999}')
    assert.is_nil(v)
    assert.matches("too large", err)
    assert.equal(1e308, core.jsonDecode("1e308"))
  end)

  it("refuses nesting deeper than 1000 instead of overflowing", function()
    local v, err = core.jsonDecode(string.rep("[", 5000) .. string.rep("]", 5000))
    assert.is_nil(v)
    assert.is_string(err)
  end)
end)

describe("core.jsonEncode", function()
  it("writes keys in the order __jsonorder gives, leaving nil ones out", function()
    local body = setmetatable({ env = {}, environmentId = "env1", id = "k" },
      { __jsonorder = {
        "id", "seedCheckpointName", "environmentId", "idleTimeoutMinutes", "env",
      } })
    assert.are.equal('{"id":"k","environmentId":"env1","env":{}}', core.jsonEncode(body))
  end)

  it("sorts the keys of other objects", function()
    assert.are.equal('{"a":1,"b":2,"c":3}', core.jsonEncode{ c = 3, a = 1, b = 2 })
  end)

  it("writes sequences as arrays, integers as integers, floats exactly", function()
    assert.are.equal('[1,2,3]', core.jsonEncode{ 1, 2, 3 })
    assert.are.equal('[0.1,-5,1e+300]', core.jsonEncode{ 0.1, -5, 1e300 })
    assert.are.equal('[]', core.jsonEncode(setmetatable({}, core.jsonArray)))
    assert.are.equal('null', core.jsonEncode(core.null))
  end)

  it("escapes strings, including NUL bytes and control characters", function()
    local s = 'a"b\\c\n\0\1é'
    local text = core.jsonEncode{ s }
    assert.are.equal('["a\\"b\\\\c\\n\\u0000\\u0001é"]', text)
  end)

  it("round-trips what it writes", function()
    local v = { command = "echo 'hi'", env = { A = "1" }, n = 3, ok = true }
    assert.are.same(v, core.jsonDecode(core.jsonEncode(v)))
  end)

  it("escapes a character at any offset of a long run (8 bytes a test)", function()
    -- each character to escape, at every offset of a 24-byte run of plain ones
    local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\31"] = "\\u001f",
      ["\127"] = "\127", ["\255"] = "\255", [" "] = " " }
    for c, want in pairs(escapes) do
      for at = 1, 24 do
        local s = ("x"):rep(at - 1) .. c .. ("y"):rep(24 - at)
        local text = core.jsonEncode(s)
        assert.are.equal('"' .. ("x"):rep(at - 1) .. want .. ("y"):rep(24 - at) .. '"', text)
      end
    end
    -- a long string of 960 KiB (uploadDir's env) comes out whole
    local big = ("A"):rep(983040)
    assert.are.equal('"' .. big .. '"', core.jsonEncode(big))
  end)

  it("raises on values JSON cannot hold", function()
    assert.has_error(function() core.jsonEncode{ f = print } end,
      "jsonEncode: only tables, strings, numbers, booleans and mastra.null can be written as JSON")
    assert.has_error(function() core.jsonEncode{ 0 / 0 } end,
      "jsonEncode: NaN and infinities cannot be written as JSON")
    assert.has_error(function() core.jsonEncode{ [true] = 1 } end,
      "jsonEncode: object keys must be strings")
    local cyclic = {}
    cyclic.self = cyclic
    assert.has_error(function() core.jsonEncode(cyclic) end,
      "jsonEncode: value nested too deeply (or cyclic)")
  end)
end)

describe("core.isUtf8", function()
  -- the reference: Lua's own strict decoder
  local function reference(s) return utf8.len(s) ~= nil end

  it("accepts well-formed UTF-8 at every length class and boundary", function()
    for _, s in ipairs{ "", "a", "\0", ("x"):rep(1000), "\u{7F}", "\u{80}", "\u{7FF}",
      "\u{800}", "\u{D7FF}", "\u{E000}", "\u{FFFF}", "\u{10000}", "\u{10FFFF}",
      "héllo wörld ✓ 😀", ("abcdefg"):rep(3) .. "é" .. ("abcdefgh"):rep(3) } do
      assert.is_true(core.isUtf8(s), ("%q"):format(s))
    end
  end)

  it("refuses overlong forms, surrogates, code points above U+10FFFF and cut sequences", function()
    for _, s in ipairs{
      "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xF0\x8F\xBF\xBF", -- overlong
      "\xED\xA0\x80", "\xED\xBF\xBF",                                             -- surrogates
      "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF",                             -- too big
      "\x80", "abc\xBF", "\xC3", "\xE2\x9C", "\xF0\x9F\x98", "\xC3(",             -- cut, stray
      ("abcdefgh"):rep(4) .. "\xC3", ("abcdefgh"):rep(4) .. "\x80" .. ("abcdefgh"):rep(4),
    } do
      assert.is_false(core.isUtf8(s), ("%q"):format(s))
      assert.is_false(reference(s), ("the reference disagrees on %q"):format(s))
    end
  end)

  it("agrees with utf8.len on random strings", function()
    -- mostly ASCII with bytes of every class mixed in, so that both the
    -- 8-byte fast path and the multibyte checks are crossed at odd offsets
    local pick = { 0x41, 0x7F, 0x80, 0xBF, 0xC2, 0xC3, 0xDF, 0xE0, 0xE2, 0xED, 0xEF, 0xF0,
      0xF4, 0xF5, 0xA0, 0x9F, 0x8F, 0x90 }
    math.randomseed(20261129)
    local disagreements = {}
    for _ = 1, 5000 do
      local t = {}
      for i = 1, math.random(0, 40) do
        t[i] = math.random() < 0.6 and math.random(0x20, 0x7E) or pick[math.random(#pick)]
      end
      local s = string.char(table.unpack(t))
      if core.isUtf8(s) ~= reference(s) then
        disagreements[#disagreements + 1] = ("%q"):format(s)
      end
    end
    assert.are.same({}, disagreements)
  end)

  it("says what it wants when given something other than a string", function()
    local ok, err = pcall(core.isUtf8, {})
    assert.is_false(ok)
    assert.matches("string expected, got table", err)
  end)
end)

describe("core.base64Encode", function()
  it("encodes as RFC 4648 does, padding included", function()
    -- the test vectors of RFC 4648, section 10
    local vectors = { [""] = "", f = "Zg==", fo = "Zm8=", foo = "Zm9v", foob = "Zm9vYg==",
      fooba = "Zm9vYmE=", foobar = "Zm9vYmFy" }
    for plain, want in pairs(vectors) do assert.are.equal(want, core.base64Encode(plain)) end
    assert.are.equal("AP8Q", core.base64Encode("\0\255\16"))
    -- and as coreutils' base64 does, on bytes of every value
    local bytes = {}
    for i = 0, 255 do bytes[#bytes + 1] = string.char(i) end
    local all = table.concat(bytes):rep(3)
    local p = assert(io.popen("printf %s " .. ("'%s'"):format(core.base64Encode(all))
      .. " | base64 -d | od -An -v -tu1 | tr -s ' \\n' '  '"))
    local got = p:read("a")
    p:close()
    local want = {}
    for i = 1, #all do want[i] = tostring(all:byte(i)) end
    assert.are.equal(table.concat(want, " "), (got:gsub("^ +", ""):gsub(" +$", "")))
  end)

  it("says what it wants when given something other than a string", function()
    local ok, err = pcall(core.base64Encode, {})
    assert.is_false(ok)
    assert.matches("string expected, got table", err)
  end)
end)
