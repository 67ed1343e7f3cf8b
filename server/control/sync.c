/*
 * sync.c - the MySQL -> Redis reconcile loop.
 *
 * A pass: take a consistent snapshot of every policy from MySQL; offer each
 * one to Redis with sync.lua "put", which writes it only when it differs
 * from what Redis holds and Redis's copy is older (an older row id, a
 * smaller version, or the same version from an older snapshot); then, for every policy name Redis knows of (the set <prefix>policies)
 * that the snapshot lacks, sync.lua "del" removes it unless it changed after
 * the snapshot was taken. Comparing versions inside Redis, atomically, is
 * what makes concurrent passes of several permitd instances safe in any
 * order. Only changed policies are written, so a pass over an unchanged
 * store costs one script call per policy and no writes; the calls go in
 * pipelined batches of SYNC_BATCH (one round trip a batch, per master in
 * a cluster), and a call that fails fails its policy only (logged,
 * counted, offered again at the next pass), not the pass (issue 22: 10,000
 * policies were 10,000 round trips, and one slow call failed them all).
 *
 * The limiter decides from its in-memory copy of each policy
 * (decisions/policies.h): a policy this instance wrote, or whose copy is
 * not the version MySQL has, is reloaded from Redis right after its put
 * (the hash holds what only Redis knows: the rate history, stamped with
 * Redis TIME). So a change notice that never came is healed by the next
 * pass, within one --sync-interval-ms.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "decisions/policies.h"
#include "stores/policy.h"
#include "stores/store.h"
#include "control/settle.h"
#include "control/sync.h"

#define SYNC_REDIS_DEADLINE_MS 2000
#define SYNC_BACKOFF_MAX_MS 30000
#define KICK_GAP_MS 100
#define SYNC_PROBE_MS 250           /* MySQL probed this often while backing off */
#define SYNC_BATCH 200              /* policies offered to Redis in one pipelined round trip */
#define SYNC_BATCH_FAILS 3          /* whole batches failed in a row: Redis is down, the pass ends */
#define SYNC_LOG_FAILED 10          /* failed policies logged one by one per pass */
#define SYNC_SADD_MEMBERS 60        /* names per SADD (redis.c takes 64 arguments a command) */

/* Names (policies, keys) collected from Redis's answers. */
struct names {
    char **v;
    size_t n, cap;
    int oom;
};

static void collect(void *ud, const char *str, size_t len)
{
    struct names *nm = ud;

    if (nm->n == nm->cap) {
        size_t cap = nm->cap ? nm->cap * 2 : 64;
        char **v = realloc(nm->v, cap * sizeof(*v));
        if (v == NULL) {
            nm->oom = 1;
            return;
        }
        nm->v = v;
        nm->cap = cap;
    }
    nm->v[nm->n] = strndup(str, len);
    if (nm->v[nm->n] == NULL)
        nm->oom = 1;
    else
        nm->n++;
}

static void names_clear(struct names *nm)
{
    for (size_t i = 0; i < nm->n; i++)
        free(nm->v[i]);
    nm->n = 0;
}

struct sync {
    const struct config *cfg;
    struct redis *redis;
    struct limiter *limiter;
    struct store *store;        /* used by the sync thread only */
    int snapshot_ok;            /* the last pass read MySQL (sync thread only) */
    char index_key[160];        /* <prefix>policies */

    pthread_t thread;
    int started;
    pthread_mutex_t lock;       /* guards stopping and status */
    pthread_cond_t wake;
    int stopping;
    int kicked;                 /* a pass was asked for (sync_kick) */
    struct sync_status status;
    struct settle *settle;      /* the settle runner (NULL without a limiter) */
    struct names skipped;       /* the last snapshot's skipped rows (sync_skipped()) */
    void (*pass_hook)(void *ud);        /* after every pass (sync_set_pass_hook()) */
    void *pass_hook_ud;
};

