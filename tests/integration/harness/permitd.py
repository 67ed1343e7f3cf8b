"""One permitd process for a test: started on free ports (API and admin)
against the stack's Redis unless told otherwise, waited for until /healthz
answers, stopped with a signal, its log kept in a file and printed when the
test fails."""
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

from .http import Http
from .cluster import redis_mode
from .stack import free_port, stack_env


def _binary():
    """The permitd binary to start: the package's PERMITD_BIN, read at each
    start, so a test can point every Permitd at another binary with
    mock.patch.object(harness, "PERMITD_BIN", ...) (test_docker.py does)."""
    return sys.modules[__package__].PERMITD_BIN


class Permitd:
    """One permitd process on a free port. Use as a context manager."""

    # Whether the harness chose the admin listener's port (and so waits for
    # it): set at start; a subclass that builds its own argv leaves it off.
    own_admin = False
    admin_port = None

    def __init__(self, redis_url=None, prefix="permitd:", args=(), env=None, port=None):
        self.port = port or free_port()
        self.redis_url = redis_url or stack_env()[
            "PERMITD_TEST_CLUSTER_URL" if redis_mode() == "cluster" else "PERMITD_TEST_REDIS_URL"]
        self.log = tempfile.NamedTemporaryFile(prefix="permitd-", suffix=".log", delete=False)
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        # Every permitd also opens its admin listener: give it a free port
        # unless the test chose one.
        self.admin_port = free_port()
        self.own_admin = "--admin-listen" not in args
        admin = ["--admin-listen", "127.0.0.1:%d" % self.admin_port] if self.own_admin else []
        # The production default (50 ms) is about latency; tests are about
        # behaviour on a shared, noisy machine, so they wait longer unless
        # they test the timeout itself.
        if "--redis-timeout-ms" not in args and "PERMITD_REDIS_TIMEOUT_MS" not in (env or {}):
            admin += ["--redis-timeout-ms", "1000"]
        # Issue 21: the API asks every caller for an app key by default.
        # The suites that are about something else (buckets, the wire,
        # faults; most keep their policies by hand, without the MySQL
        # where keys live) send none and say so: --app-auth off. The key
        # path is tested where it is the subject (test_apps.py), with
        # --app-auth keys given explicitly.
        if not any(a == "--app-auth" or str(a).startswith("--app-auth=") for a in args) \
                and "PERMITD_APP_AUTH" not in (env or {}):
            admin += ["--app-auth", "off"]
        self.argv = [_binary(), "--listen", "127.0.0.1:%d" % self.port,
                     "--redis-url", self.redis_url, "--redis-prefix", prefix] + admin + list(args)
        # A free port can be taken before permitd binds it (by another
        # test's process, or as a connection's source port: ctest runs tests
        # in parallel). Ports the harness chose are chosen again then.
        for attempt in range(3):
            self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=full_env)
            try:
                self.wait_healthy()
                return
            except RuntimeError:
                if attempt == 2 or port or self.proc.poll() is None or \
                        "Address already in use" not in self.output():
                    raise
            self.port = free_port()
            self.argv[self.argv.index("--listen") + 1] = "127.0.0.1:%d" % self.port
            if self.own_admin:
                self.admin_port = free_port()
                self.argv[self.argv.index("--admin-listen") + 1] = "127.0.0.1:%d" % self.admin_port

    def wait_healthy(self, timeout=15):
        """Returns once the API listener answers /healthz and the admin
        listener (when the harness chose its port) takes connections:
        permitd opens the admin listener after the API one, and a test's
        first admin request must not race it (harness.Http sends a request
        once: a refused connection is an error, not a reason to try again)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("permitd exited with %s:\n%s" % (self.proc.returncode, self.output()))
            if self._api_healthy() and (not self.own_admin or self._accepts(self.admin_port)):
                return
            time.sleep(0.05)
        raise RuntimeError("permitd did not become healthy (API port %s, admin port %s):\n%s"
                           % (self.port, self.admin_port, self.output()))

    def _api_healthy(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
            try:
                c.request("GET", "/healthz")
                return c.getresponse().status == 200
            finally:
                c.close()
        except OSError:
            return False

    @staticmethod
    def _accepts(port):
        """Whether a TCP connection to 127.0.0.1:port is accepted (whatever
        the listener speaks: plain HTTP or TLS)."""
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError("permitd did not stop on %s:\n%s" % (sig, self.output()))
        return self.proc.returncode

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def script_calls(self, *scripts):
        """The script calls (EVALSHA) this instance sent, of the scripts
        named ("bucket", "fixed_window", ...; none: every one), from its
        /metrics: its own, where Redis's INFO commandstats counts every
        client of a Redis that the tests ctest runs at once share."""
        c = self.admin()
        try:
            r = c.request("GET", "/metrics")
        finally:
            c.close()
        if r.status != 200:
            raise AssertionError("GET /metrics answered %d: %r" % (r.status, r.body[:200]))
        calls, seen = 0, False
        for m in re.finditer(r'^permitd_redis_script_calls_total\{script="([a-z_]+)"\} (\d+)$',
                             r.body.decode(), re.M):
            seen = True
            if not scripts or m.group(1) in scripts:
                calls += int(m.group(2))
        if not seen:
            raise AssertionError("no permitd_redis_script_calls_total in /metrics")
        return calls

    def http(self):
        return Http(self.port)

    def admin(self):
        return Http(self.admin_port)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        code = self.stop()
        if exc[0] is None and code != 0:
            raise RuntimeError("permitd exited with %d:\n%s" % (code, self.output()))
        if exc[0] is not None:
            sys.stderr.write("---- permitd log ----\n" + self.output() + "\n")
