"""Gateway forward-auth rules (issue 25), against real MariaDB.

Migration 0010 on a database of its own: its CHECK constraints refuse
what a rule may not be, and its down migration drops the tables.
"""
import unittest

from harness import mysql, unique
from harness.mariadb import MysqlError
from test_apps import cli, database_url


class MigrationTest(unittest.TestCase):
    """Migration 0010 on its own database: CHECK constraints, and down."""

    def setUp(self):
        self.db = unique("gwm").replace("-", "_")
        mysql("CREATE DATABASE `%s`" % self.db)
        self.url = database_url(self.db)
        rc, out, err = cli(["migrate", "up"], self.url)
        self.assertEqual(rc, 0, out + err)

    def tearDown(self):
        mysql("DROP DATABASE IF EXISTS `%s`" % self.db)

    def test_gateway_migration_checks_and_down(self):
        ok = "INSERT INTO gateway_rules (path_prefix, policy, %s) VALUES ('/a/', 'p', %s)"
        mysql(ok % ("method", "'GET'"), database=self.db)
        bad = [("method", "'get'"), ("host", "'Example.com'"), ("host", "'a.com:80'"),
               ("key_source", "'cookie'"), ("key_source", "'header'"), ("permits", "0"),
               ("key_header", "'X-Key'")]
        for column, value in bad:
            with self.assertRaises(MysqlError, msg=(column, value)) as cm:
                mysql(ok % (column, value), database=self.db)
            self.assertIn("chk_gateway_rules", str(cm.exception))
        with self.assertRaises(MysqlError):
            mysql("INSERT INTO gateway_rules (path_prefix, policy) VALUES ('nope', 'p')",
                  database=self.db)
        mysql("INSERT INTO gateway_rules (path_prefix, policy, key_source, key_header) VALUES "
              "('/b/', 'p', 'header', 'X-Api-Key')", database=self.db)
        rc, out, err = cli(["migrate", "down", "1"], self.url)
        self.assertEqual(rc, 0, out + err)
        tables = [r[0] for r in mysql("SHOW TABLES", database=self.db)]
        self.assertNotIn("gateway_rules", tables)
        self.assertNotIn("gateway_rule_audit", tables)
        self.assertIn("policies", tables)


if __name__ == "__main__":
    unittest.main(verbosity=2)
