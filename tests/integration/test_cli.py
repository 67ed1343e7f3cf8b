#!/usr/bin/env python3
"""permitd's command line: --help, --version, every setting by flag and by
environment variable, start-up refused on a bad value (exit 2, a message
naming the setting and the value), Redis over a unix socket."""
import glob
import os
import re
import subprocess
import sys
import tempfile
import unittest
import http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (PERMITD_BIN, Permitd, Redis, free_port, put_policy, stack_env,  # noqa: E402
                     state_key, unique)

# Every setting: (flag, environment variable).
SETTINGS = [
    ("--listen", "PERMITD_LISTEN"),
    ("--app-auth", "PERMITD_APP_AUTH"),
    ("--trusted-proxies", "PERMITD_TRUSTED_PROXIES"),
    ("--redis-url", "PERMITD_REDIS_URL"),
    ("--threads", "PERMITD_THREADS"),
    ("--redis-prefix", "PERMITD_REDIS_PREFIX"),
    ("--redis-timeout-ms", "PERMITD_REDIS_TIMEOUT_MS"),
    ("--max-body-bytes", "PERMITD_MAX_BODY_BYTES"),
    ("--log-level", "PERMITD_LOG_LEVEL"),
    ("--max-connections", "PERMITD_MAX_CONNECTIONS"),
    ("--connection-timeout", "PERMITD_CONNECTION_TIMEOUT"),
    ("--mysql-url", "PERMITD_MYSQL_URL"),
    ("--mysql-timeout-ms", "PERMITD_MYSQL_TIMEOUT_MS"),
    ("--sync-interval-ms", "PERMITD_SYNC_INTERVAL_MS"),
    ("--index-prune-ms", "PERMITD_INDEX_PRUNE_MS"),
    ("--admin-listen", "PERMITD_ADMIN_LISTEN"),
    ("--admin-ui-dir", "PERMITD_ADMIN_UI_DIR"),
    ("--max-connections-per-ip", "PERMITD_MAX_CONNECTIONS_PER_IP"),
    ("--max-header-bytes", "PERMITD_MAX_HEADER_BYTES"),
    ("--access-log", "PERMITD_ACCESS_LOG"),
    ("--tls-cert", "PERMITD_TLS_CERT"),
    ("--tls-key", "PERMITD_TLS_KEY"),
    ("--tls-priorities", "PERMITD_TLS_PRIORITIES"),
    ("--header-timeout", "PERMITD_HEADER_TIMEOUT"),
    ("--request-timeout", "PERMITD_REQUEST_TIMEOUT"),
    ("--first-byte-timeout", "PERMITD_FIRST_BYTE_TIMEOUT"),
    ("--login-workers", "PERMITD_LOGIN_WORKERS"),
    ("--login-queue", "PERMITD_LOGIN_QUEUE"),
    ("--login-account-tries", "PERMITD_LOGIN_ACCOUNT_TRIES"),
    ("--admin-hosts", "PERMITD_ADMIN_HOSTS"),
    ("--core-dumps", "PERMITD_CORE_DUMPS"),
    ("--request-id-ttl", "PERMITD_REQUEST_ID_TTL"),
    ("--stats-policies", "PERMITD_STATS_POLICIES"),
    ("--fleet-publish-ms", "PERMITD_FLEET_PUBLISH_MS"),
    ("--fleet-heartbeat-ttl", "PERMITD_FLEET_HEARTBEAT_TTL"),
    ("--deny-cache", "PERMITD_DENY_CACHE"),
    ("--grpc-listen", "PERMITD_GRPC_LISTEN"),
    ("--grpc-max-streams", "PERMITD_GRPC_MAX_STREAMS"),
    ("--grpc-request-timeout", "PERMITD_GRPC_REQUEST_TIMEOUT"),
    ("--grpc-tls-cert", "PERMITD_GRPC_TLS_CERT"),
    ("--grpc-tls-key", "PERMITD_GRPC_TLS_KEY"),
    ("--hotkeys-publish-ms", "PERMITD_HOTKEYS_PUBLISH_MS"),
    ("--reserve-sweep-ms", "PERMITD_RESERVE_SWEEP_MS"),
    ("--reserve-workers", "PERMITD_RESERVE_WORKERS"),
    ("--reserve-queue", "PERMITD_RESERVE_QUEUE"),
    ("--local-leases", "PERMITD_LOCAL_LEASES"),
    ("--local-lease-ms", "PERMITD_LOCAL_LEASE_MS"),
    ("--local-lease-permits", "PERMITD_LOCAL_LEASE_PERMITS"),
    ("--local-lease-auto-rate", "PERMITD_LOCAL_LEASE_AUTO_RATE"),
    ("--traffic-history-days", "PERMITD_TRAFFIC_HISTORY_DAYS"),
    ("--traffic-flush-ms", "PERMITD_TRAFFIC_FLUSH_MS"),
    ("--traffic-pairs", "PERMITD_TRAFFIC_PAIRS"),
    ("--redis-tls-ca-file", "PERMITD_REDIS_TLS_CA_FILE"),
    ("--redis-tls-cert-file", "PERMITD_REDIS_TLS_CERT_FILE"),
    ("--redis-tls-key-file", "PERMITD_REDIS_TLS_KEY_FILE"),
    ("--redis-tls-server-name", "PERMITD_REDIS_TLS_SERVER_NAME"),
    ("--redis-sentinel-user", "PERMITD_REDIS_SENTINEL_USER"),
    ("--redis-sentinel-password", "PERMITD_REDIS_SENTINEL_PASSWORD"),
    ("--redis-tls-insecure-skip-verify", "PERMITD_REDIS_TLS_INSECURE_SKIP_VERIFY"),
]


