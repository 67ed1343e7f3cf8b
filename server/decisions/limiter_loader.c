/*
 * limiter_loader.c - the loader, and the jobs parked while it reads.
 *
 * A queued Acquire or Peek whose policy is not in the in-memory table
 * (created on another instance, or named wrong) must not hold up its
 * worker's loop while the policy's hash is read: Redis may be slow or
 * down, and the loop serves every other connection of the worker. The job
 * is parked on its queue and the name handed to the loader, a thread of the
 * limiter's with a blocking connection of its own, which reads the hash
 * into the table and wakes the queues that wait (loop_wake()); each loop
 * then admits its parked jobs whose names are read, or answers them.
 *
 * Any client can name any number of policies that do not exist, so what
 * the loader holds is bounded (issue 42: 1,000 fresh names a batch at a
 * 1 ms deadline grew permitd to 436 MB, and Redis was still asked for them
 * long after): one entry per name however many requests wait for it (a
 * struct pend, in a hash table shared by every queue); at most
 * LOADER_PENDING_MAX names waiting or being read, a request for one more
 * answered resource_exhausted (the client's own flood: a 429 says slow
 * down; Redis is not at fault, so not unavailable, which failure_mode
 * "open" might turn into a pass); an entry dropped unread once the last
 * request waiting for it is answered (its deadline passed); and a name
 * Redis said holds no policy answered not_found from memory for
 * LIMITER_ABSENT_LIFE_US (absent_has()), which only a name the table lacks
 * ever asks: the change notice (or the sync) of a policy created since
 * puts it in the table, and it is found at once. */
#define _GNU_SOURCE     /* qsort_r */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/clock.h"
#include "decisions/deny_cache.h"
#include "decisions/limiter.h"
#include "decisions/limiter_plan.h"
#include "decisions/limiter_internal.h"
#include "core/log.h"
#include "core/loop.h"
#include "decisions/policies.h"
#include "stores/cluster.h"
#include "stores/policy.h"

/* FNV-1a of a policy name: the loader's table and the absent names'. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 14695981039346656037ULL;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h | 1;   /* never 0: an empty slot */
}

/* Whether Redis said, less than LIMITER_ABSENT_LIFE_US ago, that no policy
 * is named `name` (the loader read it: limiter_loader_absent_put()). Asked only when the
 * in-memory table lacks the name, so a policy created since, which its
 * change notice (or the sync) puts in the table, is found at once. */
int limiter_loader_absent_has(struct limiter *l, const char *name)
{
    uint64_t h = name_hash(name);
    struct absent *a = &l->absent[h & (LIMITER_ABSENT_SLOTS - 1)];
    int has;

    pthread_mutex_lock(&l->absent_lock);
    has = a->hash == h && a->until_us > clock_now_us() && strcmp(a->name, name) == 0;
    pthread_mutex_unlock(&l->absent_lock);
    return has;
}

void limiter_loader_absent_put(struct limiter *l, const char *name)
{
    uint64_t h = name_hash(name);
    struct absent *a = &l->absent[h & (LIMITER_ABSENT_SLOTS - 1)];

    pthread_mutex_lock(&l->absent_lock);
    a->hash = h;
    a->until_us = clock_now_us() + LIMITER_ABSENT_LIFE_US;
    snprintf(a->name, sizeof(a->name), "%s", name);
    pthread_mutex_unlock(&l->absent_lock);
}

static int pend_by_name(const void *a, const void *b)
{
    return strcmp((*(struct pend *const *)a)->name, (*(struct pend *const *)b)->name);
}

/* The loader's outcome for `name` in x (sorted: limiter_loader_park_batch()), or NULL
 * when x does not hold it. */
const struct pend *limiter_loader_load_find(const struct load *x, const char *name)
{
    struct pend key, *k = &key, **at;

    if (x->n == 0)
        return NULL;
    snprintf(key.name, sizeof(key.name), "%s", name);
    at = bsearch(&k, x->p, x->n, sizeof(*x->p), pend_by_name);
    return at != NULL ? *at : NULL;
}

/* ---- the loader's thread, and parked jobs (see "the loader" above) ---- */

