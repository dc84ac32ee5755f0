-- What the spec file before this one left behind in its own process.
-- spec/support/run-busted gives busted this file after each spec file, so
-- these cases run last, in the same process: child processes (zombies
-- included), descriptors of children (pidfds, pipes), the event loop's own
-- descriptors. What outlives the process (a process left running) is the
-- leaks_check test's part (spec/support/leak-check.lua).
-- luacheck: std +busted
local leaks = require "spec.support.leaks"

describe("leaks after the spec file", function()
  it("no child process of this process is left, zombies included", function()
    leaks.settle(function() return #leaks.children() == 0 end)
    assert.are.same({}, leaks.children())
  end)

  it("no descriptor of a child process (pidfd, pipe, /dev/null) is left open", function()
    leaks.settle(function() return next(leaks.child_fds()) == nil end)
    local leaked = leaks.child_fds()
    assert.are.equal(0, leaks.count(leaked), "left open: " .. leaks.describe_fds(leaked))
  end)

  it("the event loop holds one epoll and one eventfd, no more", function()
    local epolls, eventfds = 0, 0
    for _, target in pairs(leaks.fds("self")) do
      if target == "anon_inode:[eventpoll]" then epolls = epolls + 1 end
      if target == "anon_inode:[eventfd]" then eventfds = eventfds + 1 end
    end
    assert.are.equal(1, epolls)
    assert.are.equal(1, eventfds)
  end)
end)
