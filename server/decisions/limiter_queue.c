/*
 * limiter_queue.c - queued decisions: one worker's requests pipelined from
 * its own loop.
 *
 * Each worker's owner (api.c) makes one queue per loop (limiter_queue_new()):
 * a source of that loop (loop.h) with a Redis pipe of its own (redis.c: its
 * own connection, deadlines, NOSCRIPT, reconnect backoff). Handlers append
 * jobs while libmicrohttpd runs; after the pass the loop flushes the queue:
 * every job waiting goes to Redis in one write. While that batch is out the
 * next one gathers, so under load each round trip carries many decisions and
 * Redis pays its syscalls once per batch, not per decision. The Acquires of
 * one policy in a batch go as the items of one script call (and so do its
 * Peeks; in a cluster, those of every policy a master serves): Redis reads
 * the clock and their states once for all of them, and runs the script
 * once (see batch_items()). Replies are read
 * when the loop sees the socket ready, and each job's answer is handed back
 * right there: no other thread, no lock, no wake-up. */
#define _GNU_SOURCE     /* qsort_r */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>

#include "core/clock.h"
#include "core/config.h"
#include "decisions/deny_cache.h"
#include "decisions/limiter.h"
#include "decisions/limiter_plan.h"
#include "decisions/limiter_internal.h"
#include "core/log.h"
#include "core/loop.h"
#include "decisions/policies.h"
#include "stores/cluster.h"
#include "stores/policy.h"

_Static_assert(LIMITER_BATCH_MAX <= 65535, "a call's number of policies is written as an unsigned short");

/* Jobs are recycled by their worker's queue: once a worker has had as many
 * in flight as it will, queuing a decision allocates nothing. */
struct job *limiter_queue_job_get(struct limiter_queue *q)
{
    struct job *j = q->spare;

    if (j == NULL)
        return malloc(sizeof(*j));
    q->spare = j->next;
    q->nspare--;
    return j;
}

void limiter_queue_job_put(struct limiter_queue *q, struct job *j)
{
    if (q->nspare >= QUEUE_SPARE_MAX) {
        free(j);
        return;
    }
    j->next = q->spare;
    q->spare = j;
    q->nspare++;
}

/* Queues the give-back of a lease that ended (ret: what goes back) as a
 * call of lua/lease_return.lua of its own, sent with the next batch
 * before its decisions. Out of memory, it is not sent: the permits stay
 * spent (under-admission, never over). The lease counts as held
 * (permitd_local_leases_held) until its give-back is answered
 * (job_answer()): its unused permits are not in Redis before. */
static void lease_return(struct limiter_queue *q, const struct locallease_return *ret)
{
    struct job *j;

    if (ret->permits <= 0 && ret->p <= 0)
        return;
    if ((j = limiter_queue_job_get(q)) == NULL) {
        atomic_fetch_sub(&q->l->leases_held, 1);
        return;
    }
    memset(&j->req, 0, sizeof(j->req));
    j->plan = NULL;
    j->entry = NULL;
    j->split = 0;
    j->take = DO_RETURN;
    j->ls = NULL;
    j->ret = *ret;
    j->deadline_us = INT64_MAX;
    j->done = NULL;
    j->ud = NULL;
    j->out = NULL;
    j->rkey = (struct redis_str){j->ret.key, j->ret.key_len};
    j->rargs[0] = j->ret.fixed_window ? (struct redis_str){"fixed_window", 12}
                                      : (struct redis_str){"token_bucket", 12};
    j->rargs[1].p = j->rnum[0];
    j->rargs[1].len = (size_t)snprintf(j->rnum[0], 24, "%" PRId64, j->ret.max);
    j->rargs[2] = (struct redis_str){j->ret.id, strlen(j->ret.id)};
    j->rargs[3].p = j->rnum[1];
    j->rargs[3].len = (size_t)snprintf(j->rnum[1], 24, "%" PRId64, j->ret.permits);
    j->rargs[4] = (struct redis_str){q->lease_life_s, strlen(q->lease_life_s)};
    j->rargs[5].p = j->rnum[2];
    j->rargs[5].len = (size_t)snprintf(j->rnum[2], 24, "%" PRId64, j->ret.p);
    j->rout[0] = j->rout[1] = 0;
    limiter_queue_enqueue(q, j);
}

/* A lease that ended: its give-back queued (give: the unused permits go
 * back; a reset's do not). */
static void lease_end(struct limiter_queue *q, struct locallease_slot *s, int give)
{
    struct locallease_return ret;

    if (s->state != LOCALLEASE_HELD)
        return;
    locallease_end(q->leases, s, give, &ret);
    if (ret.permits > 0 || ret.p > 0)
        lease_return(q, &ret);
    else
        atomic_fetch_sub(&q->l->leases_held, 1);
}

static uint64_t stamp_of(void *ud, const char *policy)
{
    return policies_stamp(ud, policy);
}

/* Ends the leases that are out of time, or whose policy was edited or
 * reset since (every LOCALLEASE_SWEEP_US at most while any is held: a
 * lease ends within that of an edit or reset even when no Acquire of
 * its bucket comes). */
#define LOCALLEASE_SWEEP_US 20000
static void lease_sweep(struct limiter_queue *q, int64_t now)
{
    uint64_t epoch;
    size_t cursor = 0;
    struct locallease_slot *s;

    if (q->leases == NULL || locallease_held(q->leases) == 0 || now < q->lease_sweep_us)
        return;
    q->lease_sweep_us = now + LOCALLEASE_SWEEP_US;
    epoch = atomic_load(&q->l->lease_epoch);
    while ((s = locallease_due(q->leases, &cursor, now, epoch, stamp_of,
                               q->l->policies)) != NULL) {
        if (s->epoch != epoch || now < s->until_us)
            atomic_fetch_add(&q->l->lease_ended_early, 1);
        lease_end(q, s, s->epoch == epoch);
    }
}

