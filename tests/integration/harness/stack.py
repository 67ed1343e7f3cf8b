"""The test stack and the names tests share: where the sources and the
permitd binary are, the Redis scripts as Redis is sent them (lua_script()),
the stack fixture's env file (tests/stack/stack.sh writes it: the addresses
of its Redis and MariaDB), free ports, unique names, polling, and the
unittest entry point every test file calls."""
import os
import random
import socket
import subprocess
import tempfile
import time
import unittest

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PERMITD_BIN = os.environ.get("PERMITD_BIN", os.path.join(SOURCE_DIR, "build", "server", "permitd"))
STACK_DIR = os.environ.get("PERMITD_STACK_DIR", "")


def lua_script(name, lua_dir=None):
    """The text of the Redis script lua/NAME.lua (or of NAME, a path) as
    permitd sends it to Redis: put together by cmake/lua_splice.cmake, the
    build's own splice step (each `-- @include` line replaced by its
    lua/lib/ piece), so a test loads what the binary embeds and its SHA-1
    is the one permitd's EVALSHA names. lua_dir: another lua/ folder (the
    tests' PERMITD_TEST_LUA_DIR). Bytes; read once per process."""
    path = name if os.sep in name else os.path.join(lua_dir or os.path.join(SOURCE_DIR, "lua"),
                                                     name + ".lua")
    path = os.path.abspath(path)
    if path not in lua_script.cache:
        with tempfile.TemporaryDirectory(prefix="permitd-lua-") as tmp:
            out = os.path.join(tmp, os.path.basename(path))
            done = subprocess.run(["cmake", "-DSCRIPT=" + path, "-DOUT=" + out, "-P",
                                   os.path.join(SOURCE_DIR, "cmake", "lua_splice.cmake")],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError("cmake/lua_splice.cmake failed on %s: %s" % (path, done.stderr.strip()))
            with open(out, "rb") as f:
                lua_script.cache[path] = f.read()
    return lua_script.cache[path]


lua_script.cache = {}


# The Redis (and Redis Cluster) of a test run by tests/stack/own-redis.sh
# (its own, in place of the stack's: ctest runs tests in parallel), from the
# environment.
OWN_REDIS = ("PERMITD_TEST_REDIS_HOST", "PERMITD_TEST_REDIS_PORT", "PERMITD_TEST_REDIS_URL",
             "PERMITD_TEST_REDIS_SOCKET", "PERMITD_TEST_CLUSTER_SEEDS", "PERMITD_TEST_CLUSTER_URL",
             "PERMITD_TEST_CLUSTER_DIR")


def stack_env():
    """The stack fixture's env file as a dict, with the test's own Redis
    (OWN_REDIS in the environment) in place of the stack's."""
    env = {}
    path = os.path.join(STACK_DIR, "env")
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                env[k] = v
    env.update({k: os.environ[k] for k in OWN_REDIS if os.environ.get(k)})
    return env


def _ephemeral_low():
    """The lowest port of the kernel's ephemeral range: every outgoing
    connection takes its source port from there."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    """A port nothing listens on, for a server a test starts. Drawn below
    the ephemeral range: a port the kernel hands out for a bind to 0 comes
    from that range, which the outgoing connections of every test running
    beside this one draw their source ports from, and one of them took
    such a port between this pick and the server's own bind (a loaded
    run's Caddy: "bind: address already in use"). Checked by a bind on
    every address (a server may listen on all of them)."""
    low = _ephemeral_low()
    if low > 12000:
        for _ in range(200):
            port = random.randint(10000, low - 1)
            with socket.socket() as s:
                try:
                    s.bind(("0.0.0.0", port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unique(prefix="t"):
    """A name no other test (or earlier run on the same Redis) uses."""
    unique.n += 1
    return "%s-%d-%d-%d" % (prefix, os.getpid(), int(time.time() * 1000) % 100000000, unique.n)


unique.n = 0


def wait_for(what, fn, timeout=60.0):
    """Polls fn() until it returns a truthy value; fails naming `what`.
    The default deadline is generous (60 s, was 10): it bounds a condition
    that never comes, and a loaded machine running tests side by side took
    longer than 10 s for a settle that came (issue 33)."""
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
