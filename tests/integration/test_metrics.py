"""/metrics on the admin listener (issue 6): Prometheus text with acquires
by policy and result, latency histogram, failure-mode passes, Redis errors
and reconnects, HTTP connections; label cardinality bounded (keys and
made-up policy names never become labels). Real permitd and Redis."""
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import unittest

import harness
from harness import (Permitd, PrivateRedis, Redis, decision, migrate_with_client, mysql,
                     put_policy, stack_env, unique, wait_for)
from harness.stack import SOURCE_DIR


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


def readme_families():
    """The metric families docs/operations.md's "Metrics" section names."""
    with open(os.path.join(SOURCE_DIR, "docs", "operations.md")) as f:
        text = f.read()
    section = text[text.index("\n### Metrics\n"):]
    section = section[:section.index("\n### ", 1)]
    return set(re.findall(r"\bpermitd_[a-z_]+[a-z]", section))


def promtool(text):
    """promtool check metrics on text: (exit status, what it said)."""
    tool = shutil.which("promtool")
    if tool is None:
        raise AssertionError("promtool not found: scripts/install-deps.sh test installs it "
                             "(Debian package prometheus)")
    p = subprocess.run([tool, "check", "metrics"], input=text.encode(), capture_output=True,
                       timeout=60)
    return p.returncode, (p.stdout + p.stderr).decode()


class ExpositionTest(unittest.TestCase):
    """The whole of /metrics, as Prometheus reads it: promtool finds no
    error nor lint in it, every family has one HELP and one TYPE and no
    sample twice, and every family docs/operations.md's "Metrics" names is there (with
    MySQL, a Redis Cluster and the gRPC listener, where all of them are),
    written from health.c's table."""

    @classmethod
    def setUpClass(cls):
        cls.db = unique("expo").replace("-", "_")
        mysql("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci" % cls.db)
        migrate_with_client(cls.db)
        mysql("INSERT INTO policies (name, max_permits, rate) VALUES ('example', 10, 1);"
              "INSERT INTO policy_apps (policy_id, app) SELECT id, 'app' FROM policies "
              "WHERE name = 'example'", database=cls.db)
        base, _, query = stack_env()["PERMITD_TEST_MYSQL_ROOT_URL"].partition("?")
        cls.mysql_url = base.rsplit("/", 1)[0] + "/" + cls.db + "?" + query

    @classmethod
    def tearDownClass(cls):
        mysql("DROP DATABASE IF EXISTS `%s`" % cls.db)

    def scrape(self, redis_url, args):
        p = Permitd(redis_url=redis_url, prefix=unique("expo") + ":", args=args)
        self.addCleanup(p.stop)
        c = p.http()
        self.addCleanup(c.close)
        if "--mysql-url" in args:
            wait_for("policy synced", lambda: c.peek("example").status == 200, timeout=60)
        for _ in range(3):
            c.acquire("example")
        r = p.admin().request("GET", "/metrics")
        self.assertEqual(r.status, 200)
        return r.body.decode()

    def check_well_formed(self, text):
        rc, said = promtool(text)
        self.assertEqual(rc, 0, "promtool check metrics: %s\n%s" % (said, text))
        helps = re.findall(r"^# HELP (\S+) ", text, re.M)
        types = re.findall(r"^# TYPE (\S+) ", text, re.M)
        self.assertEqual(sorted(helps), sorted(set(helps)), "a HELP twice")
        self.assertEqual(sorted(types), sorted(set(types)), "a TYPE twice")
        self.assertEqual(set(helps), set(types))
        series = [line.rsplit(" ", 1)[0] for line in text.splitlines()
                  if line and not line.startswith("#")]
        self.assertEqual(len(series), len(set(series)), "a sample twice")
        return set(types)

    def test_exposition_well_formed_and_every_documented_family_present(self):
        grpc = socket.socket()
        grpc.bind(("127.0.0.1", 0))
        port = grpc.getsockname()[1]
        grpc.close()
        text = self.scrape(stack_env()["PERMITD_TEST_CLUSTER_URL"],
                           ["--mysql-url", self.mysql_url, "--sync-interval-ms", "300",
                            "--grpc-listen", "127.0.0.1:%d" % port])
        families = self.check_well_formed(text)
        documented = readme_families()
        self.assertGreater(len(documented), 40)
        self.assertEqual(sorted(documented - families), [], "in docs/operations.md, not in /metrics")
        self.assertEqual(sorted(families - documented), [], "in /metrics, not in docs/operations.md")
        self.assertIn('permitd_redis_node_connects_total{node="', text)
        self.assertIn('permitd_grpc_connections{listener="grpc"}', text)

    def test_sync_last_success_is_a_unix_time_that_moves(self):
        # Issue 39: "sync stale" is alerted on as time() minus this.
        t0 = time.time()
        p = Permitd(redis_url=stack_env()["PERMITD_TEST_REDIS_URL"], prefix=unique("expo") + ":",
                    args=["--mysql-url", self.mysql_url, "--sync-interval-ms", "300"])
        self.addCleanup(p.stop)

        def last():
            return sample(p.admin().request("GET", "/metrics").body.decode(),
                          "permitd_sync_last_success_timestamp_seconds")
        first = wait_for("a sync pass", last)
        self.assertGreaterEqual(first, t0 - 1)
        self.assertLessEqual(first, time.time() + 1)
        wait_for("a later pass", lambda: last() > first)
        self.assertEqual(sample(p.admin().request("GET", "/metrics").body.decode(),
                                "permitd_redis_up"), 1)

    def test_exposition_well_formed_without_mysql(self):
        text = self.scrape(stack_env()["PERMITD_TEST_REDIS_URL"], [])
        families = self.check_well_formed(text)
        self.assertNotIn("permitd_sync_passes_total", families)
        self.assertNotIn("permitd_redis_redirects_total", families)
        self.assertIn("permitd_http_requests_timed_out_total", families)


