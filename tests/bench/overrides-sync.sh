#!/usr/bin/env bash
# overrides-sync.sh - what the override sync costs at scale (issue 37): N
# overrides (default 100,000) over P policies (10,000; per policy 6 exact
# keys, 3 prefixes, 1 app) inserted with one recursive INSERT ... SELECT into
# a fresh database of the test stack's MariaDB, then loaded by a permitd
# (BENCH_PERMITD, a Release build): its "overrides loaded" log line (rows,
# ms, bytes of table), its RSS against one with no overrides, the CPU of
# idle sync passes (1 s interval) and of a pass after one change (a whole
# reload). Not run by the tests: by hand, with the stack up
# (tests/stack/stack.sh up DIR; PERMITD_STACK_DIR=DIR).
set -euo pipefail
BIN=${BENCH_PERMITD:?set BENCH_PERMITD to a Release build's permitd}
STACK=${PERMITD_STACK_DIR:?set PERMITD_STACK_DIR to the stack's directory}
. "$STACK/env"
S=$STACK/mariadb/mariadb.sock
OUT=$(mktemp -d)
N=${N:-100000}; P=${P:-10000}
for db in ovscale0 ovscale1; do
  mysql -uroot -S $S -e "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
  PERMITD_MYSQL_URL="mysql://root@localhost/$db?socket=$S" $BIN migrate up >/dev/null
done
t0=$(date +%s.%N)
mysql -uroot -S $S ovscale1 -e "SET SESSION max_recursive_iterations = 1000000;
INSERT INTO policy_overrides (policy, match_kind, match_value, max_permits)
WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < $N - 1)
SELECT CONCAT('policy-', n DIV ($N DIV $P)),
       CASE WHEN n % 10 < 6 THEN 'key' WHEN n % 10 < 9 THEN 'prefix' ELSE 'app' END,
       CASE WHEN n % 10 < 6 THEN CONCAT('user-', n) WHEN n % 10 < 9 THEN CONCAT('tenant-', n, '-') ELSE CONCAT('app-', n) END,
       100 + n % 10 FROM seq"
echo "insert: $(echo "$(date +%s.%N) - $t0" | bc) s"
mysql -uroot -S $S ovscale1 -e "SELECT COUNT(*), COUNT(DISTINCT policy) FROM policy_overrides"
for db in ovscale0 ovscale1; do
  port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  aport=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  $BIN --listen 127.0.0.1:$port --admin-listen 127.0.0.1:$aport --redis-url $PERMITD_TEST_REDIS_URL --redis-prefix ovscale-$db: --app-auth off \
      --mysql-url "mysql://root@localhost/$db?socket=$S" --sync-interval-ms 1000 > $OUT/$db.log 2>&1 &
  pid=$!
  for i in $(seq 1 100); do curl -sf http://127.0.0.1:$port/healthz >/dev/null 2>&1 && break; sleep 0.2; done
  sleep 3
  echo "$db: rss_kb=$(awk '/VmRSS/{print $2}' /proc/$pid/status) $(grep -o 'overrides loaded.*' $OUT/$db.log | head -1)"
  # CPU of idle passes over 5 s (the fingerprint query only)
  c0=$(awk '{print $14+$15}' /proc/$pid/stat); sleep 5; c1=$(awk '{print $14+$15}' /proc/$pid/stat)
  echo "$db: cpu ticks over 5 s idle: $((c1 - c0))"
  if [ $db = ovscale1 ]; then
    mysql -uroot -S $S ovscale1 -e "UPDATE policy_overrides SET max_permits = 7 WHERE id = 1"
    c0=$(awk '{print $14+$15}' /proc/$pid/stat); sleep 3; c1=$(awk '{print $14+$15}' /proc/$pid/stat)
    echo "$db: cpu ticks over 3 s with one change (one whole reload): $((c1 - c0)); rss_kb=$(awk '/VmRSS/{print $2}' /proc/$pid/status)"
  fi
  kill $pid; wait $pid || true
done
