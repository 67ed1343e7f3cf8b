#!/usr/bin/env bash
# The gateway paths of issue 25 against the Connect path, in the same run:
# one permitd (Release build, --threads 2, --app-auth keys), Redis and
# MariaDB, one policy and 100k keys; the paths in alternating rounds so the
# machine's load falls on every path alike:
#
#   connect        binary Acquire straight to permitd (the baseline; wrk)
#   forward        GET /v1/forward-auth straight to permitd, the key in a
#                  header a gateway rule names (what a gateway's sub-request
#                  costs permitd; wrk)
#   forward-nginx  GET through Debian's nginx with auth_request in front of a
#                  static file: the client's whole request, sub-request and all
#   grpc-acquire   the same Acquire over gRPC (grpc_load.c: one thread, 10
#                  HTTP/2 connections x 5 calls in flight = wrk's 50)
#   grpc-rls       Envoy's ShouldRateLimit over gRPC, domain edge, one
#                  descriptor remote_address (100k addresses) mapped to the
#                  policy keyed by it (grpc_load.c, as grpc-acquire)
#
# Prints a table and writes tests/bench/RESULTS-gateway.md (BENCH_RESULTS),
# with the load average at the start and the end, the means of every path
# and what permitd warned of during the run.
#
#   tests/bench/gateway.sh      BENCH_ROUNDS (3), BENCH_DURATION (5 s),
#                               BENCH_PATHS (the paths above, in order),
#                               BENCH_RESULTS (the file written),
#                               BENCH_PERMITD (a permitd to measure instead of
#                               a Release build: the suite's smoke run)
#
# tests/bench/grpc.sh is this script with the Connect and gRPC paths only.
# Another path is one more name in BENCH_PATHS, one more case in target()
# below (its load: a wrk URL and script, or a grpc_load mode) and one in
# describe(); a server of its own starts where nginx does, when listed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${BENCH_ROUNDS:-3}
duration=${BENCH_DURATION:-5}
paths=(${BENCH_PATHS:-connect forward forward-nginx grpc-acquire grpc-rls})
results=${BENCH_RESULTS:-$root/tests/bench/RESULTS-gateway.md}
has_path() { [[ " ${paths[*]} " == *" $1 "* ]]; }
build=$root/build/bench
tmp=$(mktemp -d /tmp/permitd-gateway-XXXXXX)
pid= nginx_pid=

cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null || true
    "$root/tests/stack/stack.sh" down "$tmp/stack" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

. "$root/tests/stack/free-port.sh"   # free_port: below the ephemeral range
cpu_of() { if [ -n "$1" ]; then awk '{print $14 + $15}' "/proc/$1/stat"; else echo 0; fi; }
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
if has_path forward-nginx && [ ! -x "$nginx_bin" ]; then
    echo "gateway.sh: nginx not found (scripts/install-deps.sh bench)" >&2; exit 1
fi

if [ -n "${BENCH_PERMITD:-}" ]; then
    permitd=$BENCH_PERMITD
else
    echo "gateway: building (Release) in $build" >&2
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
    cmake --build "$build" -j "$(nproc)" --target permitd >/dev/null
    permitd=$build/server/permitd
fi
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
         VALUES ('gw', 1000000000, 1000000, 'bench', 'bench');
     INSERT INTO policy_apps (policy_id, app) SELECT id, 'bench' FROM policies WHERE name = 'gw';
     INSERT INTO gateway_rules (path_prefix, policy, key_source, key_header)
         VALUES ('/', 'gw', 'header', 'X-Bench-Key');
     INSERT INTO envoy_descriptors (domain, descriptor, policy, key_entry)
         VALUES ('edge', 'remote_address', 'gw', 'remote_address');"
PERMITD_MYSQL_URL=$db "$permitd" admin add-app bench >/dev/null 2>&1 || true
key=$(PERMITD_MYSQL_URL=$db "$permitd" admin issue-key bench 2>/dev/null)

