"""Overrides (issue 37), end to end against real MariaDB and Redis (and,
as cluster_overrides, a Redis Cluster).

An override belongs to a policy and matches callers by exact key, key
prefix or app; it sets the limits of the policy's algorithm, blocks, or
exempts; precedence exact key > longest prefix > app > the policy. Rows are
written here with plain SQL (the admin API is wip/overadmin's), as a DBA
would; a PUBLISH of the policy's name on <prefix>override-changes is the
change notice the admin API sends. Checked:
  - precedence, on the Acquire, Peek and AcquireBatch doors;
  - every algorithm under an override's limits;
  - block (denied with the reason, Redis not asked) and exempt (allowed,
    still counted in the bucket);
  - expiry (the policy's limits again once expires_at passes);
  - a plain-SQL edit without a notice in force within a sync interval;
  - a change by notice seen by another instance whose sync is far off;
  - two instances hold one override's bound exactly;
  - the deny cache never denies a key whose override was just raised;
  - the rate-edit rule: turning an override on re-prices nothing earned;
  - hostile rows (CHECKs switched off by a DBA): never let anything through
    unlimited.
Everything polls for its condition with a generous deadline; nothing
asserts how long something took.
"""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Permitd, Redis, decision, wait_for  # noqa: E402
from test_admin import AdminCase, num  # noqa: E402

# Limits that give nothing back within a test.
ALGORITHMS = {
    "token_bucket": ({"rate": "0.0001"}, {"rate": "0.0002"}),
    "fixed_window": ({"algorithm": "fixed_window", "rate": "", "window": "1h"},
                     {"window_ms": 7200000}),
    "sliding_window": ({"algorithm": "sliding_window", "rate": "", "window": "1h"},
                       {"window_ms": 7200000}),
    "sliding_log": ({"algorithm": "sliding_log", "rate": "", "window": "1h"},
                    {"window_ms": 7200000}),
    "concurrency": ({"algorithm": "concurrency", "rate": "", "leaseTtl": "1h"},
                    {"window_ms": 7200000}),
}


def sqlv(v):
    if v is None:
        return "NULL"
    if isinstance(v, (int, float)):
        return repr(v)
    return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"


class OverrideCase(AdminCase):

    def put(self, policy, kind, value, action="limit", max_permits=None, rate=None,
            window_ms=None, expires=None, notify=True):
        """One override row by plain SQL; expires: SQL for expires_at."""
        self.sql("INSERT INTO policy_overrides (policy, match_kind, match_value, action, "
                 "max_permits, rate, window_ms, expires_at) VALUES (%s, %s, %s, %s, %s, %s, "
                 "%s, %s)" % (sqlv(policy), sqlv(kind), sqlv(value), sqlv(action),
                              sqlv(max_permits), sqlv(rate), sqlv(window_ms),
                              expires or "NULL"))
        if notify:
            self.notify(policy)

    def notify(self, policy):
        r = Redis()
        try:
            r("PUBLISH", self.prefix + "override-changes", policy)
        finally:
            r.close()

    def policy(self, prefix, max_permits=2, apps=("app", "billing"), **fields):
        c = self.editor()
        name = self.name(prefix)
        fields.setdefault("rate", "0.0001")
        c.create(name, max_permits=max_permits, apps=apps, **fields)
        return name

    def limit_seen(self, api, name, key, want, app="app"):
        """Polls a Peek of key until its limit is `want`."""
        def check():
            r = api.peek(name, app=app, key=key)
            return r.status == 200 and decision(r)["limit"] == want
        wait_for("policy %s key %r at limit %d" % (name, key, want), check)

    def allowed(self, api, name, key, n, app="app"):
        """How many of n Acquires were allowed."""
        got = 0
        for _ in range(n):
            r = api.acquire(name, app=app, key=key)
            got += 1 if decision(r)["allowed"] else 0
        return got


