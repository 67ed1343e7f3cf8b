"""The test harness itself (issue 18): harness.Http never sends a request
twice. A client that re-sends a request whose connection broke hides a
request the server acted on but did not answer: a double take would pass
unseen. Each test here runs a tiny HTTP server on a thread, which counts
the requests it reads and closes connections at chosen moments; the counts
show what the client sent. No permitd is involved: this is the client
under test, and the server is only a counter.

Since a refused connection is no longer tried again, harness.Permitd must
not return before permitd's admin listener (opened after the API one) takes
connections. That is checked with a stand-in for the permitd binary that
opens its admin port a second late: the real one's gap is too short to
lose the race every time."""
import os
import sys
import tempfile
import socket
import threading
import unittest
from unittest import mock

import harness
from harness import Http, free_port

# A stand-in for permitd: answers /healthz on --listen at once, and opens
# --admin-listen one second later; exits 0 on SIGTERM.
LATE_ADMIN = r"""
import http.server, signal, sys, threading, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
args = sys.argv[1:]
def port(flag):
    return int(args[args.index(flag) + 1].rsplit(":", 1)[1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
def serve(p):
    http.server.HTTPServer(("127.0.0.1", p), H).serve_forever()
threading.Thread(target=serve, args=(port("--listen"),), daemon=True).start()
time.sleep(1)
threading.Thread(target=serve, args=(port("--admin-listen"),), daemon=True).start()
while True:
    time.sleep(1)
"""


class CountingServer:
    """An HTTP/1.1 server on 127.0.0.1 that answers 200 "ok" with keep-alive
    and counts what it reads: `accepted` connections, `requests` (each head
    read in full, whether answered or not). plan(n) says what happens to the
    n-th request (1-based), counted over every connection:
      "answer"          answer it, keep the connection open
      "answer-close"    answer it (still announcing keep-alive), then close
      "close"           close the connection without answering (the server
                        acted on it, say, and then died)
      "answer-announce" answer with Connection: close, then close"""

    def __init__(self, plan):
        self.plan = plan
        self.accepted = 0
        self.requests = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.accepted += 1
            threading.Thread(target=self.connection, args=(conn,), daemon=True).start()

    def connection(self, conn):
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                buf = buf[length:]
                with self.lock:
                    self.requests += 1
                    what = self.plan(self.requests)
                if what == "close":
                    return
                extra = b"Connection: close\r\n" if what == "answer-announce" else b""
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + extra + b"\r\nok")
                if what != "answer":
                    conn.shutdown(socket.SHUT_RDWR)
                    return

    def close(self):
        self.sock.close()


class HttpNeverResends(unittest.TestCase):

    def serve(self, plan):
        s = CountingServer(plan)
        self.addCleanup(s.close)
        return s

    def test_harness_unanswered_request_is_an_error_not_a_resend(self):
        # The second request is read by the server, which closes without an
        # answer (it may have taken a permit). Re-sent, it would be read a
        # third time on a new connection and answered 200: a double take
        # reported as one success.
        s = self.serve(lambda n: "close" if n == 2 else "answer")
        c = Http(s.port)
        self.assertEqual(c.request("POST", "/x", b"{}").status, 200)
        with self.assertRaises(ConnectionError) as e:
            c.request("POST", "/x", b"{}")
        self.assertIn("POST /x", str(e.exception))
        self.assertIn("127.0.0.1:%d" % s.port, str(e.exception))
        self.assertEqual((s.requests, s.accepted), (2, 1))
        c.close()

    def test_harness_request_on_connection_closed_while_idle_is_not_resent(self):
        # The server answers the first request, then closes the connection
        # while it is idle, without announcing it. The next request goes out
        # on the dead connection and fails; it is not sent again.
        s = self.serve(lambda n: "answer-close")
        c = Http(s.port)
        self.assertEqual(c.request("GET", "/a").status, 200)
        harness.wait_for("the server to close the idle connection",
                         lambda: s.accepted == 1 and s.requests == 1)
        with self.assertRaises(ConnectionError):
            c.request("POST", "/b", b"{}")
        self.assertEqual((s.requests, s.accepted), (1, 1))
        c.close()

    def test_harness_next_request_after_a_failure_opens_a_new_connection(self):
        # After a failed request the connection is dropped; the next request
        # (a new one, which the test chose to send) goes out once, on a
        # connection of its own.
        s = self.serve(lambda n: "close" if n == 1 else "answer")
        c = Http(s.port)
        with self.assertRaises(ConnectionError):
            c.request("POST", "/x", b"{}")
        self.assertEqual(c.request("POST", "/x", b"{}").status, 200)
        self.assertEqual((s.requests, s.accepted), (2, 2))
        c.close()

    def test_harness_announced_close_is_followed(self):
        # A reply with Connection: close ends the connection by agreement;
        # the next request opens a new one and is sent once.
        s = self.serve(lambda n: "answer-announce")
        c = Http(s.port)
        for _ in range(3):
            self.assertEqual(c.request("GET", "/a").status, 200)
        self.assertEqual((s.requests, s.accepted), (3, 3))
        c.close()

    def test_harness_refused_connection_is_an_error(self):
        # Nothing listens: one attempt, an error naming the address.
        port = free_port()
        c = Http(port)
        with self.assertRaises(ConnectionError) as e:
            c.request("GET", "/healthz")
        self.assertIn("127.0.0.1:%d" % port, str(e.exception))


class PermitdWaitsForBothListeners(unittest.TestCase):

    def test_harness_permitd_returns_once_the_admin_listener_is_up(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write("#!%s\n%s" % (sys.executable, LATE_ADMIN))
        self.addCleanup(os.unlink, f.name)
        os.chmod(f.name, 0o755)
        with mock.patch.object(harness, "PERMITD_BIN", f.name):
            with harness.Permitd(redis_url="redis://127.0.0.1:1") as p:
                self.assertEqual(p.admin().request("GET", "/healthz").status, 200)


class ClusterClientRoutesBySlot(unittest.TestCase):
    """harness.ClusterRedis, which the suites use under
    PERMITD_TEST_REDIS_MODE=cluster, against the stack's real cluster."""

    def test_keyslot_agrees_with_redis_and_keys_land_on_their_master(self):
        import random
        c = harness.ClusterRedis()
        self.addCleanup(c.close)
        self.assertEqual(len(c.masters), 3)
        rnd = random.Random(7)
        for _ in range(500):
            k = "".join(rnd.choice("ab{}:-x") for _ in range(rnd.randint(0, 10)))
            self.assertEqual(harness.keyslot(k), int(c("CLUSTER", "KEYSLOT", k)), k)
        keys = ["harness-%d-{t%d}" % (os.getpid(), i) for i in range(60)]
        for i, k in enumerate(keys):
            c("SET", k, i)
        # Each key is on the master its slot names, and only there.
        for i, k in enumerate(keys):
            owner = c.slots[harness.keyslot(k)]
            self.assertEqual(c._node(*owner)("GET", k), str(i))
            for m in c.masters:
                if m != owner:
                    self.assertIn("MOVED", self._error(c._node(*m), "GET", k))
        self.assertEqual(c("EXISTS", *keys), 60)
        self.assertEqual(c("DEL", *keys), 60)

    @staticmethod
    def _error(node, *args):
        try:
            node(*args)
        except harness.RedisError as e:
            return str(e)
        return ""


if __name__ == "__main__":
    harness.main()
