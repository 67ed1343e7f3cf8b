"""The fleet as one (issue 23, "Fleet-wide traffic", "Instances and health"):
two permitd instances on one Redis and one MariaDB, traffic through both.

- FleetService.GetFleetStats: the fleet's totals over a closed period equal
  the sum of what both instances answered (allowed, denied, errors), at
  every range (5m at 1 s, 1h at 10 s, 1d at 1 min), and the per-instance
  series are each instance's own answers; they stay equal on later reads
  (a count written twice would show).
- GetFleetTraffic: the last minute's totals of the policy list.
- ListInstances: both heartbeats with their fields (and /metrics counts
  the publisher's writes, commands and bytes); an instance killed
  (SIGKILL) drops off after --fleet-heartbeat-ttl; one stopped cleanly at
  once; one started with --fleet-publish-ms 0 publishes nothing.
- A write Redis refuses is carried into the next tick: nothing lost.
- Redis down: ListPolicies says why the buckets are unknown
  (buckets_error), the fleet's RPCs answer unavailable, not zeros.
- Who may call: a session is needed; a bad range names itself.
"""
import os
import re
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Permitd, Redis, decision, error_code, wait_for  # noqa: E402
from test_admin import AdminCase, AdminClient, num  # noqa: E402

FLEET = "permit.v1.FleetService"
TTL = 3     # --fleet-heartbeat-ttl of the instances started here


def sums(series):
    """{counter: sum} of a FleetSeries JSON object."""
    return {k: sum(int(v) for v in series.get(k, [])) for k in ("allowed", "denied", "errors",
                                                               "passes")}


