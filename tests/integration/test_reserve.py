"""Reservations (issue 38) end to end: Reserve, Commit and Cancel over
Connect (JSON and binary) against two permitd instances on one Redis (and,
as cluster_reserve, on the stack's Redis Cluster, where each keyed bucket
has a slot of its own: a Reserve of several items is then held per slot
and given back when one is refused).

What is checked: an estimate held all or nothing; a commit below it
refunds the rest (never above max_permits), above it charges the excess
into debt down to the policy's floor, and a request that waits the
retry_after_ms a debt gives succeeds; Cancel refunds everything; Commit
and Cancel retried answer what happened (replayed) and change nothing;
Reserve retried with its request_id answers the same reservation and
holds nothing again; the ttl capped per policy; an expired reservation
kept or refunded as its policy says, settled by a late Commit (which
says EXPIRED) or by the sweep with nobody touching it; the window
algorithms; concurrency refused; /metrics; and the exactness bound over
an interval with expiries, cancels, refunds and retries mixed in, across
two instances.
"""
import os
import random
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_admin  # noqa: E402
from harness import Permitd, Redis, decision, put_policy, unique, wait_for  # noqa: E402

APP = "app"
SLOW = 0.001    # one permit per 1000 s: nothing refills within a test


def num(m, field):
    v = m.get(field)
    return 0 if v is None else int(v)


class ReserveCase(unittest.TestCase):

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

    def policy(self, prefix="rsv", max_permits=100, rate=SLOW, **extra):
        name = unique(prefix)
        put_policy(self.redis, name, max_permits=max_permits, rate=rate, **extra)
        return name

    def api(self, which=None):
        return (which or self.a).http()

    def reserve(self, items, ttl_ms=0, request_id="", which=None, ok=200):
        msg = {"app": APP, "items": [{"bucket": b, "key": k, "estimate": e} for b, k, e in items]}
        if ttl_ms:
            msg["ttlMs"] = ttl_ms
        if request_id:
            msg["requestId"] = request_id
        r = self.api(which).rpc_json("Reserve", msg)
        self.assertEqual(r.status, ok, r)
        return r.json()

    def commit(self, rid, actual, which=None, ok=200):
        r = self.api(which).rpc_json("Commit", {"app": APP, "reservationId": rid,
                                                "actual": actual})
        self.assertEqual(r.status, ok, r)
        return r.json()

    def cancel(self, rid, which=None, ok=200):
        r = self.api(which).rpc_json("Cancel", {"app": APP, "reservationId": rid})
        self.assertEqual(r.status, ok, r)
        return r.json()

    def remaining(self, name, key=""):
        return decision(self.api().peek(name, key=key))["remaining"]

    def acquire(self, name, permits=1, key=""):
        return decision(self.api().acquire(name, key=key, permits=permits))


