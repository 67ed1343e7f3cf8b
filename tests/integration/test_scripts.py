"""lua/bucket.lua and lua/sync.lua on their own (issue 18): each script is
loaded with SCRIPT LOAD into the stack's Redis and called with EVALSHA, with
no permitd and no HTTP in between, and checked against the contract at its
top: the answer's layout, refill exact over Redis TIME, a denial that takes
nothing, expiry when full, out_of_range, exact app membership, the items of
a call in order, all-or-nothing, settle, the rate history (`rates`), and
sync.lua's rules for which copy of a policy wins.

The clock is Redis TIME inside the script, which a test cannot set. Time is
moved instead by writing a bucket's state stamped in the past; where the
script's own `now` matters, a state it wrote is stamped with it (exact
checks follow), or Redis TIME read just before and just after the call
bounds it (checks within those bounds, so a slow machine cannot fail them).

Keys live under a prefix of their own (PREFIX), so nothing here meets
permitd's keys. PERMITD_TEST_LUA_DIR (default: the source tree's lua/)
points the tests at another copy of the scripts: a mutated copy in a temp
dir must make some of them fail.
"""
import math
import os
import struct
import unittest

import harness
from harness import Redis, RedisError, read_state, unique, write_state

LUA_DIR = os.environ.get("PERMITD_TEST_LUA_DIR", os.path.join(harness.SOURCE_DIR, "lua"))
PREFIX = "scripts-test:"
ANSWER = struct.Struct("<8d")
FIELDS = ("status", "allowed", "remaining", "limit", "retry_after_ms", "reset_after_ms",
          "window_s", "tokens_micro")
NOT_FOUND, PERMISSION_DENIED, FAILED_PRECONDITION = -5, -7, -9
ABORTED, OUT_OF_RANGE, INTERNAL, DATA_LOSS = -10, -11, -13, -15
ONE_PER_MINUTE = 0.016666666666666666   # repr(1 / 60)


def policy_key(name):
    return "%s{%s}:policy" % (PREFIX, name)


def bucket_key(name, key=""):
    return harness.state_key(name, key, prefix=PREFIX)


def level(stored, since, max_permits, rate, at):
    """The contract's refill: tokens at `at` of a bucket that held `stored`
    at `since`, at `rate` a second, capped at max_permits (same double
    arithmetic as the script, so a state it wrote compares bit for bit)."""
    if stored >= max_permits:
        return max_permits
    elapsed = at - since
    if elapsed <= 0:
        return stored
    if elapsed >= (max_permits - stored) * 1000000 / rate:
        return max_permits
    return min(max_permits, stored + elapsed * rate / 1000000)


