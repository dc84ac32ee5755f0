-- examples/embed_tick.c with a task that fails (test/CMakeLists.txt,
-- example_embed_tick_error): the host prints the error object's text.
local mastra = require "mastra"
mastra.spawn(function()
  mastra.sleep(20)
  mastra.errors.MastraError:raise({ message = "the task fails on purpose" }, 0)
end)
