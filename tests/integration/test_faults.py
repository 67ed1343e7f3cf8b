"""Redis faults and failure_mode (issue 6): with Redis killed or hung,
every Acquire answers within its deadline, as its policy's failure_mode
says: "open" lets it through (and counts it), "closed" answers unavailable.
Real MariaDB (the policies) and a private Redis per test."""
import os
import re
import signal
import time
import unittest

import harness
from harness import (Permitd, PrivateRedis, decision, error_code, migrate_with_client, mysql,
                     stack_env, unique, wait_for)


class FailureModeTest(unittest.TestCase):
    def setUp(self):
        self.db = unique("flt").replace("-", "_")
        mysql("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci" % self.db)
        migrate_with_client(self.db)
        for name, mode in (("opened", "open"), ("closed", "closed")):
            mysql("INSERT INTO policies (name, max_permits, rate, failure_mode) "
                  "VALUES ('%s', 1000, 1000, '%s');"
                  "INSERT INTO policy_apps (policy_id, app) SELECT id, 'app' FROM policies "
                  "WHERE name = '%s'" % (name, mode, name), database=self.db)
        base, _, query = stack_env()["PERMITD_TEST_MYSQL_ROOT_URL"].partition("?")
        self.mysql_url = base.rsplit("/", 1)[0] + "/" + self.db + "?" + query
        self.redis = PrivateRedis()
        self.p = Permitd(redis_url=self.redis.url, prefix="f:",
                         args=["--mysql-url", self.mysql_url, "--sync-interval-ms", "300",
                               "--redis-timeout-ms", "100"])
        self.c = self.p.http()
        wait_for("policies in redis",
                 lambda: decision(self.c.acquire("opened"))["allowed"] and
                 decision(self.c.acquire("closed"))["allowed"])

    def tearDown(self):
        try:
            os.kill(self.redis.pid(), signal.SIGCONT)
        except (OSError, ValueError):
            pass
        self.c.close()
        self.p.stop()
        self.redis.stop()
        mysql("DROP DATABASE IF EXISTS `%s`" % self.db)

    def timed(self, fn):
        t = time.monotonic()
        r = fn()
        return r, time.monotonic() - t

    def check_modes(self, what):
        for _ in range(20):
            r, took = self.timed(lambda: self.c.acquire("opened"))
            d = decision(r)
            self.assertTrue(d["allowed"], "%s: open policy refused: %r" % (what, r))
            self.assertEqual(d["limit"], 1000)
            # 100 times the Redis timeout: a bound on a hung Acquire, not a
            # speed check (a loaded machine took over 2 s).
            self.assertLess(took, 10.0, "%s: an open Acquire hung" % what)
            r, took = self.timed(lambda: self.c.acquire("closed"))
            self.assertEqual(r.status, 503, "%s: %r" % (what, r))
            self.assertEqual(error_code(r), "unavailable")
            self.assertLess(took, 10.0, "%s: a closed Acquire hung" % what)
        # Peek takes nothing, so it never passes open: it reports the fault.
        self.assertIn(error_code(self.c.peek("opened")), ("unavailable", "deadline_exceeded"))

    def test_redis_killed(self):
        os.kill(self.redis.pid(), signal.SIGKILL)
        time.sleep(0.1)
        self.check_modes("killed")
        # Connect-Timeout-Ms shorter than the Redis timeout bounds the wait too.
        r = self.c.acquire("closed", headers={"Connect-Timeout-Ms": "30"})
        self.assertIn(error_code(r), ("unavailable", "deadline_exceeded"))
        # Recovery is automatic once Redis is back (it comes back empty: the
        # sync puts the policies back).
        self.redis.start()
        wait_for("recovery", lambda: decision(self.c.acquire("closed"))["allowed"], 15)

    def test_redis_hung(self):
        os.kill(self.redis.pid(), signal.SIGSTOP)
        self.check_modes("SIGSTOP")
        os.kill(self.redis.pid(), signal.SIGCONT)
        wait_for("recovery", lambda: decision(self.c.acquire("closed"))["allowed"], 15)

    def test_redis_turned_replica(self):
        # A failover that leaves permitd's address on the old primary, now
        # a replica (here of a primary that is not there): it answers
        # READONLY to every write. That is "Redis cannot serve now", so
        # Acquire and AcquireBatch items follow failure_mode; a Peek (it
        # writes nothing) is still answered.
        r = self.redis.client()
        r("REPLICAOF", "127.0.0.1", str(harness.free_port()))
        for _ in range(5):
            d = decision(self.c.acquire("opened"))
            self.assertTrue(d["allowed"], d)
            reply = self.c.acquire("closed")
            self.assertEqual((reply.status, error_code(reply)), (503, "unavailable"), reply)
            self.assertIn("read-only", reply.json()["message"], reply)
        self.assertEqual(decision(self.c.peek("opened"))["limit"], 1000)
        res = self.batch([{"bucket": "opened", "app": "app"}, {"bucket": "closed", "app": "app"}])
        self.assertTrue(res[0]["response"]["allowed"], res)
        self.assertEqual(res[1]["error"]["code"], "unavailable", res)
        self.assertIn("READONLY", self.p.output())
        r("REPLICAOF", "NO", "ONE")
        r.close()
        wait_for("recovery", lambda: decision(self.c.acquire("closed"))["allowed"], 15)

    def batch(self, items):
        import json
        r = self.c.request("POST", "/permit.v1.RateLimitService/AcquireBatch",
                           json.dumps({"requests": items}).encode(),
                           {"Content-Type": "application/json"})
        self.assertEqual(r.status, 200, r)
        return r.json()["results"]

    def test_batch_items_follow_their_policy(self):
        os.kill(self.redis.pid(), signal.SIGKILL)
        res = self.batch([{"bucket": "opened", "app": "app"}, {"bucket": "closed", "app": "app"}])
        self.assertTrue(res[0]["response"]["allowed"])
        self.assertEqual(res[1]["error"]["code"], "unavailable")
        self.redis.start()


