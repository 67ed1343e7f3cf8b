#!/usr/bin/env bash
# One throw-away redis-server in a directory of its own.
#
#   tests/stack/redis.sh start DIR [PORT]   start it (a free port unless given);
#                                           prints PERMITD_TEST_REDIS_* lines
#   tests/stack/redis.sh stop DIR           stop it (SHUTDOWN NOSAVE, then kill)
#
# No persistence: a restart starts empty, which is what the tests of
# "Redis restarted empty" want. Listens on 127.0.0.1 and on DIR/redis.sock.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR [PORT]" >&2; exit 2; }

port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

case "$cmd" in
start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    sock="$dir/redis.sock"
    if [ ${#sock} -gt 100 ]; then   # sun_path holds 107 bytes
        sock=$(mktemp -u /tmp/permitd-redis-XXXXXX.sock)
    fi
    for attempt in 1 2 3 4 5 6 7 8 9 10; do
        port=${3:-$(( 20000 + RANDOM % 40000 ))}
        port_free "$port" || { [ -n "${3:-}" ] && break; continue; }
        rm -f "$dir/redis.pid"
        if redis-server --port "$port" --bind 127.0.0.1 --unixsocket "$sock" \
                --unixsocketperm 700 --dir "$dir" --save '' --appendonly no \
                --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
                --protected-mode no; then
            for _ in $(seq 1 100); do
                if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
                    echo "$port" > "$dir/port"
                    echo "$sock" > "$dir/socket"
                    echo "PERMITD_TEST_REDIS_HOST=127.0.0.1"
                    echo "PERMITD_TEST_REDIS_PORT=$port"
                    echo "PERMITD_TEST_REDIS_URL=redis://127.0.0.1:$port"
                    echo "PERMITD_TEST_REDIS_SOCKET=$sock"
                    exit 0
                fi
                sleep 0.05
            done
        fi
        [ -n "${3:-}" ] && break
    done
    echo "redis.sh: could not start redis-server in $dir (see $dir/redis.log)" >&2
    exit 1
    ;;
stop)
    [ -f "$dir/port" ] || exit 0
    port=$(cat "$dir/port")
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    if [ -f "$dir/redis.pid" ]; then
        pid=$(cat "$dir/redis.pid")
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/port" "$dir/redis.pid"
    ;;
*)
    echo "usage: $0 start|stop DIR [PORT]" >&2
    exit 2
    ;;
esac