class ReserveTest(ReserveCase):

    def test_commit_below_the_estimate_refunds_above_it_charges(self):
        name = self.policy(max_permits=100)
        m = self.reserve([(name, "", 30)])
        self.assertIs(m.get("allowed"), True, m)
        self.assertRegex(m["reservationId"], "^[0-9a-f]{32}$")
        self.assertEqual(num(m["items"][0], "held"), 30, m)
        self.assertEqual(self.remaining(name), 70)
        c = self.commit(m["reservationId"], [10])
        self.assertEqual(c["state"], "RESERVATION_STATE_COMMITTED", c)
        self.assertEqual((num(c["items"][0], "refunded"), num(c["items"][0], "charged")), (20, 0), c)
        self.assertEqual(self.remaining(name), 90)
        m = self.reserve([(name, "", 30)])
        c = self.commit(m["reservationId"], [45])
        self.assertEqual((num(c["items"][0], "refunded"), num(c["items"][0], "charged")), (0, 15), c)
        self.assertEqual(self.remaining(name), 45)

    def test_a_refund_never_goes_above_max(self):
        name = self.policy(max_permits=10, rate=1000)     # refills in 10 ms
        m = self.reserve([(name, "", 8)])
        time.sleep(0.05)                                   # full again meanwhile
        c = self.commit(m["reservationId"], [0])
        self.assertLessEqual(num(c["items"][0], "refunded"), 8, c)
        self.assertEqual(self.remaining(name), 10)
        self.assertEqual(self.redis("EXISTS", harness.state_key(name)), 0,
                         "a full bucket has no key")

    def test_debt_down_to_the_floor_is_waited_out_exactly(self):
        name = self.policy(max_permits=10, rate=20, debt_floor=10)
        m = self.reserve([(name, "", 10)])
        c = self.commit(m["reservationId"], [40])       # 30 over: 10 fit above the floor
        self.assertEqual(num(c["items"][0], "charged"), 10, c)
        d = self.acquire(name, permits=5)
        self.assertFalse(d["allowed"], d)
        self.assertEqual(d["remaining"], 0, d)          # in debt: nothing left, not less
        self.assertGreaterEqual(d["retry_after_ms"], 500, d)  # (5 + 10) / 20 per s, less the refill
        time.sleep(d["retry_after_ms"] / 1000.0)
        self.assertTrue(self.acquire(name, permits=5)["allowed"],
                        "waiting retry_after_ms after a debt must succeed")

    def test_cancel_refunds_everything_and_retries_change_nothing(self):
        name = self.policy(max_permits=50)
        m = self.reserve([(name, "", 20)])
        rid = m["reservationId"]
        c = self.cancel(rid, which=self.b)              # another instance settles it
        self.assertEqual(c["state"], "RESERVATION_STATE_CANCELLED", c)
        self.assertEqual(num(c["items"][0], "refunded"), 20, c)
        self.assertEqual(self.remaining(name), 50)
        again = self.cancel(rid)
        self.assertIs(again.get("replayed"), True, again)
        self.assertEqual(num(again["items"][0], "refunded"), 20, again)
        late = self.commit(rid, [50])
        self.assertIs(late.get("replayed"), True, late)
        self.assertEqual(late["state"], "RESERVATION_STATE_CANCELLED", late)
        self.assertEqual(self.remaining(name), 50, "a retry refunded or charged again")

    def test_commit_retried_answers_the_first_commit(self):
        name = self.policy(max_permits=50)
        rid = self.reserve([(name, "", 20)])["reservationId"]
        first = self.commit(rid, [5])
        for which in (self.a, self.b):
            again = self.commit(rid, [5], which=which)
            self.assertIs(again.get("replayed"), True, again)
            self.assertEqual(again["items"], first["items"])
        self.assertEqual(self.remaining(name), 45)

    def test_reserve_retried_with_its_request_id_holds_once(self):
        name = self.policy(max_permits=50)
        rid = unique("req")
        m1 = self.reserve([(name, "", 20)], request_id=rid)
        m2 = self.reserve([(name, "", 20)], request_id=rid, which=self.b)
        self.assertEqual(m1["reservationId"], m2["reservationId"])
        self.assertIs(m2.get("replayed"), True, m2)
        self.assertEqual(self.remaining(name), 30)

    def test_all_or_nothing_holds_nothing_when_one_item_is_refused(self):
        user, tenant, glob = (self.policy(p, max_permits=m)
                              for p, m in (("rsv-user", 100), ("rsv-tenant", 100), ("rsv-glob", 10)))
        self.assertTrue(self.acquire(glob, permits=8)["allowed"])
        m = self.reserve([(user, "alice", 5), (tenant, "acme", 5), (glob, "", 5)])
        self.assertIs(m.get("allowed", False), False, m)
        self.assertGreater(num(m, "retryAfterMs"), 0, m)
        self.assertNotIn("reservationId", m)
        self.assertEqual(self.remaining(user, "alice"), 100)
        self.assertEqual(self.remaining(tenant, "acme"), 100)
        self.assertEqual(self.remaining(glob), 2)
        m = self.reserve([(user, "alice", 5), (tenant, "acme", 5), (glob, "", 2)])
        self.assertIs(m.get("allowed"), True, m)
        self.assertEqual((self.remaining(user, "alice"), self.remaining(tenant, "acme"),
                          self.remaining(glob)), (95, 95, 0))

    def test_the_ttl_is_capped_per_policy(self):
        short = self.policy(reserve_ttl_ms=2000)
        long_ = self.policy(reserve_ttl_ms=600000)
        m = self.reserve([(short, "", 1), (long_, "", 1)], ttl_ms=60000)
        self.assertEqual(num(m, "expiresAfterMs"), 2000, m)
        m = self.reserve([(long_, "", 1)], ttl_ms=60000)
        self.assertEqual(num(m, "expiresAfterMs"), 60000, m)
        m = self.reserve([(long_, "", 1)])
        self.assertEqual(num(m, "expiresAfterMs"), 600000, m)

    def test_expiry_keeps_or_refunds_as_the_policy_says_late_commit_says_expired(self):
        keep = self.policy(max_permits=50, reserve_ttl_ms=300)
        refund = self.policy(max_permits=50, reserve_ttl_ms=300, reserve_expiry="refund")
        rid = self.reserve([(keep, "", 10), (refund, "", 20)])["reservationId"]
        time.sleep(0.4)
        c = self.commit(rid, [1, 1])        # too late: the expiry is settled, not the commit
        self.assertEqual(c["state"], "RESERVATION_STATE_EXPIRED", c)
        self.assertEqual([num(i, "refunded") for i in c["items"]], [0, 20], c)
        self.assertEqual([num(i, "actual") for i in c["items"]], [-1, -1], c)
        self.assertEqual((self.remaining(keep), self.remaining(refund)), (40, 50))
        again = self.commit(rid, [1, 1], which=self.b)
        self.assertIs(again.get("replayed"), True, again)
        self.assertEqual(again["state"], "RESERVATION_STATE_EXPIRED", again)

    def test_the_sweep_settles_an_expiry_nobody_touches(self):
        name = self.policy(max_permits=50, reserve_ttl_ms=200, reserve_expiry="refund")
        self.reserve([(name, "", 30)])
        self.assertEqual(self.remaining(name), 20)
        wait_for("the sweep refunding an expired reservation",
                 lambda: self.remaining(name) == 50)

    def test_window_algorithms_refund_and_charge(self):
        for alg in ("fixed_window", "sliding_window", "sliding_log"):
            with self.subTest(algorithm=alg):
                name = self.policy("rsv-" + alg.replace("_", ""), max_permits=20, rate="",
                                   algorithm=alg, window_ms=3600000, debt_floor=5)
                rid = self.reserve([(name, "", 10)])["reservationId"]
                self.assertEqual(self.remaining(name), 10)
                c = self.commit(rid, [4])
                self.assertEqual(num(c["items"][0], "refunded"), 6, c)
                self.assertEqual(self.remaining(name), 16)
                rid = self.reserve([(name, "", 16)])["reservationId"]
                c = self.commit(rid, [30])       # 14 over: 5 fit above max
                self.assertEqual(num(c["items"][0], "charged"), 5, c)
                d = self.acquire(name)
                self.assertFalse(d["allowed"], d)
                self.assertEqual(d["remaining"], 0, d)

    def test_concurrency_and_bad_requests_are_refused(self):
        conc = self.policy(rate="", algorithm="concurrency", lease_ms=60000)
        r = self.api().rpc_json("Reserve", {"app": APP, "items": [{"bucket": conc, "estimate": 1}]})
        self.assertEqual((r.status, r.json()["code"]), (400, "failed_precondition"), r)
        name = self.policy(max_permits=10)
        for items, code in (([{"bucket": name, "estimate": 11}], "out_of_range"),
                            ([{"bucket": name, "estimate": 0}], "invalid_argument"),
                            ([], "invalid_argument"),
                            ([{"bucket": "no-such-" + name, "estimate": 1}], "not_found")):
            r = self.api().rpc_json("Reserve", {"app": APP, "items": items})
            self.assertEqual(r.json().get("code"), code, (items, r))
        r = self.api().rpc_json("Commit", {"app": APP, "reservationId": "0" * 32, "actual": [1]})
        self.assertEqual((r.status, r.json()["code"]), (404, "not_found"), r)
        r = self.api().rpc_json("Commit", {"app": APP, "reservationId": "xyz", "actual": [1]})
        self.assertEqual(r.json()["code"], "invalid_argument", r)
        rid = self.reserve([(name, "", 3)])["reservationId"]
        r = self.api().rpc_json("Commit", {"app": "other", "reservationId": rid, "actual": [1]})
        self.assertEqual(r.json()["code"], "permission_denied", r)
        for actual in ([1, 1], [-1], [1.5]):
            r = self.api().rpc_json("Commit", {"app": APP, "reservationId": rid, "actual": actual})
            self.assertEqual(r.json()["code"], "invalid_argument", (actual, r))
        self.assertEqual(self.remaining(name), 7)
        c = self.commit(rid, [1])          # still open: the bad commits changed nothing
        self.assertEqual(num(c["items"][0], "refunded"), 2, c)

    def test_metrics_count_reservations(self):
        name = self.policy(max_permits=100)
        before = self.a.admin().request("GET", "/metrics").body.decode()
        rid = self.reserve([(name, "", 10)])["reservationId"]
        self.commit(rid, [15])
        rid = self.reserve([(name, "", 10)])["reservationId"]
        self.commit(rid, [4])
        after = self.a.admin().request("GET", "/metrics").body.decode()

        def value(text, family):
            for ln in text.splitlines():
                if ln.startswith(family + " "):
                    return int(float(ln.split()[1]))
            return 0
        for family, grew in (("permitd_reservations_total", 2),
                             ("permitd_reservations_committed_total", 2),
                             ("permitd_reservation_permits_refunded_total", 6),
                             ("permitd_reservation_permits_debt_total", 5)):
            self.assertEqual(value(after, family) - value(before, family), grew, family)
        self.assertIn("permitd_reservations_expired_total", after)