class FleetTest(AdminCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.others = []
        try:
            cls.b = cls.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start(cls, *extra):
        p = Permitd(prefix=cls.prefix,
                    args=["--mysql-url", cls.mysql_url, "--sync-interval-ms", str(cls.SYNC_INTERVAL_MS),
                          "--fleet-heartbeat-ttl", str(TTL)] + list(extra))
        cls.others.append(p)
        return p

    @classmethod
    def tearDownClass(cls):
        for p in getattr(cls, "others", []):
            p.stop(signal.SIGKILL if p.proc.poll() is None else signal.SIGTERM)
        super().tearDownClass()

    def f(self, c, method, msg=None):
        return c.call(FLEET, method, msg or {})

    def instances(self, c):
        return c.ok(self.f(c, "ListInstances")).get("instances", [])

    def by_address(self, c):
        return {i["address"]: i for i in self.instances(c)}

    def test_fleet_totals_are_the_sum_of_both_instances(self):
        ed = self.editor()
        name = self.name("fleet")
        ed.create(name, max_permits=5, rate="0.001")
        a, b = self.api(), self.b.http()
        # Peek is no Acquire: it is not counted.
        wait_for("the policy on both instances",
                 lambda: a.peek(name).status == 200 and b.peek(name).status == 200)
        sent = {}
        for inst, http, n in (("a", a, 7), ("b", b, 4)):
            got = {"allowed": 0, "denied": 0, "errors": 0}
            for _ in range(n):
                d = decision(http.acquire(name))
                got["allowed" if d["allowed"] else "denied"] += 1
            # permits over max_permits: out_of_range, an error of a real policy
            r = http.acquire(name, permits=50)
            self.assertEqual(error_code(r), "out_of_range", r)
            got["errors"] += 1
            sent[inst] = got
        ids = {}
        ports = {"a": self.permitd.port, "b": self.b.port}
        for i in self.instances(ed):
            for inst, port in ports.items():
                if i["address"] == "127.0.0.1:%d" % port:
                    ids[inst] = i["id"]
        self.assertEqual(set(ids), {"a", "b"}, self.instances(ed))
        want = {}
        for k in ("allowed", "denied", "errors"):
            want[k] = sent["a"][k] + sent["b"][k]
        self.assertEqual(want["allowed"], 5, sent)      # one bucket shared by both

        def stats(rng="5m", per=True):
            return ed.ok(self.f(ed, "GetFleetStats", {"policy": name, "range": rng,
                                                      "perInstance": per}))

        def settled():
            s = stats()
            return s if sums(s["fleet"]) == dict(want, passes=0) else None
        s = wait_for("the fleet's totals to hold every decision", settled, timeout=10)
        time.sleep(2.5)     # a tick or two more: nothing may be counted twice
        s = stats()
        tot = sums(s["fleet"])
        self.assertEqual(tot, dict(want, passes=0), s["fleet"])
        per = {i["instance"]: sums(i) for i in s.get("instances", [])}
        self.assertEqual(set(per), {ids["a"], ids["b"]}, s.get("instances"))
        for inst in ("a", "b"):
            got = per[ids[inst]]
            self.assertEqual(got, dict(sent[inst], passes=0), (inst, s.get("instances")))
        for k in ("allowed", "denied", "errors", "passes"):
            self.assertEqual(tot[k], per[ids["a"]][k] + per[ids["b"]][k], (k, tot, per))
        self.assertEqual(tot["passes"], 0, tot)
        self.assertEqual(num(s, "stepSeconds"), 1, s)
        self.assertEqual(len(s["fleet"]["allowed"]), 300, s)
        # The same counts at the coarser resolutions, and in the list's
        # last-minute column.
        for rng, step, n in (("1h", 10, 360), ("1d", 60, 1440)):
            c = stats(rng, per=False)
            self.assertEqual(num(c, "stepSeconds"), step, c)
            self.assertEqual(len(c["fleet"]["denied"]), n, c)
            self.assertEqual(sums(c["fleet"]), tot, (rng, c["fleet"]))
            self.assertNotIn("instances", c)
        # a name that is not valid (a row the sync skips) is left out
        t = ed.ok(self.f(ed, "GetFleetTraffic", {"policies": [name, "not valid", self.name("idle")]}))
        self.assertEqual(num(t, "seconds"), 60, t)
        row, idle = t["traffic"]
        self.assertEqual(row["policy"], name, t)
        self.assertEqual({k: num(row, k) for k in ("allowed", "denied", "errors")},
                         {k: tot[k] for k in ("allowed", "denied", "errors")}, t)
        self.assertEqual(num(idle, "allowed") + num(idle, "denied"), 0, t)

    @unittest.skipIf(harness.redis_mode() == "cluster",
                     "the key is put in the way through the single Redis's client")
    def test_a_write_redis_refuses_is_carried_into_the_next(self):
        # A resolution's write that Redis refuses (here: its key holds a
        # string, WRONGTYPE) must not be dropped: the next tick writes the
        # difference again, so the totals over a closed period stay exact.
        ed = self.editor()
        name = self.name("carry")
        ed.create(name, max_permits=100, rate="1")
        a = self.api()
        wait_for("the policy", lambda: a.peek(name).status == 200)
        r = Redis()
        now = int(time.time())
        blocked = ["%sfleet:1s:%s:%d" % (self.prefix, name, s)
                   for s in range(now - now % 60, now + 180, 60)]
        try:
            for k in blocked:
                r("SET", k, "in the way")
            for _ in range(6):
                self.assertTrue(decision(a.acquire(name))["allowed"])
            hour = lambda: sums(ed.ok(self.f(ed, "GetFleetStats",   # noqa: E731
                                             {"policy": name, "range": "1h"}))["fleet"])
            wait_for("the 10 s resolution written", lambda: hour()["allowed"] == 6)
            time.sleep(2.2)     # two more ticks whose 1 s writes are refused
            f = self.f(ed, "GetFleetStats", {"policy": name, "range": "5m"})
            self.assertNotEqual(f.status, 200, f)       # WRONGTYPE: an error, not zeros
        finally:
            for k in blocked:
                r("DEL", k)
            r.close()
        five = lambda: sums(ed.ok(self.f(ed, "GetFleetStats",     # noqa: E731
                                         {"policy": name, "range": "5m"}))["fleet"])
        wait_for("the 1 s resolution written late", lambda: five()["allowed"] == 6, timeout=5)
        time.sleep(1.5)
        self.assertEqual(five(), {"allowed": 6, "denied": 0, "errors": 0, "passes": 0})
        self.assertEqual(hour()["allowed"], 6)
        text = self.permitd.admin().request("GET", "/metrics").body.decode()
        m = re.search(r'^permitd_fleet_publishes_total\{result="failed"\} (\d+)$', text, re.M)
        self.assertGreaterEqual(int(m.group(1)), 2, text[-2000:])

    def test_instances_are_listed_with_their_heartbeat(self):
        vi = self.viewer()
        got = wait_for("both instances listed",
                       lambda: (lambda m: m if len([a for a in m if a in (
                           "127.0.0.1:%d" % self.permitd.port, "127.0.0.1:%d" % self.b.port)]) == 2
                                else None)(self.by_address(vi)))
        me = got["127.0.0.1:%d" % self.permitd.port]
        self.assertTrue(me.get("self"), me)
        other = got["127.0.0.1:%d" % self.b.port]
        self.assertFalse(other.get("self", False), other)
        for i in (me, other):
            self.assertRegex(i["id"], r"^[A-Za-z0-9.-]+:\d+@\d+$", i)
            self.assertTrue(i["version"], i)
            self.assertGreater(num(i, "threads"), 0, i)
            self.assertLessEqual(abs(num(i, "startedUnix") - time.time()), 600, i)
            self.assertLessEqual(abs(num(i, "seenUnix") - time.time()), 5, i)
            self.assertEqual(i["redis"], "ok", i)
            self.assertEqual(i["mysql"], "ok", i)
            self.assertGreaterEqual(num(i, "syncLagMs"), 0, i)
            self.assertLess(num(i, "syncLagMs"), 30000, i)
            self.assertGreater(num(i, "connectionsMax"), 0, i)
            self.assertRegex(i["adminAddress"], r"^127\.0\.0\.1:\d+$", i)
        self.assertEqual(me["adminAddress"], "127.0.0.1:%d" % self.permitd.admin_port, me)
        # /metrics: the publisher's writes, their commands and bytes
        text = self.permitd.admin().request("GET", "/metrics").body.decode()
        got = dict(re.findall(r'^(permitd_fleet_\w+(?:\{[^}]*\})?) (\d+)$', text, re.M))
        self.assertGreater(int(got.get('permitd_fleet_publishes_total{result="ok"}', 0)), 0, got)
        # (failed ones: test_a_write_redis_refuses_is_carried_into_the_next)
        self.assertIn('permitd_fleet_publishes_total{result="failed"}', got)
        self.assertGreaterEqual(int(got.get("permitd_fleet_commands_total", 0)),
                                3 * int(got['permitd_fleet_publishes_total{result="ok"}']), got)
        self.assertGreater(int(got.get("permitd_fleet_bytes_total", 0)),
                           20 * int(got.get("permitd_fleet_commands_total", 0)), got)

    def test_a_busy_policy_costs_three_commands_a_tick_and_its_keys_expire(self):
        # A policy with traffic every second: one HSET per resolution a tick
        # (1 s, 10 s, 1 min); its slab's EXPIREAT only with the instance's
        # first write into the slab (and once a minute), not with every
        # HSET; the heartbeat an HSET, an EXPIRE and a ZADD. 6 commands a
        # tick, where an EXPIREAT per HSET and the set's prune every tick
        # made 11. Every key still has its expiry.
        ed = self.editor()
        name = self.name("busy")
        ed.create(name, max_permits=100000, rate="1000")
        c = self.start()
        http = c.http()
        wait_for("the policy", lambda: http.peek(name).status == 200)

        def counters():
            text = c.admin().request("GET", "/metrics").body.decode()
            got = dict(re.findall(r'^(permitd_fleet_\w+(?:\{[^}]*\})?) (\d+)$', text, re.M))
            return (int(got.get("permitd_fleet_commands_total", 0)),
                    int(got.get('permitd_fleet_publishes_total{result="ok"}', 0)),
                    int(got.get('permitd_fleet_publishes_total{result="failed"}', 0)))

        def busy(seconds):
            end = time.time() + seconds
            while time.time() < end:
                self.assertTrue(decision(http.acquire(name))["allowed"])
                time.sleep(0.1)

        busy(2.5)           # the first writes into each slab, with their EXPIREATs
        cmds0, ok0, failed0 = counters()
        busy(5.2)
        cmds1, ok1, failed1 = counters()
        ticks = ok1 - ok0
        self.assertGreaterEqual(ticks, 4, (ok0, ok1))
        self.assertEqual(failed1, failed0)
        per_tick = (cmds1 - cmds0) / ticks
        sys.stderr.write("\nfleet publisher, one busy policy: %.2f commands a tick over %d ticks\n"
                         % (per_tick, ticks))
        # 6 a tick, plus at most one minute's refresh of the 3 EXPIREATs and
        # the set's 2 upkeep commands within the window.
        self.assertLessEqual(per_tick, 6 + 5.0 / ticks, (cmds0, cmds1, ticks))
        r = Redis()
        try:
            now = int(time.time())
            for res, slab_s, keep_s in (("1s", 60, 300), ("10s", 600, 3600), ("1m", 3600, 86400)):
                # the slab written last (the tick closes the second before now)
                slabs = {t - t % slab_s for t in (now - 2, now - 1, now)}
                keys = [k for k in ("%sfleet:%s:%s:%d" % (self.prefix, res, name, s) for s in slabs)
                        if r("EXISTS", k)]
                self.assertTrue(keys, (res, slabs))
                for k in keys:
                    slab = int(k.rsplit(":", 1)[1])
                    self.assertEqual(r("EXPIRETIME", k), slab + slab_s + keep_s, k)
        finally:
            r.close()

    def test_an_instance_that_dies_drops_off_and_one_stopped_leaves_at_once(self):
        vi = self.viewer()
        killed, stopped = self.start(), self.start()
        off = self.start("--fleet-publish-ms", "0")
        addr = lambda p: "127.0.0.1:%d" % p.port    # noqa: E731
        wait_for("the new instances listed",
                 lambda: {addr(killed), addr(stopped)} <= set(self.by_address(vi)))
        # SIGKILL: nothing is cleaned up; the heartbeat expires after TTL s.
        killed.stop(signal.SIGKILL)
        t0 = time.time()
        self.assertIn(addr(killed), self.by_address(vi))
        wait_for("the killed instance gone", lambda: addr(killed) not in self.by_address(vi),
                 timeout=TTL + 30)   # a deadline, not the TTL's precision (loaded machines)
        self.assertGreaterEqual(time.time() - t0, TTL - 2.0)
        # SIGTERM: the heartbeat goes with the instance.
        self.assertEqual(stopped.stop(), 0, stopped.output())
        self.assertNotIn(addr(stopped), self.by_address(vi))
        # --fleet-publish-ms 0: never listed.
        self.assertNotIn(addr(off), self.by_address(vi))

    def test_the_list_says_when_redis_does_not_answer(self):
        # Issue 23: with Redis down the gauges read 0 / N, as if every
        # bucket were empty; ListPolicies now says why they are unknown.
        ed = self.editor()
        name = self.name("down")
        ed.create(name, max_permits=9, rate="1")
        r = ed.ok(ed.p("ListPolicies", {"includeBuckets": True, "filter": name}))
        self.assertEqual(r.get("bucketsError", ""), "", r)
        dead = harness.free_port()
        down = Permitd(prefix=self.prefix, redis_url="redis://127.0.0.1:%d" % dead,
                       args=["--mysql-url", self.mysql_url, "--redis-timeout-ms", "200"])
        self.others.append(down)
        c = AdminClient(self, down.admin_port, ed.cookie)     # sessions live in MySQL
        r = c.ok(c.p("ListPolicies", {"includeBuckets": True, "filter": name}))
        self.assertEqual([p["name"] for p in r["policies"]], [name], r)
        self.assertIn(str(dead), r.get("bucketsError", ""), r)
        self.assertEqual(num(r["buckets"][0], "limit"), 9, r)
        # and the fleet's figures are an error, not zeros
        f = c.call(FLEET, "GetFleetStats", {"policy": name})
        self.assertEqual(error_code(f), "unavailable", f)
        f = c.call(FLEET, "ListInstances", {})
        self.assertEqual(error_code(f), "unavailable", f)

    def test_calls_need_a_session_and_a_real_range(self):
        c = self.client()
        r = self.f(c, "ListInstances")
        self.assertEqual(r.status, 401, r)
        vi = self.viewer()
        r = self.f(vi, "GetFleetStats", {"policy": "x", "range": "2w"})
        self.assertEqual(error_code(r), "invalid_argument", r)
        self.assertIn('"2w"', r.json()["message"])
        r = self.f(vi, "GetFleetStats", {"policy": "no such/name", "range": "5m"})
        self.assertEqual(error_code(r), "invalid_argument", r)


if __name__ == "__main__":
    unittest.main()
