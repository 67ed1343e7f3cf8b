"""Policy names permitd does not hold (issue 42, "Unknown policy names fill
memory"): any client may name any number of them, and each is looked up in
Redis by one loader thread (server/decisions/limiter.c, "the loader").

- A flood of AcquireBatches of 1,000 fresh unknown names at a 1 ms deadline
  over 20 connections leaves permitd's RSS flat (it grew by hundreds of MB:
  every batch's names waited in an unbounded queue after their request was
  gone), and Redis stops being asked for them soon after the flood stops
  (INFO commandstats: HGETALL).
- A name Redis said holds no policy is answered not_found from memory for a
  moment: the same unknown name asked again and again is read once.
- A policy created after its name was answered not_found is found at once
  its change notice arrives.
- Past 1,000 names waiting to be read, one more is answered
  resource_exhausted, at once, not parked (Redis held up by CLIENT PAUSE).

Real permitd and Redis (a private one for the pause)."""
import json
import os
import threading
import time
import unittest

import harness
from harness import Http, Permitd, PrivateRedis, Redis, decision, error_code, put_policy, unique

BATCH = "AcquireBatch"


def hgetall_calls(redis):
    """Redis's count of HGETALL calls so far (INFO commandstats)."""
    for line in redis("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_hgetall:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def batch_body(names):
    return json.dumps({"requests": [{"bucket": n, "app": "app"} for n in names]}).encode()


def batch_proto(names):
    """An AcquireBatchRequest (protobuf) of one item per name, app "app":
    built by hand, fast enough for a flood."""
    items = []
    for n in names:
        n = n.encode()
        item = b"\x0a" + bytes([len(n)]) + n + b"\x12\x03app"
        items.append(b"\x0a" + bytes([len(item)]) + item)
    return b"".join(items)


class UnknownPoliciesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()
        cls.prefix = unique("up") + ":"

    @classmethod
    def tearDownClass(cls):
        cls.redis.close()

    def permitd(self, **kw):
        # AddressSanitizer keeps freed memory in a quarantine (256 MB by
        # default), which would look like growth; keep it small so RSS
        # shows what permitd itself holds (as test_hostile.py does).
        env = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=1"}
        p = Permitd(prefix=self.prefix, env=env, **kw)
        self.addCleanup(p.stop)
        return p

    def flood(self, p, seconds, conns=20):
        """AcquireBatches of 1,000 fresh unknown names, Connect-Timeout-Ms 1,
        from conns connections for about `seconds`; returns how many were
        sent and the codes of the answers."""
        stop = time.monotonic() + seconds
        sent, codes, lock = [0], {}, threading.Lock()
        run = unique("fl")

        def one(t):
            h = Http(p.port)
            i = 0
            try:
                while time.monotonic() < stop:
                    head = "%s-%d-%d-" % (run, t, i)
                    i += 1
                    r = h.request("POST", "/permit.v1.RateLimitService/" + BATCH,
                                  batch_proto([head + str(k) for k in range(1000)]),
                                  {"Content-Type": "application/proto",
                                   "Connect-Timeout-Ms": "1"})
                    with lock:
                        sent[0] += 1
                        code = error_code(r) or "ok"
                        codes[code] = codes.get(code, 0) + 1
            finally:
                h.close()

        threads = [threading.Thread(target=one, args=(t,)) for t in range(conns)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sent[0], codes

    def test_a_flood_of_unknown_names_leaves_memory_flat_and_redis_alone(self):
        # A Redis of the test's own, held up (CLIENT PAUSE) through the
        # flood as a slow or busy Redis would be: what the loader cannot
        # read meanwhile is what it holds, and what it reads after.
        own = PrivateRedis()
        self.addCleanup(own.stop)
        r = own.client()
        self.addCleanup(r.close)
        p = self.permitd(redis_url="redis://127.0.0.1:%d" % own.port)
        known = unique("known")
        put_policy(r, known, max_permits=1000000, rate=1000000, prefix=self.prefix)
        self.flood(p, 2.0)          # warm: workers, connections, arenas, the loader
        before, reads0 = p.rss_kb(), hgetall_calls(r)
        # (a paused Redis answers no client, CLIENT UNPAUSE included: the
        # pause ends by itself, 2 s after the flood)
        r("CLIENT", "PAUSE", "10000", "ALL")
        sent, codes = self.flood(p, 8.0)
        after = p.rss_kb()
        print("flood: %d batches of 1,000 unknown names (%s); RSS %d kB -> %d kB"
              % (sent, codes, before, after))
        self.assertGreater(sent, 20, "the flood ran")
        self.assertLess(after - before, 50 * 1024,
                        "RSS grew %d kB under a flood of unknown names" % (after - before))
        # Redis back: the loader reads what requests still wait for (none
        # here: each had 1 ms), not every name the flood named; HGETALL's
        # count soon holds still for two seconds.
        deadline, still_since, last = time.monotonic() + 60, None, hgetall_calls(r)
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = hgetall_calls(r)
            if now - last > 5:
                still_since = None
            elif still_since is None:
                still_since = time.monotonic()
            last = now
            if still_since is not None and time.monotonic() - still_since >= 2.0:
                break
        else:
            self.fail("Redis was still asked HGETALL for the flood's names 60 s after it "
                      "stopped")
        reads = last - reads0
        print("HGETALL after the flood: %d (it named %d)" % (reads, sent * 1000))
        self.assertLess(reads, 2000, "the loader read %d names of a flood of %d whose requests "
                        "were all answered" % (reads, sent * 1000))
        # and the known policy is served as ever
        self.assertTrue(decision(p.http().acquire(known))["allowed"])

    def test_an_unknown_name_is_read_once_and_a_policy_created_later_is_found(self):
        p = self.permitd()
        h = p.http()
        name = unique("later")
        calls0 = hgetall_calls(self.redis)
        for _ in range(50):
            r = h.acquire(name)
            self.assertEqual(error_code(r), "not_found", r)
        reads = hgetall_calls(self.redis) - calls0
        # one read, and one more should the 50 have taken over the 2 s that
        # a "no such policy" is kept (a loaded machine): never one each
        self.assertLess(reads, 10, "HGETALL %d times for one unknown name asked 50 times"
                        % reads)
        # The policy is created (as the sync writes it, with its change
        # notice): found at once, though its name was just not_found.
        put_policy(self.redis, name, max_permits=5, rate=1, prefix=self.prefix)
        self.redis("PUBLISH", self.prefix + "changes", "%s 1" % name)
        deadline = time.monotonic() + 15
        while True:
            r = h.acquire(name)
            if r.status == 200:
                break
            self.assertEqual(error_code(r), "not_found", r)
            self.assertLess(time.monotonic(), deadline, "the policy created was never found")
            time.sleep(0.05)
        self.assertTrue(decision(r)["allowed"], r)
        h.close()

    def test_names_past_the_loader_bound_answer_resource_exhausted(self):
        own = PrivateRedis()
        self.addCleanup(own.stop)
        p = self.permitd(redis_url="redis://127.0.0.1:%d" % own.port,
                         args=["--redis-timeout-ms", "20000"])
        r = own.client()
        self.addCleanup(r.close)
        run = unique("cap")
        held = {}

        def first():
            # 1,000 names the loader cannot read while Redis is paused: the
            # bound's worth, waiting
            h = Http(p.port)
            try:
                held["reply"] = h.request(
                    "POST", "/permit.v1.RateLimitService/" + BATCH,
                    batch_body(["%s-a-%d" % (run, k) for k in range(1000)]),
                    {"Content-Type": "application/json", "Connect-Timeout-Ms": "30000"})
            finally:
                h.close()

        r("CLIENT", "PAUSE", "8000", "ALL")
        t = threading.Thread(target=first)
        t.start()
        h = p.http()
        try:
            deadline, codes = time.monotonic() + 6, {}
            while time.monotonic() < deadline:
                time.sleep(0.2)
                reply = h.request("POST", "/permit.v1.RateLimitService/" + BATCH,
                                  batch_body(["%s-b-%d" % (run, k) for k in range(3)]),
                                  {"Content-Type": "application/json",
                                   "Connect-Timeout-Ms": "1000"})
                self.assertEqual(reply.status, 200, reply)
                codes = [x.get("error", {}).get("code", "ok") for x in reply.json()["results"]]
                if codes == ["resource_exhausted"] * 3:
                    break
            self.assertEqual(codes, ["resource_exhausted"] * 3,
                             "past the loader's bound a name is refused at once, not parked")
            one = h.acquire("%s-c" % run, headers={"Connect-Timeout-Ms": "1000"})
            self.assertEqual(error_code(one), "resource_exhausted", one)
        finally:
            r("CLIENT", "UNPAUSE")
            t.join()
            h.close()
        # the first batch's names were read once Redis came back: not found
        self.assertEqual(held["reply"].status, 200, held["reply"])
        codes = {x.get("error", {}).get("code", "ok") for x in held["reply"].json()["results"]}
        self.assertEqual(codes, {"not_found"}, held["reply"])


if __name__ == "__main__":
    harness.main()