def clean_env(extra=None):
    """The test's environment without any PERMITD_* setting, plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERMITD_")}
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    # These tests keep their policies by hand (no MySQL, where app keys
    # live): the API trusts the app named (issue 21; test_apps.py tests keys).
    env["PERMITD_APP_AUTH"] = "off"
    env.update(extra or {})
    return env


def run(args, env=None, timeout=15):
    """Runs permitd to completion; a permitd that starts serving instead is
    killed and reported as such."""
    try:
        return subprocess.run([PERMITD_BIN] + list(args), env=clean_env(env), timeout=timeout,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("permitd %r (env %r) did not exit within %d s: it started "
                             "instead of refusing" % (args, env, timeout)) from e


class BarePermitd(Permitd):
    """A permitd with exactly the given argv and environment (Permitd always
    passes --listen and --redis-url itself); `port` is where to wait for
    /healthz."""

    def __init__(self, port, args=(), env=None):
        self.port = port
        # The admin listener on a free port unless the test names one: its
        # default (8081) may be held by anything else on the machine.
        if "--admin-listen" not in args and "PERMITD_ADMIN_LISTEN" not in (env or {}):
            env = dict(env or {}, PERMITD_ADMIN_LISTEN="127.0.0.1:%d" % free_port())
        self.log = tempfile.NamedTemporaryFile(prefix="permitd-", suffix=".log", delete=False)
        self.argv = [PERMITD_BIN] + list(args)
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=clean_env(env))
        self.wait_healthy()


def refused(port):
    """True when nothing accepts connections on 127.0.0.1:port."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", "/healthz")
        c.getresponse().read()
        c.close()
        return False
    except ConnectionRefusedError:
        return True


def mentions(text, value):
    """value occurs in text, not as part of a longer word or number."""
    return re.search(r"(?<![A-Za-z0-9])%s(?![A-Za-z0-9])" % re.escape(value), text) is not None


