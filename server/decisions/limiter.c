/*
 * limiter.c - request validation and the one script call per decision.
 *
 * All bucket arithmetic lives in lua/bucket.lua, inside Redis, against the
 * Redis clock: that is what makes one limit hold across any number of
 * permitd instances. This file only decides what to ask and how to read
 * the answer. The policy's limits come from this instance's in-memory copy
 * (decisions/policies.h), which also answers, before any call, whether the
 * policy exists, is enabled and lets the app in; a bucket written under a
 * newer version of its policy than that copy makes the script answer
 * "stale", and the policy is reloaded and the decision asked once more.
 */
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
#include "core/log.h"
#include "core/loop.h"
#include "decisions/policies.h"
#include "stores/cluster.h"
#include "stores/policy.h"

/* lua/bucket.lua's "stale": no Connect code, never leaves this file. */
#define SCRIPT_STALE (-17)
/* The RECORD's flags (lua/bucket.lua's header). */
#define FLAG_REPLAYED 1
#define FLAG_NOOP 2
#define RW REDIS_RECORD_WORDS       /* an item's answer in out[]: its RECORD */

/* What a decision does with its item (the `take` argument below, named
 * for what nearly every one does): ARGV[1] "peek", "take", "release",
 * "renew" (all_or_nothing's "all" is a batch's). */
enum { DO_PEEK = 0, DO_TAKE = 1, DO_RELEASE = 2, DO_RENEW = 3 };

struct limiter {
    const struct config *cfg;
    struct redis *redis;
    _Atomic uint64_t open_passes;
    void (*missing_hook)(void *ud); /* set once at start-up */
    void *missing_ud;
    struct policies *policies;      /* the in-memory copy of the policies */
    _Atomic uint64_t stale_retries;
    _Atomic uint64_t splits;        /* calls over several slots sent again per slot
                                       (limiter_split_calls()) */
    struct loader *loader;          /* started on the first miss of a queue */
    int slot_calls;                 /* Redis Cluster: a call's keys share one slot */
    pthread_mutex_t loader_lock;    /* guards starting it */
    /* Names Redis just said hold no policy (the loader read them), each
     * answered not_found from here for LIMITER_ABSENT_LIFE_US without
     * asking again: direct-mapped by name_hash(), a newer name pushing an
     * older one out (see "the loader" below). */
    pthread_mutex_t absent_lock;
    struct absent *absent;
    char ttl_s[24];                 /* ARGV[3]: --request-id-ttl in ms */
    /* The workers' deny caches (decisions/deny_cache.h): entries per
     * worker (--deny-cache, 0 = off), the reset epoch every entry must
     * match (limiter_deny_cache_clear() raises it), and counters. */
    size_t deny_size;
    _Atomic uint64_t deny_epoch;
    _Atomic uint64_t deny_hits, deny_misses, deny_evictions;
};

static void loader_free(struct loader *ld);

/* See "the loader" below for these. */
#define LOADER_PENDING_MAX 1000     /* names waiting for the loader or being read */
#define LOADER_HASH 2048            /* the loader's hash chains (a power of 2) */
#define LIMITER_ABSENT_SLOTS 4096   /* names known absent (a power of 2) */
#define LIMITER_ABSENT_LIFE_US 2000000  /* how long one is answered not_found from memory */

struct absent {
    uint64_t hash;                  /* 0: an empty slot */
    int64_t until_us;
    char name[POLICY_NAME_MAX + 1];
};

/* One policy name for the loader to read: one however many requests of
 * however many queues wait for it. Its fields are the loader's (under its
 * lock) until state is PEND_DONE; rc and err are then fixed, and a queue
 * holding a waiter's count may read them without the lock. */
enum { PEND_WAIT, PEND_READING, PEND_DONE };
struct pend {
    struct pend *chain;             /* the loader's hash chain */
    struct pend *fifo, *fifo_prev;  /* the next and previous to read (PEND_WAIT) */
    uint64_t hash;
    int state;
    size_t waiters;                 /* parked jobs counting on it, over all queues */
    int64_t until_us;               /* the latest of their deadlines: past it, not read */
    const void *mark;               /* the AcquireBatch registering now (park_batch()) */
    int rc;                         /* PEND_DONE: the reload's */
    struct permitd_error err;
    char name[POLICY_NAME_MAX + 1];
};

/* What a parked job waits for: the names it counts on (p[0..n), sorted by
 * name for an AcquireBatch), and how many missing names it could not be
 * given (over: LOADER_PENDING_MAX reached). limiter_plan_make() reads an
 * AcquireBatch's outcome from it (admit_loaded()). */
struct load {
    struct pend **p;
    size_t n, over;
};

int limiter_new(const struct config *cfg, struct redis *redis, struct limiter **out,
                struct permitd_error *err)
{
    struct limiter *l = calloc(1, sizeof(*l));

