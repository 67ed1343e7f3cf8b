#!/usr/bin/env bash
# What TLS to Redis costs (issue 35): permitd's CPU per decision over
# rediss:// against redis:// in one run.
#
#   tests/bench/redis-tls.sh       prints a markdown table on stdout
#
# A Release build of permitd (build/bench); one redis-server of its own
# listening on a plaintext port and a TLS port (certificates made here by
# openssl: a CA and a server certificate for 127.0.0.1); two permitd
# instances on it, one per URL form, under different key prefixes. Rounds
# alternate the two (plain, tls, plain, tls, ...) so a change in the
# machine's load hits both alike. Each run: a 1 s warm-up, then wrk -c50
# for TLS_SECONDS (default 5) of Acquires over 1,000 random keys of a
# policy that never denies; permitd's CPU from /proc/PID/stat (utime +
# stime) and Redis's from INFO around the measured run.
# Knobs: TLS_SECONDS, TLS_ROUNDS (3), TLS_WRK_THREADS (2), TLS_THREADS
# (permitd --threads, 2).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
secs=${TLS_SECONDS:-5}
rounds=${TLS_ROUNDS:-3}
wrk_threads=${TLS_WRK_THREADS:-2}
threads=${TLS_THREADS:-2}
log() { echo "redis-tls-bench: $*" >&2; }

for c in wrk redis-server redis-cli cmake openssl; do
    command -v "$c" >/dev/null 2>&1 || { log "$c is not installed"; exit 1; }
done
cmake -S "$root" -B "$root/build/bench" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
cmake --build "$root/build/bench" -j2 --target permitd >/dev/null
bin=$root/build/bench/server/permitd
[ -x "$bin" ] || bin=$(find "$root/build/bench" -name permitd -type f -perm -u+x | head -1)

. "$root/tests/stack/free-port.sh"   # free_port: below the ephemeral range
tmp=$(mktemp -d -t permitd-tls.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

(cd "$tmp" &&
 openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=bench-ca -keyout ca.key -out ca.crt &&
 openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out server.csr &&
 printf 'subjectAltName=IP:127.0.0.1\n' > server.ext &&
 openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
     -extfile server.ext -out server.crt) >/dev/null 2>&1

rport=$(free_port); tport=$(free_port)
redis-server --port "$rport" --tls-port "$tport" --bind 127.0.0.1 --save "" --appendonly no \
    --tls-cert-file "$tmp/server.crt" --tls-key-file "$tmp/server.key" \
    --tls-ca-cert-file "$tmp/ca.crt" --tls-auth-clients no > "$tmp/redis.log" 2>&1 &
pids+=($!)
rcli() { redis-cli -p "$rport" "$@"; }
for _ in $(seq 50); do rcli PING >/dev/null 2>&1 && break; sleep 0.1; done

declare -A port pid
for mode in plain tls; do
    rcli EVAL "$(cat "$root/lua/sync.lua")" 1 "$mode:{open}:policy" set name open apps bench \
        max_permits 1000000000 rate 1000000000 enabled 1 >/dev/null
    rcli SADD "${mode}:policies" open >/dev/null
    port[$mode]=$(free_port)
    url="redis://127.0.0.1:$rport"; extra=()
    if [ "$mode" = tls ]; then
        url="rediss://127.0.0.1:$tport"; extra=(--redis-tls-ca-file "$tmp/ca.crt")
    fi
    "$bin" --listen "127.0.0.1:${port[$mode]}" --admin-listen "127.0.0.1:$(free_port)" \
        --redis-url "$url" --redis-prefix "$mode:" --threads "$threads" --app-auth off \
        --log-level warn "${extra[@]}" > "$tmp/permitd-$mode.log" 2>&1 &
    pid[$mode]=$!
    pids+=($!)
    for _ in $(seq 100); do
        curl -fs "http://127.0.0.1:${port[$mode]}/healthz" >/dev/null 2>&1 && break
        sleep 0.1
    done
done

clk=$(getconf CLK_TCK)
permitd_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
redis_cpu_us() {
    rcli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.0f", s * 1e6}'
}

# run MODE: prints "rps permitd_cpu_us_per_request redis_cpu_us_per_request non2xx"
run() {
    local url="http://127.0.0.1:${port[$1]}/permit.v1.RateLimitService/Acquire" t0 t1 c0 c1 line
    BENCH_BUCKET=open BENCH_KEYS=1000 wrk -t"$wrk_threads" -c50 -d1s -s "$here/acquire.lua" \
        "$url" > /dev/null 2>&1 || true
    t0=$(permitd_ticks "${pid[$1]}"); c0=$(redis_cpu_us)
    line=$(BENCH_BUCKET=open BENCH_KEYS=1000 wrk -t"$wrk_threads" -c50 -d"${secs}s" \
        -s "$here/acquire.lua" "$url" 2>&1 | grep '^BENCH ' || true)
    t1=$(permitd_ticks "${pid[$1]}"); c1=$(redis_cpu_us)
    local rps req non2xx
    rps=$(sed -n 's/.*rps=\([0-9.]*\).*/\1/p' <<< "$line")
    req=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<< "$line")
    non2xx=$(sed -n 's/.*non2xx=\([0-9]*\).*/\1/p' <<< "$line")
    awk -v r="$rps" -v n="$req" -v t=$((t1 - t0)) -v hz="$clk" -v c=$((c1 - c0)) -v e="$non2xx" \
        'BEGIN {printf "%.0f %.2f %.2f %s", r, (n > 0 ? t * 1e6 / hz / n : 0), (n > 0 ? c / n : 0), e}'
}

declare -A sum_cpu sum_rps sum_rcpu
echo "| round | URL | req/s | permitd CPU µs / decision | Redis CPU µs / decision | non-2xx |"
echo "|---|---|---|---|---|---|"
for r in $(seq "$rounds"); do
    for mode in plain tls; do
        log "round $r, $mode"
        read -r rps cpu rcpu non2xx <<< "$(run "$mode")"
        echo "| $r | $([ "$mode" = tls ] && echo rediss:// || echo redis://) | $rps | $cpu | $rcpu | $non2xx |"
        sum_cpu[$mode]=$(awk -v a="${sum_cpu[$mode]:-0}" -v b="$cpu" 'BEGIN {print a + b}')
        sum_rcpu[$mode]=$(awk -v a="${sum_rcpu[$mode]:-0}" -v b="$rcpu" 'BEGIN {print a + b}')
        sum_rps[$mode]=$(awk -v a="${sum_rps[$mode]:-0}" -v b="$rps" 'BEGIN {print a + b}')
    done
done
echo
awk -v p="${sum_cpu[plain]}" -v t="${sum_cpu[tls]}" -v rp="${sum_rcpu[plain]}" -v rt="${sum_rcpu[tls]}" \
    -v qp="${sum_rps[plain]}" -v qt="${sum_rps[tls]}" -v n="$rounds" 'BEGIN {
    printf "means of %d rounds: permitd CPU per decision %.2f µs (redis://) -> %.2f µs (rediss://), ratio %.2f; ", n, p / n, t / n, t / p
    printf "Redis CPU per decision %.2f -> %.2f µs, ratio %.2f; req/s %.0f -> %.0f\n", rp / n, rt / n, rt / rp, qp / n, qt / n }'
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) on $(nproc) CPUs; wrk -t$wrk_threads -c50 -d${secs}s; permitd --threads $threads; $(redis-server --version | cut -d' ' -f1-3)"