/* Answers one job's caller with rc (PERMITD_OK: each call has its own).
 * calls: its calls in the batch, NULL when none was sent (or its answer is
 * not awaited). The caller's strings and storage are not touched after. */
static void job_answer(struct limiter_queue *q, struct job *j, int rc,
                       const struct redis_script_call *calls, const struct permitd_error *err)
{
    struct permitd_error e = *err;
    struct limiter_result res;
    int direct;

    j->answered = 1;
    if (j->deadline_us != INT64_MAX)
        q->timed--;
    if (j->plan != NULL) {
        limiter_plan_answer(j->plan, rc, calls, &e);
        return;
    }
    if (j->take == DO_RETURN) {
        atomic_fetch_sub(&q->l->leases_held, 1);    /* given back, or never will be */
        if (rc == PERMITD_OK && calls != NULL && calls[0].rc == PERMITD_OK) {
            atomic_fetch_add(&q->l->lease_returns, 1);
            atomic_fetch_add(&q->l->lease_returned, (uint64_t)j->rout[0]);
            atomic_fetch_add(&q->l->lease_late, (uint64_t)j->rout[1]);
            if (q->stopping) {
                atomic_fetch_add(&q->l->stop_returns, 1);
                atomic_fetch_add(&q->l->stop_returned, (uint64_t)j->rout[0]);
            }
        } else if (q->stopping) {
            atomic_fetch_add(&q->l->stop_lost, 1);
        }
        return;
    }
    if (j->take == DO_LEASE) {
        /* Not granted (an error, its deadline): what the Acquire alone
         * would have been told; the slot takes no lease for a while. */
        int granted = rc == PERMITD_OK && calls != NULL && calls[0].rc == PERMITD_OK &&
                      j->out != NULL && j->out[0] == 0 && j->out[1] != 0;
        struct limiter_request req = j->req;
        if (!granted) {
            req.permits = j->want;
            req.request_id = "";
        }
        if (rc == PERMITD_OK && calls != NULL && calls[0].rc != PERMITD_OK)
            rc = limiter_script_call_refused(calls[0].rc, j->req.bucket, &e);
        memset(&res, 0, sizeof(res));
        rc = limiter_script_conclude(&(struct limiter_decision){q->l, &req, DO_TAKE, 1, 0,
                                                                j->deadline_us, &res, &e,
                                                                &j->lim},
                                     rc, j->out);
        if (granted && rc == PERMITD_OK && j->ls != NULL) {
            locallease_taken(q->leases, j->ls, 1, j->sent_us, &res);
            j->ls = NULL;
            atomic_fetch_add(&q->l->leases_held, 1);
            atomic_fetch_add(&q->l->lease_takes, 1);
        }
        j->done(j->ud, rc, &res, &e);
        return;
    }
    /* the script's own decision, this very call's */
    direct = rc == PERMITD_OK && calls != NULL && calls[0].rc == PERMITD_OK &&
             j->out != NULL && j->out[0] == 0;
    if (rc == PERMITD_OK && calls != NULL && calls[0].rc != PERMITD_OK)
        rc = limiter_script_call_refused(calls[0].rc, j->req.bucket, &e);
    memset(&res, 0, sizeof(res));
    rc = limiter_script_conclude(&(struct limiter_decision){q->l, &j->req, j->take, 1, 0,
                                                            j->deadline_us, &res, &e, &j->lim},
                                 rc, j->out);
    if (direct && rc == PERMITD_OK && !res.allowed && !res.replayed &&
        limiter_deny_cacheable(q, j->take, j->entry, &j->lim))
        limiter_deny_remember(q, j, &res);
    j->done(j->ud, rc, &res, &e);
}

/* Answers one job, unless it was already, and recycles it. */
static void job_end(struct limiter_queue *q, struct job *j, int rc,
                    const struct redis_script_call *calls, const struct permitd_error *err)
{
    if (!j->answered)
        job_answer(q, j, rc, calls, err);
    if (j->take == DO_LEASE && j->ls != NULL) {
        /* never granted (or not known to be): no lease; a while without */
        locallease_taken(q->leases, j->ls, 0, j->sent_us, NULL);
        j->ls = NULL;
    }
    if (j->plan != NULL) {
        limiter_plan_free(j->plan);
        free(j->plan);
    } else {
        policies_release(j->entry);
    }
    limiter_queue_job_put(q, j);
}

