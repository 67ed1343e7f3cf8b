#!/usr/bin/env python3
"""A newcomer's first hour, end to end: a fresh clone of this tree's HEAD,
README.md's set-up command (scripts/run.sh) in the background, every line
run.sh prints for the reader to paste (the curl and buf curl lines, the
permitd-admin.sh lines, the Redis and MariaDB connect lines), README's
first-hour blocks (```sh run), then Ctrl-C (SIGINT to run.sh's process
group): run.sh must stop, and nothing it started (redis-server, mariadbd,
permitd) may be left running.

run.sh runs as written but for two things: free ports instead of its
defaults (PERMITD_LISTEN, PERMITD_ADMIN_LISTEN, PERMITD_GRPC_LISTEN,
PERMITD_RUN_REDIS_PORT, PERMITD_RUN_MYSQL_PORT: another run.sh may be
serving on this machine) and, unless PERMITD_NEWCOMER_BUILD=1, the test's
permitd binary through PERMITD_RUN_BIN instead of a release build of its
own (minutes on two cores; the build's own steps are the suite's). The
README's addresses are rewritten to those ports as test_docs does.
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import harness
from harness import SOURCE_DIR, free_port
from test_docs import blocks, expected_output, same_shape

SERVING = "permitd is serving:"


def processes_of(path, pgid):
    """(pid, cmdline) of live processes in process group pgid or whose
    command line or working directory names path."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
            state, _ppid, group = stat.rsplit(")", 1)[1].split()[:3]
            cwd = os.readlink("/proc/%s/cwd" % pid)
        except OSError:
            continue
        if state == "Z":
            continue
        if int(group) == pgid or path in cmd or cwd.startswith(path):
            found.append((int(pid), cmd))
    return found


def banner_commands(text, clone):
    """The commands run.sh's banner shows for pasting: lines starting with
    curl, tests/e2e/.../buf, scripts/permitd-admin.sh, with their
    backslash continuations; and the (VAR=... client ...) connect lines."""
    cmds, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        line = lines[i].strip()
        if re.match(r"^(curl |tests/e2e/node_modules/\.bin/buf |scripts/permitd-admin\.sh )", line):
            cmd = [line]
            while cmd[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd.append(lines[i].strip())
            cmds.append("\n".join(cmd))
        m = re.match(r"^\((REDISCLI_AUTH=.*redis-cli .*)\)$", line)
        if m:
            cmds.append(m.group(1) + " ping")
        m = re.match(r"^\(root: (MYSQL_PWD=.*mariadb .*)\)$", line)
        if m:
            cmds.append(m.group(1) + " -e 'SELECT COUNT(*) FROM policies'")
        i += 1
    return cmds


class NewcomerTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="permitd-newcomer-")
        self.clone = os.path.join(self.dir, "permitd")
        self.run_sh = None
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", SOURCE_DIR, self.clone],
                       check=True, timeout=300)
        self.ports = {k: free_port() for k in ("api", "admin", "grpc", "redis", "mysql")}
        env = {k: v for k, v in os.environ.items() if not k.startswith("PERMITD_")}
        env.update({
            "PERMITD_LISTEN": "127.0.0.1:%d" % self.ports["api"],
            "PERMITD_ADMIN_LISTEN": "127.0.0.1:%d" % self.ports["admin"],
            "PERMITD_GRPC_LISTEN": "127.0.0.1:%d" % self.ports["grpc"],
            "PERMITD_RUN_REDIS_PORT": str(self.ports["redis"]),
            "PERMITD_RUN_MYSQL_PORT": str(self.ports["mysql"]),
            "ASAN_OPTIONS": "detect_leaks=0",
        })
        if os.environ.get("PERMITD_NEWCOMER_BUILD") != "1":
            env["PERMITD_RUN_BIN"] = harness.PERMITD_BIN
        self.env = env

    def tearDown(self):
        if self.run_sh is not None and self.run_sh.poll() is None:
            os.killpg(self.run_sh.pid, signal.SIGKILL)
            self.run_sh.wait()
        for pid, _ in processes_of(self.clone, -1):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def output(self):
        with open(self.log) as f:
            return f.read()

    def localize(self, text):
        for doc, port in (("127.0.0.1:8080", "api"), ("127.0.0.1:8081", "admin"),
                          ("127.0.0.1:8082", "grpc")):
            text = text.replace(doc, "127.0.0.1:%d" % self.ports[port])
        return text

    def sh(self, script):
        r = subprocess.run(["bash", "-c", "set -eo pipefail\n" + script], cwd=self.clone,
                           env=self.env, capture_output=True, text=True, timeout=300)
        return r.returncode, r.stdout, r.stderr

    def test_first_hour(self):
        self.log = os.path.join(self.dir, "run.log")
        with open(self.log, "w") as out:
            self.run_sh = subprocess.Popen(["scripts/run.sh"], cwd=self.clone, env=self.env,
                                           stdout=out, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + 600
        while SERVING not in self.output():
            self.assertIsNone(self.run_sh.poll(), "run.sh exited:\n" + self.output())
            self.assertLess(time.time(), deadline, "run.sh is not serving:\n" + self.output())
            time.sleep(0.5)
        banner = self.output()
        self.assertIn("admin UI login: admin / ", banner)

        # README: buf comes from the e2e tests' packages, `npm ci` there once.
        rc, out, err = self.sh("cd tests/e2e && npm ci --prefer-offline --no-audit --no-fund")
        self.assertEqual(rc, 0, out + err)

        failures = []
        cmds = banner_commands(banner, self.clone)
        self.assertGreaterEqual(len(cmds), 6, banner)
        for cmd in cmds:
            rc, out, err = self.sh(cmd)
            if rc != 0 or '"code":' in out or "ERROR" in out + err:
                failures.append("run.sh printed\n%s\nwhich gave %d:\n%s%s" % (cmd, rc, out, err))
            elif "/Acquire" in cmd and '"allowed"' not in out:
                failures.append("run.sh printed\n%s\nwhich answered\n%s%s" % (cmd, out, err))

        state = os.path.join(self.dir, "vars")
        ran = 0
        for line, lang, info, mark, text in blocks("README.md"):
            if mark is not None or info != "run":
                continue
            ran += 1
            self.assertEqual(lang, "sh", "README.md:%d" % line)
            rc, out, err = self.sh("[ -f %s ] && . %s\n%s\n( set -o posix; set ) | grep -E "
                                   "'^KEY=' > %s || true" % (state, state, self.localize(text), state))
            shown = expected_output(text)
            if rc != 0 or (shown and not same_shape(shown, out.strip())):
                failures.append("README.md:%d: exit %d, shows\n%s\nprinted\n%s%s" % (
                    line, rc, shown, out, err))
        self.assertGreater(ran, 3)

        os.killpg(self.run_sh.pid, signal.SIGINT)    # Ctrl-C in run.sh's terminal
        try:
            self.run_sh.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.fail("run.sh still running 120 s after SIGINT:\n" + self.output())
        self.assertIn("run.sh: stopped", self.output())
        deadline = time.time() + 30
        while processes_of(self.clone, self.run_sh.pid) and time.time() < deadline:
            time.sleep(0.2)
        self.assertEqual(processes_of(self.clone, self.run_sh.pid), [])
        self.assertEqual(failures, [], "\n\n".join(failures))


if __name__ == "__main__":
    harness.main()
