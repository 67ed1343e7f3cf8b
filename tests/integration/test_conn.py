"""Connection deadlines and HTTP framing (issue 17, "Slow and idle
connections take the API down" and "HTTP framing"), against a real permitd
and Redis over raw sockets:

- hundreds of slow-header and silent connections on a listener of 200
  slots: a normal Acquire is still answered promptly (--header-timeout,
  --first-byte-timeout, shedding), and /readyz and /metrics show the
  listener full meanwhile;
- idle keep-alive connections filling every slot: the oldest is closed so a
  new caller gets in;
- requests that could be read two ways (two Content-Lengths,
  Content-Length with Transfer-Encoding), an unknown Transfer-Encoding and
  a head over --max-header-bytes: exactly one well-formed HTTP response,
  a Connect JSON error, the connection closed, a smuggled request never
  answered."""
import http.client
import json
import socket
import threading
import time
import unittest

import harness
from harness import Permitd, Redis, decision, one_response, put_policy, unique

ACQUIRE = b"/permit.v1.RateLimitService/Acquire"


def read_all(s, timeout=5.0):
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
    except ConnectionResetError:
        return out


def raw(port, data, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        return read_all(s, timeout)
    finally:
        s.close()


class ConnTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()
        cls.prefix = unique("c") + ":"
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

    def timed_acquire(self, port, timeout):
        """One Acquire on a new connection: (status, seconds), or (None, seconds)
        when it was not answered within timeout."""
        t = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            c.request("POST", ACQUIRE.decode(), self.acquire_body(),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            return r.status, time.monotonic() - t
        except OSError:
            return None, time.monotonic() - t
        finally:
            c.close()

    def metric(self, p, line_prefix):
        text = p.admin().request("GET", "/metrics").body.decode()
        for line in text.splitlines():
            if line.startswith(line_prefix + " "):
                return float(line.split()[-1])
        self.fail("no metric %s in:\n%s" % (line_prefix, text))

    # ---- slow and idle connections ----

    def test_slow_headers_and_silent_sockets_do_not_lock_callers_out(self):
        # Idle timer 60 s: on its own it would keep every attacker (the
        # slow ones send a byte every half second) for the whole test.
        p = self.permitd("--threads", "1", "--max-connections", "200",
                         "--connection-timeout", "60", "--header-timeout", "2",
                         "--first-byte-timeout", "1")
        attackers = []
        stop = threading.Event()
        self.addCleanup(lambda: [s.close() for s in attackers])
        self.addCleanup(stop.set)
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", p.port), timeout=5)
            attackers.append(s)
            if i % 2 == 0:      # slow header; the odd ones stay silent
                s.sendall(b"POST " + ACQUIRE + b" HTTP/1.1\r\nHost: x\r\n")

        def drip():
            while not stop.is_set():
                for s in attackers[0::2]:
                    try:
                        s.sendall(b"X-Drip: 1\r\n")
                    except OSError:
                        pass
                stop.wait(0.5)

        threading.Thread(target=drip, daemon=True).start()

        # Readiness shows the saturation while every slot is held.
        deadline = time.monotonic() + 3
        while True:
            r = p.admin().request("GET", "/readyz")
            if r.status == 503 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(r.status, 503, r)
        self.assertRegex(r.body.decode(), r"api listener: full: 200 of 200 connections open")
        self.assertEqual(self.metric(p, 'permitd_http_connections_limit{listener="api"}'), 200)

        # A normal caller still gets in, while the attack goes on.
        # (Answered while the attack goes on, which lasts until stop is
        # set: 20 s is a bound, not a speed check; issue 33.)
        status, took = self.timed_acquire(p.port, timeout=20)
        self.assertEqual(status, 200, "Acquire not answered within 20 s (%.1f s)" % took)
        closed = sum(self.metric(p, 'permitd_http_connections_closed_total{listener="api",'
                                    'reason="%s"}' % reason) for reason in ("header_timeout", "shed_head"))
        self.assertGreater(closed, 0)
        stop.set()
        # Once the attack stops, readiness recovers.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            r = p.admin().request("GET", "/readyz")
            if "api listener: ok" in r.body.decode():
                break
            time.sleep(0.2)
        self.assertIn("api listener: ok", r.body.decode())

    def test_a_trickled_head_is_cut_off_at_the_header_timeout(self):
        p = self.permitd("--connection-timeout", "60", "--header-timeout", "3",
                         "--first-byte-timeout", "1")
        s = socket.create_connection(("127.0.0.1", p.port), timeout=10)
        self.addCleanup(s.close)
        t = time.monotonic()
        s.sendall(b"POST " + ACQUIRE + b" HTTP/1.1\r\n")
        closed = False
        while time.monotonic() - t < 30:
            try:
                s.sendall(b"X-Drip: 1\r\n")
            except OSError:
                closed = True
                break
            s.settimeout(0.3)
            try:
                if s.recv(4096) == b"":
                    closed = True
                    break
            except socket.timeout:
                pass
            except ConnectionResetError:
                closed = True
                break
        took = time.monotonic() - t
        # Not before the header timeout (3 s), and well before the
        # connection timeout (60 s): no tighter upper bound, which a loaded
        # machine stretches (issue 33).
        self.assertTrue(closed, "a head trickling in for 30 s was not cut off")
        self.assertGreater(took, 2.5)

    def test_idle_keepalive_connections_are_shed_first(self):
        p = self.permitd("--threads", "1", "--max-connections", "20",
                         "--connection-timeout", "60")
        idle = []
        self.addCleanup(lambda: [s.close() for s in idle])
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", p.port), timeout=5)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertIn(b"200 OK", s.recv(4096))
            idle.append(s)
        # Not let in, it would wait for the idle ones' 60 s timeout.
        status, took = self.timed_acquire(p.port, timeout=30)
        self.assertEqual(status, 200, "a new caller was not let in past idle keep-alive "
                                      "connections (%.1f s)" % took)
        # The oldest idle one made room; the newest is still served.
        self.assertEqual(read_all(idle[0], 2), b"")
        idle[-1].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertIn(b"200 OK", idle[-1].recv(4096))
        self.assertGreaterEqual(self.metric(
            p, 'permitd_http_connections_closed_total{listener="api",reason="shed_idle"}'), 1)

    # ---- framing ----

    def post_head(self, extra):
        return (b"POST " + ACQUIRE + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + extra)

    def test_two_content_lengths_are_refused_and_nothing_is_smuggled(self):
        p = self.permitd()
        body = self.acquire_body()
        smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        for lengths in ((len(body), len(body) + len(smuggled)), (len(body), len(body))):
            data = raw(p.port, self.post_head(b"".join(b"Content-Length: %d\r\n" % n
                                                       for n in lengths) + b"\r\n")
                       + body + smuggled)
            status, headers, err = one_response(self, data)
            self.assertEqual(status, 400, data)
            self.assertEqual(err["code"], "invalid_argument", err)
            self.assertIn("Content-Length", err["message"])
            self.assertEqual(headers.get("connection"), "close")

    def test_content_length_with_transfer_encoding_is_refused(self):
        p = self.permitd()
        smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        data = raw(p.port, self.post_head(b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n")
                   + b"0\r\n\r\n" + smuggled)
        status, _, err = one_response(self, data)
        self.assertEqual(status, 400, data)
        self.assertEqual(err["code"], "invalid_argument", err)
        self.assertIn("Transfer-Encoding", err["message"])

    def test_unknown_transfer_encoding_is_refused(self):
        p = self.permitd()
        data = raw(p.port, self.post_head(b"Transfer-Encoding: gzip\r\n\r\nxx"))
        status, _, err = one_response(self, data)
        self.assertEqual(status, 501, data)
        self.assertEqual(err["code"], "unimplemented", err)
        self.assertIn('"gzip"', err["message"])

    def test_a_head_over_max_header_bytes_gets_a_connect_error(self):
        p = self.permitd("--max-header-bytes", "4096")
        data = raw(p.port, self.post_head(b"X-Junk: " + b"a" * 6000 + b"\r\n\r\n"))
        status, _, err = one_response(self, data)
        self.assertEqual(status, 431, data)
        self.assertEqual(err["code"], "resource_exhausted", err)
        self.assertIn("4096", err["message"])
        # The listener serves the next caller as usual.
        self.assertEqual(decision(p.http().acquire(self.name))["allowed"], True)


if __name__ == "__main__":
    harness.main()