/* Takes p out of the loader's table and frees it. Under ld->lock. */
static void pend_free(struct loader *ld, struct pend *p)
{
    struct pend **link = &ld->chains[p->hash & (LOADER_HASH - 1)];

    while (*link != p)
        link = &(*link)->chain;
    *link = p->chain;
    ld->npend--;
    free(p);
}

/* The loader's entry for `name`, made (and queued to be read) when there is
 * none and fewer than LOADER_PENDING_MAX are held; NULL past that (or out
 * of memory). Under ld->lock. */
struct pend *limiter_loader_pend_get(struct loader *ld, const char *name)
{
    uint64_t h = name_hash(name);
    struct pend **chain = &ld->chains[h & (LOADER_HASH - 1)], *p;

    for (p = *chain; p != NULL; p = p->chain)
        if (p->hash == h && strcmp(p->name, name) == 0)
            return p;
    if (ld->npend >= LOADER_PENDING_MAX || (p = calloc(1, sizeof(*p))) == NULL)
        return NULL;
    p->hash = h;
    p->state = PEND_WAIT;
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->chain = *chain;
    *chain = p;
    ld->npend++;
    p->fifo_prev = ld->tail;
    if (ld->tail != NULL)
        ld->tail->fifo = p;
    else
        ld->head = p;
    ld->tail = p;
    pthread_cond_signal(&ld->wake);
    return p;
}

/* One waiter of p fewer; with none left, one read is freed, and one
 * waiting to be read is dropped unread (its place is free for another
 * name at once). Under ld->lock. */
void limiter_loader_pend_drop(struct loader *ld, struct pend *p)
{
    if (--p->waiters > 0 || p->state == PEND_READING)
        return;
    if (p->state == PEND_WAIT) {
        if (p->fifo_prev != NULL)
            p->fifo_prev->fifo = p->fifo;
        else
            ld->head = p->fifo;
        if (p->fifo != NULL)
            p->fifo->fifo_prev = p->fifo_prev;
        else
            ld->tail = p->fifo_prev;
    }
    pend_free(ld, p);
}

/* q is woken when a name is read, while it has parked jobs. Under
 * ld->lock. */
static void loader_watch(struct loader *ld, struct limiter_queue *q)
{
    if (!q->watched) {
        q->watching = ld->queues;
        ld->queues = q;
        q->watched = 1;
    }
}

/* Drops a parked job's waits (x); its array, an AcquireBatch's, is the
 * caller's to free. */
static void loader_drop(struct limiter_queue *q, struct load *x)
{
    struct loader *ld = q->l->loader;

    if (ld != NULL && x->n > 0) {
        pthread_mutex_lock(&ld->lock);
        for (size_t i = 0; i < x->n; i++)
            limiter_loader_pend_drop(ld, x->p[i]);
        pthread_mutex_unlock(&ld->lock);
    }
    x->n = 0;
}

static void *loader_run(void *arg)
{
    struct loader *ld = arg;

    pthread_mutex_lock(&ld->lock);
    for (;;) {
        struct pend *x;
        struct permitd_error err = {0, ""};
        int rc, found = 0;

        while (!ld->stopping && ld->head == NULL)
            pthread_cond_wait(&ld->wake, &ld->lock);
        if (ld->stopping)
            break;
        x = ld->head;
        ld->head = x->fifo;
        if (ld->head != NULL)
            ld->head->fifo_prev = NULL;
        else
            ld->tail = NULL;
        /* Waited for: limiter_loader_pend_drop() frees one that is not. */
        x->state = PEND_READING;
        if (x->until_us <= clock_now_us()) {
            /* Every request waiting for it is past its deadline, though
             * its loop has not answered it yet (a busy loop): not read. */
            rc = permitd_error_set(&err, PERMITD_EDEADLINE, "deadline exceeded before reading "
                                   "policy \"%s\" from redis", x->name);
        } else {
            pthread_mutex_unlock(&ld->lock);
            /* Bounded by --redis-timeout-ms (a parked job's own deadline
             * ends that job alone: queue_expire()). */
            rc = policies_reload(ld->l->policies, x->name, INT64_MAX, &found, &err);
            if (rc == PERMITD_OK && !found)
                limiter_loader_absent_put(ld->l, x->name);
            pthread_mutex_lock(&ld->lock);
        }
        x->rc = rc;
        x->err = err;
        x->state = PEND_DONE;
        if (x->waiters == 0)
            pend_free(ld, x);
        atomic_fetch_add(&ld->reads, 1);
        for (struct limiter_queue *q = ld->queues; q != NULL; q = q->watching)
            loop_wake(q->loop);
    }
    pthread_mutex_unlock(&ld->lock);
    return NULL;
}

