"""The traffic history (issue 39): decisions per policy, app and minute in
MySQL's traffic_minutes (migration 0017), written by every instance
(control/trafficlog.c) and read by TrafficService.

- Two instances add up: the history's sums over the last hour are what
  both instances answered, per policy, per app and per policy x app; each
  (policy, minute, app) is one row whatever the instances.
- A restart loses nothing: the history is in MySQL, and a new instance
  adds on top of it.
- An instance killed (SIGKILL) loses at most what it had not flushed: what
  it flushed is there, never more than it answered; the other instance's
  counts are whole. One stopped cleanly (SIGTERM) loses nothing, even with
  a minute between flushes.
- Rows past --traffic-history-days are deleted; the ones inside stay.
- The ranges' buckets and unit are fixed; bad ranges, names, groupings and
  no session are refused.
"""
import os
import re
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Permitd, decision, error_code, wait_for  # noqa: E402
from test_admin import AdminCase, num  # noqa: E402

TRAFFIC = "permit.v1.TrafficService"
COUNTERS = ("allowed", "denied", "shadowDenied", "errors", "passes")


class TrafficTest(AdminCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.others = []

    @classmethod
    def start(cls, *extra):
        p = Permitd(prefix=cls.prefix,
                    args=["--mysql-url", cls.mysql_url, "--sync-interval-ms",
                          str(cls.SYNC_INTERVAL_MS)] + list(extra))
        cls.others.append(p)
        return p

    @classmethod
    def tearDownClass(cls):
        for p in getattr(cls, "others", []):
            if p.proc.poll() is None:
                p.stop(signal.SIGKILL)
        super().tearDownClass()

    def series(self, c, policy="", app="", rng="1h"):
        return c.ok(c.call(TRAFFIC, "GetTrafficSeries",
                           {"policy": policy, "app": app, "range": rng}))

    def sums(self, c, policy="", app="", rng="1h"):
        s = self.series(c, policy, app, rng)
        return {k: sum(int(v) for v in s.get(k, [])) for k in COUNTERS}

    def totals(self, c, **msg):
        r = c.ok(c.call(TRAFFIC, "GetTrafficTotals", msg))
        return [{k: (t.get(k, "") if k in ("policy", "app") else num(t, k))
                 for k in ("policy", "app") + COUNTERS} for t in r.get("totals", [])]

    def send(self, http, name, n, app="app"):
        """n Acquires of name as app: {allowed, denied} as answered."""
        got = {"allowed": 0, "denied": 0}
        for _ in range(n):
            d = decision(http.acquire(name, app=app))
            got["allowed" if d["allowed"] else "denied"] += 1
        return got

    def ready(self, http, name, app="app"):
        wait_for("policy %s on the instance" % name,
                 lambda: http.peek(name, app=app).status == 200)

    def test_two_instances_add_up_per_policy_and_app_and_survive_a_restart(self):
        ed = self.editor()
        name = self.name("hist")
        ed.create(name, max_permits=5, rate="0.001", apps=("app", "other"))
        a = self.start("--traffic-flush-ms", "1000")
        b = self.start("--traffic-flush-ms", "1000")
        ha, hb = a.http(), b.http()
        self.ready(ha, name)
        self.ready(hb, name, app="other")
        got_a = self.send(ha, name, 7, app="app")
        got_b = self.send(hb, name, 4, app="other")
        r = ha.acquire(name, app="app", permits=50)     # out_of_range: an error of a real policy
        self.assertEqual(error_code(r), "out_of_range", r)
        self.assertEqual(got_a["allowed"] + got_b["allowed"], 5, (got_a, got_b))
        want = {"allowed": 5, "denied": 6, "shadowDenied": 0, "errors": 1, "passes": 0}
        wait_for("both instances' counts in the history",
                 lambda: self.sums(ed, name) == want, timeout=90)
        # Per app, and per policy x app, as each instance answered its own app.
        self.assertEqual(self.sums(ed, name, "app"),
                         dict(want, allowed=got_a["allowed"], denied=got_a["denied"]))
        self.assertEqual(self.sums(ed, name, "other"),
                         dict(want, allowed=got_b["allowed"], denied=got_b["denied"], errors=0))
        by_app = {t["app"]: t for t in self.totals(ed, groupBy="policy_app", policy=name)}
        self.assertEqual(set(by_app), {"app", "other"}, by_app)
        self.assertEqual(by_app["other"]["denied"], got_b["denied"])
        apps = self.totals(ed, groupBy="app", policy=name)
        self.assertEqual(sorted((t["app"], t["allowed"] + t["denied"]) for t in apps),
                         [("app", 7), ("other", 4)])
        # An app's policies (the app page).
        of_other = {t["policy"]: t for t in self.totals(ed, groupBy="policy", app="other",
                                                        limit=1000)}
        self.assertEqual(of_other[name]["allowed"] + of_other[name]["denied"], 4, of_other)
        pols = {t["policy"]: t for t in self.totals(ed, groupBy="policy", limit=1000)}
        self.assertEqual(pols[name]["denied"], 6, pols)
        # The hours hold the same sums (the totals read them).
        self.assertEqual(self.sql("SELECT SUM(allowed), SUM(denied), SUM(errors) FROM traffic_hours "
                                  "WHERE policy = '%s'" % name), [["5", "6", "1"]])
        # The fleet's series (no policy, no app): the rows of every policy's sum.
        fleet = self.sums(ed)
        self.assertGreaterEqual(fleet["denied"], 6)
        self.assertEqual(fleet, {k: int(v or 0) for k, v in zip(COUNTERS, self.sql(
            "SELECT SUM(allowed), SUM(denied), SUM(shadow_denied), SUM(errors), SUM(passes) "
            "FROM traffic_minutes WHERE policy <> '*' AND minute_unix >= %d"
            % (int(time.time()) // 60 * 60 - 3540))[0])})
        # The list's trend: 12 buckets of 5 minutes of each policy asked.
        tr = ed.ok(ed.call(TRAFFIC, "GetTrafficTrends", {"policies": [name, "no-such"]}))
        self.assertEqual(tr["stepSeconds"], 300)
        self.assertEqual([t["policy"] for t in tr["trends"]], [name, "no-such"])
        self.assertEqual(len(tr["trends"][0]["allowed"]), 12)
        self.assertEqual(sum(int(x) for x in tr["trends"][0]["denied"]), 6)
        self.assertEqual(sum(int(x) for x in tr["trends"][1].get("denied", [])), 0)
        # ... and the sums the list's fleet orders sort by (this hour and the last).
        self.assertEqual((num(tr["trends"][0], "hoursAllowed"), num(tr["trends"][0], "hoursDenied")),
                         (5, 6))
        self.assertEqual(num(tr, "hoursStartUnix") % 3600, 0)
        self.assertEqual(num(tr["trends"][0], "hoursKeyed"), 0)     # the shared bucket's
        self.assertGreater(num(tr, "hoursStartUnix"), time.time() - 7200)
        # One row per (policy, minute, app): the instances added into it.
        rows = self.sql("SELECT app, COUNT(*) FROM traffic_minutes WHERE policy = '%s' "
                        "GROUP BY app, minute_unix HAVING COUNT(*) > 1" % name)
        self.assertEqual(rows, [], rows)
        # Read again later: nothing is added twice.
        time.sleep(2.5)
        self.assertEqual(self.sums(ed, name), want)
        # /metrics: the writer's flushes and rows.
        text = a.admin().request("GET", "/metrics").body.decode()
        ok = re.search(r'^permitd_traffic_flushes_total\{result="ok"\} (\d+)$', text, re.M)
        self.assertIsNotNone(ok, text)
        self.assertGreaterEqual(int(ok.group(1)), 1)
        self.assertRegex(text, r"(?m)^permitd_traffic_rows_total [1-9]\d*$")

        # A restart: both gone, a new instance reads the same and adds on top.
        self.assertEqual(a.stop(), 0, a.output())
        self.assertEqual(b.stop(), 0, b.output())
        c = self.start("--traffic-flush-ms", "1000")
        cc = self.client_on(c)
        self.assertEqual(self.sums(cc, name), want)
        hc = c.http()
        self.ready(hc, name)
        more = self.send(hc, name, 3)
        self.assertEqual(more["denied"], 3)
        wait_for("the new instance's counts on top", lambda: self.sums(
            cc, name) == dict(want, denied=9), timeout=90)
        self.assertEqual(c.stop(), 0, c.output())

    def client_on(self, p):
        from test_admin import AdminClient, EDITOR, EDITOR_PW
        c = AdminClient(self, p.admin_port)
        self.ok_login(c, EDITOR, EDITOR_PW)
        return c

    def test_a_killed_instance_loses_at_most_what_it_had_not_flushed(self):
        ed = self.editor()
        name = self.name("kill")
        ed.create(name, max_permits=1000, rate="1", apps=("app", "other"))
        k = self.start("--traffic-flush-ms", "1000")
        s = self.start("--traffic-flush-ms", "1000")
        hk, hs = k.http(), s.http()
        self.ready(hk, name)
        self.ready(hs, name, app="other")
        self.assertEqual(self.send(hk, name, 6)["allowed"], 6)
        wait_for("the first six flushed",
                 lambda: self.sums(ed, name, "app")["allowed"] == 6, timeout=90)
        self.assertEqual(self.send(hk, name, 5)["allowed"], 5)
        k.stop(signal.SIGKILL)
        self.assertEqual(self.send(hs, name, 4, app="other")["allowed"], 4)
        wait_for("the survivor's counts",
                 lambda: self.sums(ed, name, "other")["allowed"] == 4, timeout=90)
        time.sleep(2.5)         # the killed one's flushes, had any survived, would show by now
        lost = self.sums(ed, name, "app")["allowed"]
        self.assertGreaterEqual(lost, 6)
        self.assertLessEqual(lost, 11)
        self.assertEqual(self.sums(ed, name, "other")["allowed"], 4)
        self.assertEqual(s.stop(), 0, s.output())

        # Stopped cleanly, a minute between flushes: the last flush at the stop.
        q = self.start()        # --traffic-flush-ms 60000, the default
        hq = q.http()
        self.ready(hq, name, app="other")
        self.assertEqual(self.send(hq, name, 3, app="other")["allowed"], 3)
        self.assertEqual(q.stop(), 0, q.output())
        self.assertEqual(self.sums(ed, name, "other")["allowed"], 7)

    def test_takes_with_a_key_are_counted_as_keyed(self):
        ed = self.editor()
        name = self.name("keyed")
        ed.create(name, max_permits=100, rate="1")
        p = self.start("--traffic-flush-ms", "1000")
        http = p.http()
        self.ready(http, name)
        for i in range(3):
            self.assertTrue(decision(http.acquire(name, key="user-%d" % i))["allowed"])
        self.assertTrue(decision(http.acquire(name))["allowed"])     # the shared bucket

        def keyed():
            t = ed.ok(ed.call(TRAFFIC, "GetTrafficTrends", {"policies": [name]}))["trends"][0]
            return num(t, "hoursAllowed"), num(t, "hoursKeyed")
        wait_for("4 allowed, 3 with a key", lambda: keyed() == (4, 3), timeout=90)
        self.assertEqual(p.stop(), 0, p.output())

    def test_rows_past_the_retention_are_deleted(self):
        ed = self.editor()
        name = self.name("old")
        now = int(time.time()) // 60 * 60
        old, kept = now - 31 * 86400, now - 29 * 86400
        for t, col in (("traffic_minutes", "minute_unix"), ("traffic_hours", "hour_unix")):
            at = (lambda x: x) if col == "minute_unix" else (lambda x: x - x % 3600)
            self.sql("INSERT INTO %s (policy, %s, app, allowed, denied) VALUES "
                     "('%s', %d, 'app', 5, 1), ('%s', %d, 'app', 7, 2)"
                     % (t, col, name, at(old), name, at(kept)))
        p = self.start("--traffic-flush-ms", "1000", "--traffic-history-days", "30")
        wait_for("the 31-day-old row deleted", lambda: self.sql(
            "SELECT COUNT(*) FROM traffic_minutes WHERE policy = '%s' AND minute_unix = %d"
            % (name, old)) == [["0"]], timeout=90)
        self.assertEqual(self.sql("SELECT allowed FROM traffic_minutes WHERE policy = '%s'"
                                  % name), [["7"]])
        wait_for("the 31-day-old hour deleted", lambda: self.sql(
            "SELECT allowed FROM traffic_hours WHERE policy = '%s'" % name) == [["7"]])
        self.assertEqual(self.sums(ed, name, rng="30d")["allowed"], 7)
        self.assertEqual(self.sums(ed, name, rng="24h")["allowed"], 0)
        text = p.admin().request("GET", "/metrics").body.decode()
        self.assertRegex(text, r"(?m)^permitd_traffic_pruned_rows_total [1-9]\d*$")
        self.assertEqual(p.stop(), 0, p.output())

    def test_ranges_have_fixed_buckets_and_a_unit(self):
        vi = self.viewer()
        for rng, step, n in (("", 60, 60), ("1h", 60, 60), ("24h", 300, 288),
                             ("7d", 3600, 168), ("30d", 7200, 360)):
            s = self.series(vi, rng=rng)
            self.assertEqual(s["stepSeconds"], step, s)
            self.assertEqual(s["unit"], "decisions per minute")
            self.assertEqual(len(s.get("allowed", [])), n, rng)
            self.assertEqual(len(s.get("denied", [])), n, rng)
            self.assertEqual(num(s, "startUnix") % step, 0)
            end = num(s, "startUnix") + n * step
            self.assertTrue(end - step <= time.time() < end + 5, s)
            self.assertEqual(s["retentionDays"], 30)
            self.assertEqual(s["flushSeconds"], 60)

    def test_bad_requests_are_refused_naming_the_field(self):
        vi = self.viewer()
        for method, msg, field in (
                ("GetTrafficSeries", {"range": "2h"}, "range"),
                ("GetTrafficSeries", {"policy": "no such'name"}, "policy"),
                ("GetTrafficSeries", {"app": "x" * 200}, "app"),
                ("GetTrafficTotals", {"groupBy": "key"}, "group_by"),
                ("GetTrafficTotals", {"orderBy": "name; DROP"}, "order_by"),
                ("GetTrafficTotals", {"limit": 5000}, "limit")):
            r = vi.call(TRAFFIC, method, msg)
            self.assertEqual(error_code(r), "invalid_argument", (method, msg, r))
            self.assertIn(field, r.json()["message"], r)
        r = self.client().call(TRAFFIC, "GetTrafficSeries", {})
        self.assertEqual(error_code(r), "unauthenticated", r)

    def test_the_policy_list_sorts_by_the_fleets_last_hours(self):
        ed = self.editor()
        tag = self.name("ord")
        names = ["%s-%s" % (tag, x) for x in ("a", "b", "c")]
        for n in names:
            ed.create(n)
        now = int(time.time())
        hour = now - now % 3600
        # a: 50 of 100 denied; b: 90 of 1000; c: none.
        self.sql("INSERT INTO traffic_hours (policy, hour_unix, app, allowed, denied) VALUES "
                 "('%s', %d, 'app', 50, 50), ('%s', %d, 'app', 910, 90)"
                 % (names[0], hour, names[1], hour))

        def order(by):
            r = ed.ok(ed.p("ListPolicies", {"filter": tag, "orderBy": by, "descending": True}))
            return [p["name"] for p in r.get("policies", [])]
        self.assertEqual(order("denied"), [names[1], names[0], names[2]])
        self.assertEqual(order("denied_share"), [names[0], names[1], names[2]])
        self.assertEqual(order("decided"), [names[1], names[0], names[2]])
        r = ed.p("ListPolicies", {"orderBy": "speed"})
        self.assertEqual(error_code(r), "invalid_argument", r)
        self.assertIn("denied_share", r.json()["message"])

    def test_totals_order_by_share_denied(self):
        ed = self.editor()
        now = int(time.time()) // 60 * 60
        many, share = self.name("many"), self.name("share")
        # many: 100 denied of 1100; share: 4 denied of 5.
        hour = now - now % 3600
        self.sql("INSERT INTO traffic_hours (policy, hour_unix, app, allowed, denied) VALUES "
                 "('%s', %d, '', 1000, 100), ('%s', %d, '', 1, 4)" % (many, hour, share, hour))
        by_denied = [t["policy"] for t in self.totals(ed, limit=1000)
                     if t["policy"] in (many, share)]
        by_share = [t["policy"] for t in self.totals(ed, orderBy="denied_share", limit=1000)
                    if t["policy"] in (many, share)]
        self.assertEqual(by_denied, [many, share])
        self.assertEqual(by_share, [share, many])


if __name__ == "__main__":
    unittest.main()
