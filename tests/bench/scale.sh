#!/usr/bin/env bash
# permitd's control plane at scale (issue 22): 10,000 policies and millions
# of bucket keys, measured.
#
#   tests/bench/scale.sh            10,000 policies, 10 M bucket keys
#   tests/bench/scale.sh --small    10,000 policies, 1 M bucket keys (a small box)
#
# Builds the release permitd of run.sh (build/bench), starts its own Redis
# and MariaDB in a temporary directory (tests/stack/redis.sh, mariadb.sh),
# migrates the store, and hands over to tests/bench/scale.py, which creates
# the policies (SQL) and the bucket keys (redis-cli --pipe of SETs in
# bucket.lua's state format, with its TTLs), runs two permitd instances and
# measures: the sync's first load and steady pass (time, CPU per
# instance), ListPolicies, the admin UI in headless Chromium
# (tests/bench/scale-ui.mjs: first paint, filter), a limit edit's answer,
# the background settle it starts and Acquire p99 during it (wrk), and
# Redis bytes per key at 1 M and at the full count. Writes
# tests/bench/RESULTS-scale.md. Everything it started is stopped at the end.
#
# Knobs (environment): BENCH_PERMITD (a permitd to measure instead of a
# Release build: the suite's smoke run), BENCH_KEYS (bucket keys; 10000000, or 1000000 with
# --small), BENCH_POLICIES (10000), BENCH_PAGE (rows a page, when the API
# pages: 50), BENCH_DURATION (s of each wrk run, 10), BENCH_PASS_WINDOW (s
# over which the steady passes are measured, 21), BENCH_SETTLE_TIMEOUT (s
# the settle is waited for, 600), BENCH_UI (0 skips the
# browser), BENCH_KEEP (1 keeps the temporary directory), BENCH_RESULTS
# (where to write).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
log() { echo "scale: $*" >&2; }
die() { echo "scale: $*" >&2; exit 1; }

for arg in "$@"; do
    case $arg in
    --small) export BENCH_KEYS=${BENCH_KEYS:-1000000} ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (--small, or --help)" ;;
    esac
done
export BENCH_KEYS=${BENCH_KEYS:-10000000}

"$here/install-deps.sh"
"$root/scripts/install-deps.sh" test      # chromium and node, for the UI run
if [ ! -d "$root/tests/e2e/ui/node_modules/playwright-core" ]; then
    log "installing playwright-core for the UI run (tests/e2e/ui: npm ci)"
    (cd "$root/tests/e2e/ui" && npm ci --no-audit --no-fund >/dev/null)
fi
if [ -n "${BENCH_PERMITD:-}" ]; then
    permitd=$BENCH_PERMITD
else
    log "building a release permitd in build/bench"
    cmake -S "$root" -B "$root/build/bench" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
    cmake --build "$root/build/bench" -j"$(nproc)" --target permitd >/dev/null
    permitd="$root/build/bench/server/permitd"
fi
[ -x "$permitd" ] || die "no $permitd after the build"

tmp=$(mktemp -d /tmp/permitd-scale-XXXXXX)
cleanup() {
    local rc=$?
    set +e
    "$root/tests/stack/redis.sh" stop "$tmp/redis" >/dev/null 2>&1
    "$root/tests/stack/mariadb.sh" stop "$tmp/mariadb" >/dev/null 2>&1
    if [ "${BENCH_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
        for f in "$tmp"/permitd.*.log; do
            [ "$rc" -ne 0 ] && [ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -n 15 "$f" >&2; }
        done
        log "logs kept in $tmp"
    else
        rm -rf "$tmp"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$root/tests/stack/redis.sh" start "$tmp/redis" > "$tmp/redis.env"
"$root/tests/stack/mariadb.sh" start "$tmp/mariadb" > "$tmp/mariadb.env"
mysql_url=$(sed -n 's/^PERMITD_TEST_MYSQL_URL=//p' "$tmp/mariadb.env")
PERMITD_MYSQL_URL=$mysql_url "$permitd" migrate up > "$tmp/migrate.log" 2>&1 ||
    die "permitd migrate up failed (see $tmp/migrate.log)"

SCALE_PERMITD=$permitd SCALE_TMP=$tmp SCALE_MYSQL_URL=$mysql_url \
SCALE_REDIS_PORT=$(sed -n 's/^PERMITD_TEST_REDIS_PORT=//p' "$tmp/redis.env") \
SCALE_MYSQL_SOCKET=$(sed -n 's/^PERMITD_TEST_MYSQL_SOCKET=//p' "$tmp/mariadb.env") \
    python3 "$here/scale.py"
