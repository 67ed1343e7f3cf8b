"""The audit (issue 23, "Audit and history"): AuditService.ListAudit over
every change to policies (deleted ones too), apps and keys, users,
overrides (issue 37), Envoy descriptors (migration 0018) and gateway
rules, by
whom (the admin's user name, or the MySQL user for plain SQL), with before
and after; filtered by policy, user, kind and time; paged with a cursor.
And "last changed by" showing the name the audit shows. Against real
MariaDB and Redis (test_admin.AdminCase: ed the editor, vi the viewer; boss
an admin made here).
"""
import json
import time
import unittest
from datetime import datetime, timedelta, timezone

import test_admin
from harness import mysql, stack_env, unique
from test_admin import EDITOR, VIEWER

AUDIT = "permit.v1.AuditService"
APPS = "permit.v1.AppService"
USERS = "permit.v1.UserService"
OVR = "permit.v1.OverrideService"
ENVOY = "permit.v1.EnvoyDescriptorService"
GATEWAY = "permit.v1.GatewayService"
ADMIN, ADMIN_PW = "boss", "admin-password-1"


def iso(dt):
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AuditTest(test_admin.AdminCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.add_user(ADMIN, ADMIN_PW, "admin")

    def audit(self, c, **msg):
        return c.ok(c.call(AUDIT, "ListAudit", msg))

    def entries(self, c, **msg):
        return self.audit(c, **msg).get("entries", [])

    def dba(self):
        """A MySQL user of its own and the URL that logs in as it."""
        user = unique("dba").replace("-", "_")[:30]
        mysql("CREATE USER '%s'@'localhost' IDENTIFIED BY 'pw'; "
              "GRANT ALL ON `%s`.* TO '%s'@'localhost'" % (user, self.db, user))
        self.addCleanup(mysql, "DROP USER '%s'@'localhost'" % user)
        root = stack_env()["PERMITD_TEST_MYSQL_ROOT_URL"]
        return user + "@localhost", root.replace("root@", "%s:pw@" % user, 1)

    def test_every_kind_with_its_actor_before_and_after(self):
        e, v = self.editor(), self.viewer()
        a = self.client()
        self.ok_login(a, ADMIN, ADMIN_PW)
        # MariaDB's clock (the audit's), not this process's.
        start = datetime.strptime(self.sql("SELECT UTC_TIMESTAMP(6)")[0][0] + "+0000",
                                  "%Y-%m-%d %H:%M:%S.%f%z")
        name = self.name("aud")
        app = unique("audapp")
        pol = e.create(name, max_permits=10, apps=("app",))
        e.ok(e.update(pol, maxPermits="20"))
        e.ok(e.call(APPS, "CreateApp", {"name": app, "description": "first"}))
        key = e.ok(e.call(APPS, "IssueKey", {"app": app}))["info"]["prefix"]
        a.ok(a.call(USERS, "AddUser", {"username": "audnew", "role": "viewer",
                                       "password": "audnew-password"}))
        # Plain SQL by a DBA: a policy change, an app change, a delete.
        dba, url = self.dba()
        mysql("UPDATE policies SET description = 'by hand' WHERE name = '%s'" % name,
              url=url, database=self.db)
        mysql("UPDATE apps SET description = 'by hand' WHERE name = '%s'" % app,
              url=url, database=self.db)
        mysql("DELETE FROM policies WHERE name = '%s'" % name, url=url, database=self.db)

        got = self.entries(v, since=iso(start))       # a viewer reads it too
        mine = [x for x in got if x["subject"] in (name, app, "audnew")]
        seen = [(x["kind"], x["subject"], x["action"], x["actor"]) for x in mine]
        self.assertEqual(seen, [
            ("policy", name, "delete", dba),
            ("app", app, "update", dba),
            ("policy", name, "update", dba),
            ("user", "audnew", "create", ADMIN),
            ("key", app, "issue", EDITOR),
            ("app", app, "create", EDITOR),
            ("policy", name, "update", EDITOR),
            ("policy", name, "create", EDITOR)], seen)
        by = {(x["kind"], x["action"], x["actor"]): x for x in mine}
        self.assertEqual(by[("key", "issue", EDITOR)]["keyPrefix"], key)
        upd = by[("policy", "update", EDITOR)]
        self.assertEqual(json.loads(upd["oldValue"])["max_permits"], 10)
        self.assertEqual(json.loads(upd["newValue"])["max_permits"], 20)
        # The deleted policy's last state, with every column (0009's triggers).
        gone = json.loads(by[("policy", "delete", dba)]["oldValue"])
        self.assertEqual((gone["description"], gone["algorithm"], gone["shadow"]),
                         ("by hand", "token_bucket", 0))
        self.assertEqual(by[("policy", "delete", dba)].get("newValue", ""), "")
        self.assertNotIn("audnew-password", json.dumps(got))
        self.assertNotIn("argon2", json.dumps(got))
        for x in mine:
            self.assertRegex(x["changedAt"], test_admin.RFC3339)

        # Filters: policy (the deleted one's history too), user, kind, time.
        self.assertEqual([x["action"] for x in self.entries(v, policy=name)],
                         ["delete", "update", "update", "create"])
        self.assertEqual({(x["subject"], x["action"]) for x in self.entries(v, user=dba)},
                         {(name, "delete"), (app, "update"), (name, "update")})
        self.assertEqual([x["action"] for x in self.entries(v, kind="key", user=EDITOR)
                          if x["subject"] == app], ["issue"])
        self.assertEqual([x["subject"] for x in self.entries(v, kind="user", since=iso(start))],
                         ["audnew"])
        self.assertEqual(self.entries(v, policy=name, until=iso(start)), [])
        future = iso(datetime.now(timezone.utc) + timedelta(hours=1))
        self.assertEqual(self.entries(v, since=future), [])

    def test_pages_walk_every_entry_once_newest_first(self):
        e = self.editor()
        prefix = self.name("pg")
        for i in range(7):
            e.create("%s-%d" % (prefix, i), max_permits=5)
        whole = [(x["subject"], x["changedAt"]) for x in self.entries(e, pageSize=500)]
        walked, cursor, pages = [], "", 0
        while True:
            msg = {"pageSize": 3}
            if cursor:
                msg["cursor"] = cursor
            body = self.audit(e, **msg)
            got = body.get("entries", [])
            self.assertLessEqual(len(got), 3)
            walked += [(x["subject"], x["changedAt"]) for x in got]
            pages += 1
            cursor = body.get("nextCursor", "")
            if not cursor:
                break
            # A change made meanwhile does not shift the pages after.
            if pages == 1:
                e.create("%s-late" % prefix, max_permits=5)
        self.assertEqual(walked, whole)
        self.assertEqual(len(walked), len(set(walked)))
        self.assertEqual(walked, sorted(walked, key=lambda x: x[1], reverse=True))
        self.assertGreaterEqual(pages, 3)

    def test_bad_filters_are_refused_naming_the_value(self):
        v = self.viewer()
        for msg, field, value in (({"since": "yesterday"}, "since", "yesterday"),
                                  ({"until": "2026-13-01T00:00:00Z"}, "until", "2026-13-01"),
                                  ({"cursor": "x~1~2"}, "cursor", "x~1~2"),
                                  ({"cursor": "2026-11-25 10:00:00.000000~1~1 OR 1"}, "cursor",
                                   "OR 1"),
                                  ({"kind": "policies"}, "kind", "policies"),
                                  ({"policy": "no such!"}, "policy", "no such!"),
                                  ({"pageSize": 501}, "page_size", "501")):
            with self.subTest(msg=msg):
                self.assertConnectError(v.call(AUDIT, "ListAudit", msg), 400,
                                        "invalid_argument", [field, value])
        self.assertConnectError(self.client().call(AUDIT, "ListAudit", {}), 401,
                                "unauthenticated")

    def test_bucket_reset_is_audited_with_the_state_before(self):
        """ResetBucket (issue 40, point 4) writes a bucket_audit row: who,
        the policy, the key and the bucket as it was (4 of 10 taken: 6
        left), before it gives the whole limit back; the audit lists it as
        kind "bucket", filtered by policy too. A reset that fails on a
        missing policy writes nothing."""
        e, v = self.editor(), self.viewer()
        name = self.name("rst")
        e.create(name, max_permits=10, rate="0.001")
        api = self.api()
        for _ in range(4):
            self.assertTrue(test_admin.decision(api.acquire(name, key="alice"))["allowed"])
        self.assertEqual(self.entries(v, policy=name, kind="bucket"), [])
        r = e.ok(e.p("ResetBucket", {"name": name, "key": "alice"}))["bucket"]
        self.assertEqual(test_admin.num(r, "remaining"), 10)

        got = self.entries(v, policy=name, kind="bucket")
        self.assertEqual([(x["kind"], x["subject"], x["keyPrefix"], x["action"], x["actor"])
                          for x in got], [("bucket", name, "alice", "reset", EDITOR)])
        before = json.loads(got[0]["oldValue"])
        self.assertEqual((before["policy"], before["key"]), (name, "alice"))
        self.assertEqual((int(before["remaining"]), int(before["limit"])), (6, 10))
        self.assertAlmostEqual(before["tokens"], 6, delta=0.1)
        self.assertEqual(got[0].get("newValue", ""), "")
        self.assertIn(("bucket", name), [(x["kind"], x["subject"]) for x in self.entries(v)])
        # The same row in the table, for a DBA.
        rows = self.sql("SELECT policy, bucket_key, action, actor FROM bucket_audit "
                        "WHERE policy = '%s'" % name)
        self.assertEqual([tuple(r) for r in rows], [(name, "alice", "reset", EDITOR)])
        # An empty bucket says 0 left; a missing policy is refused, unaudited.
        for _ in range(10):
            api.acquire(name, key="alice")
        e.ok(e.p("ResetBucket", {"name": name, "key": "alice"}))
        before = json.loads(self.entries(v, policy=name, kind="bucket")[0]["oldValue"])
        self.assertEqual((int(before["remaining"]), int(before["limit"])), (0, 10))
        gone = self.name("rst-none")
        self.assertConnectError(e.p("ResetBucket", {"name": gone, "key": "alice"}), 404,
                                "not_found")
        self.assertEqual(self.entries(v, policy=gone), [])

    def test_override_changes_are_listed_in_words_and_filtered(self):
        """override_audit (migration 0014) on the Audit: who, when, the
        policy, the match, before and after, by the API and by plain SQL;
        filtered by kind, policy, user and time like the others."""
        e, v = self.editor(), self.viewer()
        start = self.sql("SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ')")[0][0]
        name, other = self.name("aov"), self.name("aov-other")
        e.create(name, max_permits=10, rate="1")
        e.create(other, max_permits=10, rate="1")
        ov = e.ok(e.call(OVR, "CreateOverride", {"override": {
            "policy": name, "matchKind": "prefix", "matchValue": "premium_", "action": "limit",
            "maxPermits": "100", "rate": "10"}}))["override"]
        e.ok(e.call(OVR, "UpdateOverride", {"override": dict(ov, maxPermits="200")}))
        e.ok(e.call(OVR, "CreateOverride", {"override": {
            "policy": other, "matchKind": "key", "matchValue": "bob", "action": "block"}}))
        dba, url = self.dba()
        mysql("UPDATE policy_overrides SET action = 'block', max_permits = NULL, rate = NULL "
              "WHERE id = %s" % ov["id"], url=url, database=self.db)
        e.ok(e.call(OVR, "DeleteOverride", {"id": ov["id"]}))

        got = self.entries(v, kind="override", policy=name)
        self.assertEqual([(x["kind"], x["subject"], x["keyPrefix"], x["action"], x["actor"])
                          for x in got],
                         [("override", name, "prefix premium_", "delete", EDITOR),
                          ("override", name, "prefix premium_", "update", dba),
                          ("override", name, "prefix premium_", "update", EDITOR),
                          ("override", name, "prefix premium_", "create", EDITOR)], got)
        upd = got[2]
        self.assertEqual((json.loads(upd["oldValue"])["max_permits"],
                          json.loads(upd["newValue"])["max_permits"]), (100, 200))
        self.assertEqual(json.loads(got[1]["newValue"])["action"], "block")
        self.assertEqual(json.loads(got[0]["oldValue"])["match_value"], "premium_")
        self.assertEqual(got[0].get("newValue", ""), "")
        # Among every kind, by the policy; by user; by kind alone; by time.
        self.assertEqual([x["kind"] for x in self.entries(v, policy=name)],
                         ["override"] * 4 + ["policy"])
        self.assertEqual([(x["subject"], x["action"]) for x in
                          self.entries(v, kind="override", user=dba)], [(name, "update")])
        self.assertEqual({x["subject"] for x in self.entries(v, kind="override", since=start)},
                         {name, other})
        self.assertEqual(self.entries(v, kind="override", policy=name, until=start), [])

    def test_envoy_descriptor_changes_are_audited_by_rpc_and_plain_sql(self):
        """Migration 0018: a put, an update and a delete by the RPCs (actor:
        the session's user) and by plain SQL (the MySQL user) each write an
        envoy_descriptor_audit row; the Audit lists them as kind envoy."""
        e, v = self.editor(), self.viewer()
        name, renamed = self.name("aenv"), self.name("aenv-b")
        e.create(name, max_permits=10, rate="1")
        e.create(renamed, max_permits=10, rate="1")
        dom = unique("dom")
        put = {"domain": dom, "descriptor": "generic_key=api", "policy": name}
        e.ok(e.call(ENVOY, "PutEnvoyDescriptor", {"descriptor": put}))
        e.ok(e.call(ENVOY, "PutEnvoyDescriptor", {"descriptor": dict(put, policy=renamed)}))
        e.ok(e.call(ENVOY, "DeleteEnvoyDescriptor", {"domain": dom,
                                                     "descriptor": "generic_key=api"}))
        dba, url = self.dba()
        mysql("INSERT INTO envoy_descriptors (domain, descriptor, policy) VALUES "
              "('%s', 'user_id', '%s'); UPDATE envoy_descriptors SET key_entry = 'user_id' "
              "WHERE domain = '%s'; DELETE FROM envoy_descriptors WHERE domain = '%s'"
              % (dom, name, dom, dom), url=url, database=self.db)
        rows = self.sql("SELECT descriptor, action, actor, JSON_UNQUOTE(JSON_EXTRACT("
                        "IFNULL(new_value, old_value), '$.policy')) FROM envoy_descriptor_audit "
                        "WHERE domain = '%s' ORDER BY id" % dom)
        self.assertEqual([tuple(r) for r in rows], [
            ("generic_key=api", "create", EDITOR, name),
            ("generic_key=api", "update", EDITOR, renamed),
            ("generic_key=api", "delete", EDITOR, renamed),
            ("user_id", "create", dba, name),
            ("user_id", "update", dba, name),
            ("user_id", "delete", dba, name)], rows)
        got = [x for x in self.entries(v, kind="envoy") if x["subject"] == dom]
        self.assertEqual([(x["keyPrefix"], x["action"], x["actor"]) for x in got], [
            ("user_id", "delete", dba), ("user_id", "update", dba), ("user_id", "create", dba),
            ("generic_key=api", "delete", EDITOR), ("generic_key=api", "update", EDITOR),
            ("generic_key=api", "create", EDITOR)])
        upd = got[4]
        self.assertEqual((json.loads(upd["oldValue"])["policy"],
                          json.loads(upd["newValue"])["policy"]), (name, renamed))
        self.assertEqual(json.loads(got[1]["newValue"])["key_entry"], "user_id")
        # A policy's filter finds the descriptors that named it, before or after.
        self.assertEqual([(x["keyPrefix"], x["action"]) for x in
                          self.entries(v, kind="envoy", policy=renamed)],
                         [("generic_key=api", "delete"), ("generic_key=api", "update")])

    def test_gateway_rule_changes_are_listed_by_kind_and_policy(self):
        """gateway_rule_audit (0010) on the Audit as kind gateway: "rule N",
        the policy it names, by the API and by plain SQL."""
        e, v = self.editor(), self.viewer()
        name, other = self.name("agw"), self.name("agw-b")
        e.create(name, max_permits=10, rate="1")
        e.create(other, max_permits=10, rate="1")
        rule = e.ok(e.call(GATEWAY, "CreateGatewayRule", {"rule": {
            "pathPrefix": "/aud/", "policy": name, "keySource": "none"}}))["rule"]
        rule = e.ok(e.call(GATEWAY, "UpdateGatewayRule", {"rule": dict(rule, policy=other)}))["rule"]
        dba, url = self.dba()
        mysql("UPDATE gateway_rules SET permits = 2 WHERE id = %s" % rule["id"], url=url,
              database=self.db)
        e.ok(e.call(GATEWAY, "DeleteGatewayRule", {"id": rule["id"]}))
        subject = "rule %s" % rule["id"]
        got = [x for x in self.entries(v, kind="gateway") if x["subject"] == subject]
        self.assertEqual([(x["keyPrefix"], x["action"], x["actor"]) for x in got], [
            (other, "delete", EDITOR), (other, "update", dba), (other, "update", EDITOR),
            (name, "create", EDITOR)], got)
        self.assertEqual(json.loads(got[1]["newValue"])["permits"], 2)
        self.assertEqual([x["action"] for x in self.entries(v, kind="gateway", policy=name)],
                         ["update", "create"])

    def test_plain_sql_rows_hold_every_column(self):
        """Migration 0019: a plain-SQL change of 0015's and 0016's columns
        (reservations, local leases) is audited with them before and after,
        as permitd's own rows are; an apps change and a delete by plain SQL
        keep them too (0009's triggers wrote the columns of their day: such
        a change showed no difference)."""
        e = self.editor()
        name = self.name("every")
        e.create(name, max_permits=10, rate="1")
        own = json.loads(self.entries(e, policy=name)[0]["newValue"])
        self.assertEqual((own["debt_floor"], own["reserve_expiry"], own["local_lease"],
                          own["local_lease_permits"]), (0, "keep", None, None), own)
        dba, url = self.dba()
        mysql("UPDATE policies SET debt_floor = 50, reserve_ttl_ms = 60000, "
              "reserve_expiry = 'refund', local_lease = 'on', local_lease_permits = 25 "
              "WHERE name = '%s'" % name, url=url, database=self.db)
        row = self.entries(e, policy=name)[0]
        self.assertEqual((row["action"], row["actor"]), ("update", dba))
        before, after = json.loads(row["oldValue"]), json.loads(row["newValue"])
        fields = ("reserve_ttl_ms", "debt_floor", "reserve_expiry", "local_lease",
                  "local_lease_permits")
        self.assertEqual([before[f] for f in fields], [300000, 0, "keep", None, None], before)
        self.assertEqual([after[f] for f in fields], [60000, 50, "refund", "on", 25], after)
        # The app-list triggers' procedure, and the delete.
        mysql("INSERT INTO policy_apps (policy_id, app) SELECT id, 'extra' FROM policies "
              "WHERE name = '%s'" % name, url=url, database=self.db)
        row = self.entries(e, policy=name)[0]
        self.assertEqual(json.loads(row["newValue"])["apps"], "app,extra", row)
        self.assertEqual([json.loads(row["newValue"])[f] for f in fields],
                         [60000, 50, "refund", "on", 25], row)
        mysql("DELETE FROM policies WHERE name = '%s'" % name, url=url, database=self.db)
        row = self.entries(e, policy=name)[0]
        self.assertEqual(row["action"], "delete", row)
        self.assertEqual([json.loads(row["oldValue"])[f] for f in fields],
                         [60000, 50, "refund", "on", 25], row)

    def test_last_changed_by_is_the_name_the_audit_shows(self):
        e = self.editor()
        name = self.name("lcb")
        app = unique("lcbapp")
        e.create(name, max_permits=10)
        e.ok(e.call(APPS, "CreateApp", {"name": app}))
        dba, url = self.dba()
        mysql("UPDATE policies SET max_permits = 11 WHERE name = '%s'" % name, url=url,
              database=self.db)
        mysql("UPDATE apps SET enabled = 0 WHERE name = '%s'" % app, url=url, database=self.db)
        pol = e.get(name)
        newest = self.entries(e, policy=name)[0]
        self.assertEqual((pol["updatedBy"], newest["actor"]), (dba, dba))
        apps = e.ok(e.call(APPS, "ListApps", {}))["apps"]
        mine = [x for x in apps if x["name"] == app][0]
        newest = [x for x in self.entries(e, kind="app") if x["subject"] == app][0]
        self.assertEqual((mine["updatedBy"], newest["actor"]), (dba, dba))
        # And listed: the policy list shows it too.
        listed = e.ok(e.p("ListPolicies", {"filter": name}))["policies"]
        self.assertEqual(listed[0]["updatedBy"], dba)
        # A plain-SQL change of the policy's apps (which cannot set
        # policies.updated_by) and a key issued for the app by another user.
        e.update(e.get(name), maxPermits="12")
        mysql("INSERT INTO policy_apps (policy_id, app) SELECT id, 'extra' FROM policies "
              "WHERE name = '%s'" % name, url=url, database=self.db)
        self.assertEqual(e.get(name)["updatedBy"], dba)
        self.assertEqual(self.entries(e, policy=name)[0]["actor"], dba)
        boss = self.client()
        self.ok_login(boss, ADMIN, ADMIN_PW)
        boss.ok(boss.call(APPS, "IssueKey", {"app": app}))
        mine = [x for x in e.ok(e.call(APPS, "ListApps", {}))["apps"] if x["name"] == app][0]
        newest = [x for x in self.entries(e) if x["subject"] == app][0]
        self.assertEqual((mine["updatedBy"], newest["actor"], newest["kind"]), (ADMIN, ADMIN, "key"))
        # A plain-SQL insert names its MySQL user as creator.
        mysql("INSERT INTO policies (name, max_permits, rate) VALUES ('%s-sql', 3, 1)" % name,
              url=url, database=self.db)
        time.sleep(0.1)
        made = e.get(name + "-sql")
        self.assertEqual((made["createdBy"], made["updatedBy"]), (dba, dba))
        self.assertEqual(self.entries(e, policy=name + "-sql")[0]["actor"], dba)


if __name__ == "__main__":
    unittest.main(verbosity=2)