class Scripts(unittest.TestCase):
    """Loads both scripts once; each test uses policies of its own."""

    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()
        cls.sha = {}
        for name in ("bucket", "sync"):
            with open(os.path.join(LUA_DIR, name + ".lua"), "rb") as f:
                cls.sha[name] = cls.redis("SCRIPT", "LOAD", f.read())

    @classmethod
    def tearDownClass(cls):
        cls.redis.close()

    def policy(self, max_permits=10, rate=1, apps="app", **extra):
        name = unique("script")
        harness.put_policy(self.redis, name, apps=apps, max_permits=max_permits, rate=rate,
                           prefix=PREFIX, **extra)
        return name

    # ------------------------------------------------------------ calls

    def bucket_raw(self, mode, items):
        """EVALSHA bucket.lua: items are (policy, key, app, permits)."""
        keys, args = [], [mode]
        for name, key, app, permits in items:
            keys += [policy_key(name), bucket_key(name, key)]
            args += [app, permits]
        return self.redis.raw("EVALSHA", self.sha["bucket"], len(keys), *(keys + args))

    def decide(self, mode, items):
        """The answers of bucket.lua, one dict per item, after checking the
        layout: 8 little-endian doubles per item, every one whole."""
        out = self.bucket_raw(mode, items)
        self.assertIsInstance(out, bytes)
        self.assertEqual(len(out), ANSWER.size * len(items), out)
        answers = []
        for i in range(len(items)):
            numbers = ANSWER.unpack_from(out, i * ANSWER.size)
            for n in numbers:
                self.assertEqual(n, math.floor(n), numbers)
            answers.append(dict(zip(FIELDS, (int(n) for n in numbers))))
        return answers

    def take(self, name, key="", app="app", permits=1):
        return self.decide("take", [(name, key, app, permits)])[0]

    def peek(self, name, key="", app="app"):
        return self.decide("peek", [(name, key, app, 1)])[0]

    def settle(self, name, keys):
        # KEYS as for items (policy hash, bucket) pairs, ARGV[1] alone.
        k = []
        for key in keys:
            k += [policy_key(name), bucket_key(name, key)]
        out = self.redis.raw("EVALSHA", self.sha["bucket"], len(k), *(k + ["settle"]))
        self.assertEqual(len(out), 16, out)
        return struct.unpack("<dd", out)

    def sync(self, name, *args):
        return self.redis("EVALSHA", self.sha["sync"], 1, policy_key(name), *args)

    def state_bytes(self, name, key=""):
        return self.redis.raw("GET", bucket_key(name, key))

    def pttl(self, name, key=""):
        return self.redis("PTTL", bucket_key(name, key))

    # ------------------------------------------------------------ the answer

    def test_bucket_answer_layout_of_a_take(self):
        name = self.policy(max_permits=10, rate=2)
        out = self.bucket_raw("take", [(name, "", "app", 3)])
        self.assertEqual(len(out), 64, out)
        self.assertEqual(struct.unpack("<8d", out), (0, 1, 7, 10, 0, 1500, 5, 7000000))

    def test_bucket_answer_of_each_refusal(self):
        name = self.policy(max_permits=10, rate=1)
        off = self.policy(max_permits=4, rate=1, enabled=0)
        broken = self.policy(max_permits=0, rate=1)
        self.assertEqual(self.take(unique("missing")),
                         dict(zip(FIELDS, (NOT_FOUND, 0, 0, 0, 0, 0, 0, 0))))
        self.assertEqual(self.take(off),
                         dict(zip(FIELDS, (FAILED_PRECONDITION, 0, 0, 4, 0, 0, 0, 0))))
        self.assertEqual(self.take(broken)["status"], INTERNAL)
        self.assertEqual(self.take(name, app="other"),
                         dict(zip(FIELDS, (PERMISSION_DENIED, 0, 0, 10, 0, 0, 0, 0))))
        self.redis("SET", bucket_key(name), "not a state")
        self.assertEqual(self.take(name),
                         dict(zip(FIELDS, (DATA_LOSS, 0, len("not a state"), 10, 0, 0, 0, 0))))
        self.assertEqual(self.state_bytes(name), b"not a state")

    def test_bucket_out_of_range_is_not_a_denial_and_takes_nothing(self):
        name = self.policy(max_permits=10, rate=1)
        self.assertEqual(self.take(name, permits=11),
                         dict(zip(FIELDS, (OUT_OF_RANGE, 0, 0, 10, 0, 0, 0, 0))))
        self.assertIsNone(self.state_bytes(name))
        self.assertEqual(self.take(name, permits=10)["allowed"], 1)
        # In "all", the items of one bucket together: remaining is their total,
        # and the items of other buckets are aborted.
        a, b = self.policy(max_permits=5), self.policy(max_permits=5)
        out = self.decide("all", [(a, "", "app", 3), (b, "", "app", 1), (a, "", "app", 3)])
        self.assertEqual([(o["status"], o["remaining"], o["limit"]) for o in out],
                         [(OUT_OF_RANGE, 6, 5), (ABORTED, 0, 5), (OUT_OF_RANGE, 6, 5)])
        self.assertIsNone(self.state_bytes(a))
        self.assertIsNone(self.state_bytes(b))

    # ------------------------------------------------------------ refill

    def test_bucket_refill_is_exact_over_redis_time(self):
        # A state written in the past and taken from: whatever the script's clock said,
        # the state it writes is the contract's refill at that clock, minus
        # the take, bit for bit.
        for rate, stored, ago in ((0.5, 0.25, 2600000), (ONE_PER_MINUTE, 0, 61000000),
                                  (1000, 0.5, 1234), (3, 1.0 / 3, 999999)):
            with self.subTest(rate=rate, stored=stored, ago=ago):
                name = self.policy(max_permits=100, rate=rate)
                since = self.redis.time_us() - ago
                write_state(self.redis, bucket_key(name), stored, since)
                before = self.redis.time_us()
                d = self.take(name)
                after = self.redis.time_us()
                self.assertEqual(d["allowed"], 1, d)
                tokens, t = read_state(self.redis, bucket_key(name))
                self.assertGreaterEqual(t, before)
                self.assertLessEqual(t, after)
                self.assertEqual(tokens, level(stored, since, 100, rate, t) - 1)
                self.assertEqual(d["tokens_micro"], math.floor(tokens * 1000000))
                self.assertEqual(d["remaining"], math.floor(tokens))

    def test_bucket_peek_reads_the_refill_within_redis_time_bounds(self):
        name = self.policy(max_permits=1000, rate=7)
        since = self.redis.time_us() - 3000000
        write_state(self.redis, bucket_key(name), 2.5, since)
        before = self.redis.time_us()
        d = self.peek(name)
        after = self.redis.time_us()
        lo = math.floor(level(2.5, since, 1000, 7, before) * 1000000)
        hi = math.floor(level(2.5, since, 1000, 7, after) * 1000000)
        self.assertGreaterEqual(d["tokens_micro"], lo, d)
        self.assertLessEqual(d["tokens_micro"], hi, d)

    def test_bucket_one_per_minute_is_one_per_minute(self):
        # Empty 59 s ago: not yet, and the wait is the second left. Empty a
        # full minute ago: exactly one permit, no more.
        name = self.policy(max_permits=5, rate=ONE_PER_MINUTE)
        before = self.redis.time_us()
        write_state(self.redis, bucket_key(name), 0, before - 59000000)
        d = self.take(name)
        late_ms = (self.redis.time_us() - before) // 1000 + 1
        self.assertEqual(d["allowed"], 0, d)
        self.assertLessEqual(d["retry_after_ms"], 1001, d)    # 1000, or 1 ms over from doubles
        self.assertGreaterEqual(d["retry_after_ms"], 1000 - late_ms, d)
        write_state(self.redis, bucket_key(name), 0, self.redis.time_us() - 60000000)
        self.assertEqual(self.take(name)["allowed"], 1)
        self.assertEqual(self.take(name)["allowed"], 0)

    def test_bucket_waiting_retry_after_succeeds(self):
        # Denied with a wait of W ms; the same state moved W ms into the past
        # (as if the client had waited) is admitted. Rates whose waits do not
        # come out whole in microseconds.
        for rate, want in ((3, 2), (0.7, 1), (ONE_PER_MINUTE, 3), (7 / 3, 5), (1 / 7, 9)):
            with self.subTest(rate=rate, want=want):
                name = self.policy(max_permits=10, rate=rate)
                since = self.redis.time_us()
                write_state(self.redis, bucket_key(name), 0.1, since)
                d = self.take(name, permits=want)
                self.assertEqual(d["allowed"], 0, d)
                self.assertGreater(d["retry_after_ms"], 0, d)
                write_state(self.redis, bucket_key(name), 0.1, since - d["retry_after_ms"] * 1000)
                self.assertEqual(self.take(name, permits=want)["allowed"], 1)

    def test_bucket_retry_after_is_the_smallest_wait_rounded_up(self):
        # A state stamped ahead of the clock counts as measured now (see the
        # next test), so its tokens, and the wait for `want`, do not depend
        # on when the script ran: the smallest whole-microsecond wait after
        # which the refill holds `want`, in milliseconds rounded up.
        for rate, stored, want in ((7, 0.1, 1), (3, 0.25, 2), (0.7, 0.1, 1),
                                   (ONE_PER_MINUTE, 0.5, 3), (1 / 7, 0, 9), (1000, 0.3, 5)):
            with self.subTest(rate=rate, stored=stored, want=want):
                name = self.policy(max_permits=10, rate=rate)
                write_state(self.redis, bucket_key(name), stored, self.redis.time_us() + 60000000)
                d = self.take(name, permits=want)
                wait = math.ceil((want - stored) * 1000000 / rate)
                while level(stored, 0, 10, rate, wait - 1) >= want:
                    wait -= 1
                while level(stored, 0, 10, rate, wait) < want:
                    wait += 1
                self.assertEqual((d["allowed"], d["retry_after_ms"]), (0, math.ceil(wait / 1000)), d)

    def test_bucket_long_idle_stays_exact(self):
        # A bucket idle for 200 years at a rate whose product would leave
        # 2^53: full, and exactly full.
        name = self.policy(max_permits=2 ** 40, rate=1e9)
        write_state(self.redis, bucket_key(name), 0, 0)
        d = self.peek(name)
        self.assertEqual((d["remaining"], d["limit"]), (2 ** 40, 2 ** 40), d)

    # ------------------------------------------------------------ writes

    def test_bucket_denial_consumes_nothing(self):
        name = self.policy(max_permits=10, rate=0.001)
        since = self.redis.time_us()
        write_state(self.redis, bucket_key(name), 2.75, since)   # no expiry: a write would set one
        state = self.state_bytes(name)
        for permits in (3, 10, 5):
            d = self.take(name, permits=permits)
            self.assertEqual((d["allowed"], d["remaining"]), (0, 2), d)
            self.assertEqual(self.state_bytes(name), state)
            self.assertEqual(self.pttl(name), -1)
        # Peek never writes either; a batch with a denied item writes only
        # what was taken.
        self.assertEqual(self.peek(name)["remaining"], 2)
        self.assertEqual(self.state_bytes(name), state)
        out = self.decide("take", [(name, "", "app", 5), (name, "", "app", 2)])
        self.assertEqual([o["allowed"] for o in out], [0, 1])
        tokens, t = read_state(self.redis, bucket_key(name))
        self.assertEqual(tokens, level(2.75, since, 10, 0.001, t) - 2)

    def test_bucket_state_expires_when_the_bucket_would_be_full(self):
        for max_permits, rate, permits in ((10, 2, 1), (10, 2, 10), (3, 0.001, 2), (7, 3, 4)):
            with self.subTest(max_permits=max_permits, rate=rate, permits=permits):
                name = self.policy(max_permits=max_permits, rate=rate)
                self.assertIsNone(self.state_bytes(name))       # a missing key reads as full
                self.assertEqual(self.peek(name)["remaining"], max_permits)
                d = self.take(name, permits=permits)
                want = math.ceil(permits * 1000 / rate)
                self.assertEqual(d["reset_after_ms"], want, d)
                ttl = self.pttl(name)
                self.assertLessEqual(ttl, want)
                self.assertGreater(ttl, want - 1000)

    def test_bucket_state_from_the_future_is_restamped_on_a_denial(self):
        # Redis TIME stepped back: a state stamped a minute ahead counts as
        # measured now, and a denial writes it again stamped now (with an
        # expiry), or the bucket would stay frozen until the clock caught up.
        name = self.policy(max_permits=5, rate=1)
        write_state(self.redis, bucket_key(name), 0.5, self.redis.time_us() + 60000000)
        before = self.redis.time_us()
        self.assertEqual(self.take(name)["allowed"], 0)
        tokens, t = read_state(self.redis, bucket_key(name))
        self.assertEqual(tokens, 0.5)
        self.assertTrue(before <= t <= self.redis.time_us(), (before, t))
        self.assertGreater(self.pttl(name), 3500)
        self.assertLessEqual(self.pttl(name), 4500)

    def test_bucket_full_bucket_is_no_key(self):
        # A state above max_permits (written under a larger one), stamped
        # ahead of the clock and re-stamped by a refused all-or-nothing call,
        # is full: its key is deleted, not written.
        name, other = self.policy(max_permits=10, rate=1), self.policy(max_permits=1, rate=1)
        write_state(self.redis, bucket_key(name), 20, self.redis.time_us() + 60000000)
        write_state(self.redis, bucket_key(other), 0, self.redis.time_us())
        out = self.decide("all", [(name, "", "app", 1), (other, "", "app", 1)])
        self.assertEqual([o["allowed"] for o in out], [0, 0], out)
        self.assertIsNone(self.state_bytes(name))

    # ------------------------------------------------------------ apps

    def test_bucket_app_membership_is_exact(self):
        cases = [("alpha,beta", "alpha", True), ("alpha,beta", "beta", True),
                 ("alpha,beta", "alp", False), ("alpha,beta", "eta", False),
                 ("alphabet", "alpha", False), ("xalpha", "alpha", False),
                 ("alphabet,alpha", "alpha", True), ("alpha,alphabet", "alphabet", True),
                 ("a.c", "abc", False), ("a.c", "a.c", True), ("a-b", "ab", False),
                 ("a-b", "b", False), ("a-b", "a-b", True), ("x_1,a%d", "a5", False),
                 ("*", "anyone", True), ("alpha,*", "zed", True), ("alpha", "*", True),
                 ("", "alpha", False)]
        for apps, app, allowed in cases:
            with self.subTest(apps=apps, app=app):
                name = self.policy(apps=apps)
                self.assertEqual(self.take(name, app=app)["status"],
                                 0 if allowed else PERMISSION_DENIED)
                out = self.decide("take", [(name, "k", app, 1), (name, "k", app, 1)])
                self.assertEqual([o["status"] for o in out],
                                 [0 if allowed else PERMISSION_DENIED] * 2)

    # ------------------------------------------------------------ many items

    def test_bucket_batch_items_in_order(self):
        two, three = self.policy(max_permits=2), self.policy(max_permits=3, rate=0.001)
        out = self.decide("take", [(two, "", "app", 1), (three, "u", "app", 2),
                                   (two, "", "app", 1), (two, "", "app", 1),
                                   (three, "u", "app", 2), (three, "v", "app", 3)])
        self.assertEqual([(o["limit"], o["allowed"], o["remaining"]) for o in out],
                         [(2, 1, 1), (3, 1, 1), (2, 1, 0), (2, 0, 0), (3, 0, 1), (3, 1, 0)])
        # Each bucket written once, with every take of the call.
        tokens, _ = read_state(self.redis, bucket_key(three, "u"))
        self.assertAlmostEqual(tokens, 1, places=3)
        tokens, _ = read_state(self.redis, bucket_key(two))
        self.assertLess(tokens, 0.01)

    def test_bucket_all_or_nothing(self):
        a, b = self.policy(max_permits=4, rate=2), self.policy(max_permits=4, rate=2)
        since = self.redis.time_us()
        write_state(self.redis, bucket_key(b), 1, since)
        state = self.state_bytes(b)
        out = self.decide("all", [(a, "", "app", 2), (b, "", "app", 1), (b, "", "app", 2)])
        self.assertEqual([o["allowed"] for o in out], [0, 0, 0], out)
        # The wait is the one for b's total (3 from 1 at 2/s: 1 s), for every item.
        self.assertEqual({o["retry_after_ms"] for o in out}, {out[0]["retry_after_ms"]})
        self.assertGreater(out[0]["retry_after_ms"], 900, out)
        self.assertLessEqual(out[0]["retry_after_ms"], 1000, out)
        self.assertIsNone(self.state_bytes(a))
        self.assertEqual(self.state_bytes(b), state)
        out = self.decide("all", [(a, "", "app", 2), (a, "", "app", 2)])
        self.assertEqual([(o["allowed"], o["remaining"]) for o in out], [(1, 2), (1, 0)])

    def test_bucket_peek_of_many_takes_nothing(self):
        name = self.policy(max_permits=3)
        out = self.decide("peek", [(name, "", "app", 1)] * 3)
        self.assertEqual([o["remaining"] for o in out], [3, 3, 3])
        self.assertIsNone(self.state_bytes(name))

    # ------------------------------------------------------------ settle

    def test_bucket_settle_sets_expiry_under_the_limits_now(self):
        name = self.policy(max_permits=10, rate=1)
        self.assertEqual(self.take(name, key="low", permits=8)["allowed"], 1)
        self.assertLessEqual(self.pttl(name, "low"), 8000)
        now = self.redis.time_us()
        write_state(self.redis, bucket_key(name, "full"), 9, now - 20000000)
        self.redis("HSET", policy_key(name), "rate", "0.1")      # slower: the keys expire too soon
        state = self.state_bytes(name, "low")
        self.assertEqual(self.settle(name, ["low", "full", "none"]), (1, 1))
        ttl = self.pttl(name, "low")
        self.assertGreater(ttl, 75000)          # (10 - 2) / 0.1 s, less the time since
        self.assertLessEqual(ttl, 80000)
        self.assertEqual(self.state_bytes(name, "low"), state)    # the state is kept
        self.assertIsNone(self.state_bytes(name, "full"))         # full: no key
        self.assertIsNone(self.state_bytes(name, "none"))

    def test_bucket_settle_folds_a_state_older_than_the_newest_rate_edit(self):
        name = self.policy(max_permits=100, rate=2)
        now = self.redis.time_us()
        edit = now - 1000000
        since = now - 4000000
        self.redis("HSET", policy_key(name), "rates", "%d:0.5" % edit)
        write_state(self.redis, bucket_key(name, "u"), 0, since)
        self.assertEqual(self.settle(name, ["u"]), (1, 0))
        tokens, t = read_state(self.redis, bucket_key(name, "u"))
        self.assertGreaterEqual(t, now)
        folded = level(0, since, 100, 0.5, edit)
        self.assertEqual(tokens, level(folded, edit, 100, 2, t))

    # ------------------------------------------------------------ rate history

    def test_bucket_rate_edit_reprices_nothing_earned(self):
        # 0.5/s until t2, 4/s until t1, 2/s since: a bucket empty since before
        # both edits earns each rate for its own time, bit for bit, on the
        # single-item path and the many-item one.
        for path in ("one", "many"):
            with self.subTest(path=path):
                name = self.policy(max_permits=1000, rate=2)
                now = self.redis.time_us()
                t1, t2, since = now - 1000000, now - 3000000, now - 7000000
                self.redis("HSET", policy_key(name), "rates", "%d:4;%d:0.5" % (t1, t2))
                write_state(self.redis, bucket_key(name), 0, since)
                if path == "one":
                    self.assertEqual(self.take(name)["allowed"], 1)
                else:
                    out = self.decide("take", [(name, "", "app", 1)] * 2)
                    self.assertEqual([o["allowed"] for o in out], [1, 1])
                tokens, t = read_state(self.redis, bucket_key(name))
                x = level(0, since, 1000, 0.5, t2)
                x = level(x, t2, 1000, 4, t1)
                self.assertEqual(tokens, level(x, t1, 1000, 2, t) - (1 if path == "one" else 2))
        # A bucket stamped after the newest edit accrues at the rate now only.
        name = self.policy(max_permits=1000, rate=2)
        now = self.redis.time_us()
        self.redis("HSET", policy_key(name), "rates", "%d:100" % (now - 5000000))
        write_state(self.redis, bucket_key(name), 0, now - 1000000)
        self.take(name)
        tokens, t = read_state(self.redis, bucket_key(name))
        self.assertEqual(tokens, level(0, now - 1000000, 1000, 2, t) - 1)

    def test_bucket_rate_history_not_written_by_sync_is_internal(self):
        for rates in ("garbage", "5:0", "1:2;5:3", "x:1"):
            with self.subTest(rates=rates):
                name = self.policy(max_permits=10, rate=1)
                self.redis("HSET", policy_key(name), "rates", rates)
                write_state(self.redis, bucket_key(name), 0, 0)
                self.assertEqual(self.take(name)["status"], INTERNAL)
                out = self.decide("take", [(name, "", "app", 1)] * 2)
                self.assertEqual([o["status"] for o in out], [INTERNAL] * 2)

    def test_sync_set_records_rate_edits_newest_first(self):
        name = self.policy(max_permits=1000, rate=1)
        before = self.redis.time_us()
        self.assertEqual(self.sync(name, "set", "rate", "20"), [1, 1])
        after = self.redis.time_us()
        rates = self.redis("HGET", policy_key(name), "rates")
        t, old = rates.split(":")
        self.assertTrue(before <= int(t) <= after, (before, rates, after))
        self.assertEqual(old, "1")
        self.assertEqual(self.sync(name, "set", "rate", "20"), [1, 0])   # no edit
        self.assertEqual(self.redis("HGET", policy_key(name), "rates"), rates)
        self.assertEqual(self.sync(name, "set", "rate", "0.5"), [1, 1])
        entries = self.redis("HGET", policy_key(name), "rates").split(";")
        self.assertEqual([e.split(":")[1] for e in entries], ["20", "1"])
        self.assertGreater(int(entries[0].split(":")[0]), int(entries[1].split(":")[0]))
        self.assertEqual(self.sync(name, "newest"), [int(entries[0].split(":")[0])])
        # trim drops the history up to and including a time from "newest".
        self.assertEqual(self.sync(name, "trim", entries[1].split(":")[0]), [1])
        self.assertEqual(self.redis("HGET", policy_key(name), "rates"), entries[0])
        self.assertEqual(self.sync(name, "trim", entries[0].split(":")[0]), [0])
        self.assertIsNone(self.redis("HGET", policy_key(name), "rates"))
        self.assertEqual(self.sync(name, "newest"), [0])

    def test_sync_prunes_edits_no_bucket_needs(self):
        # max 10 at 1/s: an edit 20 s old is one an empty bucket has outlived.
        name = self.policy(max_permits=10, rate=1)
        now = self.redis.time_us()
        self.redis("HSET", policy_key(name), "rates", "%d:3;%d:5" % (now - 2000000, now - 20000000))
        self.assertEqual(self.sync(name, "set", "description", "x"), [1, 0])
        self.assertEqual(self.redis("HGET", policy_key(name), "rates"), "%d:3" % (now - 2000000))

    def test_sync_set_refuses_bad_values_naming_them(self):
        name = self.policy(max_permits=10, rate=1)
        for field, value in (("rate", "0"), ("rate", "-1"), ("rate", "inf"), ("rate", "x"),
                             ("max_permits", "0"), ("max_permits", "2.5")):
            with self.subTest(field=field, value=value):
                with self.assertRaises(RedisError) as e:
                    self.sync(name, "set", field, value)
                self.assertIn('%s must be' % field, str(e.exception))
                self.assertIn('"%s"' % value, str(e.exception))
        with self.assertRaises(RedisError) as e:
            self.sync(name, "bogus")
        self.assertIn("bogus", str(e.exception))
        self.assertEqual(self.redis("HMGET", policy_key(name), "rate", "max_permits"), ["1", "10"])

    # ------------------------------------------------------------ sync.lua put/del

    def put(self, name, row_id, version, snapshot_us, **fields):
        f = {"id": row_id, "version": version, "name": name, "apps": "app",
             "max_permits": 10, "rate": 1, "enabled": 1, "updated_us": snapshot_us}
        f.update(fields)
        args = []
        for k, v in f.items():
            args += [k, v]
        return self.sync(name, "put", row_id, version, snapshot_us, *args)

    def hash(self, name):
        flat = self.redis("HGETALL", policy_key(name))
        return dict(zip(flat[::2], flat[1::2]))

    def test_sync_put_version_ordering(self):
        name = unique("sync")
        self.assertEqual(self.put(name, 5, 3, 1000), [1, 0])
        h = self.hash(name)
        self.assertEqual((h["version"], h["synced_us"], h["max_permits"]), ("3", "1000", "10"))
        # An older version loses, whatever its snapshot time.
        self.assertEqual(self.put(name, 5, 2, 9000, apps="old"), [0, 0])
        # The same version from an older or equal snapshot loses ...
        self.assertEqual(self.put(name, 5, 3, 1000, apps="same-time"), [0, 0])
        self.assertEqual(self.put(name, 5, 3, 999, apps="older"), [0, 0])
        self.assertEqual(self.hash(name)["apps"], "app")
        # ... a newer snapshot of it wins (an app list edited with plain SQL).
        self.assertEqual(self.put(name, 5, 3, 2000, apps="sql-edit"), [1, 0])
        self.assertEqual((self.hash(name)["apps"], self.hash(name)["synced_us"]), ("sql-edit", "2000"))
        # Nothing changed: a newer snapshot of the same version with every field
        # as Redis has it is not written (synced_us stays).
        h = self.hash(name)
        self.assertEqual(self.put(name, 5, 3, 3000, apps="sql-edit", updated_us=2000), [0, 0])
        self.assertEqual(self.hash(name), h)
        # A newer version wins; limits says whether max_permits or rate changed.
        self.assertEqual(self.put(name, 5, 5, 3000, apps="sql-edit", rate=2), [1, 1])
        self.assertEqual(self.put(name, 5, 6, 3000, apps="new", rate=2), [1, 0])
        self.assertEqual(self.put(name, 5, 7, 3000, apps="new", rate="2.0", max_permits=11), [1, 1])
        self.assertEqual(self.hash(name)["max_permits"], "11")
        # A newer row id in Redis (deleted and created again) wins over any
        # version of the older row; a newer row id offered wins over Redis.
        self.assertEqual(self.put(name, 4, 99, 9000), [0, 0])
        self.assertEqual(self.put(name, 6, 1, 9000, apps="recreated"), [1, 1])
        h = self.hash(name)
        self.assertEqual((h["id"], h["version"], h["apps"]), ("6", "1", "recreated"))

    def test_sync_put_replaces_the_whole_hash_and_keeps_the_rate_history(self):
        name = unique("sync")
        self.assertEqual(self.put(name, 1, 1, 1000, description="d"), [1, 0])
        self.assertNotIn("rates", self.hash(name))
        before = self.redis.time_us()
        self.assertEqual(self.put(name, 1, 2, 2000, rate=4), [1, 1])
        h = self.hash(name)
        self.assertNotIn("description", h)                    # replaced, not merged
        t, old = h["rates"].split(":")
        self.assertEqual(old, "1")
        self.assertGreaterEqual(int(t), before)

    def test_sync_del_only_when_the_snapshot_is_newer(self):
        name = unique("sync")
        self.put(name, 7, 1, 1000, updated_us=5000)
        # Changed at or after the snapshot, or a row newer than the snapshot knows: kept.
        self.assertEqual(self.sync(name, "del", 5000, 7), [0])
        self.assertEqual(self.sync(name, "del", 4000, 7), [0])
        self.assertEqual(self.sync(name, "del", 6000, 6), [0])
        self.assertTrue(self.hash(name))
        self.assertEqual(self.sync(name, "del", 5001, 7), [1])
        self.assertEqual(self.hash(name), {})
        self.assertEqual(self.sync(name, "del", 9000, 100), [0])


if __name__ == "__main__":
    harness.main()
