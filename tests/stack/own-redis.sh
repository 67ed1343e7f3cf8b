#!/usr/bin/env bash
# Runs one test with a redis-server of its own in place of the stack's.
#
#   tests/stack/own-redis.sh COMMAND [ARGS...]
#
# Starts a throw-away redis-server (tests/stack/redis.sh) in a temporary
# directory, exports its PERMITD_TEST_REDIS_HOST, _PORT, _URL and _SOCKET
# (which win over the stack's env file: harness.stack_env() and the e2e
# scripts read the environment), runs COMMAND, stops the server and exits
# with COMMAND's status.
#
# Why: ctest runs the tests in parallel (scripts/test.sh), and a test may
# SCRIPT FLUSH, CLIENT PAUSE or CLIENT KILL its Redis, count its EVALSHA
# calls or connections (INFO), or watch the default prefix's fleet: on a
# Redis shared with the tests running beside it, each of those is a flaky
# test. The stack's MariaDB and Redis Cluster stay shared (tests/CMakeLists.txt
# says which tests lock which).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

dir=$(mktemp -d -t permitd-own-redis.XXXXXX)
stop() {
    "$here/redis.sh" stop "$dir" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap stop EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

while IFS='=' read -r k v; do
    [ -n "$k" ] && export "$k=$v"
done < <("$here/redis.sh" start "$dir")

status=0
"$@" || status=$?
exit "$status"
