/*
 * service.c - the decision service (see service.h): a decoded take
 * checked, queued and counted once, for every door.
 *
 * The doors used to carry a pending record and a decided() each, and the
 * copies drifted (only Connect's counted hot keys). Here is the one
 * record (struct service_take, struct service_batch, in the door's
 * storage) and the one place a decision is counted before the door sees
 * it: a door cannot answer a take without it having been counted.
 *
 * What takes blocking Redis round trips (Reserve, Commit, Cancel, an
 * all_or_nothing batch across slots) runs on the reservations pool
 * (core/pool.h), each thread on its own Redis connections, and comes back
 * to the worker's loop through its inbox: a slow Redis or a flood of
 * reservations never stalls the Acquires a worker serves. The calls the
 * pool refuses, full, are counted here (atomically, read by /metrics
 * through service_reservations_load()), so a pool too small shows before
 * its callers' errors do.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decisions/service.h"
#include "decisions/hotkeys.h"
#include "decisions/traffic.h"
#include "core/clock.h"
#include "core/pool.h"
#include "core/utf8.h"

struct service {
    struct limiter *limiter;
    struct stats *stats;            /* NULL: nothing counted */
    struct appkeys *keys;           /* NULL: keys not checked */
    struct hotkeys *hot;            /* NULL: hot keys not counted */
    struct traffic *traffic;        /* NULL: no traffic history (issue 39) */
    struct pool *rsv;               /* Reserve, Commit, Cancel; NULL: not started */
    atomic_uint_fast64_t rsv_refused;   /* calls rsv refused, full (/metrics) */
};

struct service_worker {
    struct service *s;
    struct limiter_queue *queue;
    struct hotkeys_worker *hot;     /* NULL without hot keys */
    struct pool_inbox *rsv;         /* the way back from the reservations pool */
};

int service_new(struct limiter *limiter, struct stats *stats, struct service **out,
                struct permitd_error *err)
{
    struct service *s = calloc(1, sizeof(*s));

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->limiter = limiter;
    s->stats = stats;
    *out = s;
    return PERMITD_OK;
}

void service_free(struct service *s)
{
    if (s == NULL)
        return;
    pool_free(s->rsv);      /* before redis_free(): its threads' connections close as they end */
    free(s);
}

int service_start_reservations(struct service *s, int workers, int queue,
                               struct permitd_error *err)
{
    return pool_new(workers, queue, "reservations pool", &s->rsv, err);
}

int service_reservations_load(struct service *s, struct service_rsv_load *out)
{
    struct pool_load l;

    memset(out, 0, sizeof(*out));
    if (s == NULL || s->rsv == NULL)
        return -1;
    pool_load(s->rsv, &l);
    *out = (struct service_rsv_load){l.workers, l.queue, l.busy, l.waiting,
                                     atomic_load_explicit(&s->rsv_refused,
                                                          memory_order_relaxed)};
    return 0;
}

void service_set_appkeys(struct service *s, struct appkeys *keys)
{
    s->keys = keys;
}

void service_set_traffic(struct service *s, struct traffic *traffic)
{
    s->traffic = traffic;
}

void service_set_hotkeys(struct service *s, struct hotkeys *hot)
{
    s->hot = hot;
}

int service_worker_open(struct service *s, struct loop *loop, struct service_worker **out,
                        struct permitd_error *err)
{
    struct service_worker *w = calloc(1, sizeof(*w));
    int rc;

