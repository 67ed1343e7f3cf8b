#!/usr/bin/env bash
# Local leases for hot buckets (issue 41): the hot bucket with and without
# leases against nginx's `return 200` ceiling, in one run.
#
#   tests/bench/leases.sh
#
# Builds a release permitd in build/bench (or takes BENCH_PERMITD), starts
# a Redis of its own and nginx (one worker per CPU, `return 200`), then, in
# alternating rounds, with the same wrk settings as run.sh (-t1 -c50,
# keep-alive, acquire.lua, binary Acquire of the shared bucket "hot",
# max_permits 10^9 at 10^6/s as run.sh's):
#   nginx       the same requests (acquire.lua's POSTs) answered `return 200`
#               (the HTTP ceiling)
#   off         permitd --local-leases off: every Acquire a script call
#   on          permitd --local-leases on
#   auto        permitd --local-leases auto (the default: leased once hot)
# For each permitd case: req/s, p99, Redis script calls per decision (INFO
# commandstats evalsha calls / requests) and what the leases counted. Then
# the under-admission: a scarce bucket (max_permits 2000 at 1000/s), wrk for
# BENCH_DURATION s, with leases off and on: admitted (the allowed count in
# /metrics) against the bound 2000 + 1000 x T. Policies are kept by hand in
# Redis (no MariaDB: nothing here reads it). Writes tests/bench/RESULTS-leases.md
# (BENCH_RESULTS) with `uptime` before and after.
#
# Knobs: BENCH_DURATION (s per run, 5), BENCH_ROUNDS (3: the best counts),
# BENCH_WARMUP (s, 2), BENCH_CONNECTIONS (50), BENCH_PERMITD (a binary).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DURATION=${BENCH_DURATION:-5}
ROUNDS=${BENCH_ROUNDS:-3}
WARMUP=${BENCH_WARMUP:-2}
CONNS=${BENCH_CONNECTIONS:-50}
RESULTS=${BENCH_RESULTS:-$here/RESULTS-leases.md}
API=/permit.v1.RateLimitService

tmp=$(mktemp -d)
redis_pid= nginx_pid= permitd_pid=
cleanup() {
    [ -n "$permitd_pid" ] && kill "$permitd_pid" 2>/dev/null && wait "$permitd_pid" 2>/dev/null || true
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
    [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
log() { echo "leases.sh: $*" >&2; }
. "$root/tests/stack/free-port.sh"   # free_port: below the ephemeral range

permitd=${BENCH_PERMITD:-}
if [ -z "$permitd" ]; then
    log "building a release permitd in build/bench"
    cmake -S "$root" -B "$root/build/bench" -DCMAKE_BUILD_TYPE=Release -DPERMITD_SANITIZE=OFF >/dev/null
    cmake --build "$root/build/bench" -j"$(nproc)" --target permitd >/dev/null
    permitd=$root/build/bench/server/permitd
fi
uptime_before=$(uptime)
git_rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "?")

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize no > "$tmp/redis.log" 2>&1 &
redis_pid=$!
rcli() { redis-cli -p "$redis_port" "$@"; }
for _ in $(seq 50); do rcli PING >/dev/null 2>&1 && break; sleep 0.1; done
policy() {
    rcli HSET "b:{$1}:policy" name "$1" apps bench max_permits "$2" rate "$3" version 1 \
        enabled 1 >/dev/null
}
policy hot 1000000000 1000000
policy scarce 2000 1000

nginx_port=$(free_port)
mkdir -p "$tmp/nginx"
cat > "$tmp/nginx/nginx.conf" <<CONF
worker_processes $(nproc);
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $tmp/nginx/body;
    proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/fastcgi;
    uwsgi_temp_path $tmp/nginx/uwsgi;
    scgi_temp_path $tmp/nginx/scgi;
    server {
        listen 127.0.0.1:$nginx_port;
        location / { return 200; }
    }
}
CONF
nginx -c "$tmp/nginx/nginx.conf" -g 'daemon off;' > "$tmp/nginx.log" 2>&1 &
nginx_pid=$!
sleep 0.5