    *out = NULL;
    if (l == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    l->cfg = cfg;
    l->redis = redis;
    /* A single Redis takes any keys in one call: the Acquires of one
     * policy go together whatever their buckets' slots (fewer, bigger
     * calls: lua/bucket.lua reads them once). */
    l->slot_calls = strncmp(cfg->redis_url, "redis+cluster://", 16) == 0;
    l->deny_size = cfg->deny_cache > 0 ? (size_t)cfg->deny_cache : 0;
    snprintf(l->ttl_s, sizeof(l->ttl_s), "%lld",
             cfg->request_id_ttl_ms > 0 ? cfg->request_id_ttl_ms : 600000LL);
    if (policies_new(cfg, redis, &l->policies, err) != PERMITD_OK) {
        free(l);
        return err->code;
    }
    if ((l->absent = calloc(LIMITER_ABSENT_SLOTS, sizeof(*l->absent))) == NULL) {
        policies_free(l->policies);
        free(l->absent);
        free(l);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    pthread_mutex_init(&l->loader_lock, NULL);
    pthread_mutex_init(&l->absent_lock, NULL);
    *out = l;
    return PERMITD_OK;
}

int limiter_slot_calls(const struct limiter *l)
{
    return l->slot_calls;
}

void limiter_set_slot_calls(struct limiter *l, int on)
{
    l->slot_calls = on;
}

struct policies *limiter_policies(struct limiter *l)
{
    return l->policies;
}

uint64_t limiter_stale_retries(struct limiter *l)
{
    return atomic_load(&l->stale_retries);
}

uint64_t limiter_split_calls(struct limiter *l)
{
    return atomic_load(&l->splits);
}

/* How many of n calls met a redirect over several slots (REDIS_CALL_SPLIT). */
static uint64_t split_calls(const struct redis_script_call *calls, size_t n)
{
    uint64_t splits = 0;

    for (size_t i = 0; i < n; i++)
        splits += calls[i].rc == REDIS_CALL_SPLIT;
    return splits;
}

void limiter_free(struct limiter *l)
{
    if (l == NULL)
        return;
    loader_free(l->loader);
    policies_free(l->policies);
    pthread_mutex_destroy(&l->loader_lock);
    pthread_mutex_destroy(&l->absent_lock);
    free(l->absent);
    free(l);
}

uint64_t limiter_open_passes(struct limiter *l)
{
    return atomic_load(&l->open_passes);
}

void limiter_deny_cache_clear(struct limiter *l)
{
    atomic_fetch_add(&l->deny_epoch, 1);
}

void limiter_deny_cache_counters(struct limiter *l, uint64_t *hits, uint64_t *misses,
                                 uint64_t *evictions)
{
    *hits = atomic_load_explicit(&l->deny_hits, memory_order_relaxed);
    *misses = atomic_load_explicit(&l->deny_misses, memory_order_relaxed);
    *evictions = atomic_load_explicit(&l->deny_evictions, memory_order_relaxed);
}

/* Redis could not decide (unreachable, no answer within --redis-timeout-ms,
 * unable to serve): a policy whose failure_mode is "open" lets the request
 * through, flagged and counted; every other request keeps the error. The
 * policy's entry in the in-memory table decides (whether MySQL's or kept
 * by hand): one this instance never held fails closed, as does one that
 * would have refused the request anyway (disabled, not the app's, fewer
 * permits than asked). Never called for the caller's own deadline
 * (PERMITD_EDEADLINE): a caller must not be able to switch a limit off by
 * asking for a deadline it knows Redis cannot meet. Returns 1 when it let
 * the request through. */
static int fail_open(struct limiter *l, const struct limiter_request *req,
                     struct limiter_result *res)
{
    const struct policies_entry *e = policies_get(l->policies, req->bucket);
    int64_t permits = req->permits == 0 ? 1 : req->permits;
    int open = e != NULL && e->open && e->enabled && e->broken == NULL &&
               policies_allows(e, req->app) && permits <= e->max_permits;

    if (open) {
        memset(res, 0, sizeof(*res));
        res->allowed = 1;
        res->limit = e->max_permits;
        res->open_pass = 1;
        atomic_fetch_add(&l->open_passes, 1);
    }
    policies_release(e);
    return open;
}

/* The entry's hash was found gone from Redis while MySQL had the policy,
 * after a delete notice or a "stale" (policies.h: `missing`,
 * policies_reload_gone()): Redis lost it (restarted empty, flushed) or it
 * was deleted, and the sync has not told which yet. The sync is asked to run now, and the
 * request is answered as if Redis were unavailable (failure_mode decides),
 * not with a not_found that would be false. PERMITD_OK when failure_mode
 * open let an Acquire through (res filled). */
static int missing(struct limiter *l, const struct limiter_request *req, int take,
                   struct limiter_result *res, struct permitd_error *err)
{
    if (l->missing_hook != NULL)
        l->missing_hook(l->missing_ud);
    if (take == DO_TAKE && fail_open(l, req, res))
        return PERMITD_OK;
    return permitd_error_set(err, PERMITD_EUNAVAILABLE,
                             "bucket: policy \"%s\" is in MySQL but not back in Redis yet "
                             "(Redis restarted or was flushed); it is being reloaded", req->bucket);
}

int limiter_known_policy(struct limiter *l, const char *name)
{
    const struct policies_entry *e = name != NULL ? policies_get(l->policies, name) : NULL;

    policies_release(e);
    return e != NULL;
}

void limiter_set_missing_hook(struct limiter *l, void (*fn)(void *ud), void *ud)
{
    l->missing_hook = fn;
    l->missing_ud = ud;
}

void limiter_forget(struct limiter *l, const char *name)
{
    policies_forget(l->policies, name);
}

/* FNV-1a of a policy name: the loader's table and the absent names'. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 14695981039346656037ULL;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h | 1;   /* never 0: an empty slot */
}

/* Whether Redis said, less than LIMITER_ABSENT_LIFE_US ago, that no policy
 * is named `name` (the loader read it: absent_put()). Asked only when the
 * in-memory table lacks the name, so a policy created since, which its
 * change notice (or the sync) puts in the table, is found at once. */
static int absent_has(struct limiter *l, const char *name)
{
    uint64_t h = name_hash(name);
    struct absent *a = &l->absent[h & (LIMITER_ABSENT_SLOTS - 1)];
    int has;

    pthread_mutex_lock(&l->absent_lock);
    has = a->hash == h && a->until_us > clock_now_us() && strcmp(a->name, name) == 0;
    pthread_mutex_unlock(&l->absent_lock);
    return has;
}

static void absent_put(struct limiter *l, const char *name)
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

/* The loader's outcome for `name` in x (sorted: park_batch()), or NULL
 * when x does not hold it. */
static const struct pend *load_find(const struct load *x, const char *name)
{
    struct pend key, *k = &key, **at;

    if (x->n == 0)
        return NULL;
    snprintf(key.name, sizeof(key.name), "%s", name);
    at = bsearch(&k, x->p, x->n, sizeof(*x->p), pend_by_name);
    return at != NULL ? *at : NULL;
}

static int validate(const struct limiter_request *req, int take, struct permitd_error *err)
{
    int rc;

    if ((rc = policy_check_name("bucket", req->bucket, err)) != PERMITD_OK)
        return rc;
    if ((rc = policy_check_name("app", req->app, err)) != PERMITD_OK)
        return rc;
    if ((rc = policy_check_key("key", req->key, err)) != PERMITD_OK)
        return rc;
    if (take && req->permits < 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "permits: %" PRId64 " is negative (0 means 1)", req->permits);
    if (req->request_id != NULL && req->request_id[0] != '\0') {
        size_t len = strnlen(req->request_id, LIMITER_REQUEST_ID_MAX + 1);
        const char *bad = NULL;
        for (const char *c = req->request_id; *c && bad == NULL; c++)
            if (*c <= ' ' || *c > '~')
                bad = c;
        if (len > LIMITER_REQUEST_ID_MAX)
            return permitd_error_set(err, PERMITD_EINVAL, "request_id: \"%.40s...\" is longer "
                                     "than %d characters", req->request_id,
                                     LIMITER_REQUEST_ID_MAX);
        if (bad != NULL)
            return permitd_error_set(err, PERMITD_EINVAL, "request_id: \"%.*s\" holds byte 0x%02x "
                                     "at %zu: only printable ASCII, no space",
                                     (int)(bad - req->request_id), req->request_id,
                                     (unsigned char)*bad, (size_t)(bad - req->request_id));
    }
    return PERMITD_OK;
}

/* The decision script of a policy's algorithm. */
static enum redis_script script_of(const struct policies_entry *e)
{
    switch (e->algorithm) {
    case POLICY_FIXED_WINDOW: return REDIS_SCRIPT_FIXED_WINDOW;
    case POLICY_SLIDING_WINDOW: return REDIS_SCRIPT_SLIDING_WINDOW;
    case POLICY_SLIDING_LOG: return REDIS_SCRIPT_SLIDING_LOG;
    case POLICY_CONCURRENCY: return REDIS_SCRIPT_CONCURRENCY;
    default: return REDIS_SCRIPT_BUCKET;
    }
}

int limiter_check_lease(const struct limiter_request *req, struct permitd_error *err)
{
    const char *id = req->lease_id ? req->lease_id : "";
    int rc;

    if ((rc = validate(req, 0, err)) != PERMITD_OK)
        return rc;
    if (id[0] == '\0')
        return permitd_error_set(err, PERMITD_EINVAL, "lease_id: missing (the lease_id an "
                                 "allowed Acquire of a concurrency policy answered)");
    for (size_t i = 0; i <= LIMITER_LEASE_ID_LEN; i++)
        if (i == LIMITER_LEASE_ID_LEN ? id[i] != '\0'
                                      : !((id[i] >= '0' && id[i] <= '9') ||
                                          (id[i] >= 'a' && id[i] <= 'f')))
            return permitd_error_set(err, PERMITD_EINVAL, "lease_id: \"%.64s\" is not %d "
                                     "lowercase hex characters", id, LIMITER_LEASE_ID_LEN);
    return PERMITD_OK;
}

/* A new lease id into out (LIMITER_LEASE_ID_LEN + 1 bytes): 128 bits from
 * getrandom(), in hex, so no one can guess another holder's lease. -1 when
 * the kernel gives none. */
static int new_lease_id(char *out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[LIMITER_LEASE_ID_LEN / 2];
    size_t got = 0;

    while (got < sizeof(b)) {
        ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof(b); i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[LIMITER_LEASE_ID_LEN] = '\0';
    return 0;
}

/* The part of a decision that needs no script: finds req's policy in the
 * in-memory table (reloading it from Redis, on this thread, when the table
 * lacks it: a policy created on another instance whose notice has not
 * come yet), and refuses what its copy refuses: no such policy (or one
 * Redis lost while MySQL has it: failure_mode, see missing(), after the
 * checks below), a hash that is no valid policy, a disabled policy, an app not in its apps (check: a
 * client's request; permitd's own inspector may look at any), more
 * permits than it ever holds. PERMITD_OK with *out holding a reference
 * (policies_release()) when the script must decide; else *out is NULL and
 * the return value is the answer (PERMITD_OK: failure_mode "open" let an
 * Acquire through, res filled). res->limit is set when the policy is known. */
static int admit_entry(struct limiter *l, const struct limiter_request *req, int take,
                       int check, const struct policies_entry *e,
                       const struct policies_entry **out, struct limiter_result *res,
                       struct permitd_error *err);
struct load;
static int admit_loaded(struct limiter *l, const struct limiter_request *req, int take,
                        int check, int64_t deadline_us, const struct load *loaded,
                        const struct policies_entry **out, struct limiter_result *res,
                        struct permitd_error *err);

static int admit(struct limiter *l, const struct limiter_request *req, int take, int check,
                 int64_t deadline_us, const struct policies_entry **out,
                 struct limiter_result *res, struct permitd_error *err)
{
    return admit_loaded(l, req, take, check, deadline_us, NULL, out, res, err);
}

/* admit(); loaded: the loader has read the policies missing (its outcome
 * per name, rc and err; a name it does not hold could not be handed to
 * the loader, over LOADER_PENDING_MAX: resource_exhausted), so a policy
 * still missing is not read again; NULL: it is read here. A name Redis
 * said a moment ago holds no policy (absent_has()) is not read again
 * either way. */
static int admit_loaded(struct limiter *l, const struct limiter_request *req, int take,
                        int check, int64_t deadline_us, const struct load *loaded,
                        const struct policies_entry **out, struct limiter_result *res,
                        struct permitd_error *err)
{
    const struct policies_entry *e = policies_get(l->policies, req->bucket);
    int rc, found = 0;

    *out = NULL;
    if (e == NULL) {
        const struct pend *x = loaded != NULL ? load_find(loaded, req->bucket) : NULL;
        if (absent_has(l, req->bucket)) {
            rc = PERMITD_OK;        /* not found: asked a moment ago */
        } else if (x != NULL) {
            rc = x->rc;
            if (rc != PERMITD_OK)
                *err = x->err;
        } else if (loaded != NULL && loaded->over > 0) {
            return permitd_error_set(err, PERMITD_EEXHAUSTED, "bucket: policy \"%s\" is not "
                                     "in memory, and %d names are being looked up in redis "
                                     "already; retry later", req->bucket, LOADER_PENDING_MAX);
        } else if (loaded != NULL) {
            rc = PERMITD_OK;        /* there when the batch was parked: deleted since */
        } else {
            rc = policies_reload(l->policies, req->bucket, deadline_us, &found, err);
        }
        if (rc == PERMITD_EUNAVAILABLE && take == DO_TAKE && check && fail_open(l, req, res))
            return PERMITD_OK;
        if (rc != PERMITD_OK)
            return rc;
        if (found)
            e = policies_get(l->policies, req->bucket);
        if (e == NULL)
            return permitd_error_set(err, PERMITD_ENOTFOUND, "bucket: no policy named \"%s\"",
                                     req->bucket);
    }
    return admit_entry(l, req, take, check, e, out, res, err);
}

/* admit() once the entry is found (e: a reference, which is the caller's
 * on PERMITD_OK in *out, else released). */
static int admit_entry(struct limiter *l, const struct limiter_request *req, int take,
                       int check, const struct policies_entry *e,
                       const struct policies_entry **out, struct limiter_result *res,
                       struct permitd_error *err)
{
    int64_t permits = req->permits == 0 ? 1 : req->permits;
    int rc;

    *out = NULL;
    res->limit = e->max_permits;
    if (e->broken != NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL,
                               "policy \"%s\" in redis is not a valid policy: %s",
                               req->bucket, e->broken);
    else if (!e->enabled)
        rc = permitd_error_set(err, PERMITD_EPRECONDITION, "bucket: policy \"%s\" is disabled",
                               req->bucket);
    else if (check && !policies_allows(e, req->app))
        rc = permitd_error_set(err, PERMITD_EPERM,
                               "app: \"%s\" is not allowed to use policy \"%s\"",
                               req->app, req->bucket);
    else if ((take == DO_RELEASE || take == DO_RENEW) && e->algorithm != POLICY_CONCURRENCY)
        rc = permitd_error_set(err, PERMITD_EPRECONDITION,
                               "bucket: policy \"%s\" is a %s, which holds no leases: %s "
                               "is for concurrency policies", req->bucket,
                               policy_algorithm_name(e->algorithm),
                               take == DO_RELEASE ? "Release" : "Renew");
    else if (take == DO_TAKE && permits > e->max_permits)
        rc = permitd_error_set(err, PERMITD_ERANGE,
                               "permits: %" PRId64 " is more than policy \"%s\" ever holds "
                               "(max_permits %" PRId64 ")", permits, req->bucket, e->max_permits);
    else if (e->missing && !check)     /* permitd's own look: not there */
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "bucket: no policy named \"%s\"",
                               req->bucket);
    else if (e->missing)
        rc = missing(l, req, take, res, err);
    else if (l != NULL && l->redis != NULL && !redis_script_present(l->redis, script_of(e)))
        rc = permitd_error_set(err, PERMITD_EUNIMPLEMENTED,
                               "bucket: policy \"%s\" is a %s, and this build of permitd lacks "
                               "its script (lua/%s)", req->bucket,
                               policy_algorithm_name(e->algorithm),
                               redis_script_name(script_of(e)));
    else
        rc = PERMITD_OK;
    if (rc != PERMITD_OK || e->missing) {
        policies_release(e);
        return rc;
    }
    *out = e;
    return PERMITD_OK;
}

/* Maps the script's status (a negated Connect code, see lua/bucket.lua;
 * out: its RECORD) to an error that names the policy. */
static int script_error(const struct limiter *l, const long long *out,
                        const struct limiter_request *req, int64_t permits,
                        struct permitd_error *err)
{
    long long status = out[0], limit = out[3];
    char key[POLICY_REDIS_KEY_MAX];

    switch (status) {
    case PERMITD_ENOTFOUND:
        return permitd_error_set(err, PERMITD_ENOTFOUND, "bucket: no policy named \"%s\"",
                                 req->bucket);
    case PERMITD_EPERM:
        return permitd_error_set(err, PERMITD_EPERM,
                                 "app: \"%s\" is not allowed to use policy \"%s\"",
                                 req->app, req->bucket);
    case PERMITD_EPRECONDITION:
        return permitd_error_set(err, PERMITD_EPRECONDITION, "bucket: policy \"%s\" is disabled",
                                 req->bucket);
    case PERMITD_ERANGE:
        if (out[2] > permits)   /* all_or_nothing: out[2] is what its items ask together */
            return permitd_error_set(err, PERMITD_ERANGE,
                                     "permits: the items of this all_or_nothing batch ask %lld "
                                     "of one bucket of policy \"%s\" together, more than it ever "
                                     "holds (max_permits %lld)", out[2], req->bucket, limit);
        return permitd_error_set(err, PERMITD_ERANGE,
                                 "permits: %" PRId64 " is more than policy \"%s\" ever holds "
                                 "(max_permits %lld)", permits, req->bucket, limit);
    case PERMITD_EABORTED:
        return permitd_error_set(err, PERMITD_EABORTED,
                                 "not granted: another item of this all_or_nothing batch was "
                                 "refused");
    case PERMITD_EDATALOSS:
        /* The state key holds what lua/bucket.lua did not write (out[2]:
         * its size). Left as it is for the operator; the client sees an
         * internal error, as for any fault of the server's side. */
        {
            const struct policies_entry *e = policies_get(l->policies, req->bucket);
            enum policy_algorithm a = e ? e->algorithm : POLICY_TOKEN_BUCKET;
            policy_bucket_key(key, l->cfg->redis_prefix, req->bucket, a, e && e->colocate,
                              req->key);
            policies_release(e);
            if (a == POLICY_TOKEN_BUCKET || a == POLICY_FIXED_WINDOW)
                log_msg(LOG_LEVEL_WARN, "bucket state is not permitd's; left as it is",
                        "key=%s bytes=%lld expected=24", log_q(key), out[2]);
            else
                log_msg(LOG_LEVEL_WARN, "bucket state is not permitd's; left as it is",
                        "key=%s bytes=%lld algorithm=%s", log_q(key), out[2],
                        policy_algorithm_name(a));
        }
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "bucket state of policy \"%s\" key \"%s\" in redis is not "
                                 "permitd's: left as it is (see permitd's log)",
                                 req->bucket, req->key);
    default:
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "policy \"%s\" in redis is not a valid policy (script status %lld)",
                                 req->bucket, status);
    }
}