void limiter_loader_free(struct loader *ld)
{
    if (ld == NULL)
        return;
    pthread_mutex_lock(&ld->lock);
    ld->stopping = 1;
    pthread_cond_signal(&ld->wake);
    pthread_mutex_unlock(&ld->lock);
    pthread_join(ld->thread, NULL);
    for (size_t i = 0; i < LOADER_HASH; i++)
        while (ld->chains[i] != NULL)
            pend_free(ld, ld->chains[i]);
    pthread_cond_destroy(&ld->wake);
    pthread_mutex_destroy(&ld->lock);
    free(ld);
}

/* The limiter's loader, started on first use; NULL when out of memory or
 * no thread could start. */
static struct loader *loader_get(struct limiter *l)
{
    struct loader *ld;

    pthread_mutex_lock(&l->loader_lock);
    if (l->loader == NULL && (ld = calloc(1, sizeof(*ld))) != NULL) {
        ld->l = l;
        pthread_mutex_init(&ld->lock, NULL);
        pthread_cond_init(&ld->wake, NULL);
        if (pthread_create(&ld->thread, NULL, loader_run, ld) == 0) {
            l->loader = ld;
        } else {
            pthread_cond_destroy(&ld->wake);
            pthread_mutex_destroy(&ld->lock);
            free(ld);
        }
    }
    ld = l->loader;
    pthread_mutex_unlock(&l->loader_lock);
    return ld;
}

/* Takes q off the loader's list: after this the loader never touches q
 * (its parked jobs' waits are dropped as they are answered). */
void limiter_loader_cancel(struct limiter_queue *q)
{
    struct loader *ld = q->l->loader;

    if (ld == NULL)
        return;
    pthread_mutex_lock(&ld->lock);
    for (struct limiter_queue **link = &ld->queues; *link != NULL; link = &(*link)->watching)
        if (*link == q) {
            *link = q->watching;
            break;
        }
    q->watched = 0;
    pthread_mutex_unlock(&ld->lock);
}

/* Answers a parked job (never sent), drops its wait and recycles it. */
void limiter_loader_parked_end(struct limiter_queue *q, struct job *j, int rc,
                               const struct limiter_result *res, const struct permitd_error *err)
{
    if (j->deadline_us != INT64_MAX)
        q->timed--;
    loader_drop(q, &j->load);
    j->done(j->ud, rc, res, err);
    limiter_queue_job_put(q, j);
}

/* A parked AcquireBatch answered (its caller called already): its waits
 * dropped, its plan freed, the job recycled. */
void limiter_loader_parked_batch_end(struct limiter_queue *q, struct job *j)
{
    struct pend **p = j->load.p;

    loader_drop(q, &j->load);
    free(p);
    j->load.p = NULL;
    limiter_plan_free(j->plan);
    free(j->plan);
    limiter_queue_job_put(q, j);
}

/* Whether a job of policy `bucket` is parked. */
int limiter_loader_parked_for(const struct limiter_queue *q, const char *bucket)
{
    for (const struct job *p = q->parked; p != NULL; p = p->next)
        if (strcmp(p->req.bucket, bucket) == 0)
            return 1;
    return 0;
}

/* Parks j until the loader has read its policy (behind the jobs of the
 * same policy parked before it, which leave in the order they came); one
 * name past LOADER_PENDING_MAX is answered resource_exhausted. */
