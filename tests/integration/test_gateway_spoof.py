"""Forward-auth against clients that lie (issue 42), through a real nginx and
a real Caddy, against real MariaDB and Redis.

test_gateway.py's set-up (a gateway app and key, an editor, permitd with
--trusted-proxies 127.0.0.1, nginx with docs/gateways.md's auth_request config in
front of a small app) plus Debian's Caddy, started by the test as a plain
process on a free port with the Caddyfile block docs/gateways.md "Caddy" shows, read
from docs/gateways.md itself (only the addresses and the key are filled in, and
a global block turns off Caddy's admin endpoint and automatic HTTPS), so
the documented block is the tested one.

Covers: which headers describe the original request is the gateway's
style, not the client's (X-Original-URI sent to Caddy, X-Forwarded-Uri
sent to nginx, Permitd-Deny-Status sent to either change nothing, and
never cause a 500 a fail-open gateway would pass); what Caddy returns to
the client (429 with its headers; an allowance carries no unexpanded
placeholder); header values the key rules refuse (a TAB, over 256 bytes)
limited, not a 500; paths spelled to slip past a rule; every line of
X-Forwarded-For; hash_key rules keeping the raw value out of Redis.
"""
import hashlib
import http.client
import http.server
import os
import re
import shutil
import subprocess
import tempfile
import threading
import unittest

from harness import Redis, SOURCE_DIR, free_port, mysql, unique, wait_for
from test_gateway import App, GATEWAY, GatewayCase

CADDY = shutil.which("caddy") or "/usr/bin/caddy"


def readme_caddy_block():
    """The ```caddy block under docs/gateways.md's "### Caddy"."""
    with open(os.path.join(SOURCE_DIR, "docs", "gateways.md")) as f:
        text = f.read()
    section = text[text.index("\n### Caddy\n"):]
    m = re.search(r"\n```caddy\n(.*?)\n```\n", section, re.S)
    assert m is not None, "docs/gateways.md's Caddy section has no ```caddy block"
    return m.group(1) + "\n"


