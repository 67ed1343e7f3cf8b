"""Mode "refund" of the decision scripts (issue 38: lua/lib/refund_*.lua),
on their own: each script loaded into the stack's Redis as the build
embeds it (harness.lua_script()) and called as server/decisions/
limiter_refund.c calls it: one wide item, its permits the amount to give
back, its third argument the Redis time (us) of the take whose permits
come back. Checks what "back" means per algorithm (docs/algorithms.md):
never above max_permits and nothing re-priced (token_bucket), the take's
window only (fixed_window), the window the take was counted in
(sliding_window), the take's own entries or older (sliding_log); a
refund of what no longer counts, or without the take's time, is a no-op
(flags 2); a stale state answers -17 and is left as it is; concurrency
has no refund."""
import math
import os
import struct
import unittest

import harness
from harness import Redis, RedisError, unique

LUA_DIR = os.environ.get("PERMITD_TEST_LUA_DIR", os.path.join(harness.SOURCE_DIR, "lua"))
RECORD = struct.Struct("<10d")
FIELDS = ("status", "allowed", "remaining", "limit", "retry_after_ms", "reset_after_ms",
          "window_s", "level_micro", "refunded", "flags")
STALE, NOOP = -17, 2
STAMP = (1 << 24) + 1
SCRIPTS = {"token_bucket": "bucket", "fixed_window": "fixed_window",
           "sliding_window": "sliding_window", "sliding_log": "sliding_log",
           "concurrency": "concurrency"}
HOUR_MS = 3600000


class RefundTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()
        cls.sha = {a: cls.redis("SCRIPT", "LOAD", harness.lua_script(s, LUA_DIR))
                   for a, s in SCRIPTS.items()}

    @classmethod
    def tearDownClass(cls):
        cls.redis.close()

    def key(self):
        return "refund-test:{%s}:x" % unique("r")

    def run_script(self, algorithm, key, mode, p1, permits, at="", max_permits=10, stamp=STAMP,
                   p2=""):
        """One wide item of policy (stamp, max_permits, p1, p2): its answer."""
        out = self.redis.raw("EVALSHA", self.sha[algorithm], 1, key, mode, 1, 60000, stamp,
                             max_permits, p1, p2, 1, permits, at, "")
        self.assertIsInstance(out, bytes, out)
        self.assertEqual(len(out), RECORD.size + 32, out)
        a = dict(zip(FIELDS, (x for x in RECORD.unpack_from(out))))
        for f, x in a.items():
            if f != "level_micro":
                self.assertEqual(x, math.floor(x), a)
        return a

    def take(self, algorithm, key, p1, permits, **kw):
        t = self.redis.time_us()
        a = self.run_script(algorithm, key, "take", p1, permits, **kw)
        self.assertEqual((a["status"], a["allowed"]), (0, 1), a)
        return t, a

    # ------------------------------------------------------------ token bucket

    def test_token_bucket_refund_tops_up_never_above_max(self):
        k, rate = self.key(), 0.001         # one permit per 1000 s: no refill meanwhile
        self.take("token_bucket", k, rate, 7)
        a = self.run_script("token_bucket", k, "refund", rate, 5)
        self.assertEqual((a["status"], a["allowed"], a["refunded"], a["remaining"]), (0, 1, 5, 8), a)
        a = self.run_script("token_bucket", k, "refund", rate, 50)
        self.assertEqual((a["allowed"], a["remaining"]), (1, 10), a)
        self.assertLessEqual(a["refunded"], 2, a)
        self.assertEqual(self.redis("EXISTS", k), 0, "a full bucket has no key")
        a = self.run_script("token_bucket", k, "refund", rate, 3)
        self.assertEqual((a["allowed"], a["refunded"], a["flags"], a["remaining"]),
                         (0, 0, NOOP, 10), a)

    def test_token_bucket_refund_reprices_nothing_earned(self):
        """A bucket stamped before a rate edit is folded across it (the
        old rate up to the edit) before the refund adds to it: the same
        tokens a take would read, plus the refund."""
        k = self.key()
        self.take("token_bucket", k, 1, 10, max_permits=100)    # 90 left at rate 1/s
        tokens, since, stamp = struct.unpack("<ddd", self.redis.raw("GET", k))
        edit = since + 10 * 1000000                              # an edit 10 s after the take
        self.redis("SET", k, struct.pack("<ddd", 50, since, stamp))   # 50 at `since`
        # Before the edit the rate was 2/s: 10 s earned 20 (to 70) at the edit; then 0.0001/s.
        a = self.run_script("token_bucket", k, "refund", 0.0001, 5, max_permits=100,
                            p2="%d:2" % edit)
        self.assertEqual((a["status"], a["refunded"]), (0, 5), a)
        self.assertEqual(a["remaining"], 75, a)

    def test_token_bucket_refund_of_a_newer_state_is_stale(self):
        k = self.key()
        self.take("token_bucket", k, 0.001, 4, stamp=STAMP + 1)
        before = self.redis.raw("GET", k)
        a = self.run_script("token_bucket", k, "refund", 0.001, 2, stamp=STAMP)
        self.assertEqual((a["status"], a["remaining"]), (STALE, STAMP + 1), a)
        self.assertEqual(self.redis.raw("GET", k), before)

    # ------------------------------------------------------------ fixed window

    def test_fixed_window_refund_same_window_only(self):
        k = self.key()
        t, _ = self.take("fixed_window", k, HOUR_MS, 6)
        a = self.run_script("fixed_window", k, "refund", HOUR_MS, 4, at=t)
        self.assertEqual((a["allowed"], a["refunded"], a["remaining"]), (1, 4, 8), a)
        # a take of the window before: counts nothing now, gives nothing back
        a = self.run_script("fixed_window", k, "refund", HOUR_MS, 2, at=t - HOUR_MS * 1000)
        self.assertEqual((a["allowed"], a["refunded"], a["flags"], a["remaining"]),
                         (0, 0, NOOP, 8), a)
        a = self.run_script("fixed_window", k, "refund", HOUR_MS, 2)      # time unknown
        self.assertEqual((a["refunded"], a["flags"]), (0, NOOP), a)
        a = self.run_script("fixed_window", k, "refund", HOUR_MS, 9, at=t)  # never below 0
        self.assertEqual((a["refunded"], a["remaining"]), (2, 10), a)
        self.assertEqual(self.redis("EXISTS", k), 0)

    # ------------------------------------------------------------ sliding window

    def test_sliding_window_refund_comes_off_its_own_window(self):
        k, w = self.key(), HOUR_MS
        t, _ = self.take("sliding_window", k, w, 5)
        a = self.run_script("sliding_window", k, "refund", w, 2, at=t)
        self.assertEqual((a["allowed"], a["refunded"], a["remaining"]), (1, 2, 7), a)
        prev, cur, start, _ = struct.unpack("<dddd", self.redis.raw("GET", k))
        self.assertEqual((prev, cur), (0, 3))
        # the same state one window on: the 3 are prev now; a refund of them comes off prev
        self.redis("SET", k, struct.pack("<dddd", 0, 3, start - w * 1000, STAMP))
        a = self.run_script("sliding_window", k, "refund", w, 1, at=start - 1)
        self.assertEqual((a["status"], a["refunded"]), (0, 1), a)
        prev, cur, _, _ = struct.unpack("<dddd", self.redis.raw("GET", k))
        self.assertEqual((prev, cur), (2, 0))
        # a take two windows back counts nothing
        a = self.run_script("sliding_window", k, "refund", w, 1, at=start - 2 * w * 1000)
        self.assertEqual((a["refunded"], a["flags"]), (0, NOOP), a)

    # ------------------------------------------------------------ sliding log

    def test_sliding_log_refund_removes_the_take_or_older_never_newer(self):
        k, w = self.key(), HOUR_MS
        t1, _ = self.take("sliding_log", k, w, 3)
        first = self.redis("ZRANGEBYSCORE", k, "(0", "+inf", "WITHSCORES")
        at1 = int(float(first[1]))
        self.take("sliding_log", k, w, 4)
        # 5 back "as of the first take": only its 3 entries are at or before it
        a = self.run_script("sliding_log", k, "refund", w, 5, at=at1)
        self.assertEqual((a["allowed"], a["refunded"], a["remaining"]), (1, 3, 6), a)
        left = [float(s) for s in self.redis("ZRANGEBYSCORE", k, "(0", "+inf", "WITHSCORES")[1::2]]
        self.assertEqual(len(left), 4)
        self.assertTrue(all(s > at1 for s in left), left)
        a = self.run_script("sliding_log", k, "refund", w, 1)     # time unknown
        self.assertEqual((a["refunded"], a["flags"]), (0, NOOP), a)

    # ------------------------------------------------------------ concurrency

    def test_concurrency_has_no_refund(self):
        with self.assertRaises(RedisError):
            self.redis.raw("EVALSHA", self.sha["concurrency"], 1, self.key(), "refund", 1, 60000,
                           STAMP, 10, 60000, "", 1, 1, "", "")


if __name__ == "__main__":
    unittest.main()
