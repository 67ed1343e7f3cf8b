"""Shadow mode (issue 23), end to end against real MariaDB and Redis.

A policy in shadow mode decides and counts every Acquire as usual, but
answers allowed: a would-be denial is flagged `shadow` and carries what
enforcing would have said (remaining, retry_after_ms, the RateLimit header),
takes nothing, and is counted apart (GetPolicyStats' shadow_denied,
permitd_acquires_total{result="shadow_denied"}). Checked here through the
admin API (CreatePolicy/UpdatePolicy/GetPolicy with `shadow`, validated; the
switch audited in the policy's history; the sync's Redis hash field), for
every algorithm, AcquireBatch (item by item and all_or_nothing), Peek's
flag, and the deny cache (on by default), which must never turn a shadow
denial into a refusal. Switched off, the same policy refuses again.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_admin  # noqa: E402
from harness import Redis, decision, wait_for  # noqa: E402
from test_admin import AdminCase, num  # noqa: E402

# Limits that give nothing back within a test: max 2, then denials.
ALGORITHMS = {
    "token_bucket": {"rate": "0.001"},
    "fixed_window": {"algorithm": "fixed_window", "rate": "", "window": "1h"},
    "sliding_window": {"algorithm": "sliding_window", "rate": "", "window": "1h"},
    "sliding_log": {"algorithm": "sliding_log", "rate": "", "window": "1h"},
    "concurrency": {"algorithm": "concurrency", "rate": "", "leaseTtl": "1h"},
}


def metric(text, policy, result):
    line = 'permitd_acquires_total{policy="%s",result="%s"} ' % (policy, result)
    for ln in text.splitlines():
        if ln.startswith(line):
            return int(ln[len(line):])
    return 0


class ShadowTest(AdminCase):

    def shadow_policy(self, prefix, max_permits=2, **fields):
        c = self.editor()
        name = self.name(prefix)
        p = c.create(name, max_permits=max_permits, shadow=True, **fields)
        self.assertIs(p.get("shadow"), True, p)
        self.assertIs(c.get(name).get("shadow"), True)
        return c, name, p

    def metrics(self):
        return self.permitd.admin().request("GET", "/metrics").body.decode()

    def test_five_acquires_on_max_two_all_allowed_three_flagged_with_the_would_be_answer(self):
        for alg, fields in ALGORITHMS.items():
            with self.subTest(algorithm=alg):
                c, name, _ = self.shadow_policy("sh-" + alg.replace("_", ""), **fields)
                api = self.api()
                answers = []
                for _ in range(5):
                    r = api.acquire(name)
                    d = decision(r)
                    m = r.json()
                    answers.append((d, m, r))
                    self.assertTrue(d["allowed"], "%s: a shadow policy refused: %r" % (alg, r))
                flagged = [a for a in answers if a[1].get("shadow") is True]
                self.assertEqual(len(flagged), 3, "%s: %r" % (alg, [a[1] for a in answers]))
                for d, m, r in answers[:2]:
                    self.assertNotIn("shadow", m, "%s: a real allow is no shadow: %r" % (alg, m))
                for d, m, r in flagged:
                    # what enforcing would have said
                    self.assertEqual(d["remaining"], 0, r)
                    self.assertEqual(d["limit"], 2, r)
                    if alg != "concurrency":
                        self.assertGreater(d["retry_after_ms"], 60000, r)
                    self.assertEqual(m.get("leaseId", ""), "", "no lease for a shadow answer")
                    self.assertRegex(r.headers.get("ratelimit", ""), r';r=0;', r)
                    self.assertNotIn("retry-after", r.headers,
                                     "a proxy would refuse on Retry-After: %r" % (r,))
                # Nothing was taken by the shadow answers: still 0 left, not below.
                pk = api.peek(name)
                self.assertEqual(decision(pk)["remaining"], 0, pk)
                self.assertIs(pk.json().get("shadow"), True, pk)
                # counted apart, by the stats and by /metrics
                st = c.ok(c.p("GetPolicyStats", {"name": name, "seconds": 60}))
                self.assertEqual(sum(int(x) for x in st.get("shadowDenied", [])), 3, st)
                self.assertEqual(sum(int(x) for x in st.get("denied", [])), 0, st)
                self.assertEqual(sum(int(x) for x in st.get("allowed", [])), 2, st)
                text = self.metrics()
                self.assertEqual(metric(text, name, "shadow_denied"), 3, text)
                self.assertEqual(metric(text, name, "denied"), 0)
                self.assertEqual(metric(text, name, "allowed"), 2)

    def test_batches_item_by_item_and_all_or_nothing(self):
        for alg, fields in ALGORITHMS.items():
            with self.subTest(algorithm=alg):
                c, name, _ = self.shadow_policy("shb-" + alg.replace("_", ""), **fields)
                api = self.api()
                self.assertNotIn("shadow", api.acquire(name).json())    # 1 left
                # all_or_nothing of 2 with 1 left: denied as a whole, so
                # nothing is taken, and every item is answered allowed, flagged.
                r = api.rpc_json("AcquireBatch", {"allOrNothing": True, "requests": [
                    {"bucket": name, "app": "app"} for _ in range(2)]})
                self.assertEqual(r.status, 200, r)
                items = [x.get("response", x) for x in r.json()["results"]]
                self.assertEqual([x.get("allowed") for x in items], [True] * 2, items)
                self.assertEqual([x.get("shadow") for x in items], [True] * 2, items)
                self.assertEqual(decision(api.peek(name))["remaining"], 1, "nothing taken")
                # item by item: 1 real, then 2 shadow
                r = api.rpc_json("AcquireBatch", {"requests": [
                    {"bucket": name, "app": "app"} for _ in range(3)]})
                items = [x.get("response", x) for x in r.json()["results"]]
                self.assertEqual([x.get("allowed") for x in items], [True] * 3, items)
                self.assertEqual([x.get("shadow", False) for x in items], [False, True, True],
                                 items)
                self.assertEqual(num(items[2], "remaining"), 0)
                st = c.ok(c.p("GetPolicyStats", {"name": name, "seconds": 60}))
                self.assertEqual(sum(int(x) for x in st.get("shadowDenied", [])), 4, st)
                self.assertEqual(metric(self.metrics(), name, "shadow_denied"), 4)

    def test_deny_cache_never_refuses_a_shadow_policy(self):
        # The same keyed bucket over and over, fast: the deny cache (on by
        # default) would answer these from memory if it kept the denials.
        c, name, _ = self.shadow_policy("shdc", max_permits=1)
        api = self.api()
        self.assertNotIn("shadow", api.acquire(name, key="k1").json())
        for i in range(50):
            r = api.acquire(name, key="k1")
            d = decision(r)
            self.assertTrue(d["allowed"], "Acquire %d was refused: %r" % (i, r))
            self.assertIs(r.json().get("shadow"), True, r)

    def test_switching_shadow_is_validated_synced_audited_and_enforced(self):
        c, name, p = self.shadow_policy("shsw", max_permits=1)
        redis = Redis()
        try:
            key = "%s{%s}:policy" % (self.prefix, name)
            self.assertEqual(redis("HGET", key, "shadow"), "1")
            api = self.api()
            api.acquire(name)
            self.assertTrue(decision(api.acquire(name))["allowed"])
            # a string where a bool belongs is refused, naming the field
            bad = dict(p)
            bad["shadow"] = "maybe"
            self.assertConnectError(c.p("UpdatePolicy", {"policy": bad}), 400,
                                    "invalid_argument", ["shadow"])
            # off: audited, synced (field gone), enforced at once
            r = c.update(p, shadow=False)
            off = c.ok(r)["policy"]
            self.assertNotIn("shadow", off)
            self.assertIsNone(redis("HGET", key, "shadow"))
            d = decision(api.acquire(name))
            self.assertFalse(d["allowed"], d)
            changes = c.history(name)
            newest = changes[0]
            self.assertEqual(newest["action"], "update")
            self.assertEqual(newest["actor"], test_admin.EDITOR)
            self.assertEqual(json.loads(newest["oldValue"])["shadow"], 1, newest)
            self.assertEqual(json.loads(newest["newValue"])["shadow"], 0, newest)
            self.assertEqual(json.loads(changes[-1]["newValue"])["shadow"], 1, changes[-1])
            # on again
            c.ok(c.update(off, shadow=True))
            wait_for("the shadow field back in Redis", lambda: redis("HGET", key, "shadow") == "1", timeout=5)
            r = api.acquire(name)
            self.assertTrue(decision(r)["allowed"], r)
            self.assertIs(r.json().get("shadow"), True, r)
        finally:
            redis.close()

    def test_a_denial_of_a_policy_that_enforces_carries_no_shadow_flag(self):
        c = self.editor()
        name = self.name("shno")
        p = c.create(name, max_permits=1, rate="0.001")
        self.assertNotIn("shadow", p)
        api = self.api()
        api.acquire(name)
        r = api.acquire(name)
        self.assertFalse(decision(r)["allowed"])
        self.assertNotIn("shadow", r.json())
        self.assertIn("retry-after", r.headers)
        self.assertNotIn("shadow", api.peek(name).json())


if __name__ == "__main__":
    import unittest
    unittest.main()
