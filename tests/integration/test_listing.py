"""ListPolicies a page at a time (issue 22), against real MariaDB and Redis.

The admin policy list at 10,000 policies cannot be one answer: ListPolicies
pages on the server (page_size, an opaque page_token), filters (name, app,
description; substring, without case), orders by name, traffic or level,
and says how many match (total_size). The gauges of a page come from Redis
in one pipelined round trip, through the limiter's Peek batch: counted here
by permitd's own /metrics (permitd_redis_script_calls_total; Redis's INFO
commandstats counts the calls of every test ctest runs at the time). And the admin listener's /readyz is not held up
while a large page is being served.

Each class has its own database, editor and permitd (test_admin.AdminCase);
the policies of a test share a unique prefix, which the filter selects.
"""
import base64
import http.client
import threading
import time
import unittest

import test_admin
from harness import decision, stack_env, wait_for

num = test_admin.num


class ListingCase(test_admin.AdminCase):

    def setUp(self):
        self.e = self.editor()

    def page(self, **msg):
        return self.e.ok(self.e.p("ListPolicies", msg))

    def make(self, prefix, count, **kw):
        names = ["%s-%03d" % (prefix, i) for i in range(count)]
        for n in names:
            self.e.create(n, **kw)
        return names

    def walk(self, **msg):
        """Every page of a listing: (names in order, [page lengths], totals)."""
        names, lengths, totals, token = [], [], set(), ""
        for _ in range(100):
            body = self.page(pageToken=token, **msg) if token else self.page(**msg)
            got = [p["name"] for p in body.get("policies", [])]
            names += got
            lengths.append(len(got))
            totals.add(body.get("totalSize", 0))
            token = body.get("nextPageToken", "")
            if not token:
                return names, lengths, totals
        self.fail("more than 100 pages")


