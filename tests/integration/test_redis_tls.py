"""Redis over TLS (issue 35, docs/redis.md "Redis over TLS"): rediss:// and
rediss+cluster:// against Debian's redis-server listening on TLS only
(--port 0), with a CA, server and client certificates made here by
openssl. Every connection permitd makes (the workers' pipelines, the
blocking calls of /readyz and Peek, the change notices' subscription, the
cluster's discovery and per-node connections, a redirect to a node it never
met, reconnects) must go over TLS: there is no plaintext port to reach.
Refusals: a CA that did not sign the server's certificate, a certificate
for another name, no client certificate when Redis asks for one; each
names the host and the reason in the log and counts in /metrics."""
import os
import re
import time
import unittest

os.environ.setdefault("PERMITD_APP_AUTH", "off")
import harness  # noqa: E402
from harness import (ClusterRedis, Permitd, decision, keyslot, put_policy,  # noqa: E402
                     unique)
from harness.redis_tls import Pki, TlsCluster, TlsRedis, TlsRedisServer  # noqa: E402
import test_hotpath  # noqa: E402
import test_redis_acl  # noqa: E402


def metric(p, name, label=None):
    text = p.admin().request("GET", "/metrics").body.decode()
    pat = r"^%s%s (\d+)$" % (re.escape(name), re.escape("{%s}" % label) if label else "")
    m = re.search(pat, text, re.M)
    return int(m.group(1)) if m else None


