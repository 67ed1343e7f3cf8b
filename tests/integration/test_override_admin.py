"""OverrideService (issue 37): a policy's overrides through the admin RPCs,
against a real MariaDB (migration 0014) and Redis.

Covers: viewers read and editors write (and no session reads nothing);
every field checked (the policy exists, match_kind, action, the limits of
the policy's algorithm, the expiry in the future, lengths, control bytes,
UTF-8) with errors naming the field; created_by / updated_by the session's
user; a second edit from a stale version aborted, not applied; search,
paging and the sort by traffic (the hot keys' counts); an app's overrides
across policies; the change notice on <prefix>override-changes after each
write; CSV import and export round trips with hostile CSV (quotes, commas,
line breaks inside fields, a byte order mark, CRLF), 10,000 rows sent in
pieces, and a bad row anywhere refusing the whole file, naming its line
and column; a policy's delete counting its overrides, refused without
remove_references and removing them (audited) with it.
"""
import base64
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Permitd, Redis, decision, error_code, mysql, wait_for  # noqa: E402
from test_admin import AdminCase, num  # noqa: E402

OVR = "permit.v1.OverrideService"
PUBLISH_MS = 200
FUTURE = "2099-01-01T00:00:00Z"


def b64(text):
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


class OverrideAdminTest(AdminCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        try:
            cls.permitd.stop()
            cls.permitd = Permitd(prefix=cls.prefix,
                                  args=["--mysql-url", cls.mysql_url, "--sync-interval-ms", "300",
                                        "--hotkeys-publish-ms", str(PUBLISH_MS)])
        except BaseException:
            cls.tearDownClass()
            raise

    # -- helpers

    def o(self, c, method, msg):
        return c.call(OVR, method, msg)

    def ok(self, r):
        self.assertEqual(r.status, 200, r)
        return r.json()

    def err(self, r, code, starts=None):
        self.assertEqual(error_code(r), code, r)
        if starts is not None:
            msg = r.json().get("message", "")
            self.assertTrue(msg.startswith(starts), msg)
        return r.json().get("message", "")

    def policy(self, ed, **extra):
        name = self.name("ov")
        ed.create(name, max_permits=10, rate="1", **extra)
        return name

    def create(self, c, pol, kind="key", value="alice", **fields):
        ov = {"policy": pol, "matchKind": kind, "matchValue": value, "action": "limit",
              "maxPermits": "100", "rate": "10"}
        ov.update(fields)
        return self.o(c, "CreateOverride", {"override": ov})

    def listing(self, c, policy, **extra):
        msg = {"policy": policy}
        msg.update(extra)
        return self.ok(self.o(c, "ListOverrides", msg))

    def import_csv(self, c, policy, text, replace=False, piece=None):
        data = text.encode() if isinstance(text, str) else text
        if piece is None:
            return self.o(c, "ImportOverridesCsv", {"policy": policy, "csv": b64(data),
                                                    "last": True, "replace": replace})
        upload = ""
        for i in range(0, len(data), piece):
            last = i + piece >= len(data)
            r = self.o(c, "ImportOverridesCsv", {"policy": policy, "csv": b64(data[i:i + piece]),
                                                 "uploadId": upload, "last": last,
                                                 "replace": replace})
            if r.status != 200 or last:
                return r
            upload = r.json()["uploadId"]
        raise AssertionError("no last piece")

    def export(self, c, policy):
        return self.ok(self.o(c, "ExportOverridesCsv", {"policy": policy}))

    def rows(self, c, policy):
        """Every override of policy as (kind, value, action, max, rate, window, expires, description)."""
        out, token = [], ""
        while True:
            m = self.listing(c, policy, pageSize=1000, pageToken=token)
            for ov in m.get("overrides", []):
                out.append((ov["matchKind"], ov["matchValue"], ov["action"],
                            num(ov, "maxPermits"), ov.get("rate", ""), ov.get("window", ""),
                            ov.get("expiresAt", ""), ov.get("description", "")))
            token = m.get("nextPageToken", "")
            if not token:
                return out

    # -- roles

    def test_viewers_read_editors_write_and_no_session_nothing(self):
        ed, vi = self.editor(), self.viewer()
        pol = self.policy(ed)
        ov = self.ok(self.create(ed, pol))["override"]
        self.assertEqual((ov["createdBy"], ov["updatedBy"]), ("ed", "ed"))
        self.assertEqual(num(ov, "version"), 1)
        # viewers read
        self.assertEqual(len(self.listing(vi, pol)["overrides"]), 1)
        self.ok(self.o(vi, "GetOverride", {"id": ov["id"]}))
        self.ok(self.o(vi, "ExportOverridesCsv", {"policy": pol}))
        self.ok(self.o(vi, "ListAppOverrides", {"app": "billing"}))
        # and write nothing
        self.err(self.create(vi, pol, value="bob"), "permission_denied")
        upd = dict(ov, maxPermits="5")
        self.err(self.o(vi, "UpdateOverride", {"override": upd}), "permission_denied")
        self.err(self.o(vi, "DeleteOverride", {"id": ov["id"]}), "permission_denied")
        self.err(self.import_csv(vi, pol, "match_kind,match_value,action\r\nkey,zed,block\r\n"),
                 "permission_denied")
        # no session: not even a read
        anon = self.client()
        self.err(self.o(anon, "ListOverrides", {"policy": pol}), "unauthenticated")
        self.err(self.create(anon, pol, value="carol"), "unauthenticated")
        self.assertEqual([r[1] for r in self.rows(ed, pol)], ["alice"])

    # -- checks

    def test_every_field_is_checked_and_named(self):
        ed = self.editor()
        tb = self.policy(ed)
        fw = self.name("ovfw")
        ed.create(fw, max_permits=10, rate="", algorithm="fixed_window", window="1m")
        cases = [
            ({"policy": "no-such-policy-" + tb}, "failed_precondition", "policy:"),
            ({"policy": "bad name!"}, "invalid_argument", "policy:"),
            ({"matchKind": "regex"}, "invalid_argument", "match_kind:"),
            ({"matchValue": ""}, "invalid_argument", "match_value:"),
            ({"matchValue": "k" * 257}, "invalid_argument", "match_value:"),
            ({"matchValue": "a\nb"}, "invalid_argument", "match_value:"),
            ({"matchKind": "app", "matchValue": "not an app"}, "invalid_argument", "match_value:"),
            ({"action": "allow"}, "invalid_argument", "action:"),
            ({"maxPermits": "-1"}, "invalid_argument", "max_permits:"),
            ({"maxPermits": "0", "rate": ""}, "invalid_argument", "max_permits:"),
            ({"maxPermits": "9007199254740993"}, "invalid_argument", "max_permits:"),
            ({"rate": "0"}, "invalid_argument", "rate:"),
            ({"rate": "-1"}, "invalid_argument", "rate:"),
            ({"rate": "1e3"}, "invalid_argument", "rate:"),
            ({"window": "1m"}, "invalid_argument", "window:"),
            ({"action": "block"}, "invalid_argument", "max_permits:"),
            ({"action": "exempt", "maxPermits": "0"}, "invalid_argument", "rate:"),
            ({"expiresAt": "2001-01-01T00:00:00Z"}, "invalid_argument", "expires_at:"),
            ({"expiresAt": "tomorrow"}, "invalid_argument", "expires_at:"),
            ({"expiresAt": "2099-02-30T00:00:00Z"}, "invalid_argument", "expires_at:"),
            ({"description": "d" * 1025}, "invalid_argument", "description:"),
        ]
        for fields, code, starts in cases:
            with self.subTest(fields=fields):
                self.err(self.create(ed, tb, value="chk", **fields), code, starts)
        # a windowed policy: a window (or the policy's), never a rate
        self.err(self.create(ed, fw, value="w1"), "invalid_argument", "rate:")
        self.err(self.create(ed, fw, value="w1", rate="", window="soon"), "invalid_argument",
                 "window")
        a = self.ok(self.create(ed, fw, value="w1", rate="", window="90s"))["override"]
        self.assertEqual((a["window"], a.get("rate", "")), ("90s", ""))
        b = self.ok(self.create(ed, fw, value="w2", rate=""))["override"]
        self.assertEqual(b.get("window", ""), "")
        # 1024 characters of UTF-8 (3 bytes each) pass; an expiry comes back in UTC
        c = self.ok(self.create(ed, tb, value="ok", description="€" * 1024,
                                expiresAt="2099-01-01T01:00:00+01:00", rate="0.5"))["override"]
        self.assertEqual(c["description"], "€" * 1024)
        self.assertTrue(c["expiresAt"].startswith("2099-01-01T00:00:00"), c)
        self.assertEqual(c["rate"], "0.5")
        self.assertIs(c.get("expired", False), False)
        # a limit may leave numbers to the policy (0, ""), one at least
        d = self.ok(self.create(ed, tb, value="rate-only", maxPermits="0", rate="50"))["override"]
        self.assertEqual((num(d, "maxPermits"), d["rate"]), (0, "50"))
        e = self.ok(self.create(ed, tb, value="max-only", maxPermits="7", rate=""))["override"]
        self.assertEqual((num(e, "maxPermits"), e.get("rate", "")), (7, ""))
        # block and exempt take no limits; a prefix and an app match
        self.ok(self.create(ed, tb, kind="prefix", value="premium_", action="block",
                            maxPermits="0", rate=""))
        self.ok(self.create(ed, tb, kind="app", value="billing", action="exempt",
                            maxPermits="0", rate=""))
        # one override per match
        self.err(self.create(ed, tb, value="ok"), "already_exists", "match_value:")
        # nothing refused was written
        self.assertEqual(sorted(r[1] for r in self.rows(ed, tb)),
                         ["billing", "max-only", "ok", "premium_", "rate-only"])

    def test_invalid_utf8_in_a_binary_request_is_refused(self):
        ed = self.editor()
        pol = self.policy(ed)
        # JSON cannot carry it; a CSV piece can (bytes): named by line and column
        r = self.import_csv(ed, pol, b"match_kind,match_value,action\r\nkey,k\xff\xfe,block\r\n")
        self.err(r, "invalid_argument", "line 2, column 2")
        self.assertEqual(self.rows(ed, pol), [])

    # -- versions

    def test_a_stale_version_is_aborted_not_applied(self):
        ed = self.editor()
        pol = self.policy(ed)
        ov = self.ok(self.create(ed, pol, value="v"))["override"]
        first = dict(ov, maxPermits="200")
        second = dict(ov, maxPermits="300")
        got = self.ok(self.o(ed, "UpdateOverride", {"override": first}))["override"]
        self.assertEqual((num(got, "version"), num(got, "maxPermits")), (2, 200))
        self.err(self.o(ed, "UpdateOverride", {"override": second}), "aborted", "version:")
        self.err(self.o(ed, "DeleteOverride", {"id": ov["id"], "version": "1"}), "aborted")
        now = self.ok(self.o(ed, "GetOverride", {"id": ov["id"]}))["override"]
        self.assertEqual((num(now, "version"), num(now, "maxPermits")), (2, 200))
        # audited with the session's user (migration 0014's triggers)
        rows = self.sql("SELECT action, actor FROM override_audit WHERE override_id = %s "
                        "ORDER BY id" % ov["id"])
        self.assertEqual([tuple(r) for r in rows], [("create", "ed"), ("update", "ed")])
        self.ok(self.o(ed, "DeleteOverride", {"id": ov["id"], "version": "2"}))
        self.err(self.o(ed, "GetOverride", {"id": ov["id"]}), "not_found")
        self.err(self.o(ed, "DeleteOverride", {"id": ov["id"]}), "not_found")

    # -- lists

    def test_search_paging_and_an_apps_overrides(self):
        ed = self.editor()
        pol, other = self.policy(ed), self.policy(ed)
        app = self.name("app")
        values = ["user%02d" % i for i in range(25)] + ["50%_off", "x\\y"]
        body = "match_kind,match_value,action\r\n" + "".join(
            "key,%s,exempt\r\n" % v for v in values)
        self.ok(self.import_csv(ed, pol, body))
        self.ok(self.create(ed, pol, kind="app", value=app, action="block", maxPermits="0",
                            rate=""))
        self.ok(self.create(ed, other, kind="app", value=app, action="exempt",
                            maxPermits="0", rate=""))
        seen, token, pages = [], "", 0
        while True:
            m = self.listing(ed, pol, pageSize=10, pageToken=token)
            self.assertEqual(num(m, "total"), 28)
            seen += [ov["matchValue"] for ov in m["overrides"]]
            pages += 1
            token = m.get("nextPageToken", "")
            if not token:
                break
        self.assertEqual(pages, 3)
        self.assertEqual(seen, [app] + sorted(values))
        # search: a substring, its wildcards literal
        m = self.listing(ed, pol, search="user1")
        self.assertEqual([o["matchValue"] for o in m["overrides"]],
                         ["user1%d" % i for i in range(10)])
        self.assertEqual([o["matchValue"] for o in self.listing(ed, pol, search="%")["overrides"]],
                         ["50%_off"])
        self.assertEqual([o["matchValue"] for o in self.listing(ed, pol, search="_")["overrides"]],
                         ["50%_off"])
        self.assertEqual([o["matchValue"] for o in self.listing(ed, pol, search="\\")["overrides"]],
                         ["x\\y"])
        self.err(self.o(ed, "ListOverrides", {"policy": pol, "pageToken": "abc"}),
                 "invalid_argument", "page_token:")
        self.err(self.o(ed, "ListOverrides", {"policy": pol, "sort": "random"}),
                 "invalid_argument", "sort:")
        self.err(self.o(ed, "ListOverrides", {"policy": pol, "search": "s" * 257}),
                 "invalid_argument", "search:")
        # an app's overrides, across policies
        m = self.ok(self.o(ed, "ListAppOverrides", {"app": app}))
        got = sorted((o["policy"], o["action"]) for o in m["overrides"])
        self.assertEqual(got, sorted([(pol, "block"), (other, "exempt")]))

    def test_sort_by_traffic_follows_the_hot_keys(self):
        ed = self.editor()
        pol = self.policy(ed)
        for v in ("quiet", "busy", "medium"):
            self.ok(self.create(ed, pol, value=v))
        self.ok(self.create(ed, pol, kind="prefix", value="team_", action="exempt",
                            maxPermits="0", rate=""))
        api = self.api()
        for key, n in (("busy", 9), ("medium", 4), ("team_a", 3), ("team_b", 3)):
            for _ in range(n):
                decision(api.acquire(pol, key=key))

        def ranked():
            m = self.listing(ed, pol, sort="traffic")
            got = [(o["matchValue"], num(o, "traffic")) for o in m["overrides"]]
            return got if got[0][1] == 9 and dict(got)["team_"] == 6 else None
        got = wait_for("the hot keys to reach the list", ranked, timeout=20)
        self.assertEqual(got, [("busy", 9), ("team_", 6), ("medium", 4), ("quiet", 0)])
        # a page of the traffic order
        m = self.listing(ed, pol, sort="traffic", pageSize=2, pageToken="2")
        self.assertEqual([o["matchValue"] for o in m["overrides"]], ["medium", "quiet"])
        self.assertEqual(m.get("nextPageToken", ""), "")

    # -- in force

    def test_a_write_is_in_force_on_the_next_acquire(self):
        # This instance reloads the policy's overrides before the RPC
        # answers: no wait for the notice or the sync.
        ed = self.editor()
        pol = self.name("ovf")
        ed.create(pol, max_permits=1, rate="0.001")
        api = self.api()
        self.assertIs(decision(api.acquire(pol, key="k"))["allowed"], True)
        self.assertIs(decision(api.acquire(pol, key="k"))["allowed"], False)
        ov = self.ok(self.create(ed, pol, value="k", action="exempt", maxPermits="0",
                                 rate=""))["override"]
        r = api.acquire(pol, key="k")
        self.assertIs(decision(r)["allowed"], True)
        self.assertIs(r.json().get("exempt"), True, r.json())
        ov = self.ok(self.o(ed, "UpdateOverride", {"override": dict(ov, action="block")}))["override"]
        r = api.acquire(pol, key="k")
        self.assertIs(decision(r)["allowed"], False)
        self.assertIn("blocked", r.json().get("reason", ""), r.json())
        self.ok(self.o(ed, "DeleteOverride", {"id": ov["id"]}))
        r = api.acquire(pol, key="k")
        self.assertIs(decision(r)["allowed"], False)
        self.assertEqual(r.json().get("reason", ""), "", r.json())
        self.assertIs(decision(api.acquire(pol, key="other"))["allowed"], True)

    # -- a policy's delete (issue 37 follow-up: overrides are references)

    def test_a_policy_delete_counts_refuses_and_removes_its_overrides(self):
        ed = self.editor()
        pol = self.name("ovd")
        ed.create(pol, max_permits=1, rate="0.001")
        self.ok(self.create(ed, pol, value="vip", action="exempt", maxPermits="0", rate=""))
        for kind, value in (("prefix", "premium_"), ("app", "billing")):
            self.ok(self.create(ed, pol, kind=kind, value=value))
        api = self.api()
        self.assertIs(api.acquire(pol, key="vip").json().get("exempt"), True)
        got = self.ok(ed.p("GetPolicy", {"name": pol}))
        self.assertEqual(got["referenceCount"], 3, got)
        self.assertEqual(got["references"], "3 overrides", got)
        # Refused without the confirmation, naming them; nothing removed.
        msg = self.err(ed.p("DeletePolicy", {"name": pol}), "failed_precondition")
        self.assertIn("3 overrides", msg)
        self.assertEqual(len(self.rows(ed, pol)), 3)
        # With it: gone with the policy, each audited as the editor.
        self.ok(ed.p("DeletePolicy", {"name": pol, "removeReferences": True}))
        self.assertEqual(mysql("SELECT COUNT(*) FROM policy_overrides WHERE policy = '%s'" % pol,
                               database=self.db)[0][0], "0")
        rows = mysql("SELECT action, actor, JSON_VALUE(old_value, '$.match_value') FROM "
                     "override_audit WHERE policy = '%s' AND action = 'delete' ORDER BY "
                     "override_id" % pol, database=self.db)
        self.assertEqual([tuple(x) for x in rows], [("delete", "ed", "vip"),
                                                    ("delete", "ed", "premium_"),
                                                    ("delete", "ed", "billing")])
        # Made again under the name, the policy has none of them, in MySQL
        # and in force (the delete's notice): vip is no longer exempt.
        ed.create(pol, max_permits=1, rate="0.001")
        self.assertEqual(self.rows(ed, pol), [])
        self.assertEqual(self.ok(ed.p("GetPolicy", {"name": pol})).get("referenceCount", 0), 0)

        def not_exempt():
            r = api.acquire(pol, key="vip")
            decision(r)         # a decision (not the not_found of a policy not yet loaded)
            return r.json().get("exempt") is not True
        wait_for("vip decided by the policy made again, not exempt", not_exempt)

    # -- the change notice

    def test_each_write_publishes_the_policy_name(self):
        sub = Redis()
        self.addCleanup(sub.close)
        if hasattr(sub, "nodes"):
            self.skipTest("SUBSCRIBE through the cluster client: the single-Redis run covers it")
        sub._send(("SUBSCRIBE", self.prefix + "override-changes"))
        sub._reply()
        sub.sock.settimeout(10)
        ed = self.editor()
        pol = self.policy(ed)
        channel = self.prefix + "override-changes"
        ov = self.ok(self.create(ed, pol, value="n"))["override"]
        self.assertEqual(sub._reply(), ["message", channel, pol])
        self.ok(self.o(ed, "UpdateOverride", {"override": dict(ov, maxPermits="7")}))
        self.assertEqual(sub._reply(), ["message", channel, pol])
        self.ok(self.import_csv(ed, pol, "match_kind,match_value,action\r\nkey,m,block\r\n"))
        self.assertEqual(sub._reply(), ["message", channel, pol])
        self.ok(self.o(ed, "DeleteOverride", {"id": ov["id"]}))
        self.assertEqual(sub._reply(), ["message", channel, pol])
        # a refused write sends nothing: the next message is the next write's
        self.err(self.create(ed, pol, value="m"), "already_exists")
        self.ok(self.create(ed, pol, value="after"))
        self.assertEqual(sub._reply(), ["message", channel, pol])

    # -- CSV

    HOSTILE = ('\ufeffmatch_kind,match_value,action,max_permits,rate,window,expires_at,'
               'description\r\n'
               'key,"comma,key",limit,5,2.5,,,"says ""hi"", twice"\r\n'
               'key,=cmd|calc,block,,,,,"line one\r\nline two\nline three"\r\n'
               'prefix,premium_,limit,1000,100,,' + FUTURE + ',\r\n'
               '\r\n'
               'app,billing,exempt,,,,,ünïcödé €\n'
               'key,"""quoted""",limit,1,0.000001,,,\r\n')

    def test_hostile_csv_round_trips(self):
        ed = self.editor()
        pol = self.policy(ed)
        r = self.ok(self.import_csv(ed, pol, self.HOSTILE))
        self.assertEqual((num(r, "created"), num(r, "updated"), num(r, "deleted")), (5, 0, 0))
        want = sorted([
            ("key", "comma,key", "limit", 5, "2.5", "", "", 'says "hi", twice'),
            ("key", "=cmd|calc", "block", 0, "", "", "", "line one\r\nline two\nline three"),
            ("prefix", "premium_", "limit", 1000, "100", "", "2099-01-01T00:00:00.000000Z", ""),
            ("app", "billing", "exempt", 0, "", "", "", "ünïcödé €"),
            ("key", '"quoted"', "limit", 1, "0.000001", "", "", ""),
        ])
        self.assertEqual(sorted(self.rows(ed, pol)), want)
        exported = self.export(ed, pol)
        self.assertEqual(num(exported, "count"), 5)
        # the export imported into another policy gives the same set
        other = self.policy(ed)
        self.ok(self.import_csv(ed, other, exported["csv"]))
        self.assertEqual(sorted(self.rows(ed, other)), want)
        # and into the same one, replacing: all updated, nothing else
        r = self.ok(self.import_csv(ed, pol, exported["csv"], replace=True))
        self.assertEqual((num(r, "created"), num(r, "updated"), num(r, "deleted")), (0, 5, 0))
        self.assertEqual(sorted(self.rows(ed, pol)), want)
        self.assertEqual(self.export(ed, pol)["csv"], exported["csv"])

    def test_a_bad_row_refuses_the_whole_file_naming_line_and_column(self):
        ed = self.editor()
        pol = self.policy(ed)
        self.ok(self.create(ed, pol, value="keep"))
        head = "match_kind,match_value,action,max_permits,rate\r\n"
        good = "key,a,limit,5,1\r\nkey,b,block,,\r\n"
        cases = [
            (head + good + "key,c,limit,many,1\r\n", "line 4, column 4 (max_permits)"),
            (head + good + "key,c,limit,5,0\r\n", "line 4, column 5 (rate)"),
            (head + good + "key,c,limit,,\r\n", "line 4, column 4 (max_permits)"),
            (head + good + "regex,c,limit,5,1\r\n", "line 4, column 1 (match_kind)"),
            ('match_kind,match_value,action,description\r\nkey,a,block,"multi\nline"\r\n'
             'key,d,nope,\r\n', "line 4, column 3 (action)"),
            (head + 'key,"multi\nline",limit,5,1\r\n', "line 2, column 2 (match_value)"),
            (head + good + 'key,"open,limit,5,1\r\n', "line 4, column 2: the quote"),
            (head + good + 'key,a"b,limit,5,1\r\n', "line 4, column 2"),
            (head + good + "key,c,limit\r\n", "line 4: 3 columns"),
            (head + good + "key,a,limit,6,1\r\n", "line 4, column 2 (match_value)"),
            ("match_kind,match_value,colour\r\nkey,a,red\r\n", "line 1, column 3"),
            ("match_value\r\na\r\n", "line 1:"),
            ("", "line 1:"),
            (head + good + "key,c,limit,5,1,extra,columns,and,more,than,there,are\r\n",
             "line 4, column 9"),
        ]
        for text, starts in cases:
            with self.subTest(text=text):
                self.err(self.import_csv(ed, pol, text), "invalid_argument", starts)
        self.assertEqual([r[1] for r in self.rows(ed, pol)], ["keep"])
        # a policy that does not exist
        self.err(self.import_csv(ed, pol + "-gone", head + good), "failed_precondition",
                 "policy:")

    def test_ten_thousand_rows_in_pieces_and_replace(self):
        ed = self.editor()
        pol = self.policy(ed)
        self.ok(self.create(ed, pol, value="old-one"))
        lines = ["match_kind,match_value,action,max_permits,rate,description"]
        lines += ["key,user-%05d,limit,%d,%d.5,\"row %d, \"\"quoted\"\"\"" % (i, i + 1, i, i)
                  for i in range(10000)]
        text = "\r\n".join(lines) + "\r\n"
        self.assertGreater(len(text), 65536)     # over one request body: sent in pieces
        # pieces split lines and quoted fields anywhere
        r = self.ok(self.import_csv(ed, pol, text, replace=True, piece=30000))
        self.assertEqual((num(r, "created"), num(r, "deleted")), (10000, 1))
        m = self.listing(ed, pol, pageSize=1)
        self.assertEqual(num(m, "total"), 10000)
        m = self.listing(ed, pol, search="user-09999")
        ov = m["overrides"][0]
        self.assertEqual((num(ov, "maxPermits"), ov["rate"], ov["description"]),
                         (10000, "9999.5", 'row 9999, "quoted"'))
        exported = self.export(ed, pol)
        self.assertEqual(num(exported, "count"), 10000)
        # one more would pass the most a policy may have
        self.err(self.create(ed, pol, value="one-more"), "resource_exhausted")
        # an unknown upload id is refused
        r = self.o(ed, "ImportOverridesCsv", {"policy": pol, "csv": b64("x"),
                                              "uploadId": "0" * 64, "last": True})
        self.err(r, "not_found", "upload_id:")
        # a bad row at the very end refuses all 10,000, and a 10,001st row too
        bad = "\r\n".join(lines[:-1] + ["key,user-x,limit,-3,1,"]) + "\r\n"
        self.err(self.import_csv(ed, pol, bad, replace=True, piece=30000), "invalid_argument",
                 "line 10001, column 4 (max_permits)")
        more = text + "key,user-x,limit,1,1,\r\n"
        self.err(self.import_csv(ed, pol, more, replace=True, piece=30000), "invalid_argument",
                 "line 10002: more than 10000 rows")
        self.assertEqual(num(self.listing(ed, pol, pageSize=1), "total"), 10000)


if __name__ == "__main__":
    unittest.main()