class PagingTest(ListingCase):

    def test_pages_by_name_cover_every_match_once_with_its_count(self):
        pre = self.name("pg")
        names = self.make(pre, 12)
        got, lengths, totals = self.walk(filter=pre, pageSize=5)
        self.assertEqual(got, names)
        self.assertEqual(lengths, [5, 5, 2])
        self.assertEqual(totals, {12})
        # descending, and the offset of each page
        first = self.page(filter=pre, pageSize=5, descending=True)
        self.assertEqual([p["name"] for p in first["policies"]], names[::-1][:5])
        second = self.page(filter=pre, pageSize=5, descending=True,
                           pageToken=first["nextPageToken"])
        self.assertEqual([p["name"] for p in second["policies"]], names[::-1][5:10])
        self.assertEqual(num(second, "offset"), 5)

    def test_a_request_without_page_fields_gets_the_first_fifty(self):
        # An older client sends only include_buckets (or nothing): the first
        # page of the default size, with the count and a token saying there
        # is more.
        pre = self.name("old")
        names = self.make(pre, 51)
        body = self.page(filter=pre)
        self.assertEqual([p["name"] for p in body["policies"]], names[:50])
        self.assertEqual(body["totalSize"], 51)
        rest = self.page(filter=pre, pageToken=body["nextPageToken"])
        self.assertEqual([p["name"] for p in rest["policies"]], names[50:])
        self.assertNotIn("nextPageToken", rest)
        self.assertEqual(len(self.page()["policies"]), 50)

    def test_the_cursor_is_stable_while_rows_come_and_go_before_it(self):
        pre = self.name("st")
        names = self.make(pre, 8)
        first = self.page(filter=pre, pageSize=4)
        self.assertEqual([p["name"] for p in first["policies"]], names[:4])
        # A policy created before the cursor, and one of the first page
        # deleted: the next page is still the four after the last one seen.
        self.e.create(pre + "-000a")
        gone = self.e.get(names[1])
        self.e.ok(self.e.p("DeletePolicy", {"name": names[1], "version": gone["version"]}))
        second = self.page(filter=pre, pageSize=4, pageToken=first["nextPageToken"])
        self.assertEqual([p["name"] for p in second["policies"]], names[4:8])
        self.assertEqual(second["totalSize"], 8)
        self.assertNotIn("nextPageToken", second)

    def test_the_filter_matches_name_app_and_description_without_case(self):
        pre = self.name("fl")
        self.e.create(pre + "-alpha", description="Payments Gateway")
        self.e.create(pre + "-beta", apps=("Checkout-Web",))
        self.e.create(pre + "-gamma")
        self.e.create(pre + "_delta")
        self.sql("UPDATE policies SET description = CONCAT(name, ' marker') WHERE name LIKE '%s%%'"
                 % pre)

        def names(f):
            return sorted(p["name"] for p in self.page(filter=f).get("policies", []))
        self.assertEqual(names(pre.upper() + "-GAMMA"), [pre + "-gamma"])
        self.assertEqual(names("CHECKOUT-web"), [pre + "-beta"])
        self.assertEqual(names(pre + "-ALPHA MARK"), [pre + "-alpha"])
        # LIKE's own characters match themselves
        self.assertEqual(names(pre + "_"), [pre + "_delta"])
        self.assertEqual(names(pre + "%"), [])
        self.assertEqual(self.page(filter=pre)["totalSize"], 4)
        self.assertEqual(self.page(filter="no-such-thing-%s" % pre).get("totalSize", 0), 0)

    def test_orders_by_traffic_and_by_level(self):
        pre = self.name("ord")
        names = self.make(pre, 4, max_permits=10, rate="0.001")
        api = self.api()
        for n, takes in ((names[2], 5), (names[0], 2)):
            for _ in range(takes):
                self.assertTrue(decision(api.acquire(n))["allowed"])
        body = self.page(filter=pre, orderBy="traffic", descending=True, includeBuckets=True)
        self.assertEqual([p["name"] for p in body["policies"]],
                         [names[2], names[0], names[1], names[3]])
        self.assertEqual([b["policy"] for b in body["buckets"]],
                         [p["name"] for p in body["policies"]])
        # level: the fullest last; ties by name
        got, lengths, totals = self.walk(filter=pre, orderBy="level", pageSize=3)
        self.assertEqual(got, [names[2], names[0], names[1], names[3]])
        self.assertEqual(lengths, [3, 1])
        self.assertEqual(totals, {4})

    def test_bad_page_fields_are_refused_naming_the_value(self):
        pre = self.name("bad")
        self.make(pre, 3)
        for msg, field, value in (({"pageSize": -1}, "page_size", "-1"),
                                  ({"orderBy": "speed"}, "order_by", "speed"),
                                  ({"filter": "x" * 129}, "filter", "129"),
                                  ({"pageToken": "not a token"}, "page_token", "not a token")):
            with self.subTest(field=field):
                m = self.assertConnectError(self.e.p("ListPolicies", msg), 400, "invalid_argument")
                self.assertIn(field, m)
                self.assertIn(value, m)
        token = self.page(filter=pre, pageSize=1)["nextPageToken"]
        m = self.assertConnectError(
            self.e.p("ListPolicies", {"filter": pre + "-001", "pageToken": token}), 400,
            "invalid_argument")
        self.assertIn("another filter or order", m)
        # a page size over the most is answered with the most (500): not
        # refused
        self.assertEqual(len(self.page(filter=pre, pageSize=100000)["policies"]), 3)
        # the token is opaque, but not secret: base64 text
        base64.b64decode(token)


class LevelsInOneRoundTripTest(ListingCase):

    # No sync pass while EVALSHA is counted (it calls a script too).
    SYNC_INTERVAL_MS = 600000

    def test_a_pages_gauges_take_one_script_call(self):
        pre = self.name("rt")
        names = self.make(pre, 20, max_permits=10, rate="0.001")
        api = self.api()
        self.assertTrue(decision(api.acquire(names[3]))["allowed"])
        self.page(filter=pre, includeBuckets=True)      # every policy in the table
        before = self.permitd.script_calls()
        body = self.page(filter=pre, includeBuckets=True)
        calls = self.permitd.script_calls() - before
        print("\nListPolicies of 20 token buckets with their gauges: %d EVALSHA" % calls)
        self.assertEqual(calls, 1)
        by = {b["policy"]: b for b in body["buckets"]}
        self.assertEqual(len(by), 20)
        self.assertEqual(num(by[names[3]], "remaining"), 9)
        self.assertEqual(num(by[names[4]], "remaining"), 10)
        self.assertEqual(num(by[names[4]], "limit"), 10)
        # a disabled policy: an empty gauge with its limit, not a failed page
        p = self.e.get(names[5])
        self.e.ok(self.e.update(p, enabled=False))
        body = self.page(filter=pre, includeBuckets=True)
        by = {b["policy"]: b for b in body["buckets"]}
        self.assertEqual((num(by[names[5]], "remaining"), num(by[names[5]], "limit")), (0, 10))