/* The error of an item whose script call Redis answered with an error
 * (rc: the call's own, as redis.h says), naming the policy. */
static int call_refused(int rc, const char *bucket, struct permitd_error *err)
{
    if (rc == PERMITD_EUNAVAILABLE)
        return permitd_error_set(err, rc, "redis cannot decide policy \"%s\" now (loading, busy "
                                 "or read-only: see permitd's log)", bucket);
    return permitd_error_set(err, rc, "redis could not decide policy \"%s\" (see permitd's log)",
                             bucket);
}

static int decide(struct limiter *l, const struct limiter_request *req, int take, int check,
                  int retried, int64_t deadline_us, struct limiter_result *res,
                  struct permitd_error *err);

/* The script answered "stale" for a bucket of policy `bucket` (stamp: the
 * version stamp the bucket was written under): this instance's copy is
 * older than the one another instance decided it under. The policy is
 * reloaded from Redis; PERMITD_OK when the caller may ask once more. A
 * second "stale" (retried) is an error: Redis's own copy of the policy is
 * older than the bucket's, which only a policy hash rewritten by hand with
 * a lower version can cause. */
static int restale(struct limiter *l, const char *bucket, long long stamp, int retried,
                   int64_t deadline_us, struct permitd_error *err)
{
    if (retried)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "policy \"%s\": a bucket was decided under version stamp %lld, "
                                 "newer than redis's copy of the policy (%" PRIu64 "); was the "
                                 "policy hash rewritten with a lower version?", bucket, stamp,
                                 policies_stamp(l->policies, bucket));
    atomic_fetch_add(&l->stale_retries, 1);
    /* The copy is known old: a hash found gone marks it missing. */
    return policies_reload_gone(l->policies, &bucket, 1, deadline_us, NULL, NULL, err);
}

/* Shadow mode (issue 23): the script decided as usual and took nothing
 * for a denial; a policy in shadow mode answers it allowed, flagged
 * `shadow`, with the denial's fields (remaining, retry_after_ms: what
 * enforcing would have said). A Peek is only flagged. Looked up in the
 * in-memory table (lock-free) for denials and Peeks only, so an allowed
 * Acquire pays nothing; a denial answered as allowed here is never
 * remembered by the deny cache (job_answer() remembers denials only). */
static void shadow(struct limiter *l, const struct limiter_request *req, int take,
                   struct limiter_result *res)
{
    const struct policies_entry *e = policies_get(l->policies, req->bucket);

    if (e != NULL && e->shadow) {
        res->shadow = 1;
        if (take == DO_TAKE)
            res->allowed = 1;
    }
    policies_release(e);
}

/* Turns what Redis said about one item (rc of the call, the script's
 * RECORD) into the answer: failure_mode on a Redis failure, else the
 * decision or the error the script named; a "stale" answer is asked again
 * (once: retried says whether this is that second time) after a reload
 * of the policy. check: a client's request (not permitd's own). */
static int conclude(struct limiter *l, const struct limiter_request *req, int take, int check,
                    int retried, int64_t deadline_us, int rc, const long long *out,
                    struct limiter_result *res, struct permitd_error *err)
{
    int64_t permits = req->permits == 0 ? 1 : req->permits;

    if (rc == PERMITD_EUNAVAILABLE && take == DO_TAKE && check && fail_open(l, req, res))
        return PERMITD_OK;
    if (rc != PERMITD_OK)
        return rc;
    res->limit = out[3];
    if (out[0] == SCRIPT_STALE) {
        if ((rc = restale(l, req->bucket, out[2], retried, deadline_us, err)) != PERMITD_OK)
            return rc;
        return decide(l, req, take, check, 1, deadline_us, res, err);
    }
    if (out[0] != 0)
        return script_error(l, out, req, permits, err);
    res->allowed = out[1] != 0;
    res->remaining = out[2];
    res->retry_after_ms = out[4];
    res->reset_after_ms = out[5];
    res->window_s = out[6];
    res->tokens_micro = out[7];
    res->lease_expires_ms = out[8];
    res->replayed = (out[9] & FLAG_REPLAYED) != 0;
    res->noop = (out[9] & FLAG_NOOP) != 0;
    res->lease_id[0] = '\0';
    res->shadow = 0;
    if (check && (take == DO_PEEK || (take == DO_TAKE && !res->allowed)))
        shadow(l, req, take, res);
    if (res->allowed && !res->shadow && take == DO_TAKE && out[8] > 0) {
        /* a lease granted (concurrency): its id, as the script kept it */
        memcpy(res->lease_id, &out[REDIS_RECORD_LEASE], LIMITER_LEASE_ID_LEN);
        res->lease_id[LIMITER_LEASE_ID_LEN] = '\0';
        if (strspn(res->lease_id, "0123456789abcdef") != LIMITER_LEASE_ID_LEN)
            return permitd_error_set(err, PERMITD_EINTERNAL, "policy \"%s\": the script "
                                     "granted a lease without a lease id", req->bucket);
    }
    return PERMITD_OK;
}

/* The script's first argument: what a call does with its items. */
static const struct redis_str MODE_TAKE = {"take", 4}, MODE_PEEK = {"peek", 4},
                              MODE_ALL = {"all", 3}, MODE_RELEASE = {"release", 7},
                              MODE_RENEW = {"renew", 5};

static struct redis_str mode_arg(int take)
{
    switch (take) {
    case DO_TAKE: return MODE_TAKE;
    case DO_RELEASE: return MODE_RELEASE;
    case DO_RENEW: return MODE_RENEW;
    default: return MODE_PEEK;
    }
}

/* Policy numbers (1-based) as the script's arguments: np, and each item's
 * policy, which is 1 in every call of one policy. */
static const char POLICY_INDEX[] = "1";

/* The one place a decision script's call is laid out (lua/bucket.lua's
 * header, for every algorithm): ARGV[1] the mode, ARGV[2] np, ARGV[3] the
 * request-id time-to-live (call_head()), then 4 per policy
 * (policy_args()), then 4 per item (item_call()), then the keys of other
 * slots. A call none of whose items carries a request id or a lease id
 * (item_wide(): nearly every call) is compact: ARGV[3] "" and 2 per item,
 * its policy and permits, two empty strings an item fewer for Redis to
 * read (tests/bench/redis-cost.sh). */

/* A policy's four, as one call sends them (ARGV[4..7] of policy 1): its
 * version stamp, max_permits, p1 and p2 (policies_p1(): rate and rate
 * history for a token bucket, window or lease for the others). The
 * strings are e's: they live as long as the caller's reference. */
static void policy_args(const struct policies_entry *e, struct redis_str *args)
{
    const char *p1 = policies_p1(e), *p2 = policies_p2(e);

    args[0] = (struct redis_str){e->stamp_s, strlen(e->stamp_s)};
    args[1] = (struct redis_str){e->max_s, strlen(e->max_s)};
    args[2] = (struct redis_str){p1, strlen(p1)};
    args[3] = (struct redis_str){p2, strlen(p2)};
}

/* ARGV[1..3]: the mode, np (in npol, which the caller fills and keeps)
 * and the request-id time-to-live, or "" when no item is wide (the
 * compact call). */
static void call_head(const struct limiter *l, struct redis_str mode, const char *npol,
                      int wide, struct redis_str *args)
{
    args[0] = mode;
    args[1] = (struct redis_str){npol, strlen(npol)};
    args[2] = wide ? (struct redis_str){l->ttl_s, strlen(l->ttl_s)} : (struct redis_str){"", 0};
}

/* Whether an item carries a request id (a take's) or a lease id (a
 * concurrency take's new one; a release's or renew's): its call then
 * sends 4 arguments an item, not 2 (item_call()). */
static int item_wide(const struct limiter_request *req, int take, enum policy_algorithm algo)
{
    if (take == DO_TAKE)
        return algo == POLICY_CONCURRENCY || (req->request_id != NULL && req->request_id[0]);
    return take == DO_RELEASE || take == DO_RENEW;
}

/* The Redis key of req's bucket under policy e (colocated or not) into name;
 * returns its length. */
static size_t bucket_key(const struct limiter *l, const struct limiter_request *req,
                         const struct policies_entry *e, char *name)
{
    return policy_bucket_key(name, l->cfg->redis_prefix, req->bucket, e->algorithm,
                             e->colocate, req->key);
}

/* One item of a script call: its Redis key (*key, the string in name,
 * built there already: bucket_key()) and its arguments, four in a wide
 * call (call_head()), else the first two (args[4]: its policy's number
 * in the call, index; its permits, in permits_s; its request id, on a
 * take; its lease id, in lease: a concurrency take's new one, drawn here
 * unless lease holds one already (start it empty), or the lease a release
 * or renew acts on). The strings must live until the call is answered:
 * the caller's (a job's, a plan's). Returns the number of arguments (2
 * or 4), -1 when no lease id could be drawn (its 4 arguments laid out
 * all the same, the lease id empty: the script refuses such a take). */
static int item_call(const struct limiter_request *req, int take, enum policy_algorithm algo,
                     int wide, char *name, size_t name_len, char *permits_s, const char *index,
                     char *lease, struct redis_str *key, struct redis_str *args)
{
    int64_t permits = req->permits == 0 ? 1 : req->permits;
    const char *rid = take == DO_TAKE && req->request_id ? req->request_id : "";
    int n = 4;

    key->p = name;
    key->len = name_len;
    args[0].p = index;
    args[0].len = strlen(index);
    args[1].p = permits_s;
    args[1].len = (size_t)snprintf(permits_s, 24, "%" PRId64, take == DO_TAKE ? permits : 1);
    if (!wide)
        return 2;
    args[2] = (struct redis_str){rid, strlen(rid)};
    if (take == DO_TAKE && algo == POLICY_CONCURRENCY) {
        /* drawn once: an item sent again (a redirect) keeps its lease id */
        if (lease[0] == '\0' && new_lease_id(lease) != 0)
            n = -1;
    } else if ((take == DO_RELEASE || take == DO_RENEW) && req->lease_id != NULL) {
        snprintf(lease, LIMITER_LEASE_ID_LEN + 1, "%s", req->lease_id);
    } else {
        lease[0] = '\0';
    }
    args[3] = (struct redis_str){lease, strlen(lease)};
    return n;
}

/* One Acquire or Peek on this thread's connection, blocking (permitd's own
 * inspector, a stale answer asked again, a queue out of memory). */
static int decide(struct limiter *l, const struct limiter_request *req, int take, int check,
                  int retried, int64_t deadline_us, struct limiter_result *res,
                  struct permitd_error *err)
{
    char name[POLICY_REDIS_KEY_MAX], permits_s[24], lease[LIMITER_LEASE_ID_LEN + 1] = "";
    struct redis_str key, args[11];
    const struct policies_entry *e;
    long long out[RW];
    int rc, wide, nitem;

    memset(res, 0, sizeof(*res));
    if (check && (rc = validate(req, take, err)) != PERMITD_OK)
        return rc;
    if ((rc = admit(l, req, take, check, deadline_us, &e, res, err)) != PERMITD_OK || e == NULL)
        return rc;
    wide = item_wide(req, take, e->algorithm);
    call_head(l, mode_arg(take), POLICY_INDEX, wide, args);
    policy_args(e, &args[3]);
    if ((nitem = item_call(req, take, e->algorithm, wide, name, bucket_key(l, req, e, name),
                           permits_s, POLICY_INDEX, lease, &key, &args[7])) < 0) {
        policies_release(e);
        return permitd_error_set(err, PERMITD_EINTERNAL, "getrandom() gave no lease id: %s",
                                 strerror(errno));
    }
    rc = redis_script_run(l->redis, script_of(e), &key, 1, args, 7 + nitem, deadline_us, out, RW,
                          err);
    rc = conclude(l, req, take, check, retried, deadline_us, rc, out, res, err);
    policies_release(e);
    return rc;
}