    *out = NULL;
    if (w == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    w->s = s;
    if ((rc = limiter_queue_new(s->limiter, loop, &w->queue, err)) != PERMITD_OK ||
        (s->rsv != NULL && (rc = pool_inbox_new(s->rsv, loop, &w->rsv, err)) != PERMITD_OK) ||
        (s->hot != NULL && (rc = hotkeys_worker_new(s->hot, &w->hot, err)) != PERMITD_OK)) {
        service_worker_close(w);
        return rc;
    }
    *out = w;
    return PERMITD_OK;
}

void service_worker_close(struct service_worker *w)
{
    if (w == NULL)
        return;
    limiter_queue_free(w->queue);
    hotkeys_worker_free(w->hot);
    free(w);
}

struct limiter_queue *service_worker_queue(struct service_worker *w)
{
    return w->queue;
}

/* ---- counting: every door's answer goes through here ---- */

/* An Acquire's (or a batch item's) error for /metrics, under its policy
 * when that is a real one. invalid_argument (negative permits on a real
 * policy, as on a made-up name) and not_found are decided before Redis is
 * asked, so only the in-memory policy table (a policy this instance
 * holds) or an earlier decision (stats.h) can say the policy is real; any
 * other error came from the script, Redis or the policy itself. Made-up
 * names stay out of the labels. */
static void count_error(struct service *s, const char *bucket, const char *app, int code)
{
    int real = code != PERMITD_EINVAL && code != PERMITD_ENOTFOUND;

    if (s->stats == NULL && s->traffic == NULL)
        return;
    if (!real)
        real = limiter_known_policy(s->limiter, bucket);
    if (s->stats != NULL)
        stats_record_error(s->stats, bucket, code, real);
    if (real)
        traffic_record(s->traffic, bucket, app, TRAFFIC_ERRORS);
}

/* A decided take: in /metrics and the fleet's totals (a shadow policy's
 * would-be denial apart from both its allowed and its denied, an open
 * pass apart from all three), and its key on the hot-keys card. */
static void count_decision(struct service *s, struct hotkeys_worker *hot,
                           const struct limiter_request *lr, const struct limiter_result *r)
{
    if (s->stats != NULL) {
        if (r->open_pass)
            stats_record_pass(s->stats, lr->bucket);
        else
            stats_record(s->stats, lr->bucket,
                         r->shadow    ? STATS_RESULT_SHADOW_DENIED
                         : r->allowed ? STATS_RESULT_ALLOWED
                                      : STATS_RESULT_DENIED);
    }
    traffic_record_take(s->traffic, lr->bucket, lr->app,
                        r->open_pass ? TRAFFIC_PASSES
                        : r->shadow  ? TRAFFIC_SHADOW_DENIED
                        : r->allowed ? TRAFFIC_ALLOWED
                                     : TRAFFIC_DENIED,
                        !r->open_pass && lr->key != NULL && lr->key[0] != '\0');
    hotkeys_record(hot, lr->bucket, lr->key,
                   r->allowed && !r->shadow ? HOTKEYS_ALLOWED : HOTKEYS_DENIED);
}

/* ---- the caller and the request ---- */

int service_authorize(struct service *s, struct service_caller *c, const char *app,
                      struct permitd_error *err)
{
    struct timespec now;

    c->app[0] = '\0';
    c->key_prefix[0] = '\0';
    if (s->keys == NULL)
        return PERMITD_OK;
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
    return appkeys_check(s->keys, c->authorization, app, (int64_t)now.tv_sec, c->app,
                         c->key_prefix, NULL, err);
}

/* The strings of a take, in the order its message declares them, so the
 * error names the field Connect's codecs would (core/utf8.h). */
static int check_utf8(const struct limiter_request *lr, const char *prefix,
                      struct permitd_error *err)
{
    const char *names[5] = {"bucket", "app", "key", "request_id", "lease_id"};
    const char *values[5] = {lr->bucket, lr->app, lr->key, lr->request_id, lr->lease_id};
    char path[64];

