"""MySQL over TLS (issue 35): the store URL's ssl-mode, ssl-ca, ssl-cert and
ssl-key (docs/migrations.md "MySQL over TLS"), for the daemon and `permitd migrate`
alike, against a MariaDB of this test's own started with
require_secure_transport=ON and certificates the test makes with openssl:
a CA, a server certificate for 127.0.0.1 and localhost, one for
db.example.com only (swapped in with FLUSH SSL for the name check), a client
certificate, and a second CA that signed none of them.

The client-side files live in a directory whose name holds a space, and the
users' password holds '@', ':', '/', '%', '&', '?' and '#': the URL carries
them percent-encoded, and no message may hold the password either way.
"""
import os
import shutil
import subprocess
import tempfile
import unittest
from urllib.parse import quote

import harness
from harness import Permitd, PrivateMariaDB, decision, stack_env, unique, wait_for
from test_admin import AdminClient

PW = "p@ss:w/rd%&?#1"
EDITOR, EDITOR_PW = "ed", "editor-password-1"
SYNC_MS = 300


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True,
                   stdin=subprocess.DEVNULL)


def make_certs(d):
    """CA, server (SAN 127.0.0.1 + localhost), other (db.example.com only),
    client, and a wrong CA, as NAME.pem + NAME.key in d."""
    def key_and_csr(name, subject):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key",
                "-out", name + ".csr", "-subj", subject, cwd=d)

    def sign(name, ext=None):
        args = ["x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", name + ".pem", "-days", "2"]
        if ext:
            with open(os.path.join(d, name + ".ext"), "w") as f:
                f.write(ext + "\n")
            args += ["-extfile", name + ".ext"]
        openssl(*args, cwd=d)

    for ca in ("ca", "wrongca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca + ".key",
                "-out", ca + ".pem", "-days", "2", "-subj", "/CN=permitd test " + ca, cwd=d)
    key_and_csr("server", "/CN=localhost")
    sign("server", "subjectAltName=IP:127.0.0.1,DNS:localhost")
    key_and_csr("other", "/CN=db.example.com")
    sign("other", "subjectAltName=DNS:db.example.com")
    key_and_csr("client", "/CN=permitd client")
    sign("client")


