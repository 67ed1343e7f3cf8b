"""Request ids under pressure (issue 42):

- A queued AcquireBatch whose calls Redis makes permitd send again after
  the caller's deadline (NOSCRIPT: SCRIPT FLUSH every 50 ms, 1 ms
  deadlines) sends the request ids it was given: permitd survives (the test
  build is AddressSanitizer's: reading the caller's freed strings aborts
  it), and every request-id record in Redis is one of an id sent (main
  wrote records under garbage ids).
- A denied take with a request id writes nothing to Redis (an over-limit
  client with fresh ids grew Redis at its full rate).
- What retries mean then: a retry of a denied id is decided afresh (it
  took nothing, so at most one take happens all the same); a retry of an
  allowed id replays "allowed", on any instance, though that instance's
  deny cache holds a denial of the bucket (a take with a request id is
  always Redis's to decide: only Redis knows what another instance
  allowed).

Real permitd and Redis."""
import json
import os
import re
import threading
import time
import unittest

import harness
from harness import Http, Permitd, Redis, decision, put_policy, state_key, unique

REC = "\x1fr"       # a request-id record: the bucket's key, REC, the id (docs/redis.md: Redis layout)


def record_ids(redis, prefix, name):
    """The request ids of every record under policy `name`'s keys."""
    ids, cursor = [], "0"
    while True:
        cursor, keys = redis("SCAN", cursor, "MATCH", "%s{%s*" % (prefix, name), "COUNT", 1000)
        ids += [k.split(REC, 1)[1] for k in keys if REC in k]
        if cursor == "0":
            return ids


def keys_of(redis, prefix, name):
    n, cursor = 0, "0"
    while True:
        cursor, keys = redis("SCAN", cursor, "MATCH", "%s{%s*" % (prefix, name), "COUNT", 1000)
        n += len(keys)
        if cursor == "0":
            return n


def metric(p, name):
    text = p.admin().request("GET", "/metrics").body.decode()
    m = re.search(r"^%s (\d+)$" % name, text, re.M)
    if m is None:
        raise AssertionError("no %s in /metrics:\n%s" % (name, text))
    return int(m.group(1))


class RequestIdTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()
        cls.prefix = unique("ri") + ":"

    @classmethod
    def tearDownClass(cls):
        cls.redis.close()

    def permitd(self, *args):
        p = Permitd(prefix=self.prefix, args=list(args))
        self.addCleanup(p.stop)
        return p

    def test_a_batch_sent_again_after_its_deadline_sends_its_own_ids(self):
        p = self.permitd()
        name = unique("uaf")
        put_policy(self.redis, name, max_permits=1000000000, rate=1000000, prefix=self.prefix)
        stop = time.monotonic() + 10
        sent, lock, answers = set(), threading.Lock(), {}
        flusher = Redis()
        self.addCleanup(flusher.close)

        def flush():
            while time.monotonic() < stop:
                flusher("SCRIPT", "FLUSH")
                time.sleep(0.05)

        def send(t):
            h = Http(p.port)
            i = 0
            try:
                while time.monotonic() < stop:
                    ids = ["id-%d-%d-%d" % (t, i, k) for k in range(20)]
                    i += 1
                    with lock:
                        sent.update(ids)
                    body = {"requests": [{"bucket": name, "app": "app", "key": "k%d" % k,
                                          "requestId": rid} for k, rid in enumerate(ids)]}
                    r = h.request("POST", "/permit.v1.RateLimitService/AcquireBatch",
                                  json.dumps(body).encode(),
                                  {"Content-Type": "application/json",
                                   "Connect-Timeout-Ms": "1" if i % 2 else "2"})
                    with lock:
                        answers[r.status] = answers.get(r.status, 0) + 1
            finally:
                h.close()

        threads = [threading.Thread(target=flush)] + \
            [threading.Thread(target=send, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.5)         # the last calls sent again, decided
        self.assertIsNone(p.proc.poll(), "permitd died:\n" + p.output()[-4000:])
        self.assertEqual(p.http().request("GET", "/healthz").status, 200)
        ids = record_ids(self.redis, self.prefix, name)
        strange = [i for i in ids if i not in sent]
        print("%d batches sent (%s), %d records, %d of ids never sent"
              % (len(sent) // 20, answers, len(ids), len(strange)))
        self.assertGreater(len(ids), 0, "some batch reached Redis")
        self.assertEqual(strange, [], "request-id records of ids never sent")

    def test_denied_takes_with_request_ids_write_nothing(self):
        p = self.permitd()
        h = p.http()
        name = unique("den")
        put_policy(self.redis, name, max_permits=1, rate=0.001, prefix=self.prefix)
        self.assertTrue(decision(h.acquire(name, key="k"))["allowed"])
        keys0 = keys_of(self.redis, self.prefix, name)
        n = 200
        for i in range(n):
            r = h.rpc_json("Acquire", {"bucket": name, "app": "app", "key": "k",
                                       "requestId": "over-%d" % i})
            self.assertFalse(decision(r)["allowed"], r)
        keys = keys_of(self.redis, self.prefix, name)
        print("%d denied takes with ids: Redis keys %d -> %d" % (n, keys0, keys))
        self.assertEqual(keys, keys0, "denied takes with request ids wrote to Redis")
        self.assertEqual(record_ids(self.redis, self.prefix, name), [])
        h.close()

    def test_an_id_allowed_on_one_instance_replays_on_another_that_caches_a_denial(self):
        a, b = self.permitd(), self.permitd()
        ha, hb = a.http(), b.http()
        name = unique("xi")
        put_policy(self.redis, name, max_permits=1, rate=0.001, prefix=self.prefix)
        msg = {"bucket": name, "app": "app", "key": "k"}
        first = ha.rpc_json("Acquire", dict(msg, requestId="once"))
        self.assertTrue(decision(first)["allowed"], first)
        # b denies the bucket and caches the denial: plain takes hit it
        hits0 = metric(b, "permitd_deny_cache_hits_total")
        for _ in range(5):
            self.assertFalse(decision(hb.acquire(name, key="k"))["allowed"])
        self.assertGreater(metric(b, "permitd_deny_cache_hits_total"), hits0,
                           "b's deny cache holds the bucket's denial")
        # the caller's retry of "once" lands on b: what a answered, again
        again = hb.rpc_json("Acquire", dict(msg, requestId="once"))
        self.assertTrue(decision(again)["allowed"], again)
        self.assertTrue(again.json().get("replayed"), again.body)
        ha.close()
        hb.close()

    def test_a_denied_id_is_decided_afresh_and_an_allowed_one_replays(self):
        p = self.permitd()
        h = p.http()
        name = unique("re")
        put_policy(self.redis, name, max_permits=1, rate=0.2, prefix=self.prefix)
        msg = {"bucket": name, "app": "app", "key": "k"}
        first = h.rpc_json("Acquire", dict(msg, requestId="a"))
        self.assertTrue(decision(first)["allowed"], first)
        denied = h.rpc_json("Acquire", dict(msg, requestId="b"))
        self.assertFalse(decision(denied)["allowed"], denied)
        # the bucket's denial is cached here: the retry of "a" still replays
        # what Redis answered it
        for _ in range(3):
            self.assertFalse(decision(h.acquire(name, key="k"))["allowed"])
        again = h.rpc_json("Acquire", dict(msg, requestId="a"))
        self.assertTrue(decision(again)["allowed"], again)
        self.assertTrue(again.json().get("replayed"), again.body)
        # "b" took nothing and kept no record: once the bucket holds a
        # permit again, its retry is decided afresh, and takes it
        time.sleep(decision(denied)["retry_after_ms"] / 1000.0 + 0.2)
        retry = h.rpc_json("Acquire", dict(msg, requestId="b"))
        self.assertTrue(decision(retry)["allowed"], retry)
        self.assertFalse(retry.json().get("replayed", False), retry.body)
        # and now "b" replays its allowed answer, taking nothing
        self.assertTrue(h.rpc_json("Acquire", dict(msg, requestId="b")).json().get("replayed"))
        h.close()


if __name__ == "__main__":
    harness.main()