/* The batch out has ended: rc is the whole batch's. */
static void batch_end(struct limiter_queue *q, int rc, const struct permitd_error *err)
{
    struct batch *b = &q->batch;
    size_t n = b->njobs, ncalls = b->ncalls, items_from = 0;
    struct job *again = NULL, *last = NULL;

    /* The AcquireBatches' calls come first; plan_resend() counts theirs. */
    for (size_t i = 0; i < n; i++)
        if (b->jobs[i]->plan != NULL)
            items_from += b->jobs[i]->plan->ngroups;
        else if (b->jobs[i]->take == DO_RETURN)
            items_from++;
    if (rc == PERMITD_OK && items_from < ncalls)
        atomic_fetch_add(&q->l->splits, limiter_script_split_calls(&b->calls[items_from],
                                                                   ncalls - items_from));
    b->njobs = b->ncalls = 0;
    for (size_t i = 0; i < n; i++) {
        struct job *j = b->jobs[i];
        /* A call over several slots that met a redirect wrote nothing: its
         * Acquires and Peeks go again, first in the queue, one call per
         * slot, whose redirects are followed (batch_items()). */
        if (rc == PERMITD_OK && j->plan == NULL && !j->answered && !j->split &&
            b->calls[j->first].rc == REDIS_CALL_SPLIT) {
            j->split = 1;
            j->next = NULL;
            if (last != NULL)
                last->next = j;
            else
                again = j;
            last = j;
            continue;
        }
        /* A lease's take refused (the bucket holds fewer than want + N
         * + P, or the script answered anything but a grant): the Acquire
         * goes again as itself, first in the queue, and the bucket is
         * left to Redis for a lease's time. Its denial, if it is one, is
         * then Redis's own, with an exact retry_after_ms. */
        if (rc == PERMITD_OK && j->take == DO_LEASE && !j->answered && j->out != NULL &&
            b->calls[j->first].rc == PERMITD_OK && (j->out[0] != 0 || j->out[1] == 0)) {
            locallease_taken(q->leases, j->ls, 0, j->sent_us, NULL);
            atomic_fetch_add(&q->l->lease_refused, 1);
            j->take = DO_TAKE;
            j->req.permits = j->want;
            j->request_id[0] = '\0';
            j->ls = NULL;
            j->next = NULL;
            if (last != NULL)
                last->next = j;
            else
                again = j;
            last = j;
            continue;
        }
        /* granted after its caller's deadline: the lease is held all the same */
        if (rc == PERMITD_OK && j->take == DO_LEASE && j->answered && j->out != NULL &&
            j->ls != NULL &&
            b->calls[j->first].rc == PERMITD_OK && j->out[0] == 0 && j->out[1] != 0) {
            struct limiter_result res = {0};
            res.remaining = j->out[2];
            res.reset_after_ms = j->out[5];
            res.window_s = j->out[6];
            locallease_taken(q->leases, j->ls, 1, j->sent_us, &res);
            j->ls = NULL;
            atomic_fetch_add(&q->l->leases_held, 1);
            atomic_fetch_add(&q->l->lease_takes, 1);
        }
        job_end(q, j, rc, &b->calls[j->first], err);
    }
    if (again != NULL) {
        last->next = q->head;
        if (q->head == NULL)
            q->tail = last;
        q->head = again;
    }
}

/* Room for n more calls in the batch; 0 or -1 (out of memory). */
static int batch_reserve(struct batch *b, size_t n)
{
    if (b->ncalls + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        struct redis_script_call *c;
        while (cap < b->ncalls + n)
            cap *= 2;
        if ((c = realloc(b->calls, cap * sizeof(*c))) == NULL)
            return -1;
        b->calls = c;
        b->cap = cap;
    }
    return 0;
}

/* Orders a batch's Acquires and Peeks into calls: by kind (Acquires
 * first, then Peeks, Releases, Renews), master, algorithm (one script per
 * call), policy, and in the order they came within a policy. */
static int by_call(const void *a, const void *b, void *jobs_)
{
    struct job *const *jobs = jobs_;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const struct job *x = jobs[i], *y = jobs[j];
    int c = (x->take == DO_TAKE ? -1 : x->take) - (y->take == DO_TAKE ? -1 : y->take);

    if (c == 0)
        c = x->group - y->group;
    if (c == 0)
        c = (int)x->entry->algorithm - (int)y->entry->algorithm;
    if (c == 0)
        c = strcmp(x->req.bucket, y->req.bucket);
    if (c == 0)     /* a policy's items under one override's limits side by side */
        c = limiter_limits_cmp(&x->lim, &y->lim);
    if (c == 0 && x->l->slot_calls)
        c = (int)x->slot - (int)y->slot;
    return c != 0 ? c : (i < j ? -1 : (i > j));
}

/* Lays the batch's Acquires and Peeks (b->items, n of them) out as calls
 * after its AcquireBatches': on a single Redis one per policy and kind; in
 * a cluster one per master and kind, carrying the items of several
 * policies and slots (lua/bucket.lua: Redis 7 lets a script with
 * allow-cross-slot-keys touch any key of a slot its node serves). Items
 * keep the order they came within a policy; each policy's limits go once
 * per call (the newest copy among its items': a reload may have come
 * between two of them). A call over several slots declares its first key
 * only (KEYS must share a slot) and names the others after the items'
 * pairs; should it meet a redirect its items go again, one call per slot
 * (batch_end()), and so do items whose slot has no master known. The
 * script decides its items one after the other, exactly as if each had
 * been a call of its own, and answers each on its own. */
