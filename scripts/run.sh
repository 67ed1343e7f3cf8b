#!/usr/bin/env bash
# Runs permitd locally: installs what is missing, builds a release binary,
# starts a Redis and a MariaDB under .local/ (data kept between runs), runs
# `permitd migrate up`, adds an example policy if there is none, and serves
# until Ctrl-C, which stops everything it started.
#
# Redis, MariaDB's root and MariaDB's permitd user get random passwords,
# made on the first run and kept in .local/secrets/ (the directory 0700,
# each file 0600): any other user of this machine can reach 127.0.0.1.
#
# Environment (defaults in brackets):
#   PERMITD_LISTEN          API listener             [127.0.0.1:8080]
#   PERMITD_ADMIN_LISTEN    admin listener           [127.0.0.1:8081]
#   PERMITD_GRPC_LISTEN     gRPC listener            [127.0.0.1:8082]
#   PERMITD_RUN_REDIS_PORT  the local Redis's port   [6390]
#   PERMITD_RUN_MYSQL_PORT  the local MariaDB's port [3390]
#   PERMITD_RUN_DIR         where local data lives   [.local]
#   PERMITD_RUN_BIN         a permitd already built: no build  [build/release/server/permitd, built]
# Any other PERMITD_* setting (see `permitd --help`) is passed through.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/release
data=${PERMITD_RUN_DIR:-$root/.local}
redis_port=${PERMITD_RUN_REDIS_PORT:-6390}
mysql_port=${PERMITD_RUN_MYSQL_PORT:-3390}
export PERMITD_LISTEN=${PERMITD_LISTEN:-127.0.0.1:8080}
export PERMITD_ADMIN_LISTEN=${PERMITD_ADMIN_LISTEN:-127.0.0.1:8081}
export PERMITD_GRPC_LISTEN=${PERMITD_GRPC_LISTEN:-127.0.0.1:8082}
prefix=${PERMITD_REDIS_PREFIX:-permitd:}

# A secret of the run directory: random, made on first use and kept in
# $data/secrets/NAME (mode 0600, the directory 0700), the same on every run.
secret() {
    local dir=$data/secrets file
    file=$dir/$1
    (umask 077; mkdir -p "$dir")
    chmod 700 "$dir"
    if [ ! -s "$file" ]; then
        (umask 077; head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32 > "$file.new")
        mv "$file.new" "$file"
    fi
    chmod 600 "$file"
    cat "$file"
}

