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
