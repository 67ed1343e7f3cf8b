"""Reservations off the worker's loop (issue 38): Reserve, Commit and Cancel
run their blocking Redis round trips on the reservations pool
(--reserve-workers threads, --reserve-queue waiting), never on the HTTP
worker's thread.

One worker thread (--threads 1), one reservations thread and room for two
waiting, on a private Redis stopped with SIGSTOP (it answers nothing) and a
Redis timeout far longer than the test: a Reserve then stays stuck for as
long as Redis is stopped. Checked: an Acquire on the same worker is answered
meanwhile (its own deadline ends it, on the worker's loop) while the Reserve
is still unanswered; Reserves past the pool's room are answered
resource_exhausted at once while the others wait (an all_or_nothing
AcquireBatch across slots too: it is held on the same pool), and those are
answered once Redis is back; a Reserve whose deadline passed while it waited for the
thread is answered deadline_exceeded and holds nothing. gRPC's door is
checked the same way in tests/e2e/grpc-reserve.test.mjs.

ReservePoolMetricsTest: the pool in /metrics, one thread and room for one
waiting (--reserve-queue 1): with Redis stopped and calls piled up,
permitd_reserve_queue_depth reads 1 and permitd_reserve_workers_busy 1,
permitd_reserve_refused_total grows by exactly the resource_exhausted
answers the clients got (Reserves, a Cancel, an all_or_nothing batch
across slots), and once Redis is back the depth and busy threads go back
to 0 with no refusal added. Every wait is a poll with a generous deadline."""
import os
import signal
import threading
import time
import unittest

import harness
from harness import Permitd, PrivateRedis, decision, error_code, put_policy, unique, wait_for

APP = "app"


