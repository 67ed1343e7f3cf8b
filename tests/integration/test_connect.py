#!/usr/bin/env python3
"""The Connect protocol on the API listener (DESIGN.md "Wire protocol",
https://connectrpc.com/docs/protocol): codecs, GET for Peek, chunked and
gzip bodies, timeouts, errors and their HTTP statuses, body limits,
RateLimit headers, keep-alive and SIGTERM."""
import base64
import json
import math
import os
import re
import signal
import sys
import time
import unittest
import urllib.parse
import http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (ACQUIRE_RESPONSE, PEEK_RESPONSE, ConnectAssertions, Permitd,  # noqa: E402
                     PrivateRedis, Redis, chunked_post, content_type, gz, pb_encode,
                     pb_named, put_policy, raw_chunked_post, unique)

SVC = "/permit.v1.RateLimitService"
ACQUIRE = SVC + "/Acquire"
PEEK = SVC + "/Peek"
JSON = {"Content-Type": "application/json"}
PROTO = {"Content-Type": "application/proto"}


def acquire_pb(bucket, app="app", key="", permits=0):
    fields = [(1, bucket), (2, app)]
    if key:
        fields.append((3, key))
    if permits:
        fields.append((4, permits))
    return pb_encode(fields)


def peek_pb(bucket, app="app", key=""):
    fields = [(1, bucket), (2, app)]
    if key:
        fields.append((3, key))
    return pb_encode(fields)