class OverridesTest(OverrideCase):

    def test_precedence_exact_key_then_longest_prefix_then_app(self):
        name = self.policy("ovp", max_permits=2)
        api = self.api()
        self.put(name, "key", "premium_alice", max_permits=9)
        self.put(name, "prefix", "premium_", max_permits=5)
        self.put(name, "prefix", "premium_gold_", max_permits=7)
        self.put(name, "app", "billing", max_permits=3)
        self.limit_seen(api, name, "premium_gold_x", 7)
        cases = [("premium_alice", "billing", 9), ("premium_bob", "app", 5),
                 ("premium_gold_bob", "billing", 7), ("plain", "billing", 3),
                 ("plain2", "app", 2), ("premium", "app", 2)]
        for key, app, want in cases:
            with self.subTest(key=key, app=app):
                self.assertEqual(decision(api.peek(name, app=app, key=key))["limit"], want)
                self.assertEqual(self.allowed(api, name, key, want + 2, app=app), want)
        # one key's bucket, whichever app asks: the exact key wins over the app
        self.assertEqual(decision(api.peek(name, app="app", key="premium_alice"))["limit"], 9)
        # the policy's shared bucket is matched by app only
        self.assertEqual(decision(api.peek(name, app="billing"))["limit"], 3)
        # AcquireBatch: each item under its own override's limits
        r = api.rpc_json("AcquireBatch", {"requests": [
            {"bucket": name, "app": "app", "key": "premium_zed"} for _ in range(6)] + [
            {"bucket": name, "app": "app", "key": "other"} for _ in range(3)]})
        self.assertEqual(r.status, 200, r)
        items = [x.get("response", x) for x in r.json()["results"]]
        self.assertEqual([x.get("allowed", False) for x in items],
                         [True] * 5 + [False] + [True, True, False], items)
        self.assertEqual([num(x, "limit") for x in items], [5] * 6 + [2] * 3, items)

    def test_forward_auth_applies_them_through_the_one_service(self):
        name = self.policy("ovf", max_permits=1, apps=("*",))
        self.sql("INSERT INTO gateway_rules (path_prefix, policy, key_source, key_header) "
                 "VALUES ('/%s/', '%s', 'header', 'X-User')" % (name, name))
        self.put(name, "key", "vip", max_permits=3)
        self.put(name, "key", "bad", action="block")
        http = self.api()

        def fa(user):
            return http.request("GET", "/v1/forward-auth/envoy/%s/x" % name, None,
                                {"X-User": user}).status
        wait_for("the rule and the block in force", lambda: fa("bad") == 429)
        self.assertEqual([fa("vip") for _ in range(4)], [200, 200, 200, 429])
        self.assertEqual([fa("plain") for _ in range(2)], [200, 429])

    def test_every_algorithm_under_an_override(self):
        for alg, (fields, ov) in ALGORITHMS.items():
            with self.subTest(algorithm=alg):
                name = self.policy("ova-" + alg.replace("_", "")[:8], max_permits=2, **fields)
                api = self.api()
                self.put(name, "key", "vip", max_permits=4, **ov)
                self.limit_seen(api, name, "vip", 4)
                self.assertEqual(self.allowed(api, name, "vip", 6), 4)
                self.assertEqual(self.allowed(api, name, "plain", 4), 2)
                self.assertEqual(decision(api.peek(name, key="vip"))["remaining"], 0)

    def test_block_answers_a_denial_with_the_reason_and_exempt_allows_and_counts(self):
        name = self.policy("ovb", max_permits=2)
        api = self.api()
        # notices are read in order: once the block is in force, so is the exemption
        self.put(name, "key", "healthcheck", action="exempt")
        self.put(name, "prefix", "abuser_", action="block")
        wait_for("the block in force",
                 lambda: api.acquire(name, key="abuser_0").json().get("reason"))
        r = api.acquire(name, key="abuser_1")
        m = r.json()
        self.assertFalse(decision(r)["allowed"], m)
        self.assertIn('blocked by override prefix "abuser_" of policy "%s"' % name,
                      m.get("reason", ""), m)
        self.assertGreater(decision(r)["retry_after_ms"], 0, m)
        # Redis was not asked: the key's bucket was never written
        self.assertEqual(decision(api.peek(name, key="abuser_1", app="app"))["remaining"], 0)
        self.assertEqual(self.bucket_keys(name, "abuser_1"), [])
        # exempt: every one allowed, flagged; the bucket counted the first two
        answers = [api.acquire(name, key="healthcheck") for _ in range(5)]
        for r in answers:
            self.assertTrue(decision(r)["allowed"], r)
            self.assertIs(r.json().get("exempt"), True, r.json())
        self.assertEqual(decision(api.peek(name, key="healthcheck"))["remaining"], 0)
        # a key no override names is the policy's
        self.assertEqual(self.allowed(api, name, "someone", 3), 2)

    def bucket_keys(self, name, key):
        r = Redis()
        try:
            return [k for k in (r("KEYS", self.prefix + "*") or [])
                    if (name in str(k)) and (key in str(k)) and ":r" not in str(k)]
        finally:
            r.close()

    def test_expiry_gives_the_policy_back(self):
        name = self.policy("ove", max_permits=1)
        api = self.api()
        self.put(name, "key", "temp", max_permits=50,
                 expires="NOW(6) + INTERVAL 3 SECOND")
        self.limit_seen(api, name, "temp", 50)
        self.assertTrue(decision(api.acquire(name, key="temp"))["allowed"])
        # once past expires_at, the policy's limit again (the row is kept)
        self.limit_seen(api, name, "temp", 1)
        self.assertEqual(self.sql("SELECT COUNT(*) FROM policy_overrides WHERE policy = '%s'"
                                  % name), [["1"]])

    def test_plain_sql_edit_in_force_within_a_sync_interval(self):
        name = self.policy("ovs", max_permits=2)
        api = self.api()
        self.put(name, "key", "k", max_permits=6, notify=False)
        self.limit_seen(api, name, "k", 6)
        self.sql("UPDATE policy_overrides SET max_permits = 8 WHERE policy = '%s'" % name)
        self.limit_seen(api, name, "k", 8)
        self.sql("DELETE FROM policy_overrides WHERE policy = '%s'" % name)
        self.limit_seen(api, name, "k", 2)
        # audited, as the MySQL user who ran it
        rows = self.sql("SELECT action FROM override_audit WHERE policy = '%s' ORDER BY id"
                        % name)
        self.assertEqual([r[0] for r in rows], ["create", "update", "delete"])

    def test_turning_an_override_on_reprices_nothing_earned(self):
        # 10 permits a second, max 1000: emptied, then 1.5 s later an
        # override of 0.001 a second comes into force. What accrued before
        # it came at 10/s (15 permits at least, however late the peek);
        # re-pricing the idle time at the override's rate would give ~0.
        name = self.policy("ovr", max_permits=1000, rate="10")
        api = self.api()
        r = api.acquire(name, key="k", permits=1000)
        self.assertTrue(decision(r)["allowed"], r)
        time.sleep(1.5)
        self.put(name, "key", "k", max_permits=999, rate=0.001)
        self.limit_seen(api, name, "k", 999)
        d = decision(api.peek(name, key="k"))
        self.assertGreaterEqual(d["remaining"], 14, d)
        self.assertLess(d["remaining"], 999, d)

    def test_hostile_rows_never_let_anything_through_unlimited(self):
        name = self.policy("ovh", max_permits=2)
        api = self.api()
        # A DBA switched the CHECKs off: rows the engine must skip.
        self.sql("SET SESSION check_constraint_checks = 0; "
                 "INSERT INTO policy_overrides (policy, match_kind, match_value, action, "
                 "max_permits) VALUES "
                 "('%s', 'key', 'a', 'allow', NULL), ('%s', 'bogus', 'b', 'limit', 5), "
                 "('%s', 'key', 'c', 'limit', -5), ('%s', 'key', 'd', 'limit', 0), "
                 "('%s', 'key', 'e', 'limit', 9223372036854775807), "
                 "('%s', 'key', '', 'exempt', NULL)" % ((name,) * 6))
        self.put(name, "key", "ok", max_permits=3)
        self.limit_seen(api, name, "ok", 3)
        for key in ("a", "b", "c", "d", "e"):
            with self.subTest(key=key):
                self.assertEqual(self.allowed(api, name, key, 4), 2)
        self.assertEqual(self.allowed(api, name, "", 4), 2)
        # odd but valid values: control bytes, the longest value, a tiny rate
        odd = "\u2603" * 85 + "x"    # 256 bytes: the longest key
        self.put(name, "key", odd, max_permits=4, rate=0.000000000001)
        self.limit_seen(api, name, odd, 4)
        self.assertEqual(self.allowed(api, name, odd, 6), 4)


