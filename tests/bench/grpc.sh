#!/usr/bin/env bash
# The gRPC listener (issue 25) against the Connect path, in one run: the
# same permitd (Release build, --threads 2, --app-auth off), Redis and
# MariaDB; Acquire over Connect (wrk -t1 -c50, binary, acquire.lua), Acquire
# over gRPC and Envoy's ShouldRateLimit over gRPC (grpc_load.c: one thread,
# 10 HTTP/2 connections x 5 calls in flight = 50, as wrk's 50), in
# alternating rounds so the machine's load falls on all three alike. Keys:
# 10,000 users (Acquire) or 10,000 client addresses (ShouldRateLimit, one
# descriptor remote_address mapped to a policy keyed by it). Prints a table
# and writes tests/bench/RESULTS-grpc.md with the load average.
#
#   tests/bench/grpc.sh          BENCH_ROUNDS (3), BENCH_DURATION (5 s)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${BENCH_ROUNDS:-3}
duration=${BENCH_DURATION:-5}
build=$root/build/bench
tmp=$(mktemp -d /tmp/permitd-grpc-XXXXXX)
pid=

cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    "$root/tests/stack/stack.sh" down "$tmp/stack" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "grpc: building (Release) in $build" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target permitd >/dev/null
permitd=$build/server/permitd
# shellcheck disable=SC2046
cc -O2 -Wall -Wextra -o "$tmp/grpc_load" "$root/tests/bench/grpc_load.c" \
   $(pkg-config --cflags --libs libnghttp2)

"$root/tests/stack/stack.sh" up "$tmp/stack" >/dev/null
# shellcheck disable=SC1091
. "$tmp/stack/env"
db=$PERMITD_TEST_MYSQL_URL
PERMITD_MYSQL_URL=$db "$permitd" migrate up >/dev/null
sql() { mariadb --no-defaults --protocol=socket --socket="$PERMITD_TEST_MYSQL_SOCKET" -uroot permitd -e "$1"; }
sql "INSERT INTO policies (name, max_permits, rate, created_by, updated_by)
         VALUES ('hot', 1000000000, 1000000, 'bench', 'bench'),
                ('edge-ip', 1000000000, 1000000, 'bench', 'bench');
     INSERT INTO policy_apps (policy_id, app) SELECT id, 'bench' FROM policies WHERE name = 'hot';
     INSERT INTO policy_apps (policy_id, app) SELECT id, 'edge' FROM policies WHERE name = 'edge-ip';
     INSERT INTO envoy_descriptors (domain, descriptor, policy, key_entry)
         VALUES ('edge', 'remote_address', 'edge-ip', 'remote_address');"

port=$(free_port); admin=$(free_port); gport=$(free_port)
"$permitd" --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" \
    --grpc-listen "127.0.0.1:$gport" --threads 2 \
    --redis-url "$PERMITD_TEST_REDIS_URL" --redis-prefix grpcbench: --mysql-url "$db" \
    --app-auth off --log-level warn > "$tmp/permitd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done

# One measurement: prints a table row. $1: connect | grpc-acquire | grpc-rls
run() {
    local out cpu0 cpu1 secs=$2
    cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    case $1 in
    connect)
        out=$(BENCH_BUCKET=hot BENCH_APP=bench BENCH_KEYS=10000 wrk -t1 -c50 -d"${secs}s" \
              -s "$root/tests/bench/acquire.lua" \
              "http://127.0.0.1:$port/permit.v1.RateLimitService/Acquire" | grep '^BENCH ');;
    grpc-acquire)
        out=$("$tmp/grpc_load" 127.0.0.1 "$gport" acquire 10 5 "$secs" 10000 hot bench);;
    grpc-rls)
        out=$("$tmp/grpc_load" 127.0.0.1 "$gport" rls 10 5 "$secs" 10000 edge -);;
    esac
    cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    local rps req bad p99
    rps=$(sed -n 's/.*rps=\([0-9.]*\).*/\1/p' <<<"$out")
    req=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$out")
    bad=$(sed -n 's/.*\(non2xx\|errors\)=\([0-9]*\).*/\2/p' <<<"$out")
    p99=$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<<"$out")
    python3 -c "import sys; m, r, rps, p99, c0, c1, n, bad, hz = sys.argv[1:]; \
print('| %s | %s | %.0f | %.2f | %.2f | %s |' % (m, r, float(rps), int(p99) / 1000, \
(int(c1) - int(c0)) / int(hz) * 1e6 / max(int(n), 1), bad))" \
        "$1" "$round" "$rps" "$p99" "$cpu0" "$cpu1" "$req" "$bad" "$(getconf CLK_TCK)"
}

round=warm-up
for mode in connect grpc-acquire grpc-rls; do run "$mode" 2 >/dev/null; done
load0=$(cut -d' ' -f1-3 /proc/loadavg)
rows=()
for round in $(seq "$rounds"); do
    for mode in connect grpc-acquire grpc-rls; do
        rows+=("$(run "$mode" "$duration")")
        echo "${rows[-1]}" >&2
    done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "# gRPC (Acquire, Envoy's ShouldRateLimit) against Connect (issue 25)"
    echo
    echo "Written by \`tests/bench/grpc.sh\` on $(date -u '+%Y-%m-%d %H:%M') UTC, git $(git -C "$root" rev-parse --short HEAD)."
    echo "Release build, one permitd, \`--threads 2\`, \`--app-auth off\`, after a 2 s warm-up of each."
    echo "connect: wrk \`-t1 -c50 -d${duration}s\`, binary Acquire (acquire.lua) over 10,000 keys of one policy;"
    echo "grpc-acquire: the same Acquire over gRPC; grpc-rls: ShouldRateLimit, domain edge, one descriptor"
    echo "remote_address over 10,000 addresses, mapped to a policy keyed by it; both by grpc_load.c, one thread,"
    echo "10 HTTP/2 connections x 5 calls in flight (50, as wrk's). Alternating rounds."
    echo "Load average (1, 5, 15 min) at the start: $load0; at the end: $load1 (a 2-core machine shared with"
    echo "other work: compare rows of one round rather than runs)."
    echo
    # what permitd warned of during the run (not the start's notice that app auth is off)
    grep 'level=\(warn\|error\)' "$tmp/permitd.log" | grep -v 'APP AUTH IS OFF' > "$tmp/warns" || true
    echo "permitd logged $(wc -l < "$tmp/warns") warnings or errors during the run$( [ -s "$tmp/warns" ] && \
        printf '; the first: `%s`' "$(head -n1 "$tmp/warns" | cut -c1-200)")."
    echo
    echo "| path | round | req/s | p99 ms | permitd CPU µs/req | errors |"
    echo "|---|---:|---:|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
} > "$root/tests/bench/RESULTS-grpc.md"
cat "$root/tests/bench/RESULTS-grpc.md"
