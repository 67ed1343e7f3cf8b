"""Hot keys (issue 23) across two permitd instances on one Redis and one
MariaDB: each instance counts its takes per policy and key in Space-Saving
sketches and publishes its top keys to Redis (every --hotkeys-publish-ms);
GetHotKeys (HotKeyService, admin listener) merges every instance's lists.

With fewer keys than the sketch's 100 counters the counts are exact, so the
merged lists must equal the exact totals of what both instances answered
(allowed and denied per key), each with its bucket's live level; a reset
(ResetBucket) shows at once in the level. Keys are user data: only logged-in
users get them (viewers too), and they appear in neither /metrics nor the
log.
"""
import json
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Permitd, Redis, decision, wait_for  # noqa: E402
from test_admin import AdminCase, num  # noqa: E402

PUBLISH_MS = 200
HOT = "permit.v1.HotKeyService"


class HotKeysTest(AdminCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.other = None
        try:
            # Both instances publish often; the second shares Redis, MySQL
            # and the prefix with the first (behind one load balancer).
            cls.permitd.stop()
            cls.permitd = Permitd(prefix=cls.prefix,
                                  args=["--mysql-url", cls.mysql_url, "--sync-interval-ms", "300",
                                        "--hotkeys-publish-ms", str(PUBLISH_MS)])
            cls.other = Permitd(prefix=cls.prefix,
                                args=["--mysql-url", cls.mysql_url, "--sync-interval-ms", "300",
                                      "--hotkeys-publish-ms", str(PUBLISH_MS)])
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "other", None) is not None:
            cls.other.stop()
            cls.other = None
        super().tearDownClass()

    def hot(self, c, name, **extra):
        msg = {"name": name}
        msg.update(extra)
        return c.call(HOT, "GetHotKeys", msg)

    def test_two_instances_merged_top_keys_match_the_exact_totals(self):
        ed = self.editor()
        name = self.name("hot")
        ed.create(name, max_permits=3, rate="0.001")
        a, b = self.permitd.http(), self.other.http()
        plan = [(a, "alice", 5), (a, "bob", 2), (b, "alice", 3), (b, "carol", 4),
                (b, "bob", 1), (a, "", 2)]      # the shared bucket: no key, not listed
        allowed, denied = Counter(), Counter()
        for api, key, n in plan:
            for _ in range(n):
                d = decision(api.acquire(name, key=key))
                if key:
                    (allowed if d["allowed"] else denied)[key] += 1
        self.assertEqual(allowed, {"alice": 3, "bob": 3, "carol": 3})
        self.assertEqual(denied, {"alice": 5, "carol": 1})

        def merged():
            r = self.hot(ed, name)
            self.assertEqual(r.status, 200, r)
            m = r.json()
            got_a = {k["key"]: num(k, "count") for k in m.get("allowed", [])}
            got_d = {k["key"]: num(k, "count") for k in m.get("denied", [])}
            return m if (got_a, got_d) == (dict(allowed), dict(denied)) else None
        m = wait_for("the merged hot keys to equal the exact totals", merged, timeout=10)
        self.assertEqual(m["instances"], 2, m)
        self.assertEqual(m["windowSeconds"], 120)
        # most first, ties by key
        self.assertEqual([k["key"] for k in m["denied"]], ["alice", "carol"])
        self.assertEqual([k["key"] for k in m["allowed"]], ["alice", "bob", "carol"])
        # each with its bucket's live level: every key took 3 of 3
        for k in m["allowed"]:
            self.assertIs(k.get("levelKnown"), True, k)
            self.assertEqual(num(k, "remaining"), 0, k)
            self.assertEqual(num(k, "limit"), 3, k)
        # a reset shows in the level at once
        r = ed.p("ResetBucket", {"name": name, "key": "alice"})
        self.assertEqual(r.status, 200, r)
        m = self.hot(ed, name).json()
        lvl = {k["key"]: num(k, "remaining") for k in m["denied"]}
        self.assertEqual(lvl["alice"], 3, m)
        # limit bounds each list
        m = self.hot(ed, name, limit=1).json()
        self.assertEqual([k["key"] for k in m["allowed"]], ["alice"])

    def test_busy_policies_with_thousands_of_keys_are_all_published(self):
        # A list of 100 allowed and 100 denied keys is a ZADD of 402
        # arguments: it was refused before it was sent (the pipeline's
        # limit was 64), and the first refusal stopped every policy after it.
        ed = self.editor()
        names = [self.name("busy%d" % i) for i in range(4)]
        for name in names:
            ed.create(name, max_permits=1, rate="0.001")
        # The second policy's index is not a sorted set: Redis refuses its
        # list's entry (WRONGTYPE), which must cost that policy only.
        redis = Redis()
        broken = names[1]
        redis("SET", "%s{%s}:hot" % (self.prefix, broken), "not a sorted set")
        api = self.permitd.http()
        keys = 1500
        for name in names:
            for start in range(0, keys, 250):
                # every key twice: one allowed, one denied take
                items = [{"bucket": name, "app": "app", "key": "user-%05d" % k}
                         for k in range(start, start + 250) for _ in range(2)]
                r = api.request("POST", "/permit.v1.RateLimitService/AcquireBatch",
                                json.dumps({"requests": items}).encode(),
                                {"Content-Type": "application/json"})
                self.assertEqual(r.status, 200, r)

        def full(name):
            m = self.hot(ed, name, limit=100).json()
            return m if len(m.get("allowed", [])) == 100 and len(m.get("denied", [])) == 100 else None
        for name in names:
            if name == broken:
                continue
            m = wait_for("policy %s's top 100 allowed and denied keys" % name,
                         lambda: full(name), timeout=20)
            for k in m["allowed"] + m["denied"]:
                self.assertRegex(k["key"], r"^user-\d{5}$")
        # the refusal is logged naming the policy, the command and why
        wait_for("the refused list to be logged", lambda: (
            "policy=%s command=ZADD error=" % broken) in self.permitd.output()
            or None, timeout=20)
        redis("DEL", "%s{%s}:hot" % (self.prefix, broken))
        m = wait_for("policy %s's list once its index is a sorted set again" % broken,
                     lambda: full(broken), timeout=20)
        redis.close()

    def test_keys_only_for_logged_in_users_never_in_metrics_or_log(self):
        ed = self.editor()
        name = self.name("hotp")
        ed.create(name, max_permits=1, rate="0.001")
        secret = "user-4711-secret@example.org"
        api = self.permitd.http()
        for _ in range(3):
            api.acquire(name, key=secret)
        wait_for("the key to be published",
                 lambda: secret in self.hot(ed, name).body.decode(), timeout=10)
        # a viewer reads them too
        self.assertIn(secret, self.hot(self.viewer(), name).body.decode())
        # no session: refused, and nothing of the key in the answer
        r = self.hot(self.client(), name)
        self.assertConnectError(r, 401, "unauthenticated")
        self.assertNotIn(secret, r.body.decode())
        # a bad name is refused naming it
        self.assertConnectError(self.hot(ed, "no such/name"), 400, "invalid_argument", ["name"])
        metrics = self.permitd.admin().request("GET", "/metrics").body.decode()
        self.assertNotIn(secret, metrics)
        time.sleep(PUBLISH_MS / 1000.0)
        self.assertNotIn(secret, self.permitd.output())
        self.assertNotIn(secret, self.other.output())


if __name__ == "__main__":
    import unittest
    unittest.main()
