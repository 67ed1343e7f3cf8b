"""The admin API on the admin listener (issue 4), against real MariaDB and Redis.

Every class gets its own MariaDB database (created as root, migrated with
`permitd migrate up`), its own administrators (`permitd admin add-user`,
password on stdin) and one permitd started with --mysql-url, a short
--sync-interval-ms and its own --redis-prefix. Admin RPCs are Connect JSON
POSTs to the admin port with the session cookie and a same-origin Origin
header, as the admin UI sends them.

Covers: login/logout/sessions and the login throttle, who may call what,
cross-site refusals, CreatePolicy validation, optimistic concurrency on
version, audit history, write-through to Redis (seen by the very next
Acquire), buckets and stats as administrators see them, the API listener not
serving admin RPCs, `permitd admin add-user`, and the UI's files.
"""
import hashlib
import http.client
import json
import os
import re
import subprocess
import time
import unittest

import harness
from harness import (ConnectAssertions, Http, Permitd, Redis, content_type, decision, state_key,
                     error_code, mysql, stack_env, unique, wait_for)

EDITOR, EDITOR_PW = "ed", "editor-password-1"
VIEWER, VIEWER_PW = "vi", "viewer-password-1"
SYNC_MS = 300
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")

POLICY = "permit.v1.PolicyService"
AUTH = "permit.v1.AdminAuthService"


