#!/bin/sh
# examples/hello.lua end to end on the embedded local platform: it prints
# the greeting and the sandbox's working directory, /workspace as root
# (the namespaces driver). The platform it starts
# lives in a temporary state directory and is stopped here.
set -u
runner="$1"
script="$2"
state=$(mktemp -d)
trap 'pid=$(sed -n "s/^pid=//p" "$state/platform.state" 2>/dev/null);
      [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$state"' EXIT
out=$(MASTRA_PLATFORM_STATE_DIR="$state" MASTRA_PLATFORM_IDLE_EXIT=60 \
      "$runner" "$script" 2>"$state/stderr")
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "example-hello: exit status $rc; stderr:" >&2
  cat "$state/stderr" >&2
  exit 1
fi
first=$(printf '%s\n' "$out" | sed -n 1p)
second=$(printf '%s\n' "$out" | sed -n 2p)
lines=$(printf '%s\n' "$out" | wc -l)
# the working directory: /workspace in a namespaces sandbox (the default
# as root), the sandbox's directory on the host under the process driver
if [ "$(id -u)" = 0 ]; then cwd=/workspace
else cwd="$state/platform-data/sandboxes/sbx_*/workspace"; fi
case "$first|$second|$lines" in
  "Hello, world!|"$cwd"|2") ;;
  *)
    echo "example-hello: unexpected output:" >&2
    printf '%s\n' "$out" >&2
    exit 1 ;;
esac
grep -q "mastra: using the local platform at http://127.0.0.1:" "$state/stderr" || {
  echo "example-hello: no line on stderr about the local platform" >&2
  cat "$state/stderr" >&2
  exit 1
}
echo "example-hello: ok"
