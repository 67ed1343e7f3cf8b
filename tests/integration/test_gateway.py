"""Forward-auth behind a real nginx (issue 25), against real MariaDB and Redis.

One database per class, migrated with `permitd migrate up`; a gateway app
and its API key made with `permitd admin`; policies and gateway rules made
with the admin RPCs (PolicyService, GatewayService); permitd started with
--app-auth keys and --trusted-proxies naming the loopback address nginx
calls from (and 127.0.0.5, a proxy in front of nginx).

nginx is Debian's, started by the test as a plain process on free ports
(`nginx -p DIR -c conf -g 'daemon off;'`) with the auth_request config
docs/gateways.md shows; a small Python server is the application behind
it. Clients come from different loopback addresses (127.0.0.2, .3, ...)
so that nginx sees different client addresses.

Covers: N requests allowed then 429 with Retry-After and the RateLimit
headers reaching the client; keys per client address, through trusted
proxies, with a spoofed X-Forwarded-For from an untrusted client ignored;
header keys; several matching rules that must all allow; host, method and
path prefix matching; no rule = allowed; permitd down with nginx's
fail-closed (500) and fail-open (error_page mapping) configs; the admin
RPCs' validation and audit; migration 0010's CHECK constraints and its
down migration.
"""
import http.client
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (ConnectAssertions, Http, Permitd, PrivateRedis, Redis, error_code,
                     free_port, mysql, unique, wait_for)
from harness.mariadb import MysqlError
from test_apps import Admin, cli, database_url

EDITOR, EDITOR_PW = "ed", "editor-password-1"
VIEWER, VIEWER_PW = "vi", "viewer-password-1"
GATEWAY = "permit.v1.GatewayService"
ENVOY = "permit.v1.EnvoyDescriptorService"
POLICY = "permit.v1.PolicyService"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

