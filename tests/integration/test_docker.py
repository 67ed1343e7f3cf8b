"""What `docker compose up --build` gives, checked without a Docker engine
(issue 26).

No Docker engine runs on our machines, so this test does by hand what the
image build and compose do, against the stack's real Redis and MariaDB:

  - it copies exactly the paths the Dockerfile's build stage COPYs into a
    temporary directory and builds permitd there (plain, no sanitizers,
    only the permitd target); that binary must serve the admin UI at / and
    every file of admin-ui/ byte for byte, and run the embedded Lua;
  - with one of the embedded folders (admin-ui, lua, migrations) empty, the
    configure step must fail and name the folder;
  - docker/seed.sh (the compose `seed` service) run after `permitd migrate
    up` over TCP with a user and password, as in compose, must add the
    example policy and a first admin user whose password it prints once (or
    takes from PERMITD_ADMIN_PASSWORD), so that the curl line at the top of
    docker-compose.yml is allowed and the admin UI login works.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
from unittest import mock
from urllib.parse import quote

import harness
from harness import Http, Permitd, Redis, mysql, stack_env, unique

ROOT = harness.SOURCE_DIR
AUTH = "permit.v1.AdminAuthService"
WORK = None        # the temporary directory of the whole module
BUILT = None       # the permitd built from the Dockerfile's paths


def build_stage_copies(dockerfile):
    """[(sources, destination)] of the COPY lines in the stage named build,
    destinations relative to its WORKDIR (which must be set before them)."""
    copies, in_build, workdir = [], False, None
    with open(dockerfile) as f:
        lines = f.read().replace("\\\n", " ").splitlines()
    for line in lines:
        words = line.split()
        if not words:
            continue
        op = words[0].upper()
        if op == "FROM":
            in_build = len(words) >= 4 and words[-2].upper() == "AS" and words[-1] == "build"
        elif in_build and op == "WORKDIR":
            workdir = words[1]
        elif in_build and op == "COPY":
            args = [w for w in words[1:] if not w.startswith("--")]
            if any(w.startswith("--from") for w in words[1:]):
                raise AssertionError("COPY --from in the build stage: %r" % line)
            if args[0].startswith("["):
                args = json.loads(line.split(None, 1)[1])
            if workdir is None:
                raise AssertionError("COPY before WORKDIR in the build stage: %r" % line)
            copies.append((args[:-1], args[-1]))
    if not copies:
        raise AssertionError("no COPY lines in a stage `AS build` of %s" % dockerfile)
    return copies


def copy_build_context(dest_root, skip_contents_of=None):
    """Copies what the build stage COPYs from the source tree into
    dest_root, the way `docker build` would; a folder named in
    skip_contents_of arrives empty."""
    for sources, dest in build_stage_copies(os.path.join(ROOT, "Dockerfile")):
        for src in sources:
            path = os.path.join(ROOT, src)
            if not os.path.exists(path):
                raise AssertionError("the Dockerfile COPYs %s, which does not exist" % src)
            target = os.path.normpath(os.path.join(dest_root, dest))
            if os.path.isdir(path):
                # COPY dir dest: the folder's contents into dest.
                os.makedirs(target, exist_ok=True)
                if src.rstrip("/") != skip_contents_of:
                    shutil.copytree(path, target, dirs_exist_ok=True)
            else:
                if dest.endswith("/") or len(sources) > 1:
                    os.makedirs(target, exist_ok=True)
                    target = os.path.join(target, os.path.basename(src))
                shutil.copy2(path, target)


def cmake(*args, timeout=600):
    r = subprocess.run(["cmake"] + list(args), capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def setUpModule():
    global WORK, BUILT
    WORK = tempfile.mkdtemp(prefix="permitd-docker-")
    src = os.path.join(WORK, "src")
    copy_build_context(src)
    build = os.path.join(src, "build")
    rc, out = cmake("-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_TESTING=OFF")
    if rc != 0:
        raise AssertionError("configuring from the Dockerfile's paths failed:\n" + out)
    rc, out = cmake("--build", build, "--target", "permitd", "-j", "2")
    if rc != 0:
        raise AssertionError("building from the Dockerfile's paths failed:\n" + out)
    BUILT = os.path.join(build, "server", "permitd")


def tearDownModule():
    if WORK:
        shutil.rmtree(WORK, ignore_errors=True)


def drop_keys(prefix):
    r = Redis()
    for k in r("KEYS", prefix + "*") or []:
        r("DEL", k)
    r.close()


def docker_permitd(prefix, args=()):
    """The image's binary, started the way harness.Permitd starts any."""
    with mock.patch.object(harness, "PERMITD_BIN", BUILT):
        return Permitd(prefix=prefix, args=list(args))


