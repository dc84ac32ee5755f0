#!/bin/sh
# The inspector's browser test (inspector.test.js), as CTest runs it:
#   sh test/browser/run.sh ARTIFACTS_DIR
# with MASTRA_PLATFORM, MASTRA_LUA, LUA_PATH_5_4 and LUA_CPATH_5_4 set.
# Installs playwright-core from package-lock.json (npm ci) when
# node_modules is missing. Without chromium, node or playwright-core it
# says so and exits 77 (CTest: skipped), unless MASTRA_REQUIRE_BROWSER=1
# (CI), where that is a failure.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ARTIFACTS=$1
export ARTIFACTS
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
export CHROMIUM

skip() {
  echo "browser test skipped: $*" >&2
  if [ "${MASTRA_REQUIRE_BROWSER:-0}" = 1 ]; then
    echo "MASTRA_REQUIRE_BROWSER=1: a skipped browser test is a failure" >&2
    exit 1
  fi
  exit 77
}

[ -x "$CHROMIUM" ] || skip "$CHROMIUM is missing (scripts/setup installs Debian's chromium)"
command -v node >/dev/null 2>&1 || skip "node is missing"
if [ ! -d "$here/node_modules/playwright-core" ]; then
  command -v npm >/dev/null 2>&1 || skip "npm is missing, and so is playwright-core"
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) >&2 \
    || skip "npm ci could not install playwright-core"
fi
exec node "$here/inspector.test.js"