api_port=$(free_port)
admin_port=$(free_port)
start_permitd() {
    "$permitd" --listen "127.0.0.1:$api_port" --admin-listen "127.0.0.1:$admin_port" \
        --redis-url "redis://127.0.0.1:$redis_port" --redis-prefix b: --app-auth off \
        --local-leases "$1" > "$tmp/permitd.$1.log" 2>&1 &
    permitd_pid=$!
    for _ in $(seq 100); do
        curl -fs "http://127.0.0.1:$api_port/healthz" >/dev/null 2>&1 && return
        sleep 0.1
    done
    log "permitd did not start:"; cat "$tmp/permitd.$1.log" >&2; exit 1
}
stop_permitd() { kill "$permitd_pid"; wait "$permitd_pid" || true; permitd_pid=; }
metric() {
    curl -fs "http://127.0.0.1:$admin_port/metrics" |
        awk -v m="$1" '$1 == m { s += $2 } END { print s + 0 }'
}
evalsha() { rcli INFO commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p' | tr -d '\r'; }

declare -A RPS P99 CALLS GRANTS TAKES
best() {   # best id rps p99 calls grants takes
    local id=$1
    if [ -z "${RPS[$id]:-}" ] || [ "${2%.*}" -gt "${RPS[$id]%.*}" ]; then
        RPS[$id]=$2; P99[$id]=$3; CALLS[$id]=$4; GRANTS[$id]=$5; TAKES[$id]=$6
    fi
}
run_case() {   # run_case id url [env...]
    local id=$1 url=$2 line rps p99 req c0 c1 g0 g1 t0 t1; shift 2
    env "$@" wrk -t1 -c"$CONNS" -d"${WARMUP}s" -s "$here/acquire.lua" "$url" >/dev/null 2>&1 || true
    c0=$(evalsha); g0=0; t0=0
    if [ "$id" != nginx ]; then
        g0=$(metric permitd_local_lease_grants_total); t0=$(metric permitd_local_leases_taken_total)
    fi
    env "$@" wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$here/acquire.lua" "$url" > "$tmp/$id.log" 2>&1 || true
    c1=$(evalsha); g1=0; t1=0
    if [ "$id" != nginx ]; then
        g1=$(metric permitd_local_lease_grants_total); t1=$(metric permitd_local_leases_taken_total)
    fi
    line=$(grep '^BENCH ' "$tmp/$id.log" || true)
    if [ -z "$line" ]; then     # nginx: wrk's own summary
        rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$tmp/$id.log")
        req=$(awk '/requests in/ { print $1 }' "$tmp/$id.log")
        p99=$(sed -n 's/^ *99% *\(.*\)$/\1/p' "$tmp/$id.log")
        [ -n "$p99" ] || p99=-
    else
        rps=$(sed 's/.*rps=\([0-9.]*\).*/\1/' <<<"$line")
        req=$(sed 's/.*requests=\([0-9]*\).*/\1/' <<<"$line")
        p99=$(awk -v u="$(sed 's/.*p99_us=\([0-9.]*\).*/\1/' <<<"$line")" 'BEGIN { printf "%.2f ms", u / 1000 }')
    fi
    [ -n "$rps" ] || { log "$id: no result"; cat "$tmp/$id.log" >&2; exit 1; }
    best "$id" "$rps" "$p99" "$(awk -v c=$((c1 - c0)) -v r="$req" 'BEGIN { printf "%.4f", (r > 0 ? c / r : 0) }')" \
        $((g1 - g0)) $((t1 - t0))
    log "$id: $rps req/s, p99 $p99"
}

url=http://127.0.0.1:$api_port$API/Acquire
for r in $(seq "$ROUNDS"); do
    log "round $r/$ROUNDS"
    run_case nginx "http://127.0.0.1:$nginx_port/"
    for mode in off on auto; do
        start_permitd "$mode"
        run_case "$mode" "$url" BENCH_CODEC=proto BENCH_BUCKET=hot BENCH_KEYS=0
        stop_permitd
    done
done

# Under-admission: the scarce bucket, leases off and on, once each.
declare -A ADM BOUND
for mode in off on; do
    rcli DEL "b:{scarce}:b" >/dev/null
    start_permitd "$mode"
    a0=$(metric 'permitd_acquires_total{policy="scarce",result="allowed"}')
    s0=$(date +%s.%N)
    env BENCH_CODEC=proto BENCH_BUCKET=scarce BENCH_KEYS=0 \
        wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$here/acquire.lua" "$url" > "$tmp/scarce.$mode.log" 2>&1 ||
        true
    s1=$(date +%s.%N)
    a1=$(metric 'permitd_acquires_total{policy="scarce",result="allowed"}')
    stop_permitd
    ADM[$mode]=$((a1 - a0))
    BOUND[$mode]=$(awk -v a="$s0" -v b="$s1" 'BEGIN { printf "%.0f", 2000 + 1000 * (b - a) }')
done
uptime_after=$(uptime)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
{
    echo "# Local leases: the hot bucket against nginx's ceiling"
    echo
    echo "\`tests/bench/leases.sh\` at $git_rev, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs,"
    echo "wrk -t1 -c$CONNS -d${DURATION}s (keep-alive, binary Acquire of one shared bucket,"
    echo "max_permits 10^9 at 10^6/s), best of $ROUNDS alternating rounds; permitd, Redis,"
    echo "nginx ($(nproc) workers, \`return 200\`) and wrk on the same machine."
    echo
    echo "What else ran: \`uptime\` before: \`$uptime_before\`; after: \`$uptime_after\`"
    echo "(the machine is shared with other builds and test runs)."
    echo
    echo "| case | req/s | × nginx | p99 | Redis script calls per decision | granted from leases | leases taken |"
    echo "|---|---:|---:|---|---:|---:|---:|"
    echo "| nginx \`return 200\` | ${RPS[nginx]} | 1.00 | ${P99[nginx]} | – | – | – |"
    for mode in off on auto; do
        echo "| permitd --local-leases $mode | ${RPS[$mode]} | $(ratio "${RPS[$mode]}" "${RPS[nginx]}") | ${P99[$mode]} | ${CALLS[$mode]} | ${GRANTS[$mode]} | ${TAKES[$mode]} |"
    done
    echo
    echo "Under-admission: a scarce bucket (max_permits 2000 at 1000/s), wrk -c$CONNS for"
    echo "${DURATION} s; admitted against the bound 2000 + 1000 × T (T from wrk's start to its end):"
    echo
    echo "| leases | admitted | bound | admitted / bound |"
    echo "|---|---:|---:|---:|"
    for mode in off on; do
        echo "| $mode | ${ADM[$mode]} | ${BOUND[$mode]} | $(ratio "${ADM[$mode]}" "${BOUND[$mode]}") |"
    done
} > "$RESULTS"
cat "$RESULTS"
