#!/usr/bin/env python3
"""scripts/run.sh shows the MariaDB URL it serves with, and must show it as
permitd does in its logs: with the password replaced by ***. The script's
mask_url function is run on its own (bash, no servers), and every place the
script prints the URL must go through it."""
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
