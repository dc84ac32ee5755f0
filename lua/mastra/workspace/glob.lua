-- Glob matching for the workspace tools (list_files, grep): `*` (not
-- across `/`), `**` (across `/`; `**/` also matches no directory), `?`,
-- `[abc]`, `[a-z]`, `[!x]`, `\x` for a literal x, and `{a,b}` alternatives.
-- Plain string functions: no I/O, no other module.
--
-- Patterns come from agents, so matching must not blow up: a match is
-- memoised on (pattern position, subject position), which bounds it by
-- #pattern * #subject^2 steps (without it, `*a*a*a*a*a*a*a*a*b` against 40
-- a's ran for minutes), and `{}` may expand to at most MAX_ALTERNATIVES
-- patterns (`{a,b}` sixteen times over would be 65,536).
local glob = {}

local MAX_ALTERNATIVES = 1024

-- count[1]: the alternatives made so far, of count.pattern
local function expand_braces(pat, count)
  local s = pat:find("{", 1, true)
  if not s then
    count[1] = count[1] + 1
    if count[1] > MAX_ALTERNATIVES then
      error(("the glob pattern %q has more than %d alternatives in its {}:"
        .. " use fewer {a,b} groups, or several patterns"):format(count.pattern,
        MAX_ALTERNATIVES), 0)
    end
    return { pat }
  end
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
    for _, x in ipairs(expand_braces(pat:sub(1, s - 1) .. alt .. pat:sub(e + 1), count)) do
      out[#out + 1] = x
    end
  end
  return out
end

-- the expansions of the patterns seen last (a tool matches one pattern
-- against every file of a tree)
local expansions, nexpansions = {}, 0

local function alternatives(pattern)
  local alts = expansions[pattern]
  if alts then return alts end
  alts = expand_braces(pattern, { 0, pattern = pattern })
  if nexpansions >= 64 then expansions, nexpansions = {}, 0 end
  expansions[pattern], nexpansions = alts, nexpansions + 1
  return alts
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

-- Whether pattern p matches subject s, both whole. The work is memoised:
-- an entry (pi, si) found not to match is never worked out again.
local function glob_here(p, s)
  local failed, width = {}, #s + 2
  local here

  -- p from pi against s from si: literal steps walk on, a star tries each
  -- place it could stop (through here, which remembers the failures)
  local function walk(pi, si)
    while pi <= #p do
      local c = p:sub(pi, pi)
      if c == "*" then
        if p:sub(pi + 1, pi + 1) == "*" then
          local rest = pi + 2
          if p:sub(rest, rest) == "/" then
            -- `**/` matches no directory, or any run of whole ones
            if here(rest + 1, si) then return true end
            for k = si, #s do
              if s:sub(k, k) == "/" and here(rest + 1, k + 1) then return true end
            end
            return false
          end
          for k = si, #s + 1 do
            if here(rest, k) then return true end
          end
          return false
        end
        for k = si, #s + 1 do
          if here(pi + 1, k) then return true end
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

  function here(pi, si)
    local key = pi * width + si
    if failed[key] then return false end
    if walk(pi, si) then return true end
    failed[key] = true
    return false
  end

  return here(1, 1)
end

local function glob_match(pattern, s)
  for _, p in ipairs(alternatives(pattern)) do
    if glob_here(p, s) then return true end
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