void limiter_loader_park(struct limiter_queue *q, struct job *j)
{
    struct loader *ld = loader_get(q->l);
    struct job **link = &q->parked;
    struct permitd_error err;
    struct limiter_result res;
    struct pend *p = NULL;

    policies_release(j->entry);
    j->entry = NULL;
    j->load = (struct load){&j->one, 0, 0};
    if (ld != NULL) {
        pthread_mutex_lock(&ld->lock);
        if ((p = limiter_loader_pend_get(ld, j->req.bucket)) != NULL) {
            p->waiters++;
            if (j->deadline_us > p->until_us)
                p->until_us = j->deadline_us;
            loader_watch(ld, q);
            if (p->state == PEND_DONE)
                q->reads = UINT64_MAX;  /* read already: look at the end of this pass */
        }
        pthread_mutex_unlock(&ld->lock);
    }
    memset(&res, 0, sizeof(res));
    if (p == NULL) {
        if (ld == NULL)
            permitd_error_set(&err, PERMITD_EINTERNAL, "out of memory");
        else
            permitd_error_set(&err, PERMITD_EEXHAUSTED, "bucket: policy \"%s\" is not in "
                              "memory, and %d names are being looked up in redis already; "
                              "retry later", j->req.bucket, LOADER_PENDING_MAX);
        j->done(j->ud, err.code, &res, &err);
        limiter_queue_job_put(q, j);
        return;
    }
    j->one = p;
    j->load.n = 1;
    while (*link != NULL)
        link = &(*link)->next;
    j->next = NULL;
    *link = j;
    if (j->deadline_us != INT64_MAX)
        q->timed++;
}

/* Whether every name x waits for is read. Under the loader's lock. */
static int load_done(const struct load *x)
{
    for (size_t i = 0; i < x->n; i++)
        if (x->p[i]->state != PEND_DONE)
            return 0;
    return 1;
}

/* A parked job whose policy the loader has read (j->one, PEND_DONE): it is
 * admitted (queued for the next batch) or answered (no such policy, Redis
 * unreachable: as a decision would have been). */
static void unpark(struct limiter_queue *q, struct job *j)
{
    const struct pend *x = j->one;
    const struct policies_entry *e = policies_get(q->l->policies, j->req.bucket);
    struct permitd_error err = {0, ""};
    struct limiter_result res;
    int rc;

    memset(&res, 0, sizeof(res));
    if (e != NULL) {
        struct limiter_decision d = {q->l, &j->req, j->take, 1, 0, j->deadline_us, &res, &err,
                                     &j->lim};
        rc = limiter_script_admit_entry(&d, e, &j->entry);
        if (rc == PERMITD_OK && j->entry != NULL) {
            loader_drop(q, &j->load);
            if (j->deadline_us != INT64_MAX)
                q->timed--;         /* limiter_queue_enqueue() counts it again */
            limiter_queue_enqueue(q, j);
            return;
        }
    } else if (x->rc != PERMITD_OK) {
        err = x->err;
        rc = x->rc;
        if (rc == PERMITD_EUNAVAILABLE && j->take == DO_TAKE &&
            limiter_script_open_pass(q->l, &j->req, &res)) {
            rc = PERMITD_OK;
            err = (struct permitd_error){0, ""};
        }
    } else {
        rc = permitd_error_set(&err, PERMITD_ENOTFOUND, "bucket: no policy named \"%s\"",
                               j->req.bucket);
    }
    limiter_loader_parked_end(q, j, rc, &res, &err);
}

/* An AcquireBatch whose policies the loader has read: its plan is made
 * now, from the table as it is (a policy still missing is not read again:
 * j->load says why), and queued, or answered. */
static void unpark_batch(struct limiter_queue *q, struct job *j)
{
    struct limiter_plan *pl = j->plan;
    struct permitd_error err = {0, ""};
    int rc;

    if (j->deadline_us != INT64_MAX)
        q->timed--;
    if (j->deadline_us <= clock_now_us()) {
        permitd_error_set(&err, PERMITD_EDEADLINE, "deadline exceeded reading policies from redis");
        pl->done(pl->ud, PERMITD_EDEADLINE, &err);
        limiter_loader_parked_batch_end(q, j);
        return;
    }
    pl->loaded = &j->load;
    rc = limiter_plan_make(pl, &err);
    pl->loaded = NULL;
    if (rc == PERMITD_OK && pl->ngroups > 0) {
        struct pend **p = j->load.p;
        loader_drop(q, &j->load);
        free(p);
        j->load.p = NULL;
        j->first = 0;
        limiter_queue_enqueue(q, j);
        return;
    }
    pl->done(pl->ud, rc, &err);
    limiter_loader_parked_batch_end(q, j);
}

/* The parked jobs whose names the loader has read, admitted or answered,
 * on q's loop; looked for only when the loader has read a name since the
 * last look. */
