"""Request bodies and HTTP framing on the wire (issue 42, "Request bodies
with no deadline"; issue 33, "One well-formed reply to bad framing"),
against a real permitd and Redis over raw sockets:

- hundreds of POSTs whose bodies trickle in a byte at a time, more than
  --max-connections: normal Acquires are still answered, and the server
  closes every trickling connection within --request-timeout (+ slack);
- framing libmicrohttpd 0.9.75 would answer with its own HTML page (a
  Content-Length that is not a number, negative, over 2^64; a bad chunk
  size; a header line over the pool) or that could be read two ways: on
  both listeners, exactly one well-formed HTTP response, a 400/429/431/501
  with a Connect JSON error, then the end of the connection;
- a chunked body far over --max-body-bytes sent slowly: the server answers
  and closes once the limit is passed, not at the body's end;
- the same framing cases on TLS listeners (--tls-cert/--tls-key) over
  Python's ssl sockets: one well-formed response each, sent on the TLS
  session, then its end."""
import json
import selectors
import shutil
import socket
import ssl
import tempfile
import threading
import time
import unittest

import harness
from harness import Permitd, Redis, decision, one_response, put_policy, unique
import test_tls    # its make_cert() and start(); a module, so that its tests are not this file's

ACQUIRE = b"/permit.v1.RateLimitService/Acquire"


def read_all(s, timeout=10.0):
    """Everything the server sends until it closes (or timeout passes:
    then b"<<open>>" is appended, so a kept-open connection shows)."""
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    except socket.timeout:
        return out + b"<<open>>"
    except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
        return out          # a TLS socket's end without (or with) its close_notify


def raw(port, data, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass                # refused part-way: what was answered still counts
        return read_all(s, timeout)
    finally:
        s.close()


class FramingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()
        cls.prefix = unique("f") + ":"
        cls.name = unique("pol")
        put_policy(cls.redis, cls.name, max_permits=1000000, rate=1000000, prefix=cls.prefix)

    @classmethod
    def tearDownClass(cls):
        cls.redis.close()

    def permitd(self, *args):
        p = Permitd(prefix=self.prefix, args=list(args))
        self.addCleanup(p.stop)
        return p

    def acquire_body(self):
        return json.dumps({"bucket": self.name, "app": "app"}).encode()

    def post_head(self, extra, path=ACQUIRE):
        return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + extra)

    # ---- bodies that trickle ----

    def test_trickling_bodies_are_cut_off_and_callers_get_in(self):
        # Idle timer 60 s: a byte a second resets it, so on its own it
        # would keep every trickling connection for the whole test.
        timeout_s = 4
        p = self.permitd("--max-connections", "200", "--connection-timeout", "60",
                         "--request-timeout", str(timeout_s))
        sel = selectors.DefaultSelector()
        self.addCleanup(sel.close)
        open_socks = set()
        self.addCleanup(lambda: [s.close() for s in list(open_socks)])
        head = self.post_head(b"Content-Length: 60000\r\n\r\n")
        for _ in range(250):
            s = socket.create_connection(("127.0.0.1", p.port), timeout=10)
            s.setblocking(False)
            try:
                s.send(head + b"{")
            except OSError:
                pass
            sel.register(s, selectors.EVENT_READ)
            open_socks.add(s)
        opened = time.monotonic()
        stop = threading.Event()
        self.addCleanup(stop.set)
        lock = threading.Lock()

        def drip():
            while not stop.is_set():
                with lock:
                    socks = list(open_socks)
                for s in socks:
                    try:
                        s.send(b" ")
                    except OSError:
                        pass
                stop.wait(1.0)

        threading.Thread(target=drip, daemon=True).start()

        # Normal callers get answered while the trickle goes on.
        # (Each on a connection of its own: each must get a slot.)
        for i in range(10):
            c = p.http()
            try:
                r = c.acquire(self.name)
            finally:
                c.conn.close()
            self.assertEqual(decision(r)["allowed"], True, "Acquire %d: %r" % (i, r))

        # Every trickling connection is closed by the server: its request
        # timeout, after its accept (those waiting in the backlog were
        # accepted later, as others were shed), plus generous slack.
        deadline = opened + timeout_s + 30
        while open_socks and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.5):
                s = key.fileobj
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(s)
                    with lock:
                        open_socks.discard(s)
                    s.close()
        self.assertEqual(len(open_socks), 0, "%d of 250 trickling connections still open %.0f s "
                         "after they began" % (len(open_socks), time.monotonic() - opened))

    # ---- framing ----

    def framing_cases(self, path):
        """(what, raw request, the statuses it may get): each would reach
        libmicrohttpd's own answers, or could be read two ways."""
        head = self.post_head(b"", path)
        body = self.acquire_body()
        return [
            ("Content-Length: abc", head + b"Content-Length: abc\r\n\r\n" + body, (400,)),
            ("a negative length", head + b"Content-Length: -5\r\n\r\n" + body, (400,)),
            ("two equal lengths", head + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
             % (len(body), len(body)) + body, (400,)),
            ("two lengths", head + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
             % (len(body), len(body) + 5) + body + b"GET /", (400,)),
            ("a length over 2^63", head + b"Content-Length: 9223372036854775808\r\n\r\n" + body,
             (400, 429)),
            ("a length over 2^64", head + b"Content-Length: 99999999999999999999999\r\n\r\n"
             + body, (400, 429)),
            ("a bad chunk size", head + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n"
             + body + b"\r\n0\r\n\r\n", (400,)),
            ("chunk data longer than its size", head + b"Transfer-Encoding: chunked\r\n\r\n2\r\n"
             + body + b"\r\n0\r\n\r\n", (400,)),
            ("an oversized header line", head + b"X-Junk: " + b"a" * 40000 + b"\r\n\r\n",
             (431,)),
            ("Content-Length and Transfer-Encoding", head + b"Content-Length: %d\r\n"
             b"Transfer-Encoding: chunked\r\n\r\n" % len(body) + body, (400,)),
            ("a header line without a colon", head + b"NoColon\r\n\r\n", (400,)),
            ("a request line that is not one", b"GARBAGE\r\n\r\n", (400,)),
        ]

    def send(self, port, data):
        """data on a new connection to port: what came back (raw())."""
        return raw(port, data)

    def api_port(self):
        """A new permitd's API listener."""
        return self.permitd().port

    def check_one_answer_each(self, port, path):
        for what, data, statuses in self.framing_cases(path):
            with self.subTest(what):
                out = self.send(port, data)
                status, headers, err = one_response(self, out)
                self.assertIn(status, statuses, out)
                self.assertIn(err["code"], ("invalid_argument", "resource_exhausted"), err)
                self.assertEqual(headers.get("connection"), "close", out)

    def test_bad_framing_gets_one_connect_error_on_the_api_listener(self):
        p = self.permitd()
        self.check_one_answer_each(p.port, ACQUIRE)
        # The listener serves the next caller as usual.
        self.assertEqual(decision(p.http().acquire(self.name))["allowed"], True)

    def test_bad_framing_gets_one_connect_error_on_the_admin_listener(self):
        p = self.permitd()
        self.check_one_answer_each(p.admin_port, b"/permit.v1.AdminAuthService/Login")
        self.assertEqual(p.admin().request("GET", "/healthz").status, 200)

    def test_pipelined_requests_before_bad_framing_are_answered_first(self):
        ok = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        out = self.send(self.api_port(), ok + ok + self.post_head(b"Content-Length: abc\r\n\r\n"))
        first, sep, rest = out.partition(b"ok\n")
        self.assertTrue(first.startswith(b"HTTP/1.1 200 "), out)
        second, sep, rest = rest.partition(b"ok\n")
        self.assertTrue(second.startswith(b"HTTP/1.1 200 "), out)
        status, _, err = one_response(self, rest)
        self.assertEqual(status, 400, out)

    # ---- bodies over the limit ----

    def test_a_chunked_body_over_the_limit_is_refused_once_it_passes_it(self):
        limit = 65536
        bound = limit + 256 * 1024
        p = self.permitd("--max-body-bytes", str(limit))
        s = socket.create_connection(("127.0.0.1", p.port), timeout=10)
        self.addCleanup(s.close)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        s.sendall(self.post_head(b"Transfer-Encoding: chunked\r\n\r\n"))
        piece = b"x" * 4096
        chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
        sel = selectors.DefaultSelector()
        self.addCleanup(sel.close)
        sel.register(s, selectors.EVENT_READ)
        # A 10 MB body, a chunk every 10 ms, until the server answers (or
        # closes), or the bound is passed: a server that waits for the
        # body's end sends nothing before then.
        sent = 0
        while sent < 10 * 1024 * 1024 and sent <= bound and not sel.select(timeout=0.01):
            try:
                s.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        self.assertLessEqual(sent, bound, "%d body bytes sent and no answer yet" % sent)
        status, _, err = one_response(self, read_all(s, 20))
        self.assertEqual(status, 429, err)
        self.assertEqual(err["code"], "resource_exhausted", err)
        self.assertIn(str(limit), err["message"])