static void batch_items(struct limiter_queue *q, size_t n)
{
    struct batch *b = &q->batch;
    size_t a = 0;

    for (size_t k = 0; k < n; k++) {
        struct job *j = b->jobs[b->items[k]];
        j->l = q->l;
        j->name_len = limiter_script_bucket_key(q->l, &j->req, j->entry, j->name);
        j->slot = q->l->slot_calls ? cluster_keyslot(j->name, j->name_len) : 0;
        j->group = 0;
        if (q->l->slot_calls)
            j->group = limiter_plan_call_group(q->l, j->slot, j->split);
    }
    qsort_r(b->items, n, sizeof(*b->items), by_call, b->jobs);
    for (size_t k = 0; k < n;) {
        size_t first = k, last = k + 1, np = 0;
        struct job *lead = b->jobs[b->items[first]];
        struct redis_script_call *c = &b->calls[b->ncalls];
        size_t at = a;          /* where its args begin */
        int cross = 0, wide = limiter_script_item_wide(&lead->req, lead->take,
                                                       lead->entry->algorithm);

        /* This call's items: one kind; on a single Redis one policy, in a
         * cluster one master (group). */
        while (last < n) {
            const struct job *j = b->jobs[b->items[last]];
            if (j->take != lead->take || j->group != lead->group ||
                j->entry->algorithm != lead->entry->algorithm ||
                (!q->l->slot_calls && strcmp(j->req.bucket, lead->req.bucket) != 0))
                break;
            cross |= j->slot != lead->slot;
            wide |= limiter_script_item_wide(&j->req, j->take, j->entry->algorithm);
            last++;
        }
        limiter_script_call_head(q->l, limiter_script_mode_arg(lead->take), "", wide, &b->args[a]);
        if (lead->take == DO_LEASE)     /* the lease's key lives R ms (locallease.h) */
            b->args[a + 2] = (struct redis_str){q->lease_life_s, strlen(q->lease_life_s)};
        *c = (struct redis_script_call){.keys = &b->keys[first], .args = &b->args[a],
                                        .out = &b->out[RW * first], .cross_slot = cross,
                                        .script = limiter_script_of(lead->entry)};
        a += 3;                 /* its number of policies is set below */
        /* Each policy once (its items are side by side), with its number. */
        for (size_t x = first; x < last;) {
            const struct job *newest = b->jobs[b->items[x]];
            np++;
            const struct job *head = newest;
            while (x < last && strcmp(b->jobs[b->items[x]]->req.bucket,
                                      head->req.bucket) == 0 &&
                   limiter_limits_cmp(&b->jobs[b->items[x]]->lim, &head->lim) == 0) {
                struct job *j = b->jobs[b->items[x]];
                if (j->lim.stamp > newest->lim.stamp)
                    newest = j;
                snprintf(j->index, sizeof(j->index), "%hu", (unsigned short)np);
                x++;
            }
            limiter_script_policy_args(newest->entry, &newest->lim, &b->args[a]);
            a += 4;
        }
        snprintf(lead->npol, sizeof(lead->npol), "%hu", (unsigned short)np);
        b->args[at + 1] = (struct redis_str){lead->npol, strlen(lead->npol)};
        for (size_t x = first; x < last; x++) {
            struct job *j = b->jobs[b->items[x]];
            /* a lease id that cannot be drawn (no entropy: never seen)
             * leaves it empty, and the script refuses the take */
            (void)limiter_script_item_call(&j->req, j->take, j->entry->algorithm, wide, j->name,
                                           j->name_len, j->permits, j->index, j->lease,
                                           &b->keys[x], &b->args[a]);
            a += wide ? 4 : 2;
            j->first = b->ncalls;
            j->out = &b->out[RW * x];
        }
        /* Over several slots: KEYS is the first key, the others follow. */
        for (size_t x = first + 1; cross && x < last; x++)
            b->args[a++] = b->keys[x];
        c->nkeys = cross ? 1 : (int)(last - first);
        c->nargs = (int)(a - at);
        c->nout = (int)(RW * (last - first));
        b->ncalls++;
        k = last;
    }
}

/* Sends every waiting job (up to QUEUE_BATCH_MAX) as one batch; jobs whose
 * deadline has passed are answered without asking Redis. The batch waits
 * for Redis as long as --redis-timeout-ms allows (and no later than
 * deadline_us: INT64_MAX but at a stop, lease_stop()); a job's own deadline
 * (Connect-Timeout-Ms) ends that job alone (queue_expire()): one impatient
 * client must not fail the others, nor cost the connection. */
static void batch_send(struct limiter_queue *q, int64_t deadline_us)
{
    struct batch *b = &q->batch;
    struct permitd_error err = {0, ""};
    int64_t now = clock_now_us();
    size_t nitems = 0;
    int rc;

    while (q->head != NULL && b->njobs < QUEUE_BATCH_MAX) {
        struct job *j = q->head;
        size_t n = j->plan != NULL ? j->plan->ngroups : 1;
        int ret = j->plan == NULL && j->take == DO_RETURN;

        q->head = j->next;
        j->out = NULL;
        /* Room for this job's calls and for one per Acquire and Peek so
         * far: batch_items() lays theirs out after the AcquireBatches'. */
        if (j->deadline_us <= now || batch_reserve(b, nitems + n) != 0) {
            if (j->deadline_us <= now)
                permitd_error_set(&err, PERMITD_EDEADLINE,
                                  "deadline exceeded before calling redis");
            else
                permitd_error_set(&err, PERMITD_EINTERNAL, "out of memory");
            job_end(q, j, err.code, NULL, &err);
            continue;
        }
        j->sent_us = now;
        if (j->plan != NULL) {
            j->first = b->ncalls;
            memcpy(&b->calls[b->ncalls], j->plan->calls, n * sizeof(*b->calls));
            b->ncalls += n;
        } else if (ret) {
            j->first = b->ncalls;
            b->calls[b->ncalls++] = (struct redis_script_call){
                .keys = &j->rkey, .nkeys = 1, .args = j->rargs, .nargs = 6, .out = j->rout,
                .nout = 2, .script = REDIS_SCRIPT_LEASE_RETURN};
        } else {
            b->items[nitems++] = b->njobs;
        }
        b->jobs[b->njobs++] = j;
    }
    if (q->head == NULL)
        q->tail = NULL;
    if (b->njobs == 0)
        return;
    batch_items(q, nitems);
    err = (struct permitd_error){0, ""};
    rc = redis_pipe_send(q->pipe, b->calls, b->ncalls, deadline_us, &err);
    if (rc != PERMITD_OK)
        batch_end(q, rc, &err);
}

