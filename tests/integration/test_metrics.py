"""/metrics on the admin listener (issue 6): Prometheus text with acquires
by policy and result, latency histogram, failure-mode passes, Redis errors
and reconnects, HTTP connections; label cardinality bounded (keys and
made-up policy names never become labels). Real permitd and Redis."""
import os
import re
import signal
import time
import unittest

import harness
from harness import (Permitd, PrivateRedis, Redis, decision, migrate_with_client, mysql,
                     put_policy, stack_env, unique, wait_for)


def sample(text, name, labels=None):
    """The value of one sample, or None."""
    want = name + ("{%s}" % ",".join('%s="%s"' % kv for kv in labels.items()) if labels else "")
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return None


class MetricsTest(unittest.TestCase):
    def setUp(self):
        self.redis = PrivateRedis()
        self.r = self.redis.client()
        self.name = unique("m")
        put_policy(self.r, self.name, max_permits=3, rate=0.001, prefix="m:")
        self.p = Permitd(redis_url=self.redis.url, prefix="m:")
        self.c = self.p.http()

    def tearDown(self):
        self.c.close()
        self.p.stop()
        self.r.close()
        self.redis.stop()

    def metrics(self):
        r = self.p.admin().request("GET", "/metrics")
        self.assertEqual(r.status, 200)
        self.assertTrue(r.headers["content-type"].startswith("text/plain; version=0.0.4"))
        return r.body.decode()

    def test_acquires_by_policy_and_result(self):
        for i in range(5):
            self.c.acquire(self.name, key="secret-key-%d" % i if i > 3 else "")
        self.c.acquire(self.name, app="intruder")
        for i in range(300):
            self.c.acquire("made-up-%d" % i)
        text = self.metrics()
        labels = {"policy": self.name, "result": "allowed"}
        self.assertEqual(sample(text, "permitd_acquires_total", labels), 4)   # 3 shared + 1 keyed
        self.assertEqual(sample(text, "permitd_acquires_total",
                                {"policy": self.name, "result": "denied"}), 1)
        self.assertEqual(sample(text, "permitd_acquires_total",
                                {"policy": self.name, "result": "permission_denied"}), 1)
        self.assertEqual(sample(text, "permitd_acquires_total",
                                {"policy": "", "result": "not_found"}), 300)
        self.assertNotIn("secret-key", text)
        self.assertNotIn("made-up-", text)
        self.assertEqual(sample(text, "permitd_acquire_duration_seconds_count"), 306)
        self.assertEqual(sample(text, "permitd_acquire_duration_seconds_bucket", {"le": "+Inf"}), 306)
        self.assertGreaterEqual(sample(text, "permitd_http_connections", {"listener": "api"}), 1)
        self.assertGreaterEqual(sample(text, "permitd_redis_connects_total"), 1)
        # Every sample line is NAME{labels} VALUE; every family has TYPE.
        for line in text.splitlines():
            if not line.startswith("#"):
                self.assertRegex(line, r'^[a-z_]+(\{[^}]*\})? -?[0-9.e+-]+$')
        for family in set(re.findall(r"^(permitd_[a-z_]+?)(?:_bucket|_sum|_count)?[{ ]", text, re.M)):
            self.assertRegex(text, r"# TYPE %s " % family)

    def test_redis_errors_are_counted(self):
        before = sample(self.metrics(), "permitd_redis_errors_total")
        os.kill(self.redis.pid(), signal.SIGKILL)
        for _ in range(3):
            self.assertEqual(self.c.acquire(self.name).status, 503)
        self.assertGreater(sample(self.metrics(), "permitd_redis_errors_total"), before)
        self.assertEqual(sample(self.metrics(), "permitd_acquires_total",
                                {"policy": self.name, "result": "unavailable"}), 3)
        self.redis.start()


    def test_errors_of_a_real_policy_are_counted_under_it(self):
        # A policy this instance has decided is real: its errors, those
        # checked before Redis is asked too (invalid_argument), are its own.
        self.assertTrue(decision(self.c.acquire(self.name))["allowed"])
        self.assertEqual(self.c.acquire(self.name, permits=-1).status, 400)
        r = self.c.rpc_json("AcquireBatch", {"requests": [
            {"bucket": self.name, "app": "app", "permits": -2}]})
        self.assertEqual(r.json()["results"][0]["error"]["code"], "invalid_argument", r)
        # A made-up or malformed name stays under policy="".
        self.assertEqual(self.c.acquire("made-up-neg", permits=-1).status, 400)
        self.assertEqual(self.c.acquire("bad name!", permits=-1).status, 400)
        text = self.metrics()
        self.assertEqual(sample(text, "permitd_acquires_total",
                                {"policy": self.name, "result": "invalid_argument"}), 2)
        self.assertEqual(sample(text, "permitd_acquires_total",
                                {"policy": "", "result": "invalid_argument"}), 2)
        self.assertNotIn("made-up-neg", text)
        self.assertNotIn("bad name", text)

    def test_a_policy_held_is_real_before_its_first_decision(self):
        # A policy kept by hand that this instance holds (a Peek read it:
        # Peeks are not counted) is as real as one from MySQL: the in-memory
        # table says so, before any decision of it.
        held = unique("held")
        put_policy(self.r, held, max_permits=3, rate=1, prefix="m:")
        self.assertEqual(self.c.peek(held).status, 200)
        self.assertEqual(self.c.acquire(held, permits=-1).status, 400)
        self.assertEqual(sample(self.metrics(), "permitd_acquires_total",
                                {"policy": held, "result": "invalid_argument"}), 1)