class FilterScansOnceTest(ListingCase):

    # No sync pass while MySQL's statements are logged.
    SYNC_INTERVAL_MS = 600000

    def test_a_filtered_page_scans_the_table_once(self):
        # The filter is a LIKE on every row (name, description, apps): at
        # 10,000 policies the costly part of a filter keystroke. It ran
        # twice, for the count and for the page; now once, for the matching
        # names, which give both. Counted in MariaDB's general log: the
        # statements of one ListPolicies that carry the filter's pattern.
        pre = self.name("once")
        names = self.make(pre, 7)
        mysql = test_admin.mysql
        mysql("SET GLOBAL log_output = 'TABLE'; TRUNCATE mysql.general_log; "
              "SET GLOBAL general_log = 1")
        try:
            first = self.page(filter=pre, pageSize=3)
            second = self.page(filter=pre, pageSize=3, pageToken=first["nextPageToken"])
            desc = self.page(filter=pre, pageSize=3, descending=True)
        finally:
            mysql("SET GLOBAL general_log = 0")
        rows = mysql("SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log "
                     "WHERE command_type = 'Query'")
        mysql("TRUNCATE mysql.general_log")
        scans = [r[0] for r in rows if "%" + pre + "%" in r[0] and "SELECT" in r[0]]
        self.assertEqual(len(scans), 3, "one scan per page:\n" + "\n".join(scans))
        self.assertEqual([p["name"] for p in first["policies"]], names[:3])
        self.assertEqual([p["name"] for p in second["policies"]], names[3:6])
        self.assertEqual([num(x, "totalSize") for x in (first, second, desc)], [7, 7, 7])
        self.assertEqual(num(second, "offset"), 3)
        self.assertEqual([p["name"] for p in desc["policies"]], names[::-1][:3])


class ResponsiveTest(ListingCase):
    """10,000 policies (made with one INSERT ... SELECT from MariaDB's
    sequence table): a slow ListPolicies does not hold /readyz."""

    BIG = 10000

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        test_admin.mysql(
            "INSERT INTO policies (name, max_permits, rate, description, created_by, updated_by) "
            "SELECT CONCAT('big-', LPAD(seq, 5, '0')), 10, 1, CONCAT('bulk policy ', seq), "
            "'test', 'test' FROM seq_1_to_%d" % cls.BIG, database=cls.db)

    def timed(self, fn):
        t = time.monotonic()
        r = fn()
        return r, (time.monotonic() - t) * 1000

    def test_readyz_answers_while_a_large_list_is_served(self):
        port = self.permitd.admin_port
        body, first_ms = self.timed(lambda: self.page(pageSize=50))
        self.assertEqual(body["totalSize"], self.BIG)
        _, filter_ms = self.timed(lambda: self.page(pageSize=50, filter="policy 99"))
        # The slow RPC: a page by level peeks every one of the 10,000.
        _, level_ms = self.timed(lambda: self.page(pageSize=500, orderBy="level"))
        print("\n10,000 policies: first page %.1f ms, a filter %.1f ms, a page by level %.1f ms"
              % (first_ms, filter_ms, level_ms))

        lists, stop = [], threading.Event()

        def lister():
            c = self.client(self.e.cookie)
            while not stop.is_set():
                t = time.monotonic()
                r = c.p("ListPolicies", {"pageSize": 500, "orderBy": "level"})
                lists.append((time.monotonic() - t) * 1000)
                if r.status != 200:
                    lists.append(-1)
                    return
        th = threading.Thread(target=lister)
        th.start()
        probes = []
        try:
            wait_for("a list under way", lambda: len(lists) >= 1, 60)
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                t = time.monotonic()
                conn.request("GET", "/readyz")
                conn.getresponse().read()
                probes.append((time.monotonic() - t) * 1000)
                conn.close()
                time.sleep(0.01)
        finally:
            stop.set()
            th.join()
        self.assertNotIn(-1, lists)
        lists.sort()
        probes.sort()
        list_ms, probe_ms = lists[len(lists) // 2], probes[len(probes) // 2]
        print("during %d lists by level (median %.1f ms): %d /readyz, median %.1f ms, max %.1f ms"
              % (len(lists), list_ms, len(probes), probe_ms, probes[-1]))
        # Compared, not absolute: queued behind the list, a probe would wait
        # half a list on average.
        self.assertLess(probe_ms, list_ms / 4)


if __name__ == "__main__":
    unittest.main()
