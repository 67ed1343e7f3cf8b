#!/usr/bin/env python3
"""traffic_storage.py - the traffic history's storage and time at scale,
run by tests/bench/traffic-storage.sh (which starts MariaDB and migrates).

Writes BENCH_MINUTES minutes of traffic for BENCH_POLICIES policies x
BENCH_APPS apps into traffic_minutes, minute by minute, each minute once
per instance (BENCH_INSTANCES), with the exact statements
stores/trafficdb.c sends (multi-row INSERT ... ON DUPLICATE KEY UPDATE of
1,000 rows, one transaction a flush): the worst case, where every policy
has traffic every minute. Then measures:

  bytes     the table's .ibd file on disk and information_schema's
            data_length + index_length (after ANALYZE), per row, and per
            policy (x BENCH_APPS apps) per day: bytes per row x 1,440
  flush     one instance's flush of one minute at this size (all pairs,
            into the minutes and the hours, and the '*' row of their sum)
  reads     the SQL of GetTrafficTotals (1h, by policy, denied and
            denied_share) and GetTrafficSeries (one policy, 1h and 30d;
            the fleet, 24h), median of 5
  prune     deleting one minute of rows, as the writer does (10,000 a DELETE)
"""
import os
import platform
import random
import statistics
import subprocess
import time

POLICIES = int(os.environ.get("BENCH_POLICIES", "10000"))
APPS = int(os.environ.get("BENCH_APPS", "1"))
MINUTES = int(os.environ.get("BENCH_MINUTES", "120"))
INSTANCES = int(os.environ.get("BENCH_INSTANCES", "2"))
SOCKET = os.environ["PERMITD_TEST_MYSQL_SOCKET"]
DATADIR = os.environ["BENCH_DATADIR"]
RESULTS = os.environ["BENCH_RESULTS"]
ROWS_PER_INSERT = 1000


def client():
    return ["mariadb", "--no-defaults", "--batch", "--skip-column-names", "--protocol=socket",
            "--socket=" + SOCKET, "-uroot", "traffic_bench"]


def sql(text):
    p = subprocess.run(client(), input=text, capture_output=True, text=True, check=True)
    return p.stdout


def timed(text):
    t0 = time.monotonic()
    sql(text)
    return time.monotonic() - t0


def flush_sql(minute, rng):
    """One instance's flush of one minute: every pair's counts."""
    out = ["START TRANSACTION;"]
    rows = []
    for p in range(POLICIES):
        for a in range(APPS):
            allowed, denied = rng.randint(1, 5000), rng.randint(0, 500)
            rows.append("('policy-%05d', %d, 'app-%02d', %d, %d, 0, %d, 0)"
                        % (p, minute, a, allowed, denied, rng.randint(0, 2)))
    rows.append("('*', %d, '', %d, %d, 0, 0, 0)" % (minute, 1, 1))   # the sum of every policy
    for table, at in (("traffic_minutes (policy, minute_unix", minute),
                      ("traffic_hours (policy, hour_unix", minute - minute % 3600)):
        for i in range(0, len(rows), ROWS_PER_INSERT):
            chunk = [r.replace(", %d, " % minute, ", %d, " % at, 1) for r in rows[i:i + ROWS_PER_INSERT]]
            out.append("INSERT INTO " + table + ", app, allowed, denied, "
                       "shadow_denied, errors, passes) VALUES " + ", ".join(chunk)
                       + " ON DUPLICATE KEY UPDATE allowed = allowed + VALUES(allowed), "
                       "denied = denied + VALUES(denied), "
                       "shadow_denied = shadow_denied + VALUES(shadow_denied), "
                       "errors = errors + VALUES(errors), passes = passes + VALUES(passes);")
    out.append("COMMIT;")
    return "\n".join(out)


def median_time(text, n=5):
    return statistics.median(timed(text) for _ in range(n))