port=$(free_port); admin=$(free_port); gport=$(free_port)
"$permitd" --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" \
    --grpc-listen "127.0.0.1:$gport" --threads 2 \
    --redis-url "$PERMITD_TEST_REDIS_URL" --redis-prefix gateway: --mysql-url "$db" \
    --app-auth keys --trusted-proxies 127.0.0.1 --log-level warn > "$tmp/permitd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done

# nginx (when forward-nginx is measured): one worker, auth_request to
# permitd over kept connections, then a static file (no application behind
# it to measure).
start_nginx() {
    nginx_port=$(free_port)
    mkdir -p "$tmp/nginx/www"
    echo ok > "$tmp/nginx/www/ok.txt"
    cat > "$tmp/nginx/nginx.conf" <<CONF
worker_processes 1;
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
    upstream permitd { server 127.0.0.1:$port; keepalive 64; }
    server {
        listen 127.0.0.1:$nginx_port;
        root $tmp/nginx/www;
        location / {
            auth_request /_permitd;
            error_page 403 = @denied;
        }
        location = /_permitd {
            internal;
            proxy_pass http://permitd/v1/forward-auth/nginx;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-URI \$request_uri;
            proxy_set_header X-Original-Method \$request_method;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_set_header Authorization "Bearer $key";
        }
        location @denied { return 429; }
    }
}
CONF
    chmod -R a+rX "$tmp"
    "$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -e "$tmp/nginx/error.log" -g 'daemon off;' &
    nginx_pid=$!
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$nginx_port/ok.txt" && break
        sleep 0.1
    done
}
has_path forward-nginx && start_nginx

# target PATH: how PATH is loaded. A wrk path sets url, script and env (the
# script's environment); a gRPC path sets grpc (grpc_load's arguments after
# HOST PORT, the seconds left out: MODE CONNS STREAMS and KEYS NAME APP
# AUTHZ after them).
target() {
    url= script= env=() grpc=()
    case $1 in
    connect)
        url="http://127.0.0.1:$port/permit.v1.RateLimitService/Acquire"
        script=$root/tests/bench/acquire.lua
        env=(BENCH_BUCKET=gw BENCH_APP=bench BENCH_KEYS=100000 BENCH_API_KEY="$key") ;;
    forward)
        url="http://127.0.0.1:$port/v1/forward-auth"
        script=$root/tests/bench/gateway.lua
        env=(BENCH_KEYS=100000 BENCH_API_KEY="$key" BENCH_ORIGINAL=1) ;;
    forward-nginx)
        url="http://127.0.0.1:$nginx_port/ok.txt"
        script=$root/tests/bench/gateway.lua
        env=(BENCH_KEYS=100000) ;;
    grpc-acquire)
        grpc=(acquire 10 5 - 100000 gw bench "Bearer $key") ;;
    grpc-rls)
        grpc=(rls 10 5 - 100000 edge - "Bearer $key") ;;
    *)
        echo "gateway.sh: no path named $1" >&2; exit 2 ;;
    esac
}

# load SECONDS: the target's load for that long; prints its BENCH line.
load() {
    if [ ${#grpc[@]} -gt 0 ]; then
        "$tmp/grpc_load" 127.0.0.1 "$gport" "${grpc[@]:0:3}" "$1" "${grpc[@]:4}"
    else
        env "${env[@]}" wrk -t1 -c50 -d"$1s" -s "$script" "$url"
    fi
}

# describe PATH: one line of the results' header.
describe() {
    case $1 in
    connect) echo "\`connect\`: binary Acquire (wrk, acquire.lua);" ;;
    forward) echo "\`forward\`: GET /v1/forward-auth straight to permitd (wrk; the key in X-Bench-Key, which the one gateway rule names);" ;;
    forward-nginx) echo "\`forward-nginx\`: GET of a static file through Debian's nginx (one worker) whose auth_request asks permitd over kept connections (wrk);" ;;
    grpc-acquire) echo "\`grpc-acquire\`: the same Acquire over gRPC (grpc_load.c, one thread, 10 HTTP/2 connections x 5 calls in flight);" ;;
    grpc-rls) echo "\`grpc-rls\`: Envoy's ShouldRateLimit over gRPC, domain edge, one descriptor remote_address (100,000 addresses) mapped to the policy keyed by it (grpc_load.c, as grpc-acquire);" ;;
    esac
}

