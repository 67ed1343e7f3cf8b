"""What the API says on the wire, whatever the codec (issue 17): a JSON
denial states "allowed": false and "remaining": "0" (proto3 JSON would leave
both out), in an Acquire and in AcquireBatch items alike; a protobuf request
whose string fields are not UTF-8 is invalid_argument naming the field, as
the JSON path refuses it. One permitd on the stack's Redis."""
import email.utils
import json
import socket
import time
import unittest

import harness
from harness import (ACQUIRE_RESPONSE, ConnectAssertions, Permitd, Redis, pb_encode, pb_named,
                     put_policy, unique)

SVC = "/permit.v1.RateLimitService"
JSON = {"Content-Type": "application/json"}
PROTO = {"Content-Type": "application/proto"}


class WireTest(ConnectAssertions, unittest.TestCase):
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

    def policy(self, max_permits=1):
        name = unique("wire")
        put_policy(self.redis, name, max_permits=max_permits, rate=0.001)
        return name

    # ------------------------------------------------------------ the head

    def test_every_answer_has_one_date_header_of_now(self):
        # permitd writes the Date header (made once a second per worker:
        # libmicrohttpd would format its own for each response); exactly
        # one, RFC 9110's IMF-fixdate, within a second or two of now, on
        # an answer and on an error alike.
        name = self.policy()
        body = json.dumps({"bucket": name, "app": "app"}).encode()
        for payload in (body, b"{"):
            with socket.create_connection(("127.0.0.1", self.permitd.port), timeout=10) as s:
                s.sendall(b"POST /permit.v1.RateLimitService/Acquire HTTP/1.1\r\nHost: h\r\n"
                          b"Content-Type: application/json\r\nContent-Length: %d\r\n"
                          b"Connection: close\r\n\r\n%s" % (len(payload), payload))
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = s.recv(4096)
                    self.assertTrue(chunk, head)
                    head += chunk
            lines = head.split(b"\r\n\r\n")[0].decode().split("\r\n")
            dates = [line.split(":", 1)[1].strip() for line in lines[1:]
                     if line.lower().startswith("date:")]
            self.assertEqual(len(dates), 1, lines)
            self.assertRegex(dates[0], r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d "
                             r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
                             r"\d\d:\d\d:\d\d GMT$")
            at = email.utils.parsedate_to_datetime(dates[0]).timestamp()
            self.assertLess(abs(at - time.time()), 3, dates[0])

    # ------------------------------------------------------------ JSON denials

    def test_json_denial_is_explicit(self):
        name = self.policy()
        r = self.http.acquire(name)
        self.assertEqual(r.status, 200, r)
        # The last permit taken: remaining 0 is stated too.
        self.assertEqual((r.json().get("allowed"), r.json().get("remaining")), (True, "0"), r)
        r = self.http.acquire(name)
        self.assertEqual(r.status, 200, r)
        m = r.json()
        self.assertIs(m.get("allowed"), False, r)
        self.assertEqual(m.get("remaining"), "0", r)
        self.assertEqual(m.get("limit"), "1", r)
        self.assertIn('"allowed":false', r.body.decode(), r)

    def test_json_batch_denial_is_explicit(self):
        name = self.policy()
        r = self.http.rpc_json("AcquireBatch", {"requests": [
            {"bucket": name, "app": "app"}, {"bucket": name, "app": "app"}]})
        self.assertEqual(r.status, 200, r)
        first, second = (x["response"] for x in r.json()["results"])
        self.assertEqual((first.get("allowed"), first.get("remaining")), (True, "0"), r)
        self.assertEqual((second.get("allowed"), second.get("remaining")), (False, "0"), r)

    def test_proto_denial_unchanged(self):
        # Binary answers keep proto3's defaults (absent = false, 0).
        name = self.policy()
        self.http.acquire(name)
        r = self.http.rpc_proto("Acquire", pb_encode([(1, name), (2, "app")]))
        self.assertEqual(r.status, 200, r)
        d = pb_named(r.body, ACQUIRE_RESPONSE)
        self.assertEqual((d["allowed"], d["remaining"], d["limit"]), (0, 0, 1), d)

    # ------------------------------------------------------------ UTF-8 in protobuf

    def test_proto_strings_must_be_utf8(self):
        name = self.policy(max_permits=100)
        bad = b"k\xff\xfe"
        for field, fields in (("key", [(1, name), (2, "app"), (3, bad)]),
                              ("bucket", [(1, bad), (2, "app")]),
                              ("app", [(1, name), (2, bad)])):
            for method in ("Acquire", "Peek"):
                r = self.http.rpc_proto(method, pb_encode(fields))
                self.assertConnectError(r, 400, "invalid_argument", (field, "UTF-8"))
                self.assertIn("\\xff", r.json()["message"], r)
        # Also in a message nested in a repeated field: the item is named.
        items = [pb_encode([(1, name), (2, "app")]),
                 pb_encode([(1, name), (2, "app"), (3, b"ok\xc3\x28")])]
        r = self.http.rpc_proto("AcquireBatch", b"".join(pb_encode([(1, i)]) for i in items))
        self.assertConnectError(r, 400, "invalid_argument", ("requests[1].key", "UTF-8"))
        # Well-formed multi-byte UTF-8 is fine, and nothing was taken above
        # (the refused requests with a bad app were for the shared bucket).
        r = self.http.rpc_proto("Acquire", pb_encode([(1, name), (2, "app"),
                                                      (3, "clé-✓".encode())]))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(pb_named(r.body, ACQUIRE_RESPONSE)["remaining"], 99, r)
        r = self.http.acquire(name)
        self.assertEqual(r.json().get("remaining"), "99", r)

    def test_json_strings_must_be_utf8(self):
        # The JSON path refused invalid UTF-8 already (jansson); it still does.
        name = self.policy()
        body = b'{"bucket":"' + name.encode() + b'","app":"app","key":"k\xff\xfe"}'
        r = self.http.request("POST", SVC + "/Acquire", body, JSON)
        self.assertConnectError(r, 400, "invalid_argument")


if __name__ == "__main__":
    harness.main()