def main():
    rng = random.Random(39)
    now = int(time.time()) // 60 * 60
    first = now - MINUTES * 60
    flush_times = []
    t_all = time.monotonic()
    for m in range(MINUTES):
        for _ in range(INSTANCES):
            flush_times.append(timed(flush_sql(first + m * 60, rng)))
    write_s = time.monotonic() - t_all
    sql("ANALYZE TABLE traffic_minutes;")
    sql("ANALYZE TABLE traffic_hours;")
    rows = int(sql("SELECT COUNT(*) FROM traffic_minutes;").strip())
    hour_rows = int(sql("SELECT COUNT(*) FROM traffic_hours;").strip())
    data, index = (int(x) for x in sql(
        "SELECT data_length, index_length FROM information_schema.tables WHERE "
        "table_schema = 'traffic_bench' AND table_name = 'traffic_minutes';").split())
    ibd = os.path.getsize(os.path.join(DATADIR, "traffic_bench", "traffic_minutes.ibd"))
    ibd_h = os.path.getsize(os.path.join(DATADIR, "traffic_bench", "traffic_hours.ibd"))
    per_row_file = ibd / rows
    per_row_stats = (data + index) / rows
    # A day: 1,440 minute rows and 24 hour rows per pair. The hours table of
    # a short run is mostly its files' minimum size: its rows are costed as
    # the minutes' (the same columns and keys).
    per_policy_day = per_row_file * (1440 + 24) * APPS
    hour = "minute_unix >= %d AND minute_unix < %d" % (now - 3600, now + 60)
    hours2 = "hour_unix >= %d AND hour_unix < %d" % (now - now % 3600 - 3600, now - now % 3600 + 3600)
    sums = ", ".join("CAST(SUM(%s) AS UNSIGNED)" % c
                     for c in ("allowed", "denied", "shadow_denied", "errors", "passes"))
    reads = [
        ("GetTrafficTotals 1h (two hourly rows a policy) by policy, by denied, 20",
         "SELECT policy, ''%s FROM traffic_hours WHERE %s AND policy <> '*' GROUP BY policy "
         "HAVING SUM(allowed + denied + shadow_denied + errors + passes) > 0 ORDER BY "
         "SUM(denied) DESC, policy LIMIT 20;" % (", " + sums, hours2)),
        ("GetTrafficTotals 1h by policy, by denied_share, 20",
         "SELECT policy, ''%s FROM traffic_hours WHERE %s AND policy <> '*' GROUP BY policy "
         "ORDER BY SUM(denied) / GREATEST(SUM(allowed + denied), 1) DESC, SUM(denied) DESC, "
         "policy LIMIT 20;" % (", " + sums, hours2)),
        ("ListPolicies' fleet orders: every policy's 1h totals",
         "SELECT policy, ''%s FROM traffic_hours WHERE %s AND policy <> '*' GROUP BY policy "
         "ORDER BY SUM(allowed + denied) DESC, policy LIMIT 2147483647;" % (", " + sums, hours2)),
        ("the same from the minutes (the last 60), for comparison",
         "SELECT policy, ''%s FROM traffic_minutes WHERE %s GROUP BY policy ORDER BY "
         "SUM(denied) DESC, policy LIMIT 20;" % (", " + sums, hour)),
        ("GetTrafficSeries one policy, 1h (60 buckets)",
         "SELECT minute_unix - minute_unix %% 60 AS b, %s FROM traffic_minutes FORCE INDEX "
         "(ix_traffic_minutes_policy) WHERE %s AND policy = 'policy-04242' GROUP BY b;"
         % (sums, hour)),
        ("GetTrafficSeries one policy, 30d (360 buckets, hours)",
         "SELECT hour_unix - hour_unix %% 7200 AS b, %s FROM traffic_hours FORCE INDEX "
         "(ix_traffic_hours_policy) WHERE hour_unix >= %d AND policy = 'policy-04242' "
         "GROUP BY b;" % (sums, now - now % 7200 - 30 * 86400)),
        ("GetTrafficTrends 50 policies (the list's page), 1h in 12 buckets",
         "SELECT policy, minute_unix - minute_unix %% 300 AS b, CAST(SUM(allowed) AS UNSIGNED), "
         "CAST(SUM(denied) AS UNSIGNED) FROM traffic_minutes FORCE INDEX "
         "(ix_traffic_minutes_policy) WHERE policy IN (%s) AND %s GROUP BY policy, b;"
         % (", ".join("'policy-%05d'" % i for i in range(0, 5000, 100)), hour)),
        ("GetTrafficSeries the fleet, 24h (288 buckets, the '*' rows)",
         "SELECT minute_unix - minute_unix %% 300 AS b, %s FROM traffic_minutes FORCE INDEX "
         "(ix_traffic_minutes_policy) WHERE minute_unix >= %d AND policy = '*' GROUP BY b;"
         % (sums, now - 86400)),
    ]
    read_times = [(what, median_time(q)) for what, q in reads]
    prune_s = timed("DELETE FROM traffic_minutes WHERE minute_unix < %d LIMIT 10000;"
                    % (first + 60))
    lines = [
        "# Traffic history at scale (tests/bench/traffic-storage.sh)",
        "",
        "%s, %s, %d CPUs; MariaDB %s (innodb_buffer_pool_size 256M, "
        "innodb_flush_log_at_trx_commit 2, the test stack's)." % (
            time.strftime("%Y-%m-%d"), platform.platform(), os.cpu_count(),
            sql("SELECT VERSION();").strip()),
        "",
        "%d policies x %d app(s), %d minutes, each minute added by %d instances (every pair "
        "every minute: the worst case): %d rows." % (POLICIES, APPS, MINUTES, INSTANCES, rows),
        "",
        "| figure | value |",
        "|---|---|",
        "| traffic_hours: rows, .ibd bytes | %d, %d |" % (hour_rows, ibd_h),
        "| bytes on disk per row (.ibd file / rows) | %.0f |" % per_row_file,
        "| bytes per row (data_length + index_length) | %.0f |" % per_row_stats,
        "| **bytes per policy per day** (%d app(s), a row a minute and one an hour) | **%.0f (%.2f MB)** |" % (
            APPS, per_policy_day, per_policy_day / 1e6),
        "| 10,000 policies, 30 days (at that rate) | %.1f GB |" % (
            per_policy_day * 10000 * 30 / 1e9),
        "| one instance's flush of one minute (%d rows), median | %.2f s |" % (
            POLICIES * APPS, statistics.median(flush_times)),
        "| the same, slowest | %.2f s |" % max(flush_times),
        "| writing it all | %.0f s |" % write_s,
    ]
    for what, s in read_times:
        lines.append("| %s, median of 5 | %.3f s |" % (what, s))
    lines.append("| prune: one DELETE of 10,000 rows | %.2f s |" % prune_s)
    text = "\n".join(lines) + "\n"
    with open(RESULTS, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