class Caddy:
    """Debian's Caddy on a free port, in a directory of its own, running
    docs/gateways.md's block."""

    def __init__(self, permitd_port, app_port, key):
        self.dir = tempfile.mkdtemp(prefix="permitd-caddy-")
        self.port = free_port()
        block = readme_caddy_block()
        for doc, real in (("example.com", "http://127.0.0.1:%d" % self.port),
                          ("permitd:8080", "127.0.0.1:%d" % permitd_port),
                          ("app:8000", "127.0.0.1:%d" % app_port),
                          ("pk_...", key)):
            assert doc in block, (doc, block)
            block = block.replace(doc, real)
        conf = os.path.join(self.dir, "Caddyfile")
        with open(conf, "w") as f:
            f.write("{\n\tadmin off\n\tauto_https off\n}\n\n" + block)
        env = dict(os.environ, HOME=self.dir, XDG_DATA_HOME=self.dir, XDG_CONFIG_HOME=self.dir)
        self.logf = open(os.path.join(self.dir, "caddy.log"), "w")
        self.proc = subprocess.Popen([CADDY, "run", "--config", conf, "--adapter", "caddyfile"],
                                     stdout=self.logf, stderr=subprocess.STDOUT, env=env)
        wait_for("caddy on port %d" % self.port, self._accepts, timeout=30)

    def _accepts(self):
        if self.proc.poll() is not None:
            raise RuntimeError("caddy exited with %s:\n%s" % (self.proc.returncode, self.log()))
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
            c.connect()
            c.close()
            return True
        except OSError:
            return False

    def log(self):
        try:
            with open(os.path.join(self.dir, "caddy.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def get(self, path, method="GET", source="127.0.0.2", headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10,
                                       source_address=(source, 0))
        try:
            c.request(method, path, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class RecordingApp(App):
    """The app behind Caddy: App, keeping the headers of every request."""
    seen = []

    def _answer(self):
        RecordingApp.seen.append({k.lower(): v for k, v in self.headers.items()})
        App._answer(self)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer


SPOOF = {"X-Original-URI": "/public", "X-Original-Method": "OPTIONS",
         "X-Forwarded-Uri": "/public", "X-Forwarded-Method": "OPTIONS",
         "X-Forwarded-Host": "elsewhere.example", "Permitd-Deny-Status": "200"}


class SpoofCase(GatewayCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.caddy = cls.caddy_app = None
        try:
            cls.caddy_app = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingApp)
            threading.Thread(target=cls.caddy_app.serve_forever, daemon=True).start()
            cls.caddy = Caddy(cls.permitd.port, cls.caddy_app.server_address[1], cls.key)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if getattr(cls, "caddy", None) is not None:
                cls.caddy.stop()
                cls.caddy = None
            if getattr(cls, "caddy_app", None) is not None:
                cls.caddy_app.shutdown()
                cls.caddy_app.server_close()
                cls.caddy_app = None
        finally:
            super().tearDownClass()

    def redis_keys(self, pattern):
        r = Redis()
        try:
            return r("KEYS", self.prefix + pattern) or []
        finally:
            r.close()


class HeaderStyleTest(SpoofCase):

    def test_gateway_spoof_caddy_original_headers_change_nothing(self):
        """X-Original-* (nginx's), a made-up X-Forwarded-Host and
        Permitd-Deny-Status sent to Caddy: Caddy's X-Forwarded-Uri rules."""
        pol = self.policy(2)
        self.rule(pathPrefix="/cs/", policy=pol, keySource="none")
        spoof = dict(SPOOF)
        del spoof["X-Forwarded-Uri"], spoof["X-Forwarded-Method"]    # Caddy sets its own
        answers = [self.caddy.get("/cs/x", headers=spoof) for _ in range(4)]
        self.assertEqual([a[0] for a in answers], [200, 200, 429, 429], answers)
        for value in ("403", "418", "500"):
            s = self.caddy.get("/cs/x", headers=dict(spoof, **{"Permitd-Deny-Status": value}))
            self.assertEqual(s[0], 429, (value, s))
        # A rule for the site's host: a made-up X-Forwarded-Host does not
        # take the request to another host (Caddy writes its own).
        host = self.policy(1)
        self.rule(host="127.0.0.1", pathPrefix="/ch/", policy=host, keySource="none")
        answers = [self.caddy.get("/ch/x", headers=spoof)[0] for _ in range(2)]
        self.assertEqual(answers, [200, 429])

    def test_gateway_spoof_nginx_forwarded_headers_change_nothing(self):
        """X-Forwarded-* (Caddy's and Traefik's) and Permitd-Deny-Status sent
        to nginx: nginx's X-Original-URI rules; through the fail-open
        location too, where a 500 would let the request through."""
        pol = self.policy(2)
        self.rule(pathPrefix="/open/ns/", policy=pol, keySource="none")
        answers = [self.nginx.get("/open/ns/x", headers=SPOOF) for _ in range(3)]
        self.assertEqual([a[0] for a in answers], [200, 200, 429], answers)
        # nginx's config writes X-Forwarded-Host: the client's is not read.
        host = self.policy(1)
        self.rule(host="127.0.0.1", pathPrefix="/open/nh/", policy=host, keySource="none")
        answers = [self.nginx.get("/open/nh/x", headers=SPOOF)[0] for _ in range(2)]
        self.assertEqual(answers, [200, 429])
        for value in ("200", "403", "429"):
            s = self.nginx.get("/open/ns/x", headers=dict(SPOOF, **{"Permitd-Deny-Status": value}))
            self.assertEqual(s[0], 429, (value, s))
            self.assertNotIn(b"app", s[2])

    def test_gateway_spoof_bare_path_takes_every_reading(self):
        """A config still calling the bare /v1/forward-auth: a rule matching
        any style's reading applies, so an added header cannot take the
        gateway's reading away; denials answer 403."""
        pol = self.policy(1)
        self.rule(pathPrefix="/bare/", policy=pol, keySource="none")
        http = self.permitd.http()
        auth = {"Authorization": "Bearer " + self.key}
        first = http.request("GET", "/v1/forward-auth", None, dict(auth, **{
            "X-Forwarded-Uri": "/bare/1", "X-Original-URI": "/public"}))
        self.assertEqual(first.status, 200, first)
        for h in ({"X-Forwarded-Uri": "/bare/1", "X-Original-URI": "/public"},
                  {"X-Forwarded-Uri": "/public", "X-Original-URI": "/bare/1"},
                  {"X-Forwarded-Uri": "/public", "Permitd-Deny-Status": "200"}):
            path = "/v1/forward-auth" if "Permitd-Deny-Status" not in h else "/v1/forward-auth/bare/"
            r = http.request("GET", path, None, dict(auth, **h))
            self.assertEqual(r.status, 403, (h, r))


class CaddyAnswerTest(SpoofCase):

    def test_gateway_caddy_readme_block_answers(self):
        """What the client gets from docs/gateways.md's Caddy block: a denial is
        permitd's 429 with Retry-After and the RateLimit headers; an
        allowance is the app's answer, with no RateLimit header and nothing
        unexpanded, on a path a rule limits and on one none does; nor does
        the request Caddy passes on to the app hold anything unexpanded."""
        RecordingApp.seen.clear()
        pol = self.policy(1)
        self.rule(pathPrefix="/ca/", policy=pol, keySource="client")
        ok = self.caddy.get("/ca/1")
        self.assertEqual(ok[0], 200, ok)
        self.assertEqual(ok[2], b"app\n")
        free = self.caddy.get("/not-limited-%s" % unique("p"))
        self.assertEqual(free[0], 200, free)
        for status, headers, _ in (ok, free):
            for name, value in headers.items():
                self.assertNotIn("{", value, (name, value))
            self.assertNotIn("ratelimit", headers)
        denied = self.caddy.get("/ca/2")
        self.assertEqual(denied[0], 429, denied)
        self.assertNotIn(b"app", denied[2])
        self.assertGreater(int(denied[1]["retry-after"]), 900)
        self.assertRegex(denied[1]["ratelimit"], r'^"%s";r=0;t=\d+$' % re.escape(pol))
        self.assertRegex(denied[1]["ratelimit-policy"], r'^"%s";q=1;w=\d+$' % re.escape(pol))
        self.assertEqual(len(RecordingApp.seen), 2)
        for headers in RecordingApp.seen:
            for name, value in headers.items():
                self.assertNotIn("{", value, (name, value))
        # The client's address reached permitd through Caddy's X-Forwarded-For.
        self.assertEqual(self.caddy.get("/ca/3", source="127.0.0.3")[0], 200)


class KeyTest(SpoofCase):

    def test_gateway_refused_header_values_are_limited(self):
        """A header value the key rules refuse (a TAB, 300 bytes) is limited
        by its hash: 200, 200, 429 through nginx's fail-open location, where
        the 500 it answered before let every request through."""
        pol = self.policy(2)
        self.rule(pathPrefix="/open/tab/", policy=pol, keySource="header", keyHeader="X-Api-Key")
        for value in ("a\tb", "v" * 300):
            answers = [self.nginx.get("/open/tab/", headers={"X-Api-Key": value})[0]
                       for _ in range(3)]
            self.assertEqual(answers, [200, 200, 429], repr(value[:10]))
            digest = hashlib.sha256(value.encode()).hexdigest()
            self.assertEqual(self.redis_keys("{%s:h:%s}:k" % (pol, digest)),
                             ["%s{%s:h:%s}:k" % (self.prefix, pol, digest)])
        # Two long values differing past byte 256 are two buckets.
        self.assertEqual(self.nginx.get("/open/tab/", headers={"X-Api-Key": "v" * 299 + "w"})[0],
                         200)

    def test_gateway_hash_key_keeps_raw_values_out_of_redis(self):
        pol = self.policy(1)
        rule = self.rule(pathPrefix="/hk/", policy=pol, keySource="header",
                         keyHeader="X-Api-Key", hashKey=True)
        self.assertIs(rule.get("hashKey"), True)
        secret = "sk_live_" + unique("s")
        self.assertEqual(self.nginx.get("/hk/", headers={"X-Api-Key": secret})[0], 200)
        self.assertEqual(self.nginx.get("/hk/", headers={"X-Api-Key": secret})[0], 429)
        self.assertEqual(self.nginx.get("/hk/", headers={"X-Api-Key": secret + "2"})[0], 200)
        digest = hashlib.sha256(secret.encode()).hexdigest()
        self.assertEqual(len(self.redis_keys("{%s:h:%s}:k" % (pol, digest))), 1)
        self.assertEqual(self.redis_keys("*%s*" % secret), [])
        # The setting is listed, edited and audited like the rest.
        listed = [r for r in self.ed.call(GATEWAY, "ListGatewayRules", {}).json()["rules"]
                  if r["id"] == rule["id"]]
        self.assertIs(listed[0].get("hashKey"), True)
        r = self.ed.call(GATEWAY, "UpdateGatewayRule", {"rule": dict(rule, hashKey=False)})
        self.assertEqual(r.status, 200, r)
        self.assertFalse(r.json()["rule"].get("hashKey", False))
        rows = mysql("SELECT JSON_EXTRACT(old_value, '$.hash_key'), "
                     "JSON_EXTRACT(new_value, '$.hash_key') FROM gateway_rule_audit "
                     "WHERE rule_id = %s AND action = 'update'" % rule["id"], database=self.db)
        self.assertEqual([tuple(x) for x in rows], [("1", "0")])

    def test_gateway_every_x_forwarded_for_line_is_read(self):
        """A trusted proxy that adds its own X-Forwarded-For line after the
        client's: the client's line, however random, does not choose the
        bucket; the right-most untrusted address of all lines does."""
        pol = self.policy(2)
        self.rule(pathPrefix="/xff/", policy=pol, keySource="client")
        answers = []
        for i in range(3):
            c = http.client.HTTPConnection("127.0.0.1", self.permitd.port, timeout=10)
            try:
                c.putrequest("GET", "/v1/forward-auth/forwarded")
                c.putheader("Authorization", "Bearer " + self.key)
                c.putheader("X-Forwarded-Uri", "/xff/")
                c.putheader("X-Forwarded-For", "198.51.100.%d" % (10 + i))    # the client's
                c.putheader("X-Forwarded-For", "203.0.113.77")                 # the proxy's
                c.endheaders()
                answers.append(c.getresponse().status)
            finally:
                c.close()
        self.assertEqual(answers, [200, 200, 429])
        self.assertEqual(len(self.redis_keys("{%s:203.0.113.77}:k" % pol)), 1)


class PathTest(SpoofCase):

    def test_gateway_paths_spelled_to_slip_past_a_rule(self):
        """Through nginx, each spelling of /norm/x is /norm/x to the rule."""
        pol = self.policy(1)
        self.rule(pathPrefix="/norm/", policy=pol, keySource="none")
        self.assertEqual(self.nginx.get("/norm/x")[0], 200)
        for path in ("/%6Eorm/x", "/%6eorm/x", "//norm/x", "/./norm/x", "/x/../norm/x",
                     "/norm//x", "/norm/x?a=/", "/%2e/norm/x"):
            self.assertEqual(self.nginx.get(path)[0], 429, path)
        # The same rule through Caddy, whose path comes in X-Forwarded-Uri.
        for path in ("/%6Eorm/y", "//norm/y", "/x/../norm/y"):
            self.assertEqual(self.caddy.get(path)[0], 429, path)


class HashKeyMigrationTest(unittest.TestCase):
    """Migration 0012 on its own database: hash_key's CHECK, the audit
    triggers recording it, and down back to 0011."""

    def setUp(self):
        from test_apps import cli, database_url
        self.cli = cli
        self.db = unique("gwh").replace("-", "_")
        mysql("CREATE DATABASE `%s`" % self.db)
        self.url = database_url(self.db)
        rc, out, err = cli(["migrate", "up", "12"], self.url)
        self.assertEqual(rc, 0, out + err)

    def tearDown(self):
        mysql("DROP DATABASE IF EXISTS `%s`" % self.db)

    def test_gateway_migration_0012_checks_audits_and_down(self):
        from harness.mariadb import MysqlError
        insert = ("INSERT INTO gateway_rules (path_prefix, policy, key_source, key_header%s) "
                  "VALUES ('/a/', 'p', 'header', 'X-Key'%s)")
        with self.assertRaises(MysqlError) as cm:
            mysql(insert % (", hash_key", ", 2"), database=self.db)
        self.assertIn("chk_gateway_rules_hash_key", str(cm.exception))
        mysql(insert % (", hash_key", ", 1"), database=self.db)
        mysql(insert % ("", ""), database=self.db)
        rows = mysql("SELECT JSON_EXTRACT(new_value, '$.hash_key') FROM gateway_rule_audit "
                     "ORDER BY id", database=self.db)
        self.assertEqual([r[0] for r in rows], ["1", "0"])
        rc, out, err = self.cli(["migrate", "down", "1"], self.url)
        self.assertEqual(rc, 0, out + err)
        columns = [r[0] for r in mysql("SHOW COLUMNS FROM gateway_rules", database=self.db)]
        self.assertNotIn("hash_key", columns)
        mysql(insert % ("", ""), database=self.db)     # 0010's triggers again
        rows = mysql("SELECT JSON_EXTRACT(new_value, '$.hash_key') IS NULL, action "
                     "FROM gateway_rule_audit ORDER BY id DESC LIMIT 1", database=self.db)
        self.assertEqual(tuple(rows[0]), ("1", "create"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