class SlowBodyMetricsTest(unittest.TestCase):
    """A body that trickles past --request-timeout is cut off and counted
    (permitd_http_requests_timed_out_total); one shed to make room when
    the slots are full is counted under reason="shed_body"."""

    def setUp(self):
        self.name = unique("sb")
        self.r = Redis()
        put_policy(self.r, self.name, max_permits=1000, rate=1, prefix="sb:")
        self.socks = []
        self.stop = threading.Event()

    def tearDown(self):
        self.stop.set()
        for s in self.socks:
            s.close()
        self.r.close()

    def trickle(self, p, n):
        """n connections that send a head and then a byte of body a second."""
        head = (b"POST /permit.v1.RateLimitService/Acquire HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 60000\r\n\r\n{")
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", p.port), timeout=10)
            s.sendall(head)
            socks.append(s)
        self.socks += socks

        def drip():
            while not self.stop.wait(1.0):
                for s in socks:
                    try:
                        s.send(b" ")
                    except OSError:
                        pass
        threading.Thread(target=drip, daemon=True).start()
        return socks

    def counter(self, p, name, labels):
        r = p.admin().request("GET", "/metrics")
        return sample(r.body.decode(), name, labels) or 0

    def test_request_timeout_is_counted(self):
        p = Permitd(prefix="sb:", args=["--request-timeout", "2", "--connection-timeout", "60"])
        self.addCleanup(p.stop)
        api = {"listener": "api"}
        self.assertEqual(self.counter(p, "permitd_http_requests_timed_out_total", api), 0)
        self.trickle(p, 3)
        wait_for("3 trickling bodies cut off and counted",
                 lambda: self.counter(p, "permitd_http_requests_timed_out_total", api) >= 3,
                 timeout=90)
        self.assertEqual(self.counter(p, "permitd_http_requests_timed_out_total",
                                      {"listener": "admin"}), 0)

    def test_shed_body_is_counted(self):
        # One worker, 4 slots, a long request timeout: only shedding frees
        # a slot held by a trickling body.
        p = Permitd(prefix="sb:", args=["--threads", "1", "--max-connections", "4",
                                        "--request-timeout", "600", "--connection-timeout", "600"])
        self.addCleanup(p.stop)
        shed = {"listener": "api", "reason": "shed_body"}
        self.assertEqual(self.counter(p, "permitd_http_connections_closed_total", shed), 0)
        self.trickle(p, 4)

        def caller_gets_in():
            c = p.http()
            try:
                decision(c.acquire(self.name, app="app"))
            except OSError:             # waited in the backlog past the client's timeout
                return False
            finally:
                c.conn.close()
            return self.counter(p, "permitd_http_connections_closed_total", shed) >= 1
        wait_for("a trickling body shed for a caller, and counted", caller_gets_in, timeout=90)


if __name__ == "__main__":
    harness.main()
