#!/usr/bin/env python3
"""scripts/run.sh shows the MariaDB URL it serves with, and must show it as
permitd does in its logs: with the password replaced by ***. The script's
mask_url function is run on its own (bash, no servers), and every place the
script prints the URL must go through it.

Its Redis and MariaDB (root and the permitd user) have passwords (issue 42):
random, made once by secret() into the run directory's secrets/ (0700, each
file 0600), handed to the servers and clients by file or environment, never
on a command line that ps shows."""
import stat
import tempfile
import os
import re
import subprocess
import unittest

RUN_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "run.sh")


def script():
    with open(RUN_SH) as f:
        return f.read()


def mask(url):
    """run.sh's mask_url, cut out of the script and run by bash."""
    m = re.search(r"^mask_url\(\) \{\n.*?^\}\n", script(), re.M | re.S)
    if m is None:
        raise AssertionError("scripts/run.sh has no mask_url() function")
    p = subprocess.run(["bash", "-c", m.group(0) + 'mask_url "$1"', "bash", url],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError("mask_url %r failed: %s" % (url, p.stderr))
    return p.stdout.rstrip("\n")


class MaskTest(unittest.TestCase):

    def test_password_is_masked_like_permitd_does(self):
        cases = [
            ("mysql://permitd:permitd@127.0.0.1:3390/permitd",
             "mysql://permitd:***@127.0.0.1:3390/permitd"),
            ("mysql://u:s3cr%40t@db.example:3306/app?socket=/run/mysqld/mysqld.sock",
             "mysql://u:***@db.example:3306/app?socket=/run/mysqld/mysqld.sock"),
            # An unescaped @ or : in the password: all of it goes.
            ("mysql://u:p@ss:w@rd@h/db", "mysql://u:***@h/db"),
            ("redis://:hunter22@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
            # Nothing secret: unchanged.
            ("mysql://u@h:3306/db", "mysql://u@h:3306/db"),
            ("redis://127.0.0.1:6390", "redis://127.0.0.1:6390"),
        ]
        for url, want in cases:
            with self.subTest(url=url):
                self.assertEqual(mask(url), want)

    def test_every_print_of_the_url_is_masked(self):
        # The URL is exported for permitd (it needs the password); anywhere
        # else it appears, it is inside mask_url.
        for n, line in enumerate(script().splitlines(), 1):
            for m in re.finditer(r"\$\{?PERMITD_MYSQL_URL\b", line):
                if re.match(r"\s*export PERMITD_MYSQL_URL=", line):
                    continue
                self.assertRegex(line[:m.start()], r'mask_url "$',
                                 "scripts/run.sh:%d shows the MySQL URL unmasked: %s"
                                 % (n, line.strip()))



def function(name):
    m = re.search(r"^%s\(\) \{\n.*?^\}\n" % name, script(), re.M | re.S)
    if m is None:
        raise AssertionError("scripts/run.sh has no %s() function" % name)
    return m.group(0)


def secret(data, name):
    """run.sh's secret NAME with data=DATA, run by bash."""
    p = subprocess.run(["bash", "-c", "set -euo pipefail; data=$1\n" + function("secret") +
                        'secret "$2"', "bash", data, name],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError("secret %r failed: %s" % (name, p.stderr))
    return p.stdout


class SecretTest(unittest.TestCase):

    def test_secrets_are_random_private_and_kept(self):
        with tempfile.TemporaryDirectory() as data:
            os.chmod(data, 0o755)
            a = secret(data, "redis")
            self.assertRegex(a, r"^[A-Za-z0-9]{32}$")
            self.assertEqual(secret(data, "redis"), a, "a rerun must find the same password")
            b = secret(data, "mariadb-root")
            self.assertNotEqual(a, b)
            d = os.path.join(data, "secrets")
            self.assertEqual(stat.S_IMODE(os.stat(d).st_mode), 0o700)
            for name in ("redis", "mariadb-root"):
                f = os.path.join(d, name)
                self.assertEqual(stat.S_IMODE(os.stat(f).st_mode), 0o600, name)
                with open(f) as fh:
                    self.assertEqual(fh.read(), {"redis": a, "mariadb-root": b}[name])
            # Loosened by hand: put back.
            os.chmod(os.path.join(d, "redis"), 0o644)
            os.chmod(d, 0o755)
            self.assertEqual(secret(data, "redis"), a)
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(d, "redis")).st_mode), 0o600)
            self.assertEqual(stat.S_IMODE(os.stat(d).st_mode), 0o700)


class PasswordsTest(unittest.TestCase):
    """Where the passwords go, read from the script."""

    def test_servers_and_permitd_get_passwords(self):
        s = script()
        self.assertRegex(s, r"(?m)^redis_password=\$\(secret redis\)$")
        self.assertRegex(s, r"(?m)^mysql_root_password=\$\(secret mariadb-root\)$")
        self.assertRegex(s, r"(?m)^mysql_password=\$\(secret mariadb-permitd\)$")
        self.assertRegex(s, r"(?m)^export PERMITD_REDIS_URL=redis://:\$redis_password@")
        self.assertRegex(s, r"(?m)^export PERMITD_MYSQL_URL=mysql://permitd:\$mysql_password@")
        # Redis reads its password from a 0600 file written before it starts.
        self.assertRegex(s, r"umask 077; printf 'requirepass %s\\n' \"\$redis_password\" > "
                            r"\"\$data/redis.conf\"")
        self.assertRegex(s, r'(?m)^redis-server "\$data/redis.conf" ')
        # MariaDB's root (every host it has) and permitd get theirs.
        self.assertIn("SELECT host FROM mysql.user WHERE user = 'root'", s)
        self.assertIn("ALTER USER IF EXISTS 'root'@'%s' IDENTIFIED BY '%s'", s)
        self.assertIn("ALTER USER 'permitd'@'%s' IDENTIFIED BY '%s'", s)

    def test_no_password_on_a_command_line(self):
        # ps shows every process's arguments to every user: passwords go by
        # file (redis.conf) or environment (REDISCLI_AUTH, MYSQL_PWD).
        for n, line in enumerate(script().splitlines(), 1):
            code = line.split("#", 1)[0]
            for bad in ("--requirepass", " -a ", "-p$", "--password", "-p\"$"):
                self.assertNotIn(bad, code, "scripts/run.sh:%d: %s" % (n, line.strip()))
            if re.search(r"\$\{?(redis_password|mysql_root_password|mysql_password)\b", code):
                self.assertRegex(code, r"^\s*(export PERMITD_(REDIS|MYSQL)_URL=|\w+=\$\(secret |"
                                       r"rcli\(\) \{ REDISCLI_AUTH=|root_pwd\(\)|"
                                       r"\(umask 077; printf 'requirepass|\s*printf \"ALTER USER)",
                                 "scripts/run.sh:%d hands a password on: %s" % (n, line.strip()))


if __name__ == "__main__":
    unittest.main(verbosity=2)
