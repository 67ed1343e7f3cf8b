#!/usr/bin/env bash
# One throw-away MariaDB server in a directory of its own.
#
#   tests/stack/mariadb.sh start DIR [PORT]   start it (a free port unless given);
#                                             prints PERMITD_TEST_MYSQL_* lines
#   tests/stack/mariadb.sh stop DIR           stop it (shutdown, then kill)
#
# PERMITD_MARIADB_ARGS, when set, is added to mariadbd's options (split on
# white space), e.g. "--ssl-ca=ca.pem --ssl-cert=server.pem --ssl-key=server.key
# --require-secure-transport=ON" for a server that speaks TLS only (the root
# login over the unix socket still works: MariaDB counts a socket as secure).
#
# The data directory DIR/data is created on the first start and kept by
# stop, so a stop + start is a restart with the data intact; remove DIR for
# a fresh server. Listens on 127.0.0.1 and on DIR/mariadb.sock (or a short
# /tmp path when DIR is deep: sun_path holds 107 bytes and mariadbd aborts on
# a longer one).
#
# Traps this avoids (see issue 3, "Running it"):
#   --no-defaults first, for every MariaDB tool: Debian's /etc/mysql config
#     would point the server and the clients at /run/mysqld;
#   --user=root: mariadbd refuses to run as root without it;
#   utf8mb4 explicitly: with --no-defaults the server default is latin1;
#   --skip-name-resolve: a TCP login from 127.0.0.1 then matches only
#     'user'@'127.0.0.1', so the test user exists for that host and localhost;
#   the server gets stdin from /dev/null, its output in DIR/mariadb.log and a
#     session of its own (setsid): one that inherited ctest's stdout would
#     keep ctest waiting forever.
#
# Printed (stack.sh appends them to the stack's env file):
#   PERMITD_TEST_MYSQL_HOST, PERMITD_TEST_MYSQL_PORT, PERMITD_TEST_MYSQL_SOCKET,
#   PERMITD_TEST_MYSQL_URL        mysql://permitd:permitd@127.0.0.1:PORT/permitd
#   PERMITD_TEST_MYSQL_ROOT_URL   mysql://root@localhost/permitd?socket=SOCK
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR [PORT]" >&2; exit 2; }

port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# The server's pid, when it is still running.
running_pid() {
    local pid
    [ -f "$dir/mariadb.pid" ] || return 1
    pid=$(cat "$dir/mariadb.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# The PERMITD_TEST_MYSQL_* lines for a server on port $1, socket $2.
print_env() {
    echo "PERMITD_TEST_MYSQL_HOST=127.0.0.1"
    echo "PERMITD_TEST_MYSQL_PORT=$1"
    echo "PERMITD_TEST_MYSQL_SOCKET=$2"
    echo "PERMITD_TEST_MYSQL_URL=mysql://permitd:permitd@127.0.0.1:$1/permitd"
    echo "PERMITD_TEST_MYSQL_ROOT_URL=mysql://root@localhost/permitd?socket=$2"
}

case "$cmd" in
start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    data="$dir/data"
    if [ -f "$dir/socket" ]; then
        sock=$(cat "$dir/socket")          # a restart keeps its socket path
    else
        sock="$dir/mariadb.sock"
        if [ ${#sock} -gt 100 ]; then      # sun_path holds 107 bytes
            sock=$(mktemp -u /tmp/permitd-mariadb-XXXXXX.sock)
        fi
    fi
    # Still running from an earlier start (say, a run.sh that was killed)
    # on the port asked for: use it rather than fail on its datadir lock.
    if running_pid >/dev/null && [ -f "$dir/port" ] &&
            { [ -z "${3:-}" ] || [ "$(cat "$dir/port")" = "$3" ]; } &&
            mariadb-admin --no-defaults --protocol=socket --socket="$sock" -uroot \
                --connect-timeout=1 ping >/dev/null 2>&1; then
        print_env "$(cat "$dir/port")" "$sock"
        exit 0
    fi
    # A temporary directory of its own: the bootstrap server's temporary
    # tables in the shared /tmp collided with another bootstrap's now and
    # then ("Error on delete of '/tmp/#sql-temptable-...'") when several
    # stacks started at once.
    mkdir -p "$dir/tmp"
    if [ ! -d "$data/mysql" ]; then
        installed=""
        for attempt in 1 2; do
            rm -rf "$data"
            if TMPDIR="$dir/tmp" mariadb-install-db --no-defaults --datadir="$data" \
                    --tmpdir="$dir/tmp" --skip-test-db \
                    --auth-root-authentication-method=normal --user=root \
                    --skip-name-resolve >"$dir/install.log" 2>&1 </dev/null; then
                installed=1
                break
            fi
        done
        if [ -z "$installed" ]; then
            echo "mariadb.sh: mariadb-install-db failed (see $dir/install.log)" >&2
            exit 1
        fi
    fi
    for attempt in 1 2 3 4 5 6 7 8 9 10; do
        port=${3:-$(( 20000 + RANDOM % 40000 ))}
        port_free "$port" || { [ -n "${3:-}" ] && break; continue; }
        rm -f "$dir/mariadb.pid" "$sock"
        TMPDIR="$dir/tmp" setsid mariadbd --no-defaults --user=root --datadir="$data" \
            --tmpdir="$dir/tmp" \
            --bind-address=127.0.0.1 --port="$port" --socket="$sock" \
            --pid-file="$dir/mariadb.pid" --log-error="$dir/mariadb.log" \
            --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
            --skip-name-resolve --skip-log-bin --innodb-buffer-pool-size=32M \
            --innodb-log-file-size=16M --innodb-flush-log-at-trx-commit=2 \
            --max-connections=500 ${PERMITD_MARIADB_ARGS:-} \
            </dev/null >>"$dir/mariadb.log" 2>&1 &
        pid=$!
        up=""
        for _ in $(seq 1 300); do
            kill -0 "$pid" 2>/dev/null || break
            if mariadb-admin --no-defaults --protocol=socket --socket="$sock" -uroot \
                    --connect-timeout=1 ping >/dev/null 2>&1; then
                up=1
                break
            fi
            sleep 0.05
        done
        if [ -n "$up" ]; then
            mariadb --no-defaults --protocol=socket --socket="$sock" -uroot <<'SQL'
CREATE DATABASE IF NOT EXISTS permitd CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS 'permitd'@'127.0.0.1' IDENTIFIED BY 'permitd';
CREATE USER IF NOT EXISTS 'permitd'@'localhost' IDENTIFIED BY 'permitd';
GRANT ALL PRIVILEGES ON permitd.* TO 'permitd'@'127.0.0.1';
GRANT ALL PRIVILEGES ON permitd.* TO 'permitd'@'localhost';
SQL
            echo "$port" > "$dir/port"
            echo "$sock" > "$dir/socket"
            print_env "$port" "$sock"
            exit 0
        fi
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        [ -n "${3:-}" ] && break
    done
    echo "mariadb.sh: could not start mariadbd in $dir (see $dir/mariadb.log)" >&2
    exit 1
    ;;
stop)
    [ -d "$dir" ] || exit 0
    dir=$(cd "$dir" && pwd)
    if pid=$(running_pid); then
        sock=$(cat "$dir/socket" 2>/dev/null || echo "$dir/mariadb.sock")
        mariadb-admin --no-defaults --protocol=socket --socket="$sock" -uroot \
            --connect-timeout=2 shutdown >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 200); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/port" "$dir/mariadb.pid"
    ;;
*)
    echo "usage: $0 start|stop DIR [PORT]" >&2
    exit 2
    ;;
esac
