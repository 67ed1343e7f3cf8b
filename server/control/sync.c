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
 * store costs one script call per policy and no writes.
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
#include "stores/cluster.h"
#include "stores/policy.h"
#include "stores/store.h"
#include "control/sync.h"

#define SYNC_REDIS_DEADLINE_MS 2000
#define SETTLE_SCAN_COUNT 1000      /* SCAN's COUNT: slots looked at per step */
#define SETTLE_CALL_KEYS 500        /* buckets per settle script call */
#define SYNC_BACKOFF_MAX_MS 30000
#define KICK_GAP_MS 100
#define SYNC_PROBE_MS 250           /* MySQL probed this often while backing off */

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
    struct names unsettled;     /* policies whose settle() failed: tried again each pass */
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
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    *out = s;
    return PERMITD_OK;
}

static int64_t deadline(void)
{
    return clock_now_us() + (int64_t)SYNC_REDIS_DEADLINE_MS * 1000;
}

static int settle(struct sync *s, const char *name, struct permitd_error *err);
static void settle_or_later(struct sync *s, const char *name);

/* Offers one policy to Redis; *written is 1 when Redis took it. */
static int put(struct sync *s, const struct store_policy *p, int64_t taken_us, int *written,
               struct permitd_error *err)
{
    char key[POLICY_REDIS_KEY_MAX], id[24], version[24], max[24], updated[24], taken[24];
    struct redis_str keys[1], args[24];
    long long out[2];
    int n = 0, rc;

    keys[0].p = key;
    keys[0].len = policy_redis_key(key, s->cfg->redis_prefix, p->name, POLICY_KEY_HASH, NULL);
    snprintf(id, sizeof(id), "%" PRIu64, p->id);
    snprintf(version, sizeof(version), "%" PRIu64, p->version);
    snprintf(max, sizeof(max), "%" PRId64, p->max_permits);
    snprintf(updated, sizeof(updated), "%" PRId64, p->updated_us);
    snprintf(taken, sizeof(taken), "%" PRId64, taken_us);
#define ARG(s_) (args[n].p = (s_), args[n].len = strlen(args[n].p), n++)
    ARG("put"); ARG(id); ARG(version); ARG(taken);
    ARG("name"); ARG(p->name);
    ARG("apps"); ARG(p->apps);
    ARG("max_permits"); ARG(max);
    ARG("rate"); ARG(p->rate);
    ARG("enabled"); ARG(p->enabled ? "1" : "0");
    ARG("failure_mode"); ARG(p->failure_mode);
    ARG("colocate"); ARG(p->colocate ? "1" : "0");
    ARG("version"); ARG(version);
    ARG("id"); ARG(id);
#undef ARG
    args[n].p = "updated_us"; args[n].len = 10; n++;
    args[n].p = updated; args[n].len = strlen(updated); n++;

    rc = redis_script_run(s->redis, REDIS_SCRIPT_SYNC, keys, 1, args, n, deadline(), out, 2, err);
    if (rc != PERMITD_OK)
        return rc;
    *written = out[0] == 1;
    if (*written) {
        struct redis_str sadd[3] = {{"SADD", 4}, {s->index_key, strlen(s->index_key)},
                                    {p->name, strlen(p->name)}};
        rc = redis_command(s->redis, sadd, 3, deadline(), NULL, NULL, NULL, err);
    }
    /* The limiter's copy: as Redis now holds it (see the top). */
    if (rc == PERMITD_OK && s->limiter != NULL &&
        (*written || policies_stamp(limiter_policies(s->limiter), p->name) !=
                     (p->id << 24) + p->version))
        rc = policies_reload(limiter_policies(s->limiter), p->name, deadline(), NULL, err);
    if (rc == PERMITD_OK && *written && out[1] == 1)
        settle_or_later(s, p->name);
    return rc;
}

static int by_slot(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    unsigned sx = cluster_keyslot(x, strlen(x)), sy = cluster_keyslot(y, strlen(y));

    return sx < sy ? -1 : sx > sy;
}