class ConnectTest(ConnectAssertions, unittest.TestCase):
    """Against one permitd on the stack's Redis."""

    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()
        cls.permitd = Permitd()

    @classmethod
    def tearDownClass(cls):
        code = cls.permitd.stop()
        cls.redis.close()
        if code != 0:
            raise RuntimeError("permitd exited with %s:\n%s" % (code, cls.permitd.output()))

    def setUp(self):
        self.http = self.permitd.http()

    def tearDown(self):
        self.http.close()

    def policy(self, **kw):
        name = unique("conn")
        kw.setdefault("max_permits", 5)
        kw.setdefault("rate", 0.01)   # slow enough that counts stay exact
        put_policy(self.redis, name, **kw)
        return name

    def post(self, path, body, headers):
        return self.http.request("POST", path, body, headers)

    # ------------------------------------------------------------ codecs

    def test_acquire_and_peek_proto(self):
        name = self.policy()
        r = self.post(ACQUIRE, acquire_pb(name), PROTO)
        self.assertOk(r, "application/proto")
        got = pb_named(r.body, ACQUIRE_RESPONSE)
        self.assertEqual(got["allowed"], 1, got)
        self.assertEqual(got["remaining"], 4, got)
        self.assertEqual(got["limit"], 5, got)
        self.assertEqual(got["retry_after_ms"], 0, got)
        self.assertGreater(got["reset_after_ms"], 0, got)

        r = self.post(ACQUIRE, acquire_pb(name, permits=3), PROTO)
        self.assertOk(r, "application/proto")
        self.assertEqual(pb_named(r.body, ACQUIRE_RESPONSE)["remaining"], 1)

        r = self.post(PEEK, peek_pb(name), PROTO)
        self.assertOk(r, "application/proto")
        got = pb_named(r.body, PEEK_RESPONSE)
        self.assertEqual(got["remaining"], 1, got)
        self.assertEqual(got["limit"], 5, got)
        self.assertGreater(got["reset_after_ms"], 0, got)

    def test_acquire_and_peek_json(self):
        name = self.policy()
        r = self.http.acquire(name)
        self.assertOk(r)
        body = r.json()
        self.assertIs(body.get("allowed"), True, r)
        # proto3 JSON: int64 as strings, lowerCamelCase names.
        self.assertEqual(body.get("remaining"), "4", r)
        self.assertEqual(body.get("limit"), "5", r)
        self.assertIn("resetAfterMs", body, r)
        self.assertIsInstance(body["resetAfterMs"], str, r)
        self.assertGreater(int(body["resetAfterMs"]), 0, r)
        for k in body:
            self.assertNotIn("_", k, "field names must be lowerCamelCase: %r" % r)

        r = self.http.peek(name)
        self.assertOk(r)
        body = r.json()
        self.assertEqual(body.get("remaining"), "4", r)
        self.assertEqual(body.get("limit"), "5", r)
        self.assertIsInstance(body.get("resetAfterMs"), str, r)
        self.assertNotIn("reset_after_ms", body, r)

    def test_json_charset_parameter(self):
        name = self.policy()
        r = self.post(ACQUIRE, json.dumps({"bucket": name, "app": "app"}).encode(),
                      {"Content-Type": "application/json; charset=utf-8"})
        self.assertOk(r)
        self.assertEqual(r.json().get("remaining"), "4", r)
        r = self.post(PEEK, json.dumps({"bucket": name, "app": "app"}).encode(),
                      {"Content-Type": "application/json;charset=UTF-8"})
        self.assertOk(r)
        self.assertEqual(r.json().get("remaining"), "4", r)

    def test_json_denial_is_camel_case_with_strings(self):
        name = self.policy(max_permits=1, rate=0.01)
        self.assertOk(self.http.acquire(name))
        r = self.http.acquire(name)
        self.assertOk(r)
        body = r.json()
        # false and 0 are omitted by proto3 JSON; present, they must say so.
        self.assertIn(body.get("allowed", False), (False,), r)
        self.assertIn(body.get("remaining", "0"), ("0",), r)
        self.assertEqual(body.get("limit"), "1", r)
        self.assertIn("retryAfterMs", body, r)
        self.assertIsInstance(body["retryAfterMs"], str, r)
        self.assertGreater(int(body["retryAfterMs"]), 0, r)
        self.assertNotIn("retry_after_ms", body, r)
        self.assertRegex(r.body.decode(), r'"retryAfterMs":\s*"\d+"')

    def test_json_int64_as_number_or_string(self):
        name = self.policy(max_permits=10, rate=0.01)
        r = self.http.rpc_json("Acquire", {"bucket": name, "app": "app", "permits": 2})
        self.assertOk(r)
        self.assertEqual(r.json().get("remaining"), "8", r)
        r = self.http.rpc_json("Acquire", {"bucket": name, "app": "app", "permits": "3"})
        self.assertOk(r)
        self.assertEqual(r.json().get("remaining"), "5", r)
        r = self.http.rpc_json("Acquire", {"bucket": name, "app": "app", "permits": "abc"})
        self.assertConnectError(r, 400, "invalid_argument", "permits")
        # Nothing was taken by the refused request.
        self.assertEqual(self.http.peek(name).json().get("remaining"), "5")

    def test_json_unknown_field_rejected(self):
        name = self.policy()
        r = self.http.rpc_json("Acquire", {"bucket": name, "app": "app", "bogusField": 1})
        self.assertConnectError(r, 400, "invalid_argument", "bogusField")
        r = self.http.rpc_json("Peek", {"bucket": name, "app": "app", "permits": 1})
        self.assertConnectError(r, 400, "invalid_argument", "permits")
        # The refused Acquire took nothing.
        self.assertEqual(self.http.peek(name).json().get("remaining"), "5")

    def test_json_malformed_body(self):
        name = self.policy()
        r = self.post(ACQUIRE, b'{"bucket":"%s",' % name.encode(), JSON)
        self.assertConnectError(r, 400, "invalid_argument")
        r = self.post(ACQUIRE, b'[1,2]', JSON)
        self.assertConnectError(r, 400, "invalid_argument")

    def test_proto_malformed_body(self):
        # A length-delimited field running past the end of the body.
        r = self.post(ACQUIRE, b"\x0a\x7fabc", PROTO)
        self.assertConnectError(r, 400, "invalid_argument")

    # ------------------------------------------------------------ chunked

    def test_chunked_json_body(self):
        name = self.policy()
        body = json.dumps({"bucket": name, "app": "app", "permits": 2}).encode()
        chunks = [body[i:i + 7] for i in range(0, len(body), 7)]
        self.assertGreater(len(chunks), 3)
        r = chunked_post(self.permitd.port, ACQUIRE, chunks, JSON)
        self.assertOk(r)
        self.assertEqual(r.json().get("remaining"), "3", r)

    def test_chunked_proto_body(self):
        name = self.policy()
        body = acquire_pb(name, permits=2)
        chunks = [body[i:i + 5] for i in range(0, len(body), 5)]
        self.assertGreater(len(chunks), 3)
        r = chunked_post(self.permitd.port, ACQUIRE, chunks, PROTO)
        self.assertOk(r, "application/proto")
        got = pb_named(r.body, ACQUIRE_RESPONSE)
        self.assertEqual((got["allowed"], got["remaining"]), (1, 3), got)
        r = chunked_post(self.permitd.port, PEEK, [peek_pb(name)], PROTO)
        self.assertOk(r, "application/proto")
        self.assertEqual(pb_named(r.body, PEEK_RESPONSE)["remaining"], 3)

    # ------------------------------------------------------------ GET

    def test_get_peek_json(self):
        name = self.policy(max_permits=7, rate=0.01)
        self.assertOk(self.http.acquire(name, key="u 1/é", permits=2))
        msg = json.dumps({"bucket": name, "app": "app", "key": "u 1/é"})
        r = self.http.request("GET", PEEK + "?connect=v1&encoding=json&message="
                              + urllib.parse.quote(msg, safe=""))
        self.assertOk(r)
        body = r.json()
        self.assertEqual(body.get("remaining"), "5", r)
        self.assertEqual(body.get("limit"), "7", r)

    def test_get_peek_proto_base64(self):
        name = self.policy(max_permits=7, rate=0.01)
        # A key whose message encodes with the URL-safe alphabet ('-' or
        # '_') and needs padding, which a GET sends without.
        for i in range(10000):
            key = "key%d~\xfe" % i
            raw = peek_pb(name, key=key)
            b64 = base64.urlsafe_b64encode(raw)
            if (b"-" in b64 or b"_" in b64) and b64.endswith(b"="):
                break
        else:
            self.fail("no key found whose encoding shows the URL-safe alphabet")
        self.assertOk(self.http.acquire(name, key=key, permits=2))
        msg = b64.rstrip(b"=").decode()
        r = self.http.request("GET", PEEK + "?connect=v1&encoding=proto&base64=1&message=" + msg)
        self.assertOk(r, "application/proto")
        got = pb_named(r.body, PEEK_RESPONSE)
        self.assertEqual(got["remaining"], 5, got)
        self.assertEqual(got["limit"], 7, got)

    def test_get_acquire_not_allowed(self):
        name = self.policy()
        msg = urllib.parse.quote(json.dumps({"bucket": name, "app": "app"}), safe="")
        r = self.http.request("GET", ACQUIRE + "?connect=v1&encoding=json&message=" + msg)
        self.assertEqual(r.status, 405, r)
        self.assertIn("allow", r.headers, r)
        self.assertIn("POST", r.headers["allow"], r)
        self.assertNotIn("GET", r.headers["allow"], r)
        # Nothing was taken.
        self.assertEqual(self.http.peek(name).json().get("remaining"), "5")
        # Peek allows GET and POST, and nothing else.
        r = self.http.request("PUT", PEEK, b"{}", JSON)
        self.assertEqual(r.status, 405, r)
        self.assertIn("GET", r.headers.get("allow", ""), r)
        self.assertIn("POST", r.headers.get("allow", ""), r)

    # ------------------------------------------------------------ headers

    def test_connect_timeout_ms_invalid(self):
        name = self.policy()
        for bad in ("abc", "-5", "1.5", "12345678901"):
            r = self.http.acquire(name, headers={"Connect-Timeout-Ms": bad})
            self.assertConnectError(r, 400, "invalid_argument", "Connect-Timeout-Ms")
        r = self.http.acquire(name, headers={"Connect-Timeout-Ms": "5000"})
        self.assertOk(r)
        self.assertEqual(r.json().get("remaining"), "4", r)

    def test_connect_protocol_version(self):
        name = self.policy()
        r = self.http.acquire(name, headers={"Connect-Protocol-Version": "1"})
        self.assertOk(r)
        self.assertEqual(r.json().get("remaining"), "4", r)
        r = self.http.acquire(name, headers={"Connect-Protocol-Version": "2"})
        self.assertConnectError(r, 400, "invalid_argument", "Connect-Protocol-Version")
        self.assertEqual(self.http.peek(name).json().get("remaining"), "4")

    # ------------------------------------------------------------ gzip

    def test_gzip_request_json(self):
        name = self.policy()
        body = gz(json.dumps({"bucket": name, "app": "app", "permits": 2}).encode())
        r = self.post(ACQUIRE, body, {"Content-Type": "application/json",
                                      "Content-Encoding": "gzip"})
        self.assertOk(r)
        self.assertEqual(r.json().get("remaining"), "3", r)

    def test_gzip_request_proto(self):
        name = self.policy()
        r = self.post(ACQUIRE, gz(acquire_pb(name, permits=2)),
                      {"Content-Type": "application/proto", "Content-Encoding": "gzip"})
        self.assertOk(r, "application/proto")
        self.assertEqual(pb_named(r.body, ACQUIRE_RESPONSE)["remaining"], 3)
        r = self.post(PEEK, gz(peek_pb(name)),
                      {"Content-Type": "application/proto", "Content-Encoding": "gzip"})
        self.assertOk(r, "application/proto")
        self.assertEqual(pb_named(r.body, PEEK_RESPONSE)["remaining"], 3)

    def test_gzip_corrupt(self):
        name = self.policy()
        good = gz(json.dumps({"bucket": name, "app": "app"}).encode())
        h = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        corrupt = good[:12] + bytes(b ^ 0x5A for b in good[12:])
        r = self.post(ACQUIRE, corrupt, h)
        self.assertConnectError(r, 400, "invalid_argument", "gzip")
        r = self.post(ACQUIRE, b"this is not gzip at all", h)
        self.assertConnectError(r, 400, "invalid_argument", "gzip")
        r = self.post(ACQUIRE, good[:len(good) // 2], h)
        self.assertConnectError(r, 400, "invalid_argument", "gzip")
        # Bytes after the gzip stream that are not another member of it.
        r = self.post(ACQUIRE, good + b"GARBAGE", h)
        self.assertConnectError(r, 400, "invalid_argument", "gzip")
        r = self.post(ACQUIRE, good + good[:10], h)
        self.assertConnectError(r, 400, "invalid_argument", "gzip")
        # None of them took a permit.
        self.assertEqual(self.http.peek(name).json().get("remaining"), "5")

    def test_gzip_members_are_read_one_after_the_other(self):
        # A gzip body may hold several members (RFC 1952; `cat a.gz b.gz`):
        # the message is what they hold together.
        name = self.policy()
        text = json.dumps({"bucket": name, "app": "app", "permits": 2}).encode()
        body = gz(text[:10]) + gz(text[10:])
        r = self.post(ACQUIRE, body, {"Content-Type": "application/json",
                                      "Content-Encoding": "gzip"})
        self.assertOk(r)
        self.assertEqual(r.json().get("remaining"), "3", r)

    def test_unsupported_compression(self):
        name = self.policy()
        r = self.post(ACQUIRE, json.dumps({"bucket": name, "app": "app"}).encode(),
                      {"Content-Type": "application/json", "Content-Encoding": "br"})
        self.assertConnectError(r, 501, "unimplemented", "br")
        self.assertEqual(self.http.peek(name).json().get("remaining"), "5")

    # ------------------------------------------------------------ errors

    def test_error_not_found(self):
        r = self.http.acquire(unique("missing"))
        self.assertConnectError(r, 404, "not_found", "bucket")
        r = self.http.peek(unique("missing"))
        self.assertConnectError(r, 404, "not_found", "bucket")

    def test_error_permission_denied(self):
        name = self.policy(apps="other,app2")
        r = self.http.acquire(name, app="app")
        self.assertConnectError(r, 403, "permission_denied", "app")
        r = self.http.peek(name, app="app")
        self.assertConnectError(r, 403, "permission_denied")
        self.assertOk(self.http.acquire(name, app="app2"))

    def test_error_out_of_range(self):
        name = self.policy()
        r = self.http.acquire(name, permits=6)
        self.assertConnectError(r, 400, "out_of_range", "permits")
        r = self.http.acquire(name, permits=5)
        self.assertOk(r)
        self.assertEqual(r.json().get("remaining", "0"), "0", r)

    def test_error_invalid_argument(self):
        name = self.policy()
        self.assertConnectError(self.http.acquire("bad name!"), 400, "invalid_argument", "bucket")
        self.assertConnectError(self.http.acquire(""), 400, "invalid_argument", "bucket")
        self.assertConnectError(self.http.acquire(name, app=""), 400, "invalid_argument", "app")
        self.assertConnectError(self.http.acquire(name, permits=-1), 400, "invalid_argument",
                                "permits")
        self.assertConnectError(self.http.acquire(name, key="a\x01b"), 400, "invalid_argument",
                                "key")
        self.assertConnectError(self.http.peek("bad name!"), 400, "invalid_argument", "bucket")
        self.assertEqual(self.http.peek(name).json().get("remaining"), "5")

    def test_error_failed_precondition(self):
        name = self.policy(enabled=0)
        r = self.http.acquire(name)
        self.assertConnectError(r, 400, "failed_precondition")

    def test_error_reply_is_json_for_proto_requests(self):
        r = self.post(ACQUIRE, acquire_pb(unique("missing")), PROTO)
        self.assertConnectError(r, 404, "not_found")
        r = self.post(ACQUIRE, acquire_pb("bad name!"), PROTO)
        self.assertConnectError(r, 400, "invalid_argument", "bucket")

    def test_unknown_procedure(self):
        r = self.post(SVC + "/Nope", b"{}", JSON)
        self.assertEqual(r.status, 404, r)
        r = self.post("/nope", b"{}", JSON)
        self.assertEqual(r.status, 404, r)
        r = self.http.request("GET", "/nope")
        self.assertEqual(r.status, 404, r)
        r = self.post("/permit.v1.OtherService/Acquire", b"{}", JSON)
        self.assertEqual(r.status, 404, r)

    def test_unsupported_content_type(self):
        name = self.policy()
        body = json.dumps({"bucket": name, "app": "app"}).encode()
        for ct in ("text/plain", "application/xml", "application/jsonx",
                   "application/grpc"):
            r = self.post(ACQUIRE, body, {"Content-Type": ct})
            self.assertEqual(r.status, 415, (ct, r))
        self.assertEqual(self.http.peek(name).json().get("remaining"), "5")

    # ------------------------------------------------------------ RateLimit headers

    def test_ratelimit_headers_allowed(self):
        name = self.policy(max_permits=5, rate=0.1)
        r = self.http.acquire(name)
        self.assertOk(r)
        body = r.json()
        # w: seconds an empty bucket takes to fill, 5 / 0.1.
        self.assertEqual(r.headers.get("ratelimit-policy"), '"%s";q=5;w=50' % name, r)
        m = re.fullmatch(r'"%s";r=(\d+);t=(\d+)' % re.escape(name), r.headers.get("ratelimit", ""))
        self.assertIsNotNone(m, r)
        self.assertEqual(int(m.group(1)), 4, r)
        self.assertEqual(int(m.group(2)), math.ceil(int(body["resetAfterMs"]) / 1000), r)
        self.assertNotIn("retry-after", r.headers, r)

        # Same headers for a binary request.
        r = self.post(ACQUIRE, acquire_pb(name, permits=2), PROTO)
        self.assertOk(r, "application/proto")
        self.assertEqual(r.headers.get("ratelimit-policy"), '"%s";q=5;w=50' % name, r)
        self.assertRegex(r.headers.get("ratelimit", ""), r'^"%s";r=2;t=\d+$' % re.escape(name))
        self.assertNotIn("retry-after", r.headers, r)

    def test_ratelimit_headers_at_their_longest(self):
        # The longest name a policy may have and the largest numbers the
        # headers can carry come out whole: 2^53 permits, and a fill time
        # capped at 99999999999999 s.
        name = unique("h") + "x" * 100
        name = name + "y" * (128 - len(name))
        put_policy(self.redis, name, max_permits=9007199254740992, rate=0.000001)
        r = self.post(ACQUIRE, acquire_pb(name, permits=3), PROTO)
        self.assertOk(r, "application/proto")
        self.assertEqual(r.headers.get("ratelimit-policy"),
                         '"%s";q=9007199254740992;w=99999999999999' % name, r)
        self.assertRegex(r.headers.get("ratelimit", ""),
                         r'^"%s";r=9007199254740989;t=\d{7}$' % re.escape(name))

    def test_ratelimit_headers_denied(self):
        # 0.3/s: the wait is about 3.33 s, so Retry-After must say 4, not 3.
        name = self.policy(max_permits=1, rate=0.3)
        self.assertOk(self.http.acquire(name))
        r = self.http.acquire(name)
        self.assertEqual(r.status, 200, r)   # a denial is an answer, not an error
        body = r.json()
        self.assertIn(body.get("allowed", False), (False,), r)
        retry_ms = int(body["retryAfterMs"])
        self.assertGreater(retry_ms, 1000, r)
        self.assertIn("retry-after", r.headers, r)
        self.assertRegex(r.headers["retry-after"], r"^\d+$")
        retry_s = int(r.headers["retry-after"])
        self.assertGreaterEqual(retry_s, 1)
        self.assertEqual(retry_s, math.ceil(retry_ms / 1000), r)
        self.assertEqual(r.headers.get("ratelimit-policy"), '"%s";q=1;w=4' % name, r)
        self.assertRegex(r.headers.get("ratelimit", ""), r'^"%s";r=0;t=\d+$' % re.escape(name))

        # And in binary: HTTP 200, allowed absent (false).
        r = self.post(ACQUIRE, acquire_pb(name), PROTO)
        self.assertOk(r, "application/proto")
        got = pb_named(r.body, ACQUIRE_RESPONSE)
        self.assertEqual(got["allowed"], 0, got)
        self.assertGreater(got["retry_after_ms"], 0, got)
        self.assertEqual(int(r.headers.get("retry-after", "-1")),
                         math.ceil(got["retry_after_ms"] / 1000), r)

    def test_retry_after_small_wait_is_at_least_one(self):
        # 2/s: the wait is at most 500 ms, which rounds up to 1 s, never 0.
        name = self.policy(max_permits=1, rate=2)
        denied = None
        for _ in range(20):
            r = self.http.acquire(name)
            self.assertOk(r)
            if not r.json().get("allowed", False):
                denied = r
                break
        self.assertIsNotNone(denied, "a 1-permit bucket was never denied")
        self.assertEqual(denied.headers.get("retry-after"), "1", denied)

    def test_peek_has_no_retry_after(self):
        name = self.policy(max_permits=1, rate=0.01)
        self.assertOk(self.http.acquire(name))
        r = self.http.peek(name)
        self.assertOk(r)
        self.assertNotIn("retry-after", r.headers, r)

    # ------------------------------------------------------------ misc

    def test_healthz(self):
        r = self.http.request("GET", "/healthz")
        self.assertEqual(r.status, 200, r)

    def test_keep_alive_200_requests(self):
        name = self.policy(max_permits=1000, rate=1)
        conn = http.client.HTTPConnection("127.0.0.1", self.permitd.port, timeout=30)
        try:
            sock = None
            for i in range(200):
                if i % 2 == 0:
                    conn.request("POST", ACQUIRE, json.dumps({"bucket": name, "app": "app"}),
                                 JSON)
                else:
                    conn.request("POST", PEEK, peek_pb(name), PROTO)
                r = conn.getresponse()
                data = r.read()
                self.assertEqual(r.status, 200, (i, data))
                self.assertFalse(r.will_close, "server closed the connection at request %d" % i)
                if sock is None:
                    sock = conn.sock
                self.assertIs(conn.sock, sock, "a new connection was opened at request %d" % i)
                if i % 2 == 0:
                    self.assertIs(json.loads(data).get("allowed"), True, data)
        finally:
            conn.close()
        self.assertLessEqual(int(self.http.peek(name).json()["remaining"]), 999)


class IsolatedTest(ConnectAssertions, unittest.TestCase):
    """Tests that need a permitd (or a Redis) of their own."""

    def test_body_limit(self):
        redis = Redis()
        name = unique("limit")
        put_policy(redis, name, max_permits=100, rate=1)
        with Permitd(args=["--max-body-bytes", "1024"]) as p:
            h = p.http()
            self.assertOk(h.acquire(name))

            # Declared with Content-Length.
            msg = {"bucket": name, "app": "app", "key": ""}
            msg["key"] = "x" * (2000 - len(json.dumps(msg)))
            body = json.dumps(msg).encode()
            self.assertEqual(len(body), 2000)
            r = h.request("POST", ACQUIRE, body, JSON)
            self.assertConnectError(r, 429, "resource_exhausted", "1024")
            h.close()

            # A GET (Peek) declaring a body over the limit: refused the same
            # way at once. It was once dispatched as a Peek whose answer
            # could not be sent while the body came in: no reply, and the
            # worker spinning until the connection timed out.
            h = p.http()
            query = urllib.parse.urlencode({"connect": "v1", "encoding": "json",
                                            "message": json.dumps({"bucket": name, "app": "app"})})
            h.conn.timeout = 5
            r = h.request("GET", PEEK + "?" + query, b" " * 2000)
            self.assertConnectError(r, 429, "resource_exhausted", "1024")
            h.close()

            # 50 MB chunked, 64 KiB at a time: refused with memory bounded.
            rss_before = p.rss_kb()
            chunk = b" " * 65536
            reply, error = raw_chunked_post(p.port, ACQUIRE, (chunk for _ in range(800)),
                                            JSON, timeout=60)
            rss_after = p.rss_kb()
            if reply is not None:
                self.assertConnectError(reply, 429, "resource_exhausted", "1024")
            else:
                # Acceptable only as a connection the server cut off.
                self.assertIsInstance(error, (ConnectionResetError, BrokenPipeError), error)
            self.assertLess(rss_after - rss_before, 20 * 1024,
                            "RSS grew from %d to %d kB" % (rss_before, rss_after))

            # Still serving, on a new connection.
            h = p.http()
            r = h.acquire(name)
            self.assertOk(r)
            self.assertIs(r.json().get("allowed"), True, r)
            # A body under the limit still works.
            msg["key"] = "y" * 200
            r = h.request("POST", ACQUIRE, json.dumps(msg).encode(), JSON)
            self.assertOk(r)
            h.close()
        redis.close()

    def test_gzip_bomb_is_bounded(self):
        redis = Redis()
        name = unique("bomb")
        put_policy(redis, name)
        with Permitd(args=["--max-body-bytes", "1024"]) as p:
            h = p.http()
            msg = {"bucket": name, "app": "app", "key": "z" * 20000}
            body = gz(json.dumps(msg).encode())
            self.assertLess(len(body), 1024)
            r = h.request("POST", ACQUIRE, body, {"Content-Type": "application/json",
                                                  "Content-Encoding": "gzip"})
            self.assertConnectError(r, 429, "resource_exhausted", "1024")
            h.close()
        redis.close()

    def _private(self, name):
        priv = PrivateRedis()
        r = priv.client()
        put_policy(r, name)
        r.close()
        return priv

    def _acquire_with_redis_stopped(self, priv, h, name, headers=None):
        """One Acquire while priv's Redis is SIGSTOPped: (reply, seconds)."""
        os.kill(priv.pid(), signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            r = h.acquire(name, headers=headers)
            return r, time.monotonic() - t0
        finally:
            os.kill(priv.pid(), signal.SIGCONT)

    # Bounds of 10 s on answers due in 100 ms (or at once): bounds on a hung
    # request, not speed checks, and Redis's own timeout is 30 s where the
    # caller's deadline must end the request (issue 33: 3 s against 5 s).
    def test_deadline_exceeded_with_stopped_redis(self):
        name = unique("deadline")
        priv = self._private(name)
        try:
            with Permitd(redis_url=priv.url, args=["--redis-timeout-ms", "30000",
                                                   "--threads", "1"]) as p:
                h = p.http()
                self.assertOk(h.acquire(name))   # connected, scripts loaded
                r, elapsed = self._acquire_with_redis_stopped(
                    priv, h, name, {"Connect-Timeout-Ms": "100"})
                self.assertConnectError(r, 504, "deadline_exceeded")
                self.assertLess(elapsed, 10.0)
                # Redis is back: permitd recovers by itself.
                deadline = time.monotonic() + 10
                while True:
                    r = h.acquire(name)
                    if r.status == 200 or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                self.assertOk(r)
                h.close()
        finally:
            priv.stop()

    def test_deadline_exceeded_while_connecting(self):
        # No connection yet: the connect and script load are what the
        # deadline cuts short, and the answer is still deadline_exceeded.
        name = unique("deadline")
        priv = self._private(name)
        try:
            with Permitd(redis_url=priv.url, args=["--redis-timeout-ms", "30000",
                                                   "--threads", "1"]) as p:
                h = p.http()
                r, elapsed = self._acquire_with_redis_stopped(
                    priv, h, name, {"Connect-Timeout-Ms": "100"})
                self.assertConnectError(r, 504, "deadline_exceeded")
                self.assertLess(elapsed, 10.0)
                h.close()
        finally:
            priv.stop()

    def test_unavailable_when_redis_times_out(self):
        name = unique("slow")
        priv = self._private(name)
        try:
            with Permitd(redis_url=priv.url, args=["--redis-timeout-ms", "100",
                                                   "--threads", "1"]) as p:
                h = p.http()
                self.assertOk(h.acquire(name))
                r, elapsed = self._acquire_with_redis_stopped(priv, h, name)
                self.assertConnectError(r, 503, "unavailable")
                self.assertLess(elapsed, 10.0)
                h.close()
        finally:
            priv.stop()

    def test_unavailable_when_redis_down(self):
        name = unique("down")
        priv = self._private(name)
        try:
            with Permitd(redis_url=priv.url) as p:
                h = p.http()
                self.assertOk(h.acquire(name))
                priv.stop()
                for _ in range(3):
                    t0 = time.monotonic()
                    r = h.acquire(name)
                    elapsed = time.monotonic() - t0
                    msg = self.assertConnectError(r, 503, "unavailable")
                    self.assertIn("redis", msg.lower(), r)
                    self.assertLess(elapsed, 10.0)
                r = h.peek(name)
                msg = self.assertConnectError(r, 503, "unavailable")
                self.assertIn("redis", msg.lower(), r)
                h.close()
        finally:
            priv.stop()

    def test_sigterm_exits_zero(self):
        redis = Redis()
        name = unique("term")
        put_policy(redis, name)
        p = Permitd()
        try:
            h = p.http()
            self.assertOk(h.acquire(name))
            h.close()
        finally:
            code = p.stop(signal.SIGTERM)
        self.assertEqual(code, 0, p.output())
        redis.close()


if __name__ == "__main__":
    harness.main()
