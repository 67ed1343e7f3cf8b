"""server/stores/cluster.c against a real Redis Cluster (issue 19, groundwork).

The stack fixture starts 3 masters + 3 replicas on loopback
(tests/stack/redis-cluster.sh, PERMITD_TEST_CLUSTER_* in the env file);
tests/integration/cluster_probe.c runs cluster.c's functions and prints
what they found, and each test compares that with what the cluster itself
answers:
  - discover from one seed: the map CLUSTER SHARDS gives (16384 slots over
    3 masters, each with its replica), also when the first seeds are dead,
    and an error naming every seed when all are;
  - CLUSTER SLOTS (the fallback for Redis < 7) parsed to the same masters,
    and discover falls back to it when a node refuses SHARDS as Redis 6 and
    5 do (a proxy in front of a real node answers that refusal: no Redis 6
    on Debian 12);
  - AUTH with a user and password from the URL (an ACL user on the seed);
  - cluster_keyslot() equals CLUSTER KEYSLOT for random keys, braces and
    binary bytes among them;
  - a command sent to the wrong node answers MOVED, and the parsed redirect
    names the master the map says;
  - during a slot migration (CLUSTER SETSLOT MIGRATING/IMPORTING, undone at
    the end) the source answers ASK, parsed to the target.
"""
import os
import random
import socket
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Redis, RedisError, free_port, stack_env  # noqa: E402

PROBE = os.environ.get("PERMITD_CLUSTER_PROBE", "")


def probe(*args, stdin=None, check=True):
    p = subprocess.run([PROBE] + list(args), input=stdin, capture_output=True, text=True,
                       timeout=60)
    if check and p.returncode != 0:
        raise AssertionError("cluster_probe %s failed (%d): %s" % (args, p.returncode, p.stderr))
    return p


def parse_map(text):
    """cluster_probe's map -> {master id: (host, port, ranges, [replica ids])}, uncovered."""
    masters, uncovered = {}, None
    for line in text.splitlines():
        f = line.split()
        if f[0] == "master":
            masters[f[1]] = (f[2], int(f[3]), f[5] if len(f) > 5 else "", [])
            assert int(f[4]) == count_ranges(f[5] if len(f) > 5 else ""), line
        elif f[0] == "replica":
            masters[f[1]][3].append(f[2])
        elif f[0] == "uncovered":
            uncovered = int(f[1])
    return masters, uncovered


def count_ranges(ranges):
    n = 0
    for part in filter(None, ranges.split(",")):
        a, _, b = part.partition("-")
        n += int(b or a) - int(a) + 1
    return n


def ranges_of(pairs):
    """[start, end, start, end...] -> "a-b,c" as cluster_probe writes them."""
    spans = sorted((pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2))
    merged = []
    for a, b in spans:
        if merged and merged[-1][1] + 1 == a:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    return ",".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in merged)


def shards_map(r):
    """What CLUSTER SHARDS says, in parse_map's shape."""
    out = {}
    for shard in r("CLUSTER", "SHARDS"):
        shard = dict(zip(shard[::2], shard[1::2]))
        nodes = [dict(zip(n[::2], n[1::2])) for n in shard["nodes"]]
        if not shard["slots"]:
            continue
        master = [n for n in nodes if n["role"] == "master"][0]
        out[master["id"]] = (master["endpoint"], master["port"], ranges_of(shard["slots"]),
                             sorted(n["id"] for n in nodes if n["role"] != "master"))
    return out


class OldRedisProxy:
    """Forwards one client's bytes to a real node, but answers CLUSTER
    SHARDS the way a Redis older than 7 does (refusal, given as text)."""

    def __init__(self, port, refusal):
        self.port, self.refusal = port, refusal
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        upstream = socket.create_connection(("127.0.0.1", self.port))
        with client, upstream:
            while True:
                data = client.recv(65536)
                if not data:
                    return
                if b"SHARDS" in data.upper():
                    client.sendall(b"-" + self.refusal.encode() + b"\r\n")
                    continue
                upstream.sendall(data)
                reply = upstream.recv(1 << 20)
                while reply and not reply.endswith(b"\r\n"):
                    reply += upstream.recv(1 << 20)
                client.sendall(reply)

    def close(self):
        self.listener.close()


class ClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        env = stack_env()
        cls.seeds = env["PERMITD_TEST_CLUSTER_SEEDS"].split(",")
        cls.url = env["PERMITD_TEST_CLUSTER_URL"]
        cls.ports = [int(s.rsplit(":", 1)[1]) for s in cls.seeds]
        cls.redis = {p: Redis(p) for p in cls.ports}

    @classmethod
    def tearDownClass(cls):
        for r in cls.redis.values():
            r.close()

    def discover(self, url):
        masters, uncovered = parse_map(probe("discover", url).stdout)
        for m in masters.values():
            m[3].sort()
        return masters, uncovered

    def test_discover_from_one_seed_is_cluster_shards(self):
        for seed in (self.seeds[0], self.seeds[-1]):   # a master, then a replica
            masters, uncovered = self.discover("redis+cluster://" + seed)
            self.assertEqual(uncovered, 0)
            self.assertEqual(len(masters), 3)
            self.assertEqual(sum(count_ranges(m[2]) for m in masters.values()), 16384)
            for m in masters.values():
                self.assertEqual(len(m[3]), 1, m)
            port = int(seed.rsplit(":", 1)[1])
            self.assertEqual(masters, shards_map(self.redis[port]))

    def test_discover_skips_dead_seeds(self):
        dead = ["127.0.0.1:%d" % free_port() for _ in range(2)]
        want, _ = self.discover("redis+cluster://" + self.seeds[1])
        got, uncovered = self.discover("redis+cluster://" + ",".join(dead + [self.seeds[1]]))
        self.assertEqual(got, want)
        self.assertEqual(uncovered, 0)

        p = probe("discover", "redis+cluster://s3cret@" + ",".join(dead), check=False)
        self.assertEqual(p.returncode, 1)
        for d in dead:
            self.assertIn(d + ": cannot connect", p.stderr)
        self.assertNotIn("s3cret", p.stderr)

    def test_discover_names_a_node_that_is_not_a_cluster(self):
        # The stack's single Redis has cluster support disabled.
        single = "127.0.0.1:%s" % stack_env()["PERMITD_TEST_REDIS_PORT"]
        p = probe("discover", "redis+cluster://" + single, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn(single, p.stderr)
        self.assertIn("cluster support disabled", p.stderr)

    def test_cluster_slots_fallback_gives_the_same_masters(self):
        want, _ = self.discover("redis+cluster://" + self.seeds[0])
        got, uncovered = parse_map(probe("slots", "127.0.0.1", str(self.ports[0])).stdout)
        self.assertEqual(uncovered, 0)
        self.assertEqual({k: v[:3] for k, v in got.items()},
                         {k: v[:3] for k, v in want.items()})

    def test_discover_falls_back_to_cluster_slots(self):
        want, _ = self.discover("redis+cluster://" + self.seeds[0])
        for refusal in ("ERR unknown subcommand 'SHARDS'. Try CLUSTER HELP.",              # 7.0 wording
                        "ERR Unknown subcommand or wrong number of arguments for 'SHARDS'. "
                        "Try CLUSTER HELP.",                                                 # 6.x
                        "ERR Wrong CLUSTER subcommand or number of arguments"):             # 5.x
            proxy = OldRedisProxy(self.ports[0], refusal)
            try:
                got, uncovered = self.discover("redis+cluster://" + proxy.address)
            finally:
                proxy.close()
            self.assertEqual(uncovered, 0, refusal)
            self.assertEqual({k: v[:3] for k, v in got.items()},
                             {k: v[:3] for k, v in want.items()}, refusal)

    def test_discover_authenticates_with_the_url_user(self):
        port = self.ports[0]
        user = "probe-%d" % os.getpid()
        r = self.redis[port]
        r("ACL", "SETUSER", user, "on", ">pw-%d" % os.getpid(), "~*", "+@all")
        try:
            # Prove the ACL is in force: the user's commands need its password.
            other = Redis(port)
            try:
                with self.assertRaises(RedisError):
                    other("AUTH", user, "wrong")
            finally:
                other.close()
            masters, uncovered = self.discover("redis+cluster://%s:pw-%d@127.0.0.1:%d"
                                               % (user, os.getpid(), port))
            self.assertEqual((len(masters), uncovered), (3, 0))
            p = probe("discover", "redis+cluster://%s:NotIt9@127.0.0.1:%d" % (user, port),
                      check=False)
            self.assertEqual(p.returncode, 1)
            self.assertIn("127.0.0.1:%d: AUTH failed: WRONGPASS" % port, p.stderr)
            self.assertNotIn("NotIt9", p.stderr)
        finally:
            r("ACL", "DELUSER", user)

    def test_keyslot_equals_cluster_keyslot(self):
        rng = random.Random(19)
        alphabet = b"ab{}{}:x\x00\xff"
        keys = [b"", b"{}", b"{a}{b}", b"a{}b{c}"]
        for _ in range(1500):
            keys.append(bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 12))))
        for _ in range(500):
            keys.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))))
        r = self.redis[self.ports[0]]
        want = [r("CLUSTER", "KEYSLOT", k) for k in keys]
        got = probe("keyslot", stdin="".join(k.hex() + "\n" for k in keys)).stdout.split()
        self.assertEqual(len(got), len(keys))
        for k, g, w in zip(keys, got, want):
            self.assertEqual(int(g), w, "key %r" % k)

    def error_of(self, port, *cmd):
        with self.assertRaises(RedisError) as ctx:
            self.redis[port](*cmd)
        return str(ctx.exception)

    def redirect(self, text):
        return probe("redirect", stdin=text + "\n").stdout.split()

    def test_wrong_node_answers_moved_to_the_mapped_master(self):
        masters, _ = self.discover(self.url)
        by_port = {m[1]: mid for mid, m in masters.items()}
        owner_of = {}
        for mid, m in masters.items():
            for part in m[2].split(","):
                a, _, b = part.partition("-")
                for s in range(int(a), int(b or a) + 1):
                    owner_of[s] = m[1]
        for i in range(30):
            key = "moved-%d-%d" % (os.getpid(), i)
            slot = self.redis[self.ports[0]]("CLUSTER", "KEYSLOT", key)
            wrong = [p for p in by_port if p != owner_of[slot]][i % 2]
            text = self.error_of(wrong, "GET", key)
            kind, got_slot, host, port = self.redirect(text)
            self.assertEqual((kind, int(got_slot), host, int(port)),
                             ("MOVED", slot, "127.0.0.1", owner_of[slot]), text)
        # The right node answers, and a non-redirect error is not one.
        self.assertIsNone(self.redis[owner_of[slot]]("GET", key))
        text = self.error_of(owner_of[slot], "NOSUCHCOMMAND")
        self.assertEqual(self.redirect(text), ["NONE"])

    def test_migrating_slot_answers_ask_to_the_target(self):
        masters, _ = self.discover(self.url)
        (src_id, src), (dst_id, dst) = sorted(masters.items(), key=lambda kv: kv[1][1])[:2]
        src_port, dst_port = src[1], dst[1]
        first = int(src[2].split(",")[0].split("-")[0])
        # A key of the source's first slot, absent there: the source sends the
        # client to the target with ASK while the slot migrates.
        key = next(k for k in ("ask-%d-%d" % (os.getpid(), i) for i in range(200000))
                   if self.redis[src_port]("CLUSTER", "KEYSLOT", k) == first)
        self.redis[dst_port]("CLUSTER", "SETSLOT", first, "IMPORTING", src_id)
        try:
            self.redis[src_port]("CLUSTER", "SETSLOT", first, "MIGRATING", dst_id)
            try:
                text = self.error_of(src_port, "GET", key)
                self.assertEqual(self.redirect(text), ["ASK", str(first), "127.0.0.1", str(dst_port)],
                                 text)
                # The target serves it after ASKING; without, it sends the client back.
                moved = self.error_of(dst_port, "GET", key)
                self.assertEqual(self.redirect(moved),
                                 ["MOVED", str(first), "127.0.0.1", str(src_port)], moved)
            finally:
                self.redis[src_port]("CLUSTER", "SETSLOT", first, "STABLE")
        finally:
            self.redis[dst_port]("CLUSTER", "SETSLOT", first, "STABLE")
        self.assertIsNone(self.redis[src_port]("GET", key))


if __name__ == "__main__":
    unittest.main(verbosity=2)
