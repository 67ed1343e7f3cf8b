"""The test stack and the names tests share: where the sources and the
permitd binary are, the stack fixture's env file (tests/stack/stack.sh writes
it: the addresses of its Redis and MariaDB), free ports, unique names,
polling, and the unittest entry point every test file calls."""
import os
import socket
import time
import unittest

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PERMITD_BIN = os.environ.get("PERMITD_BIN", os.path.join(SOURCE_DIR, "build", "server", "permitd"))
STACK_DIR = os.environ.get("PERMITD_STACK_DIR", "")


def stack_env():
    """The stack fixture's env file as a dict."""
    env = {}
    path = os.path.join(STACK_DIR, "env")
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                env[k] = v
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unique(prefix="t"):
    """A name no other test (or earlier run on the same Redis) uses."""
    unique.n += 1
    return "%s-%d-%d-%d" % (prefix, os.getpid(), int(time.time() * 1000) % 100000000, unique.n)


unique.n = 0


def wait_for(what, fn, timeout=10.0):
    """Polls fn() until it returns a truthy value; fails naming `what`."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = fn()
        except AssertionError as e:     # e.g. decision() of a not-yet-200 reply
            last = e
        else:
            if last:
                return last
        time.sleep(0.05)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def main():
    # Tests open many short-lived connections and let the garbage collector
    # close them; ResourceWarnings would bury real failures in the log.
    unittest.main(verbosity=2, warnings="ignore")
