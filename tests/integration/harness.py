"""Shared plumbing for permitd's integration tests.

Everything here talks to real processes: the redis-server the `stack`
fixture started (tests/stack/stack.sh, address in $PERMITD_STACK_DIR/env),
private redis-servers for tests that kill or stop Redis, and permitd
binaries started on free ports. No mocks.

  Redis      a minimal RESP client (the tests need a handful of commands)
  Permitd    one permitd process: start, wait for /healthz, stop, logs
  Http       keep-alive HTTP/1.1 client with Connect helpers
  pb_*       protobuf binary encode/decode for the permit.v1 messages
"""
import glob
import gzip
import json
import os
import signal
import socket
import subprocess
import struct
import sys
import tempfile
import time
import http.client
import unittest

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
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


# ---------------------------------------------------------------- Redis

class RedisError(Exception):
    pass


class Redis:
    """Blocking RESP2 client: enough for HSET/GET/TIME/CLIENT LIST/..."""

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

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
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
    """Writes a policy hash in the documented layout (README: Redis layout)."""
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
        # it on the change notice lua/sync.lua would have sent (README:
        # Redis layout), which arrives within milliseconds.
        redis("PUBLISH", prefix + "changes", "%s %s" % (name, fields["version"]))
        time.sleep(0.05)