int sync_new(const struct config *cfg, struct redis *redis, struct limiter *limiter,
             struct sync **out, struct permitd_error *err)
{
    struct sync *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->cfg = cfg;
    s->redis = redis;
    s->limiter = limiter;
    snprintf(s->index_key, sizeof(s->index_key), "%spolicies", cfg->redis_prefix);
    if ((rc = store_new(cfg, &s->store, err)) != PERMITD_OK) {
        free(s);
        return rc;
    }
    if (limiter != NULL && (rc = settle_new(cfg, redis, limiter, &s->settle, err)) != PERMITD_OK) {
        store_free(s->store);
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    *out = s;
    return PERMITD_OK;
}

static int64_t deadline(void)
{
    return clock_now_us() + (int64_t)SYNC_REDIS_DEADLINE_MS * 1000;
}

/* One policy's "put" (lua/sync.lua), its arguments formatted into buffers
 * of its own so that a batch of them can be pipelined. */
struct put_call {
    char key[POLICY_REDIS_KEY_MAX], id[24], version[24], max[24], updated[24], taken[24];
    char window[24], lease[24], lease_permits[24], rsv_ttl[24], debt[24];
    struct redis_str keys[1], args[44];
    int nargs;
    long long out[2];       /* sync.lua's answer: {written, limits} */
};

/* Fills c with the "put" of p from a snapshot taken at taken_us. c must
 * stay put while its strings are used: they point into c and p. */
static void put_args(struct sync *s, const struct store_policy *p, int64_t taken_us,
                     struct put_call *c)
{
    struct redis_str *args = c->args;
    int n = 0;

    c->keys[0].p = c->key;
    c->keys[0].len = policy_redis_key(c->key, s->cfg->redis_prefix, p->name, POLICY_KEY_HASH,
                                      NULL);
    snprintf(c->id, sizeof(c->id), "%" PRIu64, p->id);
    snprintf(c->version, sizeof(c->version), "%" PRIu64, p->version);
    snprintf(c->max, sizeof(c->max), "%" PRId64, p->max_permits);
    snprintf(c->updated, sizeof(c->updated), "%" PRId64, p->updated_us);
    snprintf(c->taken, sizeof(c->taken), "%" PRId64, taken_us);
#define ARG(s_) (args[n].p = (s_), args[n].len = strlen(args[n].p), n++)
    ARG("put"); ARG(c->id); ARG(c->version); ARG(c->taken);
    ARG("name"); ARG(p->name);
    ARG("apps"); ARG(p->apps);
    ARG("max_permits"); ARG(c->max);
    /* A token bucket's hash is as before issue 20: rate, and no algorithm
     * fields; the other algorithms have no rate (lua/sync.lua, top). */
    if (p->algorithm == POLICY_TOKEN_BUCKET) {
        ARG("rate"); ARG(p->rate);
    } else {
        snprintf(c->window, sizeof(c->window), "%" PRId64, p->window_ms);
        snprintf(c->lease, sizeof(c->lease), "%" PRId64, p->lease_ms);
        ARG("algorithm"); ARG(policy_algorithm_name(p->algorithm));
        ARG("window_ms"); ARG(p->window_ms > 0 ? c->window : "");
        ARG("calendar"); ARG(policy_calendar_name(p->calendar));
        ARG("lease_ms"); ARG(p->lease_ms > 0 ? c->lease : "");
    }
    ARG("enabled"); ARG(p->enabled ? "1" : "0");
    ARG("failure_mode"); ARG(p->failure_mode);
    ARG("colocate"); ARG(p->colocate ? "1" : "0");
    /* Only a policy in shadow mode has the field (a hash without it is
     * one that enforces, as every hash before issue 23). */
    if (p->shadow) {
        ARG("shadow"); ARG("1");
    }
    /* Likewise only a policy with local leases of its own (0016). */
    if (p->local_lease[0] != '\0') {
        ARG("local_lease"); ARG(p->local_lease);
    }
    if (p->local_lease_permits > 0) {
        snprintf(c->lease_permits, sizeof(c->lease_permits), "%" PRId64,
                 p->local_lease_permits);
        ARG("local_lease_permits"); ARG(c->lease_permits);
    }
    /* Reservations (issue 38): a field only when it is not the default
     * (a hash without them reads as 5 minutes, no debt, keep). */
    if (p->reserve_ttl_ms > 0 && p->reserve_ttl_ms != 300000) {
        snprintf(c->rsv_ttl, sizeof(c->rsv_ttl), "%" PRId64, p->reserve_ttl_ms);
        ARG("reserve_ttl_ms"); ARG(c->rsv_ttl);
    }
    if (p->debt_floor > 0) {
        snprintf(c->debt, sizeof(c->debt), "%" PRId64, p->debt_floor);
        ARG("debt_floor"); ARG(c->debt);
    }
    if (p->expiry_refund) {
        ARG("reserve_expiry"); ARG("refund");
    }
    ARG("version"); ARG(c->version);
    ARG("id"); ARG(c->id);
    ARG("updated_us"); ARG(c->updated);
#undef ARG
    c->nargs = n;
}

/* Whether the limiter's copy of p must be read again after sync.lua
 * answered out[] to its put (see the top): Redis wrote it, or the copy is
 * not the version MySQL has. */
static int needs_reload(struct sync *s, const struct store_policy *p, const long long out[2])
{
    return s->limiter != NULL &&
           (out[0] == 1 ||
            policies_stamp(limiter_policies(s->limiter), p->name) != (p->id << 24) + p->version);
}

/* A settle queued for new limits once p's put is done (the settle runner
 * sets the buckets' expiry on them in the background, control/settle.c;
 * this returns at once). */
static void queue_settle(struct sync *s, const struct store_policy *p, const long long out[2])
{
    if (out[0] == 1 && out[1] == 1 && s->settle != NULL)
        settle_queue(s->settle, p->name, (p->id << 24) + p->version);
}

/* What follows sync.lua's answer out[] to p's put, once it is in the
 * index set (a written policy is added there by the caller): the limiter's
 * copy as Redis now holds it, and a settle queued for new limits. */
static int after_put(struct sync *s, const struct store_policy *p, const long long out[2],
                     struct permitd_error *err)
{
    int rc = PERMITD_OK;