/* The earliest deadline of a job not yet answered, out or waiting. */
static int64_t queue_soonest(const struct limiter_queue *q)
{
    int64_t at = INT64_MAX;

    for (size_t i = 0; i < q->batch.njobs; i++)
        if (!q->batch.jobs[i]->answered && q->batch.jobs[i]->deadline_us < at)
            at = q->batch.jobs[i]->deadline_us;
    for (const struct job *j = q->head; j != NULL; j = j->next)
        if (j->deadline_us < at)
            at = j->deadline_us;
    for (const struct job *j = q->parked; j != NULL; j = j->next)
        if (j->deadline_us < at)
            at = j->deadline_us;
    for (const struct job *j = q->parked_batches; j != NULL; j = j->next)
        if (j->deadline_us < at)
            at = j->deadline_us;
    return at;
}

/* Answers the jobs whose own deadline has passed: those waiting, and those
 * in the batch out, whose calls stay in it (Redis may still decide them;
 * their answers are dropped when it ends). */
static void queue_expire(struct limiter_queue *q, int64_t now)
{
    struct batch *b = &q->batch;
    struct permitd_error err;
    struct job **link = &q->head, *prev = NULL;

    if (q->timed == 0)
        return;
    for (size_t i = 0; i < b->njobs; i++) {
        struct job *j = b->jobs[i];
        if (!j->answered && j->deadline_us <= now) {
            permitd_error_set(&err, PERMITD_EDEADLINE, "deadline exceeded waiting for redis");
            job_answer(q, j, PERMITD_EDEADLINE, NULL, &err);
        }
    }
    while (*link != NULL) {
        struct job *j = *link;
        if (j->deadline_us > now) {
            prev = j;
            link = &j->next;
            continue;
        }
        *link = j->next;
        if (q->tail == j)
            q->tail = prev;
        permitd_error_set(&err, PERMITD_EDEADLINE, "deadline exceeded before calling redis");
        job_end(q, j, PERMITD_EDEADLINE, NULL, &err);
    }
    for (link = &q->parked_batches; *link != NULL;) {
        struct job *j = *link;
        if (j->deadline_us > now) {
            link = &j->next;
            continue;
        }
        /* Answered and dropped now: a name no one waits for any more is
         * not read (limiter_loader_pend_drop()). */
        *link = j->next;
        q->timed--;
        permitd_error_set(&err, PERMITD_EDEADLINE, "deadline exceeded reading policies from redis");
        j->plan->done(j->plan->ud, PERMITD_EDEADLINE, &err);
        limiter_loader_parked_batch_end(q, j);
    }
    for (link = &q->parked; *link != NULL;) {
        struct job *j = *link;
        struct limiter_result res;
        if (j->deadline_us > now) {
            link = &j->next;
            continue;
        }
        *link = j->next;
        memset(&res, 0, sizeof(res));
        permitd_error_set(&err, PERMITD_EDEADLINE,
                          "deadline exceeded reading policy \"%s\" from redis", j->req.bucket);
        limiter_loader_parked_end(q, j, PERMITD_EDEADLINE, &res, &err);
    }
}

static void queue_want(void *ud, struct loop_want *w)
{
    struct limiter_queue *q = ud;

    redis_pipe_want(q->pipe, &w->fd, &w->events, &w->at_us, &w->generation);
    /* held leases are looked over every LOCALLEASE_SWEEP_US (lease_sweep()) */
    if (q->leases != NULL && locallease_held(q->leases) > 0 && q->lease_sweep_us < w->at_us)
        w->at_us = q->lease_sweep_us;
    if (q->timed > 0) {
        int64_t at = queue_soonest(q);
        if (at < w->at_us)
            w->at_us = at;
    }
}

static void queue_ready(void *ud, uint32_t revents)
{
    struct limiter_queue *q = ud;
    struct permitd_error err = {0, ""};
    int rc = redis_pipe_io(q->pipe, revents, &err);

    /* A batch that failed (failure_mode may apply) first answers the jobs
     * whose own deadline has passed meanwhile: theirs is deadline_exceeded,
     * never a reason to fail open. A batch that Redis decided answers every
     * job it carried with its decision: the permits are taken. */
    if (rc < 0)
        queue_expire(q, clock_now_us());
    if (rc == 1)
        batch_end(q, PERMITD_OK, &err);
    else if (rc < 0)
        batch_end(q, rc, &err);
    queue_expire(q, clock_now_us());
}

static void queue_flush(void *ud, int woke)
{
    struct limiter_queue *q = ud;

    (void)woke;
    lease_sweep(q, clock_now_us());
    limiter_loader_queue_loaded(q);
    if (q->head != NULL && !redis_pipe_busy(q->pipe))
        batch_send(q, INT64_MAX);
}

/* Answers whatever the queue still holds with err: the batch out, then
 * the jobs waiting. */
static void queue_drain(struct limiter_queue *q, const struct permitd_error *err)
{
    if (redis_pipe_busy(q->pipe))
        batch_end(q, err->code, err);
    while (q->head != NULL) {
        struct job *j = q->head;
        q->head = j->next;
        job_end(q, j, err->code, NULL, err);
    }
    q->tail = NULL;
    while (q->parked != NULL) {
        struct job *j = q->parked;
        struct limiter_result res;
        q->parked = j->next;
        memset(&res, 0, sizeof(res));
        limiter_loader_parked_end(q, j, err->code, &res, err);
    }
    while (q->parked_batches != NULL) {
        struct job *j = q->parked_batches;
        q->parked_batches = j->next;
        if (j->deadline_us != INT64_MAX)
            q->timed--;
        j->plan->done(j->plan->ud, err->code, err);
        limiter_loader_parked_batch_end(q, j);
    }
}

/* ---- a stop gives the leases back ---- */

/* Whether this worker has lease work for a stop: a lease held, or a
 * lease's take or give-back in the batch out or waiting. */
