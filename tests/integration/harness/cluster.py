"""Redis Cluster for the tests: a client with the interface of redis.Redis
that sends each command to the master of its key's slot.

With PERMITD_TEST_REDIS_MODE=cluster (tests/integration/CMakeLists.txt sets
it for the suites it runs a second time against the stack's Redis Cluster,
tests/stack/redis-cluster.sh), `Redis()` is a ClusterRedis and `Permitd()`
is pointed at `redis+cluster://` seeds, so a suite written for one Redis
runs unchanged against three masters: what it writes and reads by key
lands where permitd looks for it.

Routing is the Redis Cluster spec's, written here for the tests on
purpose (not taken from server/stores/cluster.c, which it checks): CRC16
(XMODEM) of the key, or of the text between the first `{` and the next `}`
when that is not empty, modulo 16384; MOVED refreshes the map and retries,
ASK sends ASKING and the command to the node named, once. Commands without
a key go to every master where they change state (SCRIPT, FLUSHALL,
CONFIG SET, ACL), are gathered from every master where they list keys or
count (KEYS, SCAN: one full scan, answered as cursor "0"; DBSIZE; INFO:
every master's text, one after the other), and go to the first master
otherwise (TIME, PING, CLIENT).
"""
import os
import re

from .stack import stack_env

SLOTS = 16384


def redis_mode():
    """"cluster" when the suite runs against the stack's Redis Cluster."""
    return os.environ.get("PERMITD_TEST_REDIS_MODE", "single")


def stack_redis_url(user=None, password=None):
    """The URL of the stack's Redis in this mode (a cluster's seeds under
    PERMITD_TEST_REDIS_MODE=cluster), as user with password when given."""
    env = stack_env()
    auth = "%s:%s@" % (user or "", password) if password is not None else ""
    if redis_mode() == "cluster":
        return "redis+cluster://%s%s" % (auth, env["PERMITD_TEST_CLUSTER_SEEDS"])
    return "redis://%s%s:%s" % (auth, env["PERMITD_TEST_REDIS_HOST"], env["PERMITD_TEST_REDIS_PORT"])


def redis_ready(readyz):
    """True when /readyz's text (str) says Redis answers: `redis: ok`, or
    with a cluster, a line `master HOST:PORT: ok` for every master and no
    other."""
    if "redis: ok" in readyz:
        return True
    masters = re.findall(r"^  master (\S+): (.*)$", readyz, re.M)
    return "redis cluster:" in readyz and bool(masters) and all(s == "ok" for _, s in masters)


# CRC16-CCITT (XMODEM), Redis Cluster's key hash, a table per byte: the
# bit-by-bit loop made index_key() of 150,000 bucket keys (test_settle's
# fill) take seconds of the test's time.
_CRC16_TABLE = []
for _i in range(256):
    _c = _i << 8
    for _ in range(8):
        _c = (((_c << 1) ^ 0x1021) if _c & 0x8000 else _c << 1) & 0xFFFF
    _CRC16_TABLE.append(_c)


def _crc16(data):
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16_TABLE[(crc >> 8) ^ b]
    return crc


_INDEX_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_index_tags = {}


def index_tag(slot):
    """The bucket index's tag of slot (lua/bucket.lua's INDEX_TAGS): the
    first 3-character tag over 0-9a-zA-Z, first character slowest, whose
    CRC16 is slot. The first call fills the whole table in one scan (it
    scanned from the start again for every slot not seen yet: 16,384
    slots took test_settle's fill 15 s)."""
    if not _index_tags:
        a = _INDEX_ALPHABET
        for tag in (x + y + z for x in a for y in a for z in a):
            _index_tags.setdefault(_crc16(tag.encode()) % SLOTS, tag)
            if len(_index_tags) == SLOTS:
                break
    return _index_tags[slot]


def index_key(bucket_key):
    """The index set that holds bucket_key (lua/bucket.lua's top): P{T}ix:NAME,
    T the tag of the bucket key's slot, NAME its policy."""
    lb = bucket_key.index("{")
    rb = bucket_key.index("}", lb + 2)
    name = bucket_key[lb + 1:rb].split(":", 1)[0]
    return "%s{%s}ix:%s" % (bucket_key[:lb], index_tag(keyslot(bucket_key)), name)


