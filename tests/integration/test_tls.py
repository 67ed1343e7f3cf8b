"""HTTPS on both listeners (issue 6), with a self-signed certificate made
here by openssl; the client verifies it. Real permitd and Redis.

Issue 17: only TLS 1.2 and 1.3 with forward-secret suites (tried with
`openssl s_client` offering one version or suite at a time), the
--tls-priorities override and its start-up check, HSTS on the admin
listener."""
import http.client
import json
import os
import re
import ssl
import subprocess
import tempfile
import unittest

import harness

# These tests are about TLS and keep their policies by hand (no MySQL,
# where app keys live): every permitd they start, which inherits this
# environment, trusts the app a request names (issue 21; test_apps.py tests
# the keys).
os.environ.setdefault("PERMITD_APP_AUTH", "off")
from harness import PERMITD_BIN, Permitd, Redis, free_port, put_policy, unique


def make_cert(directory):
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


def handshake(port, *args):
    """Offers exactly what args say (openssl s_client); returns (protocol,
    cipher) when the handshake completed, None when permitd refused it."""
    p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port] + list(args),
                       input="", capture_output=True, text=True, timeout=30)
    # "New, <version>, Cipher is <suite>" names the version that defined the
    # suite (SSLv3 for AES128-SHA); the session block, when there is one
    # (not for TLS 1.3, whose ticket comes later), names the one in use.
    new = re.search(r"^New, (\S+), Cipher is (\S+)", p.stdout, re.M)
    proto = re.search(r"^\s*Protocol\s*:\s*(\S+)", p.stdout, re.M)
    if p.returncode == 0 and new and new.group(2) != "(NONE)":
        return (proto.group(1) if proto else new.group(1)), new.group(2)
    if p.returncode == 0 or "Cipher is (NONE)" not in p.stdout:
        raise AssertionError("openssl s_client %r: neither a handshake nor a refusal:\n%s\n%s"
                             % (args, p.stdout, p.stderr))
    return None