static int lease_work(const struct limiter_queue *q)
{
    if (q->leases == NULL)
        return 0;
    if (locallease_held(q->leases) > 0)
        return 1;
    if (redis_pipe_busy(q->pipe))
        for (size_t i = 0; i < q->batch.njobs; i++)
            if (q->batch.jobs[i]->plan == NULL && (q->batch.jobs[i]->take == DO_LEASE ||
                                                   q->batch.jobs[i]->take == DO_RETURN))
                return 1;
    for (const struct job *j = q->head; j != NULL; j = j->next)
        if (j->plan == NULL && j->take == DO_RETURN)
            return 1;
    return 0;
}

/* The loop is closed to us: waits on the pipe's socket here (poll()) until
 * the batch out has ended or until_us has come, handing its answers over
 * as queue_ready() does in a turn of the loop. */
static void stop_wait(struct limiter_queue *q, int64_t until_us)
{
    while (redis_pipe_busy(q->pipe)) {
        int64_t now = clock_now_us(), at;
        uint64_t generation;
        uint32_t events, revents = 0;
        struct pollfd pfd;
        int fd, ms;

        if (now >= until_us)
            return;
        redis_pipe_want(q->pipe, &fd, &events, &at, &generation);
        if (at > until_us)
            at = until_us;
        ms = at <= now ? 0 : (int)((at - now + 999) / 1000);
        pfd.fd = fd;
        pfd.events = (short)(((events & EPOLLIN) ? POLLIN : 0) |
                             ((events & EPOLLOUT) ? POLLOUT : 0));
        pfd.revents = 0;
        if (poll(&pfd, fd >= 0 ? 1 : 0, ms) > 0)
            revents = ((pfd.revents & POLLIN) ? EPOLLIN : 0) |
                      ((pfd.revents & POLLOUT) ? EPOLLOUT : 0) |
                      ((pfd.revents & POLLERR) ? EPOLLERR : 0) |
                      ((pfd.revents & POLLHUP) ? EPOLLHUP : 0);
        queue_ready(q, revents);
    }
}

/* permitd is stopping and this worker's loop closes: every lease it holds
 * ends, and what it did not grant goes back to its bucket (the same
 * give-back as at a lease's end: lease_end()), all in one batch. The loop
 * turns no more, so the pipe is waited on here, for the Redis timeout
 * twice at most: the batch out first (a lease its take brings is held
 * once it ends, and a give-back in it is counted), then the give-backs.
 * What Redis has not taken back by then stays spent, as a crash's would
 * (locallease.h); a Redis that is down fails them at once. A decision
 * still waiting (a gRPC call past its grace) is not sent any more: it is
 * answered err. Counted in /metrics as every give-back, and for
 * limiter_stopped()'s line. */
static void lease_stop(struct limiter_queue *q, const struct permitd_error *err)
{
    struct job **link = &q->head, *prev = NULL;
    struct locallease_slot *s;
    size_t cursor = 0;
    uint64_t epoch;
    int64_t until;

    if (!lease_work(q))
        return;
    q->stopping = 1;
    until = clock_now_us() + 2 * (int64_t)q->l->cfg->redis_timeout_ms * 1000;
    stop_wait(q, until);
    while (*link != NULL) {
        struct job *j = *link;
        if (j->plan == NULL && j->take == DO_RETURN) {
            prev = j;
            link = &j->next;
            continue;
        }
        *link = j->next;
        job_end(q, j, err->code, NULL, err);
    }
    q->tail = prev;
    /* a reset's leases give nothing back (the reset gave everything) */
    epoch = atomic_load(&q->l->lease_epoch);
    while ((s = locallease_due(q->leases, &cursor, INT64_MAX, epoch, NULL, NULL)) != NULL)
        lease_end(q, s, s->epoch == epoch);
    while (q->head != NULL && clock_now_us() < until) {
        if (!redis_pipe_busy(q->pipe))
            batch_send(q, until);
        stop_wait(q, until);
    }
}

/* The loop is closing: its thread answers what is left, while it can. */
static void queue_close(void *ud)
{
    struct limiter_queue *q = ud;
    struct permitd_error err;

    /* The loop ends only once every deferred request is answered, so
     * nothing should be left but the leases' work; whatever is, is
     * answered. */
    permitd_error_set(&err, PERMITD_EUNAVAILABLE, "permitd is shutting down");
    limiter_loader_cancel(q);           /* the loader wakes this loop no more */
    lease_stop(q, &err);
    queue_drain(q, &err);
}

int limiter_queue_new(struct limiter *l, struct loop *loop, struct limiter_queue **out,
                      struct permitd_error *err)
{
    struct limiter_queue *q = calloc(1, sizeof(*q));
    struct loop_source src = {q, queue_want, queue_ready, queue_flush, queue_close};
    int rc;

    *out = NULL;
    if (q == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "limiter queue: out of memory");
    q->l = l;
    q->loop = loop;
    if (l->deny_size > 0 && (rc = deny_cache_new(l->deny_size, &q->deny, err)) != PERMITD_OK) {
        free(q);
        return rc;
    }
    {
        struct locallease_conf lc = {l->cfg->local_leases_mode, l->cfg->local_lease_ms,
                                     l->cfg->local_lease_permits, l->cfg->local_lease_auto_rate};
        if (lc.mode == 0)
            lc.mode = CONFIG_LOCAL_LEASES_OFF;
        if (lc.lease_ms <= 0)
            lc.lease_ms = 100;
        if (lc.auto_rate <= 0)
            lc.auto_rate = 1000;
        if ((rc = locallease_new(&lc, &q->leases, err)) != PERMITD_OK) {
            deny_cache_free(q->deny);
            free(q);
            return rc;
        }
        snprintf(q->lease_life_s, sizeof(q->lease_life_s), "%" PRId64,
                 locallease_life_ms(q->leases));
    }
    if ((rc = redis_pipe_new(l->redis, &q->pipe, err)) != PERMITD_OK) {
        deny_cache_free(q->deny);
        locallease_free(q->leases);
        free(q);
        return rc;
    }
    if ((rc = loop_attach(loop, &src, err)) != PERMITD_OK) {
        deny_cache_free(q->deny);
        locallease_free(q->leases);
        redis_pipe_free(q->pipe);
        free(q);
        return rc;
    }
    pthread_mutex_lock(&l->queues_lock);
    q->next = l->queues;
    l->queues = q;
    pthread_mutex_unlock(&l->queues_lock);
    *out = q;
    return PERMITD_OK;
}