class TlsFramingTest(FramingTest):
    """FramingTest's framing cases on TLS listeners: libmicrohttpd reads
    them through GnuTLS (gnutls_record_recv), which the plain listeners'
    recv() never sees."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="permitd-tls-framing-")
        cls.cert, cls.key = test_tls.make_cert(cls.dir)
        cls.ctx = ssl.create_default_context(cafile=cls.cert)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()

    # Only the framing tests: the plain ones run in FramingTest.
    test_trickling_bodies_are_cut_off_and_callers_get_in = None
    test_a_chunked_body_over_the_limit_is_refused_once_it_passes_it = None

    def send(self, port, data, timeout=10.0):
        s = self.ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=timeout),
                                 server_hostname="127.0.0.1")
        try:
            try:
                s.sendall(data)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                pass            # refused part-way: what was answered still counts
            return read_all(s, timeout)
        finally:
            s.close()

    def start(self):
        port, admin, _ = test_tls.TlsTest.start(self, "--tls-cert", self.cert, "--tls-key", self.key)
        return port, admin

    def api_port(self):
        return self.start()[0]

    def healthz(self, port):
        out = self.send(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return out.split(b" ", 2)[1] if out.startswith(b"HTTP/1.1 ") else out

    def test_bad_framing_gets_one_connect_error_on_the_api_listener(self):
        port, _ = self.start()
        self.check_one_answer_each(port, ACQUIRE)
        self.assertEqual(self.healthz(port), b"200")

    def test_bad_framing_gets_one_connect_error_on_the_admin_listener(self):
        _, admin = self.start()
        self.check_one_answer_each(admin, b"/permit.v1.AdminAuthService/Login")
        self.assertEqual(self.healthz(admin), b"200")


if __name__ == "__main__":
    harness.main()
