#!/bin/sh
# One example script end to end, as the README runs it (`build/mastra-lua
# examples/NAME.lua`, no credentials: the embedded local platform, here in a
# temporary state directory), with checks on its output; then the
# platform's records must show no live sandbox, and the platform is
# stopped.
#   test/example-run.sh RUNNER EXAMPLES_DIR NAME
set -u
runner="$1"
dir="$2"
name="$3"
state=$(mktemp -d)
trap 'pid=$(sed -n "s/^pid=//p" "$state/platform.state" 2>/dev/null);
      [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$state"' EXIT
fail() {
  echo "example $name: $*" >&2
  [ -f "$state/out" ] && { echo "--- stdout" >&2; cat "$state/out" >&2; }
  [ -f "$state/err" ] && { echo "--- stderr" >&2; cat "$state/err" >&2; }
  exit 1
}
run() { # run ARGS...: the example, its output in $state/out
  MASTRA_PLATFORM_STATE_DIR="$state" MASTRA_PLATFORM_IDLE_EXIT=60 \
    timeout 120 "$runner" "$dir/$name.lua" "$@" >"$state/out" 2>"$state/err" \
    || fail "exit status $? (run $*)"
}
has() { grep -qF -- "$1" "$state/out" || fail "no line with '$1' in its output"; }
matches() { grep -qE -- "$1" "$state/out" || fail "no line matching '$1' in its output"; }

case "$name" in
  fleet)
    run
    for p in api web worker docs cli; do matches "^$p +ok +created .*built dist/app.txt at"; done
    has "build: 5 members, 5 ok, 0 failed in"
    has "(5 created, 0 restored)"
    run # the second run restores every project
    for p in api web worker docs cli; do matches "^$p +ok +restored .*up to date \\(built"; done
    has "(0 created, 5 restored)" ;;
  checkpoint)
    run
    has "1. start: created, empty"
    matches "^3. start: restored from mastra-checkpoint-"
    has "   notes.txt: notes from the first start"
    has "4. destroyed with its checkpoint" ;;
  reconnect)
    run
    id=$(sed -n 's/^sandboxId: //p' "$state/out")
    [ -n "$id" ] || fail "no sandboxId line"
    has "build/mastra-lua examples/reconnect.lua $id"
    run "$id"
    has "attached to $id: connected"
    matches "^the first run wrote at [0-9:]+$" ;;
  bucket)
    run
    matches "^upload: +58 bytes into the sandbox as data/sales.csv \\(through stdin\\)"
    has "download: 52 bytes back into the bucket as /examples/report.txt"
    [ "$(sed -n '/^report, read from the bucket:$/,$p' "$state/out" | sed -n 2,7p | tr '\n' ' ')" \
      = "east,310 north,120 south,75 west,42 north,8 rows: 5 " ] || fail "unexpected report" ;;
  streaming)
    run
    for i in 1 2 3 4; do matches "^\[ *[0-9.]+s\]   live: step $i$"; done
    matches "it exited with 0; the result kept 28 bytes"
    matches "the ticker printed [1-9][0-9]* ticks so far"
    matches "killed: exit code 137" ;;
  agent_tools)
    run
    matches "^11 tools: mastra_workspace_read_file, "
    has "-> Created notes/todo.md (24 bytes)"
    has "-> Edited notes/todo.md: replaced 1 occurrence"
    matches "^   -> 2$"
    has "-> (error) Error: File not found: notes/missing.md"
    has "-> Deleted directory notes" ;;
  private_network)
    run
    grep -qE "^(skipped: the platform's driver .* cannot isolate networks|client sandbox sbx_[0-9a-f]+ received: hello from the other sandbox)" \
      "$state/out" || fail "neither a skip nor the exchange" ;;
  hello)
    run
    has "Hello, world!" ;;
  # docs/guide-day-one.md's recipes (spec/guide_day_one_spec.lua checks that
  # the guide shows these files as they are)
  day_one/fleet)
    run
    for p in api web worker docs cli infra; do
      matches "^$p +ok +created .* README of [0-9]+ bytes$"
    done
    has "fleet: 6 members, 6 ok, 0 failed in" ;;
  day_one/tree)
    run
    matches "^uploaded [0-9]+ bytes of tar \(stdin\)$"
    has "in the sandbox, ./first is a link: true"
    has "dist/lines.txt on the host: 3" ;;
  day_one/server)
    run
    has "curl in the sandbox got: hello over HTTP"
    has "server stopped: exit code 137" ;;
  day_one/detach)
    run
    id=$(sed -n 's/^sandboxId: //p' "$state/out")
    [ -n "$id" ] || fail "no sandboxId line"
    run "$id"
    has "attached: connected"
    has "state.txt: left by the first run" ;;
  *) fail "no checks for this example" ;;
esac

# nothing left on the platform (agent_tools uses no platform)
for rec in "$state"/platform-data/state/sandboxes/*.json; do
  [ -f "$rec" ] || continue
  grep -qE '"destroyedMs":[[:space:]]*[1-9]' "$rec" || fail "a sandbox is still live: $rec"
done
echo "example $name: ok"
