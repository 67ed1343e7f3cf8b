#!/usr/bin/env python3
"""scale.py - the control plane at 10,000 policies and millions of buckets
(issue 22), measured; run by tests/bench/scale.sh, which builds permitd and
starts Redis and MariaDB, then hands over here through the environment.

What and why: the decision path holds at any size; what grows with the
number of policies and bucket keys is everything around it (the sync pass,
the policy list, the UI, the settle after a limit edit, Redis's memory).
Each figure is taken the way an operator would see it:

  sync      first load (permitd started on a store of POLICIES policies,
            until Redis's index holds them all), then the steady passes of
            two instances: permitd_sync_pass_seconds, and the CPU each
            process used per pass (/proc/PID/stat over a window of passes)
  keys      KEYS bucket keys of policy `big` in the real state format (24
            bytes, '<ddd': tokens, Redis time in us, the policy's version
            stamp) with the TTL bucket.lua would give them (until full
            again), written with redis-cli --pipe; Redis bytes per key from
            INFO used_memory, at 1 M keys and at KEYS
  list      ListPolicies as the UI calls it (includeBuckets; a page of
            PAGE rows when the API has page fields), median of 5, its bytes
  ui        tests/bench/scale-ui.mjs in headless Chromium: first row shown,
            all rows, a filter, clearing it, one refresh's bytes
  edit      UpdatePolicy of `big` (owning every bucket key) and of a policy
            owning none: the RPC's answer time
  settle    the background expiry adjustment that edit starts: its
            duration (permitd_settle_* metrics, polled), and Acquire p99 on
            `big`'s keys (wrk, as tests/bench/run.sh) while it runs against
            the same run before the edit

Writes RESULTS (markdown) and prints it.
"""
import hashlib
import http.client
import json
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

E = os.environ
PERMITD = E["SCALE_PERMITD"]
TMP = E["SCALE_TMP"]
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REDIS_PORT = int(E["SCALE_REDIS_PORT"])
MYSQL_URL = E["SCALE_MYSQL_URL"]
MYSQL_SOCK = E["SCALE_MYSQL_SOCKET"]
NPOL = int(E.get("BENCH_POLICIES", "10000"))
NKEYS = int(E.get("BENCH_KEYS", "10000000"))
PAGE = int(E.get("BENCH_PAGE", "50"))
WRK_S = int(E.get("BENCH_DURATION", "10"))
SETTLE_TIMEOUT = int(E.get("BENCH_SETTLE_TIMEOUT", "600"))
RESULTS = E.get("BENCH_RESULTS", os.path.join(HERE, "RESULTS-scale.md"))
PREFIX = "s:"
APP = "bench"
BIG = "big"
BIG_MAX, BIG_RATE = 1000, 0.001       # a bucket refills in up to 1e6 s: keys live long
USER, PASSWORD = "bench", "bench-password-" + str(os.getpid())
procs = []


# The step running now (the last log line): an INCOMPLETE results file
# names it.
STEP = ["start-up"]


def log(msg):
    STEP[0] = msg
    print("scale: " + msg, file=sys.stderr, flush=True)


def sh(*argv, stdin=None, check=True):
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, check=check).stdout


def redis(*args):
    return sh("redis-cli", "-p", str(REDIS_PORT), *[str(a) for a in args]).strip()


def redis_info(field, section="all"):
    m = re.search(r"^%s:(\S+)" % field, redis("INFO", section), re.M)
    return m.group(1) if m else None