    if (needs_reload(s, p, out))
        rc = policies_reload(limiter_policies(s->limiter), p->name, deadline(), NULL, err);
    if (rc == PERMITD_OK)
        queue_settle(s, p, out);
    return rc;
}

/* Offers one policy to Redis on its own (the write-through of an admin
 * edit); *written is 1 when Redis took it. The error is the script's own. */
static int put(struct sync *s, const struct store_policy *p, int64_t taken_us, int *written,
               struct permitd_error *err)
{
    struct put_call *c = malloc(sizeof(*c));
    int rc;

    if (c == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    put_args(s, p, taken_us, c);
    rc = redis_script_run(s->redis, REDIS_SCRIPT_SYNC, c->keys, 1, c->args, c->nargs, deadline(),
                          c->out, 2, err);
    *written = rc == PERMITD_OK && c->out[0] == 1;
    if (rc == PERMITD_OK && *written) {
        struct redis_str sadd[3] = {{"SADD", 4}, {s->index_key, strlen(s->index_key)},
                                    {p->name, strlen(p->name)}};
        rc = redis_command(s->redis, sadd, 3, deadline(), NULL, NULL, NULL, err);
    }
    if (rc == PERMITD_OK)
        rc = after_put(s, p, c->out, err);
    free(c);
    return rc;
}

/* A policy the pass could not bring to Redis: counted, and logged (the
 * first SYNC_LOG_FAILED of a pass one by one, the rest in the pass's
 * summary). The next pass offers it again. */
static void failed_one(struct sync_result *res, unsigned char *flag, const char *name,
                       const char *why)
{
    *flag = 1;
    if (res->failed++ < SYNC_LOG_FAILED)
        log_msg(LOG_LEVEL_WARN, "policy not synced (offered again at the next pass)",
                "policy=%s error=\"%s\"", name, why);
}

/* Offers policies[0..n) (n <= SYNC_BATCH) of a snapshot taken at taken_us
 * to Redis in one pipelined round trip (in a cluster one per master: the
 * pipeline groups the calls by master); the index set gets the written
 * ones later in the pass (index_missing()). A call that fails fails its policy only
 * (failed_one(), which sets its failed[i]); PERMITD_OK then. An error is
 * the whole batch's (Redis unreachable, the deadline): nothing of it is
 * known to be written, and the caller counts its policies as failed. */
static int put_batch(struct sync *s, const struct store_policy *policies, size_t n,
                     int64_t taken_us, struct sync_result *res, unsigned char *failed,
                     struct permitd_error *err)
{
    struct put_call *pc = calloc(n, sizeof(*pc));
    struct redis_script_call *calls = calloc(n, sizeof(*calls));
    const char **reload = calloc(n, sizeof(*reload));   /* names to read back, in order */
    int *reload_rc = calloc(n, sizeof(*reload_rc));
    size_t nreload = 0;
    int rc = PERMITD_OK;