NGINX_CONF = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;

    upstream permitd {{ server 127.0.0.1:{permitd}; keepalive 16; }}
    upstream app {{ server 127.0.0.1:{app}; }}

    server {{
        listen 127.0.0.1:{port};

        # Fail closed: permitd unreachable (or failing) answers 500.
        location / {{
            auth_request /_permitd;
            auth_request_set $permitd_retry_after $upstream_http_retry_after;
            auth_request_set $permitd_ratelimit $upstream_http_ratelimit;
            auth_request_set $permitd_ratelimit_policy $upstream_http_ratelimit_policy;
            add_header RateLimit $permitd_ratelimit always;
            add_header RateLimit-Policy $permitd_ratelimit_policy always;
            error_page 403 = @permitd_denied;
            proxy_pass http://app;
        }}

        # Fail open: permitd unreachable (or failing) lets the request through.
        location /open/ {{
            auth_request /_permitd;
            auth_request_set $permitd_retry_after $upstream_http_retry_after;
            auth_request_set $permitd_ratelimit $upstream_http_ratelimit;
            auth_request_set $permitd_ratelimit_policy $upstream_http_ratelimit_policy;
            error_page 403 = @permitd_denied;
            error_page 500 = @app;
            proxy_pass http://app;
        }}

        location @app {{
            proxy_pass http://app;
        }}

        location = /_permitd {{
            internal;
            proxy_pass http://permitd/v1/forward-auth/nginx;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-URI $request_uri;
            proxy_set_header X-Original-Method $request_method;
            proxy_set_header X-Forwarded-Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header Authorization "Bearer {key}";
        }}

        location @permitd_denied {{
            add_header Retry-After $permitd_retry_after always;
            add_header RateLimit $permitd_ratelimit always;
            add_header RateLimit-Policy $permitd_ratelimit_policy always;
            return 429;
        }}
    }}
}}
"""


class App(http.server.BaseHTTPRequestHandler):
    """The application behind nginx: 200 "app" to everything."""

    def _answer(self):
        body = b"app\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer

    def log_message(self, *args):
        pass


class Nginx:
    """Debian's nginx, on a free port, in a directory of its own."""

    def __init__(self, permitd_port, app_port, key):
        self.dir = tempfile.mkdtemp(prefix="permitd-nginx-")
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(dir=self.dir, permitd=permitd_port, app=app_port,
                                      port=self.port, key=key))
        self.proc = subprocess.Popen(
            [NGINX, "-p", self.dir, "-c", conf, "-e", os.path.join(self.dir, "error.log"),
             "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_for("nginx on port %d" % self.port, self._accepts, timeout=15)

    def _accepts(self):
        if self.proc.poll() is not None:
            raise RuntimeError("nginx exited with %s:\n%s" % (self.proc.returncode, self.log()))
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
            c.connect()
            c.close()
            return True
        except OSError:
            return False

    def log(self):
        try:
            with open(os.path.join(self.dir, "error.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def get(self, path, method="GET", source="127.0.0.2", headers=None):
        """One request through nginx from client address source; returns
        (status, headers dict with lowercase names, body)."""
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
        shutil.rmtree(self.dir, ignore_errors=True)


class GatewayCase(unittest.TestCase, ConnectAssertions):

    @classmethod
    def setUpClass(cls):
        cls.db = unique("gw").replace("-", "_")
        mysql("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci" % cls.db)
        cls.url = database_url(cls.db)
        cls.prefix = unique("gw") + ":"
        cls.permitd = cls.nginx = cls.app = None
        try:
            rc, out, err = cli(["migrate", "up"], cls.url)
            assert rc == 0, out + err
            for user, pw, role in ((EDITOR, EDITOR_PW, "editor"), (VIEWER, VIEWER_PW, "viewer")):
                rc, out, err = cli(["admin", "add-user", user, "--role", role], cls.url, pw + "\n")
                assert rc == 0, out + err
            rc, out, err = cli(["admin", "add-app", "gw"], cls.url)
            assert rc == 0, out + err
            rc, out, err = cli(["admin", "issue-key", "gw"], cls.url)
            assert rc == 0, out + err
            cls.key = out.strip()
            cls.permitd = cls.start_permitd()
            cls.app = http.server.ThreadingHTTPServer(("127.0.0.1", 0), App)
            threading.Thread(target=cls.app.serve_forever, daemon=True).start()
            cls.nginx = Nginx(cls.permitd.port, cls.app.server_address[1], cls.key)
            cls.ed = Admin(cls.permitd.admin_port, EDITOR, EDITOR_PW)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_permitd(cls, port=None):
        return Permitd(prefix=cls.prefix, port=port,
                       args=["--mysql-url", cls.url, "--sync-interval-ms", "1000",
                             "--app-auth", "keys",
                             "--trusted-proxies", "127.0.0.1, 127.0.0.5/32"])

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.nginx is not None:
                cls.nginx.stop()
            if cls.app is not None:
                cls.app.shutdown()
                cls.app.server_close()
            if cls.permitd is not None:
                code = cls.permitd.stop()
                if code != 0:
                    raise RuntimeError("permitd exited with %d:\n%s" % (code, cls.permitd.output()))
        finally:
            cls.permitd = cls.nginx = cls.app = None
            mysql("DROP DATABASE IF EXISTS `%s`" % cls.db)
            r = Redis()
            for k in r("KEYS", cls.prefix + "*") or []:
                r("DEL", k)
            r.close()

    def policy(self, max_permits, failure_mode="closed"):
        name = unique("gp")
        r = self.ed.call("permit.v1.PolicyService", "CreatePolicy", {"policy": {
            "name": name, "apps": ["gw"], "maxPermits": str(max_permits), "rate": "0.001",
            "enabled": True, "failureMode": failure_mode}})
        self.assertEqual(r.status, 200, r)
        return name

    def rule(self, **fields):
        r = self.ed.call(GATEWAY, "CreateGatewayRule", {"rule": fields})
        self.assertEqual(r.status, 200, r)
        return r.json()["rule"]

    def through(self, n, path, **kw):
        return [self.nginx.get(path, **kw) for _ in range(n)]


class ForwardAuthTest(GatewayCase):

    def test_gateway_limit_then_429_with_retry_after(self):
        pol = self.policy(3)
        self.rule(pathPrefix="/limited/", policy=pol, keySource="none")
        answers = self.through(4, "/limited/x?q=1")
        self.assertEqual([a[0] for a in answers], [200, 200, 200, 429], answers)
        for status, headers, body in answers[:3]:
            self.assertEqual(body, b"app\n")
            self.assertRegex(headers["ratelimit-policy"], r'^"%s";q=3;w=\d+$' % re.escape(pol))
        self.assertRegex(answers[0][1]["ratelimit"], r'^"%s";r=2;t=\d+$' % re.escape(pol))
        status, headers, body = answers[3]
        retry = int(headers["retry-after"])
        self.assertGreater(retry, 900)              # 1 permit at 0.001/s: 1000 s
        self.assertLessEqual(retry, 1000)
        self.assertRegex(headers["ratelimit"], r'^"%s";r=0;t=\d+$' % re.escape(pol))
        self.assertNotIn(b"app", body)

    def test_gateway_no_rule_allows(self):
        answers = self.through(5, "/nothing-matches-%s/" % unique("p"))
        self.assertEqual([a[0] for a in answers], [200] * 5)
        self.assertNotIn("ratelimit", answers[0][1])

    def test_gateway_keys_per_client_address(self):
        pol = self.policy(2)
        self.rule(pathPrefix="/per-ip/", policy=pol, keySource="client")
        a = self.through(3, "/per-ip/", source="127.0.0.2")
        self.assertEqual([x[0] for x in a], [200, 200, 429])
        # Another client has a bucket of its own.
        self.assertEqual(self.nginx.get("/per-ip/", source="127.0.0.3")[0], 200)
        # A client that makes up X-Forwarded-For gets nothing new: nginx
        # (trusted) appends the address it saw, which is untrusted, and the
        # right-most untrusted address is the client.
        for spoof in ("198.51.100.7", "127.0.0.1", "127.0.0.5, 10.9.9.9"):
            s = self.nginx.get("/per-ip/", source="127.0.0.2",
                               headers={"X-Forwarded-For": spoof, "X-Real-IP": "198.51.100.8"})
            self.assertEqual(s[0], 429, (spoof, s))
        # The buckets are the clients' addresses.
        peek = self.permitd.http().rpc_json("Peek", {"bucket": pol, "key": "127.0.0.2"},
                                            {"Authorization": "Bearer " + self.key})
        self.assertEqual(peek.status, 200, peek)
        self.assertEqual(int(peek.json().get("remaining", 0)), 0)

    def test_gateway_client_behind_a_trusted_proxy(self):
        pol = self.policy(1)
        self.rule(pathPrefix="/chain/", policy=pol, keySource="client")
        # 127.0.0.5 is a trusted proxy in front of nginx: the address it
        # names is the client's, one bucket per client behind it.
        via = lambda client: self.nginx.get("/chain/", source="127.0.0.5",
                                            headers={"X-Forwarded-For": client})[0]
        self.assertEqual(via("203.0.113.1"), 200)
        self.assertEqual(via("203.0.113.1"), 429)
        self.assertEqual(via("203.0.113.2"), 200)
        # A chain: the right-most address not trusted.
        self.assertEqual(via("192.0.2.99, 203.0.113.3, 127.0.0.1"), 200)
        self.assertEqual(via("192.0.2.98, 203.0.113.3"), 429)

    def test_gateway_header_keys(self):
        pol = self.policy(2)
        self.rule(pathPrefix="/by-key/", policy=pol, keySource="header", keyHeader="X-Api-Key")
        a = self.through(3, "/by-key/", headers={"X-Api-Key": "tenant-a"})
        self.assertEqual([x[0] for x in a], [200, 200, 429])
        self.assertEqual(self.nginx.get("/by-key/", headers={"X-Api-Key": "tenant-b"})[0], 200)
        # From another address, the same key is the same bucket.
        self.assertEqual(self.nginx.get("/by-key/", source="127.0.0.4",
                                        headers={"X-Api-Key": "tenant-a"})[0], 429)

    def test_gateway_every_matching_rule_must_allow(self):
        wide, narrow = self.policy(4), self.policy(2)
        self.rule(pathPrefix="/multi/", policy=wide, keySource="none")
        self.rule(pathPrefix="/multi/deep/", policy=narrow, keySource="client")
        # /multi/deep/ matches both: the narrow one (per client) denies the
        # third request.
        a = self.through(3, "/multi/deep/", source="127.0.0.2")
        self.assertEqual([x[0] for x in a], [200, 200, 429])
        self.assertIn('"%s"' % narrow, a[2][1]["ratelimit"])
        # Two policies' buckets are no one script's (docs/gateways.md):
        # each rule was decided on its own, so the denied third request
        # took its permit from the wide one: 4 - 3 leave 1.
        results = [self.nginx.get("/multi/other", source="127.0.0.3")[0] for _ in range(2)]
        self.assertEqual(results, [200, 429])
        # Now the wide one denies where the narrow one (a new client) allows.
        s = self.nginx.get("/multi/deep/", source="127.0.0.9")
        self.assertEqual(s[0], 429)
        self.assertIn('"%s"' % wide, s[1]["ratelimit"])

    def test_gateway_host_and_method(self):
        pol = self.policy(1)
        self.rule(host="API.Example.com", pathPrefix="/hm/", method="POST", policy=pol,
                  keySource="none")
        for _ in range(3):     # not POST, or not that host: never limited
            self.assertEqual(self.nginx.get("/hm/", headers={"Host": "api.example.com"})[0], 200)
            self.assertEqual(self.nginx.get("/hm/", method="POST",
                                            headers={"Host": "other.example.com"})[0], 200)
        h = {"Host": "api.example.com:8443"}
        self.assertEqual(self.nginx.get("/hm/a", method="POST", headers=h)[0], 200)
        self.assertEqual(self.nginx.get("/hm/b", method="POST", headers=h)[0], 429)

    def test_gateway_direct_calls(self):
        """The endpoint as Traefik, Caddy and Envoy call it: their headers,
        or the original path after /v1/forward-auth/envoy."""
        pol = self.policy(1)
        self.rule(pathPrefix="/direct/", method="DELETE", policy=pol, keySource="none")
        http = self.permitd.http()
        auth = {"Authorization": "Bearer " + self.key}
        r = http.request("GET", "/v1/forward-auth/forwarded", None, dict(auth, **{
            "X-Forwarded-Method": "DELETE", "X-Forwarded-Uri": "/direct/1",
            "X-Forwarded-Host": "h"}))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b"")
        r = http.request("DELETE", "/v1/forward-auth/envoy/direct/2", None, auth)     # Envoy
        self.assertEqual(r.status, 429, r)
        self.assertEqual(r.body, b"")
        self.assertIn("retry-after", {k.lower() for k in r.headers})
        # The gateway's key is checked like any app's, and a bad one is
        # the operator's problem: 500, never a 401 the client would see.
        r = http.request("DELETE", "/v1/forward-auth/envoy/direct/3", None, {})
        self.assertEqual(r.status, 500, r)
        self.assertEqual(r.json()["code"], "unauthenticated")
        # A style's own header missing is the operator's to fix: 500.
        r = http.request("GET", "/v1/forward-auth/nginx", None, auth)
        self.assertEqual(r.status, 500, r)
        self.assertIn("X-Original-URI", r.json()["message"])
        # Permitd-Deny-Status is nobody's to set: it changes nothing.
        for value in ("418", "200", "403"):
            r = http.request("DELETE", "/v1/forward-auth/envoy/direct/4", None, dict(auth, **{
                "Permitd-Deny-Status": value}))
            self.assertEqual(r.status, 429, (value, r))

    def test_gateway_shadow_policy_is_named_not_enforced(self):
        """A shadow policy's would-be denial is an allowance that names it
        (Permitd-Shadow), with RateLimit saying r=0 and no Retry-After."""
        name = unique("gs")
        r = self.ed.call("permit.v1.PolicyService", "CreatePolicy", {"policy": {
            "name": name, "apps": ["gw"], "maxPermits": "1", "rate": "0.001",
            "enabled": True, "failureMode": "closed", "shadow": True}})
        self.assertEqual(r.status, 200, r)
        self.rule(pathPrefix="/shadow/", policy=name, keySource="none")
        http = self.permitd.http()
        auth = {"Authorization": "Bearer " + self.key}
        first = http.request("GET", "/v1/forward-auth/envoy/shadow/1", None, auth)
        self.assertEqual(first.status, 200, first)
        self.assertNotIn("permitd-shadow", {k.lower() for k in first.headers})
        for _ in range(2):
            r = http.request("GET", "/v1/forward-auth/envoy/shadow/2", None, auth)
            self.assertEqual(r.status, 200, r)
            h = {k.lower(): v for k, v in r.headers.items()}
            self.assertEqual(h.get("permitd-shadow"), name, h)
            self.assertRegex(h["ratelimit"], r'^"%s";r=0;t=\d+$' % re.escape(name))
            self.assertNotIn("retry-after", h)

    def test_gateway_rule_naming_no_policy_is_an_error(self):
        """The RPCs refuse such a rule (issue 40); one written in plain SQL
        answers not_found, is flagged in the list and named in /readyz
        (which stays 200: see health.c)."""
        missing = unique("nopol")
        mysql("INSERT INTO gateway_rules (path_prefix, policy, key_source) VALUES "
              "('/nopolicy/', '%s', 'none')" % missing, database=self.db)
        rid = mysql("SELECT id FROM gateway_rules WHERE policy = '%s'" % missing,
                    database=self.db)[0][0]
        want = "rule %s names policy %s" % (rid, missing)
        wait_for("/readyz naming the broken rule",
                 lambda: want in self.permitd.admin().request("GET", "/readyz").body.decode(),
                 timeout=15)
        self.assertEqual(self.permitd.admin().request("GET", "/readyz").status, 200)
        listed = self.ed.call(GATEWAY, "ListGatewayRules", {}).json()["rules"]
        self.assertEqual([x.get("policyMissing") for x in listed if x["policy"] == missing], [True])
        s = self.nginx.get("/nopolicy/")
        self.assertEqual(s[0], 500)
        r = self.permitd.http().request("GET", "/v1/forward-auth/envoy/nopolicy/", None,
                                        {"Authorization": "Bearer " + self.key})
        self.assertEqual(r.status, 500, r)
        self.assertEqual(r.json()["code"], "not_found")
        self.assertIn(missing, r.json()["message"])


class PermitdDownTest(GatewayCase):
    """permitd stopped: nginx's answer is what its config says for the
    policy's failure mode (500 closed; the error_page mapping opens)."""

    def test_gateway_permitd_down_follows_the_nginx_config(self):
        closed, opened = self.policy(100), self.policy(100, failure_mode="open")
        self.rule(pathPrefix="/down/", policy=closed, keySource="none")
        self.rule(pathPrefix="/open/", policy=opened, keySource="none")
        self.assertEqual(self.nginx.get("/down/")[0], 200)
        self.assertEqual(self.nginx.get("/open/")[0], 200)
        port = self.permitd.port
        self.assertEqual(self.permitd.stop(), 0)
        try:
            self.assertEqual(self.nginx.get("/down/")[0], 500)
            status, _, body = self.nginx.get("/open/")
            self.assertEqual(status, 200)
            self.assertEqual(body, b"app\n")
        finally:
            type(self).permitd = self.start_permitd(port=port)
        # Back: the rules are loaded from MySQL at start.
        wait_for("forward-auth limits again",
                 lambda: self.nginx.get("/down/")[1].get("ratelimit"), timeout=10)


class RedisDownTest(unittest.TestCase):
    """Redis unreachable, permitd up: each policy's failure_mode, as nginx
    passes it on (open: the app answers; closed: permitd's 503, nginx's
    500), with one rule and with several: of one policy (one all_or_nothing
    script, which Redis down would answer unavailable whatever the
    failure_mode) and of two."""

    def setUp(self):
        self.db = unique("gwr").replace("-", "_")
        mysql("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci" % self.db)
        self.url = database_url(self.db)
        self.redis = self.p = self.nginx = self.app = None
        rc, out, err = cli(["migrate", "up"], self.url)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(cli(["admin", "add-app", "gw"], self.url)[0], 0)
        rc, out, err = cli(["admin", "issue-key", "gw"], self.url)
        self.assertEqual(rc, 0, out + err)
        self.key = out.strip()
        for name, mode in (("opened", "open"), ("opened2", "open"), ("closed", "closed")):
            mysql("INSERT INTO policies (name, max_permits, rate, failure_mode) "
                  "VALUES ('%s', 1000, 1000, '%s');"
                  "INSERT INTO policy_apps (policy_id, app) SELECT id, 'gw' FROM policies "
                  "WHERE name = '%s'" % (name, mode, name), database=self.db)
        for prefix, policy in (("/rd-open/", "opened"), ("/rd-closed/", "closed"),
                               ("/rd-both/", "opened"), ("/rd-both/", "opened"),
                               ("/rd-two/", "opened"), ("/rd-two/", "opened2"),
                               ("/rd-mixed/", "opened"), ("/rd-mixed/", "closed")):
            mysql("INSERT INTO gateway_rules (path_prefix, policy, key_source) "
                  "VALUES ('%s', '%s', 'none')" % (prefix, policy), database=self.db)
        self.redis = PrivateRedis()
        self.p = Permitd(redis_url=self.redis.url, prefix="gwr:",
                         args=["--mysql-url", self.url, "--sync-interval-ms", "300",
                               "--redis-timeout-ms", "100", "--app-auth", "keys",
                               "--trusted-proxies", "127.0.0.1"])
        self.app = http.server.ThreadingHTTPServer(("127.0.0.1", 0), App)
        threading.Thread(target=self.app.serve_forever, daemon=True).start()
        self.nginx = Nginx(self.p.port, self.app.server_address[1], self.key)
        wait_for("the rules decided from Redis",
                 lambda: all("ratelimit" in self.nginx.get(path)[1]
                             for path in ("/rd-open/", "/rd-closed/", "/rd-both/", "/rd-two/",
                                          "/rd-mixed/")),
                 timeout=15)

    def tearDown(self):
        if self.nginx is not None:
            self.nginx.stop()
        if self.app is not None:
            self.app.shutdown()
            self.app.server_close()
        if self.p is not None:
            self.p.stop()
        if self.redis is not None:
            self.redis.stop()
        mysql("DROP DATABASE IF EXISTS `%s`" % self.db)

    def test_gateway_redis_down_follows_failure_mode(self):
        os.kill(self.redis.pid(), signal.SIGKILL)
        time.sleep(0.1)
        for _ in range(3):
            self.assertEqual(self.nginx.get("/rd-open/")[0], 200)
            self.assertEqual(self.nginx.get("/rd-both/")[0], 200)    # one script: all_or_nothing
            self.assertEqual(self.nginx.get("/rd-two/")[0], 200)     # two policies: each alone
            self.assertEqual(self.nginx.get("/rd-closed/")[0], 500)
            self.assertEqual(self.nginx.get("/rd-mixed/")[0], 500)
        r = self.p.http().request("GET", "/v1/forward-auth/envoy/rd-closed/", None,
                                  {"Authorization": "Bearer " + self.key})
        self.assertEqual(r.status, 503, r)
        self.assertEqual(r.json()["code"], "unavailable")
        self.assertEqual(r.headers.get("permitd-error"), "unavailable")


class RulesAdminTest(GatewayCase):

    def test_gateway_rpcs_validate_each_field(self):
        pol = self.policy(1)
        cases = [
            ({"host": "exa mple.com"}, "host"),
            ({"host": "example.com:8080"}, "host"),
            ({"pathPrefix": "nope"}, "path_prefix"),
            ({"method": "get"}, "method"),
            ({"policy": "bad name"}, "policy"),
            ({"keySource": "cookie"}, "key_source"),
            ({"keySource": "header"}, "key_header"),
            ({"keySource": "header", "keyHeader": "X Api"}, "key_header"),
            ({"keySource": "none", "keyHeader": "X-Api-Key"}, "key_header"),
            ({"permits": "-2"}, "permits"),
        ]
        for fields, field in cases:
            rule = dict({"pathPrefix": "/v/", "policy": pol, "keySource": "none"}, **fields)
            r = self.ed.call(GATEWAY, "CreateGatewayRule", {"rule": rule})
            self.assertEqual(r.status, 400, (fields, r))
            self.assertEqual(error_code(r), "invalid_argument")
            self.assertTrue(r.json()["message"].startswith(field + ":"), (fields, r.json()))

    def test_gateway_rpcs_edit_delete_versions_roles_and_audit(self):
        pol = self.policy(5)
        rule = self.rule(pathPrefix="/edit/", policy=pol, keySource="none", description="first")
        self.assertEqual(rule["keySource"], "none")
        self.assertEqual(rule["createdBy"], EDITOR)
        rid, version = rule["id"], rule["version"]
        listed = self.ed.call(GATEWAY, "ListGatewayRules", {}).json()["rules"]
        self.assertIn(rid, [x["id"] for x in listed])
        upd = dict(rule, description="second", permits="2")
        r = self.ed.call(GATEWAY, "UpdateGatewayRule", {"rule": upd})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["rule"]["permits"], "2")
        self.assertEqual(int(r.json()["rule"]["version"]), int(version) + 1)
        # The second edit from the same version is told.
        r = self.ed.call(GATEWAY, "UpdateGatewayRule", {"rule": dict(upd, description="third")})
        self.assertEqual(error_code(r), "aborted", r)
        # Viewers list and may not write.
        vi = Admin(self.permitd.admin_port, VIEWER, VIEWER_PW)
        self.assertEqual(vi.call(GATEWAY, "ListGatewayRules", {}).status, 200)
        r = vi.call(GATEWAY, "DeleteGatewayRule", {"id": rid})
        self.assertEqual(error_code(r), "permission_denied", r)
        # The rule takes effect at once on this instance: 2 permits a request.
        self.assertEqual(self.nginx.get("/edit/")[0], 200)
        self.assertEqual(self.nginx.get("/edit/")[0], 200)
        self.assertEqual(self.nginx.get("/edit/")[0], 429)
        r = self.ed.call(GATEWAY, "DeleteGatewayRule", {"id": rid, "version": str(int(version) + 1)})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.nginx.get("/edit/")[0], 200)     # no rule: allowed
        rows = mysql("SELECT action, actor FROM gateway_rule_audit WHERE rule_id = %s ORDER BY id"
                     % rid, database=self.db)
        self.assertEqual([tuple(r) for r in rows],
                         [("create", EDITOR), ("update", EDITOR), ("delete", EDITOR)])

    def test_gateway_and_envoy_writes_refuse_a_missing_policy(self):
        """Issue 40: a rule or descriptor naming no policy is refused,
        naming it, on create and on update."""
        pol, missing = self.policy(1), unique("kb-tokn")
        r = self.ed.call(GATEWAY, "CreateGatewayRule", {"rule": {
            "pathPrefix": "/ref/", "policy": missing, "keySource": "none"}})
        self.assertEqual(error_code(r), "failed_precondition", r)
        self.assertIn(missing, r.json()["message"])
        rule = self.rule(pathPrefix="/ref/", policy=pol, keySource="none")
        r = self.ed.call(GATEWAY, "UpdateGatewayRule", {"rule": dict(rule, policy=missing)})
        self.assertEqual(error_code(r), "failed_precondition", r)
        self.assertIn(missing, r.json()["message"])
        r = self.ed.call(ENVOY, "PutEnvoyDescriptor", {"descriptor": {
            "domain": "refs", "descriptor": "generic_key=api", "policy": missing}})
        self.assertEqual(error_code(r), "failed_precondition", r)
        self.assertIn(missing, r.json()["message"])
        self.assertEqual(mysql("SELECT COUNT(*) FROM envoy_descriptors WHERE policy = '%s'"
                               % missing, database=self.db)[0][0], "0")

    def test_policy_delete_refused_while_named_then_removes_them(self):
        """Issue 40: GetPolicy lists what names a policy; DeletePolicy refuses
        while anything does, and removes them with it when asked (audited)."""
        pol = self.policy(1)
        rule = self.rule(pathPrefix="/del/", policy=pol, keySource="none")
        r = self.ed.call(ENVOY, "PutEnvoyDescriptor", {"descriptor": {
            "domain": "refs", "descriptor": "generic_key=del", "policy": pol}})
        self.assertEqual(r.status, 200, r)
        got = self.ed.call(POLICY, "GetPolicy", {"name": pol}).json()
        self.assertEqual(got["referenceCount"], 2, got)
        self.assertIn("gateway rule %s" % rule["id"], got["references"])
        self.assertIn("envoy descriptor refs/generic_key=del", got["references"])
        r = self.ed.call(POLICY, "DeletePolicy", {"name": pol})
        self.assertEqual(error_code(r), "failed_precondition", r)
        self.assertIn("gateway rule %s" % rule["id"], r.json()["message"])
        self.assertEqual(self.ed.call(POLICY, "GetPolicy", {"name": pol}).status, 200)
        r = self.ed.call(POLICY, "DeletePolicy", {"name": pol, "removeReferences": True})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(mysql("SELECT COUNT(*) FROM gateway_rules WHERE policy = '%s'" % pol,
                               database=self.db)[0][0], "0")
        self.assertEqual(mysql("SELECT COUNT(*) FROM envoy_descriptors WHERE policy = '%s'"
                               % pol, database=self.db)[0][0], "0")
        rows = mysql("SELECT action, actor FROM gateway_rule_audit WHERE rule_id = %s "
                     "ORDER BY id" % rule["id"], database=self.db)
        self.assertEqual([tuple(x) for x in rows], [("create", EDITOR), ("delete", EDITOR)])
        # The Envoy descriptor removed with it, whole, in the policy's delete
        # row (descriptors have no audit table of their own).
        rows = mysql("SELECT actor, old_value FROM policy_audit WHERE name = '%s' AND "
                     "action = 'delete'" % pol, database=self.db)
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual(rows[0][0], EDITOR)
        old = json.loads(rows[0][1])
        self.assertEqual(old["name"], pol)
        removed = old["removed_envoy_descriptors"]
        self.assertEqual([(d["domain"], d["descriptor"], d["policy"], d["key_entry"])
                          for d in removed], [("refs", "generic_key=del", pol, "")], removed)
        self.assertEqual(removed[0]["updated_by"], EDITOR)
        # A delete that removed no descriptor writes the policy as before.
        other = self.policy(1)
        self.assertEqual(self.ed.call(POLICY, "DeletePolicy", {"name": other}).status, 200)
        old = json.loads(mysql("SELECT old_value FROM policy_audit WHERE name = '%s' AND "
                               "action = 'delete'" % other, database=self.db)[0][0])
        self.assertNotIn("removed_envoy_descriptors", old)

    def test_a_policy_cannot_be_renamed_and_a_sql_rename_is_named_broken(self):
        """Issue 40: the API has no rename (a policy is found by its name:
        UpdatePolicy with another name is about another policy, not_found
        when none has it, and the named one and what names it are left as
        they were). A DBA's plain-SQL rename leaves its gateway rules and
        Envoy descriptors naming the old name: /readyz names each as broken
        and the lists flag them."""
        pol, new = self.policy(1), unique("renamed")
        rule = self.rule(pathPrefix="/ren/", policy=pol, keySource="none")
        domain = unique("ren")
        r = self.ed.call(ENVOY, "PutEnvoyDescriptor", {"descriptor": {
            "domain": domain, "descriptor": "generic_key=ren", "policy": pol}})
        self.assertEqual(r.status, 200, r)
        got = self.ed.call(POLICY, "GetPolicy", {"name": pol}).json()
        r = self.ed.call(POLICY, "UpdatePolicy", {"policy": dict(got["policy"], name=new)})
        self.assertEqual(error_code(r), "not_found", r)
        self.assertIn(new, r.json()["message"])
        after = self.ed.call(POLICY, "GetPolicy", {"name": pol}).json()
        self.assertEqual(after["policy"]["version"], got["policy"]["version"])
        self.assertEqual(after["referenceCount"], 2, after)
        mysql("UPDATE policies SET name = '%s' WHERE name = '%s'" % (new, pol), database=self.db)
        want = ["rule %s names policy %s" % (rule["id"], pol),
                "descriptor %s/generic_key=ren names policy %s" % (domain, pol)]
        wait_for("/readyz naming both", lambda: all(
            w in self.permitd.admin().request("GET", "/readyz").body.decode() for w in want),
            timeout=30)

    def test_envoy_descriptor_naming_no_policy_is_named_in_readyz(self):
        """Issue 40: a descriptor whose policy is gone (plain SQL) is
        flagged in ListEnvoyDescriptors and named in /readyz, which stays
        200 (see health.c); one whose policy exists is neither."""
        missing, pol, domain = unique("nopol"), self.policy(1), unique("dom")
        r = self.ed.call(ENVOY, "PutEnvoyDescriptor", {"descriptor": {
            "domain": domain, "descriptor": "generic_key=fine", "policy": pol}})
        self.assertEqual(r.status, 200, r)
        mysql("INSERT INTO envoy_descriptors (domain, descriptor, policy) VALUES "
              "('%s', 'generic_key=gone', '%s')" % (domain, missing), database=self.db)
        want = "descriptor %s/generic_key=gone names policy %s" % (domain, missing)
        wait_for("/readyz naming the broken descriptor",
                 lambda: want in self.permitd.admin().request("GET", "/readyz").body.decode(),
                 timeout=30)
        ready = self.permitd.admin().request("GET", "/readyz")
        self.assertEqual(ready.status, 200, ready)
        self.assertNotIn("generic_key=fine", ready.body.decode())
        listed = self.ed.call(ENVOY, "ListEnvoyDescriptors", {"domain": domain}).json()
        self.assertEqual(sorted((d["descriptor"], d.get("policyMissing", False))
                                for d in listed["descriptors"]),
                         [("generic_key=fine", False), ("generic_key=gone", True)], listed)

    def test_gateway_rule_written_in_sql_reaches_permitd(self):
        """A DBA's INSERT reaches every instance by the sync pass."""
        pol = self.policy(1)
        mysql("INSERT INTO gateway_rules (path_prefix, policy, key_source) VALUES "
              "('/dba/', '%s', 'none')" % pol, database=self.db)
        wait_for("the DBA's rule in force",
                 lambda: self.nginx.get("/dba/")[0] == 429, timeout=10)
        rows = mysql("SELECT action, actor FROM gateway_rule_audit a JOIN gateway_rules r "
                     "ON r.id = a.rule_id WHERE r.path_prefix = '/dba/'", database=self.db)
        self.assertEqual(rows[0][0], "create")
        self.assertTrue(rows[0][1].startswith("root@"), rows)


class MigrationTest(unittest.TestCase):
    """Migration 0010 on its own database: CHECK constraints, and down."""

    def setUp(self):
        self.db = unique("gwm").replace("-", "_")
        mysql("CREATE DATABASE `%s`" % self.db)
        self.url = database_url(self.db)
        # Up to 0010 only, so that "down 1" undoes 0010 whatever comes after.
        rc, out, err = cli(["migrate", "up", "10"], self.url)
        self.assertEqual(rc, 0, out + err)

    def tearDown(self):
        mysql("DROP DATABASE IF EXISTS `%s`" % self.db)

    def test_gateway_migration_checks_and_down(self):
        ok = "INSERT INTO gateway_rules (path_prefix, policy, %s) VALUES ('/a/', 'p', %s)"
        mysql(ok % ("method", "'GET'"), database=self.db)
        bad = [("method", "'get'"), ("host", "'Example.com'"), ("host", "'a.com:80'"),
               ("key_source", "'cookie'"), ("key_source", "'header'"), ("permits", "0"),
               ("key_header", "'X-Key'")]
        for column, value in bad:
            with self.assertRaises(MysqlError, msg=(column, value)) as cm:
                mysql(ok % (column, value), database=self.db)
            self.assertIn("chk_gateway_rules", str(cm.exception))
        with self.assertRaises(MysqlError):
            mysql("INSERT INTO gateway_rules (path_prefix, policy) VALUES ('nope', 'p')",
                  database=self.db)
        mysql("INSERT INTO gateway_rules (path_prefix, policy, key_source, key_header) VALUES "
              "('/b/', 'p', 'header', 'X-Api-Key')", database=self.db)
        rc, out, err = cli(["migrate", "down", "1"], self.url)
        self.assertEqual(rc, 0, out + err)
        tables = [r[0] for r in mysql("SHOW TABLES", database=self.db)]
        self.assertNotIn("gateway_rules", tables)
        self.assertNotIn("gateway_rule_audit", tables)
        self.assertIn("policies", tables)


if __name__ == "__main__":
    unittest.main(verbosity=2)
