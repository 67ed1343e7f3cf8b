#!/usr/bin/env bash
# What the fleet publisher (issue 23, server/control/fleet.c) costs: the same
# permitd (Release build) and Redis, BENCH_POLICIES policies (100) all with
# traffic every second (binary Acquire under wrk, round robin over them:
# tests/bench/fleet.lua), with --fleet-publish-ms 1000 (on) and 0 (off) in
# alternating rounds so the machine's load falls on both alike. For "on" it
# reads the publisher's own counters (/metrics: permitd_fleet_commands_total,
# permitd_fleet_bytes_total) and Redis's (INFO commandstats: the commands
# only the publisher sends) over the measured window: Redis operations and
# bytes per instance per second. Prints a table and writes
# tests/bench/RESULTS-fleet.md with the load average.
#
#   tests/bench/fleet.sh        BENCH_ROUNDS (3), BENCH_DURATION (8 s), BENCH_POLICIES (100),
#                               BENCH_RESULTS (the file written), BENCH_PERMITD (a
#                               permitd to measure instead of a Release build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${BENCH_ROUNDS:-3}
duration=${BENCH_DURATION:-8}
policies=${BENCH_POLICIES:-100}
build=$root/build/bench
tmp=$(mktemp -d /tmp/permitd-fleet-XXXXXX)
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
    echo "fleet: building (Release) in $build" >&2
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
    cmake --build "$build" -j "$(nproc)" --target permitd >/dev/null
    permitd=$build/server/permitd
fi

"$root/tests/stack/stack.sh" up "$tmp/stack" >/dev/null
# shellcheck disable=SC1091
. "$tmp/stack/env"
port_of() { sed -n 's|redis://[^:]*:\([0-9]*\).*|\1|p' <<<"$1"; }
rport=$(port_of "$PERMITD_TEST_REDIS_URL")
rcli() { redis-cli -p "$rport" "$@"; }

# The policies, kept by hand in Redis (no MySQL: the sync's own traffic stays
# out of the figures): limits no request reaches, so every answer is a take.
for i in $(seq 0 $((policies - 1))); do
    printf 'HSET "fleet:{fleet-%d}:policy" name fleet-%d apps * max_permits 1000000000 rate 1000000 version 1 enabled 1\nSADD fleet:policies fleet-%d\n' "$i" "$i" "$i"
done | rcli >/dev/null

# The publisher's commands as Redis counts them (calls): HSET, EXPIREAT,
# EXPIRE, ZADD, ZREMRANGEBYSCORE (nothing else sends these here).
redis_calls() {
    rcli INFO commandstats | tr -d '\r' | awk -F'[=,:]' '
        /^cmdstat_(hset|expireat|expire|zadd|zremrangebyscore):/ { n += $3 } END { print n + 0 }'
}
metric() { curl -sf "http://127.0.0.1:$2/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

run() {   # mode: on | off
    local port admin ms
    port=$(free_port); admin=$(free_port)
    ms=$([ "$1" = on ] && echo 1000 || echo 0)
    "$permitd" --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" --threads 2 \
        --redis-url "$PERMITD_TEST_REDIS_URL" --redis-prefix fleet: --app-auth off \
        --fleet-publish-ms "$ms" --log-level warn > "$tmp/permitd-$1.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    local env=(BENCH_BUCKET=fleet BENCH_APP=bench BENCH_POLICIES="$policies")
    env "${env[@]}" wrk -t1 -c50 -d2s -s "$root/tests/bench/fleet.lua" \
        "http://127.0.0.1:$port/permit.v1.RateLimitService/Acquire" >/dev/null
    local cpu0 cpu1 out c0 c1 b0 b1 r0 r1 t0 t1
    c0=$(metric permitd_fleet_commands_total "$admin"); b0=$(metric permitd_fleet_bytes_total "$admin")
    r0=$(redis_calls); t0=$(date +%s.%N)
    cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    out=$(env "${env[@]}" wrk -t1 -c50 -d"${duration}s" -s "$root/tests/bench/fleet.lua" \
        "http://127.0.0.1:$port/permit.v1.RateLimitService/Acquire" | grep '^BENCH ')
    cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    c1=$(metric permitd_fleet_commands_total "$admin"); b1=$(metric permitd_fleet_bytes_total "$admin")
    r1=$(redis_calls); t1=$(date +%s.%N)
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    local rps req bad p99
    rps=$(sed -n 's/.*rps=\([0-9.]*\).*/\1/p' <<<"$out")
    req=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$out")
    bad=$(sed -n 's/.*non2xx=\([0-9]*\).*/\1/p' <<<"$out")
    p99=$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<<"$out")
    python3 -c "import sys; m, r, rps, p99, c0, c1, n, bad, hz, k0, k1, y0, y1, q0, q1, t0, t1, np = sys.argv[1:]; \
s = float(t1) - float(t0); \
pub = lambda a, b: '%.0f' % ((float(b or 0) - float(a or 0)) / s) if m == 'on' else '-'; \
per = '%.1f' % ((float(k1 or 0) - float(k0 or 0)) / s / int(np)) if m == 'on' else '-'; \
print('| %s | %s | %.0f | %.2f | %.2f | %s | %s | %s | %s | %s |' % (m, r, float(rps), int(p99) / 1000, \
(int(c1) - int(c0)) / int(hz) * 1e6 / int(n), pub(k0, k1), per, pub(y0, y1), pub(q0, q1), bad))" \
        "$1" "$round" "$rps" "$p99" "$cpu0" "$cpu1" "$req" "$bad" "$(getconf CLK_TCK)" \
        "$c0" "$c1" "$b0" "$b1" "$r0" "$r1" "$t0" "$t1" "$policies"
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
rows=()
for round in $(seq "$rounds"); do
    for mode in on off; do
        rows+=("$(run "$mode")")
        echo "${rows[-1]}" >&2
    done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "# The fleet publisher's cost (issue 23)"
    echo
    echo "Written by \`tests/bench/fleet.sh\` on $(date -u '+%Y-%m-%d %H:%M') UTC, git $(git -C "$root" rev-parse --short HEAD)."
    echo "Release build, \`--threads 2\`, one instance, wrk \`-t1 -c50 -d${duration}s\` after a 2 s warm-up, binary"
    echo "Acquire round robin over $policies policies (every one has traffic every second);"
    echo "\`--fleet-publish-ms 1000\` (on) and \`0\` (off) in alternating rounds."
    echo "Load average (1, 5, 15 min) at the start: $load0; at the end: $load1."
    echo
    echo "Publisher columns (on only), per second of the measured window: commands it sent and"
    echo "per active policy (permitd_fleet_commands_total), its bytes as sent in RESP"
    echo "(permitd_fleet_bytes_total), and the same commands as Redis counted them (INFO"
    echo "commandstats: HSET, EXPIREAT, EXPIRE, ZADD, ZREMRANGEBYSCORE)."
    echo
    echo "| publisher | round | req/s | p99 ms | permitd CPU µs/req | cmds/s | cmds/s per policy | bytes/s | Redis calls/s | non-2xx |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
} > "${BENCH_RESULTS:-$root/tests/bench/RESULTS-fleet.md}"
cat "${BENCH_RESULTS:-$root/tests/bench/RESULTS-fleet.md}"