class ImageBinaryTest(unittest.TestCase):
    def test_docker_permitd_serves_the_admin_ui_and_every_embedded_file(self):
        prefix = unique("dk") + ":"
        try:
            with docker_permitd(prefix) as p:
                admin = p.admin()
                r = admin.request("GET", "/")
                self.assertEqual(r.status, 200, r)
                with open(os.path.join(ROOT, "admin-ui", "index.html"), "rb") as f:
                    self.assertEqual(r.body, f.read())
                names = sorted(os.listdir(os.path.join(ROOT, "admin-ui")))
                self.assertIn("app.js", names)
                for name in names:
                    with open(os.path.join(ROOT, "admin-ui", name), "rb") as f:
                        want = f.read()
                    r = admin.request("GET", "/ui/" + name)
                    self.assertEqual(r.status, 200, "/ui/%s: %r" % (name, r))
                    self.assertEqual(r.body, want, "/ui/%s differs from admin-ui/%s" % (name, name))
                # The embedded Lua: one decision.
                redis = Redis()
                harness.put_policy(redis, "dk", apps="demo", max_permits=3, rate=1, prefix=prefix)
                redis.close()
                api = p.http()
                r = api.acquire("dk", app="demo")
                api.close()
                admin.close()
                self.assertEqual(r.status, 200, r)
                self.assertTrue(r.json().get("allowed"), r)
        finally:
            drop_keys(prefix)

    def test_an_empty_embedded_folder_stops_the_build(self):
        for folder in ("admin-ui", "lua", "migrations"):
            with self.subTest(folder=folder):
                src = tempfile.mkdtemp(prefix="permitd-docker-empty-", dir=WORK)
                copy_build_context(src, skip_contents_of=folder)
                self.assertEqual(os.listdir(os.path.join(src, folder)), [])
                rc, out = cmake("-S", src, "-B", os.path.join(src, "build"),
                                "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_TESTING=OFF")
                self.assertNotEqual(rc, 0, "configured with %s/ empty:\n%s" % (folder, out))
                flat = " ".join(out.split())
                self.assertIn("CMake Error", flat)
                self.assertRegex(flat, r"no %s/\S* files in %s" % (re.escape(folder),
                                                                   re.escape(src)))