class ExactnessTest(ReserveCase):
    """Two instances, many clients, one token bucket (max 40, rate 40/s):
    Reserve, then Commit (actual below, at or above the estimate), Cancel,
    let expire (kept), retried Commits and Reserves with request ids,
    mixed. What the buckets really paid (the committed actuals, charges
    included, and the kept expiries; cancelled and refunded permits not) over
    the run is at most max_permits + rate x T + the debt floor."""

    def test_committed_within_the_bound_across_two_instances(self):
        max_p, rate, floor = 40, 40, 10
        name = self.policy("rsv-exact", max_permits=max_p, rate=rate, debt_floor=floor,
                           reserve_ttl_ms=150)
        paid, errors, lock = [], [], threading.Lock()
        stop = time.monotonic() + 3.0
        t0 = time.monotonic()

        def client(seed):
            rnd = random.Random(seed)
            inst = (self.a, self.b)
            while time.monotonic() < stop:
                est = rnd.randint(1, 6)
                rid = unique("x") if rnd.random() < 0.3 else ""
                try:
                    m = self.reserve([(name, "", est)], request_id=rid,
                                     which=inst[rnd.randint(0, 1)])
                    if rid and rnd.random() < 0.5:          # a retry of the same Reserve
                        again = self.reserve([(name, "", est)], request_id=rid,
                                             which=inst[rnd.randint(0, 1)])
                        if m.get("allowed") and again["reservationId"] != m["reservationId"]:
                            errors.append(("replay", m, again))
                    if not m.get("allowed"):
                        time.sleep(min(num(m, "retryAfterMs"), 50) / 1000.0)
                        continue
                    what = rnd.random()
                    if what < 0.15:
                        c = self.cancel(m["reservationId"], which=inst[rnd.randint(0, 1)])
                    elif what < 0.25:
                        time.sleep(0.2)                      # expires: the estimate is kept
                        c = self.commit(m["reservationId"], [est], which=inst[rnd.randint(0, 1)])
                    else:
                        actual = rnd.choice([0, est // 2, est, est + 3])
                        c = self.commit(m["reservationId"], [actual], which=inst[rnd.randint(0, 1)])
                        if rnd.random() < 0.3:               # a retried commit
                            self.commit(m["reservationId"], [actual], which=inst[rnd.randint(0, 1)])
                    it = c["items"][0]
                    cost = num(it, "held") - num(it, "refunded") + num(it, "charged")
                    with lock:
                        paid.append(cost)
                except Exception as e:  # noqa: BLE001
                    errors.append(repr(e))
                    return

        threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        self.assertEqual(errors, [])
        bound = max_p + rate * elapsed + floor
        msg = "paid %d in %.2f s over %d reservations; bound %d + %d x %.2f + %d = %.1f" % (
            sum(paid), elapsed, len(paid), max_p, rate, elapsed, floor, bound)
        print("\n" + msg, file=sys.stderr)
        self.assertLessEqual(sum(paid), bound, msg)
        self.assertGreater(sum(paid), 0.5 * rate * elapsed, msg)


class PolicyLimitsTest(test_admin.AdminCase):
    """The three reservation limits of a policy (migration 0015) through
    the admin API: created, shown, validated, audited with the edit, synced
    to the hash, and in force for Reserve and Commit."""

    def test_reserve_limits_edited_audited_and_in_force(self):
        c = self.editor()
        name = self.name("rsv-adm")
        p = c.create(name, max_permits=20, rate="0.001")
        self.assertEqual((p.get("reserveTtl"), p.get("debtFloor", "0"), p.get("reserveExpiry")),
                         ("5m", "0", "keep"), p)
        for bad in ({"reserveTtl": "2d"}, {"debtFloor": "-1"}, {"reserveExpiry": "maybe"}):
            r = c.update(c.get(name), **bad)
            self.assertEqual(r.json().get("code"), "invalid_argument", (bad, r))
        p = c.ok(c.update(c.get(name), reserveTtl="2s", debtFloor="7",
                          reserveExpiry="refund"))["policy"]
        self.assertEqual((p["reserveTtl"], p["debtFloor"], p["reserveExpiry"]),
                         ("2s", "7", "refund"), p)
        change = c.history(name)[0]
        self.assertIn('"debt_floor": 7', change["newValue"].replace('":7', '": 7'), change)
        self.assertIn('"reserve_expiry": "refund"',
                      change["newValue"].replace('":"', '": "'), change)
        api = self.api()

        def reserve(est):
            r = api.rpc_json("Reserve", {"app": "app", "items": [{"bucket": name, "estimate": est}],
                                         "ttlMs": 60000})
            return r.json()
        wait_for("the edit in force", lambda: int(reserve(1).get("expiresAfterMs", 0)) == 2000)
        m = reserve(5)
        r = api.rpc_json("Commit", {"app": "app", "reservationId": m["reservationId"],
                                    "actual": [40]}).json()
        self.assertLess(int(r["items"][0]["charged"]), 35, r)    # the floor cut it
        redis = Redis()
        tokens = harness.read_state(redis, harness.state_key(name, prefix=self.prefix))[0]
        redis.close()
        self.assertAlmostEqual(tokens, -7, delta=0.01)

    def test_the_inspector_shows_outstanding_reservations(self):
        c = self.editor()
        name = self.name("rsv-insp")
        c.create(name, max_permits=100, rate="0.001")
        api = self.api()
        wait_for("the policy synced", lambda: api.peek(name).status == 200)
        ids = []
        for est in (10, 15):
            r = api.rpc_json("Reserve", {"app": "app", "items": [{"bucket": name, "key": "k%d" % est,
                                                                   "estimate": est}]}).json()
            ids.append(r["reservationId"])
        b = c.bucket(name)
        self.assertEqual((b.get("reservations"), b.get("reservedPermits")), ("2", "25"), b)
        self.assertGreaterEqual(int(b.get("oldestReservationMs", "0")), 0, b)
        api.rpc_json("Cancel", {"app": "app", "reservationId": ids[0]})
        b = c.bucket(name)
        self.assertEqual((b.get("reservations"), b.get("reservedPermits")), ("1", "15"), b)

    def test_the_policy_page_reads_outstanding_reservations(self):
        """GetPolicyReservations: the policy's reservation index, every key,
        without a bucket; a viewer may read it."""
        c = self.editor()
        name = self.name("rsv-page")
        c.create(name, max_permits=100, rate="0.001")
        api = self.api()
        wait_for("the policy synced", lambda: api.peek(name).status == 200)
        r = c.ok(c.p("GetPolicyReservations", {"name": name}))
        self.assertEqual((r.get("count", "0"), r.get("amount", "0"), r.get("oldestMs", "0")),
                         ("0", "0", "0"), r)
        ids = []
        for key, est in (("a", 4), ("b", 6), ("", 5)):
            m = api.rpc_json("Reserve", {"app": "app", "items": [
                {"bucket": name, "key": key, "estimate": est}]}).json()
            self.assertTrue(m["allowed"], m)
            ids.append(m["reservationId"])
        time.sleep(0.05)        # the oldest has an age (ordering, not a bound)
        r = c.ok(c.p("GetPolicyReservations", {"name": name}))
        self.assertEqual((r.get("count"), r.get("amount")), ("3", "15"), r)
        self.assertGreater(int(r.get("oldestMs", "0")), 0, r)
        api.rpc_json("Commit", {"app": "app", "reservationId": ids[1], "actual": [1]})
        v = self.viewer()
        r = v.ok(v.p("GetPolicyReservations", {"name": name}))
        self.assertEqual((r.get("count"), r.get("amount")), ("2", "9"), r)
        bad = c.p("GetPolicyReservations", {"name": "no such\x01name"})
        self.assertEqual(bad.json().get("code"), "invalid_argument", bad)


if __name__ == "__main__":
    harness.main()
