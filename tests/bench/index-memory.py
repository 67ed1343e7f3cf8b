#!/usr/bin/env python3
"""The bucket index's bytes (issue 41): what a token bucket's key costs in
Redis, and what its index entry adds, at each count asked.

    tests/bench/index-memory.py [--keys 100000,10000000] [--results FILE]

For each count N, on a Redis of its own (redis-server on a free port, no
persistence): N keys P{big:user-NNN..}:k SET with bucket.lua's 24-byte
state and a TTL (through redis-cli --pipe), `used_memory` read; then the
same keys put in the bucket index by bucket.lua's own "index" mode (a key
a call, as the take that creates each names it), `used_memory` read
again. Keys are `user-` and six digits up to a million, seven past
it (11 and 12 characters). Prints, and appends to --results, a Markdown
table: bytes a key alone, the index's bytes a bucket, the whole; the
group lists' count, blobs and their mean size, and where entries went
(lists or the sets of single slots). About 4 minutes and 2 GB of memory
at 10 M keys. Each reading waits for Redis's tables to finish rehashing.
"""
import argparse
import hashlib
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness.stack import lua_script  # noqa: E402

PREFIX = "b:"
MAX, RATE = 1000000, 0.0001


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """redis-server on a free port in a temporary directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="permitd-index-memory-")
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir, "--protected-mode", "no",
                 "--enable-debug-command", "local"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(100):
                if self.proc.poll() is not None:
                    break
                if self("PING") == "PONG":
                    return
                time.sleep(0.05)
            self.stop()
        raise RuntimeError("redis-server did not start on a free port in 5 attempts")

    def __call__(self, *args, data=None):
        r = subprocess.run(["redis-cli", "-p", str(self.port)] + [str(a) for a in args],
                           input=data, capture_output=True)
        return r.stdout.decode(errors="replace").strip()

    def memory(self):
        """used_memory, once no table of the keyspace is being rehashed (a
        dict that grew keeps its old table until the last of it has moved,
        a few seconds at 10 M keys: 6.7 bytes a key then)."""
        for _ in range(600):
            if "rehashing target" not in self("DEBUG", "HTSTATS", "0"):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("the keyspace's tables were still rehashing after 2 minutes")
        for line in self("INFO", "memory").splitlines():
            if line.startswith("used_memory:"):
                return int(line.split(":")[1])
        raise RuntimeError("INFO memory has no used_memory")

    def pipe(self, chunks):
        p = subprocess.Popen(["redis-cli", "-p", str(self.port), "--pipe"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        for chunk in chunks:
            p.stdin.write(chunk)
        p.stdin.close()
        out = p.stdout.read().decode()
        p.wait()
        if "errors: 0" not in out:
            raise RuntimeError("redis-cli --pipe: " + out)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()


def command(*args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def key(i):
    return ("%s{big:user-%0*d}:k" % (PREFIX, 6 if i < 1000000 else 7, i)).encode()


def chunks(make, n):
    """make(i)'s commands for i in 1..n, 20,000 to a chunk."""
    for first in range(1, n + 1, 20000):
        yield b"".join(make(i) for i in range(first, min(first + 20000, n + 1)))