run() {   # path round
    local url script env grpc out cpu0 cpu1 ng0 ng1 rps req bad p99 ngcpu=0 ngpid=
    target "$1"
    load 2 >/dev/null
    [ -n "$nginx_pid" ] && ngpid=$(pgrep -P "$nginx_pid" | head -1)
    cpu0=$(cpu_of "$pid"); ng0=$(cpu_of "$ngpid")
    out=$(load "$duration" | grep '^BENCH ')
    cpu1=$(cpu_of "$pid"); ng1=$(cpu_of "$ngpid")
    [ "$1" = forward-nginx ] && ngcpu=$((ng1 - ng0))
    rps=$(sed -n 's/.*rps=\([0-9.]*\).*/\1/p' <<<"$out")
    req=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$out")
    bad=$(sed -n 's/.*\(non2xx\|errors\)=\([0-9]*\).*/\2/p' <<<"$out")
    p99=$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<<"$out")
    python3 -c "import sys; p, r, rps, p99, c0, c1, ng, n, bad, hz = sys.argv[1:]; \
print('| %s | %s | %.0f | %.2f | %.2f | %s | %s |' % (p, r, float(rps), int(p99) / 1000, \
(int(c1) - int(c0)) / int(hz) * 1e6 / max(int(n), 1), \
'%.2f' % (int(ng) / int(hz) * 1e6 / int(n)) if int(ng) else '-', bad))" \
        "$1" "$2" "$rps" "$p99" "$cpu0" "$cpu1" "$ngcpu" "$req" "$bad" "$(getconf CLK_TCK)"
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
rows=()
for round in $(seq "$rounds"); do
    for p in "${paths[@]}"; do
        rows+=("$(run "$p" "$round")")
        echo "${rows[-1]}" >&2
    done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "# Gateway paths against the Connect path (issue 25)"
    echo
    echo "Written by \`tests/bench/gateway.sh\` on $(date -u '+%Y-%m-%d %H:%M') UTC, git $(git -C "$root" rev-parse --short HEAD)."
    echo "Release build, one permitd \`--threads 2 --app-auth keys\` for every path (one app key), 50 requests"
    echo "in flight for ${duration} s after a 2 s warm-up, 100,000 keys of one policy (a random key per request),"
    echo "paths in alternating rounds:"
    for p in "${paths[@]}"; do describe "$p"; done
    echo "$(nproc) CPUs, shared. Load average (1, 5, 15 min) at the start: $load0; at the end: $load1."
    # what permitd warned of during the run
    grep 'level=\(warn\|error\)' "$tmp/permitd.log" > "$tmp/warns" || true
    echo "permitd logged $(wc -l < "$tmp/warns") warnings or errors during the run$( [ -s "$tmp/warns" ] && \
        printf '; the first: `%s`' "$(head -n1 "$tmp/warns" | cut -c1-200)")."
    echo
    echo "| path | round | req/s | p99 ms | permitd CPU µs/req | nginx CPU µs/req | non-2xx / errors |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Means of the $rounds rounds:"
    echo
    printf '%s\n' "${rows[@]}" | python3 -c "
import sys
by = {}
for line in sys.stdin:
    c = [x.strip() for x in line.strip().strip('|').split('|')]
    by.setdefault(c[0], []).append(c)
print('| path | req/s | p99 ms | permitd CPU µs/req | nginx CPU µs/req |')
print('|---|---:|---:|---:|---:|')
for p, rs in by.items():
    m = lambda i: sum(float(r[i]) for r in rs) / len(rs)
    ng = [float(r[5]) for r in rs if r[5] != '-']
    print('| %s | %.0f | %.2f | %.2f | %s |' % (p, m(2), m(3), m(4), '%.2f' % (sum(ng) / len(ng)) if ng else '-'))
"
} > "$results"
cat "$results"