    if (pc == NULL || calls == NULL || reload == NULL || reload_rc == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        put_args(s, &policies[i], taken_us, &pc[i]);
        calls[i].keys = pc[i].keys;
        calls[i].nkeys = 1;
        calls[i].args = pc[i].args;
        calls[i].nargs = pc[i].nargs;
        calls[i].out = pc[i].out;
        calls[i].nout = 2;
        calls[i].script = REDIS_SCRIPT_SYNC;
    }
    rc = redis_script_pipeline(s->redis, REDIS_SCRIPT_SYNC, calls, n, deadline(), err);
    if (rc != PERMITD_OK)
        goto done;
    /* The limiter's copies of the batch's policies that need it, read in
     * one pipelined round trip and installed with one table copy
     * (policies_reload_many(); issue 22: one HGETALL and one copy of the
     * whole table each made a first load of 10,000 policies take 12 s). */
    for (size_t i = 0; i < n; i++)
        if (calls[i].rc == PERMITD_OK && needs_reload(s, &policies[i], pc[i].out))
            reload[nreload++] = policies[i].name;
    if (nreload > 0) {
        struct permitd_error e = {0, ""};
        policies_reload_many(limiter_policies(s->limiter), reload, nreload, deadline(), NULL,
                             reload_rc, &e);
    }
    for (size_t i = 0, k = 0; i < n; i++) {
        const struct store_policy *p = &policies[i];

        if (calls[i].rc != PERMITD_OK) {
            failed_one(res, &failed[i], p->name, permitd_status_name(calls[i].rc));
            continue;
        }
        if (k < nreload && reload[k] == p->name && reload_rc[k++] != PERMITD_OK) {
            failed_one(res, &failed[i], p->name, "its hash could not be read back from redis");
            continue;
        }
        queue_settle(s, p, pc[i].out);
        if (pc[i].out[0] == 1) {
            res->written++;
            log_msg(LOG_LEVEL_INFO, "policy written to redis",
                    "policy=%s version=%" PRIu64 " max_permits=%" PRId64 " rate=%s enabled=%d",
                    p->name, p->version, p->max_permits, p->rate, p->enabled);
        }
    }
done:
    free(reload_rc);
    free(reload);
    free(calls);
    free(pc);
    return rc;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct store_policy *)a)->name, ((const struct store_policy *)b)->name);
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds to the index set (members: its names, sorted here) every policy of
 * the snapshot that Redis took this pass (failed[i] is 0) and the set
 * lacks: the written ones, and any whose SADD was lost before. SADDs of
 * SYNC_SADD_MEMBERS names each, all pipelined in one round trip (a first
 * load of 10,000 policies was 167 of them one by one); none over an
 * unchanged store. */
static int index_missing(struct sync *s, const struct store_snapshot *snap,
                         const unsigned char *failed, struct names *members,
                         struct permitd_error *err)
{
    size_t ncalls = snap->count / SYNC_SADD_MEMBERS + 1, c = 0;
    struct redis_str *args = calloc(ncalls * (2 + SYNC_SADD_MEMBERS), sizeof(*args));
    struct redis_command_call *calls = calloc(ncalls, sizeof(*calls));
    int rc = PERMITD_OK;

    if (args == NULL || calls == NULL) {
        free(args);
        free(calls);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    if (members->n > 0)
        qsort(members->v, members->n, sizeof(*members->v), by_str);
    for (size_t i = 0; i < snap->count; i++) {
        const char *name = snap->policies[i].name;
        struct redis_str *a = args + c * (2 + SYNC_SADD_MEMBERS);

        if (failed[i] || (members->n > 0 && bsearch(&name, members->v, members->n,
                                                    sizeof(*members->v), by_str) != NULL))
            continue;
        if (calls[c].nargs == 0) {
            a[0] = (struct redis_str){"SADD", 4};
            a[1] = (struct redis_str){s->index_key, strlen(s->index_key)};
            calls[c] = (struct redis_command_call){.args = a, .nargs = 2};
        }
        a[calls[c].nargs++] = (struct redis_str){name, strlen(name)};
        if (calls[c].nargs == 2 + SYNC_SADD_MEMBERS)
            c++;
    }
    if (c < ncalls && calls[c].nargs > 0)
        c++;
    if (c > 0)
        rc = redis_command_pipeline(s->redis, calls, c, deadline(), err);
    for (size_t i = 0; i < c && rc == PERMITD_OK; i++)
        if (calls[i].rc != PERMITD_OK)
            rc = permitd_error_set(err, calls[i].rc, "the policy index %s not updated: %s",
                                   s->index_key, permitd_status_name(calls[i].rc));
    free(args);
    free(calls);
    return rc;
}

/* Brings the index set to the snapshot (index_missing()), then removes
 * from Redis the policies the snapshot no longer has. */
static int remove_deleted(struct sync *s, const struct store_snapshot *snap,
                          const unsigned char *failed, size_t *deleted,
                          struct permitd_error *err)
{
    struct redis_str smembers[2] = {{"SMEMBERS", 8}, {s->index_key, strlen(s->index_key)}};
    struct names nm = {0};
    struct store_policy *sorted = NULL;
    char taken[24], maxid[24], key[POLICY_REDIS_KEY_MAX];
    int rc;