def index_entry(bucket_key):
    """(group list, entry) of bucket_key in its policy's bucket index
    (lua/bucket.lua's top): P{T}il:NAME, T the tag of the first slot of the
    key's group of 64, and the entry that stands for the key (bytes); None
    for a key the lists cannot hold."""
    lb = bucket_key.index("{")
    rb = bucket_key.index("}", lb + 2)
    head = bucket_key[lb + 1:]
    name = head.split(":", 1)[0].split("}", 1)[0]
    rest = bucket_key[lb + 1 + len(name):]
    if rest.startswith(":") and bucket_key.endswith("}:k") and len(rest) > 4:
        entry = rest[1:-3].encode()
    elif rest == "}:b":
        entry = b"\2"
    elif rest.startswith("}:k:") and len(rest) > 4:
        entry = b"\1" + rest[4:].encode()
    else:
        return None
    if any(c < 32 for c in entry.lstrip(b"\1\2")) or rb == lb + 1 or len(entry) > 128:
        return None
    slot = keyslot(bucket_key)
    return "%s{%s}il:%s" % (bucket_key[:lb], index_tag(slot - slot % 64), name), entry


def index_hash(entry):
    """lua/bucket.lua's entry_hash()."""
    h = 0
    for b in entry:
        h = (h * 131 + b) % 2147483647
    return h


def index_blob(redis, bucket_key):
    """(list key, blob, entry) of bucket_key as its group's list places it
    now (linear hashing over the list's length, lua/bucket.lua's top), or
    None when the key goes to the set of its slot."""
    where = index_entry(bucket_key)
    if where is None:
        return None
    group, entry = where
    length = redis("LLEN", group)
    if length <= 1:
        return group, 0, entry
    size = 1
    while size * 2 <= length:
        size *= 2
    h = index_hash(entry)
    i = h % size
    if i < length - size:
        i = h % (2 * size)
    return group, i, entry


def blob_entries(blob):
    """The entries of a list's blob (bytes: "\n", then "\n"-ended entries)."""
    assert blob[:1] == b"\n" and blob[-1:] == b"\n", blob
    return [e for e in blob.split(b"\n") if e]


def in_blob(redis, bucket_key):
    """Whether bucket_key's entry is in the blob its group's list places it in."""
    where = index_blob(redis, bucket_key)
    if where is None:
        return False
    blob = redis.raw("LINDEX", where[0], where[1])
    return blob is not None and where[2] in blob_entries(blob)


def indexed(redis, bucket_key):
    """Whether bucket_key is named in its policy's bucket index: in its
    group's list, or in the set of its slot."""
    if redis("SISMEMBER", index_key(bucket_key), bucket_key) == 1:
        return True
    return in_blob(redis, bucket_key)


def keyslot(key):
    """The slot of key (str or bytes), hash tags included."""
    k = key if isinstance(key, bytes) else str(key).encode()
    start = k.find(b"{")
    if start >= 0:
        end = k.find(b"}", start + 1)
        if end > start + 1:
            k = k[start + 1:end]
    return _crc16(k) % SLOTS


# Commands whose first key is argv[1] (the rest of argv is not keys, or is
# keys of the same slot in what the tests send).
_KEY_AT_1 = {
    "GET", "SET", "HSET", "HGET", "HDEL", "HGETALL", "HMGET", "HINCRBY", "HEXISTS", "HKEYS",
    "HLEN", "PTTL", "TTL",
    "EXPIRETIME", "PEXPIRETIME", "BITCOUNT", "GETBIT", "SETBIT",
    "EXPIRE", "PEXPIRE", "PERSIST", "TYPE", "SADD", "SREM", "SMEMBERS", "SISMEMBER",
    "SCARD", "INCR", "INCRBY", "STRLEN", "GETRANGE", "SETRANGE", "APPEND", "DUMP",
    "RESTORE", "LPUSH", "RPUSH", "LRANGE", "LLEN", "LINDEX", "LSET",
    "ZADD", "ZRANGE", "ZRANGEBYSCORE", "ZCARD", "ZCOUNT", "ZSCORE", "ZREM",
}
# Each argument is a key; the answers are added up.
_EACH_KEY_SUMMED = {"DEL", "EXISTS", "UNLINK", "TOUCH"}
# State every master must share.
_ALL_MASTERS = {"SCRIPT", "FLUSHALL", "FLUSHDB", "CONFIG", "ACL", "FUNCTION"}


