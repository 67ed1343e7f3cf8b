"""Local leases for hot buckets (issue 41, decisions/locallease.h): an
instance grants a hot bucket's permits from a lease it took from the bucket
in one script call, and gives back what it did not grant.

- Admitted never above the algorithm's bound across instances with leases
  on: a token bucket (max + rate x T) and a fixed window (max a window),
  many client threads over two instances; the leases really granted
  (permitd_local_lease_grants_total), and what was refused meanwhile
  (under-admission) is printed.
- A policy edit, a reset (the change notice), end every lease on every
  instance (permitd_local_leases_held back to 0, polled with a deadline)
  and nothing more is granted from them: after a lower max_permits, or
  after a reset, what both instances admit stays within the bound from
  the edit or reset on.
- An instance killed (SIGKILL) while it holds a lease loses at most that
  lease's permits: the other instance still gets the rest of the bucket.
- A lease that ended counts as held (permitd_local_leases_held) until
  Redis has answered its give-back: 0 means the unused permits are back
  (the killed-instance case waits on it before it counts).
- An instance stopped (SIGTERM) gives its leases back: the other instance
  then reads exactly max_permits less what the stopped one admitted; with
  its Redis answering nothing, the stop still ends (bounded by the Redis
  timeout) and says what it could not give back.
- A client denied while permits sit in another instance's lease and that
  waits retry_after_ms succeeds.

Two permitd instances with --local-leases on (some with a long lease or a
fixed lease size, to make the case), on the stack's Redis or, as
cluster_local_leases, its Redis Cluster; policies kept by hand in Redis.
"""
import json
import os
import re
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (Permitd, PrivateRedis, Redis, decision, put_policy, state_key,  # noqa: E402
                     unique)
import test_admin  # noqa: E402


def metric(p, name):
    text = p.admin().request("GET", "/metrics").body.decode()
    m = re.search(r"^%s (-?\d+)$" % name, text, re.M)
    if m is None:
        raise AssertionError("no %s in /metrics" % name)
    return int(m.group(1))


def poll(cond, timeout, what):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("not within %.0f s: %s" % (timeout, what))


class LocalLeaseTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()
        cls.procs = []
        try:
            cls.a = cls.start(["--local-leases", "on"])
            cls.b = cls.start(["--local-leases", "on"])
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start(cls, args):
        p = Permitd(args=args)
        cls.procs.append(p)
        return p

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            if p.proc.poll() is None:
                p.__exit__(None, None, None)
        cls.redis.close()

    def grants(self, *ps):
        return sum(metric(p, "permitd_local_lease_grants_total") for p in ps)

    def test_token_bucket_admits_no_more_than_its_bound(self):
        name = unique("ll-tb")
        put_policy(self.redis, name, max_permits=2000, rate=1000)
        g0 = self.grants(self.a, self.b)
        res = harness.hammer([self.a.port, self.b.port], name, threads=8, seconds=3.0)
        self.assertEqual(res["errors"], [])
        t = res["elapsed"]
        bound = 2000 + 1000 * t
        grants = self.grants(self.a, self.b) - g0
        msg = ("admitted %d (per instance %s) of %d requests in %.3f s; bound %.1f; %d granted "
               "from leases; under-admission %.1f %% of the bound"
               % (res["allowed"], sorted(res["per_port"].values()),
                  res["allowed"] + res["denied"], t, bound, grants,
                  100.0 * (bound - res["allowed"]) / bound))
        print("\n" + msg, file=sys.stderr)
        self.assertLessEqual(res["allowed"], bound + 1, msg)
        self.assertGreater(grants, 0, "no Acquire was granted from a lease: " + msg)

    def test_token_bucket_bound_over_every_window(self):
        # A scarce bucket (the leases are refused often): over every window
        # of the run, admitted <= max + rate x (its length). Each allowed
        # reply's decision lies between its request's send and its reply,
        # so the allowed replies r_i..r_j (by reply time) were all decided
        # within [the earliest send among them, r_j]: that span is the
        # window's length, never shorter than Redis's, whatever the load.
        name = unique("ll-win")
        put_policy(self.redis, name, max_permits=200, rate=100)
        got, errors, lock = [], [], threading.Lock()

        def run(port):
            http = harness.Http(port)
            mine = []
            stop = time.time() + 3.0
            while time.time() < stop:
                t0 = time.time()
                r = http.acquire(name)
                t1 = time.time()
                if r.status != 200:
                    errors.append(r)
                elif decision(r)["allowed"]:
                    mine.append((t1, t0))
            http.close()
            with lock:
                got.extend(mine)
        threads = [threading.Thread(target=run, args=((self.a.port, self.b.port)[i % 2],))
                   for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        got.sort()
        worst = 0.0
        for i in range(len(got)):
            first = got[i][1]
            for j in range(i, len(got)):
                first = min(first, got[j][1])
                if (j - i) % 10 == 0 or j == len(got) - 1:
                    worst = max(worst, (j - i + 1) - (200 + 100 * (got[j][0] - first)))
        print("\nadmitted %d; the worst window's excess %.1f (<= 1 expected)"
              % (len(got), worst), file=sys.stderr)
        self.assertLessEqual(worst, 1.0)

    def test_a_lease_does_not_let_its_bucket_refill_past_max(self):
        # A lease of 500 from a full bucket of 2000 at 400/s, held 2 s: were
        # the lease to take its 500 alone, the bucket would be full again
        # after 1.25 s, and 2000 + the lease's 500 could be admitted at
        # once. Its P (400 x 2.05 s) pays for that refill: after 1.7 s the
        # bucket holds about 2000 - 1321 + 680, and what both admit in the
        # burst below stays within 2000 + 400 x its length.
        name = unique("ll-refill")
        put_policy(self.redis, name, max_permits=2000, rate=400)
        p = self.start(["--local-leases", "on", "--local-lease-permits", "500",
                        "--local-lease-ms", "2000"])
        self.take_a_lease(p, name)
        time.sleep(1.7)
        c, h = self.b.http(), p.http()
        t0 = time.time()
        total = 0
        for size in (100, 10, 1):           # drain the bucket through b
            while True:
                d = decision(c.acquire(name, permits=size))
                if not d["allowed"]:
                    break
                total += size
        d = decision(h.acquire(name, permits=500))     # the lease's 500, if still held
        total += 500 if d["allowed"] else 0
        t = time.time() - t0
        c.close()
        h.close()
        msg = "admitted %d in %.3f s; bound 2000 + 400 x %.3f" % (total, t, t)
        print("\n" + msg, file=sys.stderr)
        self.assertLessEqual(total, 2000 + 400 * t + 1, msg)

    def test_fixed_window_admits_no_more_than_max_a_window(self):
        name = unique("ll-fw")
        put_policy(self.redis, name, max_permits=1500, rate="", algorithm="fixed_window",
                   window_ms=1000)
        g0 = self.grants(self.a, self.b)
        res = harness.hammer([self.a.port, self.b.port], name, threads=8, seconds=2.5)
        self.assertEqual(res["errors"], [])
        grants = self.grants(self.a, self.b) - g0
        # windows of Redis's clock [k s, k+1 s) (the machine's clock): the
        # decisions lie between the first send and the last reply
        per = {}
        for x in res["allowed_at"]:
            per[int(x)] = per.get(int(x), 0) + 1
        windows = int(res["last_reply"]) - int(res["first_send"]) + 1
        msg = "admitted %d over %d windows of 1500: by second of reply %s; %d from leases" % (
            res["allowed"], windows, sorted(per.items()), grants)
        print("\n" + msg, file=sys.stderr)
        self.assertLessEqual(res["allowed"], 1500 * windows, msg)
        self.assertGreater(grants, 0, msg)

    def take_a_lease(self, p, name):
        """Acquires one permit at a time on p until p holds a lease (the
        first may come before p has the policy in memory: decided in Redis
        as it is loaded); returns the permits taken."""
        http = p.http()
        taken = 0
        while metric(p, "permitd_local_leases_held") == 0:
            self.assertTrue(decision(http.acquire(name))["allowed"])
            taken += 1
            self.assertLess(taken, 10, "no lease taken")
        http.close()
        return taken

    def hold_leases(self, p, name, n=50):
        http = p.http()
        for _ in range(n):
            self.assertTrue(decision(http.acquire(name))["allowed"])
        http.close()
        self.assertGreater(metric(p, "permitd_local_leases_held"), 0)

    def test_an_edit_ends_every_lease_and_its_limit_holds_at_once(self):
        # leases of 10 s and 1000 permits (and a's of 100 ms): an edit must
        # end them long before their time
        name = unique("ll-edit")
        put_policy(self.redis, name, max_permits=1000000, rate=1)
        p = self.start(["--local-leases", "on", "--local-lease-permits", "1000",
                        "--local-lease-ms", "10000"])
        e0 = [metric(q, "permitd_local_leases_ended_early_total") for q in (p, self.a)]
        self.take_a_lease(p, name)
        self.hold_leases(self.a, name)
        # max_permits down to 20 (the change notice reaches both)
        put_policy(self.redis, name, max_permits=20, rate=1, version=2)
        for q in (p, self.a):
            poll(lambda: decision(q.http().peek(name))["limit"] == 20, 5,
                 "the edit in force on %d" % q.port)
        t0 = time.time()
        res = harness.hammer([p.port, self.a.port], name, threads=4, seconds=1.0)
        t = res["last_reply"] - t0 + 0.05
        self.assertLessEqual(res["allowed"], 20 + 1 * t + 1,
                             "admitted %d after max_permits went to 20" % res["allowed"])
        for q in (p, self.a):
            poll(lambda: metric(q, "permitd_local_leases_held") == 0, 5,
                 "no lease held on %d" % q.port)
        # p's 10 s lease was ended by the edit (a's 100 ms ones may have
        # run out first)
        self.assertGreater(metric(p, "permitd_local_leases_ended_early_total"), e0[0])

    def test_a_reset_ends_every_lease(self):
        name = unique("ll-reset")
        put_policy(self.redis, name, max_permits=1000, rate=0.001)
        p = self.start(["--local-leases", "on", "--local-lease-permits", "200",
                        "--local-lease-ms", "10000"])
        self.take_a_lease(p, name)      # a lease of 200 (and what the takes were)
        http = p.http()
        self.assertEqual(metric(p, "permitd_local_leases_held"), 1)
        ended = metric(p, "permitd_local_leases_ended_early_total")
        # a reset as limiter_reset() makes it: the state gone, the notice
        self.redis("DEL", state_key(name))
        self.redis("PUBLISH", "permitd:changes", "%s reset" % name)
        poll(lambda: metric(p, "permitd_local_leases_ended_early_total") > ended, 5,
             "the lease (of 10 s) ended by the reset notice")
        self.assertEqual(metric(p, "permitd_local_leases_held"), 0)
        # the bucket holds 1000 again, and no more: the lease's 200 are gone
        total = 0
        for q in (p, self.a):
            c = q.http()
            while decision(c.acquire(name))["allowed"]:
                total += 1
            c.close()
        http.close()
        self.assertLessEqual(total, 1000 + 1, "admitted %d after a reset to 1000" % total)
        self.assertGreaterEqual(total, 1000 - 2 * 210, total)

    def test_an_instance_killed_loses_at_most_its_lease(self):
        name = unique("ll-kill")
        put_policy(self.redis, name, max_permits=1000, rate=0.001)
        p = self.start(["--local-leases", "on", "--local-lease-permits", "200",
                        "--local-lease-ms", "1000"])
        taken = self.take_a_lease(p, name)      # a lease of 200 (+ P = 1)
        self.assertEqual(metric(p, "permitd_local_leases_held"), 1)
        p.proc.send_signal(signal.SIGKILL)
        p.proc.wait()
        # the other instance gets the rest: 1000 - taken - 201 (the lease
        # lost) at least, never more than 1000 - taken
        c = self.b.http()
        total = 0
        takes = metric(self.b, "permitd_local_leases_taken_total")
        late = metric(self.b, "permitd_local_lease_late_permits_total")
        deadline = time.monotonic() + 60
        while True:
            got = 0
            while decision(c.acquire(name))["allowed"]:
                got += 1
            # done when nothing more is granted and none of b's own leases
            # still holds permits to give back (on a loaded machine their
            # end can come after the pause below)
            if got == 0 and (metric(self.b, "permitd_local_leases_held") == 0 or
                             time.monotonic() > deadline):
                break
            total += got
            # b's own leases (a worker's the connection left, say) give
            # back what they hold at their end (100 ms)
            time.sleep(0.3)
        c.close()
        # each of b's own leases may keep a fraction of a permit: its P is
        # whole (rate x R rounded up), what it gives back of it is not
        # and a give-back of b's that came too late (a busy machine) keeps
        # its lease's unused permits spent: counted
        takes = metric(self.b, "permitd_local_leases_taken_total") - takes
        late = metric(self.b, "permitd_local_lease_late_permits_total") - late
        b = {k: metric(self.b, k) for k in
             ("permitd_local_lease_grants_total", "permitd_local_leases_refused_total",
              "permitd_local_lease_returns_total", "permitd_local_lease_returned_permits_total")}
        self.assertGreaterEqual(total, 1000 - taken - 201 - takes - late,
                                (total, taken, takes, late, b))
        self.assertLessEqual(total, 1000 - taken, total)

    def test_a_lease_counts_as_held_until_its_give_back_is_answered(self):
        # A lease of 8 permits whose key lives 10 s, on a Redis of its own
        # (the pause below must not hold the other instances' calls); then
        # that Redis takes no write for 3 s (CLIENT PAUSE WRITE: a script
        # call waits; a PING, the metrics and a grant from the lease do
        # not), and 8 Acquires spend the lease: it ends at once, and its
        # give-back (the part of P its life did not use) waits on the
        # pause, under a Redis timeout past it.
        priv = PrivateRedis()
        r = priv.client()
        name = unique("ll-held")
        p = None
        try:
            put_policy(r, name, max_permits=1000, rate=0.001)
            p = Permitd(redis_url=priv.url, args=[
                "--local-leases", "on", "--local-lease-permits", "8",
                "--local-lease-ms", "10000", "--redis-timeout-ms", "10000",
                "--threads", "1"])     # one worker: every Acquire meets the lease
            self.take_a_lease(p, name)
            grants = metric(p, "permitd_local_lease_grants_total")
            returns = metric(p, "permitd_local_lease_returns_total")
            http = p.http()
            r("CLIENT", "PAUSE", "3000", "WRITE")
            t0 = time.monotonic()
            for _ in range(8):
                self.assertTrue(decision(http.acquire(name))["allowed"])
            held = metric(p, "permitd_local_leases_held")
            self.assertEqual(metric(p, "permitd_local_lease_grants_total"), grants + 8)
            if time.monotonic() - t0 < 2.5:     # else the pause may be over: nothing to see
                self.assertEqual(held, 1, "the lease is spent; its give-back waits on the pause")
                self.assertEqual(metric(p, "permitd_local_lease_returns_total"), returns)
            poll(lambda: metric(p, "permitd_local_leases_held") == 0, 10,
                 "the give-back answered after the pause")
            self.assertEqual(metric(p, "permitd_local_lease_returns_total"), returns + 1)
            http.close()
        finally:
            if p is not None:
                p.stop()                # not left calling a Redis that is gone
            r.close()
            priv.stop()

    STOP_LOG = re.compile(r"local leases given back at stop.*leases=(\d+) permits=(\d+) "
                          r"not_given_back=(\d+)")

    def test_a_stopped_instance_gives_its_leases_back(self):
        # A's leases last 9950 ms: a lease's key lives R = 10 s, and at
        # 0.1 permit/s its P (rate x R, what it pays for the refill the
        # bucket earns while it is out: locallease.h) is exactly 1 permit.
        # What a give-back returns of P plus that refill make the permit
        # whole again but for the lease's last millisecond (lua/
        # lease_return.lua: PTTL - 1), and one worker (--threads 1) holds
        # one lease of the key at a time. So the bucket holds max less
        # what A admitted, plus 0.1/s x the time no lease of A was out
        # (the pause below, and the time before: a fraction of a permit
        # for a test shorter than 10 s; counted for a longer one). Without
        # the give-back at stop it holds that much less the last lease's
        # unused permits and its P.
        name = unique("ll-stop")
        key = "hot-key"
        put_policy(self.redis, name, max_permits=100000, rate=0.1)
        a = self.start(["--local-leases", "on", "--local-lease-permits", "200",
                        "--local-lease-ms", "9950", "--threads", "1"])
        peek = self.b.http()
        self.assertEqual(decision(peek.peek(name, key=key))["remaining"], 100000)
        t0 = time.monotonic()
        allowed, errors, lock = [0], [], threading.Lock()

        def run(n):
            http = a.http()
            mine = 0
            for _ in range(n):
                r = http.acquire(name, key=key)
                if r.status != 200 or not decision(r)["allowed"]:
                    errors.append((r.status, r.body))
                    break
                mine += 1
            http.close()
            with lock:
                allowed[0] += mine
        threads = [threading.Thread(target=run, args=(150,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        # a lease still held when A stops (its last one may have just run
        # out: one more Acquire takes the next)
        deadline = time.monotonic() + 60
        while metric(a, "permitd_local_leases_held") == 0:
            self.assertLess(time.monotonic(), deadline, "A holds no lease")
            run(1)
            self.assertEqual(errors, [])
        granted = allowed[0]
        self.assertGreater(metric(a, "permitd_local_lease_grants_total"), 0)
        self.assertEqual(a.stop(), 0, a.output())
        m = self.STOP_LOG.search(a.output())
        # the refill that makes up P's last millisecond: a few ms at least
        time.sleep(0.1)
        remaining = decision(peek.peek(name, key=key))["remaining"]
        elapsed = time.monotonic() - t0
        peek.close()
        expected = 100000 - granted
        msg = ("A admitted %d; B reads %d remaining, %d expected (+ %d refilled in %.1f s); "
               "A's stop: %s" % (granted, remaining, expected, int(0.1 * elapsed), elapsed,
                                 m.group(0) if m else "no line on leases"))
        print("\n" + msg, file=sys.stderr)
        self.assertGreaterEqual(remaining, expected, msg)
        self.assertLessEqual(remaining, expected + int(0.1 * elapsed), msg)
        self.assertIsNotNone(m, "no line on the leases given back:\n" + a.output())
        self.assertGreaterEqual(int(m.group(1)), 1, m.group(0))
        self.assertGreaterEqual(int(m.group(2)), 1, m.group(0))
        self.assertEqual(int(m.group(3)), 0, m.group(0))

    def test_a_stop_with_redis_answering_nothing_still_ends(self):
        # Redis stopped (SIGSTOP: the connection stays open, nothing is
        # answered): the give-back waits the Redis timeout (1 s here) and
        # the stop goes on; the lease's permits stay spent, and the line
        # says so. Without a bound the stop would never end (the harness
        # gives up after 20 s).
        priv = PrivateRedis()
        r = priv.client()
        name = unique("ll-stop-down")
        try:
            put_policy(r, name, max_permits=1000, rate=0.001)
            p = Permitd(redis_url=priv.url, args=["--local-leases", "on",
                                                  "--local-lease-permits", "200",
                                                  "--local-lease-ms", "10000"])
            self.procs.append(p)
            self.take_a_lease(p, name)
            os.kill(priv.pid(), signal.SIGSTOP)
            try:
                t0 = time.monotonic()
                self.assertEqual(p.stop(), 0, p.output())
                took = time.monotonic() - t0
            finally:
                os.kill(priv.pid(), signal.SIGCONT)
            m = self.STOP_LOG.search(p.output())
            self.assertIsNotNone(m, "no line on the leases given back:\n" + p.output())
            print("\nstopped in %.1f s with Redis stopped: %s" % (took, m.group(0)),
                  file=sys.stderr)
            self.assertEqual(int(m.group(1)), 0, m.group(0))
            self.assertGreaterEqual(int(m.group(3)), 1, m.group(0))
        finally:
            r.close()
            priv.stop()

    def test_waiting_retry_after_succeeds_while_another_instance_holds_a_lease(self):
        name = unique("ll-retry")
        put_policy(self.redis, name, max_permits=300, rate=20)
        holder = self.start(["--local-leases", "on", "--local-lease-permits", "100",
                             "--local-lease-ms", "1000"])
        h = holder.http()
        c = self.b.http()
        done = 0
        deadline = time.monotonic() + 60
        while done < 5 and time.monotonic() < deadline:
            # the holder takes a lease (100 of the bucket's permits sit in it)
            self.assertEqual(h.acquire(name).status, 200)
            d = decision(c.acquire(name))
            while d["allowed"]:
                d = decision(c.acquire(name))
            self.assertGreater(d["retry_after_ms"], 0, d)
            time.sleep(d["retry_after_ms"] / 1000.0)
            again = decision(c.acquire(name))
            self.assertTrue(again["allowed"], "waited %d ms, denied again: %s"
                            % (d["retry_after_ms"], json.dumps(again)))
            done += 1
        self.assertEqual(done, 5)
        h.close()
        c.close()


class PolicySettingTest(test_admin.AdminCase):
    """A policy's own local_lease and local_lease_permits (migration 0016),
    from MySQL through the sync to the policy's Redis hash and the
    decision: 'on' leases on an instance whose --local-leases is off, 'off'
    never leases on one whose --local-leases is on."""

    def test_a_policy_sets_its_own_leases(self):
        c = self.editor()
        name = self.name("llpol")
        c.create(name, max_permits=100000, rate="1000")
        off = Permitd(prefix=self.prefix, args=["--mysql-url", self.mysql_url,
                                                "--local-leases", "off"])
        on = Permitd(prefix=self.prefix, args=["--mysql-url", self.mysql_url,
                                               "--local-leases", "on"])
        redis = Redis()
        key = "%s{%s}:policy" % (self.prefix, name)
        try:
            self.sql("UPDATE policies SET local_lease = 'on', local_lease_permits = 50, "
                     "version = version + 1 WHERE name = '%s'" % name)
            poll(lambda: redis("HGET", key, "local_lease") == "on", 10, "local_lease synced")
            self.assertEqual(redis("HGET", key, "local_lease_permits"), "50")
            poll(lambda: self.take(off, name) > 0, 10, "a lease taken by the instance "
                 "whose --local-leases is off")
            self.sql("UPDATE policies SET local_lease = 'off', version = version + 1 "
                     "WHERE name = '%s'" % name)
            poll(lambda: redis("HGET", key, "local_lease") == "off", 10, "local_lease synced")
            poll(lambda: decision(on.http().peek(name))["limit"] == 100000, 10, "policy read")
            time.sleep(0.5)     # the change notice, and any lease ending
            takes = metric(on, "permitd_local_leases_taken_total")
            self.take(on, name)
            self.assertEqual(metric(on, "permitd_local_leases_taken_total"), takes)
            # a value MySQL refuses
            with self.assertRaises(harness.MysqlError):
                self.sql("UPDATE policies SET local_lease = 'maybe' WHERE name = '%s'" % name)
        finally:
            redis.close()
            for p in (off, on):
                p.__exit__(None, None, None)

    def take(self, p, name, n=30):
        """n Acquires on p; the leases p has taken in all."""
        http = p.http()
        for _ in range(n):
            self.assertEqual(http.acquire(name).status, 200)
        http.close()
        return metric(p, "permitd_local_leases_taken_total")


if __name__ == "__main__":
    harness.main()