def run_permitd(args, stdin="", mysql_url=None, timeout=60):
    """Runs a permitd subcommand; returns (exit status, stdout + stderr)."""
    env = dict(os.environ)
    env.pop("PERMITD_MYSQL_URL", None)
    if mysql_url:
        env["PERMITD_MYSQL_URL"] = mysql_url
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    r = subprocess.run([harness.PERMITD_BIN] + list(args), input=stdin, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return r.returncode, r.stdout


def database_url(db):
    """The stack's root URL (root over the socket) pointed at database db."""
    root = stack_env()["PERMITD_TEST_MYSQL_ROOT_URL"]
    base, _, query = root.partition("?")
    return base.rsplit("/", 1)[0] + "/" + db + ("?" + query if query else "")


def cookie_parts(set_cookie):
    """(name, value, {attribute lower-cased: value}) of one Set-Cookie header."""
    parts = [p.strip() for p in set_cookie.split(";")]
    name, _, value = parts[0].partition("=")
    attrs = {}
    for p in parts[1:]:
        k, _, v = p.partition("=")
        attrs[k.strip().lower()] = v.strip()
    return name, value, attrs


def apps_of(value):
    """The app list of an audit JSON value (a list, or comma-separated text)."""
    apps = value.get("apps")
    if isinstance(apps, str):
        return sorted(a for a in apps.split(",") if a)
    return sorted(apps or [])


class SourceHttp(Http):
    """Http whose connections come from a given local address (any of
    127/8 reaches a listener on 127.0.0.1)."""

    def __init__(self, port, source):
        self.source = source
        super().__init__(port)

    def _connect(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30,
                                          source_address=(self.source, 0))


class AdminClient:
    """One browser-like client of the admin listener: keeps its cookie, sends
    Origin: http://127.0.0.1:<admin port> on every POST, and fails any reply
    that carries a CORS header."""

    def __init__(self, test, port, cookie=None):
        self.test = test
        self.port = port
        self.http = Http(port)
        self.cookie = cookie
        self.origin = "http://127.0.0.1:%d" % port

    def request(self, method, path, body=None, headers=None):
        r = self.http.request(method, path, body, headers)
        cors = [k for k in r.headers if k.startswith("access-control-")]
        self.test.assertEqual(cors, [], "a CORS header was sent: %r" % (r,))
        return r

    def call(self, service, method, msg, origin=True, cookie=True, ctype="application/json",
             raw=None):
        h = {"Content-Type": ctype}
        if origin is True:
            h["Origin"] = self.origin
        elif origin:
            h["Origin"] = origin
        if cookie is True and self.cookie:
            h["Cookie"] = "permitd_session=" + self.cookie
        elif isinstance(cookie, str):
            h["Cookie"] = cookie
        body = raw if raw is not None else json.dumps(msg).encode()
        return self.request("POST", "/%s/%s" % (service, method), body, h)

    def p(self, method, msg=None, **kw):
        return self.call(POLICY, method, msg or {}, **kw)

    def a(self, method, msg=None, **kw):
        return self.call(AUTH, method, msg or {}, **kw)

    def login(self, username, password):
        r = self.a("Login", {"username": username, "password": password}, cookie=False)
        if r.status == 200:
            name, value, _ = cookie_parts(r.headers.get("set-cookie", ""))
            self.test.assertEqual(name, "permitd_session", r)
            self.cookie = value
        return r

    # -- shorthands that expect success

    def ok(self, reply):
        self.test.assertEqual(reply.status, 200, reply)
        self.test.assertEqual(content_type(reply), "application/json", reply)
        return reply.json()

    def create(self, name, max_permits=10, rate="0.5", apps=("app",), **extra):
        pol = {"name": name, "apps": list(apps), "maxPermits": str(max_permits), "rate": rate,
               "description": "made by a test", "enabled": True, "failureMode": "closed"}
        pol.update(extra)
        return self.ok(self.p("CreatePolicy", {"policy": pol}))["policy"]

    def get(self, name):
        return self.ok(self.p("GetPolicy", {"name": name}))["policy"]

    def update(self, policy, **changes):
        pol = dict(policy)
        pol.update(changes)
        return self.p("UpdatePolicy", {"policy": pol})

    def history(self, name):
        return self.ok(self.p("ListPolicyHistory", {"name": name})).get("changes", [])

    def bucket(self, name, key=""):
        msg = {"name": name}
        if key:
            msg["key"] = key
        return self.ok(self.p("GetBucket", msg))["bucket"]


def num(m, field):
    """An int64/int field of a JSON message (a string, a number, or left out)."""
    v = m.get(field)
    return 0 if v is None else int(v)


class AdminCase(unittest.TestCase, ConnectAssertions):
    """One database, two admins (editor ed, viewer vi) and one permitd per class."""

    SYNC_INTERVAL_MS = SYNC_MS

    @classmethod
    def setUpClass(cls):
        cls.db = unique("adm").replace("-", "_")
        mysql("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci" % cls.db)
        cls.mysql_url = database_url(cls.db)
        cls.permitd = None
        try:
            rc, out = run_permitd(["migrate", "up"], mysql_url=cls.mysql_url)
            assert rc == 0, "migrate up failed (%d):\n%s" % (rc, out)
            cls.add_user(EDITOR, EDITOR_PW, "editor")
            cls.add_user(VIEWER, VIEWER_PW, "viewer")
            cls.prefix = unique("adm") + ":"
            cls.permitd = Permitd(prefix=cls.prefix,
                                  args=["--mysql-url", cls.mysql_url,
                                        "--sync-interval-ms", str(cls.SYNC_INTERVAL_MS)])
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.permitd is not None:
                code = cls.permitd.stop()
                if code != 0:
                    raise RuntimeError("permitd exited with %d:\n%s" % (code, cls.permitd.output()))
        finally:
            cls.permitd = None
            mysql("DROP DATABASE IF EXISTS `%s`" % cls.db)
            try:
                r = Redis()
                for k in r("KEYS", getattr(cls, "prefix", "no-such-prefix") + "*") or []:
                    r("DEL", k)
                r.close()
            except OSError:
                pass

    @classmethod
    def add_user(cls, name, password, role):
        rc, out = run_permitd(["admin", "add-user", name, "--role", role],
                              stdin=password + "\n", mysql_url=cls.mysql_url)
        assert rc == 0, "add-user %s failed (%d):\n%s" % (name, rc, out)

    def sql(self, q):
        return mysql(q, database=self.db)

    def client(self, cookie=None):
        return AdminClient(self, self.permitd.admin_port, cookie)

    def editor(self):
        c = self.client()
        self.ok_login(c, EDITOR, EDITOR_PW)
        return c

    def viewer(self):
        c = self.client()
        self.ok_login(c, VIEWER, VIEWER_PW)
        return c

    def ok_login(self, c, user, pw):
        r = c.login(user, pw)
        self.assertEqual(r.status, 200, r)
        return r

    def api(self):
        return self.permitd.http()

    def name(self, prefix="p"):
        return unique(prefix)

    def run(self, result=None):
        # Show permitd's log with a failing test: the server side of the story.
        before = len(result.failures) + len(result.errors) if result is not None else 0
        out = super().run(result)
        r = result if result is not None else out
        if r is not None and len(r.failures) + len(r.errors) > before and self.permitd:
            tail = self.permitd.output()[-4000:]
            print("\n---- permitd log (tail) ----\n" + tail)
        return out


# ---------------------------------------------------------------- login

class LoginTest(AdminCase):

    def test_login_returns_user_and_a_strict_http_only_session_cookie(self):
        c = self.client()
        r = c.login(EDITOR, EDITOR_PW)
        body = c.ok(r)
        self.assertEqual(body, {"username": EDITOR, "role": "editor"})
        name, value, attrs = cookie_parts(r.headers["set-cookie"])
        self.assertEqual(name, "permitd_session")
        self.assertIn("httponly", attrs, r.headers["set-cookie"])
        self.assertEqual(attrs.get("samesite", "").lower(), "strict", r.headers["set-cookie"])
        self.assertEqual(attrs.get("path"), "/", r.headers["set-cookie"])
        self.assertNotIn("secure", attrs, "no TLS here, so no Secure")
        # >= 128 random bits, as hex
        self.assertRegex(value, r"^[0-9a-f]{32,}$")
        self.assertEqual(c.ok(c.a("WhoAmI")), {"username": EDITOR, "role": "editor"})

        v = self.client()
        self.assertEqual(c.ok(v.login(VIEWER, VIEWER_PW)), {"username": VIEWER, "role": "viewer"})
        self.assertEqual(c.ok(v.a("WhoAmI")), {"username": VIEWER, "role": "viewer"})
        self.assertNotEqual(v.cookie, c.cookie)
        # A second login of the same user is a new session.
        c2 = self.editor()
        self.assertNotEqual(c2.cookie, c.cookie)

    def test_wrong_password_reads_like_unknown_user(self):
        self.add_user("wrongpw", "right-password", "viewer")
        c = self.client()
        r1 = c.login("wrongpw", "not-the-password")
        m1 = self.assertConnectError(r1, 401, "unauthenticated")
        self.assertNotIn("set-cookie", r1.headers)
        r2 = c.login("nobody-at-all", "not-the-password")
        m2 = self.assertConnectError(r2, 401, "unauthenticated")
        self.assertEqual(m1, m2, "the reply must not tell which user names exist")
        self.assertNotIn("set-cookie", r2.headers)
        self.assertEqual(c.ok(c.login("wrongpw", "right-password"))["role"], "viewer")

    def test_repeated_failures_are_throttled_even_with_the_right_password(self):
        self.add_user("guessme", "the-right-password", "editor")
        c = self.client()
        for i in range(5):
            r = c.login("guessme", "guess-%d" % i)
            self.assertConnectError(r, 401, "unauthenticated")
        r = c.login("guessme", "the-right-password")
        msg = self.assertConnectError(r, 429, "resource_exhausted")
        self.assertNotIn("set-cookie", r.headers)
        self.assertRegex(msg, r"(?i)(try again|retry).*\d+\s*(s|sec|second)", "says when to retry")
        # User names are throttled one by one: another user still gets in.
        self.assertEqual(c.ok(self.client().login(EDITOR, EDITOR_PW))["role"], "editor")
        # MySQL compares names without case, and would match "guessme " or
        # "guessmé" to this user: the first shares its throttle, the others
        # are not names (refused before any password is tried).
        self.assertConnectError(c.login("GuessMe", "the-right-password"), 429,
                                "resource_exhausted")
        for other in ("guessme ", "guessm\u00e9", "guess\x01me"):
            r = c.login(other, "the-right-password")
            self.assertConnectError(r, 400, "invalid_argument", ["username"])
            self.assertNotIn("set-cookie", r.headers)

    def test_a_strangers_failures_do_not_lock_the_user_out_elsewhere(self):
        # Linux routes all of 127/8 to loopback: 127.0.0.2 is a second
        # client address on this machine.
        self.add_user("target", "the-right-password", "editor")
        stranger = self.client()
        stranger.http = SourceHttp(self.permitd.admin_port, "127.0.0.2")
        for i in range(7):
            stranger.login("target", "guess-%d" % i)
        self.assertConnectError(stranger.login("target", "the-right-password"), 429,
                                "resource_exhausted", ["address"])
        # The user, from its own address, still gets in at once.
        c = self.client()
        self.assertEqual(c.ok(c.login("target", "the-right-password"))["role"], "editor")
        # And the other way round: failures from 127.0.0.1 leave 127.0.0.3 alone.
        for i in range(6):
            c.login("target", "guess-%d" % i)
        self.assertConnectError(c.login("target", "the-right-password"), 429,
                                "resource_exhausted")
        third = self.client()
        third.http = SourceHttp(self.permitd.admin_port, "127.0.0.3")
        self.assertEqual(third.ok(third.login("target", "the-right-password"))["role"], "editor")

    def test_session_tokens_never_reach_mysql(self):
        # MySQL keeps a session's SHA-256, and is only ever sent that: a
        # statement log must not hold the token the cookie carries.
        mysql("SET GLOBAL log_output = 'TABLE'")
        mysql("SET GLOBAL general_log = 1")
        try:
            c = self.editor()
            self.assertEqual(c.ok(c.a("WhoAmI"))["username"], EDITOR)
            c.ok(c.a("Logout"))
        finally:
            mysql("SET GLOBAL general_log = 0")
        token = c.cookie
        hashed = hashlib.sha256(token.encode()).hexdigest()
        seen = lambda s: int(mysql("SELECT COUNT(*) FROM mysql.general_log "
                                   "WHERE argument LIKE '%%%s%%'" % s)[0][0])
        self.assertGreaterEqual(seen(hashed), 3, "made, looked up and ended by its hash")
        self.assertEqual(seen(token), 0, "the token itself reached MySQL")

    def test_a_connection_mysql_closed_is_made_again(self):
        # MySQL closes idle connections (wait_timeout), restarts, fails
        # over: the next call connects again instead of failing once.
        c = self.editor()
        ids = mysql("SELECT id FROM information_schema.PROCESSLIST WHERE db = '%s'" % self.db)
        self.assertTrue(ids)
        for (i,) in ids:
            mysql("KILL %s" % i)
        self.assertEqual(c.ok(c.a("WhoAmI"))["username"], EDITOR)
        c.create(unique("again"))

    def test_logout_ends_the_session(self):
        c = self.editor()
        old = c.cookie
        self.assertEqual(c.ok(c.a("WhoAmI"))["username"], EDITOR)
        r = c.a("Logout")
        c.ok(r)
        name, value, attrs = cookie_parts(r.headers.get("set-cookie", ""))
        self.assertEqual(name, "permitd_session", r)
        self.assertTrue(value == "" or attrs.get("max-age") == "0", r)
        self.assertConnectError(c.a("WhoAmI", cookie="permitd_session=" + old), 401,
                                "unauthenticated")
        self.assertConnectError(c.p("ListPolicies", cookie="permitd_session=" + old), 401,
                                "unauthenticated")
        rows = self.sql("SELECT COUNT(*) FROM admin_sessions WHERE id_hash = '%s'"
                        % hashlib.sha256(old.encode()).hexdigest())
        self.assertEqual(rows, [["0"]])

    def test_sessions_table_keeps_only_a_sha256_of_the_cookie(self):
        c = self.editor()
        digest = hashlib.sha256(c.cookie.encode()).hexdigest()
        hashes = [r[0] for r in self.sql("SELECT id_hash FROM admin_sessions")]
        self.assertIn(digest, hashes)
        dump = self.sql("SELECT CONCAT_WS(' ', id_hash, user_id, created_at, expires_at) "
                        "FROM admin_sessions")
        self.assertNotIn(c.cookie, repr(dump))
        # The session expires (hours, not never).
        left = int(self.sql("SELECT TIMESTAMPDIFF(SECOND, NOW(6), expires_at) FROM admin_sessions "
                            "WHERE id_hash = '%s'" % digest)[0][0])
        self.assertGreater(left, 60)
        self.assertLessEqual(left, 31 * 24 * 3600)

    def test_passwords_are_stored_as_argon2id(self):
        rows = self.sql("SELECT username, password_hash FROM admin_users ORDER BY username")
        stored = dict((u, h) for u, h in rows)
        for user, pw in ((EDITOR, EDITOR_PW), (VIEWER, VIEWER_PW)):
            self.assertTrue(stored[user].startswith("$argon2id$"), stored[user])
            self.assertNotIn(pw, stored[user])
        self.assertNotEqual(stored[EDITOR], stored[VIEWER])


# ---------------------------------------------------------------- roles

ALL_RPCS = [
    (POLICY, "ListPolicies", {}),
    (POLICY, "GetPolicy", {"name": "x"}),
    (POLICY, "CreatePolicy", {"policy": {"name": "x", "apps": ["app"], "maxPermits": "1",
                                         "rate": "1"}}),
    (POLICY, "UpdatePolicy", {"policy": {"name": "x", "apps": ["app"], "maxPermits": "1",
                                         "rate": "1", "version": "1"}}),
    (POLICY, "DeletePolicy", {"name": "x"}),
    (POLICY, "ListPolicyHistory", {"name": "x"}),
    (POLICY, "GetBucket", {"name": "x"}),
    (POLICY, "ResetBucket", {"name": "x"}),
    (POLICY, "GetPolicyStats", {"name": "x"}),
    (POLICY, "GetPolicyReservations", {"name": "x"}),
    (AUTH, "Logout", {}),
    (AUTH, "WhoAmI", {}),
]


class RoleTest(AdminCase):

    def test_every_rpc_but_login_needs_a_session(self):
        c = self.client()
        for service, method, msg in ALL_RPCS:
            for cookie in (False, "permitd_session=" + "0" * 64, "permitd_session=nothex",
                           "other=1"):
                with self.subTest(method=method, cookie=cookie):
                    r = c.call(service, method, msg, cookie=cookie)
                    self.assertConnectError(r, 401, "unauthenticated")
        # Read-only RPCs also answer GET (Connect): guarded the same way.
        get = "/%s/ListPolicies?connect=v1&encoding=json&message=%%7B%%7D" % POLICY
        self.assertConnectError(c.request("GET", get), 401, "unauthenticated")
        v = self.viewer()
        r = c.request("GET", get, None, {"Cookie": "permitd_session=" + v.cookie})
        self.assertEqual(r.status, 200, r)
        # ... and nothing happened
        self.assertEqual(self.sql("SELECT COUNT(*) FROM policies WHERE name = 'x'"), [["0"]])

    def test_every_other_service_is_served_through_its_table(self):
        # The services of the other control files come in through
        # admin_add_methods(): each answers its procedures (with the auth
        # every handler asks for first: no session is 401, not 404, by POST
        # and, for a read-only one, by GET), and a name it does not have is
        # the listener's 404, as is one that only starts like the service.
        c, v = self.client(), self.viewer()
        for service, method in [("permit.v1.AppService", "ListApps"),
                                ("permit.v1.UserService", "ListUsers"),
                                ("permit.v1.AuditService", "ListAudit"),
                                ("permit.v1.GatewayService", "ListGatewayRules"),
                                ("permit.v1.EnvoyDescriptorService", "ListEnvoyDescriptors"),
                                ("permit.v1.FleetService", "ListInstances"),
                                ("permit.v1.HotKeyService", "GetHotKeys")]:
            with self.subTest(service=service):
                self.assertConnectError(c.call(service, method, {}), 401, "unauthenticated")
                get = "/%s/%s?connect=v1&encoding=json&message=%%7B%%7D" % (service, method)
                self.assertConnectError(c.request("GET", get), 401, "unauthenticated")
                r = c.request("GET", get, None, {"Cookie": "permitd_session=" + v.cookie})
                self.assertNotIn(r.status, (404, 405), r)   # 403 for ListUsers: admins only
                for path in ("%s/NoSuchMethod" % service, "%sX/%s" % (service, method)):
                    r = c.request("POST", "/" + path, b"{}",
                                  {"Content-Type": "application/json", "Origin": v.origin,
                                   "Cookie": "permitd_session=" + v.cookie})
                    self.assertConnectError(r, 404, "unimplemented")

    def test_viewer_reads_but_cannot_change_anything(self):
        e, v = self.editor(), self.viewer()
        name = self.name("roles")
        pol = e.create(name, max_permits=10, rate="0.001")
        api = self.api()
        for _ in range(2):
            self.assertTrue(decision(api.acquire(name))["allowed"])

        # reads
        names = [p["name"] for p in v.ok(v.p("ListPolicies", {"includeBuckets": True}))["policies"]]
        self.assertIn(name, names)
        self.assertEqual(v.get(name)["version"], pol["version"])
        self.assertEqual(v.history(name)[0]["action"], "create")
        self.assertEqual(num(v.bucket(name), "remaining"), 8)
        v.ok(v.p("GetPolicyStats", {"name": name}))
        self.assertEqual(v.ok(v.a("WhoAmI")), {"username": VIEWER, "role": "viewer"})

        # writes
        byviewer = self.name("byviewer")
        r = v.p("CreatePolicy", {"policy": {"name": byviewer, "apps": ["app"],
                                            "maxPermits": "5", "rate": "1"}})
        self.assertConnectError(r, 403, "permission_denied")
        self.assertConnectError(v.update(pol, maxPermits="99"), 403, "permission_denied")
        r = v.p("DeletePolicy", {"name": name, "version": pol["version"]})
        self.assertConnectError(r, 403, "permission_denied")
        r = v.p("ResetBucket", {"name": name})
        self.assertConnectError(r, 403, "permission_denied")

        # ... changed nothing
        self.assertConnectError(e.p("GetPolicy", {"name": byviewer}), 404, "not_found")
        now = e.get(name)
        self.assertEqual(now["version"], pol["version"])
        self.assertEqual(now["maxPermits"], "10")
        self.assertEqual(num(e.bucket(name), "remaining"), 8)
        self.assertEqual([c["action"] for c in e.history(name)], ["create"])

    def test_editor_may_call_every_rpc(self):
        e = self.editor()
        name = self.name("ed")
        pol = e.create(name, max_permits=4, rate="0.001")
        self.assertTrue(decision(self.api().acquire(name, key="k"))["allowed"])
        e.ok(e.p("ListPolicies", {"includeBuckets": True}))
        self.assertEqual(e.get(name)["name"], name)
        upd = e.ok(e.update(pol, maxPermits="6"))["policy"]
        self.assertEqual(upd["maxPermits"], "6")
        self.assertEqual(len(e.history(name)), 2)
        # A larger max_permits does not add tokens; a reset fills up to it.
        self.assertEqual(num(e.bucket(name, "k"), "remaining"), 3)
        self.assertEqual(num(e.ok(e.p("ResetBucket", {"name": name, "key": "k"}))["bucket"],
                             "remaining"), 6)
        e.ok(e.p("GetPolicyStats", {"name": name, "seconds": 5}))
        self.assertEqual(e.ok(e.a("WhoAmI"))["role"], "editor")
        e.ok(e.p("DeletePolicy", {"name": name, "version": upd["version"]}))
        e.ok(e.a("Logout"))


# ---------------------------------------------------------------- cross-site

class CrossSiteTest(AdminCase):

    def assertNotCreated(self, e, name):
        self.assertConnectError(e.p("GetPolicy", {"name": name}), 404, "not_found")

    def new_policy(self, name):
        return {"policy": {"name": name, "apps": ["app"], "maxPermits": "5", "rate": "1"}}

    def test_foreign_origin_is_refused(self):
        e = self.editor()
        name = self.name("evil")
        for origin in ("http://evil.example", "http://127.0.0.1:%d.evil.example" % e.port,
                       "http://127.0.0.1:%d" % self.permitd.port, "null"):
            with self.subTest(origin=origin):
                r = e.p("CreatePolicy", self.new_policy(name), origin=origin)
                self.assertConnectError(r, 403, "permission_denied")
        self.assertNotCreated(e, name)
        # Login too: no login CSRF.
        r = self.client().a("Login", {"username": EDITOR, "password": EDITOR_PW},
                            origin="http://evil.example", cookie=False)
        self.assertConnectError(r, 403, "permission_denied")
        self.assertNotIn("set-cookie", r.headers)

    def test_dns_rebinding_host_is_refused(self):
        # A page on rebind.example whose name now resolves to 127.0.0.1:
        # the browser sends Host and Origin of its own name, which match.
        port = self.permitd.admin_port
        body = json.dumps({"username": EDITOR, "password": EDITOR_PW}).encode()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.putrequest("POST", "/permit.v1.AdminAuthService/Login", skip_host=True)
        c.putheader("Host", "rebind.example:%d" % port)
        c.putheader("Origin", "http://rebind.example:%d" % port)
        c.putheader("Content-Type", "application/json")
        c.putheader("Content-Length", str(len(body)))
        c.endheaders(body)
        r = c.getresponse()
        data = r.read()
        c.close()
        self.assertEqual(r.status, 403, data)
        self.assertIn(b"permission_denied", data)
        self.assertIsNone(r.getheader("Set-Cookie"))
        # localhost is a loopback name and is fine.
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.putrequest("POST", "/permit.v1.AdminAuthService/Login", skip_host=True)
        c.putheader("Host", "localhost:%d" % port)
        c.putheader("Origin", "http://localhost:%d" % port)
        c.putheader("Content-Type", "application/json")
        c.putheader("Content-Length", str(len(body)))
        c.endheaders(body)
        r = c.getresponse()
        r.read()
        c.close()
        self.assertEqual(r.status, 200)

    def test_missing_origin_is_refused(self):
        e = self.editor()
        name = self.name("noorigin")
        r = e.p("CreatePolicy", self.new_policy(name), origin=False)
        self.assertConnectError(r, 403, "permission_denied")
        self.assertNotCreated(e, name)
        pol = e.create(name)
        r = e.p("DeletePolicy", {"name": name}, origin=False)
        self.assertConnectError(r, 403, "permission_denied")
        self.assertEqual(e.get(name)["version"], pol["version"])

    def test_form_content_types_are_refused(self):
        e = self.editor()
        name = self.name("form")
        body = json.dumps(self.new_policy(name)).encode()
        for ctype in ("text/plain", "text/plain;charset=UTF-8",
                      "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
            with self.subTest(ctype=ctype):
                r = e.p("CreatePolicy", ctype=ctype, raw=body)
                self.assertEqual(r.status, 415, r)
        self.assertNotCreated(e, name)

    def test_no_cors_headers_even_on_a_preflight(self):
        c = self.client()
        for origin in ("http://evil.example", c.origin):
            r = c.request("OPTIONS", "/%s/CreatePolicy" % POLICY, None,
                          {"Origin": origin, "Access-Control-Request-Method": "POST",
                           "Access-Control-Request-Headers": "content-type"})
            self.assertNotEqual(r.status, 204, r)   # no preflight is answered as allowed
            self.assertLess(r.status, 500, r)
        # Every reply goes through AdminClient.request, which fails on any CORS
        # header; a few more kinds of reply:
        c.request("GET", "/", None, {"Origin": "http://evil.example"})
        c.request("GET", "/healthz", None, {"Origin": "http://evil.example"})
        c.a("Login", {"username": EDITOR, "password": EDITOR_PW}, origin="http://evil.example")
        c.login(EDITOR, EDITOR_PW)
        c.p("ListPolicies", origin="http://evil.example")
        c.ok(c.p("ListPolicies"))


# ---------------------------------------------------------------- CreatePolicy

class CreatePolicyTest(AdminCase):

    def test_created_policy_carries_version_and_audit_fields(self):
        e = self.editor()
        name = self.name("new")
        before = time.time()
        pol = e.create(name, max_permits=10, rate="0.5", apps=("web", "app"),
                       description="ten, one per 2 s")
        self.assertEqual(pol["name"], name)
        self.assertEqual(sorted(pol["apps"]), ["app", "web"])
        self.assertEqual(pol["maxPermits"], "10")
        self.assertEqual(pol["rate"], "0.5")
        self.assertEqual(pol["description"], "ten, one per 2 s")
        self.assertIs(pol["enabled"], True)
        self.assertEqual(pol["failureMode"], "closed")
        self.assertGreaterEqual(int(pol["version"]), 1)
        self.assertEqual(pol["createdBy"], EDITOR)
        self.assertEqual(pol["updatedBy"], EDITOR)
        self.assertRegex(pol["createdAt"], RFC3339)
        self.assertRegex(pol["updatedAt"], RFC3339)
        created = time.mktime(time.strptime(pol["createdAt"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        self.assertLess(abs(created - before), 120, pol["createdAt"])
        self.assertEqual(e.get(name), pol)
        # Version and audit fields in the request are ignored.
        other = e.create(self.name("forged"), version="77", createdBy="mallory",
                         createdAt="2000-01-01T00:00:00Z")
        self.assertEqual(other["createdBy"], EDITOR)
        self.assertNotEqual(other["version"], "77")
        self.assertFalse(other["createdAt"].startswith("2000"))
        # A disabled, fail-open one: defaults left out of the JSON reply.
        off = e.create(self.name("off"), enabled=False, failureMode="open")
        self.assertNotIn("enabled", off)
        self.assertEqual(off["failureMode"], "open")

    def test_duplicate_name_already_exists(self):
        e = self.editor()
        name = self.name("dup")
        pol = e.create(name, max_permits=10)
        r = e.p("CreatePolicy", {"policy": {"name": name, "apps": ["app"], "maxPermits": "99",
                                            "rate": "1"}})
        self.assertConnectError(r, 409, "already_exists", name)
        self.assertEqual(e.get(name), pol)

    def test_validation_errors_name_the_field(self):
        e = self.editor()
        good = {"apps": ["app"], "maxPermits": "10", "rate": "1", "description": "",
                "enabled": True, "failureMode": "closed"}
        cases = [
            ("name", {"name": "bad name!"}),
            ("name", {"name": ""}),
            ("name", {"name": "-leading-dash"}),
            ("name", {"name": "x" * 129}),
            ("apps", {"apps": []}),
            ("apps", {"apps": ["bad app"]}),
            ("max_permits", {"maxPermits": "0"}),
            ("max_permits", {"maxPermits": "-3"}),
            ("rate", {"rate": "0"}),
            ("rate", {"rate": "abc"}),
            ("rate", {"rate": "1.1234567890123"}),
            ("rate", {"rate": "-1"}),
            ("rate", {"rate": ""}),
            ("failure_mode", {"failureMode": "maybe"}),
            ("description", {"description": "d" * 1025}),
        ]
        before = self.sql("SELECT COUNT(*) FROM policies")
        for field, change in cases:
            with self.subTest(field=field, change={k: v[:40] if isinstance(v, str) else v
                                                   for k, v in change.items()}):
                pol = dict(good, name=self.name("val"))
                pol.update(change)
                r = e.p("CreatePolicy", {"policy": pol})
                msg = self.assertConnectError(r, 400, "invalid_argument")
                self.assertTrue(msg.startswith(field + ":"), "%r does not start with %r" %
                                (msg, field + ":"))
        self.assertEqual(self.sql("SELECT COUNT(*) FROM policies"), before)
        # The limits themselves are fine.
        ok = e.create(self.name("x" * 100)[:128], description="d" * 1024, rate="0.000000000001")
        self.assertEqual(len(ok["description"]), 1024)


# ---------------------------------------------------------------- algorithms

class AlgorithmTest(AdminCase):
    """Issue 20: a policy's algorithm and the limits that go with it, through
    CreatePolicy and UpdatePolicy into MySQL and the Redis hash. Sync passes
    are 10 minutes apart: what Redis holds, the write-through wrote."""

    SYNC_INTERVAL_MS = 600000
    ALGO = ("algorithm", "window_ms", "calendar", "lease_ms")

    def redis_policy(self, name):
        redis = Redis()
        try:
            flat = redis("HGETALL", "%s{%s}:policy" % (self.prefix, name)) or []
        finally:
            redis.close()
        return dict(zip(flat[0::2], flat[1::2]))

    def row(self, name):
        return self.sql("SELECT algorithm, IFNULL(rate, 'NULL'), IFNULL(window_ms, 'NULL'), "
                        "IFNULL(calendar, 'NULL'), IFNULL(lease_ms, 'NULL') FROM policies "
                        "WHERE name = '%s'" % name)[0]

    def test_each_algorithm_round_trip(self):
        e = self.editor()
        # sent, answered (algorithm, window, leaseTtl), MySQL row, Redis fields
        cases = [
            ({"algorithm": "fixed_window", "window": "60s"}, ("fixed_window", "1m", ""),
             ["fixed_window", "NULL", "60000", "NULL", "NULL"], ("fixed_window", "60000", "", "")),
            ({"algorithm": "fixed_window", "window": "month", "maxPermits": "10000"},
             ("fixed_window", "month", ""), ["fixed_window", "NULL", "NULL", "month", "NULL"],
             ("fixed_window", "", "month", "")),
            ({"algorithm": "sliding_window", "window": "3600000ms"}, ("sliding_window", "1h", ""),
             ["sliding_window", "NULL", "3600000", "NULL", "NULL"],
             ("sliding_window", "3600000", "", "")),
            ({"algorithm": "sliding_log", "window": "90s", "maxPermits": "10000"},
             ("sliding_log", "90s", ""), ["sliding_log", "NULL", "90000", "NULL", "NULL"],
             ("sliding_log", "90000", "", "")),
            ({"algorithm": "concurrency"}, ("concurrency", "", "30s"),
             ["concurrency", "NULL", "NULL", "NULL", "30000"], ("concurrency", "", "", "30000")),
            ({"algorithm": "concurrency", "lease_ttl": "120000ms"}, ("concurrency", "", "2m"),
             ["concurrency", "NULL", "NULL", "NULL", "120000"], ("concurrency", "", "", "120000")),
        ]
        for sent, answered, row, fields in cases:
            with self.subTest(sent=sent):
                name = self.name("alg")
                pol = e.create(name, rate="", **sent)
                self.assertEqual((pol.get("algorithm"), pol.get("window", ""),
                                  pol.get("leaseTtl", "")), answered)
                self.assertNotIn("rate", pol)
                self.assertEqual(e.get(name), pol)
                self.assertEqual(self.row(name), row)
                h = self.redis_policy(name)
                self.assertEqual(tuple(h.get(f) for f in self.ALGO), fields, h)
                self.assertNotIn("rate", h)
                self.assertEqual(h["version"], pol["version"])

    def test_a_token_bucket_hash_is_as_before(self):
        # A token bucket answers its algorithm by name, and its hash has
        # none of the algorithm fields. Switched to a window and back, the
        # hash follows each time (no rate, then no algorithm fields).
        e = self.editor()
        name = self.name("tb")
        pol = e.create(name, rate="2")
        self.assertEqual(pol["algorithm"], "token_bucket")
        self.assertNotIn("window", pol)
        self.assertNotIn("leaseTtl", pol)
        self.assertEqual(self.row(name), ["token_bucket", "2.000000000000", "NULL", "NULL", "NULL"])
        h = self.redis_policy(name)
        self.assertEqual(h["rate"], "2.000000000000")
        for f in self.ALGO:
            self.assertNotIn(f, h)
        pol = e.ok(e.update(pol, algorithm="fixed_window", window="1h", rate=""))["policy"]
        self.assertEqual((pol["algorithm"], pol["window"]), ("fixed_window", "1h"))
        h = self.redis_policy(name)
        self.assertEqual((h.get("algorithm"), h.get("window_ms")), ("fixed_window", "3600000"))
        self.assertNotIn("rate", h)
        pol = e.ok(e.update(pol, algorithm="token_bucket", window="", rate="3"))["policy"]
        self.assertEqual((pol["algorithm"], pol["rate"]), ("token_bucket", "3"))
        h = self.redis_policy(name)
        self.assertEqual(h["rate"], "3.000000000000")
        for f in self.ALGO:
            self.assertNotIn(f, h)
        self.assertEqual(h["version"], pol["version"])

    def test_each_invalid_combination_names_the_field(self):
        e = self.editor()
        cases = [
            ("rate", "fixed_window", {"algorithm": "fixed_window", "window": "1m", "rate": "1"}),
            ("rate", "sliding_log", {"algorithm": "sliding_log", "window": "1m", "rate": "1"}),
            ("rate", "concurrency", {"algorithm": "concurrency", "rate": "1"}),
            ("rate", "token_bucket", {"algorithm": "token_bucket", "rate": ""}),
            ("window", "fixed_window", {"algorithm": "fixed_window", "rate": ""}),
            ("window", "sliding_window", {"algorithm": "sliding_window", "rate": ""}),
            ("window", "sliding_window", {"algorithm": "sliding_window", "window": "day",
                                          "rate": ""}),
            ("window", "sliding_log", {"algorithm": "sliding_log", "window": "month",
                                       "rate": ""}),
            ("window", "token_bucket", {"window": "1m"}),
            ("window", "concurrency", {"algorithm": "concurrency", "window": "1m", "rate": ""}),
            ("window", None, {"algorithm": "fixed_window", "window": "1 minute", "rate": ""}),
            ("window", None, {"algorithm": "fixed_window", "window": "401d", "rate": ""}),
            ("lease_ttl", "token_bucket", {"leaseTtl": "5s"}),
            ("lease_ttl", "sliding_log", {"algorithm": "sliding_log", "window": "1m",
                                          "leaseTtl": "5s", "rate": ""}),
            ("lease_ttl", None, {"algorithm": "concurrency", "leaseTtl": "0s", "rate": ""}),
            ("max_permits", "sliding_log", {"algorithm": "sliding_log", "window": "1m",
                                            "maxPermits": "10001", "rate": ""}),
            ("algorithm", "leaky_bucket", {"algorithm": "leaky_bucket", "rate": ""}),
        ]
        before = self.sql("SELECT COUNT(*) FROM policies")
        existing = e.create(self.name("upd"), rate="1")
        for field, algorithm, change in cases:
            with self.subTest(field=field, change=change):
                pol = {"name": self.name("bad"), "apps": ["app"], "maxPermits": "10",
                       "rate": "1", "enabled": True}
                pol.update(change)
                msg = self.assertConnectError(e.p("CreatePolicy", {"policy": pol}), 400,
                                              "invalid_argument")
                self.assertTrue(msg.startswith(field + ":"), msg)
                self.assertIn(algorithm or "is no duration", msg)
                # UpdatePolicy checks the same, and changes nothing.
                upd = dict(existing)
                upd.update(change)
                msg = self.assertConnectError(e.p("UpdatePolicy", {"policy": upd}), 400,
                                              "invalid_argument")
                self.assertTrue(msg.startswith(field + ":"), msg)
        self.assertEqual(e.get(existing["name"]), existing)
        self.assertEqual(int(self.sql("SELECT COUNT(*) FROM policies")[0][0]),
                         int(before[0][0]) + 1)

class LoginPolicyTest(AdminCase):
    """A permitd of its own: the first login it sees creates "_login"."""

    def test_the_login_throttle_policy_is_written_by_sync_lua(self):
        # "_login" is written like every policy hash, by lua/sync.lua (the
        # one writer of the layout): its write sends the change notice
        # every instance reloads on, and its version is the script's.
        redis = Redis()
        self.addCleanup(redis.close)
        key = "%s{_login}:policy" % self.prefix
        self.assertEqual(redis("EXISTS", key), 0)
        sub = Redis()
        self.addCleanup(sub.close)
        if hasattr(sub, "nodes"):
            self.skipTest("SUBSCRIBE through the cluster client: the single-Redis run covers it")
        sub._send(("SUBSCRIBE", self.prefix + "changes"))
        sub._reply()
        self.assertEqual(self.client().login(EDITOR, "wrong password!").status, 401)
        flat = redis("HGETALL", key) or []
        h = dict(zip(flat[0::2], flat[1::2]))
        self.assertEqual((h.get("name"), h.get("max_permits"), h.get("rate"), h.get("apps"),
                          h.get("enabled"), h.get("version")),
                         ("_login", "5", "0.1", "*", "1", "1"), h)
        sub.sock.settimeout(5)
        self.assertEqual(sub._reply(), ["message", self.prefix + "changes", "_login 1"])


# ---------------------------------------------------------------- write-through

class WriteThroughTest(AdminCase):
    """Sync passes are 10 minutes apart here: only the write-through can put a
    change into Redis before the next Acquire."""

    SYNC_INTERVAL_MS = 600000

    def test_next_acquire_sees_create_update_delete(self):
        e = self.editor()
        api = self.api()
        name = self.name("wt")
        # A name unknown to Redis before.
        self.assertEqual(error_code(api.acquire(name)), "not_found")
        redis = Redis()
        self.addCleanup(redis.close)
        key = "%s{%s}:policy" % (self.prefix, name)

        def redis_policy():
            flat = redis("HGETALL", key) or []
            return dict(zip(flat[0::2], flat[1::2]))

        pol = e.create(name, max_permits=10, rate="0.001")
        # In Redis when the RPC returns, before any Acquire asked for it.
        self.assertEqual(redis_policy().get("max_permits"), "10")
        self.assertEqual(redis_policy().get("version"), pol["version"])
        d = decision(api.acquire(name))
        self.assertTrue(d["allowed"], d)
        self.assertEqual((d["limit"], d["remaining"]), (10, 9))
        for _ in range(2):
            api.acquire(name)

        pol = e.ok(e.update(pol, maxPermits="3"))["policy"]
        self.assertEqual(redis_policy().get("max_permits"), "3")
        d = decision(api.peek(name))
        self.assertEqual(d["limit"], 3)
        self.assertLessEqual(d["remaining"], 3)

        # apps and enabled go through as well
        pol = e.ok(e.update(pol, apps=["other"]))["policy"]
        self.assertEqual(error_code(api.acquire(name)), "permission_denied")
        self.assertEqual(decision(api.peek(name, app="other"))["limit"], 3)
        pol = e.ok(e.update(pol, enabled=False))["policy"]
        self.assertEqual(error_code(api.acquire(name, app="other")), "failed_precondition")
        pol = e.ok(e.update(pol, enabled=True, maxPermits="7"))["policy"]
        self.assertEqual(decision(api.acquire(name, app="other"))["limit"], 7)

        e.ok(e.p("DeletePolicy", {"name": name, "version": pol["version"]}))
        self.assertEqual(error_code(api.acquire(name, app="other")), "not_found")
        self.assertEqual(error_code(api.peek(name, app="other")), "not_found")
        self.assertEqual(redis_policy(), {})

    def test_colocate_round_trip(self):
        # colocate: off by default; set through the admin RPC it is in
        # MySQL, in the Redis hash, and in force for the next Acquire (the
        # key's bucket in the policy's slot, so an all_or_nothing batch
        # across keys is one script call; without it the batch is held slot
        # by slot since issue 38); cleared, the keys spread again.
        e = self.editor()
        api = self.api()
        name = self.name("co")
        redis = Redis()
        self.addCleanup(redis.close)
        pol = e.create(name, max_permits=10, rate="0.001")
        self.assertNotIn("colocate", pol)               # proto3 JSON: false is left out
        self.assertEqual(mysql("SELECT colocate FROM policies WHERE name = '%s'" % name,
                               database=self.db), [["0"]])
        batch = {"allOrNothing": True, "requests": [
            {"bucket": name, "app": "app", "key": "u"}, {"bucket": name, "app": "app", "key": "v"}]}
        r = api.rpc_json("AcquireBatch", batch)
        self.assertEqual(r.status, 200, r)
        self.assertEqual([x["response"]["remaining"] for x in r.json()["results"]], ["9", "9"])
        self.assertIsNotNone(redis("GET", state_key(name, "u", self.prefix)))     # spread
        pol = e.ok(e.update(pol, colocate=True))["policy"]
        self.assertIs(pol["colocate"], True)
        self.assertEqual(e.get(name)["colocate"], True)
        self.assertEqual(mysql("SELECT colocate FROM policies WHERE name = '%s'" % name,
                               database=self.db), [["1"]])
        self.assertEqual(redis("HGET", "%s{%s}:policy" % (self.prefix, name), "colocate"), "1")
        r = api.rpc_json("AcquireBatch", batch)
        self.assertEqual(r.status, 200, r)
        self.assertEqual([x["response"]["remaining"] for x in r.json()["results"]], ["9", "9"])
        self.assertIsNotNone(redis("GET", state_key(name, "u", self.prefix, colocate=True)))
        pol = e.ok(e.update(pol, colocate=False))["policy"]
        self.assertNotIn("colocate", pol)
        self.assertTrue(decision(api.acquire(name, key="w"))["allowed"])
        self.assertIsNotNone(redis("GET", state_key(name, "w", self.prefix)))

    def test_names_and_apps_differ_by_case(self):
        # The API and Redis compare names exactly, and so does MySQL: a
        # policy "X" beside "x" is another policy, "Billing" another app;
        # deleting one leaves the other, in MySQL and in Redis.
        e = self.editor()
        api = self.api()
        lower = self.name("case")
        upper = lower.upper()
        e.create(lower, apps=("billing", "Billing"))
        pol = e.create(upper, apps=("app",))
        self.assertEqual(sorted(e.get(lower)["apps"]), ["Billing", "billing"])
        self.assertEqual(decision(api.acquire(lower, app="billing"))["limit"], 10)
        self.assertEqual(decision(api.acquire(lower, app="Billing"))["limit"], 10)
        e.ok(e.p("DeletePolicy", {"name": upper, "version": pol["version"]}))
        self.assertEqual(error_code(api.acquire(upper)), "not_found")
        self.assertEqual(e.get(lower)["name"], lower)
        self.assertEqual(decision(api.acquire(lower, app="billing"))["limit"], 10)


# ---------------------------------------------------------------- versions

class VersionTest(AdminCase):

    def test_update_with_current_version_bumps_it(self):
        e = self.editor()
        name = self.name("ver")
        v1 = e.create(name, max_permits=10)
        v2 = e.ok(e.update(v1, maxPermits="20", description="bigger"))["policy"]
        self.assertGreater(int(v2["version"]), int(v1["version"]))
        self.assertEqual(v2["maxPermits"], "20")
        self.assertEqual(v2["description"], "bigger")
        self.assertEqual(v2["createdBy"], EDITOR)
        self.assertEqual(v2["createdAt"], v1["createdAt"])
        self.assertEqual(e.get(name), v2)

    def test_stale_version_is_aborted_and_changes_nothing(self):
        e1, e2 = self.editor(), self.editor()
        name = self.name("stale")
        seen = e1.create(name, max_permits=10)
        won = e2.ok(e2.update(seen, maxPermits="15"))["policy"]
        r = e1.update(seen, maxPermits="50")
        msg = self.assertConnectError(r, 409, "aborted")
        self.assertIn("version", msg)
        now = e1.get(name)
        self.assertEqual(now, won)
        self.assertEqual(now["maxPermits"], "15")
        self.assertEqual([c["action"] for c in e1.history(name)], ["update", "create"])
        # A version from the future is no better.
        r = e1.update(now, version=str(int(now["version"]) + 5))
        self.assertConnectError(r, 409, "aborted")

    def test_a_retried_write_that_was_applied_answers_success(self):
        # Issue 22: a client that timed out after its write was committed
        # sends it again. The same update (version one behind, every field
        # as committed, same editor) and the same create are the write
        # already made: success with the committed policy, not aborted or
        # already_exists, and nothing is written twice.
        e = self.editor()
        name = self.name("retry")
        created = e.create(name, max_permits=10, rate="0.50", apps=("b", "a"))
        again = e.ok(e.p("CreatePolicy", {"policy": {
            "name": name, "apps": ["a", "b", "a"], "maxPermits": "10", "rate": "0.5",
            "description": "made by a test", "enabled": True, "failureMode": "closed"}}))
        self.assertEqual(again["policy"], created)
        edit = dict(created, maxPermits="20", description="bigger", rate="0.25")
        first = e.ok(e.p("UpdatePolicy", {"policy": edit}))["policy"]
        self.assertEqual(int(first["version"]), int(created["version"]) + 1)
        retry = e.ok(e.p("UpdatePolicy", {"policy": edit}))["policy"]
        self.assertEqual(retry, first)
        self.assertEqual(e.get(name), first)
        self.assertEqual([c["action"] for c in e.history(name)], ["update", "create"])
        # Not the same write: another value, an older version, another
        # editor's change in between: still aborted / already_exists.
        self.assertConnectError(e.p("UpdatePolicy", {"policy": dict(edit, maxPermits="21")}),
                                409, "aborted")
        self.assertConnectError(e.p("CreatePolicy", {"policy": {
            "name": name, "apps": ["a", "b"], "maxPermits": "10", "rate": "0.5",
            "description": "made by a test", "enabled": True, "failureMode": "closed"}}),
            409, "already_exists")
        self.sql("UPDATE policies SET description = 'bigger' WHERE name = '%s'" % name)
        self.assertConnectError(e.p("UpdatePolicy", {"policy": edit}), 409, "aborted")

    def test_a_retried_delete_that_was_applied_answers_success(self):
        # Issue 22: a DeletePolicy whose answer was lost, sent again, found
        # no policy and answered not_found, as for a name that never was.
        # The name's last audit row tells the two apart: a delete by this
        # editor, of the version sent, less than ten minutes ago.
        e = self.editor()
        name = self.name("delretry")
        v1 = e.create(name, max_permits=10)
        v2 = e.ok(e.update(v1, maxPermits="11"))["policy"]
        e.ok(e.p("DeletePolicy", {"name": name, "version": v2["version"]}))
        again = e.p("DeletePolicy", {"name": name, "version": v2["version"]})
        self.assertEqual(again.status, 200, again)
        self.assertEqual(again.json(), {})
        self.assertIn("policy delete retried: already applied", self.permitd.output())
        self.assertEqual([c["action"] for c in e.history(name)], ["delete", "update", "create"])
        self.assertConnectError(e.p("GetPolicy", {"name": name}), 404, "not_found")
        self.assertEqual(error_code(self.api().acquire(name)), "not_found")
        # version 0 ("whatever it is now") retried: success as well.
        any_version = self.name("delretry0")
        e.create(any_version)
        e.ok(e.p("DeletePolicy", {"name": any_version}))
        e.ok(e.p("DeletePolicy", {"name": any_version}))
        # Not this delete's retry: still not_found. A name that never was;
        # another version than the one deleted; another editor; a delete
        # made with plain SQL; and the retry window (10 min) gone by.
        self.assertConnectError(e.p("DeletePolicy", {"name": self.name("never"), "version": "1"}),
                                404, "not_found")
        self.assertConnectError(e.p("DeletePolicy", {"name": self.name("never")}), 404,
                                "not_found")
        self.assertConnectError(e.p("DeletePolicy", {"name": name, "version": v1["version"]}),
                                404, "not_found")
        other = "ed2"
        self.add_user(other, EDITOR_PW, "editor")
        e2 = self.client()
        self.ok_login(e2, other, EDITOR_PW)
        self.assertConnectError(e2.p("DeletePolicy", {"name": name, "version": v2["version"]}),
                                404, "not_found")
        by_sql = self.name("delsql")
        e.create(by_sql)
        self.sql("DELETE FROM policies WHERE name = '%s'" % by_sql)
        self.assertConnectError(e.p("DeletePolicy", {"name": by_sql}), 404, "not_found")
        self.sql("UPDATE policy_audit SET changed_at = changed_at - INTERVAL 601 SECOND "
                 "WHERE name = '%s'" % name)
        self.assertConnectError(e.p("DeletePolicy", {"name": name, "version": v2["version"]}),
                                404, "not_found")
        # Deleted, then made again and deleted by another editor: the last
        # delete is not this editor's, so their stale retry is not_found.
        again_name = self.name("delagain")
        first = e.create(again_name)
        e.ok(e.p("DeletePolicy", {"name": again_name, "version": first["version"]}))
        second = e2.create(again_name)
        e2.ok(e2.p("DeletePolicy", {"name": again_name, "version": second["version"]}))
        self.assertConnectError(e.p("DeletePolicy", {"name": again_name,
                                                     "version": first["version"]}),
                                404, "not_found")

    def test_update_without_version_is_invalid(self):
        e = self.editor()
        name = self.name("nover")
        pol = e.create(name, max_permits=10)
        for v in (None, "0"):
            with self.subTest(version=v):
                p = dict(pol, maxPermits="11")
                if v is None:
                    del p["version"]
                else:
                    p["version"] = v
                r = e.p("UpdatePolicy", {"policy": p})
                msg = self.assertConnectError(r, 400, "invalid_argument")
                self.assertIn("version", msg)
        self.assertEqual(e.get(name), pol)

    def test_update_of_a_missing_policy_is_not_found(self):
        e = self.editor()
        r = e.p("UpdatePolicy", {"policy": {"name": self.name("ghost"), "apps": ["app"],
                                            "maxPermits": "1", "rate": "1", "version": "1"}})
        self.assertConnectError(r, 404, "not_found")

    def test_plain_sql_update_makes_the_editors_version_stale(self):
        e = self.editor()
        name = self.name("dba")
        seen = e.create(name, max_permits=10)
        self.sql("UPDATE policies SET description = 'changed by the DBA' WHERE name = '%s'" % name)
        r = e.update(seen, maxPermits="12")
        self.assertConnectError(r, 409, "aborted")
        now = e.get(name)
        self.assertEqual(now["maxPermits"], "10")
        self.assertEqual(now["description"], "changed by the DBA")
        self.assertGreater(int(now["version"]), int(seen["version"]))
        # Reloaded, the edit goes in.
        self.assertEqual(e.ok(e.update(now, maxPermits="12"))["policy"]["maxPermits"], "12")

    def test_plain_sql_app_change_makes_the_editors_version_stale(self):
        # Issue 17: an app a DBA adds in policy_apps changed neither version
        # nor audit, and the editor's UpdatePolicy built on the old version
        # went through and silently dropped it. Every path counts: a plain
        # INSERT, the natural INSERT ... SELECT FROM policies (a trigger that
        # wrote policies would fail it with error 1442), UPDATE and DELETE.
        e = self.editor()
        name = self.name("dbapps")
        seen = e.create(name, max_permits=10, apps=("app",))
        self.sql("INSERT INTO policy_apps (policy_id, app) SELECT id, 'dba-app' FROM policies "
                 "WHERE name = '%s'" % name)
        r = e.update(seen, maxPermits="12")
        self.assertConnectError(r, 409, "aborted")
        now = e.get(name)
        self.assertEqual(sorted(now["apps"]), ["app", "dba-app"])
        self.assertEqual(now["maxPermits"], "10")
        self.assertEqual(int(now["version"]), int(seen["version"]) + 1)
        # Each later change by plain SQL is a new version as well.
        for stmt in ("UPDATE policy_apps SET app = 'dba-app2' WHERE app = 'dba-app' AND "
                     "policy_id = (SELECT id FROM policies WHERE name = '%s')",
                     "DELETE FROM policy_apps WHERE app = 'dba-app2' AND "
                     "policy_id IN (SELECT id FROM policies WHERE name = '%s')"):
            before = now
            self.sql(stmt % name)
            self.assertConnectError(e.update(before, maxPermits="12"), 409, "aborted")
            now = e.get(name)
            self.assertEqual(int(now["version"]), int(before["version"]) + 1, stmt)
        self.assertEqual(now["apps"], ["app"])
        # Reloaded, the edit goes in, once: one version, one audit row.
        done = e.ok(e.update(now, maxPermits="12", apps=["app", "web"]))["policy"]
        self.assertEqual(int(done["version"]), int(now["version"]) + 1)
        self.assertEqual(sorted(done["apps"]), ["app", "web"])
        self.assertEqual([(c["action"], c["actor"]) for c in e.history(name)][0:2],
                         [("update", EDITOR), ("update", "root@localhost")])
        self.assertEqual(len(e.history(name)), 5, "create, 3 by SQL, 1 by the editor")
        # Redis holds the version MySQL shows (written through at once).
        redis = Redis()
        self.addCleanup(redis.close)
        key = "%s{%s}:policy" % (self.prefix, name)
        self.assertEqual(redis("HGET", key, "version"), done["version"])
        self.assertEqual(redis("HGET", key, "apps"), "app,web")

    def test_delete_checks_the_version(self):
        e = self.editor()
        name = self.name("del")
        v1 = e.create(name, max_permits=10)
        v2 = e.ok(e.update(v1, maxPermits="11"))["policy"]
        r = e.p("DeletePolicy", {"name": name, "version": v1["version"]})
        self.assertConnectError(r, 409, "aborted")
        self.assertEqual(e.get(name), v2)
        e.ok(e.p("DeletePolicy", {"name": name, "version": v2["version"]}))
        self.assertConnectError(e.p("GetPolicy", {"name": name}), 404, "not_found")
        # (the same delete again is its retry: test_a_retried_delete_...)
        self.assertConnectError(e.p("DeletePolicy", {"name": name, "version": v1["version"]}),
                                404, "not_found")
        self.assertEqual(error_code(self.api().acquire(name)), "not_found")
        # version 0 = whatever it is now
        other = self.name("del0")
        e.create(other)
        e.ok(e.p("DeletePolicy", {"name": other}))
        self.assertConnectError(e.p("GetPolicy", {"name": other}), 404, "not_found")


# ---------------------------------------------------------------- history

class HistoryTest(AdminCase):

    def test_create_update_delete_rows_newest_first(self):
        e = self.editor()
        name = self.name("hist")
        v1 = e.create(name, max_permits=10, apps=("app", "web"))
        v2 = e.ok(e.update(v1, maxPermits="20"))["policy"]
        e.ok(e.p("DeletePolicy", {"name": name, "version": v2["version"]}))
        changes = e.history(name)
        self.assertEqual([c["action"] for c in changes], ["delete", "update", "create"])
        for c in changes:
            self.assertEqual(c["actor"], EDITOR)
            self.assertRegex(c["changedAt"], RFC3339)
        stamps = [c["changedAt"] for c in changes]
        self.assertEqual(stamps, sorted(stamps, reverse=True))

        dele, upd, cre = changes
        self.assertEqual(cre.get("oldValue", ""), "")
        new = json.loads(cre["newValue"])
        self.assertEqual(int(new["max_permits"]), 10)
        self.assertEqual(new["name"], name)
        self.assertEqual(apps_of(new), ["app", "web"])

        old, new = json.loads(upd["oldValue"]), json.loads(upd["newValue"])
        self.assertEqual((int(old["max_permits"]), int(new["max_permits"])), (10, 20))
        self.assertEqual(apps_of(old), ["app", "web"])
        self.assertEqual(apps_of(new), ["app", "web"])
        self.assertEqual(int(new["version"]), int(v2["version"]))

        self.assertEqual(dele.get("newValue", ""), "")
        self.assertEqual(int(json.loads(dele["oldValue"])["max_permits"]), 20)

        # limit: newest first, cut
        one = e.ok(e.p("ListPolicyHistory", {"name": name, "limit": 1}))["changes"]
        self.assertEqual([c["action"] for c in one], ["delete"])

    def test_apps_change_is_in_the_audit_row(self):
        e = self.editor()
        name = self.name("happs")
        v1 = e.create(name, apps=("app",))
        e.ok(e.update(v1, apps=["app", "mobile"]))
        upd = e.history(name)[0]
        self.assertEqual(apps_of(json.loads(upd["oldValue"])), ["app"])
        self.assertEqual(apps_of(json.loads(upd["newValue"])), ["app", "mobile"])

    def test_plain_sql_change_appears_with_the_mysql_user(self):
        # The DBA is a MySQL user of their own, not the one that ran the
        # migrations (a trigger's CURRENT_USER() would name that one).
        e = self.editor()
        name = self.name("hsql")
        e.create(name, max_permits=10)
        user = unique("dba").replace("-", "_")[:30]
        mysql("CREATE USER '%s'@'localhost' IDENTIFIED BY 'pw'; "
              "GRANT ALL ON `%s`.* TO '%s'@'localhost'" % (user, self.db, user))
        self.addCleanup(mysql, "DROP USER '%s'@'localhost'" % user)
        root = stack_env()["PERMITD_TEST_MYSQL_ROOT_URL"]
        mysql("UPDATE policies SET max_permits = 30 WHERE name = '%s'" % name,
              url=root.replace("root@", "%s:pw@" % user, 1), database=self.db)
        dba = user + "@localhost"
        changes = e.history(name)
        self.assertEqual([(c["action"], c["actor"]) for c in changes],
                         [("update", dba), ("create", EDITOR)])
        old, new = json.loads(changes[0]["oldValue"]), json.loads(changes[0]["newValue"])
        self.assertEqual((int(old["max_permits"]), int(new["max_permits"])), (10, 30))
        # The editor's own later change is again the editor's, not the DBA's
        # (and the DBA's trigger stays quiet for it: one row per change).
        now = e.get(name)
        e.ok(e.update(now, maxPermits="31"))
        changes = e.history(name)
        self.assertEqual([(c["action"], c["actor"]) for c in changes],
                         [("update", EDITOR), ("update", dba), ("create", EDITOR)])

    def test_plain_sql_app_change_appears_with_the_mysql_user(self):
        e = self.editor()
        name = self.name("hsqlapp")
        v1 = e.create(name, max_permits=10, apps=("app",))
        user = unique("dbapp").replace("-", "_")[:30]
        mysql("CREATE USER '%s'@'localhost' IDENTIFIED BY 'pw'; "
              "GRANT ALL ON `%s`.* TO '%s'@'localhost'" % (user, self.db, user))
        self.addCleanup(mysql, "DROP USER '%s'@'localhost'" % user)
        root = stack_env()["PERMITD_TEST_MYSQL_ROOT_URL"]
        dba_url = root.replace("root@", "%s:pw@" % user, 1)
        mysql("INSERT INTO policy_apps (policy_id, app) VALUES (%s, 'mobile')"
              % self.sql("SELECT id FROM policies WHERE name = '%s'" % name)[0][0],
              url=dba_url, database=self.db)
        dba = user + "@localhost"
        changes = e.history(name)
        self.assertEqual([(c["action"], c["actor"]) for c in changes],
                         [("update", dba), ("create", EDITOR)])
        old, new = json.loads(changes[0]["oldValue"]), json.loads(changes[0]["newValue"])
        self.assertEqual((apps_of(old), apps_of(new)), (["app"], ["app", "mobile"]))
        now = e.get(name)
        self.assertEqual(int(now["version"]), int(v1["version"]) + 1)
        self.assertEqual((int(old["version"]), int(new["version"])),
                         (int(v1["version"]), int(now["version"])))
        self.assertEqual(int(new["max_permits"]), 10)
        # A plain UPDATE of the policy row names the version permitd shows.
        mysql("UPDATE policies SET max_permits = 11 WHERE name = '%s'" % name,
              url=dba_url, database=self.db)
        changes = e.history(name)
        new = json.loads(changes[0]["newValue"])
        self.assertEqual(int(new["version"]), int(e.get(name)["version"]))
        self.assertEqual(apps_of(new), ["app", "mobile"])


# ---------------------------------------------------------------- buckets

class BucketTest(AdminCase):

    def test_list_policies_names_the_rows_the_sync_skips(self):
        # Issue 17: the admin UI's policy list shows a notice for rows of
        # MySQL the sync leaves out (here an app row "pay,admin" a DBA
        # inserted): ListPolicies carries them, one line each.
        e = self.editor()
        name = self.name("skip")
        e.create(name, apps=("app",))
        self.sql("INSERT INTO policy_apps (policy_id, app) SELECT id, 'pay,admin' FROM policies "
                 "WHERE name = '%s'" % name)
        self.addCleanup(self.sql, "DELETE FROM policy_apps WHERE app = 'pay,admin'")
        rows = wait_for("skipped rows", lambda: e.ok(e.p("ListPolicies")).get("skippedRows"),
                        5)
        self.assertEqual(len(rows), 1, rows)
        self.assertIn("an app of policy %s" % name, rows[0])
        self.assertIn('"pay,admin" is not a valid name', rows[0])
        # A viewer sees them too (read-only), and they go once fixed.
        v = self.viewer()
        self.assertEqual(v.ok(v.p("ListPolicies")).get("skippedRows"), rows)
        self.sql("DELETE FROM policy_apps WHERE app = 'pay,admin'")
        wait_for("no skipped rows", lambda: not e.ok(e.p("ListPolicies")).get("skippedRows"), 5)

    def test_list_policies_with_buckets(self):
        e = self.editor()
        a, b = self.name("lb-a"), self.name("lb-b")
        e.create(a, max_permits=10, rate="0.001")
        e.create(b, max_permits=5, rate="0.001")
        api = self.api()
        for _ in range(3):
            self.assertTrue(decision(api.acquire(a))["allowed"])

        plain = e.ok(e.p("ListPolicies"))
        self.assertEqual(plain.get("buckets", []), [])
        names = [p["name"] for p in plain["policies"]]
        self.assertEqual(names, sorted(names))

        body = e.ok(e.p("ListPolicies", {"includeBuckets": True}))
        pols, buckets = body["policies"], body["buckets"]
        self.assertEqual(len(pols), len(buckets))
        self.assertEqual([x["policy"] for x in buckets], [p["name"] for p in pols])
        by = {x["policy"]: x for x in buckets}
        self.assertEqual(num(by[a], "remaining"), 7)
        self.assertEqual(num(by[a], "limit"), 10)
        self.assertAlmostEqual(by[a].get("tokens", 0), 7, delta=0.1)
        self.assertGreater(num(by[a], "resetAfterMs"), 0)
        self.assertEqual(num(by[b], "remaining"), 5)
        self.assertEqual(num(by[b], "limit"), 5)

        self.assertTrue(decision(api.acquire(a))["allowed"])
        body = e.ok(e.p("ListPolicies", {"includeBuckets": True}))
        by = {x["policy"]: x for x in body["buckets"]}
        self.assertEqual(num(by[a], "remaining"), 6)

    def test_get_bucket_reflects_a_key_and_reset_fills_it(self):
        e = self.editor()
        name = self.name("gb")
        e.create(name, max_permits=10, rate="0.001")
        api = self.api()
        for _ in range(4):
            self.assertTrue(decision(api.acquire(name, key="user-1"))["allowed"])
        self.assertTrue(decision(api.acquire(name, key="user-2"))["allowed"])

        b = e.bucket(name, "user-1")
        self.assertEqual((b["policy"], b["key"]), (name, "user-1"))
        self.assertEqual((num(b, "remaining"), num(b, "limit")), (6, 10))
        self.assertAlmostEqual(b.get("tokens", 0), 6, delta=0.1)
        self.assertGreater(num(b, "resetAfterMs"), 0)
        self.assertEqual(num(e.bucket(name, "user-2"), "remaining"), 9)
        shared = e.bucket(name)
        self.assertEqual(num(shared, "remaining"), 10)
        self.assertEqual(num(shared, "resetAfterMs"), 0)

        r = e.ok(e.p("ResetBucket", {"name": name, "key": "user-1"}))["bucket"]
        self.assertEqual((num(r, "remaining"), num(r, "limit")), (10, 10))
        self.assertEqual(num(e.bucket(name, "user-1"), "remaining"), 10)
        self.assertEqual(decision(api.peek(name, key="user-1"))["remaining"], 10)
        # only that key
        self.assertEqual(num(e.bucket(name, "user-2"), "remaining"), 9)

        # the shared bucket
        for _ in range(10):
            api.acquire(name)
        self.assertFalse(decision(api.acquire(name))["allowed"])
        self.assertEqual(num(e.bucket(name), "remaining"), 0)
        e.ok(e.p("ResetBucket", {"name": name}))
        self.assertTrue(decision(api.acquire(name))["allowed"])

    def test_bucket_of_a_missing_policy_is_not_found(self):
        e = self.editor()
        self.assertConnectError(e.p("GetBucket", {"name": self.name("none")}), 404, "not_found")


# ---------------------------------------------------------------- stats

class StatsTest(AdminCase):

    def test_series_sums_to_allowed_and_denied(self):
        e = self.editor()
        name, other = self.name("st"), self.name("st-other")
        e.create(name, max_permits=3, rate="0.001")
        e.create(other, max_permits=100, rate="1")
        api = self.api()
        allowed = denied = 0
        for _ in range(7):
            if decision(api.acquire(name))["allowed"]:
                allowed += 1
            else:
                denied += 1
        self.assertEqual((allowed, denied), (3, 4))
        for _ in range(5):
            api.acquire(other)

        body = e.ok(e.p("GetPolicyStats", {"name": name, "seconds": 20}))
        a = [int(x) for x in body.get("allowed", [])]
        d = [int(x) for x in body.get("denied", [])]
        self.assertEqual((len(a), len(d)), (20, 20))
        self.assertEqual((sum(a), sum(d)), (allowed, denied))
        self.assertLessEqual(abs(int(body["endUnix"]) - time.time()), 5)

        default = e.ok(e.p("GetPolicyStats", {"name": name}))
        self.assertEqual(len(default["allowed"]), 300)
        self.assertEqual(len(default["denied"]), 300)
        self.assertEqual(sum(int(x) for x in default["allowed"]), allowed)
        self.assertEqual(sum(int(x) for x in default["denied"]), denied)

        o = e.ok(e.p("GetPolicyStats", {"name": other, "seconds": 20}))
        self.assertEqual(sum(int(x) for x in o["allowed"]), 5)
        self.assertEqual(sum(int(x) for x in o.get("denied", [])), 0)


# ---------------------------------------------------------------- API listener

class ApiListenerTest(AdminCase):

    def test_api_port_does_not_serve_admin_rpcs(self):
        e = self.editor()
        name = self.name("api")
        api = Http(self.permitd.port)
        origin = "http://127.0.0.1:%d" % self.permitd.port
        h = {"Content-Type": "application/json", "Cookie": "permitd_session=" + e.cookie}
        for service, method, msg in [
                (POLICY, "ListPolicies", {}),
                (POLICY, "CreatePolicy", {"policy": {"name": name, "apps": ["app"],
                                                     "maxPermits": "5", "rate": "1"}}),
                (AUTH, "Login", {"username": EDITOR, "password": EDITOR_PW}),
                (AUTH, "WhoAmI", {})]:
            for hdrs in (h, dict(h, Origin=origin), dict(h, Origin=e.origin)):
                with self.subTest(method=method, origin=hdrs.get("Origin")):
                    r = api.request("POST", "/%s/%s" % (service, method),
                                    json.dumps(msg).encode(), hdrs)
                    self.assertEqual(r.status, 404, r)
                    self.assertNotIn("set-cookie", r.headers)
        r = api.request("GET", "/%s/ListPolicies?connect=v1&encoding=json&message=%%7B%%7D"
                        % POLICY, None, {"Cookie": h["Cookie"]})
        self.assertEqual(r.status, 404, r)
        self.assertConnectError(e.p("GetPolicy", {"name": name}), 404, "not_found")
        # The admin port does not serve Acquire either.
        r = e.call("permit.v1.RateLimitService", "Acquire", {"bucket": name, "app": "app"})
        self.assertEqual(r.status, 404, r)


# ---------------------------------------------------------------- add-user

class AddUserTest(AdminCase):

    def test_short_password_is_refused(self):
        for pw in ("", "short", "1234567"):
            with self.subTest(pw=pw):
                rc, out = run_permitd(["admin", "add-user", "shorty", "--role", "editor"],
                                      stdin=pw + "\n", mysql_url=self.mysql_url)
                self.assertEqual(rc, 2, out)
                self.assertIn("8", out)
        self.assertEqual(self.sql("SELECT COUNT(*) FROM admin_users WHERE username = 'shorty'"),
                         [["0"]])

    def test_unknown_role_is_refused(self):
        for role in ("root", "ADMIN", "EDITOR", ""):
            with self.subTest(role=role):
                rc, out = run_permitd(["admin", "add-user", "rooty", "--role", role],
                                      stdin="long-enough-password\n", mysql_url=self.mysql_url)
                self.assertEqual(rc, 2, out)
        rc, out = run_permitd(["admin", "add-user", "rooty"], stdin="long-enough-password\n",
                              mysql_url=self.mysql_url)
        self.assertEqual(rc, 2, out)
        self.assertEqual(self.sql("SELECT COUNT(*) FROM admin_users WHERE username = 'rooty'"),
                         [["0"]])

    def test_existing_user_gets_a_new_password(self):
        self.add_user("rotate", "first-password", "viewer")
        c = self.client()
        self.assertEqual(c.ok(c.login("rotate", "first-password"))["role"], "viewer")
        self.add_user("rotate", "second-password", "editor")
        self.assertConnectError(self.client().login("rotate", "first-password"), 401,
                                "unauthenticated")
        # The session made with the old password has ended too.
        self.assertConnectError(c.a("WhoAmI"), 401, "unauthenticated")
        d = self.client()
        self.assertEqual(d.ok(d.login("rotate", "second-password")),
                         {"username": "rotate", "role": "editor"})
        self.assertEqual(self.sql("SELECT COUNT(*) FROM admin_users WHERE username = 'rotate'"),
                         [["1"]])


# ---------------------------------------------------------------- headers

class NoStoreTest(AdminCase):
    """What the admin listener answers besides the UI's files is live or
    private: no cache may keep it, no browser may sniff it into HTML."""

    def assertNoStore(self, r):
        self.assertEqual(r.headers.get("cache-control"), "no-store", r)
        self.assertEqual(r.headers.get("x-content-type-options"), "nosniff", r)

    def test_rpcs_health_and_metrics_say_no_store_and_nosniff(self):
        c = self.client()
        for path in ("/readyz", "/metrics", "/healthz"):
            with self.subTest(path=path):
                self.assertNoStore(c.request("GET", path))
        # Admin RPCs: answers and errors of every kind.
        r = c.login(EDITOR, EDITOR_PW)
        self.assertEqual(r.status, 200, r)
        self.assertNoStore(r)
        for reply, status in ((c.a("WhoAmI"), 200), (c.p("ListPolicies"), 200),
                              (c.p("GetPolicy", {"name": "no-such-policy"}), 404),
                              (self.client().a("WhoAmI"), 401),
                              (self.client().login(EDITOR, "wrong-password"), 401),
                              (c.p("ListPolicies", origin="http://evil.example"), 403),
                              (c.request("GET", "/permit.v1.PolicyService/GetPolicy?connect=v1"
                                         "&encoding=json&message=%7B%22name%22%3A%22x%22%7D",
                                         headers={"Cookie": "permitd_session=" + c.cookie}), 404),
                              (c.request("GET", "/no/such/page"), 404)):
            with self.subTest(reply=reply):
                self.assertEqual(reply.status, status, reply)
                self.assertNoStore(reply)
        # The UI's files keep their own caching (revalidated, not banned).
        r = c.request("GET", "/")
        self.assertEqual(r.headers.get("cache-control"), "no-cache", r)
        self.assertEqual(r.headers.get("x-content-type-options"), "nosniff", r)


# ---------------------------------------------------------------- UI files

class UiTest(AdminCase):

    def test_index_is_served_at_root(self):
        c = self.client()
        r = c.request("GET", "/")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(content_type(r), "text/html", r)
        self.assertIn(b"<html", r.body.lower())
        with open(os.path.join(harness.SOURCE_DIR, "admin-ui", "index.html"), "rb") as f:
            self.assertEqual(r.body, f.read())          # the embedded copy, byte for byte
        self.assertIn("default-src 'self'", r.headers["content-security-policy"])

    def test_ui_dir_serves_files_from_disk(self):
        import tempfile
        d = tempfile.mkdtemp(prefix="permitd-ui-")
        with open(os.path.join(d, "index.html"), "w") as f:
            f.write("<html>edited on disk</html>")
        with open(os.path.join(d, "app.js"), "w") as f:
            f.write("console.log('dev');")
        p = Permitd(prefix=harness.unique("ui") + ":", args=["--admin-ui-dir", d])
        self.addCleanup(p.stop)
        a = p.admin()
        self.assertEqual(a.request("GET", "/").body, b"<html>edited on disk</html>")
        r = a.request("GET", "/ui/app.js")
        self.assertEqual(r.status, 200)
        self.assertTrue(r.headers["content-type"].startswith("text/javascript"))
        self.assertEqual(a.request("GET", "/ui/style.css").status, 404)   # not in that dir

    def test_ui_modules_are_embedded_flat_and_served_as_javascript(self):
        """index.html loads app.js as an ES module, which imports the rest.
        Every module reached must be a file of admin-ui/ itself (the server
        serves /ui/NAME only, no subfolder), embedded byte for byte and
        served as text/javascript (a browser refuses a module of any other
        type), and every .js file of admin-ui/ must be reached."""
        c = self.client()
        ui_dir = os.path.join(harness.SOURCE_DIR, "admin-ui")
        index = c.request("GET", "/").body.decode()
        todo = re.findall(r'<script type="module" src="/ui/([^"]+)"></script>', index)
        self.assertEqual(todo, ["app.js"], "index.html's module scripts")
        reached = set()
        while todo:
            name = todo.pop()
            if name in reached:
                continue
            reached.add(name)
            r = c.request("GET", "/ui/" + name)
            self.assertEqual(r.status, 200, "/ui/%s: %r" % (name, r))
            self.assertEqual(content_type(r), "text/javascript", "/ui/%s: %r" % (name, r))
            with open(os.path.join(ui_dir, name), "rb") as f:
                self.assertEqual(r.body, f.read(), "/ui/%s differs from admin-ui/%s" % (name, name))
            text = r.body.decode()
            specs = re.findall(r'^(?:import|export)\b[^;"]*?\bfrom\s*"([^"]*)"', text, re.M)
            specs += re.findall(r'^import\s*"([^"]*)"', text, re.M)
            specs += re.findall(r'\bimport\s*\(\s*"([^"]*)"', text)
            for spec in specs:
                self.assertRegex(spec, r"^\./[A-Za-z0-9_-]+\.js$",
                                 "admin-ui/%s imports %r: only ./NAME.js beside it is served" % (name, spec))
                todo.append(spec[2:])
        on_disk = {n for n in os.listdir(ui_dir) if n.endswith(".js")}
        self.assertEqual(on_disk - reached, set(), "admin-ui/*.js that no module imports")

    def test_ui_files_are_sent_gzipped_when_the_client_accepts_gzip(self):
        """The embedded files are gzipped at build (issue 40, point 9): a
        client that accepts gzip gets them compressed, decompressing to the
        file; one that does not (no gzip, gzip;q=0) gets the plain file.
        Vary: Accept-Encoding on both, so a cache keeps them apart."""
        import gzip
        c = self.client()
        with open(os.path.join(harness.SOURCE_DIR, "admin-ui", "app.js"), "rb") as f:
            plain = f.read()
        for ae in ("gzip", "br, gzip, deflate", "gzip;q=0.5, identity", "*"):
            r = c.request("GET", "/ui/app.js", headers={"Accept-Encoding": ae})
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.headers.get("content-encoding"), "gzip", "%s: %r" % (ae, r))
            self.assertEqual(r.headers.get("vary"), "Accept-Encoding", r)
            self.assertEqual(content_type(r), "text/javascript", r)
            self.assertLess(len(r.body), len(plain), r)
            self.assertEqual(gzip.decompress(r.body), plain, ae)
        for ae in ("identity", "gzip;q=0", "br, gzip; q=0.0", "*;q=0", "*, gzip;q=0"):
            r = c.request("GET", "/ui/app.js", headers={"Accept-Encoding": ae})
            self.assertEqual(r.status, 200, r)
            self.assertNotIn("content-encoding", r.headers, "%s: %r" % (ae, r))
            self.assertEqual(r.headers.get("vary"), "Accept-Encoding", r)
            self.assertEqual(r.body, plain, ae)
        r = c.request("GET", "/", headers={"Accept-Encoding": "gzip"})
        with open(os.path.join(harness.SOURCE_DIR, "admin-ui", "index.html"), "rb") as f:
            self.assertEqual(gzip.decompress(r.body), f.read())

    def test_no_path_traversal(self):
        c = self.client()
        for path in ("/ui/../../etc/passwd", "/ui/%2e%2e/%2e%2e/etc/passwd",
                     "/ui/..%2f..%2fetc%2fpasswd", "/../../etc/passwd", "/ui//etc/passwd",
                     "/ui/../CMakeLists.txt"):
            with self.subTest(path=path):
                r = c.request("GET", path)
                self.assertEqual(r.status, 404, r)
                self.assertNotIn(b"root:", r.body)


if __name__ == "__main__":
    # Clients here are dropped, not closed; unittest would otherwise re-enable
    # the ResourceWarnings that harness.main() silences.
    unittest.main(verbosity=2, warnings="ignore")