def state_key(name, key="", prefix="permitd:", colocate=False):
    """A bucket's key (README: Redis layout): the shared bucket P{NAME}:b; a
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


# ---------------------------------------------------------------- permitd

class Permitd:
    """One permitd process on a free port. Use as a context manager."""

    def __init__(self, redis_url=None, prefix="permitd:", args=(), env=None, port=None):
        self.port = port or free_port()
        self.redis_url = redis_url or stack_env()["PERMITD_TEST_REDIS_URL"]
        self.log = tempfile.NamedTemporaryFile(prefix="permitd-", suffix=".log", delete=False)
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        # Every permitd also opens its admin listener: give it a free port
        # unless the test chose one.
        self.admin_port = free_port()
        admin = [] if "--admin-listen" in args else ["--admin-listen", "127.0.0.1:%d" % self.admin_port]
        # The production default (50 ms) is about latency; tests are about
        # behaviour on a shared, noisy machine, so they wait longer unless
        # they test the timeout itself.
        if "--redis-timeout-ms" not in args and "PERMITD_REDIS_TIMEOUT_MS" not in (env or {}):
            admin += ["--redis-timeout-ms", "1000"]
        self.argv = [PERMITD_BIN, "--listen", "127.0.0.1:%d" % self.port,
                     "--redis-url", self.redis_url, "--redis-prefix", prefix] + admin + list(args)
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=full_env)
        self.wait_healthy()

    def wait_healthy(self, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("permitd exited with %s:\n%s" % (self.proc.returncode, self.output()))
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                try:
                    c.request("GET", "/healthz")
                    if c.getresponse().status == 200:
                        return
                finally:
                    c.close()
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("permitd did not become healthy:\n" + self.output())

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError("permitd did not stop on %s:\n%s" % (sig, self.output()))
        return self.proc.returncode

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def http(self):
        return Http(self.port)

    def admin(self):
        return Http(self.admin_port)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        code = self.stop()
        if exc[0] is None and code != 0:
            raise RuntimeError("permitd exited with %d:\n%s" % (code, self.output()))
        if exc[0] is not None:
            sys.stderr.write("---- permitd log ----\n" + self.output() + "\n")


# ---------------------------------------------------------------- HTTP

class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "Reply(%d, %r, %r)" % (self.status, self.headers, self.body[:300])


class Http:
    """A keep-alive connection to one permitd."""

    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def request(self, method, path, body=None, headers=None):
        try:
            self.conn.request(method, path, body=body, headers=headers or {})
            r = self.conn.getresponse()
        except (http.client.HTTPException, OSError):
            # The server may close a connection after an error reply.
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.conn.request(method, path, body=body, headers=headers or {})
            r = self.conn.getresponse()
        return Reply(r.status, r.getheaders(), r.read())

    def rpc_json(self, method, msg, headers=None, service="permit.v1.RateLimitService"):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        return self.request("POST", "/%s/%s" % (service, method), json.dumps(msg).encode(), h)

    def rpc_proto(self, method, body, headers=None, service="permit.v1.RateLimitService"):
        h = {"Content-Type": "application/proto"}
        h.update(headers or {})
        return self.request("POST", "/%s/%s" % (service, method), body, h)

    def acquire(self, bucket, app="app", key="", permits=None, headers=None):
        msg = {"bucket": bucket, "app": app}
        if key:
            msg["key"] = key
        if permits is not None:
            msg["permits"] = permits
        return self.rpc_json("Acquire", msg, headers)

    def peek(self, bucket, app="app", key=""):
        msg = {"bucket": bucket, "app": app}
        if key:
            msg["key"] = key
        return self.rpc_json("Peek", msg)

    def close(self):
        self.conn.close()


def gz(data):
    return gzip.compress(data)


# ---------------------------------------------------------------- protobuf

def _varint(v):
    if v < 0:
        v += 1 << 64
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_encode(fields):
    """fields: list of (number, value); str -> length-delimited, int/bool -> varint."""
    out = b""
    for num, v in fields:
        if isinstance(v, (bytes, str)):
            b = v.encode() if isinstance(v, str) else v
            out += _varint(num << 3 | 2) + _varint(len(b)) + b
        else:
            out += _varint(num << 3) + _varint(int(v))
    return out


def _read_varint(data, i):
    """Returns (value, index after it) of the varint at data[i]."""
    v, shift = 0, 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def pb_decode(data):
    """Returns {field number: value} for varint and length-delimited fields."""
    out, i = {}, 0
    while i < len(data):
        key, i = _read_varint(data, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(data, i)
            out[num] = v - (1 << 64) if v >= 1 << 63 else v
        elif wt == 2:
            n, i = _read_varint(data, i)
            out[num] = data[i:i + n]
            i += n
        else:
            raise ValueError("wire type %d" % wt)
    return out


ACQUIRE_RESPONSE = {1: "allowed", 2: "remaining", 3: "limit", 4: "retry_after_ms", 5: "reset_after_ms"}
PEEK_RESPONSE = {1: "remaining", 2: "limit", 3: "reset_after_ms"}


def pb_named(data, names):
    """Decodes and names fields; absent fields read as their proto3 default 0."""
    raw = pb_decode(data)
    return {name: raw.get(num, 0) for num, name in names.items()}


# ---------------------------------------------------------------- Connect helpers

def content_type(reply):
    """The media type of a reply, without parameters, lower case."""
    return reply.headers.get("content-type", "").split(";")[0].strip().lower()


class ConnectAssertions:
    """Mixin for unittest.TestCase: checks on Connect replies."""

    def assertConnectError(self, reply, status, code, contains=()):
        """A Connect error: `status`, application/json, {"code": code,
        "message": ...}, the message holding every string in `contains`.
        Returns the message."""
        self.assertEqual(reply.status, status, reply)
        self.assertEqual(content_type(reply), "application/json", reply)
        body = reply.json()
        self.assertEqual(body.get("code"), code, reply)
        message = body.get("message", "")
        self.assertIsInstance(message, str, reply)
        for s in ([contains] if isinstance(contains, str) else contains):
            self.assertIn(s, message, reply)
        return message

    def assertOk(self, reply, codec="application/json"):
        self.assertEqual(reply.status, 200, reply)
        self.assertEqual(content_type(reply), codec, reply)


def chunked_post(port, path, chunks, headers=None, timeout=30):
    """POSTs `chunks` (bytes pieces) with Transfer-Encoding: chunked and no
    Content-Length, through http.client, on a connection of its own."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=(c for c in chunks), headers=headers or {},
                     encode_chunked=True)
        r = conn.getresponse()
        return Reply(r.status, r.getheaders(), r.read())
    finally:
        conn.close()


class _BytesSock:
    def __init__(self, data):
        self.data = data

    def makefile(self, *args, **kwargs):
        import io
        return io.BytesIO(self.data)


def parse_http_response(data):
    """A Reply from the raw bytes of one complete HTTP/1.1 response, or None
    while `data` does not hold a complete one."""
    if b"\r\n\r\n" not in data:
        return None
    r = http.client.HTTPResponse(_BytesSock(data))
    try:
        r.begin()
        body = r.read()
    except (http.client.HTTPException, ValueError):
        return None
    return Reply(r.status, r.getheaders(), body)


