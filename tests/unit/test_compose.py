"""docker-compose.yml is valid and wires the services as docs/operations.md says.

No Docker engine runs on our machines, so this validates the file with
`docker-compose config` (Debian's docker-compose) and checks the resolved
configuration: MySQL 8 + Redis 7 with healthchecks, a one-shot migrate
service, a one-shot seed service after it (docker/seed.sh: the example
policy and a first admin user; tests/integration/test_docker.py runs it
against a real MariaDB), and permitd started only after both are healthy
and the migration and the seed have completed.
"""
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def services(text):
    """Splits `docker-compose config` output into {service: its YAML text}."""
    out, name, buf, inside = {}, None, [], False
    for line in text.splitlines():
        if line == "services:":
            inside = True
            continue
        if inside and re.match(r"^\S", line):
            break
        m = re.match(r"^  ([a-z0-9_-]+):$", line)
        if inside and m:
            if name:
                out[name] = "\n".join(buf)
            name, buf = m.group(1), []
        elif inside:
            buf.append(line)
    if name:
        out[name] = "\n".join(buf)
    return out


def build_target(service):
    """The `target:` of a service's `build:` block, or None."""
    m = re.search(r"^    build:\n((?:      .*\n?)+)", service, re.M)
    t = m and re.search(r"^      target: (\S+)$", m.group(1), re.M)
    return t.group(1) if t else None


class ComposeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The defaults, whatever the caller's shell holds.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PERMITD_ADMIN_")}
        r = subprocess.run(["docker-compose", "-f", os.path.join(ROOT, "docker-compose.yml"),
                            "config"], capture_output=True, text=True, cwd=ROOT, env=env)
        if r.returncode != 0:
            raise AssertionError("docker-compose config failed:\n" + r.stderr)
        cls.text = r.stdout
        cls.svc = services(r.stdout)

    def test_quiet_validation_passes(self):
        r = subprocess.run(["docker-compose", "-f", "docker-compose.yml", "config", "-q"],
                           capture_output=True, text=True, cwd=ROOT)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_services(self):
        self.assertEqual(sorted(self.svc), ["migrate", "mysql", "permitd", "redis", "seed"])
        self.assertIn("image: mysql:8.0", self.svc["mysql"])
        self.assertIn("image: redis:7", self.svc["redis"])
        self.assertIn("healthcheck:", self.svc["mysql"])
        self.assertIn("healthcheck:", self.svc["redis"])
        self.assertIn("healthcheck:", self.svc["permitd"])

    def test_migrate_runs_once_after_mysql_is_healthy(self):
        m = self.svc["migrate"]
        self.assertRegex(m, r"command:\s*\n\s*- migrate\s*\n\s*- up")
        self.assertRegex(m, r"mysql:\s*\n\s*condition: service_healthy")
        self.assertIn("PERMITD_MYSQL_URL: mysql://", m)
        self.assertRegex(m, r"restart: ['\"]no['\"]")

    def test_seed_runs_once_after_migrate(self):
        s = self.svc["seed"]
        self.assertEqual(build_target(s), "seed")
        self.assertRegex(s, r"migrate:\s*\n\s*condition: service_completed_successfully")
        self.assertIn("PERMITD_MYSQL_URL: mysql://permitd:permitd@mysql:3306/permitd", s)
        self.assertIn("PERMITD_ADMIN_USER: admin", s)
        # The operator's PERMITD_ADMIN_PASSWORD and _USER reach the seed.
        r = subprocess.run(["docker-compose", "-f", "docker-compose.yml", "config"],
                           capture_output=True, text=True, cwd=ROOT,
                           env=dict(os.environ, PERMITD_ADMIN_PASSWORD="chosen-pw-1",
                                    PERMITD_ADMIN_USER="root.admin"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("PERMITD_ADMIN_PASSWORD: chosen-pw-1", services(r.stdout)["seed"])
        self.assertIn("PERMITD_ADMIN_USER: root.admin", services(r.stdout)["seed"])
        self.assertRegex(s, r"restart: ['\"]no['\"]")

    def test_seed_stage_runs_the_seed_script(self):
        with open(os.path.join(ROOT, "Dockerfile")) as f:
            df = f.read()
        stage = re.search(r"^FROM \S+ AS seed\n(.*?)(?=^FROM |\Z)", df, re.M | re.S)
        self.assertIsNotNone(stage, "no seed stage in the Dockerfile")
        self.assertIn("COPY docker/seed.sh /usr/local/bin/permitd-seed", stage.group(1))
        self.assertIn('ENTRYPOINT ["/usr/local/bin/permitd-seed"]', stage.group(1))
        self.assertIn("mariadb-client", stage.group(1))
        self.assertTrue(os.access(os.path.join(ROOT, "docker", "seed.sh"), os.X_OK))

    def test_permitd_waits_for_its_dependencies(self):
        p = self.svc["permitd"]
        self.assertEqual(build_target(p), "permitd")
        self.assertRegex(p, r"migrate:\s*\n\s*condition: service_completed_successfully")
        self.assertRegex(p, r"seed:\s*\n\s*condition: service_completed_successfully")
        self.assertRegex(p, r"redis:\s*\n\s*condition: service_healthy")
        self.assertRegex(p, r"mysql:\s*\n\s*condition: service_healthy")
        for var in ("PERMITD_REDIS_URL: redis://redis:6379", "PERMITD_MYSQL_URL: mysql://",
                    "PERMITD_LISTEN: 0.0.0.0:8080"):
            self.assertIn(var, p)
        self.assertIn("/readyz", p)

    def test_dockerfile_builds_what_the_image_needs(self):
        with open(os.path.join(ROOT, "Dockerfile")) as f:
            df = f.read()
        for d in ("proto", "lua", "migrations", "admin-ui", "server", "cmake"):
            self.assertRegex(df, r"COPY %s %s" % (d, d))
        # The default target (the last stage) is the server.
        last = df[df.rindex("\nFROM "):]
        self.assertIn('ENTRYPOINT ["/usr/local/bin/permitd"]', last)


if __name__ == "__main__":
    unittest.main(verbosity=2)