class SeedTest(unittest.TestCase):
    """docker/seed.sh over TCP with a user and password, as compose runs it."""

    def setUp(self):
        env = stack_env()
        self.db = unique("dk").replace("-", "_")
        self.user = self.db[:32]
        password = "p@ss:w%rd/1"   # every character a URL must escape
        mysql("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;"
              "CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s';"
              "CREATE USER '%s'@'localhost' IDENTIFIED BY '%s';"
              "GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'127.0.0.1';"
              "GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'localhost';"
              % (self.db, self.user, password, self.user, password,
                 self.db, self.user, self.db, self.user))
        self.url = "mysql://%s:%s@127.0.0.1:%s/%s" % (
            self.user, quote(password, safe=""), env["PERMITD_TEST_MYSQL_PORT"], self.db)
        self.prefix = unique("dk") + ":"

    def tearDown(self):
        mysql("DROP DATABASE IF EXISTS `%s`; DROP USER IF EXISTS '%s'@'127.0.0.1';"
              "DROP USER IF EXISTS '%s'@'localhost';" % (self.db, self.user, self.user))
        drop_keys(self.prefix)

    def run_image(self, argv, **env):
        """Runs argv with the image's permitd first on PATH and the compose
        service's environment; returns (exit status, stdout + stderr)."""
        full = {k: v for k, v in os.environ.items()
                if not k.startswith("PERMITD_") or k.startswith("PERMITD_TEST")}
        full["PATH"] = os.path.dirname(BUILT) + os.pathsep + os.environ["PATH"]
        full["PERMITD_MYSQL_URL"] = self.url
        full.update(env)
        r = subprocess.run(argv, env=full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        return r.returncode, r.stdout

    def seed(self, **env):
        return self.run_image([os.path.join(ROOT, "docker", "seed.sh")], **env)

    def compose_curl(self):
        """(path, JSON body) of the curl line at the top of docker-compose.yml."""
        with open(os.path.join(ROOT, "docker-compose.yml")) as f:
            head = "".join(line for line in f if line.startswith("#"))
        m = re.search(r"curl .*?-d '([^']*)'.*?http://127\.0\.0\.1:8080(/\S+)", head, re.S)
        self.assertIsNotNone(m, "no curl line at the top of docker-compose.yml:\n" + head)
        return m.group(2), m.group(1)

    def login(self, p, username, password):
        h = {"Content-Type": "application/json", "Origin": "http://127.0.0.1:%d" % p.admin_port}
        admin = p.admin()
        try:
            return admin.request("POST", "/%s/Login" % AUTH,
                                 json.dumps({"username": username, "password": password}).encode(),
                                 h)
        finally:
            admin.close()

    def test_compose_ends_where_run_sh_ends(self):
        rc, out = self.run_image(["permitd", "migrate", "up"])
        self.assertEqual(rc, 0, out)

        rc, out = self.seed()
        self.assertEqual(rc, 0, out)
        m = re.search(r"admin UI login: admin / (\S+)", out)
        self.assertIsNotNone(m, "no admin password printed:\n" + out)
        first = m.group(1)
        self.assertGreaterEqual(len(first), 16)
        self.assertIn('added policy "example"', out)
        # Issue 21: the app demo and its API key, printed once.
        k = re.search(r"API key of app demo: (pk_[0-9a-f]{16}_[A-Za-z0-9_-]{43})", out)
        self.assertIsNotNone(k, "no API key printed:\n" + out)
        key = k.group(1)

        # Again: nothing new, no password printed a second time.
        rc, out = self.seed()
        self.assertEqual(rc, 0, out)
        self.assertNotIn(first, out)
        self.assertIn("admin users exist", out)
        self.assertIn("policies exist", out)
        self.assertNotIn(key, out)
        self.assertIn("app demo exists", out)
        self.assertEqual(mysql("SELECT COUNT(*) FROM policies", database=self.db), [["1"]])
        self.assertEqual(mysql("SELECT COUNT(*) FROM admin_users", database=self.db), [["1"]])

        with docker_permitd(self.prefix, ["--mysql-url", self.url, "--app-auth", "keys",
                                          "--sync-interval-ms", "300"]) as p:
            path, body = self.compose_curl()
            api = p.http()
            deadline = time.time() + 15
            while True:
                r = api.request("POST", path, body.encode(),
                                {"Content-Type": "application/json",
                                 "Authorization": "Bearer " + key})
                if r.status == 200 or time.time() > deadline:
                    break
                time.sleep(0.1)
            api.close()
            self.assertEqual(r.status, 200, r)
            self.assertTrue(r.json().get("allowed"), r)
            self.assertEqual(r.json().get("limit"), "10", r)

            r = self.login(p, "admin", first)
            self.assertEqual(r.status, 200, r)

            # PERMITD_ADMIN_PASSWORD sets the password, on every run.
            rc, out = self.seed(PERMITD_ADMIN_PASSWORD="chosen-password-9")
            self.assertEqual(rc, 0, out)
            self.assertNotIn("chosen-password-9", out)
            self.assertEqual(self.login(p, "admin", "chosen-password-9").status, 200)
            self.assertEqual(self.login(p, "admin", first).status, 401)

    def test_a_bad_url_is_named(self):
        rc, out = self.seed(PERMITD_MYSQL_URL="postgres://x@y/z")
        self.assertEqual(rc, 2, out)
        self.assertIn('"postgres://x@y/z"', out)

    def test_a_short_admin_password_fails_the_seed(self):
        rc, out = self.run_image(["permitd", "migrate", "up"])
        self.assertEqual(rc, 0, out)
        rc, out = self.seed(PERMITD_ADMIN_PASSWORD="short")
        self.assertNotEqual(rc, 0, out)
        self.assertIn("at least 8 characters", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