    *deleted = 0;
    rc = redis_command(s->redis, smembers, 2, deadline(), NULL, collect, &nm, err);
    if (rc == PERMITD_OK && nm.oom)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK)
        rc = index_missing(s, snap, failed, &nm, err);
    if (rc != PERMITD_OK || nm.n == 0)
        goto done;
    sorted = malloc((snap->count + 1) * sizeof(*sorted));
    if (sorted == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    memcpy(sorted, snap->policies, snap->count * sizeof(*sorted));
    qsort(sorted, snap->count, sizeof(*sorted), by_name);
    snprintf(taken, sizeof(taken), "%" PRId64, snap->taken_us);
    snprintf(maxid, sizeof(maxid), "%" PRIu64, snap->max_id);

    for (size_t i = 0; i < nm.n && rc == PERMITD_OK; i++) {
        struct store_policy probe;
        struct redis_str keys[1], args[3] = {{"del", 3}, {taken, strlen(taken)},
                                              {maxid, strlen(maxid)}};
        long long out[1];

        snprintf(probe.name, sizeof(probe.name), "%s", nm.v[i]);
        if (bsearch(&probe, sorted, snap->count, sizeof(*sorted), by_name) != NULL)
            continue;
        if (policy_check_name("name", nm.v[i], NULL) != PERMITD_OK)
            continue;
        keys[0].p = key;
        keys[0].len = policy_redis_key(key, s->cfg->redis_prefix, nm.v[i], POLICY_KEY_HASH, NULL);
        rc = redis_script_run(s->redis, REDIS_SCRIPT_SYNC, keys, 1, args, 3, deadline(),
                              out, 1, err);
        if (rc != PERMITD_OK)
            break;
        if (out[0] == 1) {
            struct redis_str srem[3] = {{"SREM", 4}, {s->index_key, strlen(s->index_key)},
                                        {nm.v[i], strlen(nm.v[i])}};
            (*deleted)++;
            if (s->limiter != NULL)
                policies_forget(limiter_policies(s->limiter), nm.v[i]);
            log_msg(LOG_LEVEL_INFO, "policy removed from redis", "policy=%s", nm.v[i]);
            rc = redis_command(s->redis, srem, 3, deadline(), NULL, NULL, NULL, err);
        }
    }
done:
    for (size_t i = 0; i < nm.n; i++)
        free(nm.v[i]);
    free(nm.v);
    free(sorted);
    return rc;
}

/* The limiter's copies of policies the snapshot lacks are read again from
 * Redis: a delete whose notice was lost is dropped here (its hash is gone:
 * also when the reload keeps the entry as missing, decisions/policies.h,
 * since MySQL no longer has it); a policy Redis holds that MySQL does not (created after the snapshot,
 * permitd's own login policy) stays. */
static int recheck_extras(struct sync *s, const struct store_snapshot *snap,
                          struct permitd_error *err)
{
    struct store_policy *sorted;
    char **names, **extras;
    size_t n, nextras = 0;
    int rc = PERMITD_OK, *found, *rcs;

