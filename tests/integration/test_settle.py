"""The settle runner (issue 22, issue 19's last point), against real MariaDB
and Redis (and, as cluster_settle, the stack's Redis Cluster).

After an edit of a policy's max_permits or rate, its buckets' keys are set
to expire on the new limits by a runner of its own (server/control/settle.c),
every master scanned in parallel; the edit does not wait for it.
  - an admin edit of a policy with 20,000 buckets answers as fast as one of a
    policy with none (compared with each other and with the settle's own
    time, which the log reports: no absolute timing), /readyz and /metrics
    answer while it runs, and every bucket ends up with the new expiry (in
    a cluster: on all three masters, the log says masters=3);
  - a settle recorded in Redis by an instance that then dies (SIGKILL) is
    finished by the next instance to start;
  - a settle whose every step takes longer than --redis-timeout-ms (a
    proxy holds each round trip of SSCANs 150 ms; the flag says 50) still
    finishes: its threads wait for Redis longer than the decision path does;
  - a settle cut short (its instance killed) is resumed by the next
    instance from the slots it had done, not from the first;
  - a policy's settle visits its own buckets only (its bucket index), not
    the 50,000 keys of another policy beside them, and sets the expiry of
    buckets of every layout: the shared one and the keyed ones, made
    through permitd or left by an older permitd (no index entry: indexed by
    the one SCAN per Redis at start); a bucket gone leaves the index;
  - the index prune (--index-prune-ms) drops the entries of buckets gone
    from the group lists and the sets alike, and keeps the live ones (and
    moves the live entries of the hashes of before into the lists);
  - /readyz pings every master at once: one master that hangs (SIGSTOP) is
    reported, and every other one is reported ok (a private cluster).
"""
import os
import re
import signal
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (STATE, ClusterRedis, Http, Permitd, Redis, decision, index_key,  # noqa: E402
                     keyslot, redis_mode, state_key, unique, wait_for)
import test_admin  # noqa: E402

DONE = "policy limits changed: buckets set to expire on the new ones"
BUCKETS = 20000
# Another policy's keys beside the one settled: enough that a settle
# walking the keyspace would show (it counts its SCAN steps, which must be
# 0), few enough to be written and indexed in seconds: in a cluster the one
# SCAN that indexes them sends each key of its slot in a script call of
# its own.
OTHERS = 30000 if redis_mode() == "cluster" else 50000
RESUMED = 150000


def fill(redis, keys, value, px, index=True):
    """SET every key to value with PX px, pipelined: one write per node.
    index says where each key is named in its bucket index: True, in the
    set of its slot (as a permitd of before issue 41 did, and as one of
    now does for a key its group's node does not serve); "groups", in its
    group's list, through bucket.lua's own "index" (as a permitd of now
    does for a bucket it creates); "hashes", a field of its group's first
    hash P{T}ig:NAME:0 (as a permitd between the sets and the lists did,
    before its group's first split); False, nowhere (a bucket an older
    permitd wrote before the index)."""
    if index == "groups":
        sha = redis.each_master("SCRIPT", "LOAD", harness.lua_script("bucket"))[0].encode()
        run(redis, keys, lambda k: [[b"SET", k.encode(), value, b"PX", str(px).encode()],
                                    [b"EVALSHA", sha, b"1", k.encode(), b"index", b"0", b""]])
        return
    if index == "hashes":
        def hashed(k):
            group, entry = harness.index_entry(k)
            if isinstance(redis, ClusterRedis) and \
                    redis.slots[keyslot(group)] != redis.slots[keyslot(k)]:
                return [b"SADD", index_key(k).encode(), k.encode()]    # a cut group
            return [b"HSET", group.replace("}il:", "}ig:").encode() + b":0", entry, b""]
        run(redis, keys, lambda k: [[b"SET", k.encode(), value, b"PX", str(px).encode()],
                                    hashed(k)])
        return
    run(redis, keys, lambda k: [[b"SET", k.encode(), value, b"PX", str(px).encode()]] +
        ([[b"SADD", index_key(k).encode(), k.encode()]] if index else []))


def drop(redis, keys):
    """DEL every key, pipelined."""
    run(redis, keys, lambda k: [[b"DEL", k.encode()]])


