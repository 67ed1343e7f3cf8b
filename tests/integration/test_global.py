"""Global correctness across instances (issue 2 point 7): two permitd
processes on one Redis, many concurrent clients on one bucket; the limit
holds for the sum, because every decision is one atomic script in Redis.
"""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Permitd, Redis, put_policy, unique  # noqa: E402

THREADS = 8


class GlobalTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()
        cls.a = Permitd()
        cls.b = Permitd()

    @classmethod
    def tearDownClass(cls):
        for p in (cls.a, cls.b):
            p.__exit__(None, None, None)
        cls.redis.close()

    def hammer(self, name, seconds):
        res = harness.hammer([self.a.port, self.b.port], name, threads=THREADS, seconds=seconds)
        self.assertEqual(res["errors"], [])
        return res

    def test_two_instances_hold_one_limit(self):
        name = unique("global")
        put_policy(self.redis, name, max_permits=100, rate=50)
        res = self.hammer(name, 3.0)
        t = res["elapsed"]
        bound = 100 + 50 * t
        msg = ("admitted %d (per instance %s) of %d requests in %.3f s; bound 100 + 50 x %.3f = %.1f"
               % (res["allowed"], sorted(res["per_port"].values()),
                  res["allowed"] + res["denied"], t, t, bound))
        print("\n" + msg, file=sys.stderr)
        self.assertLessEqual(res["allowed"], bound + 1, msg)
        self.assertGreaterEqual(res["allowed"], 0.95 * bound, msg)
        # both instances really took part, and were turned away too
        for port, n in res["per_port"].items():
            self.assertGreater(n, 0, msg)
        self.assertGreater(res["denied"], 0, msg)

    def test_one_per_two_seconds(self):
        name = unique("global-slow")
        put_policy(self.redis, name, max_permits=1, rate=0.5)
        res = self.hammer(name, 5.0)
        t = res["elapsed"]
        # the first at once, then one every 2 s: 1 + floor(t/2). t runs from
        # the first request sent to the last reply, so it over-estimates the
        # span Redis saw: the upper bound is strict; one fewer only when t
        # ends right at a boundary.
        hi = 1 + math.floor(t / 2)
        lo = 1 + math.floor(max(0.0, t - 0.1) / 2)
        at = res["allowed_at"]
        msg = "admitted %d in %.3f s (expected %d), at %s" % (
            res["allowed"], t, hi, [round(x - res["first_send"], 3) for x in at])
        print("\n" + msg, file=sys.stderr)
        self.assertLessEqual(res["allowed"], hi, msg)
        self.assertGreaterEqual(res["allowed"], lo, msg)
        # and spaced 2 s apart (less the client-side latency of a reply)
        for x, y in zip(at, at[1:]):
            self.assertGreater(y - x, 1.9, msg)


if __name__ == "__main__":
    harness.main()