class OverrideNoticeTest(OverrideCase):
    """Two instances, their sync far off: only the change notice can bring
    an override in force on the instance that did not see the write."""

    SYNC_INTERVAL_MS = 600000

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        try:
            cls.b = Permitd(prefix=cls.prefix,
                            args=["--mysql-url", cls.mysql_url,
                                  "--sync-interval-ms", str(cls.SYNC_INTERVAL_MS)])
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        b = getattr(cls, "b", None)
        cls.b = None
        try:
            if b is not None:
                code = b.stop()
                if code != 0:
                    raise RuntimeError("permitd b exited with %d:\n%s" % (code, b.output()))
        finally:
            super().tearDownClass()

    def policy_on_both(self, prefix, max_permits=2, **fields):
        name = self.policy(prefix, max_permits=max_permits, **fields)
        api_b = self.b.http()
        wait_for("the policy on b", lambda: api_b.peek(name).status == 200)
        return name, api_b

    def test_change_by_notice_seen_on_another_instance(self):
        name, api_b = self.policy_on_both("ovn", max_permits=2)
        self.put(name, "key", "k", max_permits=7)
        self.limit_seen(api_b, name, "k", 7)
        self.sql("UPDATE policy_overrides SET action = 'block', max_permits = NULL "
                 "WHERE policy = '%s'" % name)
        self.notify(name)
        wait_for("the block on b", lambda: decision(api_b.acquire(name, key="k"))["allowed"]
                 is False and api_b.acquire(name, key="k").json().get("reason"))

    def test_two_instances_hold_one_override_bound(self):
        name, api_b = self.policy_on_both("ovx", max_permits=2)
        api_a = self.api()
        self.put(name, "prefix", "team_", max_permits=9)
        self.limit_seen(api_a, name, "team_1", 9)
        self.limit_seen(api_b, name, "team_1", 9)
        got = 0
        for i in range(14):
            api = api_a if i % 2 == 0 else api_b
            got += 1 if decision(api.acquire(name, key="team_1"))["allowed"] else 0
        self.assertEqual(got, 9)

    def test_deny_cache_never_denies_a_key_whose_override_was_just_raised(self):
        # b's deny cache (on by default) holds the key's denial for an hour
        name, api_b = self.policy_on_both("ovd", max_permits=1, rate="0.0003")
        self.assertTrue(decision(api_b.acquire(name, key="k"))["allowed"])
        for _ in range(3):
            d = decision(api_b.acquire(name, key="k"))
            self.assertFalse(d["allowed"])
            self.assertGreater(d["retry_after_ms"], 60000)
        # raised: a faster rate from now on (nothing earned before is re-priced)
        self.put(name, "key", "k", max_permits=10, rate=1000)
        wait_for("the raised override on b",
                 lambda: decision(api_b.acquire(name, key="k"))["allowed"])


if __name__ == "__main__":
    unittest.main()