def sql(q):
    return sh("mariadb", "--no-defaults", "--protocol=socket", "--socket=" + MYSQL_SOCK, "-uroot",
              "-N", "-B", "permitd", "-e", q)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Instance:
    def __init__(self, name):
        self.name = name
        self.api, self.admin = free_port(), free_port()
        self.log = open(os.path.join(TMP, "permitd.%s.log" % name), "w")
        self.proc = subprocess.Popen(
            [PERMITD, "--listen", "127.0.0.1:%d" % self.api,
             "--admin-listen", "127.0.0.1:%d" % self.admin,
             "--redis-url", "redis://127.0.0.1:%d" % REDIS_PORT, "--redis-prefix", PREFIX,
             "--mysql-url", MYSQL_URL, "--log-level", "info"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        procs.append(self.proc)
        self.cookie = None
        for _ in range(200):
            try:
                if self.get("/healthz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("permitd %s did not come up (see %s)" % (name, self.log.name))

    def request(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=600)
        h = {"Origin": "http://127.0.0.1:%d" % self.admin}
        if body is not None:
            h["Content-Type"] = "application/json"
        if self.cookie:
            h["Cookie"] = self.cookie
        h.update(headers or {})
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
        r = c.getresponse()
        data = r.read()
        cookie = r.getheader("Set-Cookie")
        if cookie:
            self.cookie = cookie.split(";", 1)[0]
        c.close()
        return r.status, data

    def get(self, path):
        return self.request("GET", path)

    def rpc(self, method, body):
        status, data = self.request("POST", "/permit.v1.%s" % method, body)
        if status != 200:
            raise RuntimeError("%s: %d %s" % (method, status, data[:300]))
        return json.loads(data)

    def metric(self, name):
        _, data = self.get("/metrics")
        m = re.search(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(name), data.decode(), re.M)
        return float(m.group(1)) if m else None

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


def wait_for(what, fn, timeout=600, every=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(every)
    raise RuntimeError("timed out waiting for " + what)


def wrk(seconds, path="/permit.v1.RateLimitService/Acquire", port=None, keys=100000):
    env = dict(E, BENCH_CODEC="proto", BENCH_BUCKET=BIG, BENCH_APP=APP, BENCH_KEYS=str(keys))
    out = subprocess.run(["wrk", "-t1", "-c50", "-d%ds" % seconds, "-s",
                          os.path.join(HERE, "acquire.lua"), "http://127.0.0.1:%d%s" % (port, path)],
                         env=env, capture_output=True, text=True).stdout
    m = re.search(r"^BENCH (.*)$", out, re.M)
    if not m:
        raise RuntimeError("wrk printed no result:\n" + out)
    return {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())}


def fill_keys(first, last, stamp):
    """Bucket keys user-FIRST..user-(LAST-1) of policy big, as bucket.lua
    writes them, through redis-cli --pipe: each key SET with its TTL, then
    indexed by bucket.lua's own "index" mode, 500 keys a call (the group
    lists of issue 41, as a bucket.lua take that creates it would).
    Returns the seconds it took."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    from harness.stack import lua_script
    text = lua_script("bucket", os.path.join(ROOT, "lua"))
    sha = hashlib.sha1(text).hexdigest().encode()
    if redis("SCRIPT", "EXISTS", sha.decode()) != "1":
        subprocess.run(["redis-cli", "-p", str(REDIS_PORT), "-x", "SCRIPT", "LOAD"], input=text,
                       check=True, stdout=subprocess.DEVNULL)
    now_s, now_us = (int(x) for x in redis("TIME").split())
    now = now_s * 1000000 + now_us
    t0 = time.monotonic()
    pipe = subprocess.Popen(["redis-cli", "-p", str(REDIS_PORT), "--pipe"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    chunk, page = [], []

    def index_call(keys):
        args = [b"EVALSHA", sha, str(len(keys)).encode()] + keys + [b"index", b"0", b""]
        return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    for i in range(first, last):
        tokens = float(1 + i % (BIG_MAX - 1))
        key = ("%s{%s:user-%06d}:k" % (PREFIX, BIG, i)).encode()
        val = struct.pack("<ddd", tokens, float(now), float(stamp))
        ttl = str(int((BIG_MAX - tokens) / BIG_RATE * 1000) + 1).encode()
        chunk.append(b"*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$24\r\n%s\r\n$2\r\nPX\r\n$%d\r\n%s\r\n"
                     % (len(key), key, val, len(ttl), ttl))
        page.append(key)
        if len(page) == 500:
            chunk.append(index_call(page))
            page = []
        if len(chunk) >= 20000:
            pipe.stdin.write(b"".join(chunk))
            chunk = []
    if page:
        chunk.append(index_call(page))
    pipe.stdin.write(b"".join(chunk))
    pipe.stdin.close()
    out = pipe.stdout.read().decode()
    pipe.wait()
    if "errors: 0" not in out:
        raise RuntimeError("redis-cli --pipe: " + out)
    return time.monotonic() - t0


def list_request():
    """ListPolicies as the UI asks it; page fields when the API has them."""
    with open(os.path.join(ROOT, "proto/permit/v1/admin.proto")) as f:
        proto = f.read()
    req = re.search(r"message ListPoliciesRequest \{(.*?)\n\}", proto, re.S).group(1)
    body = {"includeBuckets": True}
    if re.search(r"\bpage_size\b", req):
        body["pageSize"] = PAGE
    return body, "page_size" in req


def main(R):
    notes = []
    R["load_start"] = open("/proc/loadavg").read().split()[:3]
    mem_empty = int(redis_info("used_memory", "memory"))

    # ---- the store: NPOL policies, the last one `big`
    log("creating %d policies in MariaDB" % NPOL)
    for first in range(0, NPOL - 1, 2000):
        rows = ",".join("('s%05d', 100, 1, 'scale policy %d', 'bench', 'bench')" % (i, i)
                        for i in range(first, min(NPOL - 1, first + 2000)))
        sql("INSERT INTO policies (name, max_permits, rate, description, created_by, updated_by) "
            "VALUES " + rows)
    sql("INSERT INTO policies (name, max_permits, rate, description, created_by, updated_by) "
        "VALUES ('%s', %d, %s, 'owns every bucket key', 'bench', 'bench')" % (BIG, BIG_MAX, BIG_RATE))
    sql("INSERT INTO policy_apps (policy_id, app) SELECT id, '%s' FROM policies" % APP)
    subprocess.run([PERMITD, "admin", "add-user", USER, "--role", "editor"],
                   input=PASSWORD + "\n", text=True, check=True, capture_output=True,
                   env=dict(E, PERMITD_MYSQL_URL=MYSQL_URL))

    # ---- first load, one instance
    reads0 = int(redis_info("total_reads_processed", "stats"))
    t0 = time.monotonic()
    a = Instance("a")
    wait_for("every policy in redis", lambda: int(redis("SCARD", PREFIX + "policies")) >= NPOL)
    R["first_load_s"] = time.monotonic() - t0
    R["first_load_cpu_s"] = cpu_s(a.proc.pid)
    wait_for("the first pass counted", lambda: (a.metric("permitd_sync_passes_total") or 0) >= 1)
    R["first_load_reads"] = int(redis_info("total_reads_processed", "stats")) - reads0
    R["mem_policies"] = int(redis_info("used_memory", "memory")) - mem_empty
    log("first load: %.2f s, %.2f s CPU, %d Redis reads" % (
        R["first_load_s"], R["first_load_cpu_s"], R["first_load_reads"]))

    # ---- bucket keys, bytes per key at 1 M and at NKEYS
    stamp = (int(sql("SELECT id FROM policies WHERE name = '%s'" % BIG).strip()) << 24) + \
        int(redis("HGET", "%s{%s}:policy" % (PREFIX, BIG), "version"))
    mem0 = int(redis_info("used_memory", "memory"))
    done, R["mem"], R["fill_s"] = 0, {}, 0.0
    for upto in sorted({min(NKEYS, 1000000), NKEYS}):
        log("writing bucket keys %d..%d" % (done, upto - 1))
        R["fill_s"] += fill_keys(done, upto, stamp)
        done = upto
        R["mem"][upto] = (int(redis_info("used_memory", "memory")) - mem0) / float(upto)
        log("%d keys: %.1f bytes a key" % (upto, R["mem"][upto]))
    R["dbsize"] = int(redis("DBSIZE"))

    # ---- steady passes, two instances (b's first load finds Redis current)
    b = Instance("b")
    wait_for("b's first pass", lambda: (b.metric("permitd_sync_passes_total") or 0) >= 1)
    time.sleep(1)
    start = {x.name: (x.metric("permitd_sync_passes_total"), cpu_s(x.proc.pid), time.monotonic())
             for x in (a, b)}
    time.sleep(float(E.get("BENCH_PASS_WINDOW", "21")))
    R["pass"] = {}
    for x in (a, b):
        p0, c0, t0 = start[x.name]
        p1, c1, t1 = x.metric("permitd_sync_passes_total"), cpu_s(x.proc.pid), time.monotonic()
        R["pass"][x.name] = {"passes": p1 - p0, "pass_s": x.metric("permitd_sync_pass_seconds"),
                             "cpu_per_pass_s": (c1 - c0) / max(p1 - p0, 1),
                             "cpu_share": (c1 - c0) / (t1 - t0)}
        log("instance %s: %d passes, last %.3f s, %.3f s CPU a pass (%.1f%% of a core)" % (
            x.name, p1 - p0, R["pass"][x.name]["pass_s"], R["pass"][x.name]["cpu_per_pass_s"],
            100 * R["pass"][x.name]["cpu_share"]))

    # ---- ListPolicies
    a.rpc("AdminAuthService/Login", {"username": USER, "password": PASSWORD})
    body, paged = list_request()
    times, sizes = [], []
    for _ in range(5):
        t0 = time.monotonic()
        status, data = a.request("POST", "/permit.v1.PolicyService/ListPolicies", body)
        times.append(time.monotonic() - t0)
        sizes.append(len(data))
        if status != 200:
            raise RuntimeError("ListPolicies: %d %s" % (status, data[:300]))
    R["list_ms"], R["list_bytes"] = statistics.median(times) * 1000, statistics.median(sizes)
    R["list_rows"] = len(json.loads(data).get("policies", []))
    R["list_paged"] = paged
    log("ListPolicies: %.0f ms, %d bytes, %d rows (paged: %s)" % (
        R["list_ms"], R["list_bytes"], R["list_rows"], paged))

    # ---- the UI in Chromium
    if E.get("BENCH_UI", "1") == "1":
        env = dict(E, SCALE_ADMIN="http://127.0.0.1:%d" % a.admin, SCALE_USER=USER,
                   SCALE_PASSWORD=PASSWORD, SCALE_FILTER="s%05d" % (NPOL // 2))
        out = subprocess.run(["node", os.path.join(HERE, "scale-ui.mjs")], env=env,
                             capture_output=True, text=True, timeout=900)
        if out.returncode != 0:
            notes.append("UI run failed: %s" % out.stderr.strip().splitlines()[-1:])
            log("UI run failed:\n" + out.stderr[-2000:])
        else:
            R["ui"] = json.loads(out.stdout.strip().splitlines()[-1])
            log("UI: %s" % R["ui"])

    # ---- Acquire p99 before, a limit edit, the settle, p99 during it
    log("Acquire on %s's keys, %d s, before the edit" % (BIG, WRK_S))
    R["wrk_before"] = wrk(WRK_S, port=a.api)

    def edit(name, field, value):
        pol = a.rpc("PolicyService/GetPolicy", {"name": name})["policy"]
        pol[field] = value
        t0 = time.monotonic()
        a.rpc("PolicyService/UpdatePolicy", {"policy": pol})
        return (time.monotonic() - t0) * 1000
    R["edit_small_ms"] = edit("s00001", "maxPermits", "150")
    time.sleep(1)
    keys0 = sum(x.metric("permitd_settle_keys_total") or 0 for x in (a, b))
    secs0 = sum(x.metric("permitd_settle_seconds_total") or 0 for x in (a, b))
    during = {}
    wrk_thread = threading.Thread(target=lambda: during.update(wrk(WRK_S, port=a.api)))
    wrk_thread.start()
    time.sleep(1)                    # wrk's own start; the edit lands in its run
    t_edit = time.monotonic()
    R["edit_big_ms"] = edit(BIG, "maxPermits", str(BIG_MAX + 200))
    log("edit of %s answered in %.1f ms (of a policy without buckets: %.1f ms)" % (
        BIG, R["edit_big_ms"], R["edit_small_ms"]))

    def settled():
        running = sum((x.metric("permitd_settle_running") or 0) + (x.metric("permitd_settle_pending") or 0)
                      for x in (a, b))
        return running == 0 and sum(x.metric("permitd_settle_keys_total") or 0
                                    for x in (a, b)) > keys0
    # A settle that keeps failing starts again at every pass: given up on
    # after BENCH_SETTLE_TIMEOUT s, with the log's count and last reason.
    try:
        wait_for("the settle of %s" % BIG, settled, timeout=SETTLE_TIMEOUT, every=0.1)
        R["settle_done"] = True
    except RuntimeError:
        R["settle_done"] = False
        starts, why = 0, ""
        for x in (a, b):
            with open(x.log.name) as f:
                for line in f:
                    if 'msg="settle started" policy=%s ' % BIG in line:
                        starts += 1
                    elif "buckets keep the expiry" in line and "policy=%s " % BIG in line:
                        why = re.sub(r'^.*error="(.*)"\s*$', r"\1", line.strip())
        R["settle_starts"], R["settle_why"] = starts, why
        log("the settle of %s did not finish in %d s: %d starts, last failure: %s" % (
            BIG, SETTLE_TIMEOUT, starts, why))
    R["settle_wall_s"] = time.monotonic() - t_edit
    R["settle_keys"] = sum(x.metric("permitd_settle_keys_total") or 0 for x in (a, b)) - keys0
    R["settle_s"] = sum(x.metric("permitd_settle_seconds_total") or 0 for x in (a, b)) - secs0
    wrk_thread.join()
    R["wrk_during"] = during
    R["wrk_overlap"] = min(1.0, R["settle_wall_s"] / (WRK_S - 1))
    log("settle: %.1f s (%.1f s by its metric), %d keys; Acquire p99 %.2f ms before, %.2f ms "
        "during" % (R["settle_wall_s"], R["settle_s"], R["settle_keys"],
                    R["wrk_before"]["p99_us"] / 1000, R["wrk_during"]["p99_us"] / 1000))
    R["ttl_after"] = int(redis("PTTL", "%s{%s:user-%06d}:k" % (PREFIX, BIG, 1)))
    R["load_end"] = open("/proc/loadavg").read().split()[:3]
    write(R, notes)


def fmt_keys(n):
    return "%g M" % (n / 1e6) if n >= 1000000 else "{:,}".format(n)


def write(R, notes):
    p = R["pass"]
    ui = R.get("ui", {})
    rows = [
        ("sync: first load of %s policies (one instance)" % "{:,}".format(NPOL),
         "%.2f s; %.2f s CPU; %d Redis reads" % (R["first_load_s"], R["first_load_cpu_s"],
                                                 R["first_load_reads"])),
    ]
    for name in sorted(p):
        rows.append(("sync: a steady pass, instance %s" % name,
                     "%.3f s; %.3f s CPU a pass (%.1f%% of a core at the 5 s interval)" % (
                         p[name]["pass_s"], p[name]["cpu_per_pass_s"], 100 * p[name]["cpu_share"])))
    rows.append(("ListPolicies as the UI asks it (%s)" % ("a page of %d" % PAGE if R["list_paged"]
                                                          else "no paging at this base: every policy"),
                 "%.0f ms; %s bytes; %d rows" % (R["list_ms"], "{:,}".format(int(R["list_bytes"])),
                                                 R["list_rows"])))
    if ui:
        rows += [("UI: first row shown after navigation", "%d ms" % ui["first_paint_ms"]),
                 ("UI: every row rendered", "%d ms (%d rows)" % (ui["all_rows_ms"], ui["rows"])),
                 ("UI: a filter (one input event) until only the match shows", "%d ms" % ui["filter_ms"]),
                 ("UI: clearing the filter until rows show again", "%d ms" % ui["clear_ms"]),
                 ("UI: one live refresh's download", "{:,} bytes".format(ui["refresh_bytes"]))]
    rows += [
        ("limit edit answer (UpdatePolicy), policy owning %s keys" % fmt_keys(NKEYS),
         "%.1f ms" % R["edit_big_ms"]),
        ("limit edit answer, policy owning none", "%.1f ms" % R["edit_small_ms"]),
        ("background settle of that edit",
         "%.1f s wall (%.1f s by permitd_settle_seconds_total), %s keys" % (
             R["settle_wall_s"], R["settle_s"], "{:,}".format(int(R["settle_keys"])))
         if R["settle_done"] else
         "**not finished** after %.0f s: started %d times, each attempt failed (last: %s)" % (
             R["settle_wall_s"], R["settle_starts"], R["settle_why"])),
        ("Acquire p99 on its keys, before / during the settle",
         "%.2f ms / %.2f ms (%.0f / %.0f req/s; the settle covered %.0f%% of the run)" % (
             R["wrk_before"]["p99_us"] / 1000, R["wrk_during"]["p99_us"] / 1000,
             R["wrk_before"]["rps"], R["wrk_during"]["rps"], 100 * R["wrk_overlap"])),
    ]
    for n, b in sorted(R["mem"].items()):
        rows.append(("Redis bytes per bucket key at %s keys" % fmt_keys(n), "%.1f" % b))
    rows.append(("Redis bytes per policy (hash + index), %s policies" % "{:,}".format(NPOL),
                 "%.0f" % (R["mem_policies"] / float(NPOL))))
    rows.append(("writing the keys (redis-cli --pipe)", "%.1f s for %s" % (R["fill_s"], fmt_keys(NKEYS))))
    table = "| what | measured |\n|---|---|\n" + "\n".join("| %s | %s |" % r for r in rows)
    cpu = sh("sh", "-c", "sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1").strip()
    git = sh("git", "-C", ROOT, "rev-parse", "--short", "HEAD", check=False).strip() or "?"
    text = "\n".join([
        "# permitd at scale: results",
        "",
        "Written by `tests/bench/scale.sh` on %s: %s policies, %s bucket keys." % (
            time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "{:,}".format(NPOL), fmt_keys(NKEYS)),
        "",
        "- %d CPUs: %s; permitd at git %s, Release build (build/bench), two instances on one "
        "Redis and one MariaDB, all on this machine" % (os.cpu_count(), cpu, git),
        "- load average (1, 5, 15 min) at start: %s; at end: %s (a shared machine: other "
        "work moves every time here)" % (" ".join(R["load_start"]), " ".join(R["load_end"])),
        "",
        table,
        "",
    ] + ["**Note:** %s" % n for n in notes] + ([""] if notes else []) + [
        "A bucket key at the end of the run: PTTL %d ms (max_permits %d -> %d, rate %g/s)." % (
            R["ttl_after"], BIG_MAX, BIG_MAX + 200, BIG_RATE),
        "",
        "See tests/bench/README.md (\"At scale\") for how each figure is taken and README.md",
        "(\"At scale\") for how each grows.",
        ""])
    with open(RESULTS, "w") as f:
        f.write(text)
    print(text)
    log("wrote " + RESULTS)


def write_incomplete(R, error):
    """RESULTS for a run that failed part-way: marked INCOMPLETE, naming the
    step that failed, with every figure measured before it."""
    lines = ["# permitd at scale: INCOMPLETE", "",
             "Written by `tests/bench/scale.sh` on %s: the run failed during **%s** (%s)."
             % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), STEP[0], error),
             "What it measured before that, as measured (see scale.py for each):", "",
             "| figure | value |", "|---|---|"]
    lines += ["| %s | %s |" % (k, str(v).replace("|", "/")) for k, v in sorted(R.items())]
    with open(RESULTS, "w") as f:
        f.write("\n".join(lines) + "\n")
    log("INCOMPLETE: what was measured is in " + RESULTS)


if __name__ == "__main__":
    R = {}
    try:
        main(R)
    except BaseException as e:
        write_incomplete(R, "%s: %s" % (type(e).__name__, e))
        raise
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