int limiter_check(const struct limiter_request *req, struct permitd_error *err)
{
    return validate(req, 1, err);
}

/* ---- AcquireBatch ----
 *
 * A plan (limiter_plan.h) is an AcquireBatch on its way: its items checked,
 * sorted by policy, and laid out as one script call per policy (all of them
 * in one for all_or_nothing). limiter_acquire_batch() sends it and waits;
 * limiter_acquire_batch_queued() hands it to the worker's queue, where it
 * travels with the Acquires of the same pass. */

/* The group of an item's call in a cluster: the master of its slot, so
 * that a pass sends each master one call; CLUSTER_SLOTS + slot (a call of
 * that slot alone) when per_slot, when no master is known for it, or with
 * no Redis handle (the unit tests). */
static int call_group(struct limiter *l, unsigned slot, int per_slot)
{
    int master = per_slot || l->redis == NULL ? -1 : redis_slot_master(l->redis, slot);

    return master >= 0 ? master : CLUSTER_SLOTS + (int)slot;
}

/* Sorting item indices by policy name groups one policy's items together
 * (and, in a cluster, its items of one slot: a call's keys share one);
 * ties keep request order, so a policy's items reach Redis in order. */
static int by_bucket(const void *a, const void *b, void *pl_)
{
    const struct limiter_plan *pl = pl_;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = 0;

    if (pl->l->slot_calls && !pl->all_or_nothing)
        c = pl->groups[i] - pl->groups[j];
    if (c == 0)     /* one script per call: a call's policies share an algorithm */
        c = (int)pl->entries[i]->algorithm - (int)pl->entries[j]->algorithm;
    if (c == 0)
        c = strcmp(pl->reqs[i].bucket, pl->reqs[j].bucket);
    if (c == 0 && pl->l->slot_calls && !pl->all_or_nothing)
        c = (int)pl->slots[i] - (int)pl->slots[j];
    return c != 0 ? c : (i < j ? -1 : (i > j));
}

void limiter_plan_free(struct limiter_plan *pl)
{
    for (size_t k = 0; pl->entries != NULL && k < pl->valid; k++)
        policies_release(pl->entries[pl->order[k]]);
    free(pl->block);
    pl->block = NULL;
    pl->entries = NULL;
}

/* Carves the next array of n elements of size each off a block being laid
 * out: *at is the offset so far, rounded up for any object; the array's
 * offset is returned and *at moves past it. With base NULL only the size
 * is reckoned (the first pass, for the one malloc). */
static void *carve(unsigned char *base, size_t *at, size_t n, size_t size)
{
    size_t align = alignof(max_align_t), off = (*at + align - 1) & ~(align - 1);

    *at = off + n * size;
    return base == NULL ? NULL : base + off;
}

/* The plan's arrays for n requests, in one block (pl->block): one
 * allocation a batch where there were fourteen. entries and leases start
 * zeroed, the rest is written before it is read. 0, or -1 out of memory. */
static int plan_arrays(struct limiter_plan *pl, size_t n)
{
    unsigned char *base = NULL;
    size_t text = 0;

    /* room for every request id, each cut to one byte over the most
     * validate() takes (a longer one is refused, never sent) */
    for (size_t i = 0; i < n; i++)
        if (pl->reqs[i].request_id != NULL)
            text += strnlen(pl->reqs[i].request_id, LIMITER_REQUEST_ID_MAX + 1) + 1;
    for (int pass = 0; pass < 2; pass++) {
        size_t at = 0;

        pl->order = carve(base, &at, n, sizeof(*pl->order));
        pl->entries = carve(base, &at, n, sizeof(*pl->entries));
        pl->keys = carve(base, &at, n, sizeof(*pl->keys));
        pl->args = carve(base, &at, 12 * n, sizeof(*pl->args));     /* per call 3 + 4, per item 5 */
        pl->knames = carve(base, &at, n, sizeof(*pl->knames));
        pl->klen = carve(base, &at, n, sizeof(*pl->klen));
        pl->slots = carve(base, &at, n, sizeof(*pl->slots));
        pl->groups = carve(base, &at, n, sizeof(*pl->groups));
        pl->permits = carve(base, &at, n, sizeof(*pl->permits));
        pl->index = carve(base, &at, n, sizeof(*pl->index));
        pl->npol = carve(base, &at, n, sizeof(*pl->npol));
        pl->out = carve(base, &at, RW * n, sizeof(*pl->out));
        pl->calls = carve(base, &at, n, sizeof(*pl->calls));
        pl->leases = carve(base, &at, n, sizeof(*pl->leases));
        pl->rids = carve(base, &at, n, sizeof(*pl->rids));
        pl->rid_text = carve(base, &at, text + 1, 1);
        if (pass == 0 && (base = pl->block = malloc(at)) == NULL)
            return -1;
    }
    memset(pl->entries, 0, n * sizeof(*pl->entries));
    memset(pl->leases, 0, n * sizeof(*pl->leases));
    return 0;
}

/* all_or_nothing is one script call, whose keys must share one Redis
 * Cluster slot (in any mode: a batch that passes on a single Redis passes
 * on a cluster). PERMITD_OK, or failed_precondition naming the items
 * (request indices, policy and key) outside item order[0]'s slot. */
static int one_slot(const struct limiter_plan *pl, struct permitd_error *err)
{
    size_t first = pl->order[0], off = 0, named = 0;
    char list[360];
    int len = 0;

    list[0] = '\0';
    for (size_t k = 1; k < pl->valid; k++) {
        size_t i = pl->order[k];
        if (pl->slots[i] == pl->slots[first])
            continue;
        off++;
        if (named < 4 && len < (int)sizeof(list) - 1) {
            len += snprintf(list + len, sizeof(list) - (size_t)len, "%s%zu (policy \"%.40s\" key "
                            "\"%.40s\")", named ? ", " : "", i, pl->reqs[i].bucket,
                            pl->reqs[i].key);
            named++;
        }
    }
    if (off == 0)
        return PERMITD_OK;
    return permitd_error_set(err, PERMITD_EPRECONDITION,
                             "all_or_nothing: item%s %s%s %s not in the Redis Cluster slot of "
                             "item %zu (policy \"%.40s\" key \"%.40s\"): one script decides an "
                             "all_or_nothing batch, and its buckets must share a slot; set "
                             "colocate on the policy to keep all its buckets in one slot, or send "
                             "them in separate calls", off > 1 ? "s" : "", list,
                             off > named ? ", ..." : "", off > 1 ? "are" : "is", first,
                             pl->reqs[first].bucket, pl->reqs[first].key);
}

