"""`permitd migrate` against the stack's real MariaDB (issue 3).

Every test works in a database of its own (mig_<unique>, created through
root over the socket and dropped at the end), so tests never see each
other's history or lock. Migrations come from the binary (embedded
migrations/) or from a --dir copy that a test may break or edit.
"""
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import harness

MIGRATIONS = os.path.join(harness.SOURCE_DIR, "migrations")
# The versions migrations/ ships; the tests add theirs above them.
SHIPPED = sorted(int(f.split("_")[0]) for f in os.listdir(MIGRATIONS) if f.endswith(".up.sql"))
LAST = SHIPPED[-1]
NEXT = LAST + 1


def steps_back_to(version):
    """How many migrations `down N` reverts to stand at version: those
    shipped after it (the numbers may have gaps while parallel branches
    hold theirs)."""
    return str(len([v for v in SHIPPED if v > version]))


def v(n):
    """A version as files and output spell it: 0001."""
    return "%04d" % n


class MigrateCase(unittest.TestCase):
    n = 0

    def setUp(self):
        env = harness.stack_env()
        MigrateCase.n += 1
        self.db = "mig_%d_%d_%d" % (os.getpid(), int(time.time() * 1000) % 10000000, MigrateCase.n)
        self.socket = env["PERMITD_TEST_MYSQL_SOCKET"]
        self.port = int(env["PERMITD_TEST_MYSQL_PORT"])
        harness.mysql("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
                      % self.db)
        self.url = "mysql://root@localhost/%s?socket=%s" % (self.db, self.socket)
        self.tmp = tempfile.mkdtemp(prefix="permitd-migrate-")
        self.users = []

    def tearDown(self):
        harness.mysql("DROP DATABASE IF EXISTS `%s`" % self.db)
        for u in self.users:
            harness.mysql("DROP USER IF EXISTS %s" % u)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------ helpers

    def migrate(self, *args, url=None, env=None, cwd=None, timeout=120):
        """Runs `permitd migrate ARGS`; returns (exit status, stdout + stderr)."""
        full = dict(os.environ)
        full.pop("PERMITD_MYSQL_URL", None)
        full["PERMITD_MYSQL_URL"] = self.url if url is None else url
        full.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        full.update(env or {})
        r = subprocess.run([harness.PERMITD_BIN, "migrate"] + list(args), env=full, cwd=cwd,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return r.returncode, r.stdout

    def ok(self, *args, **kw):
        rc, out = self.migrate(*args, **kw)
        self.assertEqual(rc, 0, out)
        return out

    def sql(self, q):
        return harness.mysql(q, database=self.db)

    def tables(self):
        return {r[0] for r in self.sql(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")}

    def history(self):
        """{version: row dict} of permitd_schema_history."""
        rows = self.sql("SELECT version, title, checksum, state, applied_by, "
                        "IFNULL(execution_ms, 'NULL'), IFNULL(failed_statement, 'NULL'), "
                        "IFNULL(error, 'NULL'), applied_at FROM permitd_schema_history "
                        "ORDER BY version")
        keys = ("version", "title", "checksum", "state", "applied_by", "execution_ms",
                "failed_statement", "error", "applied_at")
        return {int(r[0]): dict(zip(keys, r)) for r in rows}

    def copy_migrations(self, extra=None):
        """A --dir copy of migrations/ plus extra {file name: text}."""
        d = os.path.join(self.tmp, "migrations")
        shutil.copytree(MIGRATIONS, d)
        for name, text in (extra or {}).items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        return d

    # ------------------------------------------------------------ tests

    def test_up_from_empty(self):
        out = self.ok("up")
        self.assertIn("0001", out)
        self.assertIn("policies", out)
        self.assertRegex(out, r"\d+ statements")
        self.assertRegex(out, r"\d+ ms")
        self.assertTrue({"policies", "policy_apps", "policy_audit",
                         "permitd_schema_history"} <= self.tables(), self.tables())

        checks = {r[0] for r in self.sql(
            "SELECT CONSTRAINT_NAME FROM information_schema.CHECK_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA = DATABASE()")}
        self.assertIn("chk_policies_max_permits", checks)
        self.assertIn("chk_policies_rate", checks)
        triggers = {r[0] for r in self.sql(
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS "
            "WHERE TRIGGER_SCHEMA = DATABASE()")}
        self.assertIn("trg_policies_version", triggers)
        for name, collation in self.sql(
                "SELECT TABLE_NAME, TABLE_COLLATION FROM information_schema.TABLES "
                "WHERE TABLE_SCHEMA = DATABASE()"):
            self.assertEqual(collation, "utf8mb4_unicode_ci", name)

        # The schema works: a plain UPDATE bumps version; CHECKs hold.
        self.sql("INSERT INTO policies (name, max_permits, rate) VALUES ('p1', 10, 0.5)")
        self.sql("UPDATE policies SET max_permits = 20 WHERE name = 'p1'")
        self.assertEqual(self.sql("SELECT version FROM policies WHERE name = 'p1'"), [["2"]])
        with self.assertRaises(harness.MysqlError):
            self.sql("INSERT INTO policies (name, max_permits, rate) VALUES ('p2', 0, 1)")
        with self.assertRaises(harness.MysqlError):
            self.sql("INSERT INTO policies (name, max_permits, rate) VALUES ('p3', 1, 0)")

        h = self.history()
        self.assertEqual(sorted(h), SHIPPED)
        self.assertEqual(h[1]["title"], "policies")
        for name in os.listdir(MIGRATIONS):
            if not name.endswith(".up.sql"):
                continue
            row = h[int(name.split("_")[0])]
            self.assertEqual(row["state"], "applied")
            with open(os.path.join(MIGRATIONS, name), "rb") as f:
                self.assertEqual(row["checksum"], hashlib.sha256(f.read()).hexdigest(), name)
            self.assertIn("root@localhost", row["applied_by"])
            self.assertIn("os user", row["applied_by"])
            self.assertNotEqual(row["execution_ms"], "NULL")
        # applied_at is UTC
        for (age,) in self.sql("SELECT TIMESTAMPDIFF(SECOND, applied_at, UTC_TIMESTAMP()) "
                               "FROM permitd_schema_history"):
            self.assertTrue(-5 <= int(age) <= 60, age)

        out = self.ok("up")
        self.assertIn("nothing to do", out)

    def test_down_all_and_up_again(self):
        self.ok("up")
        out = self.ok("down", "--all")
        self.assertIn("0001", out)
        self.assertEqual(self.tables(), {"permitd_schema_history"})
        self.assertEqual(self.history(), {})
        self.ok("up")
        self.assertIn("policies", self.tables())
        self.assertEqual(sorted(self.history()), SHIPPED)
        self.ok("down", "1")
        self.assertEqual(sorted(self.history()), SHIPPED[:-1])
        self.ok("down", str(len(SHIPPED) + 5))       # more than applied: all of them
        self.assertEqual(self.tables(), {"permitd_schema_history"})
        self.assertIn("nothing to do", self.ok("down", "--all"))
        self.ok("up")
        self.assertEqual(sorted(self.history()), SHIPPED)

    def test_app_changes_version_and_audit_up_and_down(self):
        # 0004: an app change by plain SQL is a new version of its policy and
        # an audit row; its down folds the counted changes into
        # policies.version, so no version goes down (sync.lua would keep
        # Redis's newer copy), and writes no audit row for that.
        self.ok("up")
        self.sql("INSERT INTO policies (name, max_permits, rate) VALUES ('p1', 10, 1), "
                 "('p2', 10, 1)")
        version = lambda: int(self.sql(
            "SELECT p.version + IFNULL((SELECT c.changes FROM policy_app_changes c "
            "WHERE c.policy_id = p.id), 0) FROM policies p WHERE p.name = 'p1'")[0][0])
        audits = lambda: int(self.sql("SELECT COUNT(*) FROM policy_audit")[0][0])
        self.assertEqual(version(), 1)
        self.sql("INSERT INTO policy_apps (policy_id, app) SELECT id, 'a' FROM policies "
                 "WHERE name = 'p1'")
        self.sql("INSERT INTO policy_apps (policy_id, app) SELECT id, 'b' FROM policies "
                 "WHERE name = 'p1'")
        self.sql("UPDATE policy_apps SET app = app")           # no change, no version
        self.sql("DELETE FROM policy_apps WHERE app = 'b'")
        self.assertEqual(version(), 4)
        rows = self.sql("SELECT action, actor, JSON_VALUE(old_value, '$.apps'), "
                        "JSON_VALUE(new_value, '$.apps'), JSON_VALUE(new_value, '$.version') "
                        "FROM policy_audit WHERE name = 'p1' ORDER BY id")
        self.assertEqual([r[0] for r in rows], ["create", "update", "update", "update"])
        self.assertTrue(all(r[1] == "root@localhost" for r in rows), rows)
        self.assertEqual([r[2:] for r in rows[1:]], [["", "a", "2"], ["a", "a,b", "3"],
                                                      ["a,b", "a", "4"]])
        # Moved to another policy: a change of both.
        self.sql("UPDATE policy_apps SET policy_id = (SELECT id FROM policies WHERE name = 'p2') "
                 "WHERE app = 'a'")
        self.assertEqual(version(), 5)
        self.assertEqual(self.sql("SELECT JSON_VALUE(new_value, '$.apps') FROM policy_audit "
                                  "WHERE name = 'p2' ORDER BY id DESC LIMIT 1"), [["a"]])
        # permitd's own writes (@permitd_actor set) are left to permitd.
        self.sql("SET @permitd_actor = 'ed'; INSERT INTO policy_apps (policy_id, app) "
                 "SELECT id, 'c' FROM policies WHERE name = 'p1'")
        self.assertEqual(version(), 5)

        n = audits()
        self.ok("down", steps_back_to(3))             # back to 0003
        self.assertNotIn("policy_app_changes", self.tables())
        self.assertEqual(self.sql("SELECT version FROM policies WHERE name = 'p1'"), [["5"]])
        self.assertEqual(audits(), n, "the fold wrote audit rows")
        # 0003 again: a plain app change changes no version...
        self.sql("INSERT INTO policy_apps (policy_id, app) SELECT id, 'd' FROM policies "
                 "WHERE name = 'p1'")
        self.assertEqual(self.sql("SELECT version FROM policies WHERE name = 'p1'"), [["5"]])
        self.assertEqual(audits(), n)
        # ... and a plain UPDATE is audited as 0003 did it.
        self.sql("UPDATE policies SET max_permits = 11 WHERE name = 'p1'")
        self.assertEqual(audits(), n + 1)
        self.ok("up")
        self.assertEqual(version(), 6)
        self.sql("DELETE FROM policy_apps WHERE app = 'd'")
        self.assertEqual(version(), 7)

    def test_down_without_count_refuses(self):
        self.ok("up")
        rc, out = self.migrate("down")
        self.assertEqual(rc, 2, out)
        self.assertIn("--all", out)
        self.assertIn("down N", out)
        self.assertIn("policies", self.tables())
        self.assertEqual(sorted(self.history()), SHIPPED)
        for bad in (["down", "0"], ["down", "x"], ["down", "1", "--all"], ["up", "0"],
                    ["force"], ["frobnicate"], ["up", "--bogus"]):
            rc, out = self.migrate(*bad)
            self.assertEqual(rc, 2, (bad, out))

    def test_up_n_and_down_n(self):
        d = self.copy_migrations({
            v(NEXT) + "_two.up.sql": "CREATE TABLE two (id INT PRIMARY KEY);\n",
            v(NEXT) + "_two.down.sql": "DROP TABLE two;\n",
            v(NEXT + 1) + "_three.up.sql": "CREATE TABLE three (id INT PRIMARY KEY);\n",
            v(NEXT + 1) + "_three.down.sql": "DROP TABLE three;\n",
        })
        self.ok("--dir", d, "up", "1")
        self.assertEqual(sorted(self.history()), [1])
        self.ok("--dir", d, "up", str(len(SHIPPED)))
        self.assertEqual(sorted(self.history()), SHIPPED + [NEXT])
        self.ok("--dir", d, "up")
        self.assertEqual(sorted(self.history()), SHIPPED + [NEXT, NEXT + 1])
        self.ok("--dir", d, "down", "2")
        self.assertEqual(sorted(self.history()), SHIPPED)
        self.assertNotIn("two", self.tables())
        self.assertIn("policies", self.tables())

    def test_status_lists_applied_and_pending(self):
        d = self.copy_migrations({
            v(NEXT) + "_second.up.sql": "CREATE TABLE second (id INT);\n",
            v(NEXT) + "_second.down.sql": "DROP TABLE second;\n",
        })
        out = self.ok("--dir", d, "status")
        self.assertRegex(out, r"0001\s+pending")
        self.assertRegex(out, v(NEXT) + r"\s+pending\s.*second")
        self.assertIn("0 applied, %d pending, 0 dirty" % (len(SHIPPED) + 1), out)
        self.ok("--dir", d, "up", "1")
        out = self.ok("--dir", d, "status")
        self.assertRegex(out, r"0001\s+applied\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+\s+\d+\s+"
                              r"root@localhost \(os user \S+\)\s+policies")
        self.assertRegex(out, v(NEXT) + r"\s+pending")
        self.assertIn("1 applied, %d pending, 0 dirty" % len(SHIPPED), out)

    def test_concurrent_ups_apply_everything_once(self):
        d = self.copy_migrations({
            v(NEXT) + "_runs.up.sql": "CREATE TABLE runs (n INT NOT NULL);\nDO SLEEP(1);\n",
            v(NEXT) + "_runs.down.sql": "DROP TABLE runs;\n",
            v(NEXT + 1) + "_count.up.sql": "INSERT INTO runs VALUES (3);\nDO SLEEP(0.5);\n",
            v(NEXT + 1) + "_count.down.sql": "DELETE FROM runs WHERE n = 3;\n",
        })
        full = dict(os.environ, PERMITD_MYSQL_URL=self.url)
        full.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        procs = [subprocess.Popen([harness.PERMITD_BIN, "migrate", "--dir", d, "up"], env=full,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=120)[0] for p in procs]
        for p, out in zip(procs, outs):
            self.assertEqual(p.returncode, 0, out)
            self.assertNotIn("ERROR", out)
        both = "\n".join(outs)
        for n in SHIPPED + [NEXT, NEXT + 1]:
            self.assertEqual(both.count("applied %s " % v(n)), 1, both)
        self.assertEqual(sorted(self.history()), SHIPPED + [NEXT, NEXT + 1])
        self.assertTrue(all(h["state"] == "applied" for h in self.history().values()))
        self.assertEqual(self.sql("SELECT COUNT(*) FROM runs"), [["1"]])
        self.assertIn("waiting", both)

    def test_a_migration_longer_than_wait_timeout(self):
        # The control connection waits idle while a migration runs on the
        # other: MySQL must not drop it (and the run's lock and result with
        # it) after wait_timeout. Sessions made now get a 2 s timeout, on a
        # MariaDB of this test's own: the setting is global, and on the
        # stack's it cut the sessions of the tests ctest runs beside this one.
        db = harness.PrivateMariaDB()
        self.addCleanup(db.cleanup)
        d = self.copy_migrations({
            v(NEXT) + "_slow.up.sql": "CREATE TABLE slow (n INT);\nDO SLEEP(4);\n",
            v(NEXT) + "_slow.down.sql": "DROP TABLE slow;\n",
        })
        db.sql("SET GLOBAL wait_timeout = 2")
        out = self.ok("--dir", d, "up", url="mysql://root@localhost/permitd?socket=%s" % db.socket)
        self.assertIn("applied %s " % v(NEXT), out)
        self.assertEqual(db.sql("SELECT state FROM permitd_schema_history WHERE version = %d" % NEXT,
                                database="permitd"), [["applied"]])

    def test_broken_migration_leaves_clear_dirty_state(self):
        d = self.copy_migrations({
            v(NEXT) + "_broken.up.sql": "-- the second statement is not SQL\n"
                                  "CREATE TABLE half_done (id INT);\n"
                                  "CREATE TABLEX oops (id INT);\n"
                                  "CREATE TABLE never_made (id INT);\n",
            v(NEXT) + "_broken.down.sql": "DROP TABLE IF EXISTS never_made;\n"
                                          "DROP TABLE IF EXISTS half_done;\n",
            v(NEXT + 1) + "_later.up.sql": "CREATE TABLE later (id INT);\n",
            v(NEXT + 1) + "_later.down.sql": "DROP TABLE later;\n",
        })
        rc, out = self.migrate("--dir", d, "up")
        self.assertNotEqual(rc, 0, out)
        self.assertIn(v(NEXT) + "_broken.up.sql", out)
        self.assertIn("statement 2", out)
        self.assertIn("You have an error in your SQL syntax", out)
        self.assertIn("ERROR 1064", out)
        self.assertIn("force", out)
        tables = self.tables()
        self.assertIn("half_done", tables)
        self.assertNotIn("never_made", tables)
        self.assertNotIn("later", tables)
        h = self.history()
        self.assertTrue(all(h[n]["state"] == "applied" for n in SHIPPED), h)
        self.assertEqual(h[NEXT]["state"], "dirty")
        self.assertEqual(h[NEXT]["failed_statement"], "2")
        self.assertIn("1064", h[NEXT]["error"])
        self.assertNotIn(NEXT + 1, h)

        # Later runs refuse, naming the dirty version, until force.
        for args in (["up"], ["down", "1"], ["validate"]):
            rc, out = self.migrate("--dir", d, *args)
            self.assertEqual(rc, 1, (args, out))
            self.assertIn(v(NEXT), out)
            self.assertIn("dirty", out)
        out = self.ok("--dir", d, "status")
        self.assertRegex(out, v(NEXT) + r"\s+DIRTY")
        self.assertIn("statement 2", out)
        self.assertIn("1 dirty", out)

        # The DBA undoes statement 1 by hand, forces back to 1, fixes the file.
        self.sql("DROP TABLE half_done")
        self.ok("--dir", d, "force", str(LAST))
        self.assertEqual(sorted(self.history()), SHIPPED)
        with open(os.path.join(d, v(NEXT) + "_broken.up.sql"), "w") as f:
            f.write("CREATE TABLE half_done (id INT);\nCREATE TABLE never_made (id INT);\n")
        self.ok("--dir", d, "up")
        self.assertEqual(sorted(self.history()), SHIPPED + [NEXT, NEXT + 1])
        self.assertTrue({"half_done", "never_made", "later"} <= self.tables())

    def test_force_marks_dirty_version_applied(self):
        d = self.copy_migrations({
            v(NEXT) + "_bad.up.sql": "CREATE TABLE a2 (id INT);\nSELECT * FROM no_such_table;\n",
            v(NEXT) + "_bad.down.sql": "DROP TABLE a2;\n",
        })
        rc, out = self.migrate("--dir", d, "up")
        self.assertEqual(rc, 1, out)
        self.assertIn("statement 2", out)
        self.assertIn("no_such_table", out)
        rc, out = self.migrate("--dir", d, "force", str(NEXT + 5))
        self.assertEqual(rc, 1, out)
        self.ok("--dir", d, "force", str(NEXT))
        h = self.history()
        self.assertEqual(h[NEXT]["state"], "applied")
        self.assertEqual(h[NEXT]["error"], "NULL")
        self.assertEqual(h[NEXT]["execution_ms"], "NULL")      # recorded, not run
        self.ok("--dir", d, "validate")
        self.assertIn("nothing to do", self.ok("--dir", d, "up"))

    def test_interrupted_migration_is_dirty(self):
        """A run killed mid-file leaves its version dirty, like a failure."""
        d = self.copy_migrations({
            v(NEXT) + "_slow.up.sql": "CREATE TABLE slow (id INT);\nDO SLEEP(20);\n",
            v(NEXT) + "_slow.down.sql": "DROP TABLE slow;\n",
        })
        full = dict(os.environ, PERMITD_MYSQL_URL=self.url)
        p = subprocess.Popen([harness.PERMITD_BIN, "migrate", "--dir", d, "up"], env=full,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 30
        while time.time() < deadline and "slow" not in self.tables():
            time.sleep(0.1)
        p.kill()
        p.communicate()
        # The server notices the lost client only when the sleep ends: end it.
        for (pid,) in harness.mysql("SELECT ID FROM information_schema.PROCESSLIST "
                                    "WHERE DB = '%s' AND INFO LIKE 'DO SLEEP%%'" % self.db):
            harness.mysql("KILL QUERY %s" % pid)
        self.assertEqual(self.history()[NEXT]["state"], "dirty")
        rc, out = self.migrate("--dir", d, "up")
        self.assertEqual(rc, 1, out)
        self.assertIn("never finished", out)

    def test_edited_applied_file_is_caught(self):
        d = self.copy_migrations()
        self.ok("--dir", d, "up")
        self.ok("--dir", d, "validate")
        with open(os.path.join(d, "0001_policies.up.sql"), "a") as f:
            f.write("\n-- an innocent-looking edit\n")
        for args in (["validate"], ["up"]):
            rc, out = self.migrate("--dir", d, *args)
            self.assertEqual(rc, 1, (args, out))
            self.assertIn("0001_policies.up.sql", out)
            self.assertIn("changed", out)
        out = self.ok("--dir", d, "status")
        self.assertIn("CHANGED", out)
        # The embedded (unedited) files still validate.
        self.ok("validate")
        # force re-records the checksum when the DBA accepts the edit.
        self.ok("--dir", d, "force", str(LAST))
        self.ok("--dir", d, "validate")

    def test_new_creates_next_pair(self):
        d = self.copy_migrations()
        out = self.ok("--dir", d, "new", "Add Owner-Column!", url="")
        up = os.path.join(d, v(NEXT) + "_add_owner_column.up.sql")
        down = os.path.join(d, v(NEXT) + "_add_owner_column.down.sql")
        self.assertTrue(os.path.exists(up), out)
        self.assertTrue(os.path.exists(down), out)
        self.assertIn(up, out)
        # ./migrations by default
        out = self.ok("new", "second", "one", cwd=self.tmp, url="")
        self.assertTrue(os.path.exists(os.path.join(d, v(NEXT + 1) + "_second_one.up.sql")), out)
        self.assertTrue(os.path.exists(os.path.join(d, v(NEXT + 1) + "_second_one.down.sql")), out)
        rc, out = self.migrate("new", "!!!", cwd=self.tmp, url="")
        self.assertEqual(rc, 2, out)
        # The new (comment-only) files apply and revert cleanly.
        self.ok("--dir", d, "up")
        self.assertEqual(sorted(self.history()), SHIPPED + [NEXT, NEXT + 1])
        self.ok("--dir", d, "down", "--all")
        self.assertEqual(self.history(), {})

    def test_new_needs_a_directory(self):
        rc, out = self.migrate("new", "x", cwd=self.tmp, url="")
        self.assertEqual(rc, 2, out)
        self.assertIn("--dir", out)

    def test_colocate_up_and_down(self):
        # 0005: policies.colocate, off for every policy (existing and new)
        # unless set; its down drops it, and up brings it back.
        columns = lambda: {r[0] for r in self.sql(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = 'policies'")}
        self.ok("up")
        self.assertIn("colocate", columns())
        self.sql("INSERT INTO policies (name, max_permits, rate) VALUES ('c1', 10, 1)")
        self.sql("INSERT INTO policies (name, max_permits, rate, colocate) VALUES ('c2', 10, 1, 1)")
        self.assertEqual(self.sql("SELECT name, colocate FROM policies ORDER BY name"),
                         [["c1", "0"], ["c2", "1"]])
        self.ok("down", steps_back_to(4))             # back to 0004
        self.assertNotIn("colocate", columns())
        self.assertEqual(self.sql("SELECT COUNT(*) FROM policies"), [["2"]])
        self.ok("up")
        self.assertEqual(self.sql("SELECT name, colocate FROM policies ORDER BY name"),
                         [["c1", "0"], ["c2", "0"]])

    def test_algorithms_up_down_and_refusal(self):
        # 0006 (issue 20): algorithm, window_ms, calendar, lease_ms; rate
        # NULL but for token buckets; existing rows become token buckets.
        # Its down refuses, changing nothing, while a policy is another
        # algorithm, naming it; then goes once none is.
        columns = lambda: {r[0] for r in self.sql(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = 'policies'")}
        algo = {"algorithm", "window_ms", "calendar", "lease_ms"}
        self.ok("up")
        self.ok("down", steps_back_to(5))             # back to 0005
        self.assertFalse(algo & columns())
        self.sql("INSERT INTO policies (name, max_permits, rate) VALUES ('tb', 10, 0.5)")
        self.ok("up")
        self.assertTrue(algo <= columns())
        self.assertEqual(self.sql("SELECT algorithm, rate, IFNULL(window_ms, 'NULL'), "
                                  "IFNULL(calendar, 'NULL'), IFNULL(lease_ms, 'NULL') "
                                  "FROM policies WHERE name = 'tb'"),
                         [["token_bucket", "0.500000000000", "NULL", "NULL", "NULL"]])
        # The CHECKs hold each combination and name the rule broken.
        ins = ("INSERT INTO policies (name, max_permits, rate, algorithm, window_ms, calendar, "
               "lease_ms) VALUES ")
        self.sql(ins + "('fw', 100, NULL, 'fixed_window', NULL, 'month', NULL)")
        self.sql(ins + "('sw', 100, NULL, 'sliding_window', 60000, NULL, NULL)")
        self.sql(ins + "('cc', 5, NULL, 'concurrency', NULL, NULL, 30000)")
        for values, rule in [
                ("('x1', 10, NULL, 'token_bucket', NULL, NULL, NULL)", "rate_only_token_bucket"),
                ("('x2', 10, 1, 'fixed_window', 1000, NULL, NULL)", "rate_only_token_bucket"),
                ("('x3', 10, NULL, 'fixed_window', 1000, 'day', NULL)", "window_by_algorithm"),
                ("('x4', 10, NULL, 'sliding_log', NULL, 'day', NULL)", "window_by_algorithm"),
                ("('x5', 10, NULL, 'fixed_window', NULL, 'week', NULL)", "chk_policies_calendar"),
                ("('x6', 10, NULL, 'concurrency', NULL, NULL, NULL)", "lease_only_concurrency"),
                ("('x7', 10, 1, 'token_bucket', NULL, NULL, 5)", "lease_only_concurrency"),
                ("('x8', 10001, NULL, 'sliding_log', 1000, NULL, NULL)", "sliding_log_max"),
                ("('x9', 10, NULL, 'leaky', NULL, NULL, NULL)", "chk_policies_algorithm"),
                ("('xa', 10, NULL, 'sliding_window', 0, NULL, NULL)", "chk_policies_window_ms")]:
            with self.assertRaises(harness.MysqlError) as e:
                self.sql(ins + values)
            self.assertIn(rule, str(e.exception), values)

        # down refuses, naming every policy in the way; nothing changed:
        # not dirty, the columns and rows there, no procedure left behind.
        before = self.history()[6]
        rc, out = self.migrate("down", steps_back_to(5))
        self.assertNotEqual(rc, 0, out)
        self.assertIn("refused", out)
        self.assertIn("cc (concurrency), fw (fixed_window), sw (sliding_window)", out)
        self.assertIn("nothing was changed", out)
        self.assertNotIn("dirty", out)
        self.assertEqual(self.history()[6], before)
        self.assertTrue(algo <= columns())
        self.assertEqual(self.sql("SELECT COUNT(*) FROM policies"), [["4"]])
        self.assertEqual(self.sql("SELECT COUNT(*) FROM information_schema.ROUTINES "
                                  "WHERE ROUTINE_SCHEMA = DATABASE()"), [["0"]])
        # Once every policy is a token bucket again, down goes, rates kept.
        self.sql("DELETE FROM policies WHERE name IN ('fw', 'sw')")
        self.sql("UPDATE policies SET algorithm = 'token_bucket', rate = 2, lease_ms = NULL "
                 "WHERE name = 'cc'")
        self.ok("down", "1")        # 0006: the refusal above left the ones after it undone
        self.assertFalse(algo & columns())
        self.assertEqual(self.sql("SELECT name, rate FROM policies ORDER BY name"),
                         [["cc", "2.000000000000"], ["tb", "0.500000000000"]])
        self.assertEqual(self.sql("SELECT IS_NULLABLE FROM information_schema.COLUMNS WHERE "
                                  "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'policies' AND "
                                  "COLUMN_NAME = 'rate'"), [["NO"]])
        self.ok("up")
        self.assertEqual(sorted(self.history()), SHIPPED)

    def test_reservation_limits_up_and_down(self):
        # 0015 (issue 38): policies.reserve_ttl_ms, debt_floor, reserve_expiry,
        # at their defaults for every policy, checked; down drops them.
        columns = lambda: {r[0] for r in self.sql(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = 'policies'")}
        self.ok("up")
        self.ok("down", steps_back_to(13))
        self.assertNotIn("debt_floor", columns())
        self.sql("INSERT INTO policies (name, max_permits, rate) VALUES ('old', 10, 1)")
        self.ok("up")
        self.assertLessEqual({"reserve_ttl_ms", "debt_floor", "reserve_expiry"}, columns())
        self.assertEqual(self.sql("SELECT reserve_ttl_ms, debt_floor, reserve_expiry FROM policies"),
                         [["300000", "0", "keep"]])
        for bad in ("reserve_expiry = 'maybe'", "debt_floor = -1", "reserve_ttl_ms = 0"):
            with self.assertRaises(harness.MysqlError) as e:
                self.sql("UPDATE policies SET %s" % bad)
            self.assertIn("chk_policies_reserve", str(e.exception))
        self.ok("down", steps_back_to(13))
        self.assertNotIn("reserve_expiry", columns())
        self.assertEqual(self.sql("SELECT COUNT(*) FROM policies"), [["1"]])

    def test_shadow_up_down_and_refusal(self):
        # 0008 (issue 23): policies.shadow, 0 for every policy (existing
        # and new) unless set, 0 or 1 only. Its down refuses, changing
        # nothing, while a policy is in shadow mode, naming it (0007 would
        # enforce a limit a team is still watching); then goes once none is.
        columns = lambda: {r[0] for r in self.sql(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = 'policies'")}
        self.ok("up")
        self.ok("down", steps_back_to(7))               # back to 0007
        self.assertNotIn("shadow", columns())
        self.sql("INSERT INTO policies (name, max_permits, rate) VALUES ('old', 10, 1)")
        self.ok("up")
        self.assertIn("shadow", columns())
        self.sql("INSERT INTO policies (name, max_permits, rate) VALUES ('new', 10, 1)")
        self.sql("INSERT INTO policies (name, max_permits, rate, shadow) VALUES "
                 "('watch.me', 10, 1, 1), ('watch-too', 10, 1, 1)")
        self.assertEqual(self.sql("SELECT name, shadow FROM policies ORDER BY name"),
                         [["new", "0"], ["old", "0"], ["watch-too", "1"], ["watch.me", "1"]])
        with self.assertRaises(harness.MysqlError) as e:
            self.sql("INSERT INTO policies (name, max_permits, rate, shadow) VALUES ('x', 1, 1, 2)")
        self.assertIn("chk_policies_shadow", str(e.exception))

        before = self.history()[8]
        rc, out = self.migrate("down", steps_back_to(7))
        self.assertNotEqual(rc, 0, out)
        self.assertIn("refused", out)
        self.assertIn("in shadow mode: watch-too, watch.me; switch shadow off first", out)
        self.assertIn("nothing was changed", out)
        self.assertNotIn("dirty", out)
        self.assertEqual(self.history()[8], before)
        self.assertIn("shadow", columns())
        self.assertEqual(self.sql("SELECT COUNT(*) FROM information_schema.ROUTINES "
                                  "WHERE ROUTINE_SCHEMA = DATABASE()"), [["0"]])
        # Shadow off everywhere: down goes, every row kept. (The refused
        # down reverted the migrations after 0008 before it met 0008's
        # refusal: one step is left to 0007.)
        self.sql("UPDATE policies SET shadow = 0")
        self.assertEqual(max(self.history()), 8)
        self.ok("down", "1")
        self.assertNotIn("shadow", columns())
        self.assertEqual(self.sql("SELECT COUNT(*) FROM policies"), [["4"]])
        self.ok("up")
        self.assertEqual(sorted(self.history()), SHIPPED)

    def test_admin_role_and_user_audit_up_and_down(self):
        # 0009 (issue 23): role admin and enabled on admin_users; user_audit
        # written by triggers (never a hash); the plain-SQL policy audit rows
        # with every column; created_by/updated_by of a plain-SQL change the
        # MySQL user its audit row names. Its down refuses, changing nothing,
        # while an admin or a disabled user exists, naming them.
        import json
        columns = lambda: {r[0] for r in self.sql(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = 'admin_users'")}
        self.ok("up")
        self.assertIn("enabled", columns())
        self.assertIn("user_audit", self.tables())
        self.sql("INSERT INTO admin_users (username, password_hash, role) VALUES "
                 "('a1', '$argon2id$secret-hash', 'admin'), ('e1', '$argon2id$h2', 'editor')")
        with self.assertRaises(harness.MysqlError) as e:
            self.sql("INSERT INTO admin_users (username, password_hash, role) "
                     "VALUES ('r1', 'h', 'root')")
        self.assertIn("chk_admin_users_role", str(e.exception))
        self.sql("UPDATE admin_users SET enabled = 0 WHERE username = 'e1'")
        self.sql("UPDATE admin_users SET password_hash = '$argon2id$new-hash' WHERE username = 'a1'")
        rows = self.sql("SELECT username, action, actor, IFNULL(new_value, '') FROM user_audit "
                        "ORDER BY id")
        self.assertEqual([r[:3] for r in rows],
                         [["a1", "create", "root@localhost"], ["e1", "create", "root@localhost"],
                          ["e1", "disable", "root@localhost"], ["a1", "password", "root@localhost"]])
        self.assertNotIn("argon2", str(rows))
        self.assertEqual(json.loads(rows[2][3])["enabled"], 0)
        self.assertNotIn("password", json.loads(rows[2][3]))
        self.assertEqual(json.loads(rows[3][3])["password"], "changed")

        # A plain-SQL policy: its audit row has every column, and its
        # created_by / updated_by name the same MySQL user.
        self.sql("INSERT INTO policies (name, max_permits, rate, algorithm, window_ms, calendar, "
                 "created_by, updated_by) VALUES ('fw', 100, NULL, 'fixed_window', NULL, 'day', "
                 "'someone', 'someone')")
        self.sql("UPDATE policies SET max_permits = 50 WHERE name = 'fw'")
        audit = self.sql("SELECT action, actor, IFNULL(old_value, ''), new_value "
                         "FROM policy_audit WHERE name = 'fw' ORDER BY id")
        self.assertEqual([(a[0], a[1]) for a in audit],
                         [("create", "root@localhost"), ("update", "root@localhost")])
        new = json.loads(audit[1][3])
        for field, want in (("algorithm", "fixed_window"), ("window_ms", None), ("calendar", "day"),
                            ("lease_ms", None), ("shadow", 0), ("colocate", 0),
                            ("max_permits", 50), ("version", 2)):
            self.assertIn(field, new)
            self.assertEqual(new[field], want, field)
        self.assertEqual(json.loads(audit[1][2])["max_permits"], 100)
        self.assertEqual(self.sql("SELECT created_by, updated_by FROM policies WHERE name = 'fw'"),
                         [["root@localhost", "root@localhost"]])
        # An app change by plain SQL: every column too.
        self.sql("INSERT INTO policy_apps (policy_id, app) SELECT id, 'web' FROM policies "
                 "WHERE name = 'fw'")
        last = json.loads(self.sql("SELECT new_value FROM policy_audit WHERE name = 'fw' "
                                   "ORDER BY id DESC LIMIT 1")[0][0])
        self.assertEqual((last["apps"], last["calendar"], last["version"]), ("web", "day", 3))

        # down to 0008 (the migrations after 0009 go first) refuses at 0009,
        # naming the admin and the disabled user; 0009 unchanged.
        before = self.history()[9]
        rc, out = self.migrate("down", steps_back_to(8))
        self.assertNotEqual(rc, 0, out)
        self.assertIn("refused", out)
        self.assertIn("a1 (admin), e1 (disabled)", out)
        self.assertIn("nothing was changed", out)
        self.assertEqual(self.history()[9], before)
        self.assertIn("enabled", columns())
        self.assertIn("user_audit", self.tables())
        self.assertEqual(self.sql("SELECT COUNT(*) FROM information_schema.ROUTINES WHERE "
                                  "ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME LIKE "
                                  "'permitd_check%'"), [["0"]])
        # Once none is left, down goes: 0008's roles, no user_audit, 0004's triggers.
        self.sql("UPDATE admin_users SET role = 'editor', enabled = 1")
        self.ok("down", "1")                            # 0009, the one left above 0008
        self.assertNotIn("enabled", columns())
        self.assertNotIn("user_audit", self.tables())
        with self.assertRaises(harness.MysqlError):
            self.sql("UPDATE admin_users SET role = 'admin' WHERE username = 'a1'")
        self.sql("UPDATE policies SET max_permits = 40 WHERE name = 'fw'")
        last = json.loads(self.sql("SELECT new_value FROM policy_audit WHERE name = 'fw' "
                                   "ORDER BY id DESC LIMIT 1")[0][0])
        self.assertNotIn("algorithm", last)
        self.assertEqual(self.sql("SELECT COUNT(*) FROM information_schema.ROUTINES "
                                  "WHERE ROUTINE_SCHEMA = DATABASE()"), [["0"]])
        self.ok("up")
        self.assertEqual(sorted(self.history()), SHIPPED)
        self.assertEqual(self.sql("SELECT role, enabled FROM admin_users ORDER BY username"),
                         [["editor", "1"], ["editor", "1"]])

    def test_delimiter_and_quotes(self):
        d = self.copy_migrations({
            v(NEXT) + "_proc.up.sql":
                "# a hash comment; with a semicolon\n"
                "CREATE TABLE notes (id INT AUTO_INCREMENT PRIMARY KEY,\n"
                "  body VARCHAR(200) NOT NULL DEFAULT 'it''s; fine',\n"
                "  `odd;name` INT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
                "COLLATE=utf8mb4_unicode_ci;\n"
                "INSERT INTO notes (body) VALUES ('a \\'quoted\\' ; semicolon'), (\"x;y\");\n"
                "/* a block comment; with a semicolon */\n"
                "DELIMITER $$\n"
                "CREATE PROCEDURE add_note(IN b VARCHAR(200))\n"
                "BEGIN\n"
                "  INSERT INTO notes (body) VALUES (b);\n"
                "  INSERT INTO notes (body) VALUES (CONCAT(b, ';2'));\n"
                "END$$\n"
                "DELIMITER ;\n"
                "CALL add_note('from proc');\n"
                "-- trailing comment\n",
            v(NEXT) + "_proc.down.sql": "DROP PROCEDURE add_note;\nDROP TABLE notes;\n",
        })
        out = self.ok("--dir", d, "up")
        self.assertRegex(out, "applied %s proc: ok, 4 statements" % v(NEXT))
        rows = [r[0] for r in self.sql("SELECT body FROM notes ORDER BY id")]
        self.assertEqual(rows, ["a 'quoted' ; semicolon", "x;y", "from proc", "from proc;2"])
        self.assertEqual(self.sql("SELECT DEFAULT(body) FROM notes LIMIT 1"), [["it's; fine"]])
        self.ok("--dir", d, "down", "1")
        self.assertNotIn("notes", self.tables())

    def test_password_never_printed(self):
        password = "Pw@Zq9/x7Kw"          # '@' and '/' must be percent-encoded
        encoded = "Pw%40Zq9%2Fx7Kw"
        for host in ("localhost", "127.0.0.1"):
            user = "'migpw_%d'@'%s'" % (MigrateCase.n, host)
            harness.mysql("CREATE USER %s IDENTIFIED BY '%s'" % (user, password))
            self.users.append(user)
            harness.mysql("GRANT ALL PRIVILEGES ON `%s`.* TO %s" % (self.db, user))
        name = "migpw_%d" % MigrateCase.n
        urls = ["mysql://%s:%s@localhost/%s?socket=%s" % (name, encoded, self.db, self.socket),
                "mysql://%s:%s@127.0.0.1:%d/%s" % (name, encoded, self.port, self.db)]
        outputs = []
        for url in urls:
            for args in (["up"], ["status"], ["validate"], ["down", "--all"], ["up"],
                         ["force", "1"], ["down"], ["status"]):
                outputs.append(self.migrate(*args, url=url)[1])
        # failures: wrong database, wrong password, bad port, unreachable server
        bad = ["mysql://%s:%s@127.0.0.1:%d/nodb_%s" % (name, encoded, self.port, self.db),
               "mysql://%s:%sWRONG@127.0.0.1:%d/%s" % (name, encoded, self.port, self.db),
               "mysql://%s:%s@127.0.0.1:99999/%s" % (name, encoded, self.db),
               "mysql://%s:%s@127.0.0.1:%d/%s" % (name, encoded, harness.free_port(), self.db)]
        for url in bad:
            rc, out = self.migrate("up", url=url)
            self.assertNotEqual(rc, 0, out)
            outputs.append(out)
        outputs.append(self.migrate("--mysql-url", urls[1], "status", url="")[1])
        for out in outputs:
            self.assertNotIn(password, out)
            self.assertNotIn(encoded, out)
            self.assertNotIn("Zq9", out)
        self.assertTrue(any("***" in out for out in outputs))

    def test_bad_url_names_the_setting(self):
        for url in ("postgres://u:Sekr1tPw@h/db", "mysql://u:Sekr1tPw@h:70000/db",
                    "mysql://u:Sekr1tPw@h"):
            rc, out = self.migrate("status", url=url)
            self.assertEqual(rc, 2, out)
            self.assertIn("PERMITD_MYSQL_URL", out)
            self.assertNotIn("Sekr1tPw", out)
        rc, out = self.migrate("status", url="")
        self.assertEqual(rc, 2, out)
        self.assertIn("PERMITD_MYSQL_URL", out)

    def test_unreachable_server(self):
        url = "mysql://root:x@127.0.0.1:%d/%s" % (harness.free_port(), self.db)
        rc, out = self.migrate("up", url=url, env={"PERMITD_MYSQL_TIMEOUT_MS": "1000"})
        self.assertEqual(rc, 1, out)
        self.assertIn("cannot connect", out)

    def test_help_explains_every_verb(self):
        rc, out = self.migrate("--help", url="")
        self.assertEqual(rc, 0, out)
        for verb in ("up [N]", "down N", "down --all", "status", "validate", "force VERSION",
                     "new TITLE", "--dir", "PERMITD_MYSQL_URL"):
            self.assertIn(verb, out)
        rc, out = self.migrate(url="")
        self.assertEqual(rc, 2, out)


if __name__ == "__main__":
    harness.main()