class MysqlTlsCase(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="permitd-mysqltls-")
        cls.db = None
        try:
            cls.server_dir = os.path.join(cls.tmp, "server")     # mariadbd's options: no spaces
            cls.client_dir = os.path.join(cls.tmp, "client files")
            os.makedirs(cls.server_dir)
            make_certs(cls.server_dir)
            shutil.copytree(cls.server_dir, cls.client_dir)
            s = cls.server_dir
            for ext in ("pem", "key"):          # what the server serves: server_cert()
                shutil.copyfile("%s/server.%s" % (s, ext), "%s/served.%s" % (s, ext))
            cls.db = PrivateMariaDB(args=[
                "--ssl-ca=%s/ca.pem" % s, "--ssl-cert=%s/served.pem" % s,
                "--ssl-key=%s/served.key" % s, "--require-secure-transport=ON"])
            cls.db.sql("CREATE USER 'tls'@'127.0.0.1' IDENTIFIED BY '%s';"
                       "GRANT ALL PRIVILEGES ON permitd.* TO 'tls'@'127.0.0.1';"
                       "CREATE USER 'x509'@'127.0.0.1' IDENTIFIED BY '%s' REQUIRE X509;"
                       "GRANT ALL PRIVILEGES ON permitd.* TO 'x509'@'127.0.0.1';" % (PW, PW))
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.db is not None:
            cls.db.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            p.stop()

    # ------------------------------------------------------------ helpers

    def path(self, name):
        return os.path.join(self.client_dir, name)

    def url(self, user="tls", port=None, **params):
        """A URL to the TLS-only server (the password percent-encoded);
        params: ssl_mode=..., ssl_ca=file name in client_dir, ..."""
        q = []
        for k, v in params.items():
            if k != "ssl_mode":
                v = self.path(v)
            q.append("%s=%s" % (k.replace("_", "-"), quote(v, safe="")))
        return "mysql://%s:%s@127.0.0.1:%d/permitd%s" % (
            user, quote(PW, safe=""), port or self.db.port, "?" + "&".join(q) if q else "")

    def verified(self, user="tls", **params):
        return self.url(user, ssl_mode="VERIFY_IDENTITY", ssl_ca="ca.pem", **params)

    def run_permitd(self, url, *args, stdin=""):
        """`permitd ARGS` with PERMITD_MYSQL_URL=url: (exit status, output)."""
        env = dict(os.environ, PERMITD_MYSQL_URL=url)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        r = subprocess.run([harness.PERMITD_BIN] + list(args), input=stdin, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
        self.assertNotIn(PW, r.stdout)
        self.assertNotIn(quote(PW, safe=""), r.stdout)
        return r.returncode, r.stdout

    def refused(self, url, *says):
        rc, out = self.run_permitd(url, "migrate", "status")
        self.assertNotEqual(rc, 0, out)
        for s in says:
            self.assertIn(s, out)
        return out

    def works(self, url, *args):
        rc, out = self.run_permitd(url, "migrate", *(args or ("status",)))
        self.assertEqual(rc, 0, out)
        return out

    def ready(self, p):
        admin = p.admin()
        try:
            wait_for("ready", lambda: admin.request("GET", "/readyz").status == 200, 30)
        finally:
            admin.close()

    def server_cert(self, name):
        """Makes mariadbd serve NAME.pem/NAME.key from now on (FLUSH SSL)."""
        for ext in ("pem", "key"):
            shutil.copyfile(os.path.join(self.server_dir, "%s.%s" % (name, ext)),
                            os.path.join(self.server_dir, "served.%s" % ext))
        self.db.sql("FLUSH SSL")

    # ------------------------------------------------------------ tests

    def test_plaintext_to_a_server_requiring_tls_says_so(self):
        at = "MySQL at 127.0.0.1:%d requires TLS (require_secure_transport" % self.db.port
        out = self.refused(self.url(ssl_mode="DISABLED"), at, "ssl-mode=VERIFY_IDENTITY",
                           "ERROR 1045")
        self.assertIn("ssl-mode=DISABLED", out)
        # Not a blanket rewrite of MariaDB's "Access denied": a wrong
        # password is still that.
        wrong = self.url(ssl_mode="DISABLED").replace(quote(PW, safe=""), "wrong")
        out = self.refused(wrong, "ERROR 1045", "Access denied")
        self.assertNotIn("requires TLS", out)
        # The daemon says the same where operators look: its log and /readyz.
        p = Permitd(prefix=unique("tls") + ":",
                    args=["--mysql-url", self.url(ssl_mode="DISABLED"),
                          "--sync-interval-ms", str(SYNC_MS), "--mysql-timeout-ms", "2000"])
        self.procs.append(p)
        admin = p.admin()
        self.addCleanup(admin.close)
        r = wait_for("/readyz says why", lambda: (lambda x: x if at in x.body.decode() else None)(
            admin.request("GET", "/readyz")), 30)
        self.assertEqual(r.status, 503, r)
        self.assertIn(at, p.output())
        self.assertNotIn(quote(PW, safe=""), p.output() + r.body.decode())

    def test_verify_identity_serves_the_daemon_admin_and_migrate(self):
        url = self.verified()
        self.assertIn("client%20files", url)                 # the path is percent-encoded too
        out = self.works(url, "up")
        self.assertIn("?ssl-mode=VERIFY_IDENTITY", out)      # the masked URL names the mode
        self.works(url, "up")                                # nothing left: still fine
        self.assertIn("applied", self.works(url, "status"))
        rc, out = self.run_permitd(url, "admin", "add-user", EDITOR, "--role", "editor",
                                   stdin=EDITOR_PW + "\n")
        self.assertEqual(rc, 0, out)
        self.db.sql("INSERT INTO policies (name, max_permits, rate, created_by, updated_by) "
                    "VALUES ('from-mysql', 2, 0.001, 'dba', 'dba');"
                    "INSERT INTO policy_apps (policy_id, app) SELECT id, 'app' FROM policies "
                    "WHERE name = 'from-mysql'", database="permitd")
        p = Permitd(prefix=unique("tls") + ":",
                    args=["--mysql-url", url, "--sync-interval-ms", str(SYNC_MS)])
        self.procs.append(p)
        api = p.http()
        self.addCleanup(api.close)
        first = wait_for("the policy from MySQL served", lambda: (lambda d: d if d.get("allowed")
                         else None)(decision(api.acquire("from-mysql"))), 30)
        self.assertTrue(first["allowed"])
        decision(api.acquire("from-mysql"))
        self.assertFalse(decision(api.acquire("from-mysql")).get("allowed"))   # max 2: from MySQL
        # An admin edit goes through the same TLS connection to MySQL.
        c = AdminClient(self, p.admin_port)
        self.addCleanup(c.http.close)
        self.assertEqual(c.login(EDITOR, EDITOR_PW).status, 200)
        c.create("made-over-tls", max_permits=1, rate="0.001")
        self.assertEqual(self.db.sql("SELECT max_permits FROM policies WHERE name = "
                                     "'made-over-tls'", database="permitd"), [["1"]])
        self.assertTrue(decision(api.acquire("made-over-tls")).get("allowed"))
        self.assertFalse(decision(api.acquire("made-over-tls")).get("allowed"))
        self.ready(p)
        self.assertNotIn(quote(PW, safe=""), p.output())
        # Every login permitd made came over TLS: the server refuses any other
        # (require_secure_transport), and counted them.
        accepts = int(self.db.sql("SHOW GLOBAL STATUS LIKE 'Ssl_accepts'")[0][1])
        self.assertGreater(accepts, 0)

    def test_the_default_is_tls_when_the_server_offers_it(self):
        # PREFERRED: a URL without ssl-mode reaches a TLS-only server.
        self.works(self.url())

    def test_a_wrong_ca_is_refused_naming_the_reason(self):
        for mode in ("VERIFY_IDENTITY", "VERIFY_CA"):
            out = self.refused(self.url(ssl_mode=mode, ssl_ca="wrongca.pem"),
                               "was not verified against ssl-ca %s" % self.path("wrongca.pem"),
                               "self-signed certificate in certificate chain")
            self.assertIn("ssl-mode=" + mode, out)
        # Without ssl-ca, VERIFY_IDENTITY trusts the system's store, which
        # does not hold this test's CA.
        self.refused(self.url(ssl_mode="VERIFY_IDENTITY"),
                     "was not verified against the system's trust store")
        self.refused(self.url(ssl_mode="VERIFY_IDENTITY", ssl_ca="missing.pem"),
                     "ssl-ca %s: No such file or directory" % self.path("missing.pem"))

    def test_a_certificate_for_another_name_is_refused_under_verify_identity(self):
        try:
            self.server_cert("other")                         # db.example.com only
            self.refused(self.verified(),
                         "the certificate of MySQL at 127.0.0.1:%d does not name 127.0.0.1"
                         % self.db.port)
            # The same certificate passes VERIFY_CA: the refusal was the name.
            self.works(self.url(ssl_mode="VERIFY_CA", ssl_ca="ca.pem"))
        finally:
            self.server_cert("server")
        self.works(self.verified())

    def test_a_user_requiring_a_client_certificate(self):
        self.refused(self.verified("x509"), "ERROR 1045", "REQUIRE X509",
                     "needs ssl-cert and ssl-key")
        url = self.verified("x509", ssl_cert="client.pem", ssl_key="client.key")
        self.works(url)
        # the daemon too: the client certificate on every connection it makes
        self.works(url, "up")
        p = Permitd(prefix=unique("tls") + ":",
                    args=["--mysql-url", url, "--sync-interval-ms", str(SYNC_MS)])
        self.procs.append(p)
        self.ready(p)
        # a key that is not the certificate's
        self.refused(self.verified("x509", ssl_cert="client.pem", ssl_key="other.key"),
                     "TLS with MySQL at 127.0.0.1:%d failed" % self.db.port)

    def test_required_modes_refuse_a_server_without_tls(self):
        # The stack's MariaDB speaks no TLS: REQUIRED and VERIFY_CA find out
        # after libmariadb went on in plaintext, VERIFY_IDENTITY before the
        # login; the default goes on in plaintext.
        stack = stack_env()["PERMITD_TEST_MYSQL_URL"]
        port = int(stack_env()["PERMITD_TEST_MYSQL_PORT"])
        for q in ("ssl-mode=REQUIRED", "ssl-mode=VERIFY_CA&ssl-ca=" + quote(self.path("ca.pem")),
                  "ssl-mode=VERIFY_IDENTITY&ssl-ca=" + quote(self.path("ca.pem"))):
            mode = q.split("&")[0].split("=")[1]
            rc, out = self.run_permitd(stack + "?" + q, "migrate", "status")
            self.assertNotEqual(rc, 0, out)
            self.assertIn("MySQL at 127.0.0.1:%d offers no TLS, and ssl-mode=%s requires it"
                          % (port, mode), out)
        rc, out = self.run_permitd(stack, "migrate", "status")
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