/* Takes q off the limiter's list, its counts into the freed queues'. */
static void queue_unlist(struct limiter_queue *q)
{
    struct limiter *l = q->l;

    pthread_mutex_lock(&l->queues_lock);
    for (struct limiter_queue **p = &l->queues; *p != NULL; p = &(*p)->next)
        if (*p == q) {
            *p = q->next;
            break;
        }
    atomic_fetch_add(&l->gone.lease_grants, atomic_load(&q->counts.lease_grants));
    atomic_fetch_add(&l->gone.deny_hits, atomic_load(&q->counts.deny_hits));
    atomic_fetch_add(&l->gone.deny_misses, atomic_load(&q->counts.deny_misses));
    pthread_mutex_unlock(&l->queues_lock);
}

void limiter_queue_free(struct limiter_queue *q)
{
    struct permitd_error err;

    if (q == NULL)
        return;
    permitd_error_set(&err, PERMITD_EUNAVAILABLE, "permitd is shutting down");
    limiter_loader_cancel(q);
    queue_drain(q, &err);
    while (q->spare != NULL) {
        struct job *j = q->spare;
        q->spare = j->next;
        free(j);
    }
    queue_unlist(q);
    redis_pipe_free(q->pipe);
    deny_cache_free(q->deny);
    locallease_free(q->leases);
    free(q->batch.calls);
    free(q);
}

void limiter_queue_enqueue(struct limiter_queue *q, struct job *j)
{
    j->next = NULL;
    j->answered = 0;
    if (j->deadline_us != INT64_MAX)
        q->timed++;
    if (q->tail != NULL)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
}


static void queue_decision(struct limiter_queue *q, const struct limiter_request *req, int take,
                           int64_t deadline_us, limiter_done_fn done, void *ud)
{
    struct permitd_error err = {0, ""};
    struct limiter_result res;
    const struct policies_entry *e;
    struct job *j;
    /* before anything is asked: a reset from now on makes what Redis
     * answers for this request not worth remembering */
    uint64_t epoch = atomic_load(&q->l->deny_epoch);
    struct limiter_limits lim;
    struct limiter_decision d = {q->l, req, take, 1, 0, deadline_us, &res, &err, &lim};
    struct locallease_slot *lease_slot = NULL;
    int64_t lease_extra = 0, lease_want = 0;
    int rc, deny_asked = 0;

    /* What the policy's copy refuses is answered here and now; a policy
     * the table lacks is read by the loader while the job is parked. */
    memset(&res, 0, sizeof(res));
    e = policies_get(q->l->policies, req->bucket);
    if (e != NULL && ((rc = limiter_script_admit_entry(&d, e, &e)) != PERMITD_OK || e == NULL)) {
        done(ud, rc, &res, &err);     /* refused, or failure_mode "open" (Redis lost it) */
        return;
    }
    /* A name Redis said a moment ago holds no policy: not asked again. */
    if (e == NULL && limiter_loader_absent_has(q->l, req->bucket)) {
        rc = permitd_error_set(&err, PERMITD_ENOTFOUND, "bucket: no policy named \"%s\"",
                               req->bucket);
        done(ud, rc, &res, &err);
        return;
    }
    /* A hot bucket's lease grants here, without Redis; or this Acquire
     * takes one (locallease.h). */
    if (e != NULL && take == DO_TAKE && q->leases != NULL &&
        (e->algorithm == POLICY_TOKEN_BUCKET || e->algorithm == POLICY_FIXED_WINDOW) &&
        !e->shadow && !lim.matched && lim.action == OVERRIDES_NONE &&
        (req->request_id == NULL || req->request_id[0] == '\0') &&
        (e->local_lease ? e->local_lease : q->l->cfg->local_leases_mode) !=
        CONFIG_LOCAL_LEASES_OFF &&
        !limiter_loader_parked_for(q, req->bucket)) {
        int64_t want = req->permits == 0 ? 1 : req->permits, now = clock_now_us();
        uint64_t lepoch = atomic_load(&q->l->lease_epoch);
        struct locallease_return ret;
        struct locallease_slot *s = locallease_find(q->leases, req->bucket,
                                                    req->key ? req->key : "", now);

        if (s != NULL && s->state == LOCALLEASE_HELD) {
            int granted = locallease_grant(q->leases, s, lim.stamp, lepoch, want, now, &res,
                                           &ret);
            if (s->state != LOCALLEASE_HELD) {         /* it ended */
                if (s->epoch != lepoch || s->stamp != lim.stamp)
                    atomic_fetch_add(&q->l->lease_ended_early, 1);
                if (ret.permits > 0 || ret.p > 0)
                    lease_return(q, &ret);
                else
                    atomic_fetch_sub(&q->l->leases_held, 1);
            }
            if (granted) {
                limiter_count(&q->counts.lease_grants);
                policies_release(e);
                done(ud, PERMITD_OK, &res, &err);
                return;
            }
        }
        /* A bucket the deny cache holds is denied from it, not leased:
         * asking Redis for a lease it would refuse costs a call the cache
         * saves. */
        if (s != NULL && limiter_deny_cacheable(q, take, e, &lim)) {
            deny_asked = 1;
            if (limiter_deny_answer(q, req, &lim, epoch, &res)) {
                policies_release(e);
                done(ud, PERMITD_OK, &res, &err);
                return;
            }
        }
        if (s != NULL && locallease_begin(q->leases, s, e->local_lease ? e->local_lease
                                                        : q->l->cfg->local_leases_mode,
                                          e->algorithm == POLICY_FIXED_WINDOW, e->max_permits,
                                          e->rate, e->local_lease_permits, want, lim.stamp,
                                          lepoch, now, &lease_extra)) {
            char name[POLICY_REDIS_KEY_MAX];
            locallease_set_key(s, name, limiter_script_bucket_key(q->l, req, e, name));
            lease_slot = s;
            lease_want = want;
        }
    }
    /* A bucket just denied is denied here, without Redis. */
    if (e != NULL && lease_slot == NULL && !deny_asked && limiter_deny_cacheable(q, take, e, &lim) &&
                (req->request_id == NULL || req->request_id[0] == '\0') &&
                limiter_deny_answer(q, req, &lim, epoch, &res)) {
        policies_release(e);
        done(ud, PERMITD_OK, &res, &err);
        return;
    }
    if ((j = limiter_queue_job_get(q)) == NULL) {
        /* Out of memory: decide right here. */
        if (lease_slot != NULL)
            locallease_taken(q->leases, lease_slot, 0, 0, NULL);
        policies_release(e);
        rc = limiter_script_decide(&d);
        done(ud, rc, &res, &err);
        return;
    }
    j->entry = e;
    if (e != NULL)
        j->lim = lim;
    j->plan = NULL;
    j->split = 0;
    j->take = take;
    j->req = *req;              /* the caller keeps the strings until done */
    memcpy(j->app, req->app, strlen(req->app) + 1);    /* limiter_check(): a name */
    j->req.app = j->app;
    snprintf(j->request_id, sizeof(j->request_id), "%s", req->request_id ? req->request_id : "");
    j->req.request_id = j->request_id;
    j->lease[0] = '\0';
    j->ls = lease_slot;
    j->want = lease_want;
    if (lease_slot != NULL) {
        /* the lease's take: want + N + P, its id as request id */
        j->take = DO_LEASE;
        j->req.permits = lease_want + lease_extra;
        snprintf(j->request_id, sizeof(j->request_id), "%s", lease_slot->id);
    }
    j->epoch = epoch;
    j->sent_us = 0;
    j->deadline_us = deadline_us;
    j->done = done;
    j->ud = ud;
    if (e == NULL || limiter_loader_parked_for(q, req->bucket))
        limiter_loader_park(q, j);         /* behind the ones of its policy parked before it */
    else
        limiter_queue_enqueue(q, j);
}