/* See limiter_plan.h. */
int limiter_plan_make(struct limiter_plan *pl, struct permitd_error *err)
{
    const struct limiter_request *reqs = pl->reqs;
    size_t n = pl->n, bad = 0, refused = 0, a = 0;
    int rc;

    if (n > LIMITER_BATCH_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "requests: %zu items, the limit is %d",
                                 n, LIMITER_BATCH_MAX);
    if (n == 0)
        return PERMITD_OK;
    if (plan_arrays(pl, n) != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");

    for (size_t i = 0, at = 0; i < n; i++) {
        memset(&pl->res[i], 0, sizeof(pl->res[i]));
        pl->errs[i].code = PERMITD_OK;
        pl->errs[i].message[0] = '\0';
        pl->rids[i] = "";
        if (validate(&reqs[i], 1, &pl->errs[i]) != PERMITD_OK) {
            bad++;
            continue;
        }
        pl->order[pl->valid++] = i;
        if (reqs[i].request_id != NULL && reqs[i].request_id[0] != '\0') {
            size_t len = strlen(reqs[i].request_id) + 1;    /* validate(): <= the max */
            memcpy(pl->rid_text + at, reqs[i].request_id, len);
            pl->rids[i] = pl->rid_text + at;
            at += len;
        }
    }
    /* What needs no Redis (decisions/policies.h): an item its policy's
     * copy refuses gets its error here and is left out. */
    for (size_t k = 0, valid = pl->valid; k < valid; k++) {
        size_t i = pl->order[k];
        const struct policies_entry *e;
        rc = admit_loaded(pl->l, &reqs[i], pl->peek ? DO_PEEK : DO_TAKE, !pl->peek,
                          pl->deadline_us, pl->loaded, &e, &pl->res[i], &pl->errs[i]);
        if (k == 0)
            pl->valid = 0;
        if (rc == PERMITD_OK && e == NULL && pl->all_or_nothing)
            /* failure_mode "open" (Redis down): never a batch in part */
            rc = permitd_error_set(&pl->errs[i], PERMITD_EUNAVAILABLE,
                                   "redis cannot be reached to decide policy \"%s\"",
                                   reqs[i].bucket);
        if (rc != PERMITD_OK || e == NULL) {
            if (rc != PERMITD_OK)
                refused++;
            else
                pl->errs[i] = (struct permitd_error){PERMITD_OK, ""};   /* failure_mode open */
            continue;
        }
        pl->entries[i] = e;
        pl->order[pl->valid++] = i;
        pl->klen[i] = bucket_key(pl->l, &reqs[i], e, pl->knames[i]);
        pl->slots[i] = cluster_keyslot(pl->knames[i], pl->klen[i]);
        pl->groups[i] = call_group(pl->l, pl->slots[i], pl->per_slot);
    }
    if (pl->all_or_nothing && bad + refused > 0) {
        for (size_t k = 0; k < pl->valid; k++)
            permitd_error_set(&pl->errs[pl->order[k]], PERMITD_EABORTED, bad > 0
                              ? "not granted: another item of this all_or_nothing batch is invalid"
                              : "not granted: another item of this all_or_nothing batch was "
                                "refused");
        for (size_t k = 0; k < pl->valid; k++)
            policies_release(pl->entries[pl->order[k]]);
        pl->valid = 0;
        return PERMITD_OK;
    }
    for (size_t k = 1; pl->all_or_nothing && k < pl->valid; k++) {
        const struct policies_entry *x = pl->entries[pl->order[0]], *y = pl->entries[pl->order[k]];
        if (x->algorithm != y->algorithm)
            return permitd_error_set(err, PERMITD_EPRECONDITION,
                                     "all_or_nothing: item %zu (policy \"%.40s\") is a %s and "
                                     "item %zu (policy \"%.40s\") a %s: one script decides an "
                                     "all_or_nothing batch, so its policies must share an "
                                     "algorithm", pl->order[0], pl->reqs[pl->order[0]].bucket,
                                     policy_algorithm_name(x->algorithm), pl->order[k],
                                     pl->reqs[pl->order[k]].bucket,
                                     policy_algorithm_name(y->algorithm));
    }
    if (pl->all_or_nothing && (rc = one_slot(pl, err)) != PERMITD_OK)
        return rc;
    qsort_r(pl->order, pl->valid, sizeof(*pl->order), by_bucket, pl);

    /* One call per policy (all of them in one for all_or_nothing): its
     * policies' limits once (the newest copy among its items', should a
     * reload have come between them), then per item its policy's number
     * and permits. Everything a call sends is the plan's own or held by
     * it: a job answered at its deadline leaves its caller's memory, while
     * the pipe may still send its calls again (NOSCRIPT). */
    for (size_t k = 0; k < pl->valid;) {
        size_t first = k, np = 0, head = a;
        struct redis_script_call *c = &pl->calls[pl->ngroups++];
        int wide = 0, nitem;

        c->args = &pl->args[a];
        a += 3;                 /* call_head() once its items are known */
        c->keys = &pl->keys[first];
        c->out = &pl->out[RW * first];
        c->cross_slot = 0;
        c->script = script_of(pl->entries[pl->order[first]]);
        /* the policies of this call, each once: all_or_nothing's all; on a
         * single Redis one; in a cluster those of one group (by_bucket()) */
        for (size_t m = first; m < pl->valid;) {
            const struct policies_entry *newest = pl->entries[pl->order[m]];
            size_t from = m;
            /* (a Peek batch on a single Redis: every policy of one
             * algorithm in one call, whatever its keys' slots) */
            if (!pl->all_or_nothing && m > first &&
                ((!pl->l->slot_calls && !pl->peek) ||
                 (pl->l->slot_calls && pl->groups[pl->order[m]] != pl->groups[pl->order[first]]) ||
                 newest->algorithm != pl->entries[pl->order[first]]->algorithm))
                break;
            while (m < pl->valid && strcmp(reqs[pl->order[m]].bucket,
                                           reqs[pl->order[from]].bucket) == 0 &&
                   (pl->all_or_nothing || !pl->l->slot_calls ||
                    pl->groups[pl->order[m]] == pl->groups[pl->order[from]])) {
                c->cross_slot |= !pl->all_or_nothing && pl->l->slot_calls &&
                                 pl->slots[pl->order[m]] != pl->slots[pl->order[first]];
                if (pl->entries[pl->order[m]]->stamp > newest->stamp)
                    newest = pl->entries[pl->order[m]];
                m++;
            }
            policy_args(newest, &pl->args[a]);
            a += 4;
            np++;
            snprintf(pl->index[from], sizeof(pl->index[from]), "%zu", np);
            for (size_t x = from + 1; x < m; x++)
                memcpy(pl->index[x], pl->index[from], sizeof(pl->index[x]));
            k = m;
        }
        snprintf(pl->npol[pl->ngroups - 1], sizeof(pl->npol[0]), "%zu", np);
        for (size_t x = first; x < k; x++)
            wide |= item_wide(&reqs[pl->order[x]], pl->peek ? DO_PEEK : DO_TAKE,
                              pl->entries[pl->order[x]]->algorithm);
        call_head(pl->l, pl->all_or_nothing ? MODE_ALL : pl->peek ? MODE_PEEK : MODE_TAKE,
                  pl->npol[pl->ngroups - 1], wide, &pl->args[head]);
        for (size_t x = first; x < k; x++) {
            size_t i = pl->order[x];
            struct limiter_request own = reqs[i];
            own.request_id = pl->rids[i];   /* the plan's copy: see limiter_plan.h */
            if ((nitem = item_call(&own, pl->peek ? DO_PEEK : DO_TAKE,
                                   pl->entries[i]->algorithm, wide, pl->knames[i], pl->klen[i],
                                   pl->permits[x], pl->index[x], pl->leases[x], &pl->keys[x],
                                   &pl->args[a])) < 0)
                return permitd_error_set(err, PERMITD_EINTERNAL, "getrandom() gave no lease "
                                         "id: %s", strerror(errno));
            a += (size_t)nitem;
        }
        /* Over several slots: KEYS is the first key, the others follow. */
        for (size_t x = first + 1; c->cross_slot && x < k; x++)
            pl->args[a++] = pl->keys[x];
        c->nkeys = c->cross_slot ? 1 : (int)(k - first);
        c->nargs = (int)(a - head);
        c->nout = (int)(RW * (k - first));
    }
    return PERMITD_OK;
}

static int batch_run(struct limiter *l, const struct limiter_request *reqs, size_t n,
                     int all_or_nothing, int peek, int retried, int64_t deadline_us,
                     struct limiter_result *res, struct permitd_error *errs,
                     struct permitd_error *err);

/* The items of pl's calls over several slots that met a redirect (rc
 * REDIS_CALL_SPLIT: the script wrote nothing) asked again, one call per
 * slot, whose redirects are followed; their answers become the items'.
 * Blocking, on the caller's thread (a worker's loop for a queued batch,
 * as for a stale answer): it happens only while slots move. */
static void plan_resend(struct limiter_plan *pl)
{
    struct limiter_request *reqs = NULL;
    struct limiter_result *res = NULL;
    struct permitd_error *errs = NULL, err = {0, ""};
    size_t *idx = NULL, m = 0, k = 0;
    uint64_t splits = split_calls(pl->calls, pl->ngroups);
    int rc;

    if (splits > 0)
        atomic_fetch_add(&pl->l->splits, splits);
    for (size_t g = 0; g < pl->ngroups; g++)
        if (pl->calls[g].rc == REDIS_CALL_SPLIT)
            m += (size_t)pl->calls[g].nout / RW;
    if (m == 0)
        return;
    reqs = malloc(m * sizeof(*reqs));
    res = calloc(m, sizeof(*res));
    errs = calloc(m, sizeof(*errs));
    idx = malloc(m * sizeof(*idx));
    m = 0;
    for (size_t g = 0; g < pl->ngroups; g++) {
        size_t items = (size_t)pl->calls[g].nout / RW;
        for (size_t j = 0; j < items; j++, k++) {
            if (pl->calls[g].rc != REDIS_CALL_SPLIT)
                continue;
            if (reqs == NULL || res == NULL || errs == NULL || idx == NULL)
                permitd_error_set(&pl->errs[pl->order[k]], PERMITD_EINTERNAL,
                                  "out of memory sending an item again after a redirect");
            else
                reqs[m] = pl->reqs[pl->order[k]];
            if (idx != NULL)
                idx[m] = pl->order[k];
            m++;
        }
    }
    if (reqs == NULL || res == NULL || errs == NULL || idx == NULL)
        m = 0;
    rc = m == 0 ? PERMITD_OK
                : batch_run(pl->l, reqs, m, 0, pl->peek, pl->retried, pl->deadline_us, res, errs,
                            &err);
    for (size_t x = 0; x < m; x++) {
        size_t i = idx[x];
        if (rc != PERMITD_OK) {
            permitd_error_set(&pl->errs[i], rc, "%s", err.message);
            continue;
        }
        pl->res[i] = res[x];
        pl->errs[i] = errs[x];
    }
    free(reqs);
    free(res);
    free(errs);
    free(idx);
}

/* Reads the answers of the calls (rc: the whole round trip's) into res and
 * errs; returns the batch's rc. A "stale" item is asked again after its
 * policy is reloaded (once): on its own, or, all_or_nothing, with the whole
 * batch (the script wrote nothing then). */
static int plan_conclude(struct limiter_plan *pl, int rc, struct permitd_error *err)
{
    const struct limiter_request *reqs = pl->reqs;

    if ((rc == PERMITD_EUNAVAILABLE || rc == PERMITD_EDEADLINE) && !pl->all_or_nothing) {
        /* Each item gets the error; when Redis failed (not the caller's
         * own deadline), as its policy's failure_mode says. */
        for (size_t k = 0; k < pl->valid; k++) {
            size_t i = pl->order[k];
            if (rc == PERMITD_EDEADLINE || pl->peek || !fail_open(pl->l, &reqs[i], &pl->res[i]))
                permitd_error_set(&pl->errs[i], rc, "%s", err->message);
        }
        return PERMITD_OK;
    }
    if (rc != PERMITD_OK)
        return rc;
    if (pl->all_or_nothing && pl->ngroups == 1 && pl->calls[0].rc == PERMITD_OK) {
        for (size_t k = 0; k < pl->valid; k++) {
            const long long *out = &pl->calls[0].out[RW * k];
            if (out[0] == SCRIPT_STALE) {
                size_t i = pl->order[k];
                rc = restale(pl->l, reqs[i].bucket, out[2], pl->retried, pl->deadline_us,
                             &pl->errs[i]);
                if (rc != PERMITD_OK)
                    return permitd_error_set(err, rc, "%s", pl->errs[i].message);
                return batch_run(pl->l, reqs, pl->n, 1, 0, 1, pl->deadline_us, pl->res, pl->errs,
                                 err);
            }
        }
    }
    plan_resend(pl);
    for (size_t g = 0, k = 0; g < pl->ngroups; g++) {
        size_t m = (size_t)pl->calls[g].nout / RW;
        for (size_t j = 0; j < m; j++, k++) {
            size_t i = pl->order[k];
            const long long *out = &pl->calls[g].out[RW * j];
            int crc = PERMITD_OK;
            if (pl->calls[g].rc == REDIS_CALL_SPLIT)
                continue;       /* answered by plan_resend() */
            if (pl->calls[g].rc != PERMITD_OK) {
                /* A call Redis refused: as for a single Acquire,
                 * failure_mode applies when it could not serve now; but
                 * all_or_nothing never passes in part. */
                crc = call_refused(pl->calls[g].rc, reqs[i].bucket, &pl->errs[i]);
                out = NULL;
                if (pl->all_or_nothing)
                    continue;
            }
            /* The same reading as a single Acquire's. */
            if (conclude(pl->l, &reqs[i], pl->peek ? DO_PEEK : DO_TAKE, !pl->peek, pl->retried,
                         pl->deadline_us, crc, out, &pl->res[i], &pl->errs[i]) == PERMITD_OK) {
                pl->errs[i].code = PERMITD_OK;
                pl->errs[i].message[0] = '\0';
            }
        }
    }
    return PERMITD_OK;
}

static int batch_run(struct limiter *l, const struct limiter_request *reqs, size_t n,
                     int all_or_nothing, int peek, int retried, int64_t deadline_us,
                     struct limiter_result *res, struct permitd_error *errs,
                     struct permitd_error *err)
{
    /* Blocking: one call per slot (redis.c follows each call's redirects) */
    struct limiter_plan pl = {.l = l, .reqs = reqs, .n = n, .all_or_nothing = all_or_nothing,
                              .peek = peek, .res = res, .errs = errs, .deadline_us = deadline_us,
                              .retried = retried, .per_slot = 1};
    int rc = limiter_plan_make(&pl, err);

    if (rc == PERMITD_OK && pl.ngroups > 0) {
        /* one pipeline per run of calls of one script (one per algorithm) */
        for (size_t g = 0, end; rc == PERMITD_OK && g < pl.ngroups; g = end) {
            for (end = g + 1; end < pl.ngroups && pl.calls[end].script == pl.calls[g].script;)
                end++;
            rc = redis_script_pipeline(l->redis, pl.calls[g].script, &pl.calls[g], end - g,
                                       deadline_us, err);
        }
        rc = plan_conclude(&pl, rc, err);
    }
    limiter_plan_free(&pl);
    return rc;
}

int limiter_acquire_batch(struct limiter *l, const struct limiter_request *reqs, size_t n,
                          int all_or_nothing, int64_t deadline_us,
                          struct limiter_result *res, struct permitd_error *errs,
                          struct permitd_error *err)
{
    return batch_run(l, reqs, n, all_or_nothing, 0, 0, deadline_us, res, errs, err);
}

int limiter_inspect_batch(struct limiter *l, const char *const *names, size_t n,
                          int64_t deadline_us, struct limiter_result *res,
                          struct permitd_error *errs, struct permitd_error *err)
{
    struct limiter_request *reqs;
    int rc;

    if (n > LIMITER_BATCH_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "names: %zu policies, the limit is %d", n,
                                 LIMITER_BATCH_MAX);
    if (n == 0)
        return PERMITD_OK;
    if ((reqs = calloc(n, sizeof(*reqs))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    /* permitd's own look: no app is checked (the plan's peek), the name
     * only has to be one, as the plan validates every item */
    for (size_t i = 0; i < n; i++)
        reqs[i] = (struct limiter_request){names[i], "permitd", "", 1, NULL, NULL};
    rc = batch_run(l, reqs, n, 0, 1, 0, deadline_us, res, errs, err);
    free(reqs);
    return rc;
}

/* Answers a queued plan's caller: calls are the batch's copies of its calls
 * (their rc; the answers went straight to pl->out), NULL when none was
 * sent or its deadline passed first. The plan itself is freed with its job
 * (job_end()): a batch still out writes into pl->out. */
static void plan_answer(struct limiter_plan *pl, int rc, const struct redis_script_call *calls,
                        struct permitd_error *err)
{
    for (size_t g = 0; calls != NULL && g < pl->ngroups; g++)
        pl->calls[g].rc = calls[g].rc;
    rc = plan_conclude(pl, rc, err);
    pl->done(pl->ud, rc, err);
}

/* ---- the loader: a policy a worker's queue lacks, read off its thread ----
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

struct loader {
    struct limiter *l;
    pthread_t thread;
    pthread_mutex_t lock;           /* guards what follows, and every pend's waiters */
    pthread_cond_t wake;
    struct pend *chains[LOADER_HASH];   /* every pend, by name_hash() */
    struct pend *head, *tail;       /* to read, in the order asked (PEND_WAIT) */
    size_t npend;                   /* pends held: LOADER_PENDING_MAX at most */
    struct limiter_queue *queues;   /* the queues to wake (loader_watch()) */
    _Atomic uint64_t reads;         /* names read so far: a queue looks when it moves */
    int stopping;
};

/* ---- queued Acquires: one worker's requests pipelined from its own loop ----
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

#define QUEUE_BATCH_MAX 256     /* jobs per batch */
#define QUEUE_SPARE_MAX 256     /* finished jobs kept for reuse */

/* One queued piece of work: an Acquire or a Peek (an item of a script
 * call; its strings live here, its RECORD in the batch's out), or an
 * AcquireBatch (plan: its calls, one per policy). */
struct job {
    struct job *next;
    int64_t deadline_us;
    size_t first;                   /* its (first) call in the batch out */
    struct limiter_plan *plan;              /* NULL: an Acquire or a Peek */
    int take;                       /* DO_TAKE (an Acquire), DO_PEEK, DO_RELEASE, DO_RENEW */
    struct limiter_request req;
    limiter_done_fn done;
    void *ud;
    const struct policies_entry *entry;    /* its policy (held), an Acquire's or a Peek's */
    char name[POLICY_REDIS_KEY_MAX];        /* its bucket's key (batch_items()) */
    size_t name_len;
    unsigned slot;                  /* the key's cluster slot */
    int group;                      /* its call's: the master of slot, or (split,
                                       or no master known) CLUSTER_SLOTS + slot */
    int split;                      /* a call over several slots it went in met
                                       a redirect: it goes again in one per slot */
    struct limiter *l;              /* for by_call() */
    char permits[24];
    char index[8];                  /* its policy's number in its call */
    char npol[8];                   /* the lead job of a call: its number of policies */
    char app[POLICY_NAME_MAX + 1];  /* req.app: what the call sends is the job's own
                                       (the pipe may send it again after the
                                       job was answered: NOSCRIPT) */
    char request_id[LIMITER_REQUEST_ID_MAX + 1];    /* req.request_id, likewise */
    char lease[LIMITER_LEASE_ID_LEN + 1];   /* what the call sends as the lease id */
    const long long *out;           /* an Acquire's or a Peek's answer */
    int64_t sent_us;                /* when its batch was written (the deny cache) */
    uint64_t epoch;                 /* the reset epoch when it was queued */
    int answered;                   /* its caller has its answer (the deadline
                                       passed while its batch was out) */
    struct load load;               /* parked: the names it waits for (an Acquire's
                                       or a Peek's: one, in one) */
    struct pend *one;
};

/* The batch out: every call of its jobs, contiguous, as the pipe wants
 * them; the keys, arguments and answers of its Acquires and Peeks, each
 * call's items side by side. */
struct batch {
    struct job *jobs[QUEUE_BATCH_MAX];
    size_t njobs;
    size_t items[QUEUE_BATCH_MAX];  /* the Acquires and Peeks, as indices of jobs */
    struct redis_str keys[QUEUE_BATCH_MAX];
    struct redis_str args[12 * QUEUE_BATCH_MAX];    /* per call 3 + 4, per item 5 */
    long long out[RW * QUEUE_BATCH_MAX];
    struct redis_script_call *calls;
    size_t ncalls, cap;
};

struct limiter_queue {
    struct limiter *l;
    struct loop *loop;
    struct redis_pipe *pipe;
    struct job *head, *tail;        /* waiting for the next batch */
    struct job *parked;             /* waiting for their policy (the loader) */
    struct job *parked_batches;     /* AcquireBatches waiting for their policies */
    struct limiter_queue *watching; /* the next queue the loader wakes (loader_watch()) */
    int watched;                    /* on the loader's list */
    uint64_t reads;                 /* the loader's reads when its parked jobs were looked at */
    struct batch batch;
    struct job *spare;              /* finished jobs, for the next ones */
    size_t nspare;
    size_t timed;                   /* jobs with a deadline of their own, not yet answered */
    struct deny_cache *deny;        /* this worker's (NULL: --deny-cache 0) */
};

static void queue_loaded(struct limiter_queue *q);
static void loader_cancel(struct limiter_queue *q);
static void parked_end(struct limiter_queue *q, struct job *j, int rc,
                       const struct limiter_result *res, const struct permitd_error *err);
static void parked_batch_end(struct limiter_queue *q, struct job *j);

/* Jobs are recycled by their worker's queue: once a worker has had as many
 * in flight as it will, queuing a decision allocates nothing. */
static struct job *job_get(struct limiter_queue *q)
{
    struct job *j = q->spare;

    if (j == NULL)
        return malloc(sizeof(*j));
    q->spare = j->next;
    q->nspare--;
    return j;
}

static void job_put(struct limiter_queue *q, struct job *j)
{
    if (q->nspare >= QUEUE_SPARE_MAX) {
        free(j);
        return;
    }
    j->next = q->spare;
    q->spare = j;
    q->nspare++;
}

/* ---- the deny cache (decisions/deny_cache.h) ----
 *
 * Which requests it may answer: an Acquire (never a Peek: its answer is the
 * bucket as it stands, which the cache does not know) without a request
 * id, of a policy whose permits come back only with time (not concurrency:
 * a Release frees them) and that enforces (not in shadow mode: its denials
 * are answered allowed, see shadow()). A take with a request id goes to
 * Redis whatever the cache holds: it may be the retry of a take another
 * instance allowed, which must be answered allowed again (its record is in
 * Redis, and only there); its denial writes nothing (lua/lib/records.lua),
 * so a client over its limit grows no key whatever ids it sends. What the cache denies, Redis would deny too: see deny_cache.h for
 * the clocks; the policy's version stamp and the reset epoch for edits and
 * resets (limiter_reset(), the change notices). */
static int deny_cacheable(const struct limiter_queue *q, int take,
                          const struct policies_entry *e)
{
    return q->deny != NULL && take == DO_TAKE && e->algorithm != POLICY_CONCURRENCY &&
           !e->shadow;
}

/* Answers req from the cache when it holds a denial still in force for
 * it: 1 with res filled, else 0 (counted as a miss). */
static int deny_answer(struct limiter_queue *q, const struct limiter_request *req,
                       const struct policies_entry *e, uint64_t epoch, struct limiter_result *res)
{
    struct deny_cache_answer a;

    if (!deny_cache_get(q->deny, req->bucket, req->key ? req->key : "", e->stamp, epoch,
                        req->permits == 0 ? 1 : req->permits, clock_now_us(), &a)) {
        atomic_fetch_add_explicit(&q->l->deny_misses, 1, memory_order_relaxed);
        return 0;
    }
    atomic_fetch_add_explicit(&q->l->deny_hits, 1, memory_order_relaxed);
    memset(res, 0, sizeof(*res));
    res->allowed = 0;
    res->remaining = a.remaining;
    res->limit = a.limit;
    res->retry_after_ms = a.retry_after_ms;
    res->reset_after_ms = a.reset_after_ms;
    res->window_s = a.window_s;
    res->tokens_micro = a.tokens_micro;
    return 1;
}

/* Remembers a denial Redis answered for job j (a script answer of its own,
 * not replayed, not asked again after a stale one). */
static void deny_remember(struct limiter_queue *q, const struct job *j,
                          const struct limiter_result *res)
{
    struct deny_cache_answer a = {res->remaining, res->limit, res->retry_after_ms,
                                  res->reset_after_ms, res->window_s, res->tokens_micro};

    if (deny_cache_put(q->deny, j->req.bucket, j->req.key ? j->req.key : "", j->entry->stamp,
                       j->epoch, j->req.permits == 0 ? 1 : j->req.permits, j->sent_us,
                       clock_now_us(), &a))
        atomic_fetch_add_explicit(&q->l->deny_evictions, 1, memory_order_relaxed);
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
        plan_answer(j->plan, rc, calls, &e);
        return;
    }
    /* the script's own decision, this very call's */
    direct = rc == PERMITD_OK && calls != NULL && calls[0].rc == PERMITD_OK &&
             j->out != NULL && j->out[0] == 0;
    if (rc == PERMITD_OK && calls != NULL && calls[0].rc != PERMITD_OK)
        rc = call_refused(calls[0].rc, j->req.bucket, &e);
    memset(&res, 0, sizeof(res));
    rc = conclude(q->l, &j->req, j->take, 1, 0, j->deadline_us, rc, j->out, &res, &e);
    if (direct && rc == PERMITD_OK && !res.allowed && !res.replayed &&
        deny_cacheable(q, j->take, j->entry))
        deny_remember(q, j, &res);
    j->done(j->ud, rc, &res, &e);
}

/* Answers one job, unless it was already, and recycles it. */
static void job_end(struct limiter_queue *q, struct job *j, int rc, const struct redis_script_call *calls,
                    const struct permitd_error *err)
{
    if (!j->answered)
        job_answer(q, j, rc, calls, err);
    if (j->plan != NULL) {
        limiter_plan_free(j->plan);
        free(j->plan);
    } else {
        policies_release(j->entry);
    }
    job_put(q, j);
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
    if (rc == PERMITD_OK && items_from < ncalls)
        atomic_fetch_add(&q->l->splits, split_calls(&b->calls[items_from], ncalls - items_from));
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
        j->name_len = bucket_key(q->l, &j->req, j->entry, j->name);
        j->slot = q->l->slot_calls ? cluster_keyslot(j->name, j->name_len) : 0;
        j->group = 0;
        if (q->l->slot_calls)
            j->group = call_group(q->l, j->slot, j->split);
    }
    qsort_r(b->items, n, sizeof(*b->items), by_call, b->jobs);
    for (size_t k = 0; k < n;) {
        size_t first = k, last = k + 1, np = 0;
        struct job *lead = b->jobs[b->items[first]];
        struct redis_script_call *c = &b->calls[b->ncalls];
        size_t at = a;          /* where its args begin */
        int cross = 0, wide = item_wide(&lead->req, lead->take, lead->entry->algorithm);

        /* This call's items: one kind; on a single Redis one policy, in a
         * cluster one master (group). */
        while (last < n) {
            const struct job *j = b->jobs[b->items[last]];
            if (j->take != lead->take || j->group != lead->group ||
                j->entry->algorithm != lead->entry->algorithm ||
                (!q->l->slot_calls && strcmp(j->req.bucket, lead->req.bucket) != 0))
                break;
            cross |= j->slot != lead->slot;
            wide |= item_wide(&j->req, j->take, j->entry->algorithm);
            last++;
        }
        call_head(q->l, mode_arg(lead->take), "", wide, &b->args[a]);
        *c = (struct redis_script_call){.keys = &b->keys[first], .args = &b->args[a],
                                        .out = &b->out[RW * first], .cross_slot = cross,
                                        .script = script_of(lead->entry)};
        a += 3;                 /* its number of policies is set below */
        /* Each policy once (its items are side by side), with its number. */
        for (size_t x = first; x < last;) {
            const struct job *newest = b->jobs[b->items[x]];
            np++;
            while (x < last && strcmp(b->jobs[b->items[x]]->req.bucket,
                                      newest->req.bucket) == 0) {
                struct job *j = b->jobs[b->items[x]];
                if (j->entry->stamp > newest->entry->stamp)
                    newest = j;
                snprintf(j->index, sizeof(j->index), "%zu", np);
                x++;
            }
            policy_args(newest->entry, &b->args[a]);
            a += 4;
        }
        snprintf(lead->npol, sizeof(lead->npol), "%zu", np);
        b->args[at + 1] = (struct redis_str){lead->npol, strlen(lead->npol)};
        for (size_t x = first; x < last; x++) {
            struct job *j = b->jobs[b->items[x]];
            /* a lease id that cannot be drawn (no entropy: never seen)
             * leaves it empty, and the script refuses the take */
            (void)item_call(&j->req, j->take, j->entry->algorithm, wide, j->name, j->name_len,
                            j->permits, j->index, j->lease, &b->keys[x], &b->args[a]);
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
 * for Redis as long as --redis-timeout-ms allows; a job's own deadline
 * (Connect-Timeout-Ms) ends that job alone (queue_expire()): one impatient
 * client must not fail the others, nor cost the connection. */
static void batch_send(struct limiter_queue *q)
{
    struct batch *b = &q->batch;
    struct permitd_error err = {0, ""};
    int64_t now = clock_now_us();
    size_t nitems = 0;
    int rc;

    while (q->head != NULL && b->njobs < QUEUE_BATCH_MAX) {
        struct job *j = q->head;
        size_t n = j->plan != NULL ? j->plan->ngroups : 1;

        q->head = j->next;
        j->out = NULL;
        /* Room for this job's calls and for one per Acquire and Peek so
         * far: batch_items() lays theirs out after the AcquireBatches'. */
        if (j->deadline_us <= now || batch_reserve(b, nitems + n) != 0) {
            if (j->deadline_us <= now)
                permitd_error_set(&err, PERMITD_EDEADLINE, "deadline exceeded before calling redis");
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
    rc = redis_pipe_send(q->pipe, b->calls, b->ncalls, INT64_MAX, &err);
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
         * not read (pend_drop()). */
        *link = j->next;
        q->timed--;
        permitd_error_set(&err, PERMITD_EDEADLINE, "deadline exceeded reading policies from redis");
        j->plan->done(j->plan->ud, PERMITD_EDEADLINE, &err);
        parked_batch_end(q, j);
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
        parked_end(q, j, PERMITD_EDEADLINE, &res, &err);
    }
}

static void queue_want(void *ud, struct loop_want *w)
{
    struct limiter_queue *q = ud;

    redis_pipe_want(q->pipe, &w->fd, &w->events, &w->at_us, &w->generation);
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
    queue_loaded(q);
    if (q->head != NULL && !redis_pipe_busy(q->pipe))
        batch_send(q);
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
        parked_end(q, j, err->code, &res, err);
    }
    while (q->parked_batches != NULL) {
        struct job *j = q->parked_batches;
        q->parked_batches = j->next;
        if (j->deadline_us != INT64_MAX)
            q->timed--;
        j->plan->done(j->plan->ud, err->code, err);
        parked_batch_end(q, j);
    }
}

/* The loop is closing: its thread answers what is left, while it can. */
static void queue_close(void *ud)
{
    struct limiter_queue *q = ud;
    struct permitd_error err;

    /* The loop ends only once every deferred request is answered, so
     * nothing should be left; whatever is, is answered. */
    permitd_error_set(&err, PERMITD_EUNAVAILABLE, "permitd is shutting down");
    loader_cancel(q);           /* the loader wakes this loop no more */
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
    if ((rc = redis_pipe_new(l->redis, &q->pipe, err)) != PERMITD_OK) {
        deny_cache_free(q->deny);
        free(q);
        return rc;
    }
    if ((rc = loop_attach(loop, &src, err)) != PERMITD_OK) {
        deny_cache_free(q->deny);
        redis_pipe_free(q->pipe);
        free(q);
        return rc;
    }
    *out = q;
    return PERMITD_OK;
}

void limiter_queue_free(struct limiter_queue *q)
{
    struct permitd_error err;

    if (q == NULL)
        return;
    permitd_error_set(&err, PERMITD_EUNAVAILABLE, "permitd is shutting down");
    loader_cancel(q);
    queue_drain(q, &err);
    while (q->spare != NULL) {
        struct job *j = q->spare;
        q->spare = j->next;
        free(j);
    }
    redis_pipe_free(q->pipe);
    deny_cache_free(q->deny);
    free(q->batch.calls);
    free(q);
}

static void enqueue(struct limiter_queue *q, struct job *j)
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
static struct pend *pend_get(struct loader *ld, const char *name)
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
static void pend_drop(struct loader *ld, struct pend *p)
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
            pend_drop(ld, x->p[i]);
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
        x->state = PEND_READING;    /* waited for: pend_drop() frees one that is not */
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
                absent_put(ld->l, x->name);
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

static void loader_free(struct loader *ld)
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
static void loader_cancel(struct limiter_queue *q)
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
static void parked_end(struct limiter_queue *q, struct job *j, int rc,
                       const struct limiter_result *res, const struct permitd_error *err)
{
    if (j->deadline_us != INT64_MAX)
        q->timed--;
    loader_drop(q, &j->load);
    j->done(j->ud, rc, res, err);
    job_put(q, j);
}

/* A parked AcquireBatch answered (its caller called already): its waits
 * dropped, its plan freed, the job recycled. */
static void parked_batch_end(struct limiter_queue *q, struct job *j)
{
    struct pend **p = j->load.p;

    loader_drop(q, &j->load);
    free(p);
    j->load.p = NULL;
    limiter_plan_free(j->plan);
    free(j->plan);
    job_put(q, j);
}

/* Whether a job of policy `bucket` is parked. */
static int parked_for(const struct limiter_queue *q, const char *bucket)
{
    for (const struct job *p = q->parked; p != NULL; p = p->next)
        if (strcmp(p->req.bucket, bucket) == 0)
            return 1;
    return 0;
}

/* Parks j until the loader has read its policy (behind the jobs of the
 * same policy parked before it, which leave in the order they came); one
 * name past LOADER_PENDING_MAX is answered resource_exhausted. */
static void park(struct limiter_queue *q, struct job *j)
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
        if ((p = pend_get(ld, j->req.bucket)) != NULL) {
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
        job_put(q, j);
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
        rc = admit_entry(q->l, &j->req, j->take, 1, e, &j->entry, &res, &err);
        if (rc == PERMITD_OK && j->entry != NULL) {
            loader_drop(q, &j->load);
            if (j->deadline_us != INT64_MAX)
                q->timed--;         /* enqueue() counts it again */
            enqueue(q, j);
            return;
        }
    } else if (x->rc != PERMITD_OK) {
        err = x->err;
        rc = x->rc;
        if (rc == PERMITD_EUNAVAILABLE && j->take == DO_TAKE && fail_open(q->l, &j->req, &res)) {
            rc = PERMITD_OK;
            err = (struct permitd_error){0, ""};
        }
    } else {
        rc = permitd_error_set(&err, PERMITD_ENOTFOUND, "bucket: no policy named \"%s\"",
                               j->req.bucket);
    }
    parked_end(q, j, rc, &res, &err);
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
        parked_batch_end(q, j);
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
        enqueue(q, j);
        return;
    }
    pl->done(pl->ud, rc, &err);
    parked_batch_end(q, j);
}

/* The parked jobs whose names the loader has read, admitted or answered,
 * on q's loop; looked for only when the loader has read a name since the
 * last look. */
static void queue_loaded(struct limiter_queue *q)
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
    int rc;

    /* What the policy's copy refuses is answered here and now; a policy
     * the table lacks is read by the loader while the job is parked. */
    memset(&res, 0, sizeof(res));
    e = policies_get(q->l->policies, req->bucket);
    if (e != NULL && ((rc = admit_entry(q->l, req, take, 1, e, &e, &res, &err)) != PERMITD_OK ||
                      e == NULL)) {
        done(ud, rc, &res, &err);     /* refused, or failure_mode "open" (Redis lost it) */
        return;
    }
    /* A name Redis said a moment ago holds no policy: not asked again. */
    if (e == NULL && absent_has(q->l, req->bucket)) {
        rc = permitd_error_set(&err, PERMITD_ENOTFOUND, "bucket: no policy named \"%s\"",
                               req->bucket);
        done(ud, rc, &res, &err);
        return;
    }
    /* A bucket just denied is denied here, without Redis. */
    if (e != NULL && deny_cacheable(q, take, e) &&
        (req->request_id == NULL || req->request_id[0] == '\0') &&
        deny_answer(q, req, e, epoch, &res)) {
        policies_release(e);
        done(ud, PERMITD_OK, &res, &err);
        return;
    }
    if ((j = job_get(q)) == NULL) {
        /* Out of memory: decide right here. */
        policies_release(e);
        rc = decide(q->l, req, take, 1, 0, deadline_us, &res, &err);
        done(ud, rc, &res, &err);
        return;
    }
    j->entry = e;
    j->plan = NULL;
    j->split = 0;
    j->take = take;
    j->req = *req;              /* the caller keeps the strings until done */
    memcpy(j->app, req->app, strlen(req->app) + 1);    /* limiter_check(): a name */
    j->req.app = j->app;
    snprintf(j->request_id, sizeof(j->request_id), "%s", req->request_id ? req->request_id : "");
    j->req.request_id = j->request_id;
    j->lease[0] = '\0';
    j->epoch = epoch;
    j->sent_us = 0;
    j->deadline_us = deadline_us;
    j->done = done;
    j->ud = ud;
    if (e == NULL || parked_for(q, req->bucket))
        park(q, j);         /* behind the ones of its policy parked before it */
    else
        enqueue(q, j);
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

/* The words of a script's "inspect" answer (lua/concurrency.lua's header):
 * the RECORD's ten numbers, the window's reset, the events, k and k ages,
 * j and j leases of three numbers each. */
#define INSPECT_WORDS (REDIS_RECORD_NUMBERS + 3 + LIMITER_INSPECT_LIST_MAX + 1 + \
                       3 * LIMITER_INSPECT_LIST_MAX)