# What permitd must refuse: TLS 1.0 and 1.1 (openssl 3 only offers them at
# security level 0), and TLS 1.2 suites whose key exchange is static RSA
# (no forward secrecy: the server's key decrypts every recorded session).
REFUSED = [
    ("-tls1", "-cipher", "DEFAULT@SECLEVEL=0"),
    ("-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"),
    ("-tls1_2", "-cipher", "AES128-SHA"),
    ("-tls1_2", "-cipher", "AES128-GCM-SHA256"),
    ("-tls1_2", "-cipher", "AES256-GCM-SHA384"),
]


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="permitd-tls-")
        cls.cert, cls.key = make_cert(cls.dir)
        cls.redis = Redis()
        cls.name = unique("tls")
        put_policy(cls.redis, cls.name, max_permits=5, prefix="tls:")
        cls.ctx = ssl.create_default_context(cafile=cls.cert)

    @classmethod
    def tearDownClass(cls):
        cls.redis.close()

    def start(self, *extra):
        # Permitd waits for /healthz over plain HTTP; over TLS it would never
        # answer, so start the process by hand and poll over HTTPS.
        port, admin = free_port(), free_port()
        log = tempfile.NamedTemporaryFile(prefix="permitd-tls-", suffix=".log", delete=False)
        argv = [PERMITD_BIN, "--listen", "127.0.0.1:%d" % port, "--admin-listen",
                "127.0.0.1:%d" % admin, "--redis-url", harness.stack_env()["PERMITD_TEST_REDIS_URL"],
                "--redis-prefix", "tls:", "--redis-timeout-ms", "1000"] + list(extra)
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.addCleanup(lambda: (proc.terminate(), proc.wait(20)))
        import time
        for _ in range(200):
            try:
                c = http.client.HTTPSConnection("127.0.0.1", port, context=self.ctx, timeout=2)
                c.request("GET", "/healthz")
                if c.getresponse().status == 200:
                    c.close()
                    return port, admin, proc
            except (OSError, ssl.SSLError):
                if proc.poll() is not None:
                    break
            time.sleep(0.05)
        with open(log.name) as f:
            self.fail("permitd did not serve HTTPS:\n" + f.read())

    def test_both_listeners_serve_https(self):
        port, admin, proc = self.start("--tls-cert", self.cert, "--tls-key", self.key)
        c = http.client.HTTPSConnection("127.0.0.1", port, context=self.ctx, timeout=10)
        c.request("POST", "/permit.v1.RateLimitService/Acquire",
                  json.dumps({"bucket": self.name, "app": "app"}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        body = json.loads(r.read())
        self.assertEqual(r.status, 200)
        self.assertTrue(body["allowed"])
        self.assertIn("ratelimit-policy", {k.lower() for k, _ in r.getheaders()})
        c.close()
        a = http.client.HTTPSConnection("127.0.0.1", admin, context=self.ctx, timeout=10)
        a.request("GET", "/healthz")
        self.assertEqual(a.getresponse().status, 200)
        a.close()
        # The certificate really is the one given (verification succeeded
        # above); a client that trusts nothing refuses it.
        strict = ssl.create_default_context()
        with self.assertRaises(ssl.SSLError):
            c = http.client.HTTPSConnection("127.0.0.1", port, context=strict, timeout=10)
            c.request("GET", "/healthz")
            c.getresponse()
        # Plain HTTP on the TLS port gets no HTTP answer.
        with self.assertRaises((http.client.HTTPException, OSError)):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/healthz")
            r = c.getresponse()
            if r.status == 200:
                raise AssertionError("plain HTTP answered on a TLS listener")
            raise http.client.HTTPException("refused as expected")

    def test_only_tls12_and_13_with_forward_secrecy(self):
        port, admin, proc = self.start("--tls-cert", self.cert, "--tls-key", self.key)
        for listener, p in (("api", port), ("admin", admin)):
            for args in REFUSED:
                with self.subTest(listener=listener, offer=args):
                    self.assertIsNone(handshake(p, *args), "permitd accepted %r" % (args,))
            with self.subTest(listener=listener, offer="TLS 1.2 ECDHE"):
                got = handshake(p, "-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256")
                self.assertEqual(got, ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256"))
            with self.subTest(listener=listener, offer="TLS 1.2, anything"):
                got = handshake(p, "-tls1_2")
                self.assertIsNotNone(got)
                self.assertTrue(got[1].startswith("ECDHE-"), got)
            with self.subTest(listener=listener, offer="TLS 1.3"):
                got = handshake(p, "-tls1_3")
                self.assertIsNotNone(got)
                self.assertEqual(got[0], "TLSv1.3")
        # Python's own client (TLS 1.2+) still gets in.
        c = http.client.HTTPSConnection("127.0.0.1", port, context=self.ctx, timeout=10)
        c.request("GET", "/healthz")
        self.assertEqual(c.getresponse().status, 200)
        c.close()

    def test_tls_priorities_override_the_default(self):
        # Someone who must serve a static-RSA client says so, by flag or by
        # environment variable.
        port, admin, proc = self.start("--tls-cert", self.cert, "--tls-key", self.key,
                                       "--tls-priorities", "NORMAL:-VERS-ALL:+VERS-TLS1.2:+RSA")
        self.assertEqual(handshake(port, "-tls1_2", "-cipher", "AES128-GCM-SHA256"),
                         ("TLSv1.2", "AES128-GCM-SHA256"))
        self.assertEqual(handshake(admin, "-tls1_2", "-cipher", "AES128-GCM-SHA256"),
                         ("TLSv1.2", "AES128-GCM-SHA256"))
        self.assertIsNone(handshake(port, "-tls1_3"), "TLS 1.3 was left out")

    def test_bad_tls_priorities_stop_start_up(self):
        for args, env, named, value in (
                (["--tls-priorities", "NORMAL:+NO-SUCH-THING"], {}, "--tls-priorities",
                 "+NO-SUCH-THING"),
                (["--tls-priorities", ""], {}, "--tls-priorities", '""'),
                ([], {"PERMITD_TLS_PRIORITIES": "SECURE128:-VERS-BOGUS"}, "PERMITD_TLS_PRIORITIES",
                 "-VERS-BOGUS")):
            for tls in ([], ["--tls-cert", self.cert, "--tls-key", self.key]):
                with self.subTest(args=args, env=env, tls=tls):
                    p = subprocess.run([PERMITD_BIN, "--listen", "127.0.0.1:%d" % free_port(),
                                        "--admin-listen", "127.0.0.1:%d" % free_port()] + args + tls,
                                       env=dict(os.environ, **env), capture_output=True, text=True,
                                       timeout=30)
                    self.assertEqual(p.returncode, 2, p.stderr)
                    self.assertIn(named, p.stderr)
                    self.assertIn(value, p.stderr)
                    self.assertIn("priority", p.stderr)

    def test_admin_listener_sends_hsts_under_tls(self):
        port, admin, proc = self.start("--tls-cert", self.cert, "--tls-key", self.key)
        a = http.client.HTTPSConnection("127.0.0.1", admin, context=self.ctx, timeout=10)
        for method, path, body, headers in (
                ("GET", "/", None, {}), ("GET", "/readyz", None, {}), ("GET", "/metrics", None, {}),
                ("POST", "/permit.v1.AdminAuthService/WhoAmI", "{}",
                 {"Content-Type": "application/json", "Origin": "https://127.0.0.1:%d" % admin}),
                ("GET", "/no/such/page", None, {})):
            with self.subTest(path=path):
                a.request(method, path, body, headers)
                r = a.getresponse()
                r.read()
                hsts = r.getheader("Strict-Transport-Security")
                self.assertIsNotNone(hsts, "%s %s: no Strict-Transport-Security" % (method, path))
                m = re.fullmatch(r"max-age=(\d+)", hsts)
                self.assertTrue(m, hsts)
                self.assertGreaterEqual(int(m.group(1)), 180 * 86400, hsts)
        a.close()
        # Never over plain HTTP, where a browser must ignore it anyway.
        with Permitd(prefix="tls:") as p:
            r = p.admin().request("GET", "/readyz")
            self.assertNotIn("strict-transport-security", r.headers)

    def test_session_cookie_is_secure_over_tls(self):
        db = unique("tlsdb").replace("-", "_")
        harness.mysql("CREATE DATABASE `%s`" % db)
        self.addCleanup(lambda: harness.mysql("DROP DATABASE IF EXISTS `%s`" % db))
        base, _, query = harness.stack_env()["PERMITD_TEST_MYSQL_ROOT_URL"].partition("?")
        url = base.rsplit("/", 1)[0] + "/" + db + "?" + query
        env = dict(os.environ, PERMITD_MYSQL_URL=url)
        subprocess.run([PERMITD_BIN, "migrate", "up"], env=env, check=True, capture_output=True)
        subprocess.run([PERMITD_BIN, "admin", "add-user", "tlsadmin", "--role", "viewer"],
                       input="a-long-password\n", text=True, env=env, check=True,
                       capture_output=True)
        port, admin, proc = self.start("--tls-cert", self.cert, "--tls-key", self.key,
                                       "--mysql-url", url)
        c = http.client.HTTPSConnection("127.0.0.1", admin, context=self.ctx, timeout=10)
        c.request("POST", "/permit.v1.AdminAuthService/Login",
                  json.dumps({"username": "tlsadmin", "password": "a-long-password"}),
                  {"Content-Type": "application/json",
                   "Origin": "https://127.0.0.1:%d" % admin})
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 200)
        cookie = r.getheader("Set-Cookie")
        self.assertIn("HttpOnly", cookie)
        self.assertIn("SameSite=Strict", cookie)
        self.assertIn("Secure", cookie)
        c.close()

    def test_bad_tls_settings_stop_start_up(self):
        missing = os.path.join(self.dir, "nope.pem")
        for args, words in ((["--tls-cert", self.cert], ["--tls-cert", "--tls-key"]),
                            (["--tls-cert", missing, "--tls-key", self.key], ["--tls-cert", missing]),
                            (["--tls-cert", self.key + ".x", "--tls-key", self.key], ["--tls-cert"])):
            with self.subTest(args=args):
                p = subprocess.run([PERMITD_BIN, "--listen", "127.0.0.1:%d" % free_port(),
                                    "--admin-listen", "127.0.0.1:%d" % free_port()] + args,
                                   capture_output=True, text=True, timeout=30)
                self.assertNotEqual(p.returncode, 0)
                for w in words:
                    self.assertIn(w, p.stderr)
        with open(os.path.join(self.dir, "garbage.pem"), "w") as f:
            f.write("not a certificate\n")
        p = subprocess.run([PERMITD_BIN, "--listen", "127.0.0.1:%d" % free_port(),
                            "--admin-listen", "127.0.0.1:%d" % free_port(),
                            "--tls-cert", os.path.join(self.dir, "garbage.pem"),
                            "--tls-key", self.key], capture_output=True, text=True, timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("not a PEM file", p.stderr)


if __name__ == "__main__":
    harness.main()
