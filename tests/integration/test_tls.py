"""HTTPS on both listeners (issue 6), with a self-signed certificate made
here by openssl; the client verifies it. Real permitd and Redis."""
import http.client
import json
import os
import ssl
import subprocess
import tempfile
import unittest

import harness
from harness import PERMITD_BIN, Permitd, Redis, free_port, put_policy, unique


def make_cert(directory):
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


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
