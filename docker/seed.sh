#!/usr/bin/env bash
# The one-shot `seed` service of docker-compose.yml (the image's `seed`
# stage): after `permitd migrate up` and before permitd serves, it leaves
# the database in the state scripts/run.sh leaves it in, so the curl line at
# the top of docker-compose.yml answers and the admin UI has a login.
#
#   - a first admin UI admin, through `permitd admin add-user` (password on
#     standard input, hashed by permitd): PERMITD_ADMIN_PASSWORD when set
#     (applied on every run, so it stays the password); otherwise, only
#     when there is no admin user yet, a random one printed once here;
#   - the policy `example` (10 permits, 1 more per second, any app) when
#     there is no policy, with the same SQL as scripts/run.sh;
#   - the app `demo` and an API key for it when there is no such app, the
#     key printed once here (every API call carries one: issue 21).
# Running it again changes nothing else: `docker compose up` runs it each time.
#
# Environment:
#   PERMITD_MYSQL_URL       mysql://user:pass@host[:port]/db (required; as for permitd)
#   PERMITD_ADMIN_USER      the first admin's name              [admin]
#   PERMITD_ADMIN_PASSWORD  its password (at least 8 characters) [random, printed once]
set -euo pipefail

url=${PERMITD_MYSQL_URL:-}
admin=${PERMITD_ADMIN_USER:-admin}
password=${PERMITD_ADMIN_PASSWORD:-}

# user[:password]@host[:port]/database, user and password percent-decoded
# as permitd decodes them.
re='^mysql://([^:@/]*)(:([^@/]*))?@([^:@/?]+)(:([0-9]+))?/([^/?]+)$'
if [[ ! $url =~ $re ]]; then
    echo "seed: PERMITD_MYSQL_URL \"$url\" is not mysql://user:pass@host[:port]/db" >&2
    exit 2
fi
decode() { printf '%b' "${1//%/\\x}"; }
db_user=$(decode "${BASH_REMATCH[1]}")
db_pass=$(decode "${BASH_REMATCH[3]}")
db_host=${BASH_REMATCH[4]}
db_port=${BASH_REMATCH[6]:-3306}
db_name=$(decode "${BASH_REMATCH[7]}")

sql() {
    MYSQL_PWD=$db_pass mariadb --no-defaults --protocol=tcp -h "$db_host" -P "$db_port" \
        -u "$db_user" --batch --skip-column-names -D "$db_name" -e "$1"
}

if [ -n "$password" ]; then
    printf '%s\n' "$password" | permitd admin add-user "$admin" --role admin >/dev/null
    echo "seed: admin UI login: $admin / the password in PERMITD_ADMIN_PASSWORD"
elif [ "$(sql 'SELECT COUNT(*) FROM admin_users')" = 0 ]; then
    password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=' | head -c 20)
    printf '%s\n' "$password" | permitd admin add-user "$admin" --role admin >/dev/null
    echo "seed: admin UI login: $admin / $password   (shown once; PERMITD_ADMIN_PASSWORD" \
         "chooses it; more users: docker compose run --rm migrate admin add-user NAME --role viewer)"
else
    echo "seed: admin users exist, none added"
fi

if [ "$(sql 'SELECT COUNT(*) FROM policies')" = 0 ]; then
    sql "INSERT INTO policies (name, max_permits, rate, colocate, description, created_by, updated_by)
         VALUES ('example', 10, 1, 1, 'added by docker/seed.sh', 'seed', 'seed');
         INSERT INTO policy_apps (policy_id, app) SELECT id, '*' FROM policies WHERE name = 'example';"
    echo "seed: added policy \"example\": 10 permits, 1 more per second, any app, colocate on"
else
    echo "seed: policies exist, none added"
fi

if [ "$(sql "SELECT COUNT(*) FROM apps WHERE name = 'demo'")" = 0 ]; then
    permitd admin add-app demo --description "added by docker/seed.sh" >/dev/null
    key=$(permitd admin issue-key demo 2>/dev/null)
    echo "seed: API key of app demo: $key   (shown once; more: docker compose run --rm" \
         "migrate admin issue-key demo)"
    echo "seed: curl -s -H 'Content-Type: application/json' -H 'Authorization: Bearer $key'" \
         "-d '{\"bucket\":\"example\"}' http://127.0.0.1:8080/permit.v1.RateLimitService/Acquire"
else
    echo "seed: app demo exists, no key issued (permitd admin issue-key demo makes one)"
fi