class HandKeptFailureModeTest(unittest.TestCase):
    """Policies kept by hand (no MySQL: hashes an operator wrote) follow the
    failure_mode their hash says, from the instance's in-memory copy, once
    Redis is gone; a name the instance never saw answers unavailable."""

    def setUp(self):
        self.redis = PrivateRedis()
        r = self.redis.client()
        harness.put_policy(r, "handopen", max_permits=7, prefix="h:", failure_mode="open")
        harness.put_policy(r, "handclosed", max_permits=7, prefix="h:", failure_mode="closed")
        r.close()
        self.p = Permitd(redis_url=self.redis.url, prefix="h:", args=["--redis-timeout-ms", "100"])
        self.c = self.p.http()
        wait_for("policies read", lambda: decision(self.c.acquire("handopen"))["allowed"] and
                 decision(self.c.acquire("handclosed"))["allowed"])

    def tearDown(self):
        self.c.close()
        self.p.stop()
        self.redis.stop()

    def open_passes(self):
        body = self.p.admin().request("GET", "/metrics").body.decode()
        return int(re.search(r"^permitd_failure_mode_open_passes_total (\d+)$", body,
                             re.M).group(1))

    def test_redis_killed(self):
        before = self.open_passes()
        os.kill(self.redis.pid(), signal.SIGKILL)
        for _ in range(5):
            d = decision(self.c.acquire("handopen"))
            self.assertTrue(d["allowed"], d)
            self.assertEqual(d["limit"], 7)
            r = self.c.acquire("handclosed")
            self.assertEqual((r.status, error_code(r)), (503, "unavailable"), r)
        self.assertEqual(self.open_passes(), before + 5)
        r = self.c.acquire("neverseen")
        self.assertEqual((r.status, error_code(r)), (503, "unavailable"), r)
        self.redis.start()
        wait_for("recovery", lambda: decision(self.c.acquire("handclosed"))["allowed"], 15)

    def metric(self, name, policy=None):
        body = self.p.admin().request("GET", "/metrics").body.decode()
        m = re.search(r"^%s%s (\S+)$" % (name, '\\{policy="%s"\\}' % policy if policy else ""),
                      body, re.M)
        self.assertIsNotNone(m, (name, policy, body))
        return float(m.group(1))

    def test_metrics_name_the_policy_let_through_and_redis_down(self):
        # Issue 39: the alerts say which policy failure_mode open let
        # through, and that Redis is down (a PING at each scrape).
        name = "permitd_failure_mode_open_passes_by_policy_total"
        self.assertEqual(self.metric("permitd_redis_up"), 1)
        self.assertEqual((self.metric(name, "handopen"), self.metric(name, "handclosed")), (0, 0))
        os.kill(self.redis.pid(), signal.SIGKILL)
        for _ in range(4):
            self.assertTrue(decision(self.c.acquire("handopen"))["allowed"])
            self.assertEqual(self.c.acquire("handclosed").status, 503)
        self.assertEqual((self.metric(name, "handopen"), self.metric(name, "handclosed")), (4, 0))
        self.assertEqual(self.metric("permitd_redis_up"), 0)
        self.redis.start()
        wait_for("redis up again", lambda: self.metric("permitd_redis_up") == 1)


if __name__ == "__main__":
    harness.main()
