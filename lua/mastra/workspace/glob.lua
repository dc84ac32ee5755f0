-- Glob matching for the workspace tools (list_files, grep): `*` (not
-- across `/`), `**` (across `/`; `**/` also matches no directory), `?`,
-- `[abc]`, `[a-z]`, `[!x]`, `\x` for a literal x, and `{a,b}` alternatives.
-- Plain string functions: no I/O, no other module.
local glob = {}

local function expand_braces(pat)
  local s = pat:find("{", 1, true)
  if not s then return { pat } end
  local depth, e = 0, nil
  for i = s, #pat do
    local c = pat:sub(i, i)
    if c == "{" then depth = depth + 1
    elseif c == "}" then
      depth = depth - 1
      if depth == 0 then e = i break end
    end
  end
  if not e then return { pat } end
  local inner, alts, start, d = pat:sub(s + 1, e - 1), {}, 1, 0
  for i = 1, #inner do
    local c = inner:sub(i, i)
    if c == "{" then d = d + 1 elseif c == "}" then d = d - 1
    elseif c == "," and d == 0 then
      alts[#alts + 1] = inner:sub(start, i - 1)
      start = i + 1
    end
  end
  alts[#alts + 1] = inner:sub(start)
  local out = {}
  for _, alt in ipairs(alts) do
    for _, x in ipairs(expand_braces(pat:sub(1, s - 1) .. alt .. pat:sub(e + 1))) do
      out[#out + 1] = x
    end
  end
  return out
end

local function class_match(set, ch)
  local negate = false
  if set:sub(1, 1) == "!" or set:sub(1, 1) == "^" then
    negate, set = true, set:sub(2)
  end
  local i, found = 1, false
  while i <= #set do
    local c = set:sub(i, i)
    if set:sub(i + 1, i + 1) == "-" and i + 2 <= #set then
      if ch >= c and ch <= set:sub(i + 2, i + 2) then found = true end
      i = i + 3
    else
      if ch == c then found = true end
      i = i + 1
    end
  end
  return found ~= negate
end

local function glob_here(p, pi, s, si)
  while pi <= #p do
    local c = p:sub(pi, pi)
    if c == "*" then
      if p:sub(pi + 1, pi + 1) == "*" then
        local rest = pi + 2
        if p:sub(rest, rest) == "/" then
          if glob_here(p, rest + 1, s, si) then return true end
          for k = si, #s do
            if s:sub(k, k) == "/" and glob_here(p, rest + 1, s, k + 1) then return true end
          end
          return false
        end
        for k = si, #s + 1 do
          if glob_here(p, rest, s, k) then return true end
        end
        return false
      end
      for k = si, #s + 1 do
        if glob_here(p, pi + 1, s, k) then return true end
        if s:sub(k, k) == "/" then break end
      end
      return false
    elseif c == "?" then
      if si > #s or s:sub(si, si) == "/" then return false end
      pi, si = pi + 1, si + 1
    elseif c == "[" and p:find("]", pi + 2, true) then
      local close = p:find("]", pi + 2, true)
      if si > #s or not class_match(p:sub(pi + 1, close - 1), s:sub(si, si)) then
        return false
      end
      pi, si = close + 1, si + 1
    else
      if c == "\\" and pi < #p then pi = pi + 1; c = p:sub(pi, pi) end
      if s:sub(si, si) ~= c then return false end
      pi, si = pi + 1, si + 1
    end
  end
  return si > #s
end

local function glob_match(pattern, s)
  for _, p in ipairs(expand_braces(pattern)) do
    if glob_here(p, 1, s, 1) then return true end
  end
  return false
end

--- Whether s matches pattern (the whole of s).
glob.match = glob_match

--- Whether s has glob syntax in it.
function glob.isGlob(s)
  return s:find("[%*%?%[{]") ~= nil
end

--- Whether one of patterns matches: a pattern without `/` matches the
-- base name, one with `/` the path.
function glob.matchAny(patterns, rel, name)
  for _, p in ipairs(patterns) do
    local target = p:find("/", 1, true) and rel or name
    if glob_match(p, target) then return true end
  end
  return false
end

return glob
