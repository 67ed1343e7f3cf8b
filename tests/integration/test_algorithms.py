"""The algorithms of issue 20 through permitd: a policy's `algorithm` picks
its script (lua/<algorithm>.lua), every one answering Acquire's fields in
its own sense, and every Acquire may carry a request_id.

- fixed_window across two permitd instances on one Redis (or the Redis
  Cluster: cluster_algorithms): admitted per window <= max_permits, the
  windows aligned to the epoch (duration) or to the UTC calendar (minute);
- retry_after_ms of a denial: waiting it, the same request succeeds;
- request_id: a retry answers what the first call answered, flagged
  `replayed`, and takes nothing (a token bucket, a fixed window, a batch);
- Release and Renew on the wire: failed_precondition naming the algorithm
  of a policy that holds no leases, invalid_argument naming a bad lease_id
  or request_id;
- concurrency (when lua/concurrency.lua is in the tree): a lease id per
  allowed Acquire, never more than max_permits held, Release frees a slot
  and is idempotent, Renew of a lease not held says so;
- exactness through two permitd instances, every allowed take recorded
  with the Redis TIME read just before and after it (as
  test_algorithm_scripts.py, so no slack hides or fakes a violation):
  sliding_log at most max_permits in EVERY interval of length window;
  sliding_window each aligned window at most max_permits and any interval
  at most 2 max_permits - 1 (its documented bound); concurrency never more
  than max_permits surely held, an expired lease freeing its slot on time,
  Release idempotent;
- AcquireBatch, all_or_nothing and Peek for every algorithm;
- the admin API (AlgorithmAdminTest, with MariaDB and a login):
  ResetBucket of a bucket of each algorithm, keyed (both layouts) or shared;
  GetBucket's view in each algorithm's terms: the window's reset, the log's
  entries and their ages, the leases held (never a whole lease id).

Time: the analysis reads the machine's clock, which is the clock Redis
TIME reads on this one machine (permitd itself never reads it for a
decision); windows are long against a request's latency, so each allowed
take is put in its window without doubt.
"""
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_admin  # noqa: E402
from harness import Permitd, Redis, decision, error_code, put_policy, unique  # noqa: E402
from test_admin import num  # noqa: E402

HAVE_CONCURRENCY = os.path.exists(os.path.join(harness.SOURCE_DIR, "lua", "concurrency.lua"))


def now_ms():
    return time.time() * 1000.0