def raw_chunked_post(port, path, chunks, headers=None, timeout=60):
    """Sends a chunked POST over a raw socket, reading whatever the server
    answers while the body is still going out (a server may reply and close
    early). Returns (reply, error): reply is a Reply if a complete response
    arrived, else None; error is the OSError that cut sending or reading
    short, else None."""
    import select
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    head = "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nTransfer-Encoding: chunked\r\n" % (path, port)
    for k, v in (headers or {}).items():
        head += "%s: %s\r\n" % (k, v)
    received, error = b"", None
    try:
        sock.sendall((head + "\r\n").encode())
        for chunk in chunks:
            while select.select([sock], [], [], 0)[0]:
                data = sock.recv(65536)
                if not data:
                    break
                received += data
            if parse_http_response(received) is not None:
                break
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        else:
            sock.sendall(b"0\r\n\r\n")
    except OSError as e:
        error = e
    try:
        deadline = time.time() + timeout
        while parse_http_response(received) is None and time.time() < deadline:
            data = sock.recv(65536)
            if not data:
                break
            received += data
    except OSError as e:
        error = error or e
    finally:
        sock.close()
    return parse_http_response(received), error


# ---------------------------------------------------------------- decisions

def decision(reply):
    """A 200 Acquire/Peek JSON reply as a dict with snake_case keys and the
    proto3 defaults filled in (JSON leaves out fields at their default and
    writes int64 as strings): allowed (bool), remaining, limit,
    retry_after_ms, reset_after_ms (ints). AssertionError on anything else."""
    if reply.status != 200:
        raise AssertionError("expected a 200 decision, got %r" % (reply,))
    m = reply.json()

    def num(camel, snake):
        v = m.get(camel, m.get(snake))
        return 0 if v is None else int(v)

    return {"allowed": bool(m.get("allowed", False)),
            "remaining": num("remaining", "remaining"),
            "limit": num("limit", "limit"),
            "retry_after_ms": num("retryAfterMs", "retry_after_ms"),
            "reset_after_ms": num("resetAfterMs", "reset_after_ms")}


def error_code(reply):
    """The Connect error code of a reply ("" for a 200 or a body that is not one)."""
    if reply.status == 200:
        return ""
    try:
        return reply.json().get("code", "")
    except ValueError:
        return ""


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