class ClusterRedis:
    """redis.Redis's interface (call, raw, time_us, close) over a cluster."""

    def __init__(self, seeds=None):
        from .redis import Redis, RedisError   # one module each way: no cycle at import
        self._Redis, self._Error = Redis, RedisError
        if seeds is None:
            seeds = stack_env()["PERMITD_TEST_CLUSTER_SEEDS"]
        self.seeds = [s.rsplit(":", 1) for s in seeds.split(",")]
        self.nodes = {}          # (host, port) -> Redis
        self.refresh()

    def _node(self, host, port):
        k = (host, int(port))
        if k not in self.nodes:
            self.nodes[k] = self._Redis(port=int(port), host=host)
        return self.nodes[k]

    def refresh(self):
        """The slot map, from the first seed (or known node) that answers."""
        last = None
        for host, port in list(self.seeds) + [list(k) for k in self.nodes]:
            try:
                ranges = self._node(host, port)("CLUSTER", "SLOTS")
            except (OSError, self._Error) as e:
                self.nodes.pop((host, int(port)), None)
                last = e
                continue
            self.slots = [None] * SLOTS
            masters = []
            for r in ranges:
                master = (r[2][0], int(r[2][1]))
                if master not in masters:
                    masters.append(master)
                for s in range(int(r[0]), int(r[1]) + 1):
                    self.slots[s] = master
            self.masters = sorted(masters)
            return
        raise ConnectionError("no cluster seed answers: %s" % last)

    def close(self):
        for r in self.nodes.values():
            r.close()
        self.nodes = {}

    def _on(self, node, args, raw):
        r = self._node(*node)
        return r.raw(*args) if raw else r(*args)

    def _keyed(self, key, args, raw):
        node = self.slots[keyslot(key)]
        for _ in range(5):
            try:
                return self._on(node, args, raw)
            except self._Error as e:
                words = str(e).split()
                if words and words[0] == "MOVED":
                    self.refresh()
                    node = self.slots[keyslot(key)]
                    continue
                if words and words[0] == "ASK":
                    host, port = words[2].rsplit(":", 1)
                    target = self._node(host, port)
                    target("ASKING")
                    return target.raw(*args) if raw else target(*args)
                raise
        raise self._Error("%s: still redirected after 5 tries" % (args[0],))

    def _run(self, args, raw):
        cmd = str(args[0]).upper()
        if cmd in _KEY_AT_1 and len(args) > 1:
            return self._keyed(args[1], args, raw)
        if cmd in ("EVAL", "EVALSHA") and int(args[2]) > 0:
            return self._keyed(args[3], args, raw)
        if cmd == "OBJECT" or cmd == "MEMORY":
            return self._keyed(args[2], args, raw)
        if cmd in _EACH_KEY_SUMMED:
            return sum(self._keyed(k, (args[0], k), raw) for k in args[1:])
        if cmd in _ALL_MASTERS:
            answers = [self._on(m, args, raw) for m in self.masters]
            return answers[0]
        if cmd == "KEYS":
            return [k for m in self.masters for k in self._on(m, args, raw)]
        if cmd == "INFO":
            return "\r\n".join(self._on(m, args, raw) for m in self.masters)
        if cmd == "DBSIZE":
            return sum(self._on(m, args, raw) for m in self.masters)
        if cmd == "SCAN":
            found = []
            for m in self.masters:
                cursor = "0"
                while True:
                    cursor, keys = self._on(m, (args[0], cursor) + tuple(args[2:]), raw)
                    found += keys
                    if str(cursor if not isinstance(cursor, bytes) else cursor.decode()) == "0":
                        break
            return ["0", found]
        return self._on(self.masters[0], args, raw)

    def __call__(self, *args):
        return self._run(args, raw=False)

    def each_master(self, *args):
        """One command on every master, the answers in a list: a CLIENT
        KILL of every node's clients, or a PUBLISH each node hands to its
        own subscribers at once (a PUBLISH on one master reaches the
        others' subscribers over the cluster bus, whose links a loaded
        machine's nodes, node timeout 1 s, may drop and make again;
        subscribers then hear it up to once a master)."""
        return [self._on(m, args, False) for m in self.masters]

    def raw(self, *args):
        return self._run(args, raw=True)

    def time_us(self):
        sec, usec = self("TIME")
        return int(sec) * 1000000 + int(usec)
