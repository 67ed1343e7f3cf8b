#!/usr/bin/env bash
# Runs one test with a redis-server (and a Redis Cluster) of its own in
# place of the stack's.
#
#   tests/stack/own-redis.sh [--cluster] COMMAND [ARGS...]
#
# Starts a throw-away redis-server (tests/stack/redis.sh) in a temporary
# directory, exports its PERMITD_TEST_REDIS_HOST, _PORT, _URL and _SOCKET
# (which win over the stack's env file: harness.stack_env() and the e2e
# scripts read the environment), runs COMMAND, stops the server and exits
# with COMMAND's status. --cluster: a Redis Cluster of its own too
# (tests/stack/redis-cluster.sh: PERMITD_TEST_CLUSTER_SEEDS, _URL, _DIR).
#
# Why: ctest runs the tests in parallel (scripts/test.sh), and a test may
# SCRIPT FLUSH, CLIENT PAUSE or CLIENT KILL its Redis, count its EVALSHA
# calls or connections (INFO), or watch the default prefix's fleet: on a
# Redis shared with the tests running beside it, each of those is a flaky
# test; so is moving a cluster's slots, or counting its masters' calls. The
# stack's MariaDB stays shared (tests/CMakeLists.txt says which tests lock
# what).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cluster=0
[ "${1:-}" = --cluster ] && { cluster=1; shift; }
[ $# -gt 0 ] || { echo "usage: $0 [--cluster] COMMAND [ARGS...]" >&2; exit 2; }

dir=$(mktemp -d -t permitd-own-redis.XXXXXX)
stop() {
    "$here/redis.sh" stop "$dir" >/dev/null 2>&1 || true
    [ "$cluster" = 0 ] || "$here/redis-cluster.sh" stop "$dir/cluster" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap stop EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

while IFS='=' read -r k v; do
    [ -n "$k" ] && export "$k=$v"
done < <("$here/redis.sh" start "$dir")
if [ "$cluster" = 1 ]; then
    "$here/redis-cluster.sh" start "$dir/cluster" > "$dir/cluster.env"
    while IFS='=' read -r k v; do
        [ -n "$k" ] && export "$k=$v"
    done < "$dir/cluster.env"
fi

status=0
"$@" || status=$?
exit "$status"
