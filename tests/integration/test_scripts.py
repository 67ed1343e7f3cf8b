"""lua/bucket.lua and lua/sync.lua on their own (issues 18 and 19): each
script is loaded with SCRIPT LOAD into the stack's Redis and called with
EVALSHA, with no permitd and no HTTP in between, and checked against the
contract at its top: the answer's layout, refill exact over Redis TIME, a
denial that takes nothing, expiry when full, out_of_range, the items of a
call in order, all-or-nothing, settle, the rate history (`rates`), the
24-byte state and its policy version stamp (a stale call writes nothing;
a 16-byte state from before issue 19 reads as stamp 0), and sync.lua's
rules for which copy of a policy wins and its change notice.

Since issue 19 bucket.lua reads no policy hash: its KEYS are bucket state
keys only and each policy's limits (version stamp, max_permits, rate,
rates) come in ARGV, so these tests hand it the limits directly (Policy
below). What moved to permitd's C with that, and is tested there: exact
`apps` membership (tests/unit/decisions/test_policies.c
test_policies_apps_are_exact; test_limiter.c
test_limiter_plan_groups_per_policy: permission_denied; and
integration_bucket test_apps_membership_is_exact), a disabled policy
(test_limiter_plan_groups_per_policy: failed_precondition; integration_bucket
test_not_found_and_disabled), an unknown policy (not_found: integration_bucket
test_not_found_and_disabled), and limits that are no policy's, max_permits
0 or a rate that is no number (test_policies.c test_policies_parse).

The clock is Redis TIME inside the script, which a test cannot set. Time is
moved instead by writing a bucket's state stamped in the past; where the
script's own `now` matters, a state it wrote is stamped with it (exact
checks follow), or Redis TIME read just before and just after the call
bounds it (checks within those bounds, so a slow machine cannot fail them).

Keys live under a prefix of their own (PREFIX), so nothing here meets
permitd's keys. PERMITD_TEST_LUA_DIR (default: the source tree's lua/)
points the tests at another copy of the scripts: a mutated copy in a temp
dir must make some of them fail. Each is loaded as the build embeds it,
its lua/lib/ pieces spliced in (harness.lua_script()).
"""
import math
import os
import struct
import unittest

import harness
from harness import Redis, RedisError, read_state, unique, write_state

LUA_DIR = os.environ.get("PERMITD_TEST_LUA_DIR", os.path.join(harness.SOURCE_DIR, "lua"))
PREFIX = "scripts-test:"
ANSWER = struct.Struct("<10d")      # a RECORD's numbers; then 32 bytes of lease id (issue 20)
RECORD = 112
SHORT = struct.Struct("<8d")        # a compact call's RECORD: the first 8 numbers alone
TTL = 60000                         # ARGV[3]: how long a request id's answer is kept (ms)
STATE = struct.Struct("<ddd")       # tokens, Redis time in us, the policy's version stamp
OLD_STATE = struct.Struct("<dd")    # before issue 19: tokens, time
FIELDS = ("status", "allowed", "remaining", "limit", "retry_after_ms", "reset_after_ms",
          "window_s", "tokens_micro")
ABORTED, OUT_OF_RANGE, INTERNAL, DATA_LOSS, STALE = -10, -11, -13, -15, -17
ONE_PER_MINUTE = 0.016666666666666666   # repr(1 / 60)
STAMP = 1 << 24                         # a version stamp is id * 2^24 + version