class MetricsMySQLTest(unittest.TestCase):
    """With MySQL, a policy is real from the start: the very first request
    to it, even one refused before Redis is asked, is counted under it."""

    def setUp(self):
        self.db = unique("met").replace("-", "_")
        mysql("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci" % self.db)
        migrate_with_client(self.db)
        mysql("INSERT INTO policies (name, max_permits, rate) VALUES ('example', 10, 1);"
              "INSERT INTO policy_apps (policy_id, app) SELECT id, 'app' FROM policies "
              "WHERE name = 'example'", database=self.db)
        base, _, query = stack_env()["PERMITD_TEST_MYSQL_ROOT_URL"].partition("?")
        url = base.rsplit("/", 1)[0] + "/" + self.db + "?" + query
        self.redis = PrivateRedis()
        self.p = Permitd(redis_url=self.redis.url, prefix="mm:",
                         args=["--mysql-url", url, "--sync-interval-ms", "300"])
        self.c = self.p.http()
        # A Peek is not counted: the policy is synced and nothing decided yet.
        wait_for("policy synced", lambda: self.c.peek("example").status == 200)

    def tearDown(self):
        self.c.close()
        self.p.stop()
        self.redis.stop()
        mysql("DROP DATABASE IF EXISTS `%s`" % self.db)

    def test_first_error_of_a_real_policy_is_its_own(self):
        self.assertEqual(self.c.acquire("example", permits=-1).status, 400)
        self.assertEqual(self.c.acquire("nonexistent", permits=-1).status, 400)
        self.assertEqual(self.c.acquire("nonexistent").status, 404)
        text = self.p.admin().request("GET", "/metrics").body.decode()
        self.assertEqual(sample(text, "permitd_acquires_total",
                                {"policy": "example", "result": "invalid_argument"}), 1, text)
        self.assertEqual(sample(text, "permitd_acquires_total",
                                {"policy": "", "result": "invalid_argument"}), 1, text)
        self.assertEqual(sample(text, "permitd_acquires_total",
                                {"policy": "", "result": "not_found"}), 1, text)
        self.assertNotIn("nonexistent", text)


if __name__ == "__main__":
    harness.main()
