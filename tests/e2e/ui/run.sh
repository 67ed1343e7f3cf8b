#!/usr/bin/env bash
# End-to-end test of the admin web UI in real headless Chromium
# (Debian's /usr/bin/chromium driven by playwright-core).
#
#   tests/e2e/ui/run.sh [FILE]     FILE: ui.test.mjs (default), gateway.test.mjs, envoy.test.mjs,
#                                  fleet.test.mjs, lighthouse.test.mjs or overrides.test.mjs
#
# Environment (ctest sets these; see ui.test.mjs):
#   PERMITD_BIN                the permitd binary to start
#   PERMITD_TEST_REDIS_URL     redis://127.0.0.1:PORT of a throw-away redis-server
#   PERMITD_TEST_MYSQL_SOCKET  socket of a throw-away MariaDB (root, no password)
#   PERMITD_UI_SCREENSHOTS     where screenshots go (default: a new directory under $TMPDIR)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"

if [[ ! -x "${PERMITD_CHROMIUM:-/usr/bin/chromium}" ]]; then
  echo "run.sh: ${PERMITD_CHROMIUM:-/usr/bin/chromium} not found: install Debian's chromium (scripts/install-deps.sh test)" >&2
  exit 1
fi

# Install the pinned packages (playwright-core, axe-core, lighthouse) only when needed.
if [[ ! -d node_modules || ! -f node_modules/.package-lock.json \
      || package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund
fi

exec node --test --test-reporter=spec "${1:-ui.test.mjs}"