void limiter_loader_queue_loaded(struct limiter_queue *q)
{
    struct loader *ld = q->l->loader;
    struct job *ready = NULL, **tail = &ready, **link;
    uint64_t reads;

    if (ld == NULL || (q->parked == NULL && q->parked_batches == NULL))
        return;
    if ((reads = atomic_load(&ld->reads)) == q->reads)
        return;
    q->reads = reads;
    /* The jobs ready, in the order they were parked (a policy's leave in
     * the order they came), taken off under the lock, handled after it. */
    pthread_mutex_lock(&ld->lock);
    for (int batches = 0; batches < 2; batches++)
        for (link = batches ? &q->parked_batches : &q->parked; *link != NULL;) {
            struct job *j = *link;
            if (!load_done(&j->load)) {
                link = &j->next;
                continue;
            }
            *link = j->next;
            j->next = NULL;
            *tail = j;
            tail = &j->next;
        }
    pthread_mutex_unlock(&ld->lock);
    while (ready != NULL) {
        struct job *j = ready;
        ready = j->next;
        if (j->plan != NULL)
            unpark_batch(q, j);
        else
            unpark(q, j);
    }
}

/* A batch naming policies the table lacks is parked while the loader reads
 * them (as an Acquire's is: a worker's loop never waits on Redis for a
 * policy), each name counted on once (j->load, sorted by name for
 * limiter_loader_load_find()); names Redis said a moment ago hold no policy are not read
 * again, and names past LOADER_PENDING_MAX are not read (j->load.over:
 * their items answer resource_exhausted). 0: parked; 1: not parked, the
 * plan is to be made now from j->load (nothing it waits for); -1: no
 * loader (no memory, no thread), the plan reads the names itself. */
int limiter_loader_park_batch(struct limiter_queue *q, struct job *j, struct limiter_plan *pl)
{
    struct loader *ld;
    size_t n = pl->n <= LIMITER_BATCH_MAX ? pl->n : 0, want = 0;
    int done = 1;

    j->load = (struct load){NULL, 0, 0};
    for (size_t i = 0; i < n; i++) {
        const struct policies_entry *e;
        if (policy_check_name("bucket", pl->reqs[i].bucket, NULL) != PERMITD_OK)
            continue;
        if ((e = policies_get(q->l->policies, pl->reqs[i].bucket)) != NULL)
            policies_release(e);
        else if (!limiter_loader_absent_has(q->l, pl->reqs[i].bucket))
            want++;
    }
    if (want == 0)
        return 1;
    if ((ld = loader_get(q->l)) == NULL ||
        (j->load.p = malloc(want * sizeof(*j->load.p))) == NULL)
        return -1;
    pthread_mutex_lock(&ld->lock);
    for (size_t i = 0; i < n && j->load.n < want; i++) {
        const char *name = pl->reqs[i].bucket;
        const struct policies_entry *e;
        struct pend *p;
        if (policy_check_name("bucket", name, NULL) != PERMITD_OK)
            continue;
        if ((e = policies_get(q->l->policies, name)) != NULL) {
            policies_release(e);
            continue;
        }
        if (limiter_loader_absent_has(q->l, name))
            continue;
        if ((p = limiter_loader_pend_get(ld, name)) == NULL) {
            j->load.over++;
            continue;
        }
        if (p->mark == j)       /* named twice in this batch */
            continue;
        p->mark = j;
        p->waiters++;
        if (pl->deadline_us > p->until_us)
            p->until_us = pl->deadline_us;
        done &= p->state == PEND_DONE;
        j->load.p[j->load.n++] = p;
    }
    for (size_t k = 0; k < j->load.n; k++)
        j->load.p[k]->mark = NULL;
    if (j->load.n > 0) {
        loader_watch(ld, q);
        if (done)
            q->reads = UINT64_MAX;      /* read already: look at the end of this pass */
    }
    pthread_mutex_unlock(&ld->lock);
    if (j->load.n == 0) {
        free(j->load.p);
        j->load.p = NULL;
        return 1;
    }
    qsort(j->load.p, j->load.n, sizeof(*j->load.p), pend_by_name);
    j->plan = pl;
    j->deadline_us = pl->deadline_us;
    j->answered = 0;
    j->next = q->parked_batches;
    q->parked_batches = j;
    if (j->deadline_us != INT64_MAX)
        q->timed++;
    return 0;
}