# A URL as it may be shown: the password replaced by ***, as permitd does
# in its logs (mysql://user:***@host:port/db). The user part ends at the
# last @ before the first /, as permitd parses it.
mask_url() {
    local url=$1 scheme rest auth user
    case $url in *://*) ;; *) printf '%s\n' "$url"; return ;; esac
    scheme=${url%%://*}
    rest=${url#*://}
    auth=${rest%%/*}
    case $auth in *@*) ;; *) printf '%s\n' "$url"; return ;; esac
    user=${auth%@*}
    case $user in *:*) user="${user%%:*}:***" ;; esac
    printf '%s://%s@%s%s\n' "$scheme" "$user" "${auth##*@}" "${rest#"$auth"}"
}

"$root/scripts/install-deps.sh" run

if [ -n "${PERMITD_RUN_BIN:-}" ]; then
    permitd=$PERMITD_RUN_BIN
    [ -x "$permitd" ] || { echo "run.sh: PERMITD_RUN_BIN=$permitd is not an executable" >&2; exit 1; }
else
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
    cmake --build "$build" -j "$(nproc)"
    permitd=$build/server/permitd
fi

mkdir -p "$data/redis"
chmod 700 "$data"
mysql_marker=$data/mariadb/run-sh-passwords
if [ -f "$mysql_marker" ] && [ ! -s "$data/secrets/mariadb-root" ]; then
    echo "run.sh: $data/secrets/mariadb-root is gone but MariaDB's root has that password;" \
         "remove $data/mariadb to start MariaDB afresh" >&2
    exit 1
fi
redis_password=$(secret redis)
mysql_root_password=$(secret mariadb-root)
mysql_password=$(secret mariadb-permitd)
export PERMITD_MYSQL_URL=mysql://permitd:$mysql_password@127.0.0.1:$mysql_port/permitd
export PERMITD_REDIS_URL=redis://:$redis_password@127.0.0.1:$redis_port
# Passwords reach the clients by their environment, never their arguments
# (which every user sees in ps).
rcli() { REDISCLI_AUTH=$redis_password redis-cli -p "$redis_port" "$@"; }
# MariaDB's root has its password once run.sh has set it ($mysql_marker,
# in the server's directory: it goes with the data when that is removed).
root_pwd() { [ -f "$mysql_marker" ] && printf '%s' "$mysql_root_password" || true; }
redis_pid=""
permitd_pid=""
mariadb_started=""
stop() {
    trap - INT TERM EXIT
    [ -n "$permitd_pid" ] && kill -TERM "$permitd_pid" 2>/dev/null && wait "$permitd_pid" 2>/dev/null
    if [ -n "$redis_pid" ]; then
        rcli shutdown save >/dev/null 2>&1 || kill "$redis_pid" 2>/dev/null || true
    fi
    [ -n "$mariadb_started" ] && MYSQL_PWD=$(root_pwd) "$root/tests/stack/mariadb.sh" stop "$data/mariadb"
    echo "run.sh: stopped"
}
trap stop INT TERM EXIT

if redis-cli -p "$redis_port" ping >/dev/null 2>&1; then   # anything answering, even NOAUTH
    echo "run.sh: port $redis_port already answers PING; set PERMITD_RUN_REDIS_PORT to use another" >&2
    exit 1
fi
# The password goes in a config file of mode 0600, not on the command line.
(umask 077; printf 'requirepass %s\n' "$redis_password" > "$data/redis.conf")
redis-server "$data/redis.conf" --port "$redis_port" --bind 127.0.0.1 --dir "$data/redis" \
    --save 60 1 --appendonly yes --logfile "$data/redis/redis.log" \
    --daemonize no < /dev/null > /dev/null 2>&1 &
redis_pid=$!
for _ in $(seq 1 100); do
    rcli ping 2>/dev/null | grep -q PONG && break
    sleep 0.05
done
rcli ping 2>/dev/null | grep -q PONG || { echo "run.sh: redis did not start, see $data/redis/redis.log" >&2; exit 1; }

# MariaDB: the policy store. Same script as the tests' throw-away one, but
# the data directory stays between runs.
MYSQL_PWD=$(root_pwd) "$root/tests/stack/mariadb.sh" start "$data/mariadb" "$mysql_port" > "$data/mariadb.env" || {
    echo "run.sh: MariaDB did not start on port $mysql_port (see $data/mariadb/mariadb.log);" \
         "set PERMITD_RUN_MYSQL_PORT to use another" >&2
    exit 1
}
mariadb_started=1
mysql_sock=$(sed -n 's/^PERMITD_TEST_MYSQL_SOCKET=//p' "$data/mariadb.env")
sql() { MYSQL_PWD=$(root_pwd) mariadb --no-defaults --protocol=socket --socket="$mysql_sock" \
            -uroot --batch --skip-column-names permitd -e "$1"; }
# First run (or a fresh data directory): mariadb.sh made root without a
# password and permitd with "permitd"; both get theirs now. IF EXISTS: a
# root named by host name (root@$(hostname)) is not loaded at all under
# --skip-name-resolve, so no one can log in as it, and ALTER cannot find it.
# The client's own errors would show the statement, password and all.
if [ ! -f "$mysql_marker" ]; then
    {
        for host in $(sql "SELECT host FROM mysql.user WHERE user = 'root'"); do
            printf "ALTER USER IF EXISTS 'root'@'%s' IDENTIFIED BY '%s';\n" "$host" "$mysql_root_password"
        done
        for host in 127.0.0.1 localhost; do
            printf "ALTER USER 'permitd'@'%s' IDENTIFIED BY '%s';\n" "$host" "$mysql_password"
        done
    } | mariadb --no-defaults --protocol=socket --socket="$mysql_sock" -uroot >/dev/null 2>&1 || {
        echo "run.sh: could not set MariaDB's passwords (see $data/mariadb/mariadb.log)" >&2
        exit 1
    }
    touch "$mysql_marker"
    echo "run.sh: MariaDB's root and permitd users have passwords now (in $data/secrets/)"
fi

"$permitd" migrate up

# A first admin for the admin UI (it may add the other users there); its
# password is printed once.
admin_note=""
if [ "$(sql 'SELECT COUNT(*) FROM admin_users')" = 0 ]; then
    admin_password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=' | head -c 20)
    printf '%s\n' "$admin_password" | "$permitd" admin add-user admin --role admin
    admin_note="  admin UI login: admin / $admin_password   (shown once; add users on the UI's Users page, or with
                  printf 'PASSWORD\\n' | scripts/permitd-admin.sh admin add-user NAME --role viewer)"
fi

if [ "$(sql 'SELECT COUNT(*) FROM policies')" = 0 ]; then
    sql "INSERT INTO policies (name, max_permits, rate, colocate, description, created_by, updated_by)
         VALUES ('example', 10, 1, 1, 'added by scripts/run.sh', 'run.sh', 'run.sh');
         INSERT INTO policy_apps (policy_id, app) SELECT id, '*' FROM policies WHERE name = 'example';"
    echo "run.sh: added policy \"example\": 10 permits, 1 more per second, any app, colocate on"
fi

# A demo app and its API key (issue 21: every API call carries one). The
# key is shown once by permitd; run.sh keeps it in $data/demo.key (git-ignored,
# mode 600) to print the curl line on every run, and issues a new one when
# that file is gone or its key no longer works (revoked).
if [ "$(sql "SELECT COUNT(*) FROM apps WHERE name = 'demo'")" = 0 ]; then
    "$permitd" admin add-app demo --description "added by scripts/run.sh"
fi
demo_key=$(cat "$data/demo.key" 2>/dev/null || true)
if [ -z "$demo_key" ] || [ "$(sql "SELECT COUNT(*) FROM app_keys WHERE app = 'demo' AND revoked_at IS NULL
        AND (expires_at IS NULL OR expires_at > NOW()) AND prefix = '${demo_key:0:19}'")" = 0 ]; then
    demo_key=$("$permitd" admin issue-key demo 2>/dev/null)
    (umask 077; printf '%s\n' "$demo_key" > "$data/demo.key")
    echo "run.sh: issued API key ${demo_key:0:19} for app \"demo\" (kept in $data/demo.key)"
fi

"$permitd" &
permitd_pid=$!
for _ in $(seq 1 100); do
    curl -sf "http://$PERMITD_LISTEN/healthz" >/dev/null 2>&1 && break
    kill -0 "$permitd_pid" 2>/dev/null || { echo "run.sh: permitd exited" >&2; exit 1; }
    sleep 0.05
done

cat <<MSG

permitd is serving:
  API      http://$PERMITD_LISTEN  (Connect: /permit.v1.RateLimitService/Acquire, /Peek)
  gRPC     $PERMITD_GRPC_LISTEN  (h2c: permit.v1.RateLimitService, Envoy's ShouldRateLimit)
  admin UI http://$PERMITD_ADMIN_LISTEN/   (health: /readyz)
$admin_note
  Redis    $(mask_url "$PERMITD_REDIS_URL"), data in $data/redis
           (REDISCLI_AUTH=\$(cat $data/secrets/redis) redis-cli -p $redis_port)
  MariaDB  $(mask_url "$PERMITD_MYSQL_URL")
           (root: MYSQL_PWD=\$(cat $data/secrets/mariadb-root) mariadb --no-defaults -S $mysql_sock -uroot permitd)
  Passwords: $data/secrets/ (made on the first run, mode 600)

Acquire a permit as the app "demo" (its API key: $data/demo.key):
  curl -s -H 'Content-Type: application/json' \\
       -H 'Authorization: Bearer $demo_key' \\
       -d '{"bucket":"example","permits":1}' \\
       http://$PERMITD_LISTEN/permit.v1.RateLimitService/Acquire

The same over gRPC ($PERMITD_GRPC_LISTEN; buf from the e2e tests' packages, once: (cd tests/e2e && npm ci)):
  tests/e2e/node_modules/.bin/buf curl --schema proto --protocol grpc --http2-prior-knowledge \\
       -H 'Authorization: Bearer $demo_key' --data '{"bucket":"example"}' \\
       http://$PERMITD_GRPC_LISTEN/permit.v1.RateLimitService/Acquire

Apps and keys, users, migrations: the permitd command line against this stack
(its passwords read from $data/secrets/):
  scripts/permitd-admin.sh admin list-apps
  scripts/permitd-admin.sh admin issue-key demo

Policies live in MySQL; edit them with SQL and permitd picks the change up
within 5 s (PERMITD_SYNC_INTERVAL_MS).

Ctrl-C stops permitd, Redis and MariaDB.
MSG
wait "$permitd_pid"
