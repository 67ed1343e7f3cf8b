/*
 * pool.h - a few threads behind a bounded queue, and the way back from them
 * to the event loop that asked: the one thread pool of the admin listener's
 * slow work (its RPCs, admin.c; argon2 password checks, verifier.c).
 *
 * A loop thread (loop.h) must never wait for slow work: it also answers
 * /healthz, /readyz and /metrics. Here the work is a job, submitted on the
 * loop thread, run on a pool thread, then handed to the inbox of the loop
 * that asked (a source of that loop, woken through an eventfd), whose
 * ready() calls the job's done() on the loop thread again, where the
 * deferred request it belongs to is answered. A job that finds `queue`
 * others waiting (and every thread busy) is refused at once
 * (PERMITD_EEXHAUSTED): the answer to a flood is a quick refusal, never a
 * longer wait for everyone, and bounded memory.
 *
 * Jobs are the caller's: struct pool_job sits inside the caller's own job
 * (first member, or found with offsetof), so the pool allocates nothing per
 * job and has no out-of-memory path on submit.
 */
#ifndef PERMITD_POOL_H
#define PERMITD_POOL_H

#include "core/status.h"

struct loop;
struct pool;
struct pool_inbox;

/* One job. The caller fills run, done and drop; next and inbox are the
 * pool's. The job belongs to the pool from a successful pool_submit() until
 * done or drop is called, which hands it back (either may free it). */
struct pool_job {
    void (*run)(struct pool_job *j);    /* on a pool thread */
    void (*done)(struct pool_job *j);   /* then on the inbox's loop thread */
    /* Instead of done, under the pool's lock, when the inbox's loop ended
     * with the job still out (which http.c does not let happen): release
     * what the job holds, call nothing back. NULL: nothing to release. */
    void (*drop)(struct pool_job *j);
    struct pool_job *next;
    struct pool_inbox *inbox;
};

/* What /metrics may show. */
struct pool_load {
    unsigned workers, queue;    /* as configured */
    unsigned busy;              /* jobs running now */
    unsigned waiting;           /* jobs queued for a thread */
};

/* Starts `workers` threads with room for `queue` jobs waiting for one.
 * `name` (a string that outlives the pool, e.g. "admin rpc pool") begins
 * the pool's error messages. PERMITD_OK and *out (free with pool_free()),
 * or an error naming the bad count or what could not be made. */
int pool_new(int workers, int queue, const char *name, struct pool **out,
             struct permitd_error *err);

/* Lets the threads finish the jobs queued, joins them and frees p. Every
 * loop that submitted must have ended first. NULL is a no-op. */
void pool_free(struct pool *p);

/* The way back from p's threads to loop: an inbox attached to loop as a
 * source (from loop's thread, or before it starts). It lives as long as the
 * loop: loop_close() frees it, or, when a job is still out then, that
 * job's return does. PERMITD_OK and *out, or an error saying what could not
 * be made. */
int pool_inbox_new(struct pool *p, struct loop *loop, struct pool_inbox **out,
                   struct permitd_error *err);

/* Queues j: j->run(j) on a pool thread, then j->done(j) on ib's loop
 * thread (call this from that thread), exactly once each, never before
 * this returns. PERMITD_OK; or PERMITD_EEXHAUSTED when every thread is busy
 * and `queue` jobs wait (a job just queued for an idle thread that has not
 * woken yet counts as that thread's): j stays the caller's, nothing runs,
 * and *seen (when not NULL) tells how full the pool was, for the caller's
 * own message. */
int pool_submit(struct pool *p, struct pool_inbox *ib, struct pool_job *j,
                struct pool_load *seen);

/* The pool's size and load now. From any thread. */
void pool_load(struct pool *p, struct pool_load *out);

#endif
