#!/usr/bin/env bash
# End-to-end test of permitd's gRPC listener (issue 25) through stock gRPC
# clients: @grpc/grpc-js + @grpc/proto-loader (reading proto/ as it is, no
# code generation), and node's http2 for what grpc-js never sends.
#
#   tests/e2e/run-grpc.sh
#
# Environment (ctest sets these; see grpc.test.mjs): PERMITD_BIN,
# PERMITD_TEST_REDIS_URL, PERMITD_TEST_REDIS_PORT.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"

# Install the pinned clients only when needed (as run.sh does).
if [[ ! -d node_modules || ! -f node_modules/.package-lock.json \
      || package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund
fi

exec node --test --test-reporter=spec grpc.test.mjs grpc-tls.test.mjs grpc-limits.test.mjs grpc-streams.test.mjs grpc-reserve.test.mjs envoy.test.mjs doors.test.mjs grpc-allocs.test.mjs