def hammer(ports, bucket, threads=8, seconds=3.0, app="app", key="", permits=None):
    """Sequential Acquires on one bucket from `threads` client threads, spread
    round-robin over the permitd `ports`, each thread on its own keep-alive
    connection, for `seconds`. Returns a dict:
      allowed      number of allowed decisions
      denied       number of denials
      errors       replies that were not 200 (up to 20 of them)
      allowed_at   time.time() of each allowed reply, sorted
      per_port     {port: allowed}
      first_send, last_reply, elapsed (last_reply - first_send)"""
    import threading

    start = threading.Barrier(threads)
    lock = threading.Lock()
    out = {"allowed": 0, "denied": 0, "errors": [], "allowed_at": [],
           "per_port": {p: 0 for p in ports}, "first_send": None, "last_reply": None}

    def run(port):
        conn = Http(port)
        allowed, denied, errors, at = 0, 0, [], []
        start.wait()
        first = time.time()
        stop_at = first + seconds
        last = first
        while time.time() < stop_at:
            r = conn.acquire(bucket, app=app, key=key, permits=permits)
            last = time.time()
            if r.status != 200:
                errors.append(r)
                continue
            if decision(r)["allowed"]:
                allowed += 1
                at.append(last)
            else:
                denied += 1
        conn.close()
        with lock:
            out["allowed"] += allowed
            out["denied"] += denied
            out["errors"] += errors[:20]
            out["allowed_at"] += at
            out["per_port"][port] += allowed
            if out["first_send"] is None or first < out["first_send"]:
                out["first_send"] = first
            if out["last_reply"] is None or last > out["last_reply"]:
                out["last_reply"] = last

    ts = [threading.Thread(target=run, args=(ports[i % len(ports)],)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out["allowed_at"].sort()
    out["elapsed"] = out["last_reply"] - out["first_send"]
    return out


def migrate_with_client(database, url=None):
    """Applies every up migration with the stock mariadb client."""
    for f in sorted(glob.glob(os.path.join(SOURCE_DIR, "migrations", "*.up.sql"))):
        with open(f) as fh:
            mysql(fh.read(), url=url, database=database)


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


# ---------------------------------------------------------------- MariaDB

class MysqlError(Exception):
    pass


def mysql_url_parts(url):
    """{user, password, host, port, socket, database} of a
    mysql://user[:pass]@host[:port]/db[?socket=/path] URL (percent-decoded)."""
    from urllib.parse import urlsplit, unquote, parse_qs
    u = urlsplit(url)
    if u.scheme != "mysql":
        raise ValueError("not a mysql:// URL: %r" % url)
    netloc = u.netloc
    userinfo, _, hostport = netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    host, _, port = hostport.partition(":")
    return {"user": unquote(user), "password": unquote(password), "host": host,
            "port": int(port) if port else 3306,
            "socket": parse_qs(u.query).get("socket", [""])[0],
            "database": unquote(u.path.lstrip("/"))}


def mysql(sql, url=None, database=None, timeout=60):
    """Runs `sql` (one or more statements) through the stock client,
    `mariadb --no-defaults --batch --skip-column-names`, and returns the rows
    of the last result as lists of strings (NULL reads "NULL"; tabs and
    newlines inside values come back escaped as the client writes them).
    url defaults to the stack's root URL (root over the socket); database
    overrides the URL's. Raises MysqlError with the client's message."""
    p = mysql_url_parts(url or stack_env()["PERMITD_TEST_MYSQL_ROOT_URL"])
    argv = ["mariadb", "--no-defaults", "--batch", "--skip-column-names",
            "--connect-timeout=10", "-u", p["user"]]
    if p["socket"]:
        argv += ["--protocol=socket", "--socket=" + p["socket"]]
    else:
        argv += ["--protocol=tcp", "-h", p["host"], "-P", str(p["port"])]
    db = database if database is not None else p["database"]
    if db:
        argv += ["-D", db]
    env = dict(os.environ)
    env.pop("MYSQL_PWD", None)
    if p["password"]:
        env["MYSQL_PWD"] = p["password"]   # kept off the command line
    r = subprocess.run(argv, input=sql, capture_output=True, text=True, env=env,
                       timeout=timeout)
    if r.returncode != 0:
        raise MysqlError(r.stderr.strip())
    return [line.split("\t") for line in r.stdout.splitlines()]


class PrivateMariaDB:
    """A mariadbd of one test's own (for kill/stop/restart tests), started by
    tests/stack/mariadb.sh in a temporary directory. restart() keeps the data
    and the port; kill() is a SIGKILL (a crash); cleanup() stops it and
    removes the directory. Has database `permitd` and user permitd/permitd,
    like the stack's."""

    SCRIPT = os.path.join(SOURCE_DIR, "tests", "stack", "mariadb.sh")

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="permitd-mariadb-")
        self.port = None
        self.start()

    def start(self):
        out = subprocess.run([self.SCRIPT, "start", self.dir] +
                             ([str(self.port)] if self.port else []),
                             check=True, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL).stdout
        env = dict(l.split("=", 1) for l in out.split())
        self.port = int(env["PERMITD_TEST_MYSQL_PORT"])
        self.socket = env["PERMITD_TEST_MYSQL_SOCKET"]
        self.url = env["PERMITD_TEST_MYSQL_URL"]
        self.root_url = env["PERMITD_TEST_MYSQL_ROOT_URL"]

    def stop(self):
        subprocess.run([self.SCRIPT, "stop", self.dir], check=True, capture_output=True,
                       stdin=subprocess.DEVNULL)

    def restart(self):
        self.stop()
        self.start()

    def pid(self):
        with open(os.path.join(self.dir, "mariadb.pid")) as f:
            return int(f.read())

    def kill(self, sig=signal.SIGKILL):
        """Kills the server without a shutdown and waits until it is gone."""
        pid = self.pid()
        os.kill(pid, sig)
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def sql(self, sql, database=None):
        return mysql(sql, url=self.root_url, database=database)

    def cleanup(self):
        import shutil
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