    for (int i = 0; i < 5; i++) {
        if (values[i] == NULL || utf8_valid(values[i]))
            continue;
        snprintf(path, sizeof(path), "%s%s", prefix, names[i]);    /* only to name it */
        if (utf8_check_string(path, values[i], err) != PERMITD_OK)
            return PERMITD_EINVAL;
    }
    return PERMITD_OK;
}

int service_check(struct service *s, enum service_kind kind, const struct limiter_request *lr,
                  const char *prefix, struct permitd_error *err)
{
    int rc = check_utf8(lr, prefix, err);

    if (rc == PERMITD_OK)
        rc = kind == SERVICE_RELEASE || kind == SERVICE_RENEW ? limiter_check_lease(lr, err)
                                                               : limiter_check(lr, err);
    if (rc != PERMITD_OK && kind == SERVICE_ACQUIRE)
        count_error(s, lr->bucket, lr->app, rc);
    return rc;
}

/* ---- a single take ---- */

/* s into dst (size bytes), cut to fit: limiter_check() has bounded every
 * field already. */
static void copy_field(char *dst, size_t size, const char *s)
{
    size_t n = strnlen(s ? s : "", size - 1);

    memcpy(dst, s ? s : "", n);
    dst[n] = '\0';
}

/* The limiter's answer: counted (an Acquire's latency and decision or
 * error; every decided take's key), then the door's. */
static void decided(void *ud, int rc, const struct limiter_result *r,
                    const struct permitd_error *err)
{
    struct service_take *t = ud;
    struct service *s = t->s;

    if (t->kind == SERVICE_ACQUIRE) {
        if (s->stats != NULL)
            stats_observe(s->stats, clock_now_us() - t->t0);
        if (rc != PERMITD_OK)
            count_error(s, t->bucket, t->app, rc);
        else
            count_decision(s, t->hot, &t->lr, r);
    }
    t->done(t->ud, rc, r, err);
}

int service_take(struct service_worker *w, struct service_take *t, enum service_kind kind,
                 const struct limiter_request *lr, int64_t deadline_us, service_take_fn done,
                 void *ud, struct permitd_error *err)
{
    int rc;

    if ((rc = service_check(w->s, kind, lr, "", err)) != PERMITD_OK)
        return rc;
    t->s = w->s;
    t->hot = w->hot;
    t->kind = kind;
    copy_field(t->bucket, sizeof(t->bucket), lr->bucket);
    copy_field(t->app, sizeof(t->app), lr->app);
    copy_field(t->key, sizeof(t->key), lr->key);
    copy_field(t->request_id, sizeof(t->request_id), lr->request_id);
    copy_field(t->lease_id, sizeof(t->lease_id), lr->lease_id);
    t->lr = (struct limiter_request){t->bucket, t->app, t->key, lr->permits, t->request_id,
                                     t->lease_id, lr->own};   /* own: the door's, lasting as t */
    t->deadline_us = deadline_us;
    t->done = done;
    t->ud = ud;
    return PERMITD_OK;
}

void service_queue(struct service_worker *w, struct service_take *t)
{
    t->t0 = clock_now_us();
    switch (t->kind) {
    case SERVICE_PEEK:
        limiter_peek_queued(w->queue, &t->lr, t->deadline_us, decided, t);
        break;
    case SERVICE_RELEASE:
        limiter_release_queued(w->queue, &t->lr, t->deadline_us, decided, t);
        break;
    case SERVICE_RENEW:
        limiter_renew_queued(w->queue, &t->lr, t->deadline_us, decided, t);
        break;
    default:
        limiter_acquire_queued(w->queue, &t->lr, t->deadline_us, decided, t);
    }
}

int service_decide(struct service_worker *w, struct service_take *t, enum service_kind kind,
                   struct service_caller *c, const struct limiter_request *lr,
                   int64_t deadline_us, service_take_fn done, void *ud,
                   struct permitd_error *err)
{
    struct limiter_request asked = *lr;
    int rc;

    /* What Connect's codecs refuse is refused before the key is looked
     * at, on every door alike. */
    c->app[0] = '\0';
    c->key_prefix[0] = '\0';
    if ((rc = check_utf8(lr, "", err)) != PERMITD_OK ||
        (rc = service_authorize(w->s, c, lr->app, err)) != PERMITD_OK)
        return rc;
    if (c->app[0] != '\0')
        asked.app = c->app;
    return service_take(w, t, kind, &asked, deadline_us, done, ud, err);
}

/* ---- a batch ---- */

int service_batch_authorize(struct service *s, struct service_caller *c,
                            const Permit__V1__AcquireRequest *const *items, size_t n,
                            struct permitd_error *err)
{
    char prefix[32];
    int rc;

