#!/usr/bin/env bash
# scale-ui.sh - the admin UI alone at 10,000 policies (issue 22) and
# 10,000 overrides of one of them (issue 37, BENCH_OVERRIDES) and the last
# BENCH_TRAFFIC_MINUTES (60) minutes of traffic history of every policy
# (issue 39: the overview, the UI's home, sums it), without
# scale.sh's millions of bucket keys, wrk runs and settle: a quick, light
# run for the UI's figures (first paint, a filter keystroke, a refresh).
#
#   tests/bench/scale-ui.sh [PERMITD]     PERMITD: the binary to measure
#                                         (default build/bench's release one,
#                                         built here when missing)
#
# Starts its own Redis and MariaDB in a temporary directory (tests/stack),
# migrates, makes BENCH_POLICIES policies with one SQL statement (names
# s00000.., each with app bench-app, as scale.py names them), starts one
# permitd on free ports and runs tests/bench/scale-ui.mjs BENCH_UI_RUNS
# times (3), printing each run's JSON line and the load average before and
# after. BENCH_UI_DIR serves the UI from that directory (--admin-ui-dir)
# instead of the copy in the binary: another version of the UI against the
# same server. Everything it started is stopped at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
npol=${BENCH_POLICIES:-10000}
novr=${BENCH_OVERRIDES:-10000}       # overrides of policy s00000 (issue 37); 0: none
nmin=${BENCH_TRAFFIC_MINUTES:-60}    # minutes of traffic history per policy (issue 39); 0: none
runs=${BENCH_UI_RUNS:-3}
log() { echo "scale-ui: $*" >&2; }
die() { echo "scale-ui: $*" >&2; exit 1; }

permitd=${1:-${BENCH_PERMITD:-}}
if [ -z "$permitd" ]; then
    log "building a release permitd in build/bench"
    cmake -S "$root" -B "$root/build/bench" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
    cmake --build "$root/build/bench" -j"$(nproc)" --target permitd >/dev/null
    permitd="$root/build/bench/server/permitd"
fi
[ -x "$permitd" ] || die "no permitd at $permitd"
[ -d "$root/tests/e2e/ui/node_modules/playwright-core" ] ||
    die "no playwright-core: run (cd tests/e2e/ui && npm ci) first"

tmp=$(mktemp -d /tmp/permitd-scale-ui-XXXXXX)
pid=
cleanup() {
    local rc=$?
    set +e
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    "$root/tests/stack/redis.sh" stop "$tmp/redis" >/dev/null 2>&1
    "$root/tests/stack/mariadb.sh" stop "$tmp/mariadb" >/dev/null 2>&1
    [ "$rc" -ne 0 ] && [ -f "$tmp/permitd.log" ] && tail -n 20 "$tmp/permitd.log" >&2
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$root/tests/stack/free-port.sh"   # free_port: below the ephemeral range

"$root/tests/stack/redis.sh" start "$tmp/redis" > "$tmp/redis.env"
"$root/tests/stack/mariadb.sh" start "$tmp/mariadb" > "$tmp/mariadb.env"
mysql_url=$(sed -n 's/^PERMITD_TEST_MYSQL_URL=//p' "$tmp/mariadb.env")
socket=$(sed -n 's/^PERMITD_TEST_MYSQL_SOCKET=//p' "$tmp/mariadb.env")
redis_port=$(sed -n 's/^PERMITD_TEST_REDIS_PORT=//p' "$tmp/redis.env")
PERMITD_MYSQL_URL=$mysql_url "$permitd" migrate up > "$tmp/migrate.log" 2>&1 ||
    die "permitd migrate up failed: $(tail -n 3 "$tmp/migrate.log")"
mariadb --no-defaults -u root --protocol=socket --socket="$socket" -D permitd <<SQL
INSERT INTO policies (name, max_permits, rate, description, created_by, updated_by)
  SELECT CONCAT('s', LPAD(seq, 5, '0')), 100, 1, CONCAT('scale policy ', seq), 'bench', 'bench'
  FROM seq_0_to_$((npol - 1));
INSERT INTO policy_apps (policy_id, app) SELECT id, 'bench-app' FROM policies;
SQL
if [ "$novr" -gt 0 ]; then
    mariadb --no-defaults -u root --protocol=socket --socket="$socket" -D permitd <<SQL
INSERT INTO policy_overrides (policy, match_kind, match_value, action, max_permits, rate)
  SELECT 's00000', 'key', CONCAT('u-', LPAD(seq, 5, '0')), 'limit', seq + 1, 1
  FROM seq_0_to_$((novr - 1));
SQL
fi
if [ "$nmin" -gt 0 ]; then
    # Every policy decided every minute (app bench-app; one in 7 denies,
    # one in 50 in shadow mode would have), the hours summed from them.
    mariadb --no-defaults -u root --protocol=socket --socket="$socket" -D permitd <<SQL
SET @now = UNIX_TIMESTAMP() DIV 60 * 60;
INSERT INTO traffic_minutes (policy, minute_unix, app, allowed, denied, shadow_denied)
  SELECT p.name, @now - 60 * m.seq, 'bench-app', 100 + p.id % 50, IF(p.id % 7 = 0, p.id % 13 + 1, 0),
         IF(p.id % 50 = 0, 3, 0)
  FROM policies p JOIN seq_1_to_$nmin m;
INSERT INTO traffic_hours (hour_unix, policy, app, allowed, denied, shadow_denied)
  SELECT minute_unix DIV 3600 * 3600, policy, app, SUM(allowed), SUM(denied), SUM(shadow_denied)
  FROM traffic_minutes GROUP BY minute_unix DIV 3600, policy, app;
SQL
fi
echo "bench-password-1" | PERMITD_MYSQL_URL=$mysql_url "$permitd" admin add-user bench --role editor >/dev/null

api=$(free_port)
admin=$(free_port)
"$permitd" --listen "127.0.0.1:$api" --admin-listen "127.0.0.1:$admin" \
    --redis-url "redis://127.0.0.1:$redis_port" --redis-prefix scaleui: \
    --mysql-url "$mysql_url" --log-level warn ${BENCH_UI_DIR:+--admin-ui-dir "$BENCH_UI_DIR"} \
    > "$tmp/permitd.log" 2>&1 < /dev/null &
pid=$!
for _ in $(seq 200); do
    curl -fs "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fs "http://127.0.0.1:$admin/readyz" >/dev/null || die "permitd not ready (see its log above)"

log "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$runs"); do
    SCALE_ADMIN="http://127.0.0.1:$admin" SCALE_USER=bench SCALE_PASSWORD=bench-password-1 \
    SCALE_FILTER="s$(printf %05d $((npol / 2)))" \
    SCALE_OVERRIDES_POLICY=$([ "$novr" -gt 0 ] && echo s00000) \
    SCALE_OVERRIDES_SEARCH="u-$(printf %04d $((novr / 20)))" node "$here/scale-ui.mjs"
done
log "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
