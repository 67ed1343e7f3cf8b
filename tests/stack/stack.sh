#!/usr/bin/env bash
# The throw-away servers the integration and e2e tests run against.
#
#   tests/stack/stack.sh up DIR     start redis-server and mariadbd under DIR, write DIR/env
#   tests/stack/stack.sh down DIR   stop what `up` started (DIR is kept for logs)
#
# DIR/env holds shell assignments the tests read:
#   PERMITD_TEST_REDIS_HOST, PERMITD_TEST_REDIS_PORT, PERMITD_TEST_REDIS_URL,
#   PERMITD_TEST_REDIS_SOCKET,
#   PERMITD_TEST_MYSQL_HOST, PERMITD_TEST_MYSQL_PORT, PERMITD_TEST_MYSQL_SOCKET,
#   PERMITD_TEST_MYSQL_URL (user permitd, database permitd, over TCP),
#   PERMITD_TEST_MYSQL_ROOT_URL (root, no password, over the socket),
#   PERMITD_TEST_CLUSTER_SEEDS, PERMITD_TEST_CLUSTER_URL, PERMITD_TEST_CLUSTER_DIR
#   (a Redis Cluster of 3 masters + 3 replicas, tests/stack/redis-cluster.sh;
#   it starts in the background while MariaDB starts)
# Servers run daemonized with their output in DIR/*.log: a server that
# inherited ctest's stdout would keep ctest waiting forever.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 up|down DIR" >&2; exit 2; }

case "$cmd" in
up)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    "$here/redis.sh" stop "$dir/redis" 2>/dev/null || true
    "$here/redis.sh" start "$dir/redis" > "$dir/env.redis"
    cat "$dir/env.redis" > "$dir/env"
    "$here/redis-cluster.sh" start "$dir/cluster" > "$dir/env.cluster" &
    cluster_pid=$!
    "$here/mariadb.sh" stop "$dir/mariadb" 2>/dev/null || true
    rm -rf "$dir/mariadb"   # a fresh datadir every time
    "$here/mariadb.sh" start "$dir/mariadb" > "$dir/env.mariadb"
    cat "$dir/env.mariadb" >> "$dir/env"
    wait "$cluster_pid" || { echo "stack.sh: the Redis Cluster did not start" >&2; exit 1; }
    cat "$dir/env.cluster" >> "$dir/env"
    echo "stack up in $dir:"
    sed 's/^/  /' "$dir/env"
    ;;
down)
    "$here/redis.sh" stop "$dir/redis"
    "$here/mariadb.sh" stop "$dir/mariadb"
    "$here/redis-cluster.sh" stop "$dir/cluster"
    echo "stack down ($dir)"
    ;;
*)
    echo "usage: $0 up|down DIR" >&2
    exit 2
    ;;
esac