def run(redis, keys, commands):
    """The commands(k) of every key (all of k's slot), pipelined: one write
    per node."""
    groups = {}
    if isinstance(redis, ClusterRedis):
        for k in keys:
            groups.setdefault(redis.slots[keyslot(k)], []).append(k)
        clients = {node: redis._node(*node) for node in groups}
    else:
        groups = {None: list(keys)}
        clients = {None: redis}
    for node, ks in groups.items():
        c = clients[node]
        out, n = [], 0
        for k in ks:
            for args in commands(k):
                out.append(b"*%d\r\n" % len(args) +
                           b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
                n += 1
        c.sock.sendall(b"".join(out))
        for _ in range(n):
            c._reply()


class SlowScanProxy:
    """Forwards every connection to the stack's single Redis, holding each
    client write that carries an SSCAN `delay` seconds first: a Redis whose
    settle steps are slow (a big index on a loaded box), while every other
    call answers at once."""

    def __init__(self, delay):
        env = harness.stack_env()
        self.upstream = (env["PERMITD_TEST_REDIS_HOST"], int(env["PERMITD_TEST_REDIS_PORT"]))
        self.delay = delay
        self.scans = 0
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.url = "redis://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            threading.Thread(target=self.pump, args=(client, up, True), daemon=True).start()
            threading.Thread(target=self.pump, args=(up, client, False), daemon=True).start()

    def pump(self, src, dst, requests):
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if requests and b"SSCAN\r\n" in data.upper():
                    self.scans += 1
                    time.sleep(self.delay)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.closed = True
        self.listener.close()


class SettleTest(test_admin.AdminCase):

    def setUp(self):
        self.redis = Redis()
        self.addCleanup(self.redis.close)

    def fail_if_done(self, p, name):
        """None, or a failure when p's settle of name ended (too soon to be cut)."""
        if self.done_lines(p.output(), name):
            self.fail("the settle ended before a progress line: %s" % p.output()[-3000:])

    def done_lines(self, output, name):
        return [line for line in output.splitlines()
                if DONE in line and ("policy=%s " % name) in line]

    def test_an_edit_answers_before_its_settle_and_the_admin_listener_too(self):
        e = self.editor()
        name = self.name("big")
        e.create(name, max_permits=1000, rate="1")
        out = self.permitd.output
        hash_key = "%s{%s}:policy" % (self.prefix, name)
        wait_for("policy in redis", lambda: self.redis("HGET", hash_key, "max_permits") == "1000")

        def edit(rate):
            """One admin edit of the rate; answers its time and waits for its settle."""
            before = len(self.done_lines(out(), name))
            pol = e.get(name)
            t0 = time.monotonic()
            r = e.update(pol, rate=rate)
            took = time.monotonic() - t0
            self.assertEqual(r.status, 200, r)
            return took, before

        # An edit of a policy that owns no bucket: what an answer costs.
        small = []
        for rate in ("2", "3", "4"):
            took, before = edit(rate)
            small.append(took)
            wait_for("settle", lambda: len(self.done_lines(out(), name)) > before, timeout=60)

        # 20,000 buckets, empty now, expiring on the old limits' schedule
        # (60 s): half indexed as permitd indexes a bucket it creates, in
        # their groups' lists (about 40 entries a group, in 2-4 blobs), half
        # as a permitd of before the lists did, in their groups' first hash.
        now = self.redis.time_us()
        keys = [state_key(name, "u%d" % i, self.prefix) for i in range(BUCKETS)]
        fill(self.redis, keys[:BUCKETS // 2], STATE.pack(0.0, now, 0), 60000, index="groups")
        fill(self.redis, keys[BUCKETS // 2:], STATE.pack(0.0, now, 0), 60000, index="hashes")
        self.assertTrue(all(harness.indexed(self.redis, k) for k in keys[:BUCKETS // 2:97]))
        self.assertFalse(any(harness.in_blob(self.redis, k) for k in keys[BUCKETS // 2::97]))

        edited_at = time.time()
        took, before = edit("5")
        # The admin listener answers while the settle runs.
        admin = self.permitd.admin()
        ready = admin.request("GET", "/readyz")
        metrics = admin.request("GET", "/metrics")
        self.assertEqual(ready.status, 200, ready)
        self.assertEqual(metrics.status, 200, metrics)
        line = wait_for("the settle of 20,000 buckets",
                        lambda: self.done_lines(out(), name)[before:], timeout=120)[-1]
        settle_s = int(re.search(r" ms=(\d+)", line).group(1)) / 1000.0
        # The answer does not grow with the buckets: without the runner it
        # took the settle's whole time on top of an edit's.
        self.assertLess(took, 2 * max(small) + settle_s / 2,
                        "edit with %d buckets took %.3f s; with none %s s; the settle %.3f s"
                        % (BUCKETS, took, ["%.3f" % t for t in small], settle_s))
        self.assertIn("permitd_settle_pending", metrics.body.decode())
        sys.stderr.write("\nedit answered in %.3f s with %d buckets, %s s with none; the settle "
                         "took %.3f s\n" % (took, BUCKETS, ["%.3f" % t for t in small], settle_s))
        self.assertGreaterEqual(int(re.search(r" keys=(\d+)", line).group(1)), BUCKETS, line)
        masters = int(re.search(r" masters=(\d+)", line).group(1))
        self.assertEqual(masters, 3 if redis_mode() == "cluster" else 1, line)
        # Every bucket expires when it would be full at 5/s: ~200 s, not 60,
        # those of the hashes too.
        sample = keys[::97]
        if redis_mode() == "cluster":
            owners = {self.redis.slots[keyslot(k)] for k in sample}
            self.assertEqual(len(owners), 3, owners)    # on all three masters
        for k in sample:
            self.assertGreater(self.redis("PTTL", k), 150 * 1000, k)
        self.assertEqual(self.redis("SMEMBERS", self.prefix + "settle"), [])
        m = admin.request("GET", "/metrics").body.decode()
        self.assertRegex(m, r"permitd_settle_keys_total [1-9]\d{4,}")
        self.assertIn('permitd_settles_total{result="done"}', m)
        # Issue 39: "settle stuck" reads when a settle last finished (the
        # runner counts it just after its log line and SREM: polled).

        def done_at():
            text = admin.request("GET", "/metrics").body.decode()
            return float(re.search(r"^permitd_settle_last_done_timestamp_seconds (\S+)$", text,
                                   re.M).group(1))
        wait_for("the settle's time on /metrics", lambda: done_at() >= edited_at - 1)
        self.assertLessEqual(done_at(), time.time() + 1)

    def test_a_settle_left_by_an_instance_killed_is_finished_by_the_next(self):
        # Instance A's Redis user may not SCAN nor SSCAN: it can neither
        # build the bucket index nor read it, so its settle fails and stays
        # pending in Redis. A dies (SIGKILL); B, started afterwards on the
        # same Redis prefix and MySQL, finishes it.
        user = unique("settle").replace("-", "_")
        prefix = unique("sk") + ":"
        self.redis("ACL", "SETUSER", user, "on", ">pw-" + user, "~*", "&*", "+@all", "-scan",
                   "-sscan")
        self.addCleanup(self.redis, "ACL", "DELUSER", user)
        name = self.name("left")
        self.editor().create(name, max_permits=10, rate="4")
        args = ["--mysql-url", self.mysql_url, "--sync-interval-ms", "300"]
        a = Permitd(redis_url=harness.stack_redis_url(user, "pw-" + user), prefix=prefix,
                    args=args)
        self.addCleanup(a.stop, signal.SIGKILL)
        hash_key = "%s{%s}:policy" % (prefix, name)
        wait_for("policy in redis", lambda: self.redis("HGET", hash_key, "rate") is not None)
        now = self.redis.time_us()
        keys = [state_key(name, "u%d" % i, prefix) for i in range(50)] + \
               [state_key(name, "", prefix)]
        fill(self.redis, keys, STATE.pack(0.0, now, 0), 60000, index=False)

        self.sql("UPDATE policies SET rate = 0.01 WHERE name = '%s'" % name)
        wait_for("the settle failed on A", lambda: "buckets keep the expiry of the policy's old "
                 "limits until the next pass" in a.output(), timeout=30)
        pending = self.redis("SMEMBERS", prefix + "settle")
        self.assertTrue(any(m.endswith(" " + name) for m in pending), pending)
        a.stop(signal.SIGKILL)
        for k in keys:          # A set none
            self.assertLessEqual(self.redis("PTTL", k), 60000, k)

        b = Permitd(prefix=prefix, args=args)
        self.addCleanup(b.stop)
        wait_for("B settled it", lambda: self.done_lines(b.output(), name), timeout=60)
        for k in keys:    # at 0.01/s, hundreds of seconds (what 4/s earned till the edit aside)
            self.assertGreater(self.redis("PTTL", k), 120 * 1000, k)
        self.assertEqual(self.redis("SMEMBERS", prefix + "settle"), [])

    @unittest.skipIf(redis_mode() == "cluster", "the proxy forwards to one Redis")
    def test_a_settle_whose_steps_outlast_the_redis_timeout_finishes(self):
        proxy = SlowScanProxy(0.15)
        self.addCleanup(proxy.close)
        prefix = unique("slow") + ":"
        name = self.name("slow")
        self.editor().create(name, max_permits=100, rate="1")
        p = Permitd(redis_url=proxy.url, prefix=prefix,
                    args=["--mysql-url", self.mysql_url, "--sync-interval-ms", "300",
                          "--redis-timeout-ms", "50"])
        self.addCleanup(p.stop)
        hash_key = "%s{%s}:policy" % (prefix, name)
        wait_for("policy in redis", lambda: self.redis("HGET", hash_key, "rate") is not None)
        now = self.redis.time_us()
        keys = [state_key(name, "u%d" % i, prefix) for i in range(50)]
        fill(self.redis, keys, STATE.pack(0.0, now, 0), 60000)

        self.sql("UPDATE policies SET rate = 0.01 WHERE name = '%s'" % name)
        wait_for("the settle, its SSCAN steps 150 ms each", lambda: self.done_lines(p.output(), name),
                 timeout=60)
        self.assertGreater(proxy.scans, 0, p.output())
        for k in keys:    # at 0.01/s, hundreds of seconds
            self.assertGreater(self.redis("PTTL", k), 120 * 1000, p.output())

    def group_cut(self, slot):
        """Whether slot's group of 64 (lua/bucket.lua's top) keeps its
        list on another master than slot's; on a single Redis, any
        slot will do."""
        if not isinstance(self.redis, ClusterRedis):
            return True
        return self.redis.slots[slot] != self.redis.slots[slot // 64 * 64]

    def test_a_settle_visits_its_own_buckets_only_in_every_layout(self):
        prefix = unique("ix") + ":"
        own, other = self.name("own"), self.name("other")
        self.editor().create(own, max_permits=1000, rate="1")
        # Before the instance starts: buckets an older permitd wrote (no
        # index entries), of both keyed layouts, and OTHERS keys of another
        # policy beside them.
        now = self.redis.time_us()
        old = [state_key(own, "old%d" % i, prefix) for i in range(5)] + \
              ["%s{%s}:k:oldc" % (prefix, own)]
        others = [state_key(other, "u%d" % i, prefix) for i in range(OTHERS)]
        self.addCleanup(drop, self.redis, others)
        fill(self.redis, others, STATE.pack(0.0, now, 0), 600000, index=False)
        fill(self.redis, old, STATE.pack(0.0, now, 0), 600000, index=False)
        p = Permitd(prefix=prefix, args=["--mysql-url", self.mysql_url,
                                         "--sync-interval-ms", "300"])
        self.addCleanup(p.stop)
        built = wait_for("the bucket index built", lambda: re.search(
            r"bucket index built.* keys=(\d+)", p.output()), timeout=200)
        self.assertGreaterEqual(int(built.group(1)), OTHERS + len(old))
        # New buckets, through permitd: the shared one and 20 keyed ones.
        c = p.http()
        wait_for("the policy served", lambda: decision(c.acquire(own, permits=500))["allowed"])
        new = [state_key(own, "", prefix)]
        for i in range(20):
            self.assertTrue(decision(c.acquire(own, key="n%d" % i, permits=500))["allowed"])
            new.append(state_key(own, "n%d" % i, prefix))
        # A bucket of a group of 64 slots that two masters share, on the
        # master that does not hold the group's list: in the set of
        # its slot instead (lua/bucket.lua's top); on a single Redis, in its
        # group like the others.
        cut = next(k for k in ("cut%d" % i for i in range(100000))
                   if self.group_cut(keyslot(state_key(own, k, prefix))))
        self.assertTrue(decision(c.acquire(own, key=cut, permits=500))["allowed"])
        new.append(state_key(own, cut, prefix))
        in_set = self.redis("SISMEMBER", index_key(new[-1]), new[-1])
        self.assertEqual(in_set, 1 if isinstance(self.redis, ClusterRedis) else 0)
        self.assertTrue(harness.indexed(self.redis, new[-1]))
        mine = old + new
        for k in mine:
            self.assertLessEqual(self.redis("PTTL", k), 1000 * 1000, k)

        def settled(rate, before):
            self.sql("UPDATE policies SET rate = %s WHERE name = '%s'" % (rate, own))
            return wait_for("the settle", lambda: self.done_lines(p.output(), own)[before:],
                            timeout=120)[-1]

        line = settled("0.01", 0)
        sys.stderr.write("\n%s\n" % line)
        self.assertEqual(int(re.search(r" keys=(\d+)", line).group(1)), len(mine), line)
        self.assertIn(" scan_steps=0 ", line)
        for k in mine:      # at 0.01/s: hours, not the old minutes
            self.assertGreater(self.redis("PTTL", k), 10000 * 1000, k)
        # Five buckets gone (as if expired full): the next settle takes them
        # out of the index, and the one after does not visit them.
        drop(self.redis, new[1:6])
        settled("0.02", 1)     # (or the index prune, should its minute come first)
        for k in new[1:6]:
            self.assertFalse(harness.indexed(self.redis, k), k)
        line = settled("0.03", 2)
        self.assertEqual(int(re.search(r" keys=(\d+)", line).group(1)), len(mine) - 5, line)

    def test_the_index_prune_drops_the_entries_of_buckets_gone(self):
        # A policy never edited: the entries of its buckets that filled up
        # (no key) are dropped by the prune a slice at a time, from the
        # group lists and from the sets of single slots alike; the entries
        # of live buckets stay. The hashes of before the lists go, their
        # live entries moved into the lists.
        prefix = unique("pr") + ":"
        name = self.name("pruned")
        self.editor().create(name, max_permits=1000, rate="1")
        p = Permitd(prefix=prefix, args=["--mysql-url", self.mysql_url,
                                         "--sync-interval-ms", "200", "--index-prune-ms", "200"])
        self.addCleanup(p.stop)
        c = p.http()
        wait_for("the policy served", lambda: decision(c.acquire(name, permits=1))["allowed"])
        grouped = [state_key(name, "g%d" % i, prefix) for i in range(40)]
        for i in range(len(grouped)):
            self.assertTrue(decision(c.acquire(name, key="g%d" % i, permits=500))["allowed"])
        now = self.redis.time_us()
        in_sets = [state_key(name, "s%d" % i, prefix) for i in range(10)]
        fill(self.redis, in_sets, STATE.pack(0.0, now, 0), 600000)
        hashed = [state_key(name, "h%d" % i, prefix) for i in range(10)]
        fill(self.redis, hashed, STATE.pack(0.0, now, 0), 600000, index="hashes")
        for k in grouped + in_sets:
            self.assertTrue(harness.indexed(self.redis, k), k)
        gone = grouped[:30] + in_sets[:5]
        drop(self.redis, gone + hashed[:5])

        def pruned():
            return all(not harness.indexed(self.redis, k) for k in gone) and \
                all(harness.indexed(self.redis, k) for k in hashed[5:]) and \
                not any(self.redis.each_master("KEYS", prefix + "{*}ig:*"))
        wait_for("the prune", pruned, timeout=60)
        for k in grouped[30:] + in_sets[5:] + hashed[5:]:
            self.assertTrue(harness.indexed(self.redis, k), k)
        for k in hashed[:5]:
            self.assertFalse(harness.indexed(self.redis, k), k)
        wait_for("a round of the prune logged", lambda: "bucket index pruned" in p.output(),
                 timeout=60)

    def test_a_settle_cut_short_resumes_where_it_stopped(self):
        # Instance A dies (SIGKILL) in the middle of a settle of RESUMED
        # buckets; B, started afterwards, resumes it from the slots A had
        # done (recorded beside the lease), not from the first.
        prefix = unique("rs") + ":"
        name = self.name("resumed")
        self.editor().create(name, max_permits=1000, rate="1")
        args = ["--mysql-url", self.mysql_url, "--sync-interval-ms", "300"]
        a = Permitd(prefix=prefix, args=args)
        self.addCleanup(a.stop, signal.SIGKILL)
        wait_for("A's bucket index", lambda: "bucket index built" in a.output(), timeout=120)
        now = self.redis.time_us()
        keys = [state_key(name, "u%d" % i, prefix) for i in range(RESUMED)]
        self.addCleanup(drop, self.redis, keys)
        fill(self.redis, keys, STATE.pack(0.0, now, 0), 600000)
        self.sql("UPDATE policies SET rate = 0.01 WHERE name = '%s'" % name)
        # Killed once A's bitmap of the slots it has done (beside its lease)
        # holds some but not all: read from Redis every 10 ms, not from its
        # progress lines (every 2 s), which a settle of 150,000 buckets on
        # a fast machine can finish before (seen: 2.0 s in a cluster).
        done_key = "%ssettle:%s:slots" % (prefix, name)
        deadline, cut = time.monotonic() + 120, None
        while cut is None and time.monotonic() < deadline:
            n = self.redis("BITCOUNT", done_key)
            if 0 < n < 16384:
                cut = n
            else:
                self.fail_if_done(a, name)
                time.sleep(0.01)
        self.assertIsNotNone(cut, "A's settle recorded no slot in 120 s: %s" % a.output()[-3000:])
        a.stop(signal.SIGKILL)
        self.assertEqual(self.done_lines(a.output(), name), [], "A finished before it was killed")
        b = Permitd(prefix=prefix, args=args)
        self.addCleanup(b.stop)
        line = wait_for("B's settle", lambda: self.done_lines(b.output(), name), timeout=180)[-1]
        resumed = re.search(r'settle resumed where a settle that stopped left it" policy=%s .* '
                            r"slots_done_before=(\d+)" % re.escape(name), b.output())
        self.assertIsNotNone(resumed, b.output()[-3000:])
        self.assertGreaterEqual(int(resumed.group(1)), cut)
        found = int(re.search(r" keys=(\d+)", line).group(1))
        sys.stderr.write("\nA was killed at %d slots of 16384; B resumed after %s and visited "
                         "%d of %d buckets\n" % (cut, resumed.group(1), found, RESUMED))
        self.assertLess(found, RESUMED, line)
        for k in keys[::251]:   # every bucket settled, by A or by B: hours at 0.01/s
            self.assertGreater(self.redis("PTTL", k), 10000 * 1000, k)
        self.assertEqual(self.redis("SMEMBERS", prefix + "settle"), [])


@unittest.skipIf(redis_mode() == "cluster", "starts a cluster of its own")
class ReadyzTest(unittest.TestCase):
    """/readyz over a private cluster whose masters hang one at a time."""

    def test_readyz_asks_every_master_at_once(self):
        from test_cluster_serve import PrivateCluster
        pc = PrivateCluster()
        self.addCleanup(pc.close)
        p = Permitd(redis_url=pc.url)
        self.addCleanup(p.stop)
        admin = Http(p.admin_port)
        masters = pc.cluster.masters()
        self.assertEqual(len(masters), 3)
        for hung in masters:
            wait_for("every master ok", lambda: admin.request("GET", "/readyz").status == 200)
            pid = pc.pid(hung)
            os.kill(pid, signal.SIGSTOP)
            try:
                t0 = time.monotonic()
                r = admin.request("GET", "/readyz")
                took = time.monotonic() - t0
            finally:
                os.kill(pid, signal.SIGCONT)
            body = r.body.decode()
            self.assertEqual(r.status, 503, body)
            self.assertNotIn("master 127.0.0.1:%d: ok" % hung, body)
            for other in masters:
                if other != hung:
                    self.assertIn("master 127.0.0.1:%d: ok" % other, body)
            # Not held by the hung master: a bound, 10 times Redis's timeout,
            # not a speed check (a loaded machine, issue 33).
            self.assertLess(took, 10.0, body)


if __name__ == "__main__":
    harness.main()