class HelpTest(unittest.TestCase):

    def test_help_lists_every_flag_with_its_env_var(self):
        for arg in ("--help", "-h"):
            with self.subTest(arg=arg):
                p = run([arg])
                self.assertEqual(p.returncode, 0, p.stderr)
                out = p.stdout
                lines = out.splitlines()
                # The entry of each flag: its line up to the next flag's line.
                starts = [i for i, l in enumerate(lines) if re.match(r"\s*--?[a-z]", l)]
                for flag, env in SETTINGS:
                    idx = [i for i in starts if re.match(r"\s*%s\b" % re.escape(flag),
                                                         lines[i])]
                    self.assertTrue(idx, "%s is not listed in --help:\n%s" % (flag, out))
                    nxt = [i for i in starts if i > idx[0]]
                    entry = "\n".join(lines[idx[0]:nxt[0] if nxt else len(lines)])
                    self.assertIn(env, entry, "the entry of %s does not name %s:\n%s"
                                  % (flag, env, out))
                # And no flag is listed without its variable.
                for i in starts:
                    m = re.match(r"\s*(--[a-z][a-z-]*)", lines[i])
                    if m and m.group(1) not in ("--help", "--version"):
                        self.assertIn(m.group(1), [f for f, _ in SETTINGS],
                                      "%s is listed in --help but not tested here" % m.group(1))
                self.assertIn("--version", out)

    def test_every_subcommand_answers_help(self):
        # The subcommands and their verbs, read from the code that dispatches
        # them, so a new one is covered without editing this test.
        def src(name):
            # server/<layer>/<name>, wherever its layer is
            paths = glob.glob(os.path.join(harness.SOURCE_DIR, "server", "**", name),
                              recursive=True)
            self.assertEqual(len(paths), 1, "server/**/%s: %s" % (name, paths))
            with open(paths[0]) as f:
                return f.read()
        subs = sorted(set(re.findall(r'strcmp\(argv\[1\], "([a-z][a-z-]*)"\)', src("main.c"))))
        self.assertEqual(subs, ["admin", "migrate"])
        verbs = {
            "admin": sorted(set(re.findall(r'strcmp\(argv\[1\], "([a-z][a-z-]*)"\)',
                                           src("cli_admin.c")))),
            "migrate": sorted(set(re.findall(r'strcmp\(verb, "([a-z][a-z-]*)"\)',
                                             src("cli_migrate.c")))),
        }
        self.assertIn("add-user", verbs["admin"])
        self.assertEqual(set(verbs["migrate"]) >= {"up", "down", "status", "validate", "force",
                                                   "new"}, True, verbs["migrate"])
        cases = []
        for sub in subs:
            cases.append([sub])
            for verb in verbs[sub]:
                cases.append([sub, verb])
        # Help wins wherever it comes, after other arguments too.
        cases += [["admin", "add-user", "alice"], ["admin", "add-user", "alice", "--role", "editor"],
                  ["migrate", "down", "1"], ["migrate", "force", "3"]]
        for argv in cases:
            for flag in ("--help", "-h"):
                with self.subTest(argv=argv + [flag]):
                    # No database is configured: help must not need one.
                    p = run(argv + [flag])
                    self.assertEqual(p.returncode, 0, "stdout:\n%s\nstderr:\n%s" % (p.stdout, p.stderr))
                    self.assertRegex(p.stdout, r"(?i)usage: permitd %s\b" % argv[0], p.stdout)
                    if len(argv) > 1:
                        self.assertIn(argv[1], p.stdout, "the usage does not mention %s" % argv[1])
                    self.assertEqual(p.stderr, "")

    def test_version(self):
        p = run(["--version"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"permitd\b.*\d+\.\d+")


class BadValueTest(unittest.TestCase):
    """Start-up stops with exit status 2 and a message that names the
    setting (as the operator gave it: flag or variable) and the value."""

    CASES = [
        # (args, env, setting as given, bad value as it must appear)
        ([], {"PERMITD_THREADS": "abc"}, "PERMITD_THREADS", "abc"),
        (["--threads", "0"], {}, "--threads", "0"),
        (["--threads=2x"], {}, "--threads", "2x"),
        (["--threads", "100000"], {}, "--threads", "100000"),
        (["--listen", "nonsense"], {}, "--listen", "nonsense"),
        ([], {"PERMITD_LISTEN": "nonsense"}, "PERMITD_LISTEN", "nonsense"),
        (["--listen", "127.0.0.1:70000"], {}, "--listen", "127.0.0.1:70000"),
        (["--redis-url", "http://x"], {}, "--redis-url", "http://x"),
        (["--admin-hosts", "admin.example.com,evil example"], {}, "--admin-hosts",
         "evil example"),
        ([], {"PERMITD_REDIS_URL": "http://x"}, "PERMITD_REDIS_URL", "http://x"),
        (["--redis-url", "redis://h:99999"], {}, "--redis-url", "99999"),
        (["--redis-url", "unix://relative.sock"], {}, "--redis-url", "unix://relative.sock"),
        (["--log-level", "loud"], {}, "--log-level", "loud"),
        ([], {"PERMITD_LOG_LEVEL": "loud"}, "PERMITD_LOG_LEVEL", "loud"),
        (["--max-body-bytes", "10"], {}, "--max-body-bytes", "10"),
        ([], {"PERMITD_MAX_BODY_BYTES": "10"}, "PERMITD_MAX_BODY_BYTES", "10"),
        (["--redis-timeout-ms", "0"], {}, "--redis-timeout-ms", "0"),
        (["--redis-prefix", "app{x}:"], {}, "--redis-prefix", "app{x}:"),
        ([], {"PERMITD_REDIS_PREFIX": "app{x}:"}, "PERMITD_REDIS_PREFIX", "app{x}:"),
        (["--mysql-url", "postgres://u:p@h/db"], {}, "--mysql-url", "postgres://"),
        ([], {"PERMITD_MYSQL_URL": "mysql://u:p@h"}, "PERMITD_MYSQL_URL", "database"),
        (["--mysql-url", "mysql://u:p@h:99999/db"], {}, "--mysql-url", "99999"),
        (["--mysql-timeout-ms", "10"], {}, "--mysql-timeout-ms", "10"),
        (["--sync-interval-ms", "0"], {}, "--sync-interval-ms", "0"),
        (["--index-prune-ms", "-1"], {}, "--index-prune-ms", "-1"),
        ([], {"PERMITD_INDEX_PRUNE_MS": "3600001"}, "PERMITD_INDEX_PRUNE_MS", "3600001"),
        (["--admin-listen", "nowhere"], {}, "--admin-listen", "nowhere"),
        ([], {"PERMITD_ADMIN_LISTEN": "h:x"}, "PERMITD_ADMIN_LISTEN", "h:x"),
        (["--max-header-bytes", "100"], {}, "--max-header-bytes", "100"),
        ([], {"PERMITD_ACCESS_LOG": "yes"}, "PERMITD_ACCESS_LOG", "yes"),
        (["--max-connections-per-ip", "-1"], {}, "--max-connections-per-ip", "-1"),
        (["--nope"], {}, "--nope", "--nope"),
        (["--nope=1"], {}, "--nope", "--nope"),
    ]

    def test_bad_values_stop_start_up(self):
        for args, env, setting, value in self.CASES:
            with self.subTest(args=args, env=env):
                port = free_port()
                argv = list(args)
                if "--listen" not in " ".join(args) and "PERMITD_LISTEN" not in env:
                    # Were the value accepted, permitd would serve here (and
                    # run() would report that it did not exit).
                    argv += ["--listen", "127.0.0.1:%d" % port]
                p = run(argv, env)
                self.assertEqual(p.returncode, 2, "exit status %d, stderr: %s"
                                 % (p.returncode, p.stderr))
                self.assertIn(setting, p.stderr)
                self.assertTrue(mentions(p.stderr, value),
                                "%r does not appear in: %s" % (value, p.stderr))
                self.assertLess(len(p.stderr.strip().splitlines()), 5, p.stderr)

    def test_passwords_never_echoed(self):
        for url in ("mysql://u:hunter2@h:99999/db", "mysql://u:hunter2@h/db?password=hunter2",
                    "mysql://u:hunter2@h", "redis://:hunter2@h:99999",
                    "redis://:qx7/zz9@h:99999", "redis://u:qx7/zz9@h:1/x",
                    "redis://u:qx7/zz9@:1"):
            with self.subTest(url=url):
                flag = "--mysql-url" if url.startswith("mysql") else "--redis-url"
                p = run([flag, url, "--listen", "127.0.0.1:%d" % free_port()])
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(flag, p.stderr)
                self.assertNotIn("hunter2", p.stderr + p.stdout)
                # A password holding '/': no part of it either.
                self.assertNotIn("qx7", p.stderr + p.stdout)
                self.assertNotIn("zz9", p.stderr + p.stdout)

    def test_port_taken_stops_start_up(self):
        # Workers listen with SO_REUSEPORT, which would let a second
        # permitd (or anything of the same user) silently share the port:
        # the port is checked free without it first.
        with Permitd(args=["--threads", "4"]) as first:
            for threads in ("1", "4"):
                with self.subTest(threads=threads):
                    p = run(["--listen", "127.0.0.1:%d" % first.port, "--threads", threads,
                             "--admin-listen", "127.0.0.1:%d" % free_port()])
                    self.assertNotEqual(p.returncode, 0, p.stderr)
                    self.assertIn("cannot listen on 127.0.0.1:%d" % first.port, p.stderr)
                    self.assertIn("Address already in use", p.stderr)

    def test_flag_missing_its_value(self):
        p = run(["--threads"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--threads", p.stderr)

    def test_stray_argument(self):
        p = run(["serve-now"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("serve-now", p.stderr)


class EnvTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()
        cls.url = stack_env()["PERMITD_TEST_REDIS_URL"]

    @classmethod
    def tearDownClass(cls):
        cls.redis.close()

    def test_settings_from_env(self):
        port = free_port()
        prefix = "clienv%d:" % os.getpid()
        name = unique("cli")
        put_policy(self.redis, name, max_permits=5, prefix=prefix)
        env = {"PERMITD_LISTEN": "127.0.0.1:%d" % port, "PERMITD_REDIS_URL": self.url,
               "PERMITD_REDIS_PREFIX": prefix, "PERMITD_THREADS": "3"}
        with BarePermitd(port, env=env) as p:
            h = p.http()
            self.assertEqual(h.request("GET", "/healthz").status, 200)
            r = h.acquire(name)
            self.assertEqual(r.status, 200, r)
            self.assertIs(r.json().get("allowed"), True, r)
            self.assertEqual(r.json().get("remaining"), "4", r)
            self.assertEqual(self.redis("EXISTS", state_key(name, prefix=prefix)), 1)
            h.close()
            self.assertRegex(p.output(), r"threads\W{0,3}3\b")

    def test_flag_overrides_env(self):
        env_port, flag_port = free_port(), free_port()
        while flag_port == env_port:
            flag_port = free_port()
        name = unique("cli")
        put_policy(self.redis, name, max_permits=5)
        env = {"PERMITD_LISTEN": "127.0.0.1:%d" % env_port,
               # Nothing listens there: only the flag's Redis can answer.
               "PERMITD_REDIS_URL": "redis://127.0.0.1:%d" % free_port(),
               "PERMITD_REDIS_PREFIX": "wrong-prefix:",
               "PERMITD_LOG_LEVEL": "error"}
        args = ["--listen", "127.0.0.1:%d" % flag_port, "--redis-url", self.url,
                "--redis-prefix", "permitd:", "--log-level", "warn"]
        with BarePermitd(flag_port, args=args, env=env) as p:
            self.assertTrue(refused(env_port), "permitd listens on the variable's port too")
            h = p.http()
            r = h.acquire(name)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json().get("remaining"), "4", r)
            h.close()

    def test_redis_over_unix_socket(self):
        sock = stack_env()["PERMITD_TEST_REDIS_SOCKET"]
        name = unique("unix")
        put_policy(self.redis, name, max_permits=5, rate=0.01)
        with Permitd(redis_url="unix://" + sock) as p:
            h = p.http()
            r = h.acquire(name)
            self.assertEqual(r.status, 200, r)
            self.assertIs(r.json().get("allowed"), True, r)
            self.assertEqual(r.json().get("remaining"), "4", r)
            r = h.acquire(name, permits=2)
            self.assertEqual(r.json().get("remaining"), "2", r)
            self.assertEqual(self.redis("EXISTS", state_key(name)), 1)
            h.close()

    def test_unix_socket_missing(self):
        name = unique("unix")
        put_policy(self.redis, name)
        missing = os.path.join(tempfile.mkdtemp(prefix="permitd-nosock-"), "redis.sock")
        with Permitd(redis_url="unix://" + missing) as p:
            h = p.http()
            r = h.acquire(name)
            self.assertEqual(r.status, 503, r)
            self.assertEqual(r.json().get("code"), "unavailable", r)
            self.assertIn(missing, r.json().get("message", ""), r)
            h.close()



class CoreDumpTest(unittest.TestCase):
    """permitd holds passwords and keys in memory: no core dump, and no
    process of its own user may read its memory, unless --core-dumps 1
    (issue 42). Seen from outside: /proc/PID/limits (the core size limit,
    soft and hard) and /proc/PID/environ, which another process of the same
    user may read only while permitd is dumpable. As root, permitd and the
    reader both run as nobody (root reads any process)."""

    NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]

    def setUp(self):
        # Start permitd with a core limit it could use (soft = hard), and
        # ASan leaving it alone (its default sets the soft limit to 0).
        import resource
        old = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (old[1], old[1]))
        self.addCleanup(resource.setrlimit, resource.RLIMIT_CORE, old)
        self.hard = old[1]
        self.root = os.geteuid() == 0
        if self.root:
            d = tempfile.mkdtemp()
            wrapper = os.path.join(d, "permitd-as-nobody")
            with open(wrapper, "w") as f:
                f.write("#!/bin/sh\nexec %s %s \"$@\"\n" % (" ".join(self.NOBODY),
                                                             harness.PERMITD_BIN))
            os.chmod(wrapper, 0o755)
            os.chmod(d, 0o755)
            self.addCleanup(lambda: (os.unlink(wrapper), os.rmdir(d)))
            old_bin = harness.PERMITD_BIN
            harness.PERMITD_BIN = wrapper
            self.addCleanup(setattr, harness, "PERMITD_BIN", old_bin)

    def start(self, *args):
        p = Permitd(prefix=unique("core") + ":", args=list(args),
                    env={"ASAN_OPTIONS": "detect_leaks=0:disable_coredump=0"})
        self.addCleanup(p.stop)
        return p

    def core_limit(self, pid):
        with open("/proc/%d/limits" % pid) as f:
            for line in f:
                if line.startswith("Max core file size"):
                    soft, hard = line.split()[4:6]
                    return soft, hard
        self.fail("no core size line in /proc/%d/limits" % pid)

    def memory_readable(self, pid):
        """Whether a process of permitd's own user may read its environ."""
        if self.root:
            r = subprocess.run(self.NOBODY + ["cat", "/proc/%d/environ" % pid],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            return r.returncode == 0
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                f.read()
            return True
        except PermissionError:
            return False

    def test_core_dumps_are_off_by_default(self):
        p = self.start()
        self.assertEqual(self.core_limit(p.proc.pid), ("0", "0"))
        self.assertFalse(self.memory_readable(p.proc.pid),
                         "a process of permitd's user reads its memory: it is dumpable")

    def test_core_dumps_1_leaves_them_as_started(self):
        p = self.start("--core-dumps", "1")
        want = "unlimited" if self.hard == -1 else str(self.hard)
        self.assertEqual(self.core_limit(p.proc.pid), (want, want))
        self.assertTrue(self.memory_readable(p.proc.pid))
        self.assertIn("core dumps on", p.output())


if __name__ == "__main__":
    harness.main()
