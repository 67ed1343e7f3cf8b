#!/usr/bin/env bash
# What the API key check (issue 21) costs end to end: the same permitd
# (Release build), Redis and MariaDB, one policy and 100k keys, Acquire
# (binary) under wrk, with --app-auth keys (each request carries
# Authorization: Bearer) and with --app-auth off, in alternating rounds so
# the machine's load falls on both alike. Prints a table and writes
# tests/bench/RESULTS-appkeys.md.
#
#   tests/bench/appkeys.sh          BENCH_ROUNDS (3), BENCH_DURATION (5 s),
#                                   BENCH_RESULTS (the file written),
#                                   BENCH_PERMITD (a permitd to measure instead
#                                   of a Release build: the suite's smoke run)
#
# The per-request cost of the check alone is bench_appkeys's (README there).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${BENCH_ROUNDS:-3}
duration=${BENCH_DURATION:-5}
build=$root/build/bench
tmp=$(mktemp -d /tmp/permitd-appkeys-XXXXXX)
pid=

cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    "$root/tests/stack/stack.sh" down "$tmp/stack" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

. "$root/tests/stack/free-port.sh"   # free_port: below the ephemeral range

if [ -n "${BENCH_PERMITD:-}" ]; then
    permitd=$BENCH_PERMITD
else
    echo "appkeys: building (Release) in $build" >&2
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
    cmake --build "$build" -j "$(nproc)" --target permitd >/dev/null
    permitd=$build/server/permitd
fi

"$root/tests/stack/stack.sh" up "$tmp/stack" >/dev/null
# shellcheck disable=SC1091
. "$tmp/stack/env"
db=$PERMITD_TEST_MYSQL_URL
PERMITD_MYSQL_URL=$db "$permitd" migrate up >/dev/null
sql() { mariadb --no-defaults --protocol=socket --socket="$PERMITD_TEST_MYSQL_SOCKET" -uroot permitd -e "$1"; }
sql "INSERT INTO policies (name, max_permits, rate, created_by, updated_by)
         VALUES ('keyed', 1000000000, 1000000, 'bench', 'bench');
     INSERT INTO policy_apps (policy_id, app) SELECT id, 'bench' FROM policies WHERE name = 'keyed';"
PERMITD_MYSQL_URL=$db "$permitd" admin add-app bench >/dev/null 2>&1 || true
key=$(PERMITD_MYSQL_URL=$db "$permitd" admin issue-key bench 2>/dev/null)

run() {   # mode: keys | off
    local port admin
    port=$(free_port); admin=$(free_port)
    "$permitd" --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" --threads 2 \
        --redis-url "$PERMITD_TEST_REDIS_URL" --redis-prefix appkeys: --mysql-url "$db" \
        --app-auth "$1" --log-level warn > "$tmp/permitd-$1.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    local env=(BENCH_BUCKET=keyed BENCH_APP=bench BENCH_KEYS=100000)
    [ "$1" = keys ] && env+=(BENCH_API_KEY="$key")
    env "${env[@]}" wrk -t1 -c50 -d2s -s "$root/tests/bench/acquire.lua" \
        "http://127.0.0.1:$port/permit.v1.RateLimitService/Acquire" >/dev/null
    local cpu0 cpu1 out
    cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    out=$(env "${env[@]}" wrk -t1 -c50 -d"${duration}s" -s "$root/tests/bench/acquire.lua" \
        "http://127.0.0.1:$port/permit.v1.RateLimitService/Acquire" | grep '^BENCH ')
    cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    local rps req non2xx p99
    rps=$(sed -n 's/.*rps=\([0-9.]*\).*/\1/p' <<<"$out")
    req=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$out")
    non2xx=$(sed -n 's/.*non2xx=\([0-9]*\).*/\1/p' <<<"$out")
    p99=$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<<"$out")
    python3 -c "import sys; m, r, rps, p99, c0, c1, n, bad, hz = sys.argv[1:]; \
print('| %s | %s | %.0f | %.2f | %.2f | %s |' % (m, r, float(rps), int(p99) / 1000, \
(int(c1) - int(c0)) / int(hz) * 1e6 / int(n), bad))" \
        "$1" "$round" "$rps" "$p99" "$cpu0" "$cpu1" "$req" "$non2xx" "$(getconf CLK_TCK)"
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
rows=()
for round in $(seq "$rounds"); do
    for mode in keys off; do
        rows+=("$(run "$mode")")
        echo "${rows[-1]}" >&2
    done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "# The API key check end to end (issue 21)"
    echo
    echo "Written by \`tests/bench/appkeys.sh\` on $(date -u '+%Y-%m-%d %H:%M') UTC, git $(git -C "$root" rev-parse --short HEAD)."
    echo "Release build, \`--threads 2\`, wrk \`-t1 -c50 -d${duration}s\` after a 2 s warm-up, binary Acquire over"
    echo "100,000 keys of one policy; \`--app-auth keys\` (Authorization: Bearer on every request) and \`off\`"
    echo "in alternating rounds. Load average (1, 5, 15 min) at the start: $load0; at the end: $load1."
    echo
    echo "| --app-auth | round | req/s | p99 ms | permitd CPU µs/req | non-2xx |"
    echo "|---|---:|---:|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
} > "${BENCH_RESULTS:-$root/tests/bench/RESULTS-appkeys.md}"
cat "${BENCH_RESULTS:-$root/tests/bench/RESULTS-appkeys.md}"