class AlgorithmsTest(unittest.TestCase):

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

    def policy(self, prefix, max_permits, **fields):
        name = unique(prefix)
        if fields.get("algorithm", "token_bucket") != "token_bucket":
            fields.setdefault("rate", "")
        put_policy(self.redis, name, max_permits=max_permits, **fields)
        return name

    # ------------------------------------------------------------ fixed window

    def test_fixed_window_two_instances_admit_at_most_max_per_window(self):
        window, most = 1000, 7
        name = self.policy("fw", most, algorithm="fixed_window", window_ms=window)
        per_window, lock, errors = {}, threading.Lock(), []
        stop = time.time() + 3.5

        def run(port):
            h = harness.Http(port)
            try:
                while time.time() < stop:
                    t = now_ms()
                    r = h.acquire(name)
                    if r.status != 200:
                        errors.append(r.body)
                        return
                    d = decision(r)
                    if d["allowed"]:
                        # the window ends at t + reset_after_ms (rounded up),
                        # a multiple of `window` counted from the epoch
                        end = round((t + d["reset_after_ms"]) / window)
                        with lock:
                            per_window[end] = per_window.get(end, 0) + 1
                    elif d["retry_after_ms"] > window:
                        errors.append("retry_after_ms %d beyond the window" % d["retry_after_ms"])
                        return
            finally:
                h.close()
        threads = [threading.Thread(target=run, args=(p,))
                   for p in (self.a.port, self.b.port) * 3]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        msg = "admitted per window (by its end, in units of %d ms): %s" % (window, per_window)
        print("\n" + msg, file=sys.stderr)
        self.assertGreaterEqual(len(per_window), 3, msg)
        for end, n in per_window.items():
            self.assertLessEqual(n, most, msg)
        # windows wholly inside the run were filled: the limit is reached, not merely kept
        full = [n for end, n in sorted(per_window.items())[1:-1]]
        self.assertTrue(full and all(n == most for n in full), msg)

    def test_fixed_window_aligned_to_the_epoch_and_to_the_calendar_minute(self):
        h = self.a.http()
        try:
            for fields, unit in [({"window_ms": 2000}, 2000), ({"calendar": "minute"}, 60000)]:
                name = self.policy("fwa", 3, algorithm="fixed_window", **fields)
                t0 = now_ms()
                r = h.acquire(name)
                t1 = now_ms()
                d = decision(r)
                self.assertTrue(d["allowed"], d)
                self.assertEqual(d["remaining"], 2, d)
                # the window's end, t + reset_after_ms (rounded up), is a
                # multiple of the unit since the epoch
                lo, hi = t0 + d["reset_after_ms"] - 1, t1 + d["reset_after_ms"] + 1
                k = -(-lo // unit)
                self.assertLessEqual(k * unit, hi, (fields, d, t0, t1))
                self.assertLessEqual(d["reset_after_ms"], unit, d)
                self.assertEqual(r.headers.get("ratelimit-policy"),
                                 '"%s";q=3;w=%d' % (name, unit // 1000))
        finally:
            h.close()

    def test_fixed_window_waiting_retry_after_then_succeeds(self):
        name = self.policy("fwr", 2, algorithm="fixed_window", window_ms=800)
        h = self.a.http()
        try:
            taken = 0
            while True:
                d = decision(h.acquire(name))
                if not d["allowed"]:
                    break
                taken += 1
            self.assertLessEqual(taken, 2)
            self.assertGreater(d["retry_after_ms"], 0, d)
            self.assertLessEqual(d["retry_after_ms"], 800, d)
            self.assertEqual(d["remaining"], 0, d)
            time.sleep(d["retry_after_ms"] / 1000.0)
            again = decision(self.b.http().acquire(name, permits=2))
            self.assertTrue(again["allowed"], again)
        finally:
            h.close()

    # ------------------------------------------------------------ exactness, two instances

    def timed_run(self, seconds, fn, threads_per_instance=2):
        """Runs fn(http, redis, deadline) on threads_per_instance threads per
        permitd instance at once, each with its own connections; returns what
        they returned, joined."""
        out, errors, lock = [], [], threading.Lock()
        deadline = time.time() + seconds

        def run(port):
            h, r = harness.Http(port), Redis()
            try:
                got = fn(h, r, deadline)
                with lock:
                    out.extend(got)
            except Exception as e:      # reported below
                errors.append(e)
            finally:
                h.close()
                r.close()
        threads = [threading.Thread(target=run, args=(p,))
                   for p in (self.a.port, self.b.port) * threads_per_instance]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return out

    def hammer(self, name, seconds):
        """Acquires of 1 permit on both instances as fast as they come for
        `seconds`: the allowed ones as sorted (before, after) Redis times
        (the script's clock read lies between), and how many were denied."""
        def loop(h, r, deadline):
            got = []
            while time.time() < deadline:
                before = r.time_us()
                d = decision(h.acquire(name))
                after = r.time_us()
                got.append((before, after, d["allowed"]))
                time.sleep(0.002)
            return got
        calls = self.timed_run(seconds, loop)
        return sorted((b, a) for b, a, ok in calls if ok), sum(1 for c in calls if not c[2])

    def assert_no_interval_over(self, takes, length_us, limit):
        """No interval [s, s + length_us) surely holds more than `limit`
        takes (takes: (before, after) bounds of their Redis time; a set
        surely lies in such an interval when its latest `after` is below
        the earliest `before` + length_us). Checked from every take's
        `before` as the start: every interval, not only aligned ones."""
        worst = 0
        for b0, _ in takes:
            inside = sum(1 for b, a in takes if b >= b0 and a < b0 + length_us)
            worst = max(worst, inside)
            self.assertLessEqual(inside, limit, "%d takes within %d us from %d (limit %d)"
                                 % (inside, length_us, b0, limit))
        return worst

    def test_sliding_log_exact_in_every_interval_through_two_instances(self):
        most, window = 5, 300
        name = self.policy("sl2", most, algorithm="sliding_log", window_ms=window)
        allowed, denied = self.hammer(name, 2.5)
        worst = self.assert_no_interval_over(allowed, window * 1000, most)
        print("\nsliding_log through two permitd: %d admitted, %d denied, at most %d in any "
              "%d ms" % (len(allowed), denied, worst, window), file=sys.stderr)
        self.assertGreater(len(allowed), 25)        # not vacuous: the log was kept full
        self.assertGreater(denied, 25)
        self.assertEqual(worst, most)

    def test_sliding_window_bound_through_two_instances(self):
        most, window = 5, 300
        w = window * 1000
        name = self.policy("sw2", most, algorithm="sliding_window", window_ms=window)
        allowed, denied = self.hammer(name, 2.5)
        per_window = {}
        for b, a in allowed:
            if b // w == a // w:                    # surely in that aligned window
                per_window[b // w] = per_window.get(b // w, 0) + 1
        self.assertLessEqual(max(per_window.values()), most, per_window)
        worst = self.assert_no_interval_over(allowed, w, 2 * most - 1)
        print("\nsliding_window through two permitd: %d admitted, %d denied, at most %d in "
              "any %d ms (bound %d)" % (len(allowed), denied, worst, window, 2 * most - 1),
              file=sys.stderr)
        self.assertGreater(len(allowed), 25)
        self.assertGreater(denied, 25)

    @unittest.skipUnless(HAVE_CONCURRENCY, "lua/concurrency.lua is not in this tree yet")
    def test_concurrency_never_more_than_max_held_through_two_instances(self):
        most, ttl = 3, 300
        name = self.policy("cc2", most, algorithm="concurrency", lease_ms=ttl)

        def loop(h, r, deadline):
            held, n = [], 0
            while time.time() < deadline:
                b = r.time_us()
                m = h.rpc_json("Acquire", {"bucket": name, "app": "app"}).json()
                af = r.time_us()
                if not m.get("allowed"):
                    time.sleep(0.002)
                    continue
                n += 1
                time.sleep((n % 5) * 0.01)
                if n % 4 == 0:
                    held.append((af, b + ttl * 1000))   # left to expire
                    continue
                rb = r.time_us()
                x = h.rpc_json("Release", {"bucket": name, "app": "app",
                                           "leaseId": m["leaseId"]}).json()
                # surely held from its grant to the release (or to its
                # earliest expiry, when a slow machine let it expire first)
                held.append((af, rb if x.get("released") else b + ttl * 1000))
            return held
        held = self.timed_run(2.5, loop)
        events = sorted([(s, 1) for s, e in held if e > s] + [(e, -1) for s, e in held if e > s])
        now_held = worst = 0
        for _, d in events:
            now_held += d
            worst = max(worst, now_held)
        print("\nconcurrency through two permitd: %d leases, at most %d surely held at once"
              % (len(held), worst), file=sys.stderr)
        self.assertLessEqual(worst, most)
        self.assertEqual(worst, most)               # not vacuous: the limit was reached
        self.assertGreater(len(held), 25)

    @unittest.skipUnless(HAVE_CONCURRENCY, "lua/concurrency.lua is not in this tree yet")
    def test_concurrency_expired_lease_frees_its_slot_on_time_and_release_is_idempotent(self):
        ttl = 600
        name = self.policy("cce", 2, algorithm="concurrency", lease_ms=ttl)
        h, g, r = self.a.http(), self.b.http(), Redis()
        try:
            b0 = r.time_us()
            first = h.rpc_json("Acquire", {"bucket": name, "app": "app"}).json()
            a0 = r.time_us()
            self.assertTrue(first["allowed"], first)
            time.sleep(0.15)
            second = g.rpc_json("Acquire", {"bucket": name, "app": "app"}).json()
            self.assertTrue(second["allowed"], second)
            d = decision(h.acquire(name))
            self.assertFalse(d["allowed"], d)
            # the first lease expires in [b0 + ttl, a0 + ttl] (Redis time)
            self.assertLessEqual(d["retry_after_ms"], ttl, d)
            while r.time_us() < b0 + ttl * 1000 - 80000:
                time.sleep(0.005)
            t = r.time_us()
            p = decision(g.peek(name))
            if r.time_us() < b0 + ttl * 1000:
                self.assertEqual(p["remaining"], 0, "freed before its expiry (%d)" % t)
            while r.time_us() <= a0 + ttl * 1000:
                time.sleep(0.002)
            d = decision(g.acquire(name))
            self.assertTrue(d["allowed"], "the expired lease still holds its slot: %r" % d)
            # Release of the expired lease: a no-op that says so, on either instance
            for http in (h, g):
                x = http.rpc_json("Release", {"bucket": name, "app": "app",
                                              "leaseId": first["leaseId"]})
                self.assertEqual(x.status, 200, x.body)
                self.assertFalse(x.json().get("released", False), x.body)
            # Release of a held one: once, then a no-op; the slot is free once
            x = h.rpc_json("Release", {"bucket": name, "app": "app", "leaseId": second["leaseId"]})
            self.assertTrue(x.json()["released"], x.body)
            x = g.rpc_json("Release", {"bucket": name, "app": "app", "leaseId": second["leaseId"]})
            self.assertFalse(x.json().get("released", False), x.body)
            self.assertEqual(decision(h.peek(name))["remaining"], 1)
        finally:
            h.close()
            g.close()
            r.close()

    # ------------------------------------------------------------ batches and peek, every algorithm

    def test_batch_all_or_nothing_and_peek_for_every_algorithm(self):
        limits = {
            "token_bucket": {"rate": "0.001"},
            "fixed_window": {"algorithm": "fixed_window", "window_ms": 3600000},
            "sliding_window": {"algorithm": "sliding_window", "window_ms": 3600000},
            "sliding_log": {"algorithm": "sliding_log", "window_ms": 3600000},
        }
        if HAVE_CONCURRENCY:
            limits["concurrency"] = {"algorithm": "concurrency", "lease_ms": 3600000}
        h, g = self.a.http(), self.b.http()

        def batch(http, items, all_or_nothing=False):
            body = {"requests": [{"bucket": n, "app": "app", "key": k, "permits": p}
                                 for n, k, p in items]}
            if all_or_nothing:
                body["allOrNothing"] = True
            r = http.rpc_json("AcquireBatch", body)
            self.assertEqual(r.status, 200, r.body)
            return [x.get("response") or x for x in r.json()["results"]]

        def left(http, name, key):
            one, two = decision(http.peek(name, key=key)), decision(http.peek(name, key=key))
            self.assertEqual(one["remaining"], two["remaining"], "a Peek took something")
            return one["remaining"]
        try:
            for algo, fields in limits.items():
                with self.subTest(algorithm=algo):
                    name = self.policy("bt", 3, colocate=1, **fields)
                    self.assertEqual((left(h, name, "u"), left(g, name, "v")), (3, 3))
                    # a batch: each item decided in order, seeing the ones before
                    res = batch(h, [(name, "u", 2), (name, "u", 2), (name, "v", 1)])
                    self.assertEqual([x.get("allowed", False) for x in res], [True, False, True], res)
                    self.assertEqual([int(x["remaining"]) for x in res], [1, 1, 2], res)
                    if algo == "concurrency":
                        self.assertRegex(res[0]["leaseId"], "^[0-9a-f]{32}$")
                        self.assertNotIn("leaseId", res[1])
                    self.assertEqual((left(g, name, "u"), left(h, name, "v")), (1, 2))
                    # all or nothing: one item refused, nothing taken
                    res = batch(g, [(name, "u", 1), (name, "v", 3)], all_or_nothing=True)
                    self.assertEqual([x.get("allowed", False) for x in res], [False, False], res)
                    self.assertTrue(all(int(x.get("retryAfterMs", 0)) > 0 for x in res), res)
                    self.assertEqual((left(h, name, "u"), left(g, name, "v")), (1, 2))
                    # all or nothing that fits: every item taken, atomically
                    res = batch(g, [(name, "u", 1), (name, "v", 2)], all_or_nothing=True)
                    self.assertEqual([x.get("allowed", False) for x in res], [True, True], res)
                    self.assertEqual((left(h, name, "u"), left(g, name, "v")), (0, 0))
                    # more than max_permits together in one bucket: out of range
                    res = batch(h, [(name, "w", 2), (name, "w", 2)], all_or_nothing=True)
                    codes = [x.get("error", {}).get("code") for x in res]
                    self.assertIn("out_of_range", codes, res)
                    self.assertEqual(left(h, name, "w"), 3)
        finally:
            h.close()
            g.close()

    # ------------------------------------------------------------ request ids

    def test_request_id_replays_the_answer_and_takes_nothing(self):
        for fields in ({"rate": 1}, {"algorithm": "fixed_window", "window_ms": 60000}):
            with self.subTest(fields):
                name = self.policy("rid", 3, **fields)
                h = self.a.http()
                msg = {"bucket": name, "app": "app", "permits": 2, "requestId": "order-17"}
                first = h.rpc_json("Acquire", msg)
                self.assertEqual(first.status, 200, first.body)
                self.assertTrue(first.json()["allowed"], first.body)
                self.assertNotIn("replayed", first.json())
                # the retry, on the other instance, answers the same and takes nothing
                again = self.b.http().rpc_json("Acquire", msg)
                self.assertEqual(again.status, 200, again.body)
                self.assertTrue(again.json()["replayed"], again.body)
                self.assertEqual(decision(again)["remaining"], decision(first)["remaining"])
                self.assertEqual(decision(h.peek(name))["remaining"], 1)
                # a denied answer is not kept (issue 42): its retry is
                # decided afresh (denied again here), not replayed
                msg2 = dict(msg, requestId="order-18")
                denied = decision(h.rpc_json("Acquire", msg2))
                self.assertFalse(denied["allowed"], denied)
                retry = h.rpc_json("Acquire", msg2)
                self.assertFalse(retry.json().get("replayed", False), retry.body)
                self.assertFalse(decision(retry)["allowed"])
                # a new id is a new take
                self.assertTrue(decision(h.rpc_json("Acquire", dict(msg, requestId="x",
                                                                    permits=1)))["allowed"])
                h.close()

    def test_request_id_replays_a_batch(self):
        name = self.policy("ridb", 5, rate=1)
        items = [{"bucket": name, "app": "app", "key": "k%d" % i, "permits": 3,
                  "requestId": "batch-%d" % i} for i in range(3)]
        h = self.a.http()
        try:
            first = h.rpc_json("AcquireBatch", {"requests": items})
            self.assertEqual(first.status, 200, first.body)
            again = self.b.http().rpc_json("AcquireBatch", {"requests": items})
            self.assertEqual(again.status, 200, again.body)
            for x, y in zip(first.json()["results"], again.json()["results"]):
                self.assertTrue(x["response"]["allowed"], first.body)
                self.assertTrue(y["response"]["replayed"], again.body)
                self.assertEqual(x["response"]["remaining"], y["response"]["remaining"])
            for i in range(3):
                self.assertEqual(decision(h.peek(name, key="k%d" % i))["remaining"], 2)
        finally:
            h.close()

    def test_request_id_is_checked(self):
        name = self.policy("ridc", 5, rate=1)
        h = self.a.http()
        try:
            for bad, says in [("has space", "request_id"), ("x" * 129, "longer than 128"),
                              ("tab\there", "0x09")]:
                r = h.rpc_json("Acquire", {"bucket": name, "app": "app", "requestId": bad})
                self.assertEqual(error_code(r), "invalid_argument", r.body)
                self.assertIn(says, r.json()["message"])
            ok = h.rpc_json("Acquire", {"bucket": name, "app": "app", "requestId": "x" * 128})
            self.assertTrue(decision(ok)["allowed"])
        finally:
            h.close()

    # ------------------------------------------------------------ leases on the wire

    def test_release_and_renew_wire_errors(self):
        bucket = self.policy("rel", 5, rate=1)
        window = self.policy("relw", 5, algorithm="fixed_window", calendar="hour")
        h = self.a.http()
        lease = "0123456789abcdef0123456789abcdef"
        try:
            for method in ("Release", "Renew"):
                for name, algo in ((bucket, "token_bucket"), (window, "fixed_window")):
                    r = h.rpc_json(method, {"bucket": name, "app": "app", "leaseId": lease})
                    self.assertEqual(error_code(r), "failed_precondition", r.body)
                    self.assertIn(algo, r.json()["message"])
                    self.assertIn(method, r.json()["message"])
                for bad in ("", "ABCDEF0123456789abcdef0123456789", lease + "0", "xyz"):
                    r = h.rpc_json(method, {"bucket": bucket, "app": "app", "leaseId": bad})
                    self.assertEqual(error_code(r), "invalid_argument", r.body)
                    self.assertIn("lease_id", r.json()["message"])
                r = h.rpc_json(method, {"bucket": unique("none"), "app": "app", "leaseId": lease})
                self.assertEqual(error_code(r), "not_found", r.body)
        finally:
            h.close()

    @unittest.skipUnless(HAVE_CONCURRENCY, "lua/concurrency.lua is not in this tree yet")
    def test_concurrency_leases(self):
        name = self.policy("cc", 2, algorithm="concurrency", lease_ms=30000)
        h, g = self.a.http(), self.b.http()
        try:
            leases = []
            for http in (h, g):
                r = http.rpc_json("Acquire", {"bucket": name, "app": "app"})
                m = r.json()
                self.assertTrue(m["allowed"], r.body)
                self.assertRegex(m["leaseId"], "^[0-9a-f]{32}$")
                self.assertGreater(int(m["leaseExpiresAfterMs"]), 29000, r.body)
                leases.append(m["leaseId"])
            self.assertNotEqual(leases[0], leases[1])
            d = decision(h.acquire(name))
            self.assertFalse(d["allowed"], d)
            self.assertGreater(d["retry_after_ms"], 29000, d)     # the earliest expiry
            r = g.rpc_json("Renew", {"bucket": name, "app": "app", "leaseId": leases[0]})
            self.assertTrue(r.json()["renewed"], r.body)
            r = g.rpc_json("Release", {"bucket": name, "app": "app", "leaseId": leases[0]})
            self.assertEqual(r.status, 200, r.body)
            self.assertTrue(r.json()["released"], r.body)
            # idempotent: released again, it says it was not held
            r = h.rpc_json("Release", {"bucket": name, "app": "app", "leaseId": leases[0]})
            self.assertEqual(r.status, 200, r.body)
            self.assertFalse(r.json()["released"], r.body)
            r = h.rpc_json("Renew", {"bucket": name, "app": "app", "leaseId": leases[0]})
            self.assertEqual(r.status, 200, r.body)
            self.assertFalse(r.json()["renewed"], r.body)
            self.assertTrue(decision(h.acquire(name))["allowed"])
            self.assertFalse(decision(g.acquire(name))["allowed"])
        finally:
            h.close()
            g.close()


class AlgorithmAdminTest(test_admin.AdminCase):
    """The admin API on buckets of every algorithm (one permitd with MariaDB
    and a login, as test_admin.py's classes)."""

    # each algorithm with limits that refill nothing during a test
    LIMITS = {
        "token_bucket": {"rate": "0.001"},
        "fixed_window": {"algorithm": "fixed_window", "window": "1h", "rate": ""},
        "sliding_window": {"algorithm": "sliding_window", "window": "1h", "rate": ""},
        "sliding_log": {"algorithm": "sliding_log", "window": "1h", "rate": ""},
        "concurrency": {"algorithm": "concurrency", "leaseTtl": "1h", "rate": ""},
    }

    def test_reset_bucket_of_each_algorithm(self):
        # ResetBucket empties the bucket of the policy's algorithm, whatever
        # it is: a key's (spread or colocated) or the shared one, and no
        # other key's; a concurrency reset frees every lease, so a holder's
        # Release is then a no-op.
        e, api = self.editor(), self.api()
        try:
            for algo, fields in self.LIMITS.items():
                for key, colocate in (("user-1", False), ("user-1", True), ("", False)):
                    with self.subTest(algorithm=algo, key=key, colocate=colocate):
                        name = self.name("rs")
                        e.create(name, max_permits=3, colocate=colocate, **fields)
                        leases = []
                        for _ in range(3):
                            r = api.acquire(name, key=key)
                            self.assertTrue(decision(r)["allowed"], r)
                            leases.append(r.json().get("leaseId"))
                        self.assertFalse(decision(api.acquire(name, key=key))["allowed"])
                        self.assertTrue(decision(api.acquire(name, key="user-2"))["allowed"])
                        self.assertEqual(num(e.bucket(name, key), "remaining"), 0)

                        b = e.ok(e.p("ResetBucket", {"name": name, "key": key}))["bucket"]
                        self.assertEqual((num(b, "remaining"), num(b, "limit")), (3, 3), b)
                        self.assertEqual(num(b, "resetAfterMs"), 0, b)
                        self.assertEqual(decision(api.peek(name, key=key))["remaining"], 3)
                        if algo == "concurrency":
                            r = api.rpc_json("Release", {"bucket": name, "app": "app",
                                                         "key": key, "leaseId": leases[0]})
                            self.assertEqual(r.status, 200, r)
                            self.assertFalse(r.json().get("released", False), r.body)
                        r = api.acquire(name, key=key, permits=3)
                        self.assertTrue(decision(r)["allowed"], r)
                        # the other key kept its take
                        self.assertEqual(decision(api.peek(name, key="user-2"))["remaining"], 2)
        finally:
            api.close()
            e.http.close()

    def test_get_bucket_answers_what_fits_the_algorithm(self):
        e, api = self.editor(), self.api()
        ms = lambda: time.time() * 1000.0  # noqa: E731
        try:
            # token bucket: the algorithm's name, nothing more
            name = self.name("ib")
            e.create(name, max_permits=3, **self.LIMITS["token_bucket"])
            b = e.bucket(name)
            self.assertEqual(b.get("algorithm"), "token_bucket", b)
            for f in ("windowResetAfterMs", "events", "eventAgesMs", "leases"):
                self.assertNotIn(f, b)

            # windows: until the current window ends (aligned to the epoch),
            # whether it holds a take or not
            for algo, window in (("fixed_window", 3600000), ("sliding_window", 60000)):
                name = self.name("iw")
                e.create(name, max_permits=5, algorithm=algo, window="%dms" % window, rate="")
                for take in (0, 2):
                    if take:
                        self.assertTrue(decision(api.acquire(name, key="k", permits=take))["allowed"])
                    t0 = ms()
                    b = e.bucket(name, "k")
                    t1 = ms()
                    self.assertEqual(b.get("algorithm"), algo, b)
                    self.assertEqual(num(b, "remaining"), 5 - take, b)
                    left = num(b, "windowResetAfterMs")
                    # the window's end, t + left, is a multiple of the window
                    lo, hi = t0 + left - 2, t1 + left + 2
                    self.assertLessEqual(-(-lo // window) * window, hi, (algo, b, t0, t1))
                    self.assertTrue(0 < left <= window, b)
                    self.assertNotIn("eventAgesMs", b)
                    self.assertNotIn("leases", b)

            # sliding log: the entries in the window, the newest's ages first
            name = self.name("il")
            e.create(name, max_permits=300, algorithm="sliding_log", window="1h", rate="")
            self.assertEqual(num(e.bucket(name), "events"), 0)
            self.assertTrue(decision(api.acquire(name, permits=2))["allowed"])
            time.sleep(0.3)
            self.assertTrue(decision(api.acquire(name))["allowed"])
            b = e.bucket(name)
            self.assertEqual(b.get("algorithm"), "sliding_log", b)
            self.assertEqual(num(b, "events"), 3, b)
            ages = [int(x) for x in b.get("eventAgesMs", [])]
            self.assertEqual(len(ages), 3, b)
            self.assertLess(ages[0], 250, b)                  # the newest first
            self.assertGreaterEqual(ages[1], 290, b)
            self.assertEqual(ages[1], ages[2], b)             # one take of 2: one time
            self.assertNotIn("windowResetAfterMs", b)
            self.assertNotIn("leases", b)
            self.assertTrue(decision(api.acquire(name, permits=150))["allowed"])
            b = e.bucket(name)
            self.assertEqual(num(b, "events"), 153, b)
            self.assertEqual(len(b["eventAgesMs"]), 100, "at most 100 listed")
            self.assertEqual(sorted(int(x) for x in b["eventAgesMs"]),
                             [int(x) for x in b["eventAgesMs"]], "newest first")

            # concurrency: the leases held, soonest expiry first, each by the
            # first 8 characters of its id only
            name = self.name("ic")
            e.create(name, max_permits=200, algorithm="concurrency", leaseTtl="1m", rate="")
            first = api.acquire(name, key="k").json()
            time.sleep(0.05)
            second = api.acquire(name, key="k", permits=2).json()
            ids = [first["leaseId"], second["leaseId"]]
            r = e.p("GetBucket", {"name": name, "key": "k"})
            b = e.ok(r)["bucket"]
            self.assertEqual(b.get("algorithm"), "concurrency", b)
            leases = b.get("leases", [])
            self.assertEqual([x["idPrefix"] for x in leases], [i[:8] for i in ids], b)
            self.assertEqual([num(x, "permits") for x in leases], [1, 2], b)
            expiry = [num(x, "expiresAfterMs") for x in leases]
            self.assertTrue(55000 < expiry[0] <= expiry[1] <= 60000, b)
            for i in ids:
                self.assertNotIn(i[:9].encode(), r.body)     # never more than 8 characters
            self.assertEqual(num(b, "remaining"), 197, b)
            r = api.rpc_json("Release", {"bucket": name, "app": "app", "key": "k",
                                         "leaseId": ids[0]})
            self.assertTrue(r.json()["released"], r.body)
            b = e.bucket(name, "k")
            self.assertEqual([x["idPrefix"] for x in b["leases"]], [ids[1][:8]], b)
            for _ in range(120):
                self.assertTrue(decision(api.acquire(name, key="k"))["allowed"])
            r = e.p("ResetBucket", {"name": name, "key": "k"})
            self.assertEqual(e.ok(r)["bucket"].get("algorithm"), "concurrency")
            self.assertNotIn("leases", e.ok(r)["bucket"])
            for _ in range(120):
                self.assertTrue(decision(api.acquire(name, key="k"))["allowed"])
            self.assertEqual(len(e.bucket(name, "k")["leases"]), 100, "at most 100 listed")
        finally:
            api.close()
            e.http.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