def evalsha_calls(redis):
    """Redis's count of EVALSHA calls so far (INFO commandstats)."""
    for line in redis("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_evalsha:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def wait_for(cond, what, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("not within %d s: %s" % (timeout, what))


class TlsClusterRedis(ClusterRedis):
    """The harness's cluster client, each node over TLS."""

    def __init__(self, seeds, ctx):
        self._ctx = ctx
        super().__init__(seeds)

    def _node(self, host, port):
        k = (host, int(port))
        if k not in self.nodes:
            self.nodes[k] = TlsRedis(int(port), self._ctx, host)
        return self.nodes[k]


class RedisTlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pki = Pki()
        cls.server = TlsRedisServer(cls.pki)
        cls.redis = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.redis.close()
        cls.server.stop()
        cls.pki.cleanup()

    def permitd(self, url, *args):
        return Permitd(redis_url=url, args=["--threads", "2"] + list(args))

    def refused(self, p, name, reason):
        """Acquire fails (no Redis could be reached), the log names the
        node and the reason, and /metrics counts it."""
        h = p.http()
        reply = h.acquire(name)
        self.assertNotEqual(reply.status, 200, reply)
        wait_for(lambda: (metric(p, "permitd_redis_tls_handshake_failures_total",
                                 'reason="%s"' % reason) or 0) >= 1,
                 "a %s handshake failure counted" % reason)
        self.assertRegex(p.output(), r'level=warn msg="redis tls handshake failed" '
                         r'addr=127\.0\.0\.1:\d+ reason=%s' % reason)
        h.close()

    def test_every_connection_goes_over_tls(self):
        name = unique("tls")
        put_policy(self.redis, name, max_permits=3, rate=0.001)
        with self.permitd(self.server.url, "--redis-tls-ca-file", self.pki.ca) as p:
            h = p.http()
            # The workers' pipelines: three allowed, the fourth denied.
            got = [decision(h.acquire(name))["allowed"] for _ in range(4)]
            self.assertEqual(got, [True, True, True, False])
            # The pipelined batching is unchanged over TLS: an AcquireBatch
            # of 200 items over two policies is two script calls.
            other = unique("tls")
            put_policy(self.redis, other, max_permits=1000, rate=1)
            put_policy(self.redis, name + "b", max_permits=1000, rate=1)
            before = evalsha_calls(self.redis)
            r = h.rpc_json("AcquireBatch", {"requests": [
                {"bucket": other if i % 2 else name + "b", "app": "app", "key": "u%d" % i}
                for i in range(200)]})
            self.assertTrue(all(x["response"]["allowed"] for x in r.json()["results"]), r.body)
            self.assertEqual(evalsha_calls(self.redis) - before, 2)
            # Blocking calls: /readyz pings Redis on the admin thread's
            # connection; Peek reads the bucket.
            ready = p.admin().request("GET", "/readyz")
            self.assertEqual(ready.status, 200, ready.body)
            self.assertEqual(decision(h.peek(name))["remaining"], 0)
            # Pub/sub: the change notices' subscription is there, and an
            # edit's notice reaches the instance.
            wait_for(lambda: self.redis("PUBSUB", "NUMSUB", "permitd:changes")[1] >= 1,
                     "permitd subscribed to permitd:changes over TLS")
            self.redis("HSET", "permitd:{%s}:policy" % name, "max_permits", 7, "version", 2)
            self.redis("PUBLISH", "permitd:changes", "%s 2" % name)
            wait_for(lambda: decision(h.peek(name))["limit"] == 7, "the edit in force")
            # Reconnects: Redis drops every client; the next calls connect
            # again (over TLS: there is no other port).
            before = metric(p, "permitd_redis_connects_total")
            self.redis("CLIENT", "KILL", "TYPE", "normal")
            self.redis("CLIENT", "KILL", "TYPE", "pubsub")
            wait_for(lambda: h.acquire(name).status == 200 and
                     metric(p, "permitd_redis_connects_total") > before,
                     "decisions again after Redis dropped its clients")
            wait_for(lambda: self.redis("PUBSUB", "NUMSUB", "permitd:changes")[1] >= 1,
                     "resubscribed")
            self.assertEqual(metric(p, "permitd_redis_tls_handshake_failures_total",
                                    'reason="unknown_ca"'), 0)
            h.close()

    def test_a_least_privilege_user_over_tls(self):
        # user:password@ on rediss://: the pipes, the blocking calls and the
        # subscription authenticate as a user under the README's rule.
        prefix, user, password = unique("tlsacl") + ":", unique("tlsuser"), unique("pw")
        self.redis("ACL", "SETUSER", user, "reset", "on", ">" + password,
                   *test_redis_acl.acl_rule(prefix).split())
        self.redis("ACL", "LOG", "RESET")
        try:
            name = unique("tls")
            put_policy(self.redis, name, max_permits=2, rate=0.001, prefix=prefix)
            url = "rediss://%s:%s@127.0.0.1:%d" % (user, password, self.server.port)
            with Permitd(redis_url=url, prefix=prefix,
                         args=["--threads", "2", "--redis-tls-ca-file", self.pki.ca]) as p:
                h = p.http()
                got = [decision(h.acquire(name))["allowed"] for _ in range(3)]
                self.assertEqual(got, [True, True, False])
                self.assertEqual(p.admin().request("GET", "/readyz").status, 200)
                wait_for(lambda: self.redis("PUBSUB", "NUMSUB", prefix + "changes")[1] >= 1,
                         "subscribed as the user")
                users = [l for l in self.redis("CLIENT", "LIST").splitlines()
                         if " user=%s " % user in l]
                self.assertGreaterEqual(len(users), 3, users)   # pipes, blocking, pub/sub
                h.close()
            self.assertNotIn("NOPERM", p.output())
            self.assertEqual(self.redis("ACL", "LOG"), [])
        finally:
            self.redis("ACL", "DELUSER", user)

    def test_a_wrong_ca_is_refused(self):
        name = unique("tls")
        put_policy(self.redis, name)
        with self.permitd(self.server.url, "--redis-tls-ca-file", self.pki.other_ca) as p:
            self.refused(p, name, "unknown_ca")

    def test_a_wrong_name_is_refused_and_the_server_name_setting_verifies_it(self):
        other = TlsRedisServer(self.pki, cert=self.pki.wrong_name_cert,
                               key=self.pki.wrong_name_key)
        try:
            name = unique("tls")
            with self.permitd(other.url, "--redis-tls-ca-file", self.pki.ca) as p:
                self.refused(p, name, "name_mismatch")
            with self.permitd(other.url, "--redis-tls-ca-file", self.pki.ca,
                              "--redis-tls-server-name", "wrong.example") as p:
                h = p.http()
                wait_for(lambda: h.acquire(name).status != 0, "an answer")
                self.assertEqual(metric(p, "permitd_redis_tls_handshake_failures_total",
                                        'reason="name_mismatch"'), 0)
                ready = p.admin().request("GET", "/readyz")
                self.assertEqual(ready.status, 200, ready.body)
                h.close()
        finally:
            other.stop()

    def test_mutual_tls_works_with_the_client_certificate_and_fails_without(self):
        mtls = TlsRedisServer(self.pki, auth_clients=True)
        try:
            name = unique("tls")
            c = mtls.client()
            put_policy(c, name, max_permits=2, rate=0.001)
            c.close()
            with self.permitd(mtls.url, "--redis-tls-ca-file", self.pki.ca) as p:
                self.refused(p, name, "refused")
            with self.permitd(mtls.url, "--redis-tls-ca-file", self.pki.ca,
                              "--redis-tls-cert-file", self.pki.client_cert,
                              "--redis-tls-key-file", self.pki.client_key) as p:
                h = p.http()
                got = [decision(h.acquire(name))["allowed"] for _ in range(3)]
                self.assertEqual(got, [True, True, False])
                h.close()
        finally:
            mtls.stop()

    def test_skipping_verification_is_a_loud_setting(self):
        name = unique("tls")
        put_policy(self.redis, name, max_permits=1, rate=0.001)
        with self.permitd(self.server.url, "--redis-tls-ca-file", self.pki.other_ca,
                          "--redis-tls-insecure-skip-verify", "1") as p:
            h = p.http()
            self.assertTrue(decision(h.acquire(name))["allowed"])
            self.assertRegex(p.output(), r'level=warn msg="REDIS TLS CERTIFICATE VERIFICATION '
                             r'IS OFF"')
            h.close()

    def test_a_plaintext_url_cannot_reach_a_tls_redis(self):
        # The TLS port speaks TLS only: redis:// to it gets no decision,
        # which is what makes every test above prove its connections TLS.
        name = unique("tls")
        put_policy(self.redis, name)
        with self.permitd("redis://127.0.0.1:%d" % self.server.port) as p:
            h = p.http()
            self.assertNotEqual(h.acquire(name).status, 200)
            h.close()


class RedisTlsClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pki = Pki()
        cls.cluster = TlsCluster(cls.pki)
        cls.redis = TlsClusterRedis(cls.cluster.seeds, cls.pki.context())

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        cls.pki.cleanup()

    def test_cluster_nodes_and_a_new_node_over_tls(self):
        name = unique("tlsc")
        put_policy(self.redis, name, max_permits=2, rate=0.001)
        url = "rediss+cluster://" + self.cluster.seeds      # one seed: the others from the map
        with Permitd(redis_url=url, args=["--threads", "2", "--redis-tls-ca-file",
                                          self.pki.ca]) as p:
            h = p.http()
            keys = ["k%d" % i for i in range(30)]           # keyed buckets: slots all over
            for k in keys:
                self.assertEqual([decision(h.acquire(name, key=k))["allowed"] for _ in range(3)],
                                 [True, True, False], k)
            text = p.admin().request("GET", "/metrics").body.decode()
            for s in self.cluster.servers:
                m = re.search(r'^permitd_redis_node_connects_total\{node="127\.0\.0\.1:%d"\} '
                              r'(\d+)$' % s.port, text, re.M)
                self.assertTrue(m and int(m.group(1)) > 0, (s.port, text))
            ready = p.admin().request("GET", "/readyz")
            self.assertEqual(ready.status, 200, ready.body)
            wait_for(lambda: sum(c("PUBSUB", "NUMSUB", "permitd:changes")[1]
                                 for c in self.redis.nodes.values()) >= 1,
                     "permitd subscribed over TLS in the cluster")
            # A node permitd never met: a fourth master joins, a fresh
            # key's (empty) slot moves to it; permitd's next call there is
            # redirected (or the refreshed map names it) and connects to it
            # over TLS.
            new = TlsRedisServer(self.pki, extra=[
                "--cluster-enabled", "yes", "--cluster-node-timeout", "2000",
                "--tls-cluster", "yes", "--tls-replication", "yes"])
            try:
                nc = new.client()
                first = self.cluster.servers[0]
                nc("CLUSTER", "MEET", "127.0.0.1", str(first.port), str(first.bus_port))
                new_id = nc("CLUSTER", "MYID")
                ids = [c("CLUSTER", "MYID") for c in self.redis.nodes.values()]

                def knows(c, node_id):
                    return any(line.startswith(node_id) and " connected" in line
                               for line in c("CLUSTER", "NODES").splitlines())
                wait_for(lambda: all(knows(c, new_id) for c in self.redis.nodes.values()) and
                         all(knows(nc, i) for i in ids), "the new node met")
                fresh = unique("fresh")
                slot = keyslot("permitd:{%s:%s}:k" % (name, fresh))
                owner = self.redis._node(*self.redis.slots[slot])
                # An empty slot moves by SETSLOT NODE alone, its owner first.
                # (A node may not have heard of the new one yet by gossip:
                # "Unknown node"; asked again until it has.)
                def setslot(c):
                    try:
                        return c("CLUSTER", "SETSLOT", slot, "NODE", new_id) == "OK"
                    except harness.RedisError as e:
                        if "Unknown node" not in str(e):
                            raise
                        return False
                for c in [owner] + list(self.redis.nodes.values()) + [nc]:
                    wait_for(lambda: setslot(c), "SETSLOT NODE accepted")
                d = wait_for(lambda: h.acquire(name, key=fresh).status == 200 and
                             decision(h.acquire(name, key=fresh)), "a decision on the new node")
                self.assertTrue(d["allowed"])
                self.assertEqual(nc("EXISTS", "permitd:{%s:%s}:k" % (name, fresh)), 1)
                self.assertIn('node="127.0.0.1:%d"' % new.port,
                              p.admin().request("GET", "/metrics").body.decode())
                nc.close()
            finally:
                new.stop()
            h.close()


class HotPathOverTlsTest(test_hotpath.HotPathTest):
    """test_hotpath's counts over rediss://: a warmed-up Acquire or Peek
    makes no allocation in permitd's code or hiredis (GnuTLS's own are not
    counted, as libmicrohttpd's are not), no epoll_ctl, and a batch's plan
    is one allocation: the I/O layer reads into the stack and the same
    reader, and writes the pipe's own buffer."""

    @classmethod
    def setUpClass(cls):
        cls.pki = Pki()
        cls.server = TlsRedisServer(cls.pki)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.pki.cleanup()

    def setUp(self):
        super().setUp()
        self.redis.close()
        self.redis = self.server.client()
        self.addCleanup(self.redis.close)

    def _permitd(self):
        return Permitd(redis_url=self.server.url,
                       args=["--threads", "1", "--mysql-url", "", "--sync-interval-ms", "600000",
                             "--redis-tls-ca-file", self.pki.ca] + test_hotpath.QUIET,
                       env={"LD_PRELOAD": os.environ["PERMITD_ALLOCS"], "ALLOCS_OUT": self.out,
                            "ASAN_OPTIONS": "detect_leaks=1:verify_asan_link_order=0"})


if __name__ == "__main__":
    harness.main()