class Policy:
    """A policy's limits as permitd sends them to bucket.lua (ARGV): its
    version stamp, max_permits, rate, rate history; and its name, for the
    keys of its buckets."""

    def __init__(self, max_permits=10, rate=1, stamp=STAMP + 1, rates=""):
        self.name = unique("script")
        self.max, self.rate, self.stamp, self.rates = max_permits, rate, stamp, rates

    def args(self):
        return [self.stamp, self.max, self.rate, self.rates]

    def at(self, stamp=None, **limits):
        """The same policy (same buckets) with other limits or stamp."""
        p = Policy.__new__(Policy)
        p.__dict__.update(self.__dict__)
        p.__dict__.update(limits)
        if stamp is not None:
            p.stamp = stamp
        return p


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
            cls.sha[name] = cls.redis("SCRIPT", "LOAD", harness.lua_script(name, LUA_DIR))

    @classmethod
    def tearDownClass(cls):
        cls.redis.close()

    def policy(self, max_permits=10, rate=1, **extra):
        """A policy hash (for sync.lua, which still keeps them)."""
        name = unique("script")
        harness.put_policy(self.redis, name, max_permits=max_permits, rate=rate,
                           prefix=PREFIX, **extra)
        return name

    # ------------------------------------------------------------ calls

    def bucket_raw(self, mode, items, wide=None):
        """EVALSHA bucket.lua: items are (Policy, key, permits). KEYS the
        items' bucket state keys; ARGV the mode, the number of policies,
        the request-id ttl, each policy's limits once (in order of first
        use), then each item's policy index (1-based), permits, request id
        and lease id (an item may carry a request id as a fourth element).
        As permitd sends it: compact (ARGV[3] "", 2 ARGV an item, no
        request id or lease id) unless some item carries a request id, or
        wide says which."""
        policies, keys, tail = [], [], []
        if wide is None:
            wide = any(rid and rid[0] for _, _, _, *rid in items)
        for p, key, permits, *rid in items:
            if p not in policies:
                policies.append(p)
            keys.append(bucket_key(p.name, key))
            tail += [policies.index(p) + 1, permits]
            if wide:
                tail += [rid[0] if rid else "", ""]
        args = [mode, len(policies), TTL if wide else ""]
        for p in policies:
            args += p.args()
        return self.redis.raw("EVALSHA", self.sha["bucket"], len(keys), *(keys + args + tail))

    def decide(self, mode, items, wide=None):
        """The answers of bucket.lua, one dict per item, after checking the
        layout: a RECORD of 112 bytes per item (10 little-endian doubles,
        every one whole, then 32 bytes of lease id: none for a token
        bucket), or of 64 (the first 8 doubles) in a compact call. A dict's
        "flags" is the RECORD's last number."""
        if wide is None:
            wide = any(rid and rid[0] for _, _, _, *rid in items)
        out = self.bucket_raw(mode, items, wide)
        size = RECORD if wide else SHORT.size
        self.assertIsInstance(out, bytes)
        self.assertEqual(len(out), size * len(items), out)
        answers = []
        for i in range(len(items)):
            if wide:
                numbers = ANSWER.unpack_from(out, i * RECORD)
                self.assertEqual(numbers[8], 0, numbers)    # lease_expires_ms
                self.assertEqual(out[i * RECORD + 80:(i + 1) * RECORD], b"\0" * 32)
            else:
                numbers = SHORT.unpack_from(out, i * SHORT.size)
            for n in numbers:
                self.assertEqual(n, math.floor(n), numbers)
            a = dict(zip(FIELDS, (int(n) for n in numbers)))
            if wide and numbers[9]:
                a["flags"] = int(numbers[9])
            answers.append(a)
        return answers

    def take(self, p, key="", permits=1):
        return self.decide("take", [(p, key, permits)])[0]

    def peek(self, p, key=""):
        return self.decide("peek", [(p, key, 1)])[0]

    def settle(self, p, keys):
        # KEYS the buckets; ARGV "settle", "1" and the policy's limits, no items.
        k = [bucket_key(p.name, key) for key in keys]
        out = self.redis.raw("EVALSHA", self.sha["bucket"], len(k),
                             *(k + ["settle", 1, TTL] + p.args()))
        self.assertEqual(len(out), 24, out)    # set, removed, index members removed
        return struct.unpack("<ddd", out)[:2]

    def sync(self, name, *args):
        return self.redis("EVALSHA", self.sha["sync"], 1, policy_key(name), *args)

    def state_bytes(self, p, key=""):
        return self.redis.raw("GET", bucket_key(p.name, key))

    def pttl(self, p, key=""):
        return self.redis("PTTL", bucket_key(p.name, key))

    def stamp_of(self, p, key=""):
        return STATE.unpack(self.state_bytes(p, key))[2]

    # ------------------------------------------------------------ the answer

    def test_bucket_answer_layout_of_a_take(self):
        p = Policy(max_permits=10, rate=2)
        out = self.bucket_raw("take", [(p, "", 3)], wide=True)
        self.assertEqual(len(out), 112, out)
        self.assertEqual(struct.unpack("<10d", out[:80]), (0, 1, 7, 10, 0, 1500, 5, 7000000, 0, 0))
        self.assertEqual(out[80:], b"\0" * 32)
        # compact (what permitd sends without a request id): 64 bytes, the
        # first 8 numbers alone
        out = self.bucket_raw("take", [(Policy(max_permits=10, rate=2), "", 3)])
        self.assertEqual(len(out), 64, out)
        self.assertEqual(struct.unpack("<8d", out), (0, 1, 7, 10, 0, 1500, 5, 7000000))

    def test_bucket_compact_call_decides_as_the_wide_one(self):
        # The compact call (ARGV[3] "", 2 ARGV an item, 64-byte RECORDs:
        # what permitd sends when no item carries a request id) and the
        # wide one (4 an item, 112-byte RECORDs) decide the same items
        # alike: on a single item (the in-line path) and on several of two
        # policies, one bucket shared by two items.
        for wide in (False, True):
            with self.subTest(wide=wide):
                p, q = Policy(max_permits=10, rate=2), Policy(max_permits=5, rate=0.001)
                one = self.decide("take", [(p, "", 3)], wide=wide)
                p = Policy(max_permits=10, rate=0.001)      # no refill between the calls
                self.assertEqual(one, [{"status": 0, "allowed": 1, "remaining": 7, "limit": 10,
                                        "retry_after_ms": 0, "reset_after_ms": 1500,
                                        "window_s": 5, "tokens_micro": 7000000}])
                many = self.decide("take", [(p, "a", 4), (q, "b", 5), (p, "a", 7), (q, "", 1)],
                                   wide=wide)
                self.assertEqual([(a["allowed"], a["remaining"], a["limit"]) for a in many],
                                 [(1, 6, 10), (1, 0, 5), (0, 6, 10), (1, 4, 5)])
                self.assertNotIn("flags", many[2])
                self.assertEqual(self.peek(p, "a")["remaining"], 6)
                self.assertEqual(self.peek(q, "b")["remaining"], 0)
                # a compact peek of several items reads no "1" as a request id
                self.assertEqual([a["remaining"] for a in self.decide(
                    "peek", [(p, "a", 1), (q, "b", 1)], wide=wide)], [6, 0])

    def test_bucket_many_items_of_one_policy_decide_as_the_wide_call(self):
        # Issue 41: a compact call whose items all name one policy is
        # decided by bucket.lua's many-item fast path (before its helpers),
        # or, at the first item it does not take (a denial, a state of
        # another shape or a newer version), by the many-item path; the
        # wide call always by the latter. Both must answer and write the
        # same: here over 2 to 130 items (the fast path's duplicate search
        # by comparison up to 16, by table above; its answers packed 100
        # items a pack), shared buckets, full and partly taken buckets, and
        # each way out of the fast path. The rate is 1e-300 a second: no
        # time that passes between the two calls adds a bit to any bucket
        # (every ttl is then FOREVER_MS), so their answers compare exactly.
        p = Policy(max_permits=1000, rate=1e-300)
        names = ["k%d" % i for i in range(40)]
        seeds = {"k1": (400.0, STAMP), "k2": (0.5, STAMP + 1), "k3": (999.25, 0)}
        cases = []
        for n in (2, 9, 16, 17, 130):
            items = [(p, names[(i * 7) % min(n, 40) % 23], 1 + i % 3) for i in range(n)]
            cases += [("take", items), ("peek", items), ("all", items)]
        cases += [
            ("take", [(p, "k1", 5), (p, "k2", 1), (p, "k1", 395)]),          # k2 denied
            ("all", [(p, "k1", 5), (p, "k2", 1), (p, "k9", 3)]),             # refused: none
            ("take", [(p, "k1", 5), (p, "k3", 2), (p, "k1", 5)]),
            ("take", [(p, "k4", 5), (p, "k1", 1001)]),                       # out of range
            ("take", [(p, "k1", 400), (p, "k1", 1)]),                        # second denied
            ("take", [(p, "old", 1), (p, "k1", 1)]),                         # a 16-byte state
            ("take", [(p, "newer", 1), (p, "k1", 1)]),                       # stale
        ]
        for c, (mode, items) in enumerate(cases):
            seen = {}
            for wide in (False, True):
                keys = sorted({key for _, key, _ in items} | set(seeds))
                for key in keys:
                    self.redis("DEL", bucket_key(p.name, key))
                for key, (tokens, stamp) in seeds.items():
                    write_state(self.redis, bucket_key(p.name, key), tokens, 0, version=stamp)
                self.redis("SET", bucket_key(p.name, "old"), OLD_STATE.pack(7.0, 0))
                write_state(self.redis, bucket_key(p.name, "newer"), 3.0, 0, version=STAMP + 9)
                answers = self.decide(mode, items, wide=wide)
                states = {}
                for key in keys + ["old", "newer"]:
                    s = self.state_bytes(p, key)
                    states[key] = s if s is None or len(s) != 24 else \
                        (STATE.unpack(s)[0], STATE.unpack(s)[2], self.pttl(p, key) > 0)
                seen[wide] = (answers, states)
            with self.subTest(case=c, mode=mode, items=len(items)):
                self.assertEqual(seen[False], seen[True])

    def test_bucket_call_mixing_a_request_id_and_a_plain_item(self):
        # One item with a request id makes the call wide (112-byte RECORDs
        # for both): that item's answer is kept and replayed, flags 1, the
        # plain item beside it is decided again each time.
        p = Policy(max_permits=10, rate=0.001)
        first = self.decide("take", [(p, "m", 2, "rid-1"), (p, "m", 3)])
        self.assertEqual([a["remaining"] for a in first], [8, 5])
        kept = self.redis.raw("GET", bucket_key(p.name, "m") + "\x1fr" + "rid-1")
        self.assertEqual(len(kept), RECORD)
        self.assertEqual(ANSWER.unpack_from(kept)[:3], (0, 1, 8))
        again = self.decide("take", [(p, "m", 2, "rid-1"), (p, "m", 3)])
        self.assertEqual(again[0], dict(first[0], flags=1))
        self.assertEqual(again[1]["remaining"], 2)          # taken again, 3 more
        lone = self.decide("take", [(p, "m", 2, "rid-1")])[0]
        self.assertEqual(lone, dict(first[0], flags=1))
        self.assertEqual(self.peek(p, "m")["remaining"], 2)

    def test_bucket_answer_of_each_refusal(self):
        p = Policy(max_permits=10, rate=1, stamp=3 * STAMP + 4)
        self.assertEqual(self.take(p, permits=11),
                         dict(zip(FIELDS, (OUT_OF_RANGE, 0, 0, 10, 0, 0, 0, 0))))
        write_state(self.redis, bucket_key(p.name, "u"), 0, 0)
        self.assertEqual(self.take(p.at(rates="garbage"), key="u"),
                         dict(zip(FIELDS, (INTERNAL, 0, 0, 0, 0, 0, 0, 0))))
        write_state(self.redis, bucket_key(p.name, "new"), 1, 0, version=3 * STAMP + 5)
        self.assertEqual(self.take(p, key="new"),
                         dict(zip(FIELDS, (STALE, 0, 3 * STAMP + 5, 10, 0, 0, 0, 0))))
        self.redis("SET", bucket_key(p.name), "not a state")
        self.assertEqual(self.take(p),
                         dict(zip(FIELDS, (DATA_LOSS, 0, len("not a state"), 10, 0, 0, 0, 0))))
        self.assertEqual(self.state_bytes(p), b"not a state")

    def test_bucket_out_of_range_is_not_a_denial_and_takes_nothing(self):
        p = Policy(max_permits=10, rate=1)
        self.assertEqual(self.take(p, permits=11),
                         dict(zip(FIELDS, (OUT_OF_RANGE, 0, 0, 10, 0, 0, 0, 0))))
        self.assertIsNone(self.state_bytes(p))
        self.assertEqual(self.take(p, permits=10)["allowed"], 1)
        # In "all", the items of one bucket together: remaining is their total,
        # and the items of other buckets are aborted.
        a, b = Policy(max_permits=5), Policy(max_permits=5)
        out = self.decide("all", [(a, "", 3), (b, "", 1), (a, "", 3)])
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
                p = Policy(max_permits=100, rate=rate)
                since = self.redis.time_us() - ago
                write_state(self.redis, bucket_key(p.name), stored, since)
                before = self.redis.time_us()
                d = self.take(p)
                after = self.redis.time_us()
                self.assertEqual(d["allowed"], 1, d)
                tokens, t = read_state(self.redis, bucket_key(p.name))
                self.assertGreaterEqual(t, before)
                self.assertLessEqual(t, after)
                self.assertEqual(tokens, level(stored, since, 100, rate, t) - 1)
                self.assertEqual(d["tokens_micro"], math.floor(tokens * 1000000))
                self.assertEqual(d["remaining"], math.floor(tokens))

    def test_bucket_peek_reads_the_refill_within_redis_time_bounds(self):
        p = Policy(max_permits=1000, rate=7)
        since = self.redis.time_us() - 3000000
        write_state(self.redis, bucket_key(p.name), 2.5, since)
        before = self.redis.time_us()
        d = self.peek(p)
        after = self.redis.time_us()
        lo = math.floor(level(2.5, since, 1000, 7, before) * 1000000)
        hi = math.floor(level(2.5, since, 1000, 7, after) * 1000000)
        self.assertGreaterEqual(d["tokens_micro"], lo, d)
        self.assertLessEqual(d["tokens_micro"], hi, d)

    def test_bucket_one_per_minute_is_one_per_minute(self):
        # Empty 59 s ago: not yet, and the wait is the second left. Empty a
        # full minute ago: exactly one permit, no more.
        p = Policy(max_permits=5, rate=ONE_PER_MINUTE)
        before = self.redis.time_us()
        write_state(self.redis, bucket_key(p.name), 0, before - 59000000)
        d = self.take(p)
        late_ms = (self.redis.time_us() - before) // 1000 + 1
        self.assertEqual(d["allowed"], 0, d)
        self.assertLessEqual(d["retry_after_ms"], 1001, d)    # 1000, or 1 ms over from doubles
        self.assertGreaterEqual(d["retry_after_ms"], 1000 - late_ms, d)
        write_state(self.redis, bucket_key(p.name), 0, self.redis.time_us() - 60000000)
        self.assertEqual(self.take(p)["allowed"], 1)
        self.assertEqual(self.take(p)["allowed"], 0)

    def test_bucket_waiting_retry_after_succeeds(self):
        # Denied with a wait of W ms; the same state moved W ms into the past
        # (as if the client had waited) is admitted. Rates whose waits do not
        # come out whole in microseconds.
        for rate, want in ((3, 2), (0.7, 1), (ONE_PER_MINUTE, 3), (7 / 3, 5), (1 / 7, 9)):
            with self.subTest(rate=rate, want=want):
                p = Policy(max_permits=10, rate=rate)
                since = self.redis.time_us()
                write_state(self.redis, bucket_key(p.name), 0.1, since)
                d = self.take(p, permits=want)
                self.assertEqual(d["allowed"], 0, d)
                self.assertGreater(d["retry_after_ms"], 0, d)
                write_state(self.redis, bucket_key(p.name), 0.1, since - d["retry_after_ms"] * 1000)
                self.assertEqual(self.take(p, permits=want)["allowed"], 1)

    def test_bucket_retry_after_is_the_smallest_wait_rounded_up(self):
        # A state stamped ahead of the clock counts as measured now (see the
        # next test), so its tokens, and the wait for `want`, do not depend
        # on when the script ran: the smallest whole-microsecond wait after
        # which the refill holds `want`, in milliseconds rounded up.
        for rate, stored, want in ((7, 0.1, 1), (3, 0.25, 2), (0.7, 0.1, 1),
                                   (ONE_PER_MINUTE, 0.5, 3), (1 / 7, 0, 9), (1000, 0.3, 5)):
            with self.subTest(rate=rate, stored=stored, want=want):
                p = Policy(max_permits=10, rate=rate)
                write_state(self.redis, bucket_key(p.name), stored, self.redis.time_us() + 60000000)
                d = self.take(p, permits=want)
                wait = math.ceil((want - stored) * 1000000 / rate)
                while level(stored, 0, 10, rate, wait - 1) >= want:
                    wait -= 1
                while level(stored, 0, 10, rate, wait) < want:
                    wait += 1
                self.assertEqual((d["allowed"], d["retry_after_ms"]), (0, math.ceil(wait / 1000)), d)

    def test_bucket_long_idle_stays_exact(self):
        # A bucket idle for 200 years at a rate whose product would leave
        # 2^53: full, and exactly full.
        p = Policy(max_permits=2 ** 40, rate=1e9)
        write_state(self.redis, bucket_key(p.name), 0, 0)
        d = self.peek(p)
        self.assertEqual((d["remaining"], d["limit"]), (2 ** 40, 2 ** 40), d)

    # ------------------------------------------------------------ writes

    def test_bucket_denial_consumes_nothing(self):
        p = Policy(max_permits=10, rate=0.001)
        since = self.redis.time_us()
        write_state(self.redis, bucket_key(p.name), 2.75, since)   # no expiry: a write would set one
        state = self.state_bytes(p)
        for permits in (3, 10, 5):
            d = self.take(p, permits=permits)
            self.assertEqual((d["allowed"], d["remaining"]), (0, 2), d)
            self.assertEqual(self.state_bytes(p), state)
            self.assertEqual(self.pttl(p), -1)
        # Peek never writes either; a batch with a denied item writes only
        # what was taken.
        self.assertEqual(self.peek(p)["remaining"], 2)
        self.assertEqual(self.state_bytes(p), state)
        out = self.decide("take", [(p, "", 5), (p, "", 2)])
        self.assertEqual([o["allowed"] for o in out], [0, 1])
        tokens, t = read_state(self.redis, bucket_key(p.name))
        self.assertEqual(tokens, level(2.75, since, 10, 0.001, t) - 2)

    def test_bucket_state_expires_when_the_bucket_would_be_full(self):
        for max_permits, rate, permits in ((10, 2, 1), (10, 2, 10), (3, 0.001, 2), (7, 3, 4)):
            with self.subTest(max_permits=max_permits, rate=rate, permits=permits):
                p = Policy(max_permits=max_permits, rate=rate)
                self.assertIsNone(self.state_bytes(p))       # a missing key reads as full
                self.assertEqual(self.peek(p)["remaining"], max_permits)
                d = self.take(p, permits=permits)
                want = math.ceil(permits * 1000 / rate)
                self.assertEqual(d["reset_after_ms"], want, d)
                ttl = self.pttl(p)
                self.assertLessEqual(ttl, want)
                self.assertGreater(ttl, want - 1000)

    def test_bucket_state_from_the_future_is_restamped_on_a_denial(self):
        # Redis TIME stepped back: a state stamped a minute ahead counts as
        # measured now, and a denial writes it again stamped now (with an
        # expiry), or the bucket would stay frozen until the clock caught up.
        p = Policy(max_permits=5, rate=1)
        write_state(self.redis, bucket_key(p.name), 0.5, self.redis.time_us() + 60000000)
        before = self.redis.time_us()
        self.assertEqual(self.take(p)["allowed"], 0)
        tokens, t = read_state(self.redis, bucket_key(p.name))
        self.assertEqual(tokens, 0.5)
        self.assertTrue(before <= t <= self.redis.time_us(), (before, t))
        self.assertGreater(self.pttl(p), 3500)
        self.assertLessEqual(self.pttl(p), 4500)

    def test_bucket_full_bucket_is_no_key(self):
        # A state above max_permits (written under a larger one), stamped
        # ahead of the clock and re-stamped by a refused all-or-nothing call,
        # is full: its key is deleted, not written.
        p, other = Policy(max_permits=10, rate=1), Policy(max_permits=1, rate=1)
        write_state(self.redis, bucket_key(p.name), 20, self.redis.time_us() + 60000000)
        write_state(self.redis, bucket_key(other.name), 0, self.redis.time_us())
        out = self.decide("all", [(p, "", 1), (other, "", 1)])
        self.assertEqual([o["allowed"] for o in out], [0, 0], out)
        self.assertIsNone(self.state_bytes(p))

    # ------------------------------------------------------------ many items

    def test_bucket_batch_items_in_order(self):
        two, three = Policy(max_permits=2), Policy(max_permits=3, rate=0.001)
        out = self.decide("take", [(two, "", 1), (three, "u", 2),
                                   (two, "", 1), (two, "", 1),
                                   (three, "u", 2), (three, "v", 3)])
        self.assertEqual([(o["limit"], o["allowed"], o["remaining"]) for o in out],
                         [(2, 1, 1), (3, 1, 1), (2, 1, 0), (2, 0, 0), (3, 0, 1), (3, 1, 0)])
        # Each bucket written once, with every take of the call.
        tokens, _ = read_state(self.redis, bucket_key(three.name, "u"))
        self.assertAlmostEqual(tokens, 1, places=3)
        tokens, _ = read_state(self.redis, bucket_key(two.name))
        self.assertLess(tokens, 0.01)

    def test_bucket_all_or_nothing(self):
        a, b = Policy(max_permits=4, rate=2), Policy(max_permits=4, rate=2)
        since = self.redis.time_us()
        write_state(self.redis, bucket_key(b.name), 1, since)
        state = self.state_bytes(b)
        out = self.decide("all", [(a, "", 2), (b, "", 1), (b, "", 2)])
        self.assertEqual([o["allowed"] for o in out], [0, 0, 0], out)
        # The wait is the one for b's total (3 from 1 at 2/s: 1 s), for every item.
        self.assertEqual({o["retry_after_ms"] for o in out}, {out[0]["retry_after_ms"]})
        self.assertGreater(out[0]["retry_after_ms"], 900, out)
        self.assertLessEqual(out[0]["retry_after_ms"], 1000, out)
        self.assertIsNone(self.state_bytes(a))
        self.assertEqual(self.state_bytes(b), state)
        out = self.decide("all", [(a, "", 2), (a, "", 2)])
        self.assertEqual([(o["allowed"], o["remaining"]) for o in out], [(1, 2), (1, 0)])

    def test_bucket_peek_of_many_takes_nothing(self):
        p = Policy(max_permits=3)
        out = self.decide("peek", [(p, "", 1)] * 3)
        self.assertEqual([o["remaining"] for o in out], [3, 3, 3])
        self.assertIsNone(self.state_bytes(p))

    # ------------------------------------------------------------ settle

    def test_bucket_settle_sets_expiry_under_the_limits_now(self):
        p = Policy(max_permits=10, rate=1)
        self.assertEqual(self.take(p, key="low", permits=8)["allowed"], 1)
        self.assertLessEqual(self.pttl(p, "low"), 8000)
        now = self.redis.time_us()
        write_state(self.redis, bucket_key(p.name, "full"), 9, now - 20000000)
        slower = p.at(stamp=p.stamp + 1, rate=0.1)     # the keys expire too soon for it
        state = self.state_bytes(p, "low")
        self.assertEqual(self.settle(slower, ["low", "full", "none"]), (1, 1))
        ttl = self.pttl(p, "low")
        self.assertGreater(ttl, 75000)          # (10 - 2) / 0.1 s, less the time since
        self.assertLessEqual(ttl, 80000)
        self.assertEqual(self.state_bytes(p, "low"), state)    # the state is kept
        self.assertIsNone(self.state_bytes(p, "full"))         # full: no key
        self.assertIsNone(self.state_bytes(p, "none"))

    # ------------------------------------------------------------ the bucket index

    def blob(self, key):
        """The blob of the group list that holds (or would hold) key."""
        group, i, _ = harness.index_blob(self.redis, key)
        return self.redis.raw("LINDEX", group, i)

    def in_group(self, key):
        """Whether key's entry is in its group's list (1 or 0), where its
        hash places it."""
        return 1 if harness.in_blob(self.redis, key) else 0

    def sweep(self, group, first=0, alone=True):
        """bucket.lua "sweep" of one call: (kept, removed, next blob)."""
        out = self.redis.raw("EVALSHA", self.sha["bucket"], 1, group, "sweep", 0, first,
                             1 if alone else 0)
        return tuple(int(x) for x in struct.unpack("<ddd", out))

    def sweep_all(self, group):
        """Every call of a sweep of one list, as the prune makes them:
        (kept, removed, calls)."""
        kept = removed = first = calls = 0
        while True:
            k, r, first = self.sweep(group, first, kept == 0)
            kept, removed, calls = kept + k, removed + r, calls + 1
            if first == 0:
                return kept, removed, calls

    def test_bucket_index_holds_each_bucket_it_created_once(self):
        # Each bucket created (no state before) is named in its policy's
        # group list P{T}il:NAME, T the tag of the first slot of the key's
        # group of 64, by its entry (the key past its policy) in a blob of
        # "\n"-ended entries; not in the set of its slot; a write of an
        # existing bucket and a peek change nothing; both paths (one item,
        # many) and every layout.
        p = Policy(max_permits=10, rate=0.01)
        shared, a, b, c = (bucket_key(p.name, k) for k in ("", "a", "b", "c"))
        colocated = harness.state_key(p.name, "d", PREFIX, colocate=True)
        self.assertEqual(self.take(p, key="a")["allowed"], 1)
        self.assertEqual(self.take(p)["allowed"], 1)
        self.assertEqual([d["allowed"] for d in self.decide("take", [(p, "b", 1), (p, "c", 2)])],
                         [1, 1])
        out = self.redis.raw("EVALSHA", self.sha["bucket"], 1, colocated, "index", 0, TTL)
        write_state(self.redis, colocated, 1, self.redis.time_us())
        out = self.redis.raw("EVALSHA", self.sha["bucket"], 1, colocated, "index", 0, TTL)
        self.assertEqual(struct.unpack("<dd", out), (1, 0))
        entries = {shared: b"\2", a: b"a", b: b"b", c: b"c", colocated: b"\1d"}
        for k, entry in entries.items():
            group, got = harness.index_entry(k)
            self.assertEqual(got, entry, k)
            self.assertEqual(group, "%s{%s}il:%s" % (PREFIX, harness.index_tag(
                harness.keyslot(k) // 64 * 64), p.name))
            self.assertEqual(harness.keyslot(group), harness.keyslot(k) // 64 * 64)
            self.assertEqual(self.in_group(k), 1, k)
            self.assertEqual(harness.blob_entries(self.blob(k)).count(entry), 1, k)
            self.assertTrue(harness.indexed(self.redis, k), k)
            self.assertEqual(self.redis("EXISTS", harness.index_key(k)), 0, k)
        texts = {k: self.blob(k) for k in entries}
        self.assertEqual(self.take(p, key="a")["allowed"], 1)
        self.assertEqual([d["allowed"] for d in self.decide("take", [(p, "b", 1), (p, "c", 1)])],
                         [1, 1])
        self.peek(p, key="e")
        self.assertEqual({k: self.blob(k) for k in entries}, texts)
        self.assertIsNone(self.state_bytes(p, "e"))
        self.assertFalse(harness.indexed(self.redis, bucket_key(p.name, "e")))
        # A bucket that filled up (no key) and is made again is named once.
        self.redis("DEL", a)
        self.assertEqual(self.take(p, key="a")["allowed"], 1)
        self.assertEqual(harness.blob_entries(self.blob(a)).count(b"a"), 1)

    def test_bucket_index_loses_what_settle_finds_gone_and_index_mode_builds_and_prunes(self):
        p = Policy(max_permits=10, rate=0.01)
        a, old = bucket_key(p.name, "a"), bucket_key(p.name, "old")
        self.take(p, key="a")
        self.assertTrue(harness.indexed(self.redis, a))
        self.redis("DEL", a)                        # as if it expired full
        out = self.redis.raw("EVALSHA", self.sha["bucket"], 1, a, "settle", 1, TTL, *p.args())
        self.assertEqual(struct.unpack("<ddd", out), (0, 0, 1))
        self.assertFalse(harness.indexed(self.redis, a))
        # A bucket an older permitd wrote (no index entry): "index" adds it,
        # and takes it out again once it is gone.
        write_state(self.redis, old, 1, self.redis.time_us())
        self.redis("PEXPIRE", old, 60000)
        self.assertFalse(harness.indexed(self.redis, old))
        out = self.redis.raw("EVALSHA", self.sha["bucket"], 2, old, a, "index", 0, TTL)
        self.assertEqual(struct.unpack("<dd", out), (1, 0))
        self.assertEqual(self.in_group(old), 1)
        self.redis("DEL", old)
        out = self.redis.raw("EVALSHA", self.sha["bucket"], 1, old, "index", 0, TTL)
        self.assertEqual(struct.unpack("<dd", out), (0, 1))
        self.assertFalse(harness.indexed(self.redis, old))
        # Its blob is left empty ("\n"), the list kept (a blob's place is
        # the hashing); a sweep that finds every blob empty takes it out.
        group = harness.index_entry(old)[0]
        self.assertEqual(self.blob(old), b"\n")
        self.assertEqual(self.sweep(group, 0, alone=False), (0, 0, 0))
        self.assertEqual(self.redis("EXISTS", group), 1)
        self.assertEqual(self.sweep(group), (0, 0, 0))
        self.assertEqual(self.redis("EXISTS", group), 0)

    def test_bucket_index_moves_a_set_member_into_its_group(self):
        # A live bucket named in the set of its slot (an older permitd's
        # index, or a fallback): "index" puts it in its group's list and out
        # of the set; a dead one leaves the set.
        p = Policy(max_permits=10, rate=0.01)
        live, dead = bucket_key(p.name, "live"), bucket_key(p.name, "dead")
        write_state(self.redis, live, 1, self.redis.time_us())
        self.redis("PEXPIRE", live, 60000)
        for k in (live, dead):
            self.redis("SADD", harness.index_key(k), k)
        out = self.redis.raw("EVALSHA", self.sha["bucket"], 2, live, dead, "index", 0, TTL)
        self.assertEqual(struct.unpack("<dd", out), (1, 1))
        self.assertEqual(self.in_group(live), 1)
        for k in (live, dead):
            self.assertEqual(self.redis("SISMEMBER", harness.index_key(k), k), 0, k)

    def test_bucket_index_moves_the_hashes_of_before_into_the_lists(self):
        # A permitd of before the lists kept a group's entries as fields of
        # hashes P{T}ig:NAME:<i> ("k p" in P{T}ig:NAME): a sweep of one moves
        # its live entries into the group's list and drops the dead; a sweep
        # of the "k p" takes it out once no hash of it is left.
        p = Policy(max_permits=10, rate=0.01)
        keys = self.keys_of_group(p.name, 9, 6)
        live = [bucket_key(p.name, k) for k in keys[:4]]
        for k in live:
            write_state(self.redis, k, 1, self.redis.time_us())
            self.redis("PEXPIRE", k, 60000)
        hashes = harness.index_entry(live[0])[0].replace("}il:", "}ig:")
        self.redis("SET", hashes, "1 0")
        self.redis("HSET", hashes + ":0", keys[0], "", keys[1], "", keys[4], "")
        self.redis("HSET", hashes + ":1", keys[2], "", keys[3], "", keys[5], "")
        self.assertEqual(self.sweep(hashes), (0, 0, 0))            # its hashes are there
        self.assertEqual(self.sweep(hashes + ":0"), (2, 1, 0))
        self.assertEqual(self.sweep(hashes), (0, 0, 0))
        self.assertEqual(self.redis("EXISTS", hashes), 1)
        self.assertEqual(self.sweep(hashes + ":1"), (2, 1, 0))
        self.assertEqual(self.redis("EXISTS", hashes + ":0", hashes + ":1"), 0)
        self.assertEqual(self.sweep(hashes), (0, 0, 0))
        self.assertEqual(self.redis("EXISTS", hashes), 0)
        for k in live:
            self.assertEqual(self.in_group(k), 1, k)

    def test_bucket_index_keeps_a_key_no_list_holds_in_its_slots_set(self):
        # A key whose KEY holds a control character (the entries' markers
        # are, and "\n" ends an entry; permitd refuses such keys, a key
        # written by hand may hold one), and a key whose entry is past 128
        # bytes (it would take a blob past its size alone), are named in the
        # set of their slot; a 128-byte entry is in its group.
        p = Policy(max_permits=10, rate=0.01)
        odd = "%s{%s:a\nb}:k" % (PREFIX, p.name)
        long_key, longest = bucket_key(p.name, "x" * 129), bucket_key(p.name, "y" * 128)
        for k in (odd, long_key):
            self.assertIsNone(harness.index_entry(k))
        for k in (odd, long_key, longest):
            write_state(self.redis, k, 1, self.redis.time_us())
            self.redis("PEXPIRE", k, 60000)
        out = self.redis.raw("EVALSHA", self.sha["bucket"], 3, odd, long_key, longest, "index", 0,
                             TTL)
        self.assertEqual(struct.unpack("<dd", out), (3, 0))
        for k in (odd, long_key):
            self.assertEqual(self.redis("SISMEMBER", harness.index_key(k), k), 1, k)
        self.assertEqual(self.in_group(longest), 1)
        self.redis("DEL", odd, long_key)
        out = self.redis.raw("EVALSHA", self.sha["bucket"], 2, odd, long_key, "index", 0, TTL)
        self.assertEqual(struct.unpack("<dd", out), (0, 2))

    def test_bucket_index_falls_back_to_its_slots_set_when_the_list_refuses(self):
        # A list Redis refuses (a slot migrating away, in a cluster; here,
        # a key of another type): the bucket is named in the set of its
        # slot instead, and the decision is not failed.
        p = Policy(max_permits=10, rate=0.01)
        k = bucket_key(p.name, "refused")
        self.redis("SET", harness.index_entry(k)[0], "not a list")
        self.assertEqual(self.take(p, key="refused")["allowed"], 1)
        self.assertEqual(self.redis("SISMEMBER", harness.index_key(k), k), 1)
        self.assertTrue(harness.indexed(self.redis, k))

    def keys_of_group(self, name, group, n):
        """n keys of policy name whose buckets fall in group (of 64 slots)."""
        out, i = [], 0
        while len(out) < n:
            k = "user-%06d" % i
            if harness.keyslot(bucket_key(name, k)) // 64 == group:
                out.append(k)
            i += 1
        return out

    def test_bucket_index_splits_a_group_list_and_finds_every_entry(self):
        # 1500 buckets of one group of 64 slots, so the blobs of the group's
        # list split (linear hashing, lua/bucket.lua's top): the list grows,
        # its blobs stay near INDEX_BLOB (512 bytes), every bucket is named
        # exactly once, in the blob its hash picks; a settle of the dead
        # ones and a sweep find them all.
        p = Policy(max_permits=10, rate=0.01)
        keys = self.keys_of_group(p.name, 7, 1500)
        for first in range(0, len(keys), 100):
            answers = self.decide("take", [(p, k, 1) for k in keys[first:first + 100]])
            self.assertEqual([d["allowed"] for d in answers], [1] * len(answers))
        group = harness.index_entry(bucket_key(p.name, keys[0]))[0]
        blobs = self.redis.raw("LRANGE", group, 0, -1)
        sizes = [len(b) for b in blobs]
        self.assertGreaterEqual(len(blobs), 1500 * 12 // 512, sizes)
        self.assertLessEqual(sum(sizes) / len(sizes), 512, sizes)
        self.assertLessEqual(max(sizes), 4 * 512, sizes)
        entries = [e for b in blobs for e in harness.blob_entries(b)]
        self.assertEqual(sorted(entries), sorted(k.encode() for k in keys))
        for key in keys:
            self.assertEqual(self.in_group(bucket_key(p.name, key)), 1, key)
        # 300 gone: the settle takes them out; then 300 more, which a sweep
        # of the list (SWEEP_BLOBS blobs a call) takes out.
        gone = [bucket_key(p.name, k) for k in keys[:300]]
        self.redis("DEL", *gone)
        out = self.redis.raw("EVALSHA", self.sha["bucket"], len(gone), *(gone + ["settle", 1, TTL] +
                                                                          p.args()))
        self.assertEqual(struct.unpack("<ddd", out)[2], 300)
        swept = [bucket_key(p.name, k) for k in keys[300:600]]
        self.redis("DEL", *swept)
        self.assertEqual(self.sweep_all(group), (900, 300, (len(blobs) + 15) // 16))
        for key in keys[:600]:
            self.assertFalse(harness.indexed(self.redis, bucket_key(p.name, key)), key)
        for key in keys[600:]:
            self.assertEqual(self.in_group(bucket_key(p.name, key)), 1, key)
        self.assertEqual(self.redis("LLEN", group), len(blobs))

    def test_bucket_index_names_a_bucket_a_charge_made(self):
        # A charge (a reservation's commit above its estimate) on a full
        # bucket (no key) makes it: the bucket is indexed like any other.
        p = Policy(max_permits=10, rate=0.01)
        k = bucket_key(p.name, "charged")
        now = self.redis.time_us()
        args = ["charge", 1, TTL] + p.args() + [1, 3, now, 0]
        out = self.redis.raw("EVALSHA", self.sha["bucket"], 1, k, *args)
        self.assertEqual(ANSWER.unpack_from(out)[1], 1)
        self.assertIsNotNone(self.redis.raw("GET", k))
        self.assertEqual(self.in_group(k), 1)

    def test_bucket_settle_folds_a_state_older_than_the_newest_rate_edit(self):
        p = Policy(max_permits=100, rate=2)
        now = self.redis.time_us()
        edit = now - 1000000
        since = now - 4000000
        p.rates = "%d:0.5" % edit
        write_state(self.redis, bucket_key(p.name, "u"), 0, since)
        self.assertEqual(self.settle(p, ["u"]), (1, 0))
        tokens, t = read_state(self.redis, bucket_key(p.name, "u"))
        self.assertEqual(self.stamp_of(p, "u"), p.stamp)
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
                p = Policy(max_permits=1000, rate=2)
                now = self.redis.time_us()
                t1, t2, since = now - 1000000, now - 3000000, now - 7000000
                p.rates = "%d:4;%d:0.5" % (t1, t2)
                write_state(self.redis, bucket_key(p.name), 0, since)
                if path == "one":
                    self.assertEqual(self.take(p)["allowed"], 1)
                else:
                    out = self.decide("take", [(p, "", 1)] * 2)
                    self.assertEqual([o["allowed"] for o in out], [1, 1])
                tokens, t = read_state(self.redis, bucket_key(p.name))
                x = level(0, since, 1000, 0.5, t2)
                x = level(x, t2, 1000, 4, t1)
                self.assertEqual(tokens, level(x, t1, 1000, 2, t) - (1 if path == "one" else 2))
        # A bucket stamped after the newest edit accrues at the rate now only.
        p = Policy(max_permits=1000, rate=2)
        now = self.redis.time_us()
        p.rates = "%d:100" % (now - 5000000)
        write_state(self.redis, bucket_key(p.name), 0, now - 1000000)
        self.take(p)
        tokens, t = read_state(self.redis, bucket_key(p.name))
        self.assertEqual(tokens, level(0, now - 1000000, 1000, 2, t) - 1)

    def test_bucket_rate_history_not_written_by_sync_is_internal(self):
        for rates in ("garbage", "5:0", "1:2;5:3", "x:1"):
            with self.subTest(rates=rates):
                p = Policy(max_permits=10, rate=1, rates=rates)
                write_state(self.redis, bucket_key(p.name), 0, 0)
                self.assertEqual(self.take(p)["status"], INTERNAL)
                out = self.decide("take", [(p, "", 1)] * 2)
                self.assertEqual([o["status"] for o in out], [INTERNAL] * 2)


    # ------------------------------------------------------------ state and version stamps

    def test_bucket_state_is_24_bytes_tokens_time_stamp(self):
        # Every write, on either path, is '<ddd': the tokens, the Redis time
        # of the call, the version stamp of the call's limits, bit for bit
        # (a stamp such as id 300000 * 2^24 + version 9 stays exact).
        for path in ("one", "many"):
            with self.subTest(path=path):
                p = Policy(max_permits=10, rate=2, stamp=300000 * STAMP + 9)
                before = self.redis.time_us()
                if path == "one":
                    self.take(p, permits=3)
                else:
                    self.decide("take", [(p, "", 1), (p, "", 2)])
                after = self.redis.time_us()
                s = self.state_bytes(p)
                self.assertEqual(len(s), 24, s)
                tokens, t, stamp = STATE.unpack(s)
                self.assertEqual((tokens, stamp), (7.0, 300000 * STAMP + 9))
                self.assertEqual(t, math.floor(t))
                self.assertTrue(before <= t <= after, (before, t, after))
        # A take under a newer stamp writes that stamp: the state records
        # the newest version it was decided under.
        newer = p.at(stamp=p.stamp + 1)
        self.take(newer)
        self.assertEqual(self.stamp_of(p), newer.stamp)
        # Sizes that are no state this script wrote (neither 24 nor 16 bytes).
        for size in (8, 23, 25, 32):
            with self.subTest(size=size):
                q = Policy()
                self.redis("SET", bucket_key(q.name), b"\0" * size)
                self.assertEqual((self.take(q)["status"], self.take(q)["remaining"]),
                                 (DATA_LOSS, size))
                self.assertEqual(self.decide("take", [(q, "", 1)] * 2)[1]["status"], DATA_LOSS)
                self.assertEqual(self.state_bytes(q), b"\0" * size)

    def test_bucket_16_byte_state_reads_as_stamp_0(self):
        # A state permitd wrote before issue 19 ('<dd': tokens, time) is
        # decided under any stamp, even 0, its tokens refilled exactly, and
        # written back as 24 bytes under the call's stamp.
        for path, stamp in (("one", 0), ("one", 5), ("many", 0), ("many", STAMP + 1)):
            with self.subTest(path=path, stamp=stamp):
                p = Policy(max_permits=100, rate=3, stamp=stamp)
                since = self.redis.time_us() - 2000000
                self.redis("SET", bucket_key(p.name), OLD_STATE.pack(0.5, since))
                if path == "one":
                    d = self.take(p)
                else:
                    d = self.decide("take", [(p, "", 1)])[0]
                self.assertEqual((d["status"], d["allowed"]), (0, 1), d)
                tokens, t, written = STATE.unpack(self.state_bytes(p))
                self.assertEqual(written, stamp)
                self.assertEqual(tokens, level(0.5, since, 100, 3, t) - 1)
        # Peek reads it the same way and writes nothing.
        p = Policy(max_permits=100, rate=3, stamp=0)
        old = OLD_STATE.pack(4.25, self.redis.time_us() + 60000000)
        self.redis("SET", bucket_key(p.name), old)
        self.assertEqual(self.peek(p)["tokens_micro"], 4250000)
        self.assertEqual(self.state_bytes(p), old)

    def test_bucket_stale_call_writes_nothing_and_answers_the_stamp(self):
        # A bucket written under stamp 2^24 + 8, decided under 2^24 + 7 (an
        # instance whose copy of the policy is older): -17, `remaining` the
        # bucket's stamp, and neither the state nor its expiry changes.
        newer = STAMP + 8
        for path in ("one", "peek", "many", "all"):
            with self.subTest(path=path):
                p = Policy(max_permits=10, rate=1, stamp=STAMP + 7)
                other = Policy(max_permits=10, rate=1)
                write_state(self.redis, bucket_key(p.name), 3, self.redis.time_us() - 1000000,
                            version=newer)
                self.redis("PEXPIRE", bucket_key(p.name), 600000)
                state = self.state_bytes(p)
                want = dict(zip(FIELDS, (STALE, 0, newer, 10, 0, 0, 0, 0)))
                if path == "one":
                    self.assertEqual(self.take(p), want)
                elif path == "peek":
                    self.assertEqual(self.peek(p), want)
                elif path == "many":
                    # The stale items answer -17; the item of another bucket is decided.
                    out = self.decide("take", [(p, "", 1), (other, "", 2), (p, "", 1)])
                    self.assertEqual(out[0], want)
                    self.assertEqual(out[2], want)
                    self.assertEqual((out[1]["status"], out[1]["allowed"]), (0, 1))
                    self.assertEqual(read_state(self.redis, bucket_key(other.name))[0], 8)
                else:
                    # In "all", nothing is written for any item.
                    out = self.decide("all", [(other, "", 2), (p, "", 1)])
                    self.assertEqual(out[1], want)
                    self.assertEqual((out[0]["status"], out[0]["allowed"]), (ABORTED, 0))
                    self.assertIsNone(self.state_bytes(other))
                self.assertEqual(self.state_bytes(p), state)
                self.assertGreater(self.pttl(p), 590000)
        # The same stamp, or a newer one, decides it.
        write_state(self.redis, bucket_key(p.name), 3, self.redis.time_us(), version=newer)
        self.assertEqual(self.take(p.at(stamp=newer))["allowed"], 1)
        self.assertEqual(self.take(p.at(stamp=newer + 1))["allowed"], 1)
        self.assertEqual(self.stamp_of(p), newer + 1)

    def test_bucket_settle_leaves_a_bucket_of_a_newer_stamp(self):
        # Its writer had newer limits: settle under older ones sets nothing.
        p = Policy(max_permits=10, rate=1, stamp=STAMP + 2)
        write_state(self.redis, bucket_key(p.name, "u"), 1, self.redis.time_us(),
                    version=STAMP + 3)
        state = self.state_bytes(p, "u")
        self.assertEqual(self.settle(p.at(rate=0.01, rates="1:5"), ["u"]), (0, 0))
        self.assertEqual(self.state_bytes(p, "u"), state)
        self.assertEqual(self.pttl(p, "u"), -1)
        self.assertEqual(self.settle(p.at(stamp=STAMP + 3), ["u"]), (1, 0))
        self.assertGreater(self.pttl(p, "u"), 0)

    # ------------------------------------------------------------ sync.lua set/newest/trim

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

    def test_sync_publishes_a_change_notice_on_every_write(self):
        # "<name> <version>" on <prefix>changes after a put that writes, a
        # set, a del that deletes (version 0); nothing when nothing changed.
        name = unique("sync")
        sub = Redis()   # a subscriber: one SUBSCRIBE sent, then replies read as they come
        try:
            sub._send(("SUBSCRIBE", PREFIX + "changes"))
            self.assertEqual(sub._reply(), ["subscribe", PREFIX + "changes", 1])
            self.assertEqual(self.put(name, 3, 4, 1000), [1, 0])
            self.assertEqual(self.put(name, 3, 4, 1000), [0, 0])      # up to date: no notice
            self.assertEqual(self.sync(name, "set", "rate", "2"), [1, 1])
            self.assertEqual(self.sync(name, "del", 9000, 3), [1])
            self.assertEqual(self.sync(name, "del", 9000, 3), [0])    # nothing deleted: no notice
            self.redis("PUBLISH", PREFIX + "changes", "end")
            got = []
            while True:
                kind, channel, message = sub._reply()
                self.assertEqual((kind, channel), ("message", PREFIX + "changes"))
                if message == "end":
                    break
                got.append(message)
            # Other tests' writes publish too: keep this policy's.
            self.assertEqual([m for m in got if m.split(" ")[0] == name],
                             ["%s 4" % name, "%s 5" % name, "%s 0" % name])
        finally:
            sub.close()


if __name__ == "__main__":
    harness.main()