void limiter_acquire_queued(struct limiter_queue *q, const struct limiter_request *req,
                            int64_t deadline_us, limiter_done_fn done, void *ud)
{
    queue_decision(q, req, DO_TAKE, deadline_us, done, ud);
}

void limiter_release_queued(struct limiter_queue *q, const struct limiter_request *req,
                            int64_t deadline_us, limiter_done_fn done, void *ud)
{
    queue_decision(q, req, DO_RELEASE, deadline_us, done, ud);
}

void limiter_renew_queued(struct limiter_queue *q, const struct limiter_request *req,
                          int64_t deadline_us, limiter_done_fn done, void *ud)
{
    queue_decision(q, req, DO_RENEW, deadline_us, done, ud);
}

void limiter_peek_queued(struct limiter_queue *q, const struct limiter_request *req,
                         int64_t deadline_us, limiter_done_fn done, void *ud)
{
    queue_decision(q, req, 0, deadline_us, done, ud);
}

void limiter_acquire_batch_queued(struct limiter_queue *q, const struct limiter_request *reqs,
                                  size_t n, int all_or_nothing, int64_t deadline_us,
                                  struct limiter_result *res, struct permitd_error *errs,
                                  limiter_batch_done_fn done, void *ud)
{
    struct permitd_error err = {0, ""};
    struct limiter *l = q->l;
    struct limiter_plan *pl = calloc(1, sizeof(*pl));
    struct job *j = pl ? limiter_queue_job_get(q) : NULL;
    int rc, parked;

    if (j == NULL) {
        /* Out of memory: decide right here. */
        free(pl);
        rc = limiter_acquire_batch(l, reqs, n, all_or_nothing, deadline_us, res, errs, &err);
        done(ud, rc, &err);
        return;
    }
    *pl = (struct limiter_plan){.l = l, .reqs = reqs, .n = n, .all_or_nothing = all_or_nothing,
                        .res = res, .errs = errs, .done = done, .ud = ud,
                        .deadline_us = deadline_us};
    if ((parked = limiter_loader_park_batch(q, j, pl)) == 0)
        return;
    /* Nothing to wait for: what the table lacks is absent, or past the
     * loader's bound (j->load says); -1: no loader, read here. */
    pl->loaded = parked == 1 ? &j->load : NULL;
    rc = limiter_plan_make(pl, &err);
    pl->loaded = NULL;
    free(j->load.p);
    j->load = (struct load){NULL, 0, 0};
    if (rc != PERMITD_OK || pl->ngroups == 0) {
        done(ud, rc, &err);
        limiter_plan_free(pl);
        free(pl);
        limiter_queue_job_put(q, j);
        return;
    }
    j->plan = pl;
    j->deadline_us = deadline_us;
    limiter_queue_enqueue(q, j);
}