/* Settles the buckets in nm (bucket.lua "settle") under the limits of e,
 * SETTLE_CALL_KEYS to a script call, all of them in one round trip; adds up
 * its answers. */
static int settle_page(struct sync *s, const struct policies_entry *e, const struct names *nm,
                       long long *set, long long *removed, struct permitd_error *err)
{
    const struct redis_str args[6] = {
        {"settle", 6}, {"1", 1}, {e->stamp_s, strlen(e->stamp_s)}, {e->max_s, strlen(e->max_s)},
        {e->rate_s, strlen(e->rate_s)}, {e->rates, strlen(e->rates)}};
    size_t ncalls = nm->n;     /* at most one per key (a cluster, every key its own slot) */
    struct redis_str *keys = malloc(nm->n * sizeof(*keys));
    struct redis_script_call *calls = calloc(ncalls, sizeof(*calls));
    long long *out = calloc(2 * ncalls, sizeof(*out));
    int rc = PERMITD_OK;

    if (keys == NULL || calls == NULL || out == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    /* In a cluster, a call's keys share one slot: the page sorted by slot,
     * one call per run of a slot (at most SETTLE_CALL_KEYS keys). */
    if (s->limiter != NULL && limiter_slot_calls(s->limiter))
        qsort(nm->v, nm->n, sizeof(*nm->v), by_slot);
    for (size_t i = 0; i < nm->n; i++)
        keys[i] = (struct redis_str){nm->v[i], strlen(nm->v[i])};
    ncalls = 0;
    for (size_t first = 0; first < nm->n;) {
        size_t k = first + 1;
        unsigned slot = cluster_keyslot(keys[first].p, keys[first].len);
        while (k < nm->n && k - first < SETTLE_CALL_KEYS &&
               (s->limiter == NULL || !limiter_slot_calls(s->limiter) ||
                cluster_keyslot(keys[k].p, keys[k].len) == slot))
            k++;
        calls[ncalls] = (struct redis_script_call){.keys = &keys[first], .nkeys = (int)(k - first),
                                                   .args = args, .nargs = 6,
                                                   .out = &out[2 * ncalls], .nout = 2};
        ncalls++;
        first = k;
    }
    rc = redis_script_pipeline(s->redis, REDIS_SCRIPT_BUCKET, calls, ncalls, deadline(), err);
    for (size_t c = 0; rc == PERMITD_OK && c < ncalls; c++) {
        if (calls[c].rc != PERMITD_OK)
            rc = permitd_error_set(err, calls[c].rc, "redis refused bucket.lua \"settle\" "
                                   "(see the log above)");
        *set += out[2 * c];
        *removed += out[2 * c + 1];
    }
done:
    free(keys);
    free(calls);
    free(out);
    return rc;
}

/* Runs sync.lua op on the policy hash `hash` with one more argument (arg,
 * or none when NULL); *out receives the first number of its answer. */
static int history_op(struct sync *s, const char *hash, const char *op, const char *arg,
                      long long *out, struct permitd_error *err)
{
    struct redis_str keys[1] = {{hash, strlen(hash)}};
    struct redis_str args[2] = {{op, strlen(op)}, {arg, arg ? strlen(arg) : 0}};

    return redis_script_run(s->redis, REDIS_SCRIPT_SYNC, keys, 1, args, arg ? 2 : 1, deadline(),
                            out, 1, err);
}

/* A policy's max_permits or rate changed (sync.lua said so): each of its
 * buckets is set to expire when it would be full under the new limits
 * (bucket.lua "settle"). Their keys were set to expire on the old limits'
 * schedule, which under slower ones (a lower rate, a higher max) comes too
 * soon: a missing key reads as a full bucket. The buckets are found with
 * SCAN, a step at a time, each step's settled in one round trip; a bucket
 * written meanwhile already has the new limits' expiry.
 *
 * The same pass bounds the policy's rate history (lua/bucket.lua, top):
 * "settle" rewrites each bucket stamped before the newest rate edit as of
 * now, so once the scan is through, no bucket is stamped before the newest
 * edit it saw (a bucket written since is stamped after it), and sync.lua
 * "trim" drops the history up to that edit. Decisions never wait for this:
 * they fold the history themselves. */
static int settle(struct sync *s, const char *name, struct permitd_error *err)
{
    const char *prefix = s->cfg->redis_prefix;
    char hash[POLICY_REDIS_KEY_MAX], one[POLICY_REDIS_KEY_MAX];
    char patterns[2][POLICY_PATTERN_MAX], cursor[24] = "0";
    struct names nm = {0};
    char edit[24];
    long long set = 0, removed = 0, newest = 0, left = 0;
    int64_t started = clock_now_us();
    size_t steps = 0;
    const struct policies_entry *e;
    int rc = PERMITD_OK;

    if (s->limiter == NULL)
        return PERMITD_OK;
    policy_redis_key(hash, prefix, name, POLICY_KEY_HASH, NULL);
    if ((rc = history_op(s, hash, "newest", NULL, &newest, err)) != PERMITD_OK)
        return rc;
    /* The limits as Redis holds them now: the copy put() just reloaded. */
    if ((e = policies_get(limiter_policies(s->limiter), name)) == NULL)
        return PERMITD_OK;              /* deleted meanwhile: its buckets expire */
    if (e->broken != NULL) {
        policies_release(e);
        return permitd_error_set(err, PERMITD_EINTERNAL, "policy \"%s\" in redis is not a "
                                 "valid policy: %s", name, e->broken);
    }
    /* The keyed buckets of both layouts (stores/policy.h: spread over the
     * slots, or colocated, as every bucket before issue 19 was), each found
     * by its own SCAN pattern, and the shared bucket. */
    policy_bucket_patterns(patterns, prefix, name);
    policy_redis_key(one, prefix, name, POLICY_KEY_BUCKET, "");    /* the shared bucket */
    collect(&nm, one, strlen(one));
    for (int p = 0; p < 2 && rc == PERMITD_OK; p++) {
        strcpy(cursor, "0");
        do {
            rc = redis_scan(s->redis, cursor, patterns[p], SETTLE_SCAN_COUNT, deadline(), collect,
                            &nm, err);
            if (rc == PERMITD_OK && nm.oom)
                rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            if (rc == PERMITD_OK && nm.n > 0)
                rc = settle_page(s, e, &nm, &set, &removed, err);
            names_clear(&nm);
            steps++;
        } while (rc == PERMITD_OK && strcmp(cursor, "0") != 0);
    }
    free(nm.v);
    policies_release(e);
    snprintf(edit, sizeof(edit), "%lld", newest);
    if (rc == PERMITD_OK && newest > 0)
        rc = history_op(s, hash, "trim", edit, &left, err);
    if (rc == PERMITD_OK)
        log_msg(LOG_LEVEL_INFO, "policy limits changed: buckets set to expire on the new ones",
                "policy=%s buckets=%lld full_removed=%lld scan_steps=%zu ms=%lld "
                "rate_edit_us=%lld rate_history_left=%lld", name, set, removed, steps,
                (long long)(clock_now_us() - started) / 1000, newest, left);
    return rc;
}

/* settle(), or, when it fails, again at the next passes until it is done
 * (sync.lua reports a change of limits once: to the instance that wrote
 * it). The policy itself is written either way. */
static void settle_or_later(struct sync *s, const char *name)
{
    struct permitd_error err = {0, ""};
    int known = 0;

    if (settle(s, name, &err) == PERMITD_OK)
        return;
    log_msg(LOG_LEVEL_WARN, "buckets keep the expiry of the policy's old limits until the next pass",
            "policy=%s error=\"%s\"", name, err.message);
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->unsettled.n && !known; i++)
        known = strcmp(s->unsettled.v[i], name) == 0;
    if (!known) {
        collect(&s->unsettled, name, strlen(name));
        s->unsettled.oom = 0;   /* not kept: logged above all the same */
    }
    pthread_mutex_unlock(&s->lock);
}