def sample(text, name):
    """The value of an unlabelled sample of /metrics, or None."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


class PoolCase(unittest.TestCase):
    """A permitd with one worker and one reservations thread (and QUEUE
    waiting) on a private Redis the test can stop; no tests of its own."""
    QUEUE = "2"

    def setUp(self):
        self.redis = PrivateRedis()
        self.p = Permitd(redis_url=self.redis.url, prefix="rp:",
                         args=["--threads", "1", "--reserve-workers", "1",
                               "--reserve-queue", self.QUEUE, "--redis-timeout-ms", "60000"])
        self.name = unique("rpool")
        put_policy(self.redis.client(), self.name, max_permits=100, rate=0.001, prefix="rp:")
        self.c = self.p.http()
        wait_for("policy in redis",
                 lambda: self.c.peek(self.name).status == 200 and
                 decision(self.c.peek(self.name))["limit"] == 100)
        self.stopped = False

    def tearDown(self):
        self.resume()
        self.c.close()
        self.p.stop()
        self.redis.stop()

    def stop_redis(self):
        os.kill(self.redis.pid(), signal.SIGSTOP)
        self.stopped = True

    def resume(self):
        if self.stopped:
            os.kill(self.redis.pid(), signal.SIGCONT)
            self.stopped = False

    def reserve_async(self, estimate, timeout_ms="300000", key=""):
        """A Reserve on its own connection, in a thread: (thread, replies)."""
        replies = []

        def run():
            c = self.p.http()
            try:
                replies.append(c.rpc_json("Reserve", {
                    "app": APP, "items": [{"bucket": self.name, "key": key, "estimate": estimate}]},
                    {"Connect-Timeout-Ms": timeout_ms}))
            except Exception as e:      # the client's own timeout: no answer
                replies.append(e)
            finally:
                c.close()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, replies


class ReservePoolTest(PoolCase):
    def test_an_acquire_is_answered_while_a_reserve_is_stuck(self):
        self.stop_redis()
        t, replies = self.reserve_async(5)
        time.sleep(1)       # the Reserve reaches the worker first (ordering, not a bound)
        r = self.c.acquire(self.name, key="other", headers={"Connect-Timeout-Ms": "2000"})
        # Answered by the worker's loop (its deadline, Redis stopped) while
        # the Reserve still waits for Redis: the loop was not blocked by it.
        self.assertEqual((r.status, error_code(r)), (504, "deadline_exceeded"), r)
        self.assertTrue(t.is_alive() and not replies, replies)
        self.resume()
        t.join(120)
        self.assertEqual(replies[0].status, 200, replies)
        self.assertTrue(replies[0].json()["allowed"], replies)

    def test_a_flood_past_the_queue_is_refused_at_once(self):
        self.stop_redis()
        calls = [self.reserve_async(1, key="f%d" % i) for i in range(4)]
        # One thread and two waiting: of four, exactly one is refused,
        # resource_exhausted, while Redis is still stopped.
        wait_for("one Reserve refused", lambda: sum(len(r) for _, r in calls) >= 1, 60)
        answered = [r[0] for _, r in calls if r]
        self.assertEqual(len(answered), 1, answered)
        self.assertEqual((answered[0].status, error_code(answered[0])),
                         (429, "resource_exhausted"), answered)
        self.assertIn("--reserve-queue", answered[0].json()["message"])
        # More while the pool is full: each refused at once, none waits.
        for i in range(3):
            r = self.c.rpc_json("Reserve", {"app": APP, "items": [
                {"bucket": self.name, "key": "more", "estimate": 1}]})
            self.assertEqual((r.status, error_code(r)), (429, "resource_exhausted"), r)
        # Commit and Cancel share the pool.
        r = self.c.rpc_json("Cancel", {"app": APP, "reservationId": "0" * 32})
        self.assertEqual((r.status, error_code(r)), (429, "resource_exhausted"), r)
        # So does an all_or_nothing AcquireBatch across slots (held slot
        # by slot as a Reserve's items are).
        r = self.c.rpc_json("AcquireBatch", {"allOrNothing": True, "requests": [
            {"bucket": self.name, "app": APP, "key": k} for k in ("x", "y")]})
        self.assertEqual((r.status, error_code(r)), (429, "resource_exhausted"), r)
        self.assertIn("all_or_nothing across slots", r.json()["message"])
        self.resume()
        for t, _ in calls:
            t.join(120)
        ok = [r[0] for _, r in calls if r[0].status == 200]
        self.assertEqual(len(ok), 3, [r for _, r in calls])

    def test_a_reserve_past_its_deadline_is_not_run(self):
        self.stop_redis()
        stuck, stuck_replies = self.reserve_async(1, key="stuck")
        time.sleep(1)       # the stuck one takes the thread first (ordering, not a bound)
        late, late_replies = self.reserve_async(7, timeout_ms="1000", key="late")
        time.sleep(2)       # its deadline passes while it waits for the thread
        self.resume()
        stuck.join(120)
        late.join(120)
        r = late_replies[0]
        self.assertEqual((r.status, error_code(r)), (504, "deadline_exceeded"), r)
        self.assertEqual(decision(self.c.peek(self.name, key="late"))["remaining"], 100)
        self.assertEqual(stuck_replies[0].status, 200, stuck_replies)


class ReservePoolMetricsTest(PoolCase):
    QUEUE = "1"

    def pool(self):
        """The pool's four families from one scrape of /metrics."""
        admin = self.p.admin()
        try:
            r = admin.request("GET", "/metrics")
        finally:
            admin.close()
        self.assertEqual(r.status, 200, r)
        text = r.body.decode()
        return {k: sample(text, "permitd_reserve_" + k)
                for k in ("queue_depth", "queue_capacity", "workers_busy", "refused_total")}

    def pool_when(self, **want):
        """pool() when it reads want's values, else None (for wait_for)."""
        m = self.pool()
        return m if all(m[k] == v for k, v in want.items()) else None

    def test_the_pool_is_seen_full_refusing_and_drained(self):
        self.assertEqual(self.pool(), {"queue_depth": 0, "queue_capacity": 1,
                                       "workers_busy": 0, "refused_total": 0})
        self.stop_redis()
        calls = [self.reserve_async(1, key="m%d" % i) for i in range(6)]
        # One running, one waiting: the other four refused at once.
        wait_for("four Reserves refused", lambda: sum(len(r) for _, r in calls) >= 4, 120)
        seen = wait_for("one call running and one waiting",
                        lambda: self.pool_when(queue_depth=1, workers_busy=1), 120)
        refused = [r[0] for _, r in calls if r]
        self.assertEqual(len(refused), 4, refused)
        for r in refused:
            self.assertEqual((r.status, error_code(r)), (429, "resource_exhausted"), r)
        self.assertEqual(seen["refused_total"], 4, seen)
        # A Cancel and an all_or_nothing batch across slots share the pool
        # and its count.
        r = self.c.rpc_json("Cancel", {"app": APP, "reservationId": "0" * 32})
        self.assertEqual((r.status, error_code(r)), (429, "resource_exhausted"), r)
        r = self.c.rpc_json("AcquireBatch", {"allOrNothing": True, "requests": [
            {"bucket": self.name, "app": APP, "key": k} for k in ("x", "y")]})
        self.assertEqual((r.status, error_code(r)), (429, "resource_exhausted"), r)
        self.assertEqual(self.pool(), {"queue_depth": 1, "queue_capacity": 1,
                                       "workers_busy": 1, "refused_total": 6})
        self.resume()
        for t, _ in calls:
            t.join(120)
        held = [r[0] for _, r in calls if r[0].status == 200]
        self.assertEqual(len(held), 2, [r for _, r in calls])
        wait_for("the pool drained",
                 lambda: self.pool() == {"queue_depth": 0, "queue_capacity": 1,
                                         "workers_busy": 0, "refused_total": 6}, 120)


if __name__ == "__main__":
    harness.main()