def measure(n, sha, text):
    r = Server()
    try:
        r("-x", "SCRIPT", "LOAD", data=text)
        # Redis's first script calls allocate some 150 KB once (its Lua
        # client's buffers): spent before the first reading, on keys
        # that do not exist (nothing is written).
        r.pipe([b"".join(command(b"EVALSHA", sha, b"1", b"warm:{x}:k", b"index", b"0", b"")
                         for _ in range(20000))])
        sec, usec = r("TIME").split()
        now = float(int(sec) * 1000000 + int(usec))
        base = r.memory()

        def state(i):
            tokens = float(1 + i % (MAX - 1))
            ttl = str(int((MAX - tokens) / RATE * 1000) + 1).encode()
            return command(b"SET", key(i), struct.pack("<ddd", tokens, now, 1.0), b"PX", ttl)
        t0 = time.monotonic()
        r.pipe(chunks(state, n))
        set_s = time.monotonic() - t0
        keys_only = r.memory()
        t0 = time.monotonic()
        r.pipe(chunks(lambda i: command(b"EVALSHA", sha, b"1", key(i), b"index", b"0", b""), n))
        index_s = time.monotonic() - t0
        whole = r.memory()
        stats = r("EVAL", """
local lists, blobs, bytes, sets, members, usage, cur = 0, 0, 0, 0, 0, 0, '0'
repeat
  local got = redis.call('SCAN', cur, 'MATCH', ARGV[1] .. '{*}i[lx]:*', 'COUNT', 1000)
  cur = got[1]
  for _, k in ipairs(got[2]) do
    if redis.call('TYPE', k).ok == 'list' then
      lists = lists + 1
      usage = usage + redis.call('MEMORY', 'USAGE', k, 'SAMPLES', 0)
      for _, b in ipairs(redis.call('LRANGE', k, 0, -1)) do
        blobs, bytes = blobs + 1, bytes + #b
      end
    else
      sets, members = sets + 1, members + redis.call('SCARD', k)
    end
  end
until cur == '0'
return {lists, blobs, bytes, sets, members, usage}""", 0, PREFIX).split()
        return {"n": n, "base": base, "keys": keys_only - base, "index": whole - keys_only,
                "set_s": set_s, "index_s": index_s, "lists": int(stats[0]),
                "blobs": int(stats[1]), "blob_bytes": int(stats[2]), "sets": int(stats[3]),
                "members": int(stats[4]), "usage": int(stats[5])}
    finally:
        r.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", default="100000,10000000",
                    help="the counts measured, comma-separated (default 100000,10000000)")
    ap.add_argument("--results", help="a Markdown file the table is appended to")
    ap.add_argument("--max-index-bytes", type=float,
                    help="exit 1 when the index costs more than this a bucket at any count "
                         "(the suite's smoke run: issue 41's 15)")
    a = ap.parse_args()
    text = lua_script("bucket", os.path.join(ROOT, "lua"))
    sha = hashlib.sha1(text).hexdigest().encode()
    rows, over = [], []
    load0 = os.getloadavg()[0]
    for n in (int(x) for x in a.keys.split(",")):
        m = measure(n, sha, text)
        sys.stderr.write("index-memory: %d keys: %s\n" % (n, m))
        if a.max_index_bytes is not None and m["index"] / n > a.max_index_bytes:
            over.append("%d keys: the index costs %.1f bytes a bucket, more than %.1f"
                        % (n, m["index"] / n, a.max_index_bytes))
        rows.append("| {:,} | {:.1f} | {:.1f} | {:.1f} | {:,} lists, {:,} blobs of {:.0f} B | "
                    "{:,} in {:,} sets | {:.0f} s, {:.0f} s |".format(
                        n, m["keys"] / n, m["index"] / n, (m["keys"] + m["index"]) / n,
                        m["lists"], m["blobs"], m["blob_bytes"] / max(m["blobs"], 1),
                        m["members"], m["sets"], m["set_s"], m["index_s"]))
    out = ["", "## The bucket index's bytes, %s" % time.strftime("%Y-%m-%d %H:%M UTC",
                                                                   time.gmtime()),
           "",
           "`tests/bench/index-memory.py` (redis-server %s, load average %.2f at the start, "
           "%.2f at the end): keys `b:{big:user-NNNNNN}:k` (11 and 12 characters past the "
           "policy), bucket.lua's 24-byte state and TTL, then its \"index\" mode, a key a "
           "call; bytes from `used_memory`." % (
               subprocess.run(["redis-server", "--version"], capture_output=True,
                              text=True).stdout.split()[2].replace("v=", ""),
               load0, os.getloadavg()[0]),
           "",
           "| keys | key alone, B | index, B a bucket | whole, B | group lists | "
           "in the sets of single slots | SET, index time |",
           "|---:|---:|---:|---:|---|---|---|"] + rows
    print("\n".join(out))
    if a.results:
        with open(a.results, "a") as f:
            f.write("\n".join(out) + "\n")
    for line in over:
        sys.stderr.write("index-memory: %s\n" % line)
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
