#!/usr/bin/env bash
# The deny flood (issue 24): what the deny cache (--deny-cache) saves Redis
# and buys in throughput, measured in one run.
#
#   tests/bench/deny.sh            prints a markdown table on stdout
#
# A Release build of permitd (build/bench), a redis-server of its own on a
# free port, no MySQL (policies written by hand with lua/sync.lua "set"),
# and two permitd instances side by side on that Redis: --deny-cache 4096
# (the default) and --deny-cache 0, under different key prefixes. Each
# case: a 1 s warm-up (it also puts the buckets over their limit), then
# wrk -c50 for DENY_SECONDS (default 5); Redis CPU is read from INFO
# (used_cpu_user + used_cpu_sys) around the measured run.
#   allowed   a policy that never denies, random keys of 1,000: the allowed
#             path, which the cache must not slow down
#   deny 1    one key over its limit (max_permits 1, rate 1/1000 s)
#   deny 1000 keys user-000000..000999 drawn at random, all over it
# Knobs: DENY_SECONDS, DENY_WRK_THREADS (2), BENCH_PERMITD (a permitd to
# measure instead of a Release build: the suite's smoke run).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
secs=${DENY_SECONDS:-5}
wrk_threads=${DENY_WRK_THREADS:-2}
log() { echo "deny-bench: $*" >&2; }

for c in wrk redis-server redis-cli cmake; do
    command -v "$c" >/dev/null 2>&1 || { log "$c is not installed"; exit 1; }
done
if [ -n "${BENCH_PERMITD:-}" ]; then
    bin=$BENCH_PERMITD
else
    cmake -S "$root" -B "$root/build/bench" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
    cmake --build "$root/build/bench" -j"$(nproc)" --target permitd >/dev/null
    bin=$root/build/bench/server/permitd
    [ -x "$bin" ] || bin=$(find "$root/build/bench" -name permitd -type f -perm -u+x | head -1)
fi

. "$root/tests/stack/free-port.sh"   # free_port: below the ephemeral range
tmp=$(mktemp -d -t permitd-deny.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no \
    > "$tmp/redis.log" 2>&1 &
pids+=($!)
rcli() { redis-cli -p "$rport" "$@"; }
for _ in $(seq 50); do rcli PING >/dev/null 2>&1 && break; sleep 0.1; done

sync_lua=$root/lua/sync.lua
policy() {      # PREFIX NAME MAX RATE
    rcli EVAL "$(cat "$sync_lua")" 1 "$1{$2}:policy" set name "$2" apps bench \
        max_permits "$3" rate "$4" enabled 1 >/dev/null
    rcli SADD "$1policies" "$2" >/dev/null
}

declare -A port
for mode in on off; do
    size=4096; [ "$mode" = off ] && size=0
    policy "$mode:" open 1000000000 1000000000
    policy "$mode:" flood 1 0.001
    port[$mode]=$(free_port)
    "$bin" --listen "127.0.0.1:${port[$mode]}" --admin-listen "127.0.0.1:$(free_port)" \
        --redis-url "redis://127.0.0.1:$rport" --redis-prefix "$mode:" --deny-cache "$size" \
        --log-level warn > "$tmp/permitd-$mode.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        curl -fs "http://127.0.0.1:${port[$mode]}/healthz" >/dev/null 2>&1 && break
        sleep 0.1
    done
done

redis_cpu_us() {
    rcli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.0f", s * 1e6}'
}

# run MODE BUCKET KEYS: prints "rps cpu_us_per_request non2xx"
run() {
    local url="http://127.0.0.1:${port[$1]}/permit.v1.RateLimitService/Acquire" c0 c1 line
    BENCH_BUCKET=$2 BENCH_KEYS=$3 BENCH_APP=bench wrk -t"$wrk_threads" -c50 -d1s \
        -s "$here/acquire.lua" "$url" > /dev/null 2>&1 || true
    c0=$(redis_cpu_us)
    line=$(BENCH_BUCKET=$2 BENCH_KEYS=$3 BENCH_APP=bench wrk -t"$wrk_threads" -c50 \
        -d"${secs}s" -s "$here/acquire.lua" "$url" 2>&1 | grep '^BENCH ' || true)
    c1=$(redis_cpu_us)
    local rps req non2xx
    rps=$(sed -n 's/.*rps=\([0-9.]*\).*/\1/p' <<< "$line")
    req=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<< "$line")
    non2xx=$(sed -n 's/.*non2xx=\([0-9]*\).*/\1/p' <<< "$line")
    awk -v r="$rps" -v n="$req" -v c=$((c1 - c0)) -v e="$non2xx" \
        'BEGIN {printf "%.0f %.2f %s", r, (n > 0 ? c / n : 0), e}'
}

declare -A out
for case in "allowed open 1000" "deny-1 flood 1" "deny-1000 flood 1000"; do
    read -r id bucket keys <<< "$case"
    for mode in on off; do
        log "$id, cache $mode"
        out[$id.$mode]=$(run "$mode" "$bucket" "$keys")
    done
done

echo "| case | cache | req/s | Redis CPU µs / request | non-2xx |"
echo "|---|---|---|---|---|"
for id in allowed deny-1 deny-1000; do
    for mode in on off; do
        read -r rps cpu non2xx <<< "${out[$id.$mode]}"
        echo "| $id | $mode | $rps | $cpu | $non2xx |"
    done
done
echo
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) on $(nproc) CPUs; wrk -t$wrk_threads -c50 -d${secs}s; $(redis-server --version | cut -d' ' -f1-3)"
