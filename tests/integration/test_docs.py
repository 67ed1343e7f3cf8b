#!/usr/bin/env python3
"""Every example in README.md and docs/*.md, run as a reader would run it.

A fenced block with an info string is one of:

  ```sh run        commands, run by bash in order with the page's earlier
                   run blocks (so $KEY set in one is there in the next); the
                   "# ..." lines at the block's end are the output it shows,
                   compared in shape: the same JSON fields, nested alike, the
                   same true/false (a count or false may be left out on either
                   side: proto3's JSON leaves zeros out); text with "..." where anything may stand;
                   a block that shows nothing must exit 0 and print no
                   Connect error ({"code":...,"message":...})
  ```sql run       statements, run against the stack's policy database
  ```nginx run     a server block, run through Debian's nginx: a request
                   through it must reach the application behind it, allowed
                   by permitd's forward-auth
  <!-- run by: tests/PATH -->    just above the block: that test runs it
                   (it must exist and name the page)
  <!-- not run: REASON -->       just above the block: why it cannot be run
  ```text          a picture or output as it is, no command in it

Anything else fails, naming the block's file:line. The stack is the test
stack configured as scripts/run.sh configures its own: one permitd with an
API, an admin and a gRPC listener, MySQL policies, app keys required, the
policy `example` inserted by run.sh's own SQL (read from the script), an
admin user `admin` and the app `demo` with a key. The blocks run in a
directory laid out as a clone after run.sh: .local/demo.key, the run's
secrets, scripts/permitd-admin.sh and `permitd` on the PATH running the CLI
against this stack; the addresses run.sh serves on (127.0.0.1:8080, 8081,
8082, Redis's 6390) are rewritten to this stack's.
"""
import glob
import http.server
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import unittest
import urllib.request

import harness
from harness import Permitd, SOURCE_DIR, free_port, mysql, stack_env, unique, wait_for
from test_apps import cli, database_url

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
BUF = os.path.join(SOURCE_DIR, "tests", "e2e", "node_modules", ".bin", "buf")
FENCE = re.compile(r"^```(\S*)(.*)$")
MARK = re.compile(r"^<!-- (run by|not run): (.+?) -->$")


def pages():
    return ["README.md"] + sorted(os.path.relpath(p, SOURCE_DIR)
                                  for p in glob.glob(os.path.join(SOURCE_DIR, "docs", "*.md")))


def blocks(page):
    """(line, lang, info, mark, text) of each fenced block of a page;
    mark is the (kind, what) of a marker comment on the line above."""
    with open(os.path.join(SOURCE_DIR, page)) as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            j = i + 1
            while j < len(lines) and lines[j] != "```":
                j += 1
            above = MARK.match(lines[i - 1]) if i > 0 else None
            out.append((i + 1, m.group(1), m.group(2).strip(),
                        above.groups() if above else None, "\n".join(lines[i + 1:j])))
            i = j
        i += 1
    return out


def expected_output(text):
    """The block's shown output: its trailing "# " lines, each "# " cut."""
    lines = text.rstrip("\n").split("\n")
    shown = []
    while lines and lines[-1].startswith("# "):
        shown.insert(0, lines.pop()[2:])
    return "\n".join(shown)


def same_shape(shown, got):
    """Whether got has shown's shape: for JSON the same fields (nested),
    lists as long, booleans equal, other values of the same type; for text
    a match with "..." standing for anything."""
    try:
        want = json.loads(shown)
    except ValueError:
        pattern = ".*".join(re.escape(p) for p in shown.split("..."))
        return re.search(pattern, got, re.S) is not None
    try:
        have = json.loads(got)
    except ValueError:
        return False

    def zero_like(v):
        # What proto3's JSON leaves out when zero: a count (an int64 is a
        # string of digits), a number, false.
        return v is False or (isinstance(v, (int, float)) and not isinstance(v, bool)) or \
            (isinstance(v, str) and re.fullmatch(r"-?[0-9]+", v) is not None)

    def shape(a, b):
        if isinstance(a, dict):
            return isinstance(b, dict) and \
                all(zero_like(a[k]) for k in set(a) - set(b)) and \
                all(zero_like(b[k]) for k in set(b) - set(a)) and \
                all(shape(a[k], b[k]) for k in set(a) & set(b))
        if isinstance(a, list):
            return isinstance(b, list) and len(a) == len(b) and all(map(shape, a, b))
        if isinstance(a, bool):
            return a is b
        return type(a) is type(b)
    return shape(want, have)


class App(http.server.BaseHTTPRequestHandler):
    """The application behind a gateway: 200 "app" to everything."""

    def do_GET(self):
        body = b"app"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def run_sh_sql():
    """The SQL scripts/run.sh inserts its example policy with."""
    with open(os.path.join(SOURCE_DIR, "scripts", "run.sh")) as f:
        text = f.read()
    m = re.search(r'sql "(INSERT INTO policies .*?)"\n', text, re.S)
    assert m is not None, "scripts/run.sh inserts no policy"
    return m.group(1)


class DocsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if not os.access(BUF, os.X_OK):
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], check=True,
                           cwd=os.path.join(SOURCE_DIR, "tests", "e2e"),
                           stdout=subprocess.DEVNULL, timeout=600)
        cls.db = unique("docs").replace("-", "_")
        mysql("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci" % cls.db)
        cls.url = database_url(cls.db)
        cls.permitd = None
        cls.dir = tempfile.mkdtemp(prefix="permitd-docs-")
        rc, out, err = cli(["migrate", "up"], cls.url)
        assert rc == 0, out + err
        rc, out, err = cli(["admin", "add-user", "admin", "--role", "admin"], cls.url,
                           "an admin password\n")
        assert rc == 0, out + err
        mysql(run_sh_sql(), database=cls.db)
        rc, out, err = cli(["admin", "add-app", "demo"], cls.url)
        assert rc == 0, out + err
        rc, out, err = cli(["admin", "issue-key", "demo"], cls.url)
        assert rc == 0, out + err
        cls.key = out.strip()
        cls.grpc_port = free_port()
        cls.prefix = unique("docs") + ":"
        cls.permitd = Permitd(prefix=cls.prefix, args=[
            "--mysql-url", cls.url, "--app-auth", "keys",
            "--grpc-listen", "127.0.0.1:%d" % cls.grpc_port, "--trusted-proxies", "127.0.0.1"])
        cls.redis_url = cls.permitd.redis_url
        m = re.match(r"redis://(?::([^@]*)@)?[^:/]+:(\d+)", cls.redis_url)
        cls.redis_password, cls.redis_port = (m.group(1) or ""), m.group(2)
        cls.make_clone()

    @classmethod
    def tearDownClass(cls):
        if cls.permitd is not None:
            cls.permitd.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)
        mysql("DROP DATABASE IF EXISTS `%s`" % cls.db)

    @classmethod
    def make_clone(cls):
        """The directory the blocks run in, as a clone is after run.sh."""
        root = cls.root = os.path.join(cls.dir, "clone")
        os.makedirs(os.path.join(root, ".local", "secrets"))
        os.makedirs(os.path.join(root, "scripts"))
        os.makedirs(os.path.join(cls.dir, "bin"))
        for name in ("proto", "lua", "migrations", "tests", "docker", "admin-ui"):
            os.symlink(os.path.join(SOURCE_DIR, name), os.path.join(root, name))
        with open(os.path.join(root, ".local", "demo.key"), "w") as f:
            f.write(cls.key + "\n")
        with open(os.path.join(root, ".local", "secrets", "redis"), "w") as f:
            f.write(cls.redis_password)
        # The CLI as the operator runs it: scripts/permitd-admin.sh against
        # run.sh's stack, `permitd` with PERMITD_MYSQL_URL set.
        env = "PERMITD_MYSQL_URL='%s' PERMITD_REDIS_URL='%s' ASAN_OPTIONS=detect_leaks=1" % (
            cls.url, cls.redis_url)
        for path in (os.path.join(root, "scripts", "permitd-admin.sh"),
                     os.path.join(cls.dir, "bin", "permitd")):
            with open(path, "w") as f:
                f.write("#!/bin/sh\n%s exec '%s' \"$@\"\n" % (env, harness.PERMITD_BIN))
            os.chmod(path, 0o755)

    def localize(self, text):
        """run.sh's addresses in a block, made this stack's."""
        p = self.permitd
        for doc, real in (("127.0.0.1:8080", "127.0.0.1:%d" % p.port),
                          ("127.0.0.1:8081", "127.0.0.1:%d" % p.admin_port),
                          ("127.0.0.1:8082", "127.0.0.1:%d" % self.grpc_port),
                          ("-p 6390", "-p %s" % self.redis_port),
                          ("'permitd:", "'%s" % self.prefix)):
            text = text.replace(doc, real)
        return text

    def run_sh(self, state, text):
        """Runs a block after the page's earlier ones (their variables in
        state); returns (status, stdout, stderr)."""
        script = ("set -eo pipefail\n[ -f %s ] && . %s\n%s\n( set -o posix; set ) | "
                  "grep -E '^[A-Z][A-Z0-9_]*=' | grep -vE '^(BASH|PATH|PWD|OLDPWD|SHELL|HOME|"
                  "UID|EUID|PPID|SHLVL|HOSTNAME|HOSTTYPE|MACHTYPE|OSTYPE|IFS|PS4|OPTERR|OPTIND|"
                  "COLUMNS|LINES|GROUPS|DIRSTACK|PIPESTATUS|TERM|_)' > %s.new || true\n") % (
                      state, state, text, state)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PERMITD_")}
        env["PATH"] = os.path.join(self.dir, "bin") + ":" + env["PATH"]
        r = subprocess.run(["bash", "-c", script], cwd=self.root, env=env,
                           capture_output=True, text=True, timeout=120)
        if os.path.exists(state + ".new"):
            os.replace(state + ".new", state)
        return r.returncode, r.stdout, r.stderr

    def run_nginx(self, text):
        """The block as nginx's server, the application and permitd behind it."""
        app = http.server.ThreadingHTTPServer(("127.0.0.1", 0), App)
        threading.Thread(target=app.serve_forever, daemon=True).start()
        ndir = tempfile.mkdtemp(prefix="nginx-", dir=self.dir)
        port = free_port()
        block = self.localize(text).replace("pk_...", self.key)
        assert "server {" in block, block
        block = block.replace("server {", "server {\n    listen 127.0.0.1:%d;" % port, 1)
        conf = ("worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\n"
                "events {{ worker_connections 64; }}\nhttp {{\n    access_log off;\n"
                "    client_body_temp_path {d}/body;\n    proxy_temp_path {d}/proxy;\n"
                "    fastcgi_temp_path {d}/fastcgi;\n    uwsgi_temp_path {d}/uwsgi;\n"
                "    scgi_temp_path {d}/scgi;\n    upstream app {{ server 127.0.0.1:{a}; }}\n"
                ).format(d=ndir, a=app.server_address[1]) + block + "\n}\n"
        with open(os.path.join(ndir, "nginx.conf"), "w") as f:
            f.write(conf)
        proc = subprocess.Popen([NGINX, "-p", ndir, "-c", os.path.join(ndir, "nginx.conf"),
                                 "-g", "daemon off;"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.STDOUT)
        try:
            def answers():
                if proc.poll() is not None:
                    raise RuntimeError("nginx exited: " + open(os.path.join(ndir, "error.log")).read())
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=10) as r:
                        return r.status, r.read()
                except OSError:
                    return None
            status, body = wait_for("nginx on port %d" % port, answers, timeout=30)
            return "%d %s" % (status, body.decode())
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            app.shutdown()

    def check_block(self, page, line, lang, info, mark, text, state):
        """None when the block ran as shown, else what went wrong."""
        where = "%s:%d" % (page, line)
        if mark is not None:
            if info:
                return "%s: marked %r and %r both" % (where, mark, info)
            kind, what = mark
            if kind == "not run":
                self.not_run.append("%s (%s): %s" % (where, lang, what))
                return None
            path = os.path.join(SOURCE_DIR, what)
            if not os.path.isfile(path):
                return "%s: run by %s, which does not exist" % (where, what)
            with open(path) as f:
                if page not in f.read():
                    return "%s: run by %s, which does not read %s" % (where, what, page)
            return None
        if lang == "text" and not info:
            return None     # a picture, or output shown as it is
        if not lang:
            return ("%s: a ``` block without a language: ```text for a picture or output, "
                    "else ```sh run (or another language) or a marker" % where)
        if info != "run":
            return ("%s: a ```%s block neither run (```%s run) nor marked "
                    "<!-- not run: why --> or <!-- run by: test -->" % (where, lang, lang))
        self.ran.append(where)
        if lang == "sh":
            rc, out, err = self.run_sh(state, self.localize(text))
            if rc != 0:
                return "%s: exit %d\n%s%s" % (where, rc, out, err)
            shown = expected_output(text)
            if shown and not same_shape(shown, out.strip()):
                return "%s: shows\n%s\nbut printed\n%s%s" % (where, shown, out, err)
            if not shown and re.search(r'^\{"code":"[a-z_]+","message":', out, re.M):
                return "%s: answered a Connect error\n%s%s" % (where, out, err)
            return None
        if lang == "sql":
            try:
                mysql(text, database=self.db)
            except Exception as e:  # the client's error, with the statement
                return "%s: %s" % (where, e)
            return None
        if lang == "nginx":
            got = self.run_nginx(text)
            return None if got == "200 app" else "%s: through nginx: %s" % (where, got)
        return "%s: no way to run a ```%s block" % (where, lang)

    def test_every_block_runs_as_shown(self):
        self.ran, self.not_run, failures = [], [], []
        for page in pages():
            state = os.path.join(self.dir, page.replace("/", "_") + ".vars")
            for line, lang, info, mark, text in blocks(page):
                failure = self.check_block(page, line, lang, info, mark, text, state)
                if failure:
                    failures.append(failure)
        print("ran %d blocks: %s" % (len(self.ran), ", ".join(self.ran)))
        print("not run (%d):\n  %s" % (len(self.not_run), "\n  ".join(self.not_run)))
        self.assertEqual(failures, [], "\n\n".join(failures))
        self.assertGreater(len(self.ran), 10)


if __name__ == "__main__":
    harness.main()
