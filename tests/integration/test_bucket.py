"""The token-bucket rules of DESIGN.md ("The decision (token bucket)") and
issue 2 point 3, checked end to end: HTTP -> permitd -> lua/bucket.lua in
the stack's Redis.

Time-dependent math is tested by writing a bucket's state directly (three
little-endian doubles: tokens, t in Redis TIME microseconds, and the
policy version stamp it was written under; see harness.write_state) so that
it sits in a known past, instead of waiting.
"""
import math
import os
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (decision, error_code, put_policy, read_state, state_key, state_version,  # noqa: E402
                     unique, write_state)

ONE_PER_MINUTE = 0.016666666666666666   # repr(1 / 60)
SYNC_LUA = harness.lua_script("sync").decode()


class BucketTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.redis = harness.Redis()
        # This suite checks bucket.lua's arithmetic by writing bucket states
        # by hand (write_state), which no instance can see: the deny cache
        # (issue 24, on by default) would keep answering a denial made
        # before such a write. Its own exactness is test_deny_cache.py's.
        cls.permitd = harness.Permitd(args=["--deny-cache", "0"])
        cls.http = cls.permitd.http()

    @classmethod
    def tearDownClass(cls):
        cls.http.close()
        cls.permitd.__exit__(None, None, None)
        cls.redis.close()

    def policy(self, **kw):
        name = unique("bucket")
        put_policy(self.redis, name, **kw)
        return name

    def acquire(self, name, **kw):
        return decision(self.http.acquire(name, **kw))

    def peek(self, name, **kw):
        return decision(self.http.peek(name, **kw))

    def assertError(self, reply, code, status):
        self.assertEqual((reply.status, error_code(reply)), (status, code), reply)

    # ------------------------------------------------------------ basics

    def test_basic_burst_then_denial(self):
        name = self.policy(max_permits=5, rate=1)
        for want in (4, 3, 2, 1, 0):
            d = self.acquire(name)
            self.assertEqual(d, {"allowed": True, "remaining": want, "limit": 5,
                                 "retry_after_ms": 0, "reset_after_ms": d["reset_after_ms"]})
            self.assertGreater(d["reset_after_ms"], 0)
        d = self.acquire(name)
        self.assertFalse(d["allowed"], d)
        self.assertEqual(d["limit"], 5)
        self.assertEqual(d["remaining"], 0)
        self.assertGreater(d["retry_after_ms"], 0, d)
        self.assertLessEqual(d["retry_after_ms"], 1000, d)
        self.assertGreater(d["reset_after_ms"], 0, d)
        # Five permits short at 1/s: full again in at most 5 s.
        self.assertLessEqual(d["reset_after_ms"], 5000, d)

    def test_permits(self):
        name = self.policy(max_permits=10, rate=0.001)
        # 0 means 1
        d = self.acquire(name, permits=0)
        self.assertEqual((d["allowed"], d["remaining"]), (True, 9), d)
        # absent means 1 too
        d = self.acquire(name)
        self.assertEqual((d["allowed"], d["remaining"]), (True, 8), d)
        d = self.acquire(name, permits=3)
        self.assertEqual((d["allowed"], d["remaining"]), (True, 5), d)
        # more than the bucket ever holds: an error, not a denial, and nothing taken
        r = self.http.acquire(name, permits=11)
        self.assertError(r, "out_of_range", 400)
        self.assertEqual(self.peek(name)["remaining"], 5)
        # more than is there now but not more than max: a denial taking nothing
        d = self.acquire(name, permits=6)
        self.assertFalse(d["allowed"], d)
        self.assertEqual(self.peek(name)["remaining"], 5)
        self.assertEqual(self.acquire(name, permits=5)["remaining"], 0)
        # negative: invalid_argument
        self.assertError(self.http.acquire(name, permits=-1), "invalid_argument", 400)
        # the whole bucket at once, on a full bucket
        full = self.policy(max_permits=7, rate=0.001)
        d = self.acquire(full, permits=7)
        self.assertEqual((d["allowed"], d["remaining"], d["limit"]), (True, 0, 7), d)
        r = self.http.acquire(full, permits=8)
        self.assertError(r, "out_of_range", 400)

    # ------------------------------------------------------------ exact time math

    def test_no_lost_fractional_tokens(self):
        # 3/s: one permit per 333333.33 µs, not a whole number of µs. Half a
        # second ago the bucket was empty: 1.5 permits now; taking one leaves 0.5.
        name = self.policy(max_permits=5, rate=3)
        key = state_key(name)
        t0 = self.redis.time_us() - 500000
        write_state(self.redis, key, 0, t0)
        d = self.acquire(name)
        self.assertTrue(d["allowed"], d)
        tokens, t = read_state(self.redis, key)
        # Exactly what 3/s earned from t0 to the script's own clock t, less
        # the one taken, however long the call took on a loaded machine
        # (issue 33: "under 0.6" assumed it took under 33 ms).
        self.assertAlmostEqual(tokens, min(5.0, 3 * (t - t0) / 1e6) - 1, places=6,
                               msg="fraction lost: state %r" % ((tokens, t),))
        self.assertGreater(tokens, 0.49, "fraction lost: state %r" % ((tokens, t),))
        self.assertEqual(d["remaining"], math.floor(tokens), d)
        self.assertGreaterEqual(t, t0 + 500000)
        self.assertLessEqual(t, self.redis.time_us())
        # and the fraction keeps counting: 1/6 s later there is a whole permit
        time.sleep(0.2)
        d = self.acquire(name)
        self.assertTrue(d["allowed"], (d, tokens, t))

    def test_state_is_three_doubles_read_back_bit_for_bit(self):
        # A state from the future counts as measured now (nothing accrues),
        # so taking 1 from 2.3000000000000003 must leave exactly the double
        # Python computes: no digit lost on the way in or out.
        name = self.policy(max_permits=5, rate=0.001)
        key = state_key(name)
        stored = 0.1 + 2.2
        write_state(self.redis, key, stored, self.redis.time_us() + 10000000)
        before = self.redis.time_us()
        self.assertTrue(self.acquire(name)["allowed"])
        raw = self.redis.raw("GET", key)
        self.assertEqual(len(raw), 24, raw)
        tokens, t = read_state(self.redis, key)
        self.assertEqual(tokens, stored - 1, (tokens, t))
        self.assertGreaterEqual(t, before)
        self.assertLessEqual(t, self.redis.time_us())
        self.assertEqual(state_version(self.redis, key), 1)    # put_policy: version 1, no id

    def test_a_state_written_before_versions_reads_as_version_0(self):
        # A 16-byte state (tokens, time: what permitd wrote before version
        # stamps) is read as it was, and rewritten with the version.
        name = self.policy(max_permits=5, rate=0.001)
        key = state_key(name)
        written = self.redis.time_us()
        self.redis("SET", key, struct.pack("<dd", 3.5, written))
        d = self.acquire(name)
        self.assertEqual((d["allowed"], d["remaining"]), (True, 2), d)
        self.assertEqual(len(self.redis.raw("GET", key)), 24)
        tokens, t = read_state(self.redis, key)
        self.assertAlmostEqual(tokens, 2.5 + 0.001 * (t - written) / 1e6, places=6)

    def test_never_decided_under_an_older_version(self):
        # A bucket written under version stamp 5 (by an instance that had
        # version 5) while this instance's copy says version 1 and Redis's
        # hash now says 5: the script answers "stale", permitd reloads the
        # policy and decides under version 5 (its max_permits 7).
        name = self.policy(max_permits=5, rate=0.001, colocate=1)   # all_or_nothing below
        key = state_key(name, "u", colocate=True)
        self.assertEqual(self.acquire(name, key="u")["limit"], 5)     # copy: v1
        self.redis("HSET", "permitd:{%s}:policy" % name, "max_permits", 7, "version", 5)
        write_state(self.redis, key, 4, self.redis.time_us(), version=5)
        d = self.acquire(name, key="u")
        self.assertEqual((d["allowed"], d["remaining"], d["limit"]), (True, 3, 7), d)
        self.assertEqual(state_version(self.redis, key), 5)
        # The copy was reloaded: the shared bucket decides under v5 at once.
        self.assertEqual(self.acquire(name)["limit"], 7)
        # A bucket newer than Redis's own copy (a hash rewritten by hand to
        # a lower version): no decision under the older one, an error that
        # says why, and the bucket left as it was.
        write_state(self.redis, key, 4, self.redis.time_us(), version=9)
        r = self.http.acquire(name, key="u")
        self.assertError(r, "internal", 500)
        self.assertIn("version stamp 9", r.json()["message"])
        self.assertEqual(state_version(self.redis, key), 9)
        self.assertEqual(read_state(self.redis, key)[0], 4)
        # The batch path, all_or_nothing: nothing is taken from either
        # bucket on the stale answer; the retry decides both under v6.
        self.redis("HSET", "permitd:{%s}:policy" % name, "max_permits", 8, "version", 6)
        write_state(self.redis, key, 4, self.redis.time_us(), version=6)
        self.redis("DEL", state_key(name))
        r = self.http.rpc_json("AcquireBatch", {"allOrNothing": True, "requests": [
            {"bucket": name, "app": "app"}, {"bucket": name, "app": "app", "key": "u"}]})
        self.assertEqual(r.status, 200, r)
        got = [(x["response"]["allowed"], x["response"]["remaining"], x["response"]["limit"])
               for x in r.json()["results"]]
        self.assertEqual(got, [(True, "7", "8"), (True, "3", "8")], r.json())
        self.assertEqual(state_version(self.redis, state_key(name)), 6)

    def test_foreign_state_fails_naming_the_key(self):
        # A state lua/bucket.lua did not write (text, a truncated value) is
        # not guessed at: the call fails, the log names the key, and the key
        # is left for the operator to look at.
        name = self.policy(max_permits=5, rate=1)
        key = state_key(name)
        for junk in (b"2.5 1763750000000000", b"\x00" * 8):
            self.redis("SET", key, junk)
            r = self.http.acquire(name)
            self.assertError(r, "internal", 500)
            self.assertEqual(self.redis.raw("GET", key), junk)
            self.assertIn('key="%s" bytes=%d expected=24' % (key, len(junk)),
                          self.permitd.output())
        self.redis("DEL", key)
        self.assertTrue(self.acquire(name)["allowed"])

    def test_one_per_minute_is_exact(self):
        name = self.policy(max_permits=1, rate=ONE_PER_MINUTE)
        key = state_key(name)
        self.assertTrue(self.acquire(name)["allowed"])
        d = self.acquire(name)
        self.assertFalse(d["allowed"], d)
        self.assertGreaterEqual(d["retry_after_ms"], 59000, d)
        self.assertLessEqual(d["retry_after_ms"], 60000, d)
        # emptied exactly 60 s ago: one permit again
        write_state(self.redis, key, 0, self.redis.time_us() - 60000000)
        p = self.peek(name)
        self.assertEqual(p["remaining"], 1, p)
        d = self.acquire(name)
        self.assertTrue(d["allowed"], d)
        # emptied 59.5 s ago: not yet, and about half a second to wait
        write_state(self.redis, key, 0, self.redis.time_us() - 59500000)
        d = self.acquire(name)
        self.assertFalse(d["allowed"], d)
        self.assertGreater(d["retry_after_ms"], 0, d)
        self.assertLessEqual(d["retry_after_ms"], 500, d)
        self.assertEqual(self.peek(name)["remaining"], 0)

    def test_waiting_retry_after_succeeds(self):
        # rate 2/s: interval 500000 µs; rate 3/s: 333333.3 µs (a fraction of a
        # µs, so a wait rounded down would fall just short).
        for rate, rounds in ((2, 1), (3, 4)):
            for _ in range(rounds):
                name = self.policy(max_permits=1, rate=rate)
                self.assertTrue(self.acquire(name)["allowed"])
                t_taken = read_state(self.redis, state_key(name))[1]
                before = self.redis.time_us()
                d = self.acquire(name)
                after = self.redis.time_us()
                self.assertFalse(d["allowed"], d)
                r = d["retry_after_ms"]
                self.assertGreater(r, 0, d)
                self.assertLessEqual(r, math.ceil(1000 / rate), d)
                # The bucket holds a permit again at t_taken + 1e6/rate. The
                # script ran between before and after, so a wait rounded up
                # reaches that point even if it ran at `after`, and a minimal
                # one falls short of it one ms earlier even if it ran at `before`.
                ready = t_taken + 1e6 / rate
                self.assertGreaterEqual(after + r * 1000, ready, (rate, d, t_taken, before, after))
                self.assertLess(before + (r - 1) * 1000, ready, (rate, d, t_taken, before, after))
                time.sleep(r / 1000.0)
                d2 = self.acquire(name)
                self.assertTrue(d2["allowed"], "waited retry_after_ms=%d at rate %s, still denied: %r"
                                % (r, rate, d2))

    def test_denial_consumes_nothing(self):
        name = self.policy(max_permits=3, rate=0.01)
        key = state_key(name)
        for _ in range(3):
            self.assertTrue(self.acquire(name)["allowed"])
        before = self.redis.raw("GET", key)
        self.assertIsNotNone(before)
        for _ in range(20):
            d = self.acquire(name)
            self.assertFalse(d["allowed"], d)
        self.assertEqual(self.redis.raw("GET", key), before)
        # a partial request (more than is there) takes nothing either
        name = self.policy(max_permits=5, rate=0.01)
        key = state_key(name)
        self.assertTrue(self.acquire(name, permits=4)["allowed"])
        before = self.redis.raw("GET", key)
        for _ in range(5):
            self.assertFalse(self.acquire(name, permits=2)["allowed"])
        self.assertEqual(self.redis.raw("GET", key), before)
        self.assertTrue(self.acquire(name, permits=1)["allowed"])

    # ------------------------------------------------------------ expiry

    def test_state_expires_when_full(self):
        name = self.policy(max_permits=3, rate=1)
        key = state_key(name)
        self.assertIsNone(self.redis.raw("GET", key))
        d = self.acquire(name)
        pttl = self.redis("PTTL", key)
        self.assertTrue(d["allowed"], d)
        # one permit short at 1/s: full in exactly 1 s
        self.assertGreaterEqual(d["reset_after_ms"], 990, d)
        self.assertLessEqual(d["reset_after_ms"], 1000, d)
        self.assertGreater(pttl, 0)
        self.assertLessEqual(pttl, 1000)
        self.assertLessEqual(pttl, d["reset_after_ms"])
        # The key expires when the bucket is full again, on the Redis clock
        # the script measured with (its state's time + the missing permit's
        # second), not a wall-clock wait that a loaded machine stretches
        # (issue 33: "within 50 ms of the answer" failed under load).
        tokens, t_us = read_state(self.redis, key)
        full_ms = (t_us + (3 - tokens) * 1000000) / 1000.0
        expire_ms = self.redis("PEXPIRETIME", key)
        self.assertLessEqual(abs(expire_ms - full_ms), 1, (expire_ms, full_ms, tokens, t_us))
        harness.wait_for("the state key gone", lambda: not self.redis("EXISTS", key), 30)
        p = self.peek(name)
        self.assertEqual((p["remaining"], p["limit"], p["reset_after_ms"]), (3, 3, 0), p)
        self.assertEqual(self.redis("EXISTS", key), 0)

    def test_expiry_of_a_bigger_debt(self):
        # 2 of 4 taken at 0.5/s: full in 4 s, and the TTL says so.
        name = self.policy(max_permits=4, rate=0.5)
        key = state_key(name)
        d = self.acquire(name, permits=2)
        pttl = self.redis("PTTL", key)
        self.assertEqual(d["reset_after_ms"], 4000, d)
        self.assertGreater(pttl, 3900)
        self.assertLessEqual(pttl, 4000)

    # ------------------------------------------------------------ long idle

    def test_long_idle_is_exact(self):
        name = self.policy(max_permits=10, rate=1)
        key = state_key(name)
        write_state(self.redis, key, 0, 1)      # empty, 1 µs after the epoch
        p = self.peek(name)
        self.assertEqual((p["remaining"], p["limit"], p["reset_after_ms"]), (10, 10, 0), p)
        d = self.acquire(name)
        self.assertEqual((d["allowed"], d["remaining"]), (True, 9), d)
        # a huge bucket that fills very slowly stays exact
        big = self.policy(max_permits=1000000000000, rate=0.000001)
        d = self.acquire(big)
        self.assertEqual((d["allowed"], d["remaining"], d["limit"]),
                         (True, 999999999999, 1000000000000), d)
        self.assertIn(d["reset_after_ms"], (1000000000, 1000000001), d)   # 1 permit at 1e-6/s
        # emptied: a million million seconds to fill, still an exact integer
        # TTL for Redis (PX) and in the reply
        d = self.acquire(big, permits=999999999999)
        self.assertEqual((d["allowed"], d["remaining"]), (True, 0), d)
        self.assertGreater(d["reset_after_ms"], 10 ** 13, d)
        self.assertGreater(self.redis("PTTL", state_key(big)), 10 ** 13)
        d = self.acquire(big)
        self.assertFalse(d["allowed"], d)
        self.assertGreater(d["retry_after_ms"], 999000000, d)
        self.assertLessEqual(d["retry_after_ms"], 1000000000, d)
        self.assertGreater(d["reset_after_ms"], 10 ** 13, d)
        # and a fast one idle since the epoch
        fast = self.policy(max_permits=3, rate=1000000)
        write_state(self.redis, state_key(fast), 0, 1)
        self.assertEqual(self.peek(fast)["remaining"], 3)

    def test_state_from_the_future_does_not_freeze_the_bucket(self):
        # Redis TIME can step back (failover to a replica, NTP). A state
        # stamped 10 s ahead of the clock must not hold the bucket empty for
        # those 10 s plus the refill, nor make the script spin.
        name = self.policy(max_permits=1, rate=2)
        key = state_key(name)
        write_state(self.redis, key, 0, self.redis.time_us() + 10000000)
        d = self.acquire(name)      # a 200: a script that spun would not answer
        self.assertFalse(d["allowed"], d)
        self.assertLessEqual(d["retry_after_ms"], 500, d)
        self.assertEqual(self.redis("PING"), "PONG")    # and Redis is not held (BUSY)
        time.sleep(d["retry_after_ms"] / 1000.0)
        self.assertTrue(self.acquire(name)["allowed"])

    def test_huge_waits_do_not_hang_redis(self):
        # Waits beyond 2^53 us (285 years) cannot be counted up one
        # microsecond at a time in doubles (wait + 1 == wait). These numbers
        # hit that case for most clock values (found by simulating the
        # script's arithmetic); a script that spins holds Redis for good.
        name = self.policy(max_permits=1000000000000, rate=5.5)
        key = state_key(name)
        try:
            for i in range(10):
                write_state(self.redis, key, 0, self.redis.time_us() - 300000 * i - 1234)
                r = self.http.acquire(name, permits=944942105965)
                d = decision(r)     # a 200: a script that spun would not answer
                self.assertFalse(d["allowed"], d)
                self.assertGreater(d["retry_after_ms"], 10 ** 13, d)
                self.assertGreater(d["reset_after_ms"], 10 ** 13, d)
                self.assertEqual(self.redis("PING"), "PONG")
        finally:
            try:
                self.redis("PING")
            except harness.RedisError as e:
                if "BUSY" in str(e):
                    self.redis("SCRIPT", "KILL")
                raise

    # ------------------------------------------------------------ apps

    def test_apps_membership_is_exact(self):
        name = self.policy(apps="app1,app10", max_permits=100, rate=1)
        for app in ("app1", "app10"):
            d = self.acquire(name, app=app)
            self.assertTrue(d["allowed"], (app, d))
        # Not a substring, not a Lua pattern ("app." would match "app1").
        for app in ("app", "pp1", "app10x", "xapp1", "app.", "app-", "app1.", "APP1"):
            r = self.http.acquire(name, app=app)
            self.assertError(r, "permission_denied", 403)
            r = self.http.peek(name, app=app)
            self.assertError(r, "permission_denied", 403)
        # A name with a comma cannot be an app: never let in (the name check
        # refuses it first: invalid_argument; the script would say
        # permission_denied).
        for app in ("app1,app10", "app1,", ",app1"):
            r = self.http.acquire(name, app=app)
            self.assertIn(r.status, (400, 403), (app, r))
            self.assertIn(error_code(r), ("permission_denied", "invalid_argument"), (app, r))
        star = self.policy(apps="*", max_permits=100, rate=1)
        for app in ("app", "anything", "x.y-z_1"):
            self.assertTrue(self.acquire(star, app=app)["allowed"], app)
        mixed = self.policy(apps="x,*", max_permits=100, rate=1)
        for app in ("x", "y", "app"):
            self.assertTrue(self.acquire(mixed, app=app)["allowed"], app)
        # "*" is only special as a whole entry
        literal = self.policy(apps="a*", max_permits=100, rate=1)
        self.assertError(self.http.acquire(literal, app="ab"), "permission_denied", 403)

    def test_not_found_and_disabled(self):
        self.assertError(self.http.acquire(unique("missing")), "not_found", 404)
        self.assertError(self.http.peek(unique("missing")), "not_found", 404)
        name = self.policy(enabled=0)
        self.assertError(self.http.acquire(name), "failed_precondition", 400)

    # ------------------------------------------------------------ keys

    def test_keys_are_independent_buckets(self):
        name = self.policy(max_permits=2, rate=0.001)
        for _ in range(2):
            self.assertTrue(self.acquire(name, key="user-1")["allowed"])
        self.assertFalse(self.acquire(name, key="user-1")["allowed"])
        d = self.acquire(name, key="user-2")
        self.assertEqual((d["allowed"], d["remaining"]), (True, 1), d)
        self.assertEqual(self.peek(name)["remaining"], 2)        # the shared bucket
        self.assertEqual(self.peek(name, key="user-1")["remaining"], 0)
        self.assertEqual(self.peek(name, key="user-2")["remaining"], 1)
        d = self.acquire(name)
        self.assertEqual((d["allowed"], d["remaining"]), (True, 1), d)

        # The layout (docs/redis.md: Redis layout): the policy hash and the shared
        # bucket in the policy's slot, each keyed bucket in a slot of its own
        # (its tag holds the key).
        pfx = "permitd:{%s}:" % name
        u1, u2 = "permitd:{%s:user-1}:k" % name, "permitd:{%s:user-2}:k" % name
        self.assertEqual(state_key(name, "user-1"), u1)
        keys = set(self.redis("KEYS", "permitd:{%s[:}]*" % name))
        self.assertEqual(keys, {pfx + "policy", pfx + "b", u1, u2})
        self.assertEqual(harness.hash_tag(pfx + "b"), name)
        self.assertEqual(harness.hash_tag(u1), name + ":user-1")
        # (0.001/s accrues a little between the calls)
        self.assertAlmostEqual(read_state(self.redis, u1)[0], 0, delta=0.01)
        self.assertAlmostEqual(read_state(self.redis, u2)[0], 1, delta=0.01)
        self.assertAlmostEqual(read_state(self.redis, pfx + "b")[0], 1, delta=0.01)

    def test_key_with_braces_is_its_own_bucket_deterministically(self):
        # A keyed bucket's hash tag holds the key (P{NAME:KEY}:k): braces in
        # the key cannot reach another policy's bucket; a '}' ends the tag
        # early, the same way every time. With colocate, the tag stays the
        # policy's (P{NAME}:k:KEY).
        name = self.policy(max_permits=2, rate=0.001)
        for key, tag in (("{other}", name + ":{other"), ("a}b", name + ":a"), ("u", name + ":u")):
            self.assertTrue(self.acquire(name, key=key)["allowed"])
            k = state_key(name, key)
            self.assertEqual(k, "permitd:{%s:%s}:k" % (name, key))
            self.assertIsNotNone(self.redis("GET", k), key)
            self.assertEqual(harness.hash_tag(k), tag)
        self.assertEqual(self.redis("EXISTS", "permitd:{other}:b"), 0)
        together = self.policy(max_permits=2, rate=0.001, colocate=1)
        self.assertTrue(self.acquire(together, key="{other}")["allowed"])
        k = state_key(together, "{other}", colocate=True)
        self.assertEqual(k, "permitd:{%s}:k:{other}" % together)
        self.assertIsNotNone(self.redis("GET", k))
        self.assertEqual(harness.hash_tag(k), together)

    # ------------------------------------------------------------ peek

    def test_peek_takes_nothing(self):
        name = self.policy(max_permits=5, rate=0.001)
        key = state_key(name)
        for _ in range(10):
            p = self.peek(name)
            self.assertEqual((p["remaining"], p["limit"], p["reset_after_ms"]), (5, 5, 0), p)
        self.assertEqual(self.redis("EXISTS", key), 0)
        self.assertTrue(self.acquire(name)["allowed"])
        before = self.redis.raw("GET", key)
        for _ in range(10):
            p = self.peek(name)
            self.assertEqual((p["remaining"], p["limit"]), (4, 5), p)
            self.assertGreater(p["reset_after_ms"], 0, p)
        self.assertEqual(self.redis.raw("GET", key), before)
        d = self.acquire(name)
        self.assertEqual(d["remaining"], 3, d)

    def test_lowered_limit_clamps_tokens(self):
        name = self.policy(max_permits=10, rate=0.001)
        key = state_key(name)
        write_state(self.redis, key, 5, self.redis.time_us())
        self.assertEqual(self.peek(name)["remaining"], 5)
        put_policy(self.redis, name, max_permits=2, rate=0.001)
        p = self.peek(name)
        self.assertEqual((p["remaining"], p["limit"]), (2, 2), p)
        d = self.acquire(name)
        self.assertEqual((d["allowed"], d["remaining"], d["limit"]), (True, 1, 2), d)
        d = self.acquire(name)
        self.assertEqual((d["allowed"], d["remaining"]), (True, 0), d)
        self.assertFalse(self.acquire(name)["allowed"])

    # ------------------------------------------------------------ rate edits

    def edit(self, name, **fields):
        """A hand edit of a policy hash, as docs/redis.md ("Redis layout") says to
        make one: through lua/sync.lua "set", which stamps a rate edit."""
        args = []
        for k, v in fields.items():
            args += [k, v]
        answer = self.redis("EVAL", SYNC_LUA, 1, "permitd:{%s}:policy" % name, "set", *args)
        time.sleep(0.05)    # its change notice reaches permitd (in ms: test_notice.py)
        return answer

    def edits(self, name):
        """The policy's rate history, oldest first: [(edit time us, rate before)]."""
        rates = self.redis("HGET", "permitd:{%s}:policy" % name, "rates") or ""
        return [(int(t), float(r)) for t, r in
                (e.split(":") for e in reversed(rates.split(";")) if e)]

    @staticmethod
    def earned(stored, since, edits, rate, at, max_permits):
        """Tokens at `at` of a bucket that held `stored` at `since`: each rate
        for the time it was in force (the rate before each edit up to it,
        `rate` after the last), capped at max_permits."""
        x, t = stored, since
        for edit_us, before in edits:
            if edit_us > t:
                x, t = min(max_permits, x + (edit_us - t) * before / 1e6), edit_us
        return min(max_permits, x + (at - t) * rate / 1e6)

    def test_a_rate_edit_reprices_nothing_earned(self):
        # Max 100 at 1/s, emptied 3 s ago (it holds 3), raised to 50/s: 3
        # and then 50 a second, not 100 at once. 10/s, emptied 3 s ago (it
        # holds 30), cut to 0.1/s: 30 and then 0.1 a second, not 0.3. On
        # the shared bucket and a keyed one, for Acquire, Peek and a batch
        # (bucket.lua's many-item path).
        for old, new in ((1, 50), (10, 0.1)):
            name = self.policy(max_permits=100, rate=old)
            since = self.redis.time_us() - 3000000
            for key in ("", "u"):
                write_state(self.redis, state_key(name, key), 0, since)
            self.assertEqual(self.edit(name, rate=new), [1, 1])
            edits = self.edits(name)
            self.assertEqual(len(edits), 1, edits)
            self.assertEqual(edits[0][1], old)
            self.assertGreaterEqual(edits[0][0], since + 3000000)
            self.assertLessEqual(edits[0][0], self.redis.time_us())
            for key in ("", "u"):
                with self.subTest(rate=(old, new), key=key):
                    before = self.redis.time_us()
                    p = self.peek(name, key=key)
                    lo = self.earned(0, since, edits, new, before, 100)
                    hi = self.earned(0, since, edits, new, self.redis.time_us(), 100)
                    self.assertGreaterEqual(p["remaining"], math.floor(lo), (p, lo, hi))
                    self.assertLessEqual(p["remaining"], math.floor(hi), (p, lo, hi))
                    self.assertLess(p["remaining"], 40, p)      # neither 100 nor 0
                    self.assertTrue(self.acquire(name, key=key)["allowed"])
                    tokens, t = read_state(self.redis, state_key(name, key))
                    want = self.earned(0, since, edits, new, t, 100) - 1
                    self.assertAlmostEqual(tokens, want, places=6)
            # The batch path: a bucket idle across the edit, read by two items.
            write_state(self.redis, state_key(name, "b"), 0, since)
            r = self.http.rpc_json("AcquireBatch", {"requests": [
                {"bucket": name, "app": "app", "key": "b"},
                {"bucket": name, "app": "app", "key": "b"}]})
            self.assertEqual(r.status, 200, r)
            tokens, t = read_state(self.redis, state_key(name, "b"))
            self.assertAlmostEqual(tokens, self.earned(0, since, edits, new, t, 100) - 2, places=6)

    def test_several_rate_edits_while_a_bucket_idles(self):
        # 1/s until edit 1, 20/s until edit 2, 0.5/s until edit 3, 0.25/s after:
        # each rate for the time it was in force, through every entry of
        # the history. A bucket that fills on the way stays full (max 50).
        name = self.policy(max_permits=1000, rate=1)
        full = self.policy(max_permits=50, rate=1)
        since = self.redis.time_us() - 2000000
        write_state(self.redis, state_key(name, "u"), 0, since)
        write_state(self.redis, state_key(full, "u"), 0, since)
        for rate in (20, 0.5, 0.25):
            time.sleep(0.3)
            self.assertEqual(self.edit(name, rate=rate)[0], 1)
            self.assertEqual(self.edit(full, rate=rate * 100)[0], 1)
        edits = self.edits(name)
        self.assertEqual([r for _, r in edits], [1, 20, 0.5], edits)
        d = self.acquire(name, key="u", permits=5)
        self.assertTrue(d["allowed"], d)      # ~2 + 6 + 0.15: the whole gap at 0.25/s is < 1
        tokens, t = read_state(self.redis, state_key(name, "u"))
        self.assertAlmostEqual(tokens, self.earned(0, since, edits, 0.25, t, 1000) - 5, places=6)
        self.assertEqual(self.peek(full, key="u")["remaining"], 50)
        # max_permits edits still clamp. The write drops the history no
        # bucket can need any more: at max 5, an empty bucket stamped before
        # edit 1 earned 6 at 20/s by edit 2: full, so edit 1 goes; one
        # stamped before edit 2 earned ~0.15 + a little since: edit 2 stays.
        self.assertEqual(self.edit(name, max_permits=5), [1, 1])
        self.assertEqual(self.edits(name), edits[1:])
        # permitd answers with the edit once its change notice is read (in a
        # cluster the limits come from its copy): waited for, not assumed
        # within edit()'s 50 ms (a loaded run peeked 13 of the old 1000).
        p = harness.wait_for("the max_permits edit in force", lambda: (
            lambda d: d if d["limit"] == 5 else None)(self.peek(name, key="u")), 30)
        self.assertLessEqual(p["remaining"], 5)

    def test_a_hand_edit_names_a_bad_value(self):
        name = self.policy(max_permits=10, rate=1)
        for field, value in (("rate", "0"), ("rate", "fast"), ("max_permits", "1.5"),
                             ("rates", "1:2")):
            with self.assertRaises(harness.RedisError) as e:
                self.edit(name, **{field: value})
            self.assertIn(field, str(e.exception))
            if field != "rates":
                self.assertIn('"%s"' % value, str(e.exception))
        self.assertEqual(self.redis("HGET", "permitd:{%s}:policy" % name, "rate"), "1")

    # ------------------------------------------------------------ the bound

    def test_admitted_within_max_plus_rate_times_t(self):
        name = self.policy(max_permits=10, rate=20)
        res = harness.hammer([self.permitd.port], name, threads=1, seconds=2.0)
        self.assertEqual(res["errors"], [])
        bound = 10 + 20 * res["elapsed"]
        msg = "admitted %d in %.3f s, bound %.1f" % (res["allowed"], res["elapsed"], bound)
        self.assertLessEqual(res["allowed"], bound + 1, msg)
        # It refilled (more than the burst of 10). Not "at least 90% of the
        # bound": a caller that stalls past a full bucket (0.5 s at 20/s: a
        # loaded machine, issue 33) loses what the cap drops, by design; the
        # exact refill is test_no_lost_fractional_tokens's.
        self.assertGreater(res["allowed"], 10, msg)
        self.assertGreater(res["denied"], 0, msg)
        print(msg)


if __name__ == "__main__":
    harness.main()