/* Reads the part of an "inspect" answer after the RECORD's numbers (x,
 * INSPECT_WORDS - REDIS_RECORD_NUMBERS words) into more; counts beyond
 * the list's room are cut to it. */
static void inspection_read(const long long *x, struct limiter_inspection *more)
{
    size_t k = x[2] < 0 ? 0 : (size_t)x[2], j;

    if (k > LIMITER_INSPECT_LIST_MAX)
        k = LIMITER_INSPECT_LIST_MAX;
    more->window_reset_after_ms = x[0];
    more->events = x[1];
    more->n_ages = k;
    for (size_t i = 0; i < k; i++)
        more->event_ages_ms[i] = x[3 + i];
    x += 3 + k;
    j = x[0] < 0 ? 0 : (size_t)x[0];
    if (j > LIMITER_INSPECT_LIST_MAX)
        j = LIMITER_INSPECT_LIST_MAX;
    more->n_leases = j;
    for (size_t i = 0; i < j; i++) {
        const long long *v = x + 1 + 3 * i;
        snprintf(more->leases[i].id_prefix, sizeof(more->leases[i].id_prefix), "%08llx",
                 (unsigned long long)v[0] & 0xffffffffULL);
        more->leases[i].permits = v[1];
        more->leases[i].expires_after_ms = v[2];
    }
}