    if (s->limiter == NULL)
        return PERMITD_OK;
    if (policies_names(limiter_policies(s->limiter), &names, &n) != PERMITD_OK)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    sorted = malloc((snap->count + 1) * sizeof(*sorted));
    extras = malloc((n + 1) * sizeof(*extras));
    found = calloc(n + 1, sizeof(*found));
    rcs = calloc(n + 1, sizeof(*rcs));
    if (sorted == NULL || extras == NULL || found == NULL || rcs == NULL) {
        free(sorted);
        free(extras);
        free(found);
        free(rcs);
        policies_names_free(names, n);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    memcpy(sorted, snap->policies, snap->count * sizeof(*sorted));
    qsort(sorted, snap->count, sizeof(*sorted), by_name);
    for (size_t i = 0; i < n; i++) {
        struct store_policy probe;
        snprintf(probe.name, sizeof(probe.name), "%s", names[i]);
        if (bsearch(&probe, sorted, snap->count, sizeof(*sorted), by_name) == NULL)
            extras[nextras++] = names[i];
    }
    /* Read in pipelined batches (policies_reload_many()), not one round
     * trip each. */
    if (nextras > 0)
        rc = policies_reload_many(limiter_policies(s->limiter), (const char *const *)extras,
                                  nextras, deadline(), found, rcs, err);
    for (size_t i = 0; i < nextras; i++)
        if (rcs[i] == PERMITD_OK && !found[i])  /* kept as missing (policies.h): MySQL says gone */
            policies_forget(limiter_policies(s->limiter), extras[i]);
    free(sorted);
    free(extras);
    free(found);
    free(rcs);
    policies_names_free(names, n);
    return rc;
}

static int has(const struct names *nm, const char *line)
{
    for (size_t i = 0; i < nm->n; i++)
        if (strcmp(nm->v[i], line) == 0)
            return 1;
    return 0;
}

/* Takes the snapshot's skipped rows as the current ones, logging each that
 * is new, and each that is gone: a row is logged once per change, not at
 * every pass of every instance. Out of memory keeps the old list (and may
 * log a row again later). */
static void note_skipped(struct sync *s, const struct store_snapshot *snap)
{
    struct names now = {0}, old;

    for (size_t i = 0; i < snap->nskipped; i++)
        collect(&now, snap->skipped[i], strlen(snap->skipped[i]));
    if (now.oom) {
        names_clear(&now);
        free(now.v);
        return;
    }
    pthread_mutex_lock(&s->lock);
    old = s->skipped;
    s->skipped = now;
    s->status.skipped = now.n;
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < now.n; i++)
        if (!has(&old, now.v[i]))
            log_msg(LOG_LEVEL_WARN, "row skipped by the sync: fix it in MySQL (logged once; /readyz "
                    "lists it)", "row=\"%s\" skipped=%zu", now.v[i], now.n);
    for (size_t i = 0; i < old.n; i++)
        if (!has(&now, old.v[i]))
            log_msg(LOG_LEVEL_INFO, "row no longer skipped by the sync", "row=\"%s\" skipped=%zu",
                    old.v[i], now.n);
    names_clear(&old);
    free(old.v);
}

int sync_skipped(struct sync *s, char ***out, size_t *n)
{
    int rc = PERMITD_OK;

    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&s->lock);
    if (s->skipped.n > 0 && (*out = calloc(s->skipped.n, sizeof(**out))) == NULL)
        rc = PERMITD_EINTERNAL;
    for (size_t i = 0; rc == PERMITD_OK && i < s->skipped.n; i++) {
        if (((*out)[i] = strdup(s->skipped.v[i])) == NULL)
            rc = PERMITD_EINTERNAL;
        else
            (*n)++;
    }
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK) {
        sync_skipped_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

void sync_skipped_free(char **v, size_t n)
{
    for (size_t i = 0; i < n && v != NULL; i++)
        free(v[i]);
    free(v);
}

int sync_once(struct sync *s, struct sync_result *res, struct permitd_error *err)
{
    struct store_snapshot *snap = NULL;
    unsigned char *failed = NULL;       /* per snapshot policy: Redis did not take it */
    int rc;

    memset(res, 0, sizeof(*res));
    s->snapshot_ok = 0;
    if ((rc = store_snapshot(s->store, &snap, err)) != PERMITD_OK)
        return rc;
    s->snapshot_ok = 1;
    res->policies = snap->count;
    note_skipped(s, snap);
    /* Batches of SYNC_BATCH policies, one round trip each. A batch that
     * fails as a whole (a slow or lost Redis) fails its own policies and
     * the pass goes on; SYNC_BATCH_FAILS of them in a row end it (Redis is
     * down: no point waiting out every batch's deadline), and so does a
     * pass that got no policy through. */
    if ((failed = calloc(snap->count + 1, 1)) == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    for (size_t i = 0, fails = 0; i < snap->count; i += SYNC_BATCH) {
        size_t n = snap->count - i < SYNC_BATCH ? snap->count - i : SYNC_BATCH;
        struct permitd_error e = {0, ""};

        if (fails == SYNC_BATCH_FAILS ||
            put_batch(s, &snap->policies[i], n, snap->taken_us, res, &failed[i], &e) != PERMITD_OK) {
            if (fails < SYNC_BATCH_FAILS) {
                *err = e;
                fails++;
                if (res->failed < SYNC_LOG_FAILED)
                    log_msg(LOG_LEVEL_WARN, "policies not synced (offered again at the next pass)",
                            "first=%s policies=%zu error=\"%s\"", snap->policies[i].name, n,
                            e.message);
            }
            memset(&failed[i], 1, n);
            res->failed += n;
        } else {
            fails = 0;
        }
    }
    if (res->failed > 0 && res->failed == snap->count) {
        rc = err->code != PERMITD_OK ? err->code
                                     : permitd_error_set(err, PERMITD_EUNAVAILABLE, "no policy "
                                                         "could be written to redis (see the log)");
        goto done;
    }
    if (res->failed > 0)
        log_msg(LOG_LEVEL_WARN, "sync pass: some policies not synced (offered again at the next "
                "pass)", "failed=%zu policies=%zu", res->failed, snap->count);
    if (s->settle != NULL)
        settle_kick(s->settle);     /* pending settles, this instance's or any other's */
    rc = remove_deleted(s, snap, failed, &res->deleted, err);
    if (rc == PERMITD_OK)
        rc = recheck_extras(s, snap, err);
done:
    free(failed);
    store_snapshot_free(snap);
    return rc;
}

int sync_write_policy(struct sync *s, const struct store_policy *p, struct permitd_error *err)
{
    int written = 0;

    /* The change's own time orders it against snapshots: any snapshot that
     * saw it is at least as new, one that did not has an older version. */
    return put(s, p, p->updated_us, &written, err);
}

int sync_own_policy(struct sync *s, const char *name, const char *const *fields, size_t n,
                    struct permitd_error *err)
{
    char key[POLICY_REDIS_KEY_MAX];
    struct redis_str keys[1], args[1 + 16];
    long long out[2];

    if (n > 16)
        return permitd_error_set(err, PERMITD_EINTERNAL, "sync_own_policy: %zu fields, the most "
                                 "is 16", n);
    keys[0].p = key;
    keys[0].len = policy_redis_key(key, s->cfg->redis_prefix, name, POLICY_KEY_HASH, NULL);
    args[0] = (struct redis_str){"set", 3};
    for (size_t i = 0; i < n; i++)
        args[1 + i] = (struct redis_str){fields[i], strlen(fields[i])};
    return redis_script_run(s->redis, REDIS_SCRIPT_SYNC, keys, 1, args, (int)n + 1, deadline(),
                            out, 2, err);
}

/* The change notice lua/sync.lua sends after its own writes, for a delete
 * made here: "<name> 0" on <prefix>changes. */
static int notify(struct sync *s, const char *name, struct permitd_error *err)
{
    char channel[160], msg[POLICY_NAME_MAX + 4];
    struct redis_str pub[3] = {{"PUBLISH", 7}, {channel, 0}, {msg, 0}};

    pub[1].len = (size_t)snprintf(channel, sizeof(channel), "%schanges", s->cfg->redis_prefix);
    pub[2].len = (size_t)snprintf(msg, sizeof(msg), "%s 0", name);
    return redis_command(s->redis, pub, 3, deadline(), NULL, NULL, NULL, err);
}

int sync_remove_policy(struct sync *s, const char *name, struct permitd_error *err)
{
    char key[POLICY_REDIS_KEY_MAX];
    struct redis_str del[2], srem[3];
    int rc;

    del[0].p = "DEL";
    del[0].len = 3;
    del[1].p = key;
    del[1].len = policy_redis_key(key, s->cfg->redis_prefix, name, POLICY_KEY_HASH, NULL);
    if ((rc = redis_command(s->redis, del, 2, deadline(), NULL, NULL, NULL, err)) != PERMITD_OK)
        return rc;
    srem[0].p = "SREM";
    srem[0].len = 4;
    srem[1].p = s->index_key;
    srem[1].len = strlen(s->index_key);
    srem[2].p = name;
    srem[2].len = strlen(name);
    if ((rc = redis_command(s->redis, srem, 3, deadline(), NULL, NULL, NULL, err)) != PERMITD_OK)
        return rc;
    return notify(s, name, err);
}

void sync_get_status(struct sync *s, struct sync_status *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->status;
    pthread_mutex_unlock(&s->lock);
}

/* Sleeps (s->lock held, released while waiting) for up to ms, until a
 * kick or a stop. With probe set (the last pass could not read MySQL) it
 * asks MySQL for a SELECT 1 every SYNC_PROBE_MS meanwhile and returns as
 * soon as one is answered: the backoff paces the failed passes and their
 * log lines, not how long /readyz stays 503 after MySQL is back (issue 17:
 * up to the whole backoff, 8 s and more). A probe that fails logs nothing.
 * The store is the sync thread's own, so probing it here is safe. */
static void wait_or_probe(struct sync *s, int64_t ms, int probe)
{
    int64_t end = clock_now_us() + ms * 1000;

    while (!s->stopping && !s->kicked) {
        int64_t left = (end - clock_now_us()) / 1000, step = left;
        struct permitd_error err = {0, ""};
        struct timespec until;
        int answered;

        if (left <= 0)
            return;
        if (probe && step > SYNC_PROBE_MS)
            step = SYNC_PROBE_MS;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += step / 1000;
        until.tv_nsec += (step % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        while (!s->stopping && !s->kicked &&
               pthread_cond_timedwait(&s->wake, &s->lock, &until) == 0)
            ;
        if (!probe || s->stopping || s->kicked || clock_now_us() >= end)
            continue;
        pthread_mutex_unlock(&s->lock);
        answered = store_ping(s->store, &err) == PERMITD_OK;
        pthread_mutex_lock(&s->lock);
        if (answered) {
            log_msg(LOG_LEVEL_INFO, "mysql answers again: sync pass now", "backoff_left_ms=%" PRId64,
                    (end - clock_now_us()) / 1000);
            return;
        }
    }
}

/* The thread: a pass, then sleep for the interval, or for a growing
 * backoff while passes fail; one log line per failure. */
static void *run(void *arg)
{
    struct sync *s = arg;
    int64_t wait_ms = 0;

    for (;;) {
        struct sync_result res;
        struct permitd_error err = {0, ""};
        int64_t started;
        int rc;

        pthread_mutex_lock(&s->lock);
        if (wait_ms > 0 && !s->stopping)
            wait_or_probe(s, wait_ms, s->status.failing && !s->snapshot_ok);
        if (s->stopping) {
            pthread_mutex_unlock(&s->lock);
            break;
        }
        if (s->kicked) {
            /* Asked for: not more often than every KICK_GAP_MS. */
            int64_t since = (clock_now_us() - s->status.last_attempt_us) / 1000;
            s->kicked = 0;
            if (since < KICK_GAP_MS) {
                pthread_mutex_unlock(&s->lock);
                usleep((useconds_t)(KICK_GAP_MS - since) * 1000);
                pthread_mutex_lock(&s->lock);
            }
        }
        pthread_mutex_unlock(&s->lock);

        started = clock_now_us();
        rc = sync_once(s, &res, &err);
        if (s->pass_hook != NULL)
            s->pass_hook(s->pass_hook_ud);

        pthread_mutex_lock(&s->lock);
        s->status.passes++;
        s->status.last_pass_us = clock_now_us() - started;
        s->status.policy_failures += res.failed;
        s->status.last_attempt_us = clock_now_us();
        if (rc == PERMITD_OK) {
            if (s->status.failing)
                log_msg(LOG_LEVEL_INFO, "sync recovered", "policies=%zu", res.policies);
            s->status.failing = 0;
            s->status.ever_succeeded = 1;
            s->status.last_success_us = s->status.last_attempt_us;
            s->status.last_success_unix_ms = clock_wall_ms();
            s->status.last = res;
            s->status.last_error[0] = '\0';
            wait_ms = s->cfg->sync_interval_ms;
        } else {
            int64_t cap = s->cfg->sync_interval_ms > SYNC_BACKOFF_MAX_MS
                        ? s->cfg->sync_interval_ms : SYNC_BACKOFF_MAX_MS;
            s->status.failures++;
            /* Back off from MySQL only. A pass that read its snapshot failed
             * on Redis, whose client fails fast and paces its own reconnects:
             * retrying every interval costs what a normal pass does, and a
             * Redis that comes back empty has its policies again within one
             * interval (a grown backoff left every policy not_found for up to
             * SYNC_BACKOFF_MAX_MS after Redis was back: tests/chaos). */
            wait_ms = s->status.failing && !s->snapshot_ok ? wait_ms * 2
                                                           : s->cfg->sync_interval_ms;
            if (wait_ms > cap)
                wait_ms = cap;
            s->status.failing = 1;
            snprintf(s->status.last_error, sizeof(s->status.last_error), "%s", err.message);
            log_msg(LOG_LEVEL_WARN, "sync failed", "error=\"%s\" retry_in_ms=%" PRId64,
                    err.message, wait_ms);
        }
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

void sync_set_pass_hook(struct sync *s, void (*fn)(void *ud), void *ud)
{
    s->pass_hook = fn;
    s->pass_hook_ud = ud;
}

void sync_kick(void *ud)
{
    struct sync *s = ud;

    pthread_mutex_lock(&s->lock);
    if (!s->kicked) {
        s->kicked = 1;
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
}

struct settle *sync_settle(struct sync *s)
{
    return s->settle;
}

int sync_start(struct sync *s, struct permitd_error *err)
{
    if (s->settle != NULL && settle_start(s->settle, err) != PERMITD_OK)
        return err->code;
    if (pthread_create(&s->thread, NULL, run, s) != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "cannot start the sync thread");
    s->started = 1;
    return PERMITD_OK;
}

void sync_free(struct sync *s)
{
    if (s == NULL)
        return;
    if (s->started) {
        pthread_mutex_lock(&s->lock);
        s->stopping = 1;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->thread, NULL);
    }
    settle_free(s->settle);
    store_free(s->store);
    names_clear(&s->skipped);
    free(s->skipped.v);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
