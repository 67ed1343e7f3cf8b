"""Stopping and losing MySQL (issue 6): SIGTERM stops accepting, finishes
the requests in flight and exits 0; with MySQL down, admin writes answer
unavailable with a clear message and leave nothing half-written, while
Acquire keeps working. Real permitd, Redis and MariaDB."""
import json
import os
import signal
import subprocess
import threading
import time
import unittest

import harness
from harness import (PERMITD_BIN, Http, Permitd, PrivateMariaDB, PrivateRedis, decision,
                     free_port, put_policy, stack_env, wait_for)


class SigtermTest(unittest.TestCase):
    def test_requests_in_flight_finish(self):
        redis = PrivateRedis()
        self.addCleanup(redis.stop)
        put_policy(redis.client(), "drain", max_permits=10, prefix="d:")
        p = Permitd(redis_url=redis.url, prefix="d:", args=["--redis-timeout-ms", "5000"])
        self.assertTrue(decision(p.http().acquire("drain"))["allowed"])
        os.kill(redis.pid(), signal.SIGSTOP)
        result = {}

        def slow():
            result["reply"] = Http(p.port).acquire("drain")

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.5)                      # the request is now waiting on Redis
        p.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        # No new connections once stopping.
        with self.assertRaises(OSError):
            Http(p.port).request("GET", "/healthz")
        os.kill(redis.pid(), signal.SIGCONT)
        t.join(10)
        self.assertTrue(decision(result["reply"])["allowed"], result)
        self.assertEqual(p.proc.wait(20), 0, p.output())
        self.assertIn("stopping: finishing requests in flight", p.output())


class MysqlDownTest(unittest.TestCase):
    def test_admin_writes_unavailable_acquire_unaffected(self):
        db = PrivateMariaDB()
        self.addCleanup(db.cleanup)
        env = dict(os.environ, PERMITD_MYSQL_URL=db.root_url)
        subprocess.run([PERMITD_BIN, "migrate", "up"], env=env, check=True, capture_output=True)
        subprocess.run([PERMITD_BIN, "admin", "add-user", "ed", "--role", "editor"],
                       input="editor-password\n", text=True, env=env, check=True,
                       capture_output=True)
        db.sql("INSERT INTO policies (name, max_permits, rate) VALUES ('kept', 1000, 100);"
               "INSERT INTO policy_apps (policy_id, app) SELECT id, 'app' FROM policies;",
               database="permitd")
        p = Permitd(prefix=harness.unique("md") + ":",
                    args=["--mysql-url", db.root_url, "--sync-interval-ms", "300",
                          "--mysql-timeout-ms", "1000"])
        self.addCleanup(p.stop)
        wait_for("policy", lambda: decision(p.http().acquire("kept"))["allowed"])
        origin = {"Origin": "http://127.0.0.1:%d" % p.admin_port,
                  "Content-Type": "application/json"}
        a = p.admin()
        r = a.request("POST", "/permit.v1.AdminAuthService/Login",
                      json.dumps({"username": "ed", "password": "editor-password"}).encode(), origin)
        self.assertEqual(r.status, 200, r)
        cookie = r.headers["set-cookie"].split(";")[0]
        headers = dict(origin, Cookie=cookie)
        create = json.dumps({"policy": {"name": "fresh", "apps": ["app"], "maxPermits": "5",
                                        "rate": "1", "enabled": True}}).encode()
        db.stop()
        r = a.request("POST", "/permit.v1.PolicyService/CreatePolicy", create, headers)
        self.assertEqual(r.status, 503, r)
        self.assertEqual(r.json()["code"], "unavailable")
        self.assertIn("mysql", r.json()["message"])
        self.assertNotIn("editor-password", r.json()["message"])
        for _ in range(20):                  # Acquire does not need MySQL
            self.assertTrue(decision(p.http().acquire("kept"))["allowed"])
        self.assertEqual(p.http().acquire("fresh").status, 404)   # nothing reached Redis
        db.start()
        r = wait_for("admin back", lambda: (lambda x: x if x.status == 200 else None)(
            a.request("POST", "/permit.v1.PolicyService/CreatePolicy", create, headers)), 20)
        self.assertEqual(r.json()["policy"]["version"], "1")     # created once, not twice
        self.assertTrue(decision(p.http().acquire("fresh"))["allowed"])


class StartFailureTest(unittest.TestCase):
    """A part that fails to start undoes the ones before it (main.c's
    serve_parts[], core/parts.c): the gRPC listener is the last to open,
    after the sync, app and gateway syncs, hot keys, follow and the other
    listeners have started, so with its port taken permitd must stop and
    free all of those and exit 1 naming the port: no hang, and in the
    sanitizer build no leak."""

    def test_last_part_failing_stops_the_rest(self):
        import socket
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        self.addCleanup(taken.close)
        port = taken.getsockname()[1]
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1")
        argv = [PERMITD_BIN, "--listen", "127.0.0.1:%d" % free_port(),
                "--admin-listen", "127.0.0.1:%d" % free_port(),
                "--redis-url", stack_env()["PERMITD_TEST_REDIS_URL"], "--redis-prefix", "sf:",
                "--mysql-url", stack_env()["PERMITD_TEST_MYSQL_ROOT_URL"],
                "--grpc-listen", "127.0.0.1:%d" % port]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("127.0.0.1:%d" % port, p.stderr)
        self.assertNotIn("LeakSanitizer", p.stderr)
        self.assertNotIn("permitd started", p.stderr)


if __name__ == "__main__":
    harness.main()
