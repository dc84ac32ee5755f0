-- Lint configuration: Lua 5.4, and no globals anywhere.
std = "lua54"
cache = false
max_line_length = 100
include_files = {
  "lua/**/*.lua", "spec/**/*.lua", "examples/**/*.lua", "bench/**/*.lua",
  "fuzz/**/*.lua", "test/**/*.lua", ".busted", ".luacheckrc",
}
files["spec/**/*_spec.lua"] = { std = "+busted" }
files[".luacheckrc"] = {
  globals = { "std", "cache", "max_line_length", "include_files", "files" },
}
