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
checked the same way in tests/e2e/grpc-reserve.test.mjs."""
import os
import signal
import threading
import time
import unittest

import harness
from harness import Permitd, PrivateRedis, decision, error_code, put_policy, unique, wait_for

APP = "app"


class ReservePoolTest(unittest.TestCase):
    def setUp(self):
        self.redis = PrivateRedis()
        self.p = Permitd(redis_url=self.redis.url, prefix="rp:",
                         args=["--threads", "1", "--reserve-workers", "1", "--reserve-queue", "2",
                               "--redis-timeout-ms", "60000"])
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


if __name__ == "__main__":
    harness.main()
