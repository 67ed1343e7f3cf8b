"""Redis for the tests: a minimal blocking RESP2 client (the tests need a
handful of commands, and a client of our own sees exactly the bytes a bucket
state holds), redis-servers of one test's own for kill/stop/restart tests,
and the key layout of docs/redis.md "Redis layout": policy hashes and bucket
states (lua/bucket.lua: two little-endian doubles)."""
import os
import socket
import struct
import subprocess
import tempfile
import time

from .stack import SOURCE_DIR, stack_env


class RedisError(Exception):
    pass


class Redis:
    """Blocking RESP2 client: enough for HSET/GET/TIME/CLIENT LIST/...

    Redis() with no address is the stack's Redis: under
    PERMITD_TEST_REDIS_MODE=cluster, a cluster.ClusterRedis over the
    stack's Redis Cluster, which routes each command by its key."""

    def __new__(cls, port=None, host="127.0.0.1", unix=None):
        from .cluster import ClusterRedis, redis_mode
        if cls is Redis and port is None and unix is None and redis_mode() == "cluster":
            return ClusterRedis()
        return super().__new__(cls)

    def __init__(self, port=None, host="127.0.0.1", unix=None):
        if port is None and unix is None:
            port = int(stack_env()["PERMITD_TEST_REDIS_PORT"])
        self.port = port
        if unix:
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.connect(unix)
        else:
            self.sock = socket.create_connection((host, port), timeout=10)
        self.buf = b""

    def close(self):
        self.sock.close()

    # Replies are read from self.buf at self.pos, and the buffer is cut only
    # when more is read: a pipeline of 300,000 replies (test_settle's fill)
    # took 42 s when every reply copied the rest of a 64 KiB buffer.
    pos = 0

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("redis closed the connection")
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = self.buf[self.pos:i]
                self.pos = i + 2
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = self.buf[self.pos:self.pos + n]
        self.pos += n + 2
        return data

    def _reply(self, raw=False):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self._exact(n)
            return data if raw else data.decode("utf-8", "replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply(raw) for _ in range(n)]
        raise RedisError("bad reply %r" % line)

    def __call__(self, *args):
        """Runs one command; bulk strings come back as text."""
        self._send(args)
        return self._reply()

    def raw(self, *args):
        """Runs one command; bulk strings come back as bytes, exactly (a
        bucket state is binary)."""
        self._send(args)
        return self._reply(raw=True)

    def each_master(self, *args):
        """One command on every master of a cluster (cluster.ClusterRedis):
        here, on the one Redis, its answer in a list."""
        return [self(*args)]

    def _send(self, args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)

    def time_us(self):
        sec, usec = self("TIME")
        return int(sec) * 1000000 + int(usec)


def put_policy(redis, name, apps="app", max_permits=10, rate=1, prefix="permitd:", **extra):
    """Writes a policy hash in the documented layout (docs/redis.md: Redis layout)."""
    fields = {"name": name, "apps": apps, "max_permits": max_permits, "rate": rate,
              "version": 1, "enabled": 1}
    fields.update(extra)
    args = []
    for k, v in fields.items():
        args += [k, v]
    existed = redis("DEL", "%s{%s}:policy" % (prefix, name))
    redis("HSET", "%s{%s}:policy" % (prefix, name), *args)
    if existed:
        # A policy written again: permitd instances that hold a copy reload
        # it on the change notice lua/sync.lua would have sent (docs/redis.md:
        # Redis layout), which arrives within milliseconds.
        redis("PUBLISH", prefix + "changes", "%s %s" % (name, fields["version"]))
        time.sleep(0.05)


def state_key(name, key="", prefix="permitd:", colocate=False):
    """A bucket's key (docs/redis.md: Redis layout): the shared bucket P{NAME}:b; a
    keyed one P{NAME:KEY}:k (its own slot), or P{NAME}:k:KEY for a policy
    that sets colocate (the policy's slot)."""
    if not key:
        return "%s{%s}:b" % (prefix, name)
    if colocate:
        return "%s{%s}:k:%s" % (prefix, name, key)
    return "%s{%s:%s}:k" % (prefix, name, key)


class PrivateRedis:
    """A redis-server of one test's own (for kill/stop/restart tests)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="permitd-redis-")
        self.port = None
        self.start()

    def start(self):
        out = subprocess.run([os.path.join(SOURCE_DIR, "tests", "stack", "redis.sh"), "start",
                              self.dir] + ([str(self.port)] if self.port else []),
                             check=True, capture_output=True, text=True).stdout
        env = dict(l.split("=", 1) for l in out.split())
        self.port = int(env["PERMITD_TEST_REDIS_PORT"])
        self.socket = env["PERMITD_TEST_REDIS_SOCKET"]
        self.url = env["PERMITD_TEST_REDIS_URL"]

    def stop(self):
        subprocess.run([os.path.join(SOURCE_DIR, "tests", "stack", "redis.sh"), "stop", self.dir],
                       check=True, capture_output=True)

    def pid(self):
        with open(os.path.join(self.dir, "redis.pid")) as f:
            return int(f.read())

    def client(self):
        return Redis(self.port)


# A bucket state (lua/bucket.lua): two little-endian doubles, the tokens and
# the Redis time in microseconds when they were measured.
STATE = struct.Struct("<ddd")   # tokens, t_us, the policy's version stamp (lua/bucket.lua)


def read_state(redis, key):
    """A bucket state key as (tokens, t_us), or None when there is none."""
    s = redis.raw("GET", key)
    if s is None:
        return None
    tokens, t, _version = STATE.unpack(s)
    return tokens, int(t)


def write_state(redis, key, tokens, t_us, version=0):
    """Puts a bucket in a known state: `tokens` measured at Redis time t_us
    (use redis.time_us() - X for a bucket last touched X µs ago), written
    under the policy version stamp `version` (0: older than any)."""
    redis("SET", key, STATE.pack(tokens, t_us, version))


def state_version(redis, key):
    """The policy version stamp a bucket state was last written under."""
    return STATE.unpack(redis.raw("GET", key))[2]


def hash_tag(key):
    """The part of a Redis key that Redis Cluster hashes (its hash tag rule)."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            return key[start + 1:end]
    return key
