#!/usr/bin/env bash
# The traffic history's cost at 10,000 policies (issue 39), measured.
#
#   tests/bench/traffic-storage.sh
#
# Starts a MariaDB of its own in a temporary directory (tests/stack/mariadb.sh),
# migrates it with permitd (BENCH_PERMITD, else build/bench's or
# build/test's), and hands over to tests/bench/traffic_storage.py, which
# writes BENCH_MINUTES minutes of BENCH_POLICIES policies x BENCH_APPS apps
# with the statements the writer (control/trafficlog.c, stores/trafficdb.c)
# sends, as BENCH_INSTANCES instances each adding its own counts into the
# same rows, then measures the table's bytes on disk per row and per policy
# per day, a flush's time, the reads TrafficService makes and a prune.
# Writes tests/bench/RESULTS-traffic.md (BENCH_RESULTS). Stops what it
# started; BENCH_KEEP=1 keeps the directory.
#
# Knobs: BENCH_POLICIES (10000), BENCH_APPS (1), BENCH_MINUTES (120),
# BENCH_INSTANCES (2).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
permitd=${BENCH_PERMITD:-}
if [ -z "$permitd" ]; then
    for p in "$root/build/bench/server/permitd" "$root/build/test/server/permitd"; do
        [ -x "$p" ] && { permitd=$p; break; }
    done
fi
[ -x "${permitd:-}" ] || { echo "traffic-storage.sh: no permitd built (set BENCH_PERMITD)" >&2; exit 1; }

dir=$(mktemp -d /tmp/permitd-traffic-bench-XXXXXX)
cleanup() {
    "$root/tests/stack/mariadb.sh" stop "$dir/mariadb" >/dev/null 2>&1 || true
    [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT

PERMITD_MARIADB_ARGS="--innodb-buffer-pool-size=256M" \
    "$root/tests/stack/mariadb.sh" start "$dir/mariadb" > "$dir/env"
set -a
. "$dir/env"
set +a
mariadb --no-defaults --protocol=socket --socket="$PERMITD_TEST_MYSQL_SOCKET" -uroot \
    -e "CREATE DATABASE IF NOT EXISTS traffic_bench"
export BENCH_URL="mysql://root@localhost/traffic_bench?socket=$PERMITD_TEST_MYSQL_SOCKET"
PERMITD_MYSQL_URL=$BENCH_URL "$permitd" migrate up >/dev/null
export BENCH_DATADIR="$dir/mariadb/data"
export BENCH_RESULTS=${BENCH_RESULTS:-$here/RESULTS-traffic.md}
python3 "$here/traffic_storage.py"
