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
from harness import Permitd, PrivateRedis, Redis, decision, put_policy, unique


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


if __name__ == "__main__":
    harness.main()