/* limiter_inspect() once the names are checked: a peek of the bucket, and
 * for every algorithm but the token bucket (whose peek says all there is)
 * the script's mode "inspect", which answers the peek's RECORD and the
 * algorithm's view of the state in one call. A "stale" answer reloads the
 * policy and asks once more (retried), as a decision does. */
static int inspect(struct limiter *l, const struct limiter_request *req, int retried,
                   int64_t deadline_us, struct limiter_result *res,
                   struct limiter_inspection *more, struct permitd_error *err)
{
    static const struct redis_str mode_inspect = {"inspect", 7};
    char name[POLICY_REDIS_KEY_MAX], permits_s[24], lease[LIMITER_LEASE_ID_LEN + 1] = "";
    struct redis_str key, args[11];
    const struct policies_entry *e;
    long long out[INSPECT_WORDS];
    enum redis_script script;
    int rc, nitem;

    memset(res, 0, sizeof(*res));
    memset(more, 0, sizeof(*more));
    if ((rc = admit(l, req, DO_PEEK, 0, deadline_us, &e, res, err)) != PERMITD_OK || e == NULL)
        return rc;
    more->algorithm = policy_algorithm_name(e->algorithm);
    if (e->algorithm == POLICY_TOKEN_BUCKET) {
        policies_release(e);
        return decide(l, req, DO_PEEK, 0, retried, deadline_us, res, err);
    }
    /* wide, though a peek: "inspect" answers the RECORD's ten numbers
     * (a compact call's RECORD has eight); a peek draws no lease id:
     * item_call() cannot fail */
    call_head(l, mode_inspect, POLICY_INDEX, 1, args);
    policy_args(e, &args[3]);
    nitem = item_call(req, DO_PEEK, e->algorithm, 1, name, bucket_key(l, req, e, name),
                      permits_s, POLICY_INDEX, lease, &key, &args[7]);
    script = script_of(e);
    /* e is held until the call is answered: args point into its strings
     * (policy_args()), which a reload on another thread may free */
    rc = redis_script_run(l->redis, script, &key, 1, args, 7 + nitem, deadline_us, out,
                          INSPECT_WORDS, err);
    policies_release(e);
    if (rc == PERMITD_OK && out[0] == SCRIPT_STALE && !retried) {
        if ((rc = restale(l, req->bucket, out[2], 0, deadline_us, err)) != PERMITD_OK)
            return rc;
        return inspect(l, req, 1, deadline_us, res, more, err);
    }
    /* conclude() as for a second try: a stale answer now is an error */
    if ((rc = conclude(l, req, DO_PEEK, 0, 1, deadline_us, rc, out, res, err)) != PERMITD_OK)
        return rc;
    inspection_read(out + REDIS_RECORD_NUMBERS, more);
    return PERMITD_OK;
}