/* Tries again the settles that failed before. */
static void settle_again(struct sync *s)
{
    struct names todo;

    pthread_mutex_lock(&s->lock);
    todo = s->unsettled;
    s->unsettled = (struct names){0};
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < todo.n; i++)
        settle_or_later(s, todo.v[i]);
    names_clear(&todo);
    free(todo.v);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct store_policy *)a)->name, ((const struct store_policy *)b)->name);
}

/* Removes from Redis the policies the snapshot no longer has. */
static int remove_deleted(struct sync *s, const struct store_snapshot *snap, size_t *deleted,
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
    char **names;
    size_t n;
    int rc = PERMITD_OK, found;

    if (s->limiter == NULL)
        return PERMITD_OK;
    if (policies_names(limiter_policies(s->limiter), &names, &n) != PERMITD_OK)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if ((sorted = malloc((snap->count + 1) * sizeof(*sorted))) == NULL) {
        policies_names_free(names, n);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    memcpy(sorted, snap->policies, snap->count * sizeof(*sorted));
    qsort(sorted, snap->count, sizeof(*sorted), by_name);
    for (size_t i = 0; i < n && rc == PERMITD_OK; i++) {
        struct store_policy probe;
        snprintf(probe.name, sizeof(probe.name), "%s", names[i]);
        if (bsearch(&probe, sorted, snap->count, sizeof(*sorted), by_name) != NULL)
            continue;
        rc = policies_reload(limiter_policies(s->limiter), names[i], deadline(), &found, err);
        if (rc == PERMITD_OK && !found)     /* kept as missing (policies.h): MySQL says gone */
            policies_forget(limiter_policies(s->limiter), names[i]);
    }
    free(sorted);
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
    int rc;

    memset(res, 0, sizeof(*res));
    s->snapshot_ok = 0;
    if ((rc = store_snapshot(s->store, &snap, err)) != PERMITD_OK)
        return rc;
    s->snapshot_ok = 1;
    res->policies = snap->count;
    note_skipped(s, snap);
    for (size_t i = 0; i < snap->count; i++) {
        int written = 0;
        if ((rc = put(s, &snap->policies[i], snap->taken_us, &written, err)) != PERMITD_OK)
            goto done;
        if (written) {
            res->written++;
            log_msg(LOG_LEVEL_INFO, "policy written to redis",
                    "policy=%s version=%" PRIu64 " max_permits=%" PRId64 " rate=%s enabled=%d",
                    snap->policies[i].name, snap->policies[i].version,
                    snap->policies[i].max_permits, snap->policies[i].rate,
                    snap->policies[i].enabled);
        }
    }
    settle_again(s);
    rc = remove_deleted(s, snap, &res->deleted, err);
    if (rc == PERMITD_OK)
        rc = recheck_extras(s, snap, err);
done:
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

        rc = sync_once(s, &res, &err);
        if (s->pass_hook != NULL)
            s->pass_hook(s->pass_hook_ud);

        pthread_mutex_lock(&s->lock);
        s->status.passes++;
        s->status.last_attempt_us = clock_now_us();
        if (rc == PERMITD_OK) {
            if (s->status.failing)
                log_msg(LOG_LEVEL_INFO, "sync recovered", "policies=%zu", res.policies);
            s->status.failing = 0;
            s->status.ever_succeeded = 1;
            s->status.last_success_us = s->status.last_attempt_us;
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

int sync_start(struct sync *s, struct permitd_error *err)
{
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
    store_free(s->store);
    names_clear(&s->unsettled);
    free(s->unsettled.v);
    names_clear(&s->skipped);
    free(s->skipped.v);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
