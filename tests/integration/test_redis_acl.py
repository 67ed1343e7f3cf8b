"""Least-privilege Redis users (issue 35, docs/redis.md "Redis over TLS": the ACL
rule): permitd runs as a Redis 6 ACL user restricted to exactly the rule the
README gives, with its key pattern and channel pattern under this test's
prefix, and does a broad share of its work: policies synced from MySQL (and
an edit of one), change notices, every algorithm's Acquire, AcquireBatch,
the deny cache, hot keys and the fleet's publishing. A command outside the
rule fails the test: the log must hold no NOPERM and every master's ACL LOG
must be empty at the end. `user:password@` reaches every connection: the
workers' pipelines, the blocking calls, the subscription, and in a cluster
(cluster_redis_acl) the discovery and every master."""
import os
import re
import time
import unittest

from harness import (ClusterRedis, Permitd, Redis, decision, migrate_with_client, mysql,
                     stack_env, stack_redis_url, unique, wait_for)

# docs/redis.md "Least-privilege Redis users": the rule, with PREFIX for --redis-prefix.
# Kept here word for word; test_readme_states_the_rule checks docs/redis.md says the same.
ACL_COMMANDS = ("-@all +evalsha +script|load +ping +time +subscribe +publish +get +set +mget "
                "+del +exists +expire +expireat +pexpire +hget +hgetall +hmget +hset +hdel "
                "+hincrby +hkeys +hlen +llen +lindex +lset +rpush +lrange +sadd +srem +smembers "
                "+sscan +scan +zadd +zcount +zrange +zrangebyscore +zrevrangebyscore +zrem "
                "+zremrangebyscore +zscore +setbit +cluster|shards +cluster|slots +asking "
                "+readonly +role")


def acl_rule(prefix):
    return "resetkeys ~%s* resetchannels &%s* %s" % (prefix, prefix, ACL_COMMANDS)


def masters(redis):
    if isinstance(redis, ClusterRedis):
        return [redis._node(*m) for m in redis.masters]
    return [redis]


class RedisAclTest(unittest.TestCase):
    def setUp(self):
        env = stack_env()
        self.db = unique("acl").replace("-", "_")
        mysql("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci" % self.db)
        migrate_with_client(self.db)
        base, _, query = env["PERMITD_TEST_MYSQL_ROOT_URL"].partition("?")
        self.mysql_url = base.rsplit("/", 1)[0] + "/" + self.db + ("?" + query if query else "")
        self.prefix = unique("acl") + ":"
        self.user, self.password = unique("permitd-user"), unique("pw")
        self.redis = Redis()
        for m in masters(self.redis):
            m("ACL", "SETUSER", self.user, "reset", "on", ">" + self.password,
              *acl_rule(self.prefix).split())
            m("ACL", "LOG", "RESET")

    def tearDown(self):
        for m in masters(self.redis):
            m("ACL", "DELUSER", self.user)
        mysql("DROP DATABASE IF EXISTS `%s`" % self.db)
        self.redis.close()

    def sql(self, sql):
        return mysql(sql, database=self.db)

    def add_policy(self, name, algorithm, max_permits, rate="NULL", window_ms="NULL",
                   lease_ms="NULL"):
        self.sql("INSERT INTO policies (name, max_permits, rate, algorithm, window_ms, lease_ms, "
                 "enabled, created_by, updated_by) VALUES ('%s', %d, %s, '%s', %s, %s, 1, "
                 "'dba', 'dba')" % (name, max_permits, rate, algorithm, window_ms, lease_ms))
        self.sql("INSERT INTO policy_apps (policy_id, app) SELECT id, 'app' FROM policies "
                 "WHERE name = '%s'" % name)

    def hash(self, name):
        flat = self.redis("HGETALL", "%s{%s}:policy" % (self.prefix, name)) or []
        return dict(zip(flat[0::2], flat[1::2]))

    def test_permitd_runs_under_the_smallest_acl_rule(self):
        policies = {"tb": ("token_bucket", dict(rate="0.001")),
                    "fw": ("fixed_window", dict(window_ms="600000")),
                    "sw": ("sliding_window", dict(window_ms="600000")),
                    "sl": ("sliding_log", dict(window_ms="600000")),
                    "cc": ("concurrency", dict(lease_ms="600000"))}
        for name, (algorithm, extra) in policies.items():
            self.add_policy(name, algorithm, 2, **extra)
        url = stack_redis_url(self.user, self.password)
        p = Permitd(redis_url=url, prefix=self.prefix, args=[
            "--mysql-url", self.mysql_url, "--sync-interval-ms", "300",
            "--fleet-publish-ms", "200", "--hotkeys-publish-ms", "200"])
        try:
            h = p.http()
            for name in policies:
                wait_for("%s synced into redis" % name, lambda: self.hash(name))
            # Every algorithm: two allowed, then denied (the second denial
            # of the same bucket may come from the deny cache).
            for name in policies:
                got = [decision(h.acquire(name, key="u1"))["allowed"] for _ in range(4)]
                self.assertEqual(got, [True, True, False, False], name)
            # AcquireBatch over three policies, keyed.
            r = h.rpc_json("AcquireBatch", {"requests": [
                {"bucket": n, "app": "app", "key": "u2"} for n in ("tb", "fw", "sl")]})
            self.assertEqual(r.status, 200, r)
            self.assertTrue(all(x["response"]["allowed"] for x in r.json()["results"]), r.json())
            # An edit in MySQL reaches Redis (sync.lua) and the decision
            # (its change notice over the subscription).
            self.sql("UPDATE policies SET max_permits = 9, version = version + 1, "
                     "updated_by = 'dba' WHERE name = 'tb'")
            wait_for("the edit synced", lambda: self.hash("tb").get("max_permits") == "9")
            wait_for("the edit in force", lambda: decision(h.peek("tb"))["limit"] == 9)
            # Hot keys and the fleet's counts are published.
            wait_for("hot keys published",
                     lambda: self.redis("ZCARD", "%s{tb}:hot" % self.prefix) > 0)
            wait_for("the fleet's heartbeat",
                     lambda: self.redis("ZCARD", "%sfleet:instances" % self.prefix) > 0)
            time.sleep(1)       # a few more publishing and sync passes
            h.close()
        finally:
            p.stop()
        log = p.output()
        self.assertNotIn("NOPERM", log)
        self.assertNotIn("NOAUTH", log)
        for m in masters(self.redis):
            self.assertEqual(m("ACL", "LOG"), [], "a command outside the rule was refused")

    def test_readme_states_the_rule(self):
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "..", "docs", "redis.md")) as f:
            readme = " ".join(f.read().split())
        self.assertTrue(acl_rule("PREFIX") in readme, "docs/redis.md does not give the rule word for word")


if __name__ == "__main__":
    import harness
    harness.main()