int limiter_inspect(struct limiter *l, const char *bucket, const char *key,
                    int64_t deadline_us, struct limiter_result *res,
                    struct limiter_inspection *more, struct permitd_error *err)
{
    struct limiter_request req = {bucket, "*", key ? key : "", 1, NULL, NULL};
    int rc;

    if ((rc = policy_check_name("name", bucket, err)) != PERMITD_OK ||
        (rc = policy_check_key("key", req.key, err)) != PERMITD_OK)
        return rc;
    if (more != NULL)
        return inspect(l, &req, 0, deadline_us, res, more, err);
    return decide(l, &req, 0, 0, 0, deadline_us, res, err);
}

int limiter_own(struct limiter *l, const char *bucket, const char *key, int take,
                int64_t deadline_us, struct limiter_result *res, struct permitd_error *err)
{
    struct limiter_request req = {bucket, "*", key ? key : "", 1, NULL, NULL};
    int rc;

    if ((rc = policy_check_key("key", req.key, err)) != PERMITD_OK)
        return rc;
    return decide(l, &req, take, 0, 0, deadline_us, res, err);
}

/* The reset deletes a bucket's state under every algorithm's letter
 * (policy.h: policy_bucket_key()), not only the policy's own algorithm's:
 * a policy whose algorithm was edited may still hold the old one's state
 * for the key, which no script reads, and deleting it is harmless. The
 * state of one layout, all letters, shares a slot (one hash tag), so each
 * layout is one DEL: the shared bucket one, a key two (spread and
 * colocated: the policy may have set or cleared colocate, and a bucket
 * written before issue 19 has the colocated one). In a cluster the two
 * layouts live in different slots, so they cannot be one DEL. */
/* After a reset (the state deleted: not before, or a denial Redis answered
 * in between would be remembered as new): every deny cache here forgets
 * what it held, and "<name> reset" on <prefix>changes tells the other
 * instances to do the same (control/follow.c), or they would deny what
 * Redis now allows until their entries ran out. */
static int reset_notice(struct limiter *l, const char *bucket, int64_t deadline_us,
                        struct permitd_error *err)
{
    char channel[160], msg[POLICY_NAME_MAX + 8];
    struct redis_str pub[3] = {{"PUBLISH", 7}, {channel, 0}, {msg, 0}};
    struct permitd_error why = {0, ""};
    int rc;

    limiter_deny_cache_clear(l);
    pub[1].len = (size_t)snprintf(channel, sizeof(channel), "%schanges", l->cfg->redis_prefix);
    pub[2].len = (size_t)snprintf(msg, sizeof(msg), "%s reset", bucket);
    rc = redis_command(l->redis, pub, 3, deadline_us, NULL, NULL, NULL, &why);
    if (rc != PERMITD_OK)
        return permitd_error_set(err, rc, "bucket of policy \"%s\" reset, but the notice to the "
                                 "other permitd instances (PUBLISH on %s) failed: %s; reset it "
                                 "again", bucket, channel, why.message);
    return PERMITD_OK;
}

int limiter_reset(struct limiter *l, const char *bucket, const char *key,
                  int64_t deadline_us, struct permitd_error *err)
{
    char names[POLICY_ALGORITHMS][POLICY_REDIS_KEY_MAX];
    struct redis_str del[1 + POLICY_ALGORITHMS];
    int rc;

    if ((rc = policy_check_name("name", bucket, err)) != PERMITD_OK ||
        (rc = policy_check_key("key", key ? key : "", err)) != PERMITD_OK)
        return rc;
    del[0].p = "DEL";
    del[0].len = 3;
    for (int colocate = 0; colocate <= 1; colocate++) {
        for (int a = 0; a < POLICY_ALGORITHMS; a++) {
            del[1 + a].p = names[a];
            del[1 + a].len = policy_bucket_key(names[a], l->cfg->redis_prefix, bucket,
                                               (enum policy_algorithm)a, colocate, key);
        }
        if ((rc = redis_command(l->redis, del, 1 + POLICY_ALGORITHMS, deadline_us, NULL, NULL,
                                NULL, err)) != PERMITD_OK)
            return rc;
        if (key == NULL || key[0] == '\0')
            break;
    }
    return reset_notice(l, bucket, deadline_us, err);
}

/* A batch naming policies the table lacks is parked while the loader reads
 * them (as an Acquire's is: a worker's loop never waits on Redis for a
 * policy), each name counted on once (j->load, sorted by name for
 * load_find()); names Redis said a moment ago hold no policy are not read
 * again, and names past LOADER_PENDING_MAX are not read (j->load.over:
 * their items answer resource_exhausted). 0: parked; 1: not parked, the
 * plan is to be made now from j->load (nothing it waits for); -1: no
 * loader (no memory, no thread), the plan reads the names itself. */
static int park_batch(struct limiter_queue *q, struct job *j, struct limiter_plan *pl)
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
        else if (!absent_has(q->l, pl->reqs[i].bucket))
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
        if (absent_has(q->l, name))
            continue;
        if ((p = pend_get(ld, name)) == NULL) {
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

void limiter_acquire_batch_queued(struct limiter_queue *q, const struct limiter_request *reqs,
                                  size_t n, int all_or_nothing, int64_t deadline_us,
                                  struct limiter_result *res, struct permitd_error *errs,
                                  limiter_batch_done_fn done, void *ud)
{
    struct permitd_error err = {0, ""};
    struct limiter *l = q->l;
    struct limiter_plan *pl = calloc(1, sizeof(*pl));
    struct job *j = pl ? job_get(q) : NULL;
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
    if ((parked = park_batch(q, j, pl)) == 0)
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
        job_put(q, j);
        return;
    }
    j->plan = pl;
    j->deadline_us = deadline_us;
    enqueue(q, j);
}

/* ---- settle (issue 22): the settle pass's calls of bucket.lua ---- */

/* bucket.lua "settle"'s ARGV for policy e (lua/bucket.lua, "settle": the
 * head and the policy's limits as every call lays them out, no items)
 * into args[7]. */
static int settle_args(const struct limiter *l, const struct policies_entry *e,
                       struct redis_str args[7])
{
    call_head(l, (struct redis_str){"settle", 6}, POLICY_INDEX, 1, args);
    policy_args(e, args + 3);
    return 7;
}

static int settle_by_slot(const void *a, const void *b)
{
    const struct redis_str *x = a, *y = b;
    unsigned sx = cluster_keyslot(x->p, x->len), sy = cluster_keyslot(y->p, y->len);

    return sx < sy ? -1 : sx > sy;
}

/* keys[0..n) through bucket.lua with args (mode `what`, for the message):
 * in a cluster one call per slot, at most LIMITER_SETTLE_CALL_KEYS keys a
 * call, every call in one pipelined round trip (per master); each call
 * answers nout numbers, added into sums[0..nout). */
static int bucket_pages(struct limiter *l, const char *what, const char *policy,
                        struct redis_str *keys, size_t n, struct redis_str *args, int nargs,
                        int nout, int64_t deadline_us, long long *sums, struct permitd_error *err)
{
    size_t ncalls = 0;      /* at most one per key (a cluster, every key its own slot) */
    struct redis_script_call *calls = calloc(n + 1, sizeof(*calls));
    long long *out = calloc((size_t)nout * (n + 1), sizeof(*out));
    int rc;

    if (calls == NULL || out == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    /* In a cluster a call's keys share one slot: the page sorted by slot,
     * one call per run of a slot. */
    if (l->slot_calls)
        qsort(keys, n, sizeof(*keys), settle_by_slot);
    for (size_t first = 0; first < n;) {
        size_t k = first + 1;
        unsigned slot = cluster_keyslot(keys[first].p, keys[first].len);
        while (k < n && k - first < LIMITER_SETTLE_CALL_KEYS &&
               (!l->slot_calls || cluster_keyslot(keys[k].p, keys[k].len) == slot))
            k++;
        calls[ncalls] = (struct redis_script_call){.keys = &keys[first], .nkeys = (int)(k - first),
                                                   .args = args, .nargs = nargs,
                                                   .out = &out[(size_t)nout * ncalls],
                                                   .nout = nout};
        ncalls++;
        first = k;
    }
    rc = redis_script_pipeline(l->redis, REDIS_SCRIPT_BUCKET, calls, ncalls, deadline_us, err);
    for (size_t c = 0; rc == PERMITD_OK && c < ncalls; c++) {
        if (calls[c].rc != PERMITD_OK)
            rc = permitd_error_set(err, calls[c].rc, "redis refused bucket.lua \"%s\"%s%s%s for "
                                   "key %.*s (see the log above)", what,
                                   policy ? " of policy \"" : "", policy ? policy : "",
                                   policy ? "\"" : "",
                                   (int)(calls[c].keys[0].len > 200 ? 200 : calls[c].keys[0].len),
                                   calls[c].keys[0].p);
        for (int k = 0; k < nout; k++)
            sums[k] += out[(size_t)nout * c + (size_t)k];
    }
done:
    free(calls);
    free(out);
    return rc;
}

int limiter_settle(struct limiter *l, const struct policies_entry *e, struct redis_str *keys,
                   size_t n, int64_t deadline_us, long long *set, long long *removed,
                   long long *gone, struct permitd_error *err)
{
    /* Only a token bucket's keys expire by its rate (the settle pass's
     * whole point); a policy that turned into another algorithm since the
     * settle was queued has fresh keys of its own letter (policy.h). */
    if (e->algorithm != POLICY_TOKEN_BUCKET)
        return PERMITD_OK;

    struct redis_str args[7];
    int nargs = settle_args(l, e, args), rc;
    long long sums[3] = {0, 0, 0};

    rc = bucket_pages(l, "settle", e->name, keys, n, args, nargs, 3, deadline_us, sums, err);
    *set += sums[0];
    *removed += sums[1];
    *gone += sums[2];
    return rc;
}

int limiter_index(struct limiter *l, struct redis_str *keys, size_t n, int64_t deadline_us,
                  long long *added, long long *removed, struct permitd_error *err)
{
    struct redis_str args[3];
    long long sums[2] = {0, 0};
    int rc;

    call_head(l, (struct redis_str){"index", 5}, "0", 0, args);
    rc = bucket_pages(l, "index", NULL, keys, n, args, 3, 2, deadline_us, sums, err);
    *added += sums[0];
    *removed += sums[1];
    return rc;
}