    c->app[0] = '\0';
    c->key_prefix[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        struct limiter_request lr = {items[i]->bucket, items[i]->app, items[i]->key, 0,
                                     items[i]->request_id, NULL, NULL};
        snprintf(prefix, sizeof(prefix), "requests[%zu].", i);
        if (check_utf8(&lr, prefix, err) != PERMITD_OK)
            return PERMITD_EINVAL;
    }
    if (n > LIMITER_BATCH_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "requests: %zu items, the limit is %d",
                                 n, LIMITER_BATCH_MAX);
    /* One key for the whole batch; each item's app must be its app. */
    if ((rc = service_authorize(s, c, "", err)) != PERMITD_OK)
        return rc;
    for (size_t i = 0; s->keys != NULL && appkeys_enforced(s->keys) && i < n; i++)
        if (items[i]->app[0] != '\0' && strcmp(items[i]->app, c->app) != 0) {
            appkeys_refused(s->keys, APPKEYS_APP_MISMATCH);
            return permitd_error_set(err, PERMITD_EPERM,
                                     "requests[%zu].app: \"%.128s\" is not the app of the API "
                                     "key (\"%s\"); send \"%s\" or leave it empty", i,
                                     items[i]->app, c->app, c->app);
        }
    return PERMITD_OK;
}

static void batch_finish(struct service_batch *b, int rc, const struct permitd_error *err)
{
    struct service *s = b->s;

    if (b->observe && s->stats != NULL)
        stats_observe(s->stats, clock_now_us() - b->t0);
    for (size_t i = 0; rc == PERMITD_OK && i < b->n; i++) {
        if (b->errs[i].code != PERMITD_OK)
            count_error(s, b->reqs[i].bucket, b->reqs[i].app, b->errs[i].code);
        else
            count_decision(s, b->w->hot, &b->reqs[i], &b->res[i]);
    }
    b->done(b->ud, rc, err);
}

/* An all_or_nothing batch across slots, on a reservations thread: held
 * slot by slot (blocking round trips), unless its deadline passed while it
 * waited for the thread. */
static void batch_held_run(struct pool_job *pj)
{
    struct service_batch *b = (struct service_batch *)(void *)((char *)pj -
                                                               offsetof(struct service_batch, pj));

    b->held_err = (struct permitd_error){PERMITD_OK, ""};
    if (clock_now_us() >= b->deadline_us)
        b->held_rc = permitd_error_set(&b->held_err, PERMITD_EDEADLINE, "deadline exceeded "
                                       "waiting for a reservations thread");
    else
        b->held_rc = limiter_reserve_batch_all(b->s->limiter, b->reqs, b->n, b->deadline_us,
                                               b->res, b->errs, &b->held_err);
}

/* Back on the worker's loop: counted and answered. */
static void batch_held_done(struct pool_job *pj)
{
    struct service_batch *b = (struct service_batch *)(void *)((char *)pj -
                                                               offsetof(struct service_batch, pj));

    batch_finish(b, b->held_rc, &b->held_err);
}

static void batch_decided(void *ud, int rc, const struct permitd_error *err)
{
    struct service_batch *b = ud;
    struct permitd_error why = {PERMITD_OK, ""};
    struct pool_load seen;
    int unreachable = 0;

    if (b->mode == SERVICE_BATCH_ALL_OR_EACH) {
        for (size_t i = 0; rc == PERMITD_OK && i < b->n; i++)
            unreachable |= b->errs[i].code == PERMITD_EUNAVAILABLE;
        unreachable |= rc == PERMITD_EUNAVAILABLE || rc == PERMITD_EDEADLINE;
        if (rc == PERMITD_EPRECONDITION || unreachable) {
            /* Not one script's worth (slots or algorithms differ), or Redis
             * unreachable, which all_or_nothing answers unavailable whatever
             * the policies' failure_mode: each item alone, each policy's
             * failure_mode applying. */
            b->mode = SERVICE_BATCH_EACH;
            limiter_acquire_batch_queued(b->w->queue, b->reqs, b->n, 0, b->deadline_us, b->res,
                                         b->errs, batch_decided, b);
            return;
        }
    }
    if (b->mode == SERVICE_BATCH_ALL && rc == PERMITD_EPRECONDITION) {
        /* Not one script's worth (slots or algorithms differ): held slot by
         * slot, the holds given back if one is refused (issue 38,
         * limiter_reserve.h), on the reservations pool, never on this
         * worker's loop; a full pool refuses it at once. Its own refusal
         * (too many items, request ids) says why instead. */
        if (b->w->rsv == NULL) {
            rc = limiter_reserve_batch_all(b->s->limiter, b->reqs, b->n, b->deadline_us, b->res,
                                           b->errs, &why);
            batch_finish(b, rc, &why);
            return;
        }
        b->pj = (struct pool_job){batch_held_run, batch_held_done, NULL, NULL, NULL};
        if (pool_submit(b->s->rsv, b->w->rsv, &b->pj, &seen) == PERMITD_OK)
            return;
        atomic_fetch_add_explicit(&b->s->rsv_refused, 1, memory_order_relaxed);
        rc = permitd_error_set(&why, PERMITD_EEXHAUSTED, "all_or_nothing across slots: all %u "
                               "reservations threads busy and %u calls waiting "
                               "(--reserve-queue); try again", seen.workers, seen.waiting);
        err = &why;
    }
    batch_finish(b, rc, err);
}

void service_batch(struct service_worker *w, struct service_batch *b, enum service_batch_mode mode,
                   int64_t deadline_us, int observe, service_batch_fn done, void *ud)
{
    b->s = w->s;
    b->w = w;
    b->mode = mode;
    b->deadline_us = deadline_us;
    b->t0 = clock_now_us();
    b->observe = observe;
    b->done = done;
    b->ud = ud;
    for (size_t i = 0; i < b->n; i++)
        b->errs[i] = (struct permitd_error){PERMITD_OK, ""};
    limiter_acquire_batch_queued(w->queue, b->reqs, b->n, mode != SERVICE_BATCH_EACH,
                                 deadline_us, b->res, b->errs, batch_decided, b);
}

/* ---- reservations (issue 38) ---- */

/* One Reserve, Commit or Cancel on its way through the reservations pool:
 * malloc'd here, with copies of the request's strings and numbers after
 * it (the door's request may be freed meanwhile); freed once done has
 * answered, or by the pool's drop. */
struct rsv_job {
    struct pool_job pj;             /* first: the pool hands this back */
    struct limiter *limiter;
    int64_t deadline_us;
    const char *app, *request_id, *id;  /* into strings[] */
    int64_t ttl_ms;
    int64_t *actual;                /* Commit: n_actual numbers after the strings; else NULL */
    size_t n_actual;
    struct limiter_reserve_item items[LIMITER_RESERVE_ITEMS_MAX];
    struct service_reservation r;
    int rc;
    struct permitd_error err;
    service_reservation_fn done;
    void *ud;
    char strings[];
};

/* On a pool thread: the limiter's blocking calls, on this thread's own
 * Redis connection; nothing when the caller's deadline passed while the
 * call waited for a thread (its door has answered nobody yet, but the
 * caller has stopped waiting). */
static void rsv_run(struct pool_job *pj)
{
    struct rsv_job *j = (struct rsv_job *)pj;

    if (clock_now_us() >= j->deadline_us) {
        j->rc = permitd_error_set(&j->err, PERMITD_EDEADLINE, "deadline exceeded waiting for "
                                  "a reservations thread");
        return;
    }
    if (j->r.kind == SERVICE_RESERVE)
        j->rc = limiter_reserve_open(j->limiter, j->app, j->items, j->r.n, j->ttl_ms,
                                     j->request_id, j->deadline_us, &j->r.reserved, &j->err);
    else
        j->rc = limiter_reserve_close(j->limiter, j->app, j->id, j->actual, j->n_actual,
                                      j->deadline_us, &j->r.settled, &j->err);
}

/* Back on the worker's loop thread: the door answers. */
static void rsv_done(struct pool_job *pj)
{
    struct rsv_job *j = (struct rsv_job *)pj;

    if (j->rc == PERMITD_OK)
        j->err = (struct permitd_error){PERMITD_OK, ""};
    j->done(j->ud, j->rc, &j->r, &j->err);
    free(j);
}

static void rsv_drop(struct pool_job *pj)
{
    free(pj);
}

/* A job with room for `strings` bytes and n_actual numbers. */
static struct rsv_job *rsv_job_new(struct service_worker *w, enum service_rsv_kind kind,
                                   size_t strings, size_t n_actual, int64_t deadline_us,
                                   service_reservation_fn done, void *ud)
{
    size_t head = (sizeof(struct rsv_job) + strings + 7) & ~(size_t)7;
    struct rsv_job *j = calloc(1, head + n_actual * sizeof(int64_t));

    if (j == NULL)
        return NULL;
    j->pj = (struct pool_job){rsv_run, rsv_done, rsv_drop, NULL, NULL};
    j->limiter = w->s->limiter;
    j->r.kind = kind;
    j->r.items = j->items;
    j->deadline_us = deadline_us;
    j->done = done;
    j->ud = ud;
    if (n_actual > 0)
        j->actual = (int64_t *)(void *)((char *)j + head);
    j->n_actual = n_actual;
    return j;
}

/* s copied to *at, which moves past it. */
static const char *rsv_copy(char **at, const char *s)
{
    size_t len = strlen(s) + 1;
    char *out = *at;

    memcpy(out, s, len);
    *at += len;
    return out;
}

/* j queued on the pool, or freed and the refusal said (the pool full:
 * resource_exhausted at once, the loop never waits). */
static int rsv_submit(struct service_worker *w, struct rsv_job *j, struct permitd_error *err)
{
    struct pool_load seen;

    if (w->rsv == NULL) {
        free(j);
        return permitd_error_set(err, PERMITD_EINTERNAL, "the reservations pool is not started");
    }
    if (pool_submit(w->s->rsv, w->rsv, &j->pj, &seen) != PERMITD_OK) {
        free(j);
        atomic_fetch_add_explicit(&w->s->rsv_refused, 1, memory_order_relaxed);
        return permitd_error_set(err, PERMITD_EEXHAUSTED, "reservations: all %u threads busy "
                                 "and %u calls waiting (--reserve-queue); try again",
                                 seen.workers, seen.waiting);
    }
    return PERMITD_OK;
}

/* The caller's key for a reservation call of app ("" the key's), and the
 * app it is made for. */
static int reserve_caller(struct service *s, struct service_caller *c, const char *app,
                          const char **who, struct permitd_error *err)
{
    int rc;

    if (utf8_check_string("app", app, err) != PERMITD_OK)
        return PERMITD_EINVAL;
    if ((rc = service_authorize(s, c, app, err)) != PERMITD_OK)
        return rc;
    *who = c->app[0] ? c->app : app;
    return PERMITD_OK;
}

int service_reserve(struct service_worker *w, struct service_caller *c,
                    const Permit__V1__ReserveRequest *rq, int64_t deadline_us,
                    service_reservation_fn done, void *ud, struct permitd_error *err)
{
    struct rsv_job *j;
    const char *app;
    char path[48], *at;
    size_t strings;
    int rc;

    if ((rc = reserve_caller(w->s, c, rq->app, &app, err)) != PERMITD_OK)
        return rc;
    if (rq->n_items < 1 || rq->n_items > LIMITER_RESERVE_ITEMS_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "items: %zu items; a reservation holds "
                                 "1 to %d", rq->n_items, LIMITER_RESERVE_ITEMS_MAX);
    if (utf8_check_string("request_id", rq->request_id, err) != PERMITD_OK)
        return PERMITD_EINVAL;
    strings = strlen(app) + strlen(rq->request_id) + 2;
    for (size_t i = 0; i < rq->n_items; i++) {
        const Permit__V1__ReserveItem *it = rq->items[i];
        snprintf(path, sizeof(path), "items[%zu].bucket", i);
        if (utf8_check_string(path, it->bucket, err) != PERMITD_OK)
            return PERMITD_EINVAL;
        snprintf(path, sizeof(path), "items[%zu].key", i);
        if (utf8_check_string(path, it->key, err) != PERMITD_OK)
            return PERMITD_EINVAL;
        strings += strlen(it->bucket) + strlen(it->key) + 2;
    }
    if (rq->request_id[0] != '\0') {
        struct limiter_request lr = {"x", app, "", 1, rq->request_id, NULL, NULL};
        if ((rc = limiter_check(&lr, err)) != PERMITD_OK)
            return rc;
    }
    if ((j = rsv_job_new(w, SERVICE_RESERVE, strings, 0, deadline_us, done, ud)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    at = j->strings;
    j->app = rsv_copy(&at, app);
    j->request_id = rsv_copy(&at, rq->request_id);
    j->ttl_ms = rq->ttl_ms;
    for (size_t i = 0; i < rq->n_items; i++) {
        const Permit__V1__ReserveItem *it = rq->items[i];
        const char *bucket = rsv_copy(&at, it->bucket);
        j->items[i] = (struct limiter_reserve_item){bucket, rsv_copy(&at, it->key),
                                                    it->estimate};
    }
    j->r.n = rq->n_items;
    return rsv_submit(w, j, err);
}

/* Commit (actual, n) or Cancel (actual NULL). */
static int settle(struct service_worker *w, struct service_caller *c, const char *req_app,
                  const char *id, const int64_t *actual, size_t n, int64_t deadline_us,
                  service_reservation_fn done, void *ud, struct permitd_error *err)
{
    struct rsv_job *j;
    const char *app;
    char *at;
    int rc;

    if ((rc = reserve_caller(w->s, c, req_app, &app, err)) != PERMITD_OK)
        return rc;
    if (utf8_check_string("reservation_id", id, err) != PERMITD_OK)
        return PERMITD_EINVAL;
    j = rsv_job_new(w, actual != NULL ? SERVICE_COMMIT : SERVICE_CANCEL,
                    strlen(app) + strlen(id) + 2, n, deadline_us, done, ud);
    if (j == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    at = j->strings;
    j->app = rsv_copy(&at, app);
    j->id = rsv_copy(&at, id);
    if (n > 0)
        memcpy(j->actual, actual, n * sizeof(int64_t));
    return rsv_submit(w, j, err);
}

int service_commit(struct service_worker *w, struct service_caller *c,
                   const Permit__V1__CommitRequest *rq, int64_t deadline_us,
                   service_reservation_fn done, void *ud, struct permitd_error *err)
{
    if (rq->n_actual < 1) {
        /* the key first, as before: an unknown caller learns nothing */
        const char *app;
        int rc = reserve_caller(w->s, c, rq->app, &app, err);
        if (rc != PERMITD_OK)
            return rc;
        return permitd_error_set(err, PERMITD_EINVAL, "actual: one number per item of the "
                                 "reservation (none given; Cancel gives everything back)");
    }
    return settle(w, c, rq->app, rq->reservation_id, rq->actual, rq->n_actual, deadline_us, done,
                  ud, err);
}

int service_cancel(struct service_worker *w, struct service_caller *c,
                   const Permit__V1__CancelRequest *rq, int64_t deadline_us,
                   service_reservation_fn done, void *ud, struct permitd_error *err)
{
    return settle(w, c, rq->app, rq->reservation_id, NULL, 0, deadline_us, done, ud, err);
}
