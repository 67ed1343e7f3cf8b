#!/usr/bin/env python3
"""`permitd --help` and docs/operations.md's settings table name the same
settings: every flag of --help is a row of the table and every row a flag of
--help, with the same environment variable and the same default.

Defaults: a row's default in backticks is --help's default as it is; a row
without backticks ("(none)", "(off)", "(built in)", "1 per CPU", a phrase)
stands for a setting whose --help shows no default or an empty one, or
describes it in its own words ("default: ..."). The table's first backticked
word is the default ("`0` (off)" is 0).

Usage: test_settings_doc.py PERMITD_BINARY"""
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOC = os.path.join(ROOT, "docs", "operations.md")
BIN = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(ROOT, "build", "test", "server", "permitd")


def help_settings():
    """{flag: (env, default or None, help text)} from permitd --help."""
    out = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=30,
                         env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0")).stdout
    lines = out.split("\n")
    found = {}
    for i, line in enumerate(lines):
        m = re.match(r"^  (--[a-z0-9-]+) (?:N|VALUE)\s+(.*)$", line)
        if not m:
            continue
        env = re.match(r"^\s+env (PERMITD_[A-Z0-9_]+)(?:, default ([^,]*))?", lines[i + 1])
        assert env, "--help: no env line after %s" % m.group(1)
        found[m.group(1)] = (env.group(1), env.group(2), m.group(2))
    return found


def table_settings():
    """{flag: (env, default cell, line)} from the settings table; a row
    of two settings ("`--tls-cert`, `--tls-key`") gives both."""
    with open(DOC) as f:
        text = f.read().split("\n")
    start = text.index("## Configuration")
    rows = {}
    for n, line in enumerate(text[start:], start + 1):
        if line.startswith("## ") and n > start + 1:
            break
        cells = [c.strip() for c in line.split(" | ")]
        if not line.startswith("| `--") or len(cells) < 4:
            continue
        flags = re.findall(r"`(--[a-z0-9-]+)`", cells[0])
        envs = re.findall(r"`(PERMITD_[A-Z0-9_]+)`", cells[1])
        assert len(flags) == len(envs), "docs/operations.md:%d: %d flags, %d variables" % (
            n, len(flags), len(envs))
        for flag, env in zip(flags, envs):
            rows[flag] = (env, cells[2], n)
    return rows


class SettingsDoc(unittest.TestCase):

    def test_help_and_table_agree(self):
        helps, rows = help_settings(), table_settings()
        self.assertGreater(len(helps), 20)
        problems = []
        for flag in sorted(set(helps) - set(rows)):
            problems.append("%s is in --help but not in docs/operations.md's table" % flag)
        for flag in sorted(set(rows) - set(helps)):
            problems.append("docs/operations.md:%d: %s is not in --help" % (rows[flag][2], flag))
        for flag in sorted(set(helps) & set(rows)):
            env, default, text = helps[flag]
            doc_env, cell, n = rows[flag]
            if env != doc_env:
                problems.append("docs/operations.md:%d: %s: env %s, --help says %s" % (n, flag, doc_env, env))
            m = re.search(r"`([^`]*)`", cell)
            if m:
                if m.group(1) != (default or ""):
                    problems.append("docs/operations.md:%d: %s: default %s, --help says %r" % (
                        n, flag, m.group(1), default))
            elif default and "default" not in text:
                problems.append("docs/operations.md:%d: %s: default %r, --help says %r" % (
                    n, flag, cell, default))
        self.assertEqual(problems, [], "\n".join(problems))


if __name__ == "__main__":
    unittest.main()
