#!/usr/bin/env bash
# Forward-auth (issue 25) against the Connect path, in the same run: one
# permitd (Release build), Redis and MariaDB, one policy and 100k keys;
# wrk in alternating rounds so the machine's load falls on every path alike:
#
#   connect        binary Acquire straight to permitd (the baseline)
#   forward        GET /v1/forward-auth straight to permitd, the key in a
#                  header a gateway rule names (what a gateway's sub-request
#                  costs permitd)
#   forward-nginx  GET through Debian's nginx with auth_request in front of a
#                  static file: the client's whole request, sub-request and all
#
# Prints a table and writes tests/bench/RESULTS-gateway.md, with the load
# average at the start and the end.
#
#   tests/bench/gateway.sh      BENCH_ROUNDS (3), BENCH_DURATION (5 s),
#                               BENCH_PATHS (the paths above, in order)
#
# Another path is one more name in BENCH_PATHS and one more case in
# target() below (its URL and wrk script) and, if it needs a server of its
# own, in start_extra().
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${BENCH_ROUNDS:-3}
duration=${BENCH_DURATION:-5}
paths=(${BENCH_PATHS:-connect forward forward-nginx})
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

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx_bin" ] || { echo "gateway.sh: nginx not found (scripts/install-deps.sh bench)" >&2; exit 1; }

echo "gateway: building (Release) in $build" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target permitd >/dev/null
permitd=$build/server/permitd

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
         VALUES ('/', 'gw', 'header', 'X-Bench-Key');"
PERMITD_MYSQL_URL=$db "$permitd" admin add-app bench >/dev/null 2>&1 || true
key=$(PERMITD_MYSQL_URL=$db "$permitd" admin issue-key bench 2>/dev/null)

port=$(free_port); admin=$(free_port)
"$permitd" --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" --threads 2 \
    --redis-url "$PERMITD_TEST_REDIS_URL" --redis-prefix gateway: --mysql-url "$db" \
    --app-auth keys --trusted-proxies 127.0.0.1 --log-level warn > "$tmp/permitd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done

# nginx: one worker, auth_request to permitd over kept connections, then a
# static file (no application behind it to measure).
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
            proxy_pass http://permitd/v1/forward-auth;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-URI \$request_uri;
            proxy_set_header X-Original-Method \$request_method;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_set_header Authorization "Bearer $key";
            proxy_set_header Permitd-Deny-Status 403;
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

# target PATH: the URL, the wrk script and its environment, for one path.
target() {
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
    *)
        echo "gateway.sh: no path named $1" >&2; exit 2 ;;
    esac
}

run() {   # path round
    local url script env out cpu0 cpu1 ng0 ng1 rps req non2xx p99 ngcpu=0
    target "$1"
    env "${env[@]}" wrk -t1 -c50 -d2s -s "$script" "$url" >/dev/null
    cpu0=$(cpu_of "$pid"); ng0=$(cpu_of "$(pgrep -P "$nginx_pid" | head -1)")
    out=$(env "${env[@]}" wrk -t1 -c50 -d"${duration}s" -s "$script" "$url" | grep '^BENCH ')
    cpu1=$(cpu_of "$pid"); ng1=$(cpu_of "$(pgrep -P "$nginx_pid" | head -1)")
    [ "$1" = forward-nginx ] && ngcpu=$((ng1 - ng0))
    rps=$(sed -n 's/.*rps=\([0-9.]*\).*/\1/p' <<<"$out")
    req=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$out")
    non2xx=$(sed -n 's/.*non2xx=\([0-9]*\).*/\1/p' <<<"$out")
    p99=$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<<"$out")
    python3 -c "import sys; p, r, rps, p99, c0, c1, ng, n, bad, hz = sys.argv[1:]; \
print('| %s | %s | %.0f | %.2f | %.2f | %s | %s |' % (p, r, float(rps), int(p99) / 1000, \
(int(c1) - int(c0)) / int(hz) * 1e6 / int(n), \
'%.2f' % (int(ng) / int(hz) * 1e6 / int(n)) if int(ng) else '-', bad))" \
        "$1" "$2" "$rps" "$p99" "$cpu0" "$cpu1" "$ngcpu" "$req" "$non2xx" "$(getconf CLK_TCK)"
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
    echo "# Forward-auth against the Connect path (issue 25)"
    echo
    echo "Written by \`tests/bench/gateway.sh\` on $(date -u '+%Y-%m-%d %H:%M') UTC, git $(git -C "$root" rev-parse --short HEAD)."
    echo "Release build, one permitd \`--threads 2\` for every path, wrk \`-t1 -c50 -d${duration}s\` after a 2 s"
    echo "warm-up, 100,000 keys of one policy (a random key per request), paths in alternating rounds."
    echo "\`connect\`: binary Acquire; \`forward\`: GET /v1/forward-auth straight to permitd (the key in"
    echo "X-Bench-Key, which the one gateway rule names); \`forward-nginx\`: GET of a static file through"
    echo "Debian's nginx (one worker) whose auth_request asks permitd over kept connections."
    echo "$(nproc) CPUs, shared. Load average (1, 5, 15 min) at the start: $load0; at the end: $load1."
    echo
    echo "| path | round | req/s | p99 ms | permitd CPU µs/req | nginx CPU µs/req | non-2xx |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
} > "$root/tests/bench/RESULTS-gateway.md"
cat "$root/tests/bench/RESULTS-gateway.md"
