#!/usr/bin/env bash
# Runs the permitd command line (`permitd admin ...`, `permitd migrate ...`)
# against the stack scripts/run.sh serves: its release binary, its MariaDB
# and Redis, with the passwords run.sh keeps in .local/secrets/ (read from
# those files here, passed by the environment, never on a command line).
#
#   scripts/permitd-admin.sh admin list-apps
#   scripts/permitd-admin.sh admin issue-key demo
#   printf 'a long password\n' | scripts/permitd-admin.sh admin add-user alice --role viewer
#
# The same environment as run.sh moves it: PERMITD_RUN_DIR [.local],
# PERMITD_RUN_MYSQL_PORT [3390], PERMITD_RUN_REDIS_PORT [6390], PERMITD_RUN_BIN.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
data=${PERMITD_RUN_DIR:-$root/.local}
bin=${PERMITD_RUN_BIN:-$root/build/release/server/permitd}
for f in "$bin" "$data/secrets/mariadb-permitd" "$data/secrets/redis"; do
    [ -e "$f" ] || { echo "permitd-admin.sh: $f is missing: run scripts/run.sh first" >&2; exit 1; }
done
export PERMITD_MYSQL_URL=mysql://permitd:$(cat "$data/secrets/mariadb-permitd")@127.0.0.1:${PERMITD_RUN_MYSQL_PORT:-3390}/permitd
export PERMITD_REDIS_URL=redis://:$(cat "$data/secrets/redis")@127.0.0.1:${PERMITD_RUN_REDIS_PORT:-6390}
exec "$bin" "$@"
