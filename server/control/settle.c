/*
 * settle.c - the settle runner: a policy's buckets set to expire on its new
 * limits, in the background, every master scanned in parallel.
 *
 * Why a settle at all: every bucket write sets its key to expire when the
 * bucket would be full, and a missing key reads as full. After a lower
 * rate or a higher max_permits, keys written under the old limits expire
 * too soon; bucket.lua "settle" sets each one's expiry again, and rewrites
 * a bucket stamped before the newest rate edit as of now, so that the rate
 * history can then be trimmed (lua/bucket.lua, top). Decisions never wait
 * for it: from the write on, they are exact under the new limits.
 *
 * Why here, and not on the thread that made the edit: the buckets are
 * found by SCAN, whose cost grows with the keyspace (0.9 s per million
 * keys, issue 22). So an edit only records that a settle is due, in the
 * Redis set <prefix>settle, a member "<stamp> <name>" per edit (stamp: the
 * version stamp the edit wrote, MySQL row id * 2^24 + version), and wakes
 * this runner; the admin RPC and the sync pass go on at once. The runner,
 * at its start and at every sync pass, reads the set (so a settle queued
 * by an instance that died is finished by another, or by the next start)
 * and settles each policy named:
 *   - a lease, the key <prefix>settle:<name> (SET NX PX, renewed while the
 *     work goes on, deleted when done or failed), keeps two instances from
 *     doing the same work twice; one whose holder died expires after
 *     SETTLE_LEASE_MS. Should two settle one policy all the same (a lease
 *     lost to a stall), no harm is done: settle is idempotent. It sets a
 *     key's expiry from the bucket's state and the limits, both the same
 *     for both; its rewrite of a bucket stamped before the newest edit, as
 *     of now, holds the same tokens a decision would read at any later
 *     time (after the newest edit one rate applies, and the cap at
 *     max_permits commutes with it); a bucket written under a newer
 *     version is left alone; and the history trim drops only entries older
 *     than every bucket, the one scan that finished having rewritten all
 *     the older ones.
 *   - one thread per master (redis_masters(): one on a single Redis) SCANs
 *     that master only, SETTLE_SCAN_COUNT keys a step, and sends each
 *     step's buckets to limiter_settle() (the one door to bucket.lua), one
 *     pipelined round trip a step. So the settle takes the time of the
 *     largest master's keyspace, not the sum over the cluster, and each
 *     thread's cost grows with its master's keys. The threads have their
 *     own connections (redis.c: per thread), made at their start, and
 *     their own Redis timeout (redis_thread_timeout(): each call may take
 *     SETTLE_REDIS_DEADLINE_MS), since --redis-timeout-ms is sized for the
 *     decision path and a step on a big keyspace may take longer.
 *   - progress is logged every SETTLE_PROGRESS_MS (keys found per master),
 *     and once at the end with totals and time; /metrics has the counters
 *     (settle_get_status()).
 *   - done: the history trimmed (sync.lua "trim"), the members of the set
 *     that the settle covered removed (an edit queued meanwhile with a
 *     newer stamp stays, and is settled next), the lease deleted. A
 *     failure leaves the members: the next pass, here or on any instance,
 *     tries again.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "decisions/policies.h"
#include "stores/policy.h"
#include "control/settle.h"

#define SETTLE_REDIS_DEADLINE_MS 2000   /* each Redis call's, and how long it may wait */
#define SETTLE_SCAN_COUNT 1000          /* SCAN's COUNT: slots looked at per step */
#define SETTLE_LEASE_MS 15000           /* a lease's life; renewed every progress tick */
#define SETTLE_PROGRESS_MS 2000         /* a progress line (and a lease renewal) this often */

/* One pending edit, as read from <prefix>settle. */
struct settle_item {
    char member[POLICY_NAME_MAX + 32];  /* as the set holds it */
    char name[POLICY_NAME_MAX + 1];
    uint64_t stamp;
};

/* Strings collected from Redis's answers. */
struct strs {
    char **v;
    size_t n, cap;
    int oom;
};

static void collect(void *ud, const char *str, size_t len)
{
    struct strs *sv = ud;

    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 64;
        char **v = realloc(sv->v, cap * sizeof(*v));
        if (v == NULL) {
            sv->oom = 1;
            return;
        }
        sv->v = v;
        sv->cap = cap;
    }
    if ((sv->v[sv->n] = strndup(str, len)) == NULL)
        sv->oom = 1;
    else
        sv->n++;
}

static void strs_clear(struct strs *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    sv->n = 0;
    sv->oom = 0;
}

struct settle {
    const struct config *cfg;
    struct redis *redis;
    struct limiter *limiter;
    char set_key[160];          /* <prefix>settle */
    char owner[64];             /* this instance's lease value */

    pthread_t thread;
    int started;
    pthread_mutex_t lock;       /* guards what follows */
    pthread_cond_t wake;
    int stopping;
    int kicked;
    struct strs unrecorded;     /* members whose SADD failed: recorded at the next pass */
    struct settle_status status;
};

static int64_t deadline(void)
{
    return clock_now_us() + (int64_t)SETTLE_REDIS_DEADLINE_MS * 1000;
}

int settle_new(const struct config *cfg, struct redis *redis, struct limiter *limiter,
               struct settle **out, struct permitd_error *err)
{
    struct settle *st = calloc(1, sizeof(*st));
    struct timespec ts;

    *out = NULL;
    if (st == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    st->cfg = cfg;
    st->redis = redis;
    st->limiter = limiter;
    snprintf(st->set_key, sizeof(st->set_key), "%ssettle", cfg->redis_prefix);
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(st->owner, sizeof(st->owner), "pid %ld at %lld.%09ld", (long)getpid(),
             (long long)ts.tv_sec, ts.tv_nsec);
    pthread_mutex_init(&st->lock, NULL);
    pthread_cond_init(&st->wake, NULL);
    *out = st;
    return PERMITD_OK;
}

/* SADD member to <prefix>settle. */
static int record(struct settle *st, const char *member, struct permitd_error *err)
{
    struct redis_str sadd[3] = {{"SADD", 4}, {st->set_key, strlen(st->set_key)},
                                {member, strlen(member)}};

    return redis_command(st->redis, sadd, 3, deadline(), NULL, NULL, NULL, err);
}

void settle_queue(struct settle *st, const char *name, uint64_t stamp)
{
    struct permitd_error err = {0, ""};
    char member[POLICY_NAME_MAX + 32];

    snprintf(member, sizeof(member), "%" PRIu64 " %s", stamp, name);
    if (record(st, member, &err) != PERMITD_OK) {
        log_msg(LOG_LEVEL_WARN, "settle not recorded in redis yet: tried again at the next pass",
                "policy=%s stamp=%" PRIu64 " error=\"%s\"", name, stamp, err.message);
        pthread_mutex_lock(&st->lock);
        collect(&st->unrecorded, member, strlen(member));
        pthread_mutex_unlock(&st->lock);
    }
    settle_kick(st);
}

void settle_kick(struct settle *st)
{
    pthread_mutex_lock(&st->lock);
    st->kicked = 1;
    pthread_cond_signal(&st->wake);
    pthread_mutex_unlock(&st->lock);
}

void settle_get_status(struct settle *st, struct settle_status *out)
{
    pthread_mutex_lock(&st->lock);
    *out = st->status;
    pthread_mutex_unlock(&st->lock);
}

static int stopping(struct settle *st)
{
    int stop;

    pthread_mutex_lock(&st->lock);
    stop = st->stopping;
    pthread_mutex_unlock(&st->lock);
    return stop;
}

/* Lets this thread's Redis calls take up to SETTLE_REDIS_DEADLINE_MS,
 * not --redis-timeout-ms (the decision path's, 50 ms by default): a SCAN
 * step or a settle page on a loaded Redis with millions of keys may take
 * longer, and with the decision path's timeout every attempt failed and
 * started again from the first key (issue 22: at 10 M keys a settle never
 * finished). Called at the start of each thread that calls Redis here. */
static int wait_long(struct settle *st, struct permitd_error *err)
{
    return redis_thread_timeout(st->redis, SETTLE_REDIS_DEADLINE_MS, err);
}

/* ---- one master's share of one policy's settle ---- */

struct master_job {
    struct settle *st;
    const struct policies_entry *e;
    char (*patterns)[POLICY_PATTERN_MAX];
    size_t master;
    char node[REDIS_WHERE_MAX];     /* its address, after the first step */
    _Atomic uint64_t keys;          /* bucket keys found so far */
    long long set, removed;
    size_t steps;
    int rc;
    struct permitd_error err;
    pthread_t thread;
    int running;                    /* a thread was started and not joined yet */
    _Atomic int finished;           /* scan_master() has returned */
};

/* The thread of one master: both SCAN patterns over that master, each
 * step's buckets settled in one round trip. Stops between steps when the
 * runner stops (the settle stays pending). */
static void *scan_master(void *arg)
{
    struct master_job *j = arg;
    struct strs keys = {0};
    struct redis_str *page = NULL;
    size_t page_cap = 0;

    j->rc = wait_long(j->st, &j->err);
    for (int p = 0; p < 2 && j->rc == PERMITD_OK; p++) {
        char cursor[24] = "0";
        do {
            if (stopping(j->st)) {
                j->rc = permitd_error_set(&j->err, PERMITD_ECANCELED, "permitd is stopping");
                break;
            }
            j->rc = redis_scan_master(j->st->redis, j->master, j->node, cursor, j->patterns[p],
                                      SETTLE_SCAN_COUNT, deadline(), collect, &keys, &j->err);
            if (j->rc == PERMITD_OK && keys.oom)
                j->rc = permitd_error_set(&j->err, PERMITD_EINTERNAL, "out of memory");
            if (j->rc == PERMITD_OK && keys.n > page_cap) {
                struct redis_str *grown = realloc(page, keys.n * sizeof(*page));
                if (grown == NULL)
                    j->rc = permitd_error_set(&j->err, PERMITD_EINTERNAL, "out of memory");
                else {
                    page = grown;
                    page_cap = keys.n;
                }
            }
            if (j->rc == PERMITD_OK && keys.n > 0) {
                for (size_t i = 0; i < keys.n; i++)
                    page[i] = (struct redis_str){keys.v[i], strlen(keys.v[i])};
                j->rc = limiter_settle(j->st->limiter, j->e, page, keys.n, deadline(), &j->set,
                                       &j->removed, &j->err);
                atomic_fetch_add(&j->keys, keys.n);
            }
            strs_clear(&keys);
            j->steps++;
        } while (j->rc == PERMITD_OK && strcmp(cursor, "0") != 0);
    }
    free(keys.v);
    free(page);
    atomic_store(&j->finished, 1);
    return NULL;
}

/* ---- one policy ---- */

/* Runs sync.lua op on the policy hash `hash` with one more argument (arg,
 * or none when NULL); *out receives the first number of its answer. */
static int history_op(struct settle *st, const char *hash, const char *op, const char *arg,
                      long long *out, struct permitd_error *err)
{
    struct redis_str keys[1] = {{hash, strlen(hash)}};
    struct redis_str args[2] = {{op, strlen(op)}, {arg, arg ? strlen(arg) : 0}};

    return redis_script_run(st->redis, REDIS_SCRIPT_SYNC, keys, 1, args, arg ? 2 : 1, deadline(),
                            out, 1, err);
}

/* The lease on settling `name`: 1 when this instance took it (SET NX PX). */
static int lease_take(struct settle *st, const char *lease, struct permitd_error *err)
{
    char ms[24];
    struct redis_str set[6] = {{"SET", 3}, {lease, strlen(lease)},
                               {st->owner, strlen(st->owner)}, {"NX", 2}, {"PX", 2}, {ms, 0}};
    struct strs ok = {0};
    int taken;

    set[5].len = (size_t)snprintf(ms, sizeof(ms), "%d", SETTLE_LEASE_MS);
    if (redis_command(st->redis, set, 6, deadline(), NULL, collect, &ok, err) != PERMITD_OK)
        return -1;
    taken = ok.n == 1 && strcmp(ok.v[0], "OK") == 0;
    strs_clear(&ok);
    free(ok.v);
    return taken;
}

static void lease_op(struct settle *st, const char *lease, int renew)
{
    char ms[24];
    struct permitd_error err = {0, ""};
    struct redis_str args[3] = {{renew ? "PEXPIRE" : "DEL", renew ? 7 : 3},
                                {lease, strlen(lease)}, {ms, 0}};

    args[2].len = (size_t)snprintf(ms, sizeof(ms), "%d", SETTLE_LEASE_MS);
    if (redis_command(st->redis, args, renew ? 3 : 2, deadline(), NULL, NULL, NULL, &err) !=
        PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "settle lease not updated", "lease=%s op=%s error=\"%s\"", lease,
                renew ? "renew" : "release", err.message);
}

/* The copy of policy `name` to settle under: at least version stamp
 * `stamp` (reloaded from Redis when this instance's copy is older: the
 * edit may be another instance's). NULL with PERMITD_OK when the policy is
 * gone (its buckets expire by themselves). */
static int limits_for(struct settle *st, const char *name, uint64_t stamp,
                      const struct policies_entry **out, struct permitd_error *err)
{
    struct policies *t = limiter_policies(st->limiter);
    const struct policies_entry *e = policies_get(t, name);
    int rc;

    *out = NULL;
    if (e == NULL || e->stamp < stamp) {
        policies_release(e);
        if ((rc = policies_reload(t, name, deadline(), NULL, err)) != PERMITD_OK)
            return rc;
        e = policies_get(t, name);
    }
    if (e != NULL && e->broken != NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "policy \"%s\" in redis is not a valid "
                               "policy: %s", name, e->broken);
        policies_release(e);
        return rc;
    }
    *out = e;
    return PERMITD_OK;
}

/* Joins the master threads that have finished; how many still run. */
static size_t reap(struct master_job *jobs, size_t n)
{
    size_t left = 0;

    for (size_t i = 0; i < n; i++) {
        if (jobs[i].running && atomic_load(&jobs[i].finished)) {
            pthread_join(jobs[i].thread, NULL);
            jobs[i].running = 0;
        }
        left += jobs[i].running;
    }
    return left;
}

/* Waits for the master threads, logging progress and renewing the lease
 * every SETTLE_PROGRESS_MS. */
static void await_masters(struct settle *st, const char *name, const char *lease,
                          struct master_job *jobs, size_t n)
{
    while (reap(jobs, n) > 0) {
        int64_t tick = clock_now_us() + (int64_t)SETTLE_PROGRESS_MS * 1000;

        while (clock_now_us() < tick && reap(jobs, n) > 0)
            usleep(10 * 1000);
        if (reap(jobs, n) == 0)
            return;
        for (size_t i = 0; i < n; i++)
            log_msg(LOG_LEVEL_INFO, "settle progress", "policy=%s master=%s keys=%" PRIu64 " %s",
                    name, jobs[i].node[0] ? jobs[i].node : "?", atomic_load(&jobs[i].keys),
                    jobs[i].running ? "scanning" : "done");
        lease_op(st, lease, 1);
    }
}

/* Settles policy `name` under a copy of at least version stamp `stamp`
 * (see the top): *settled receives the stamp of the copy it used (0: the
 * policy is gone, nothing to do), *keys_found the bucket keys found. */
static int settle_policy(struct settle *st, const char *name, uint64_t stamp, uint64_t *settled,
                         uint64_t *keys_found, struct permitd_error *err)
{
    const char *prefix = st->cfg->redis_prefix;
    char hash[POLICY_REDIS_KEY_MAX], shared[POLICY_REDIS_KEY_MAX];
    char patterns[2][POLICY_PATTERN_MAX], edit[24];
    const struct policies_entry *e = NULL;
    struct master_job *jobs = NULL;
    struct redis_str one;
    long long set = 0, removed = 0, newest = 0, left = 0;
    size_t nmasters = 0, steps = 0;
    int64_t started = clock_now_us();
    int rc;

    *settled = 0;
    *keys_found = 0;
    if ((rc = limits_for(st, name, stamp, &e, err)) != PERMITD_OK || e == NULL)
        return rc;
    *settled = e->stamp;
    policy_redis_key(hash, prefix, name, POLICY_KEY_HASH, NULL);
    if ((rc = history_op(st, hash, "newest", NULL, &newest, err)) != PERMITD_OK)
        goto done;
    if ((nmasters = redis_masters(st->redis)) == 0) {
        rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis cluster: the slot map is not "
                               "known yet (no seed answered)");
        goto done;
    }
    log_msg(LOG_LEVEL_INFO, "settle started", "policy=%s stamp=%" PRIu64 " masters=%zu "
            "max_permits=%s rate=%s", name, e->stamp, nmasters, e->max_s, e->rate_s);
    /* The shared bucket: one key, named. */
    one.len = policy_redis_key(shared, prefix, name, POLICY_KEY_BUCKET, "");
    one.p = shared;
    if ((rc = limiter_settle(st->limiter, e, &one, 1, deadline(), &set, &removed, err)) !=
        PERMITD_OK)
        goto done;
    /* The keyed buckets of both layouts (stores/policy.h), every master at once. */
    policy_bucket_patterns(patterns, prefix, name);
    if ((jobs = calloc(nmasters, sizeof(*jobs))) == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nmasters; i++) {
        jobs[i] = (struct master_job){.st = st, .e = e, .patterns = patterns,
                                      .master = i, .err = {0, ""}};
        if (pthread_create(&jobs[i].thread, NULL, scan_master, &jobs[i]) == 0)
            jobs[i].running = 1;
        else
            scan_master(&jobs[i]);      /* no thread to spare: this one does it */
    }
    {
        char lease[sizeof(st->set_key) + POLICY_NAME_MAX + 2];
        snprintf(lease, sizeof(lease), "%s:%s", st->set_key, name);
        await_masters(st, name, lease, jobs, nmasters);
    }
    for (size_t i = 0; i < nmasters; i++) {
        set += jobs[i].set;
        removed += jobs[i].removed;
        steps += jobs[i].steps;
        *keys_found += atomic_load(&jobs[i].keys);
        if (jobs[i].rc != PERMITD_OK && rc == PERMITD_OK)
            rc = permitd_error_set(err, jobs[i].rc, "master %s: %s",
                                   jobs[i].node[0] ? jobs[i].node : "?", jobs[i].err.message);
    }
    snprintf(edit, sizeof(edit), "%lld", newest);
    if (rc == PERMITD_OK && newest > 0)
        rc = history_op(st, hash, "trim", edit, &left, err);
    if (rc == PERMITD_OK)
        log_msg(LOG_LEVEL_INFO, "policy limits changed: buckets set to expire on the new ones",
                "policy=%s buckets=%lld full_removed=%lld keys=%" PRIu64 " masters=%zu "
                "scan_steps=%zu ms=%lld rate_edit_us=%lld rate_history_left=%lld", name, set,
                removed, *keys_found, nmasters, steps,
                (long long)(clock_now_us() - started) / 1000, newest, left);
done:
    free(jobs);
    policies_release(e);
    return rc;
}

/* The pending edits in <prefix>settle, sorted by name; members that are
 * not "<stamp> <name>" are removed (logged). */
static int read_pending(struct settle *st, struct settle_item **out, size_t *n,
                        struct permitd_error *err)
{
    struct redis_str smembers[2] = {{"SMEMBERS", 8}, {st->set_key, strlen(st->set_key)}};
    struct strs members = {0};
    struct settle_item *items = NULL;
    int rc;

    *out = NULL;
    *n = 0;
    rc = redis_command(st->redis, smembers, 2, deadline(), NULL, collect, &members, err);
    if (rc == PERMITD_OK && members.oom)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK && members.n > 0 &&
        (items = calloc(members.n, sizeof(*items))) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; rc == PERMITD_OK && i < members.n; i++) {
        struct settle_item *it = &items[*n];
        const char *m = members.v[i];
        char *end;
        unsigned long long stamp = strtoull(m, &end, 10);

        if (end == m || *end != ' ' || strlen(m) >= sizeof(it->member) ||
            policy_check_name("name", end + 1, NULL) != PERMITD_OK) {
            struct redis_str srem[3] = {{"SREM", 4}, {st->set_key, strlen(st->set_key)},
                                        {m, strlen(m)}};
            log_msg(LOG_LEVEL_WARN, "not a pending settle (\"<stamp> <policy>\"): removed",
                    "set=%s member=\"%.200s\"", st->set_key, m);
            redis_command(st->redis, srem, 3, deadline(), NULL, NULL, NULL, NULL);
            continue;
        }
        snprintf(it->member, sizeof(it->member), "%s", m);
        snprintf(it->name, sizeof(it->name), "%s", end + 1);
        it->stamp = stamp;
        (*n)++;
    }
    strs_clear(&members);
    free(members.v);
    if (rc != PERMITD_OK) {
        free(items);
        *n = 0;
        return rc;
    }
    for (size_t i = 1; i < *n; i++)         /* insertion sort by name: the set is small */
        for (size_t k = i; k > 0 && strcmp(items[k - 1].name, items[k].name) > 0; k--) {
            struct settle_item t = items[k];
            items[k] = items[k - 1];
            items[k - 1] = t;
        }
    *out = items;
    return PERMITD_OK;
}

/* Records the members whose SADD failed before. */
static void record_again(struct settle *st)
{
    struct strs todo;

    pthread_mutex_lock(&st->lock);
    todo = st->unrecorded;
    st->unrecorded = (struct strs){0};
    pthread_mutex_unlock(&st->lock);
    for (size_t i = 0; i < todo.n; i++) {
        struct permitd_error err = {0, ""};
        if (record(st, todo.v[i], &err) == PERMITD_OK)
            continue;
        pthread_mutex_lock(&st->lock);
        collect(&st->unrecorded, todo.v[i], strlen(todo.v[i]));
        pthread_mutex_unlock(&st->lock);
    }
    strs_clear(&todo);
    free(todo.v);
}

/* One look at <prefix>settle: every policy named settled in turn (each over
 * every master at once), unless another instance holds its lease. */
static void pass(struct settle *st)
{
    struct permitd_error err = {0, ""};
    struct settle_item *items = NULL;
    size_t n = 0, names = 0;

    record_again(st);
    if (read_pending(st, &items, &n, &err) != PERMITD_OK) {
        log_msg(LOG_LEVEL_WARN, "pending settles not read: tried again at the next pass",
                "set=%s error=\"%s\"", st->set_key, err.message);
        return;
    }
    for (size_t i = 0; i < n; i++)
        names += i == 0 || strcmp(items[i].name, items[i - 1].name) != 0;
    pthread_mutex_lock(&st->lock);
    st->status.pending = names;
    pthread_mutex_unlock(&st->lock);

    for (size_t first = 0; first < n && !stopping(st);) {
        const char *name = items[first].name;
        char lease[sizeof(st->set_key) + POLICY_NAME_MAX + 2];
        uint64_t want = 0, settled = 0, keys = 0;
        size_t end = first;
        int64_t t0;
        int taken, rc;

        while (end < n && strcmp(items[end].name, name) == 0) {
            if (items[end].stamp > want)
                want = items[end].stamp;
            end++;
        }
        snprintf(lease, sizeof(lease), "%s:%s", st->set_key, name);
        err = (struct permitd_error){0, ""};
        if ((taken = lease_take(st, lease, &err)) != 1) {
            if (taken < 0)
                log_msg(LOG_LEVEL_WARN, "buckets keep the expiry of the policy's old limits until "
                        "the next pass", "policy=%s error=\"%s\"", name, err.message);
            first = end;                /* another instance settles it (or Redis failed) */
            continue;
        }
        pthread_mutex_lock(&st->lock);
        st->status.running++;
        pthread_mutex_unlock(&st->lock);
        t0 = clock_now_us();
        rc = settle_policy(st, name, want, &settled, &keys, &err);
        /* Done: the members it covered go (a newer edit's stays). */
        for (size_t i = first; rc == PERMITD_OK && i < end; i++) {
            struct redis_str srem[3] = {{"SREM", 4}, {st->set_key, strlen(st->set_key)},
                                        {items[i].member, strlen(items[i].member)}};
            if (settled != 0 && items[i].stamp > settled)
                continue;
            rc = redis_command(st->redis, srem, 3, deadline(), NULL, NULL, NULL, &err);
        }
        if (rc != PERMITD_OK)
            log_msg(LOG_LEVEL_WARN, "buckets keep the expiry of the policy's old limits until "
                    "the next pass", "policy=%s error=\"%s\"", name, err.message);
        else if (settled == 0)
            log_msg(LOG_LEVEL_INFO, "settle dropped: the policy is gone (its buckets expire by "
                    "themselves)", "policy=%s", name);
        lease_op(st, lease, 0);
        pthread_mutex_lock(&st->lock);
        st->status.running--;
        st->status.keys_total += keys;
        st->status.seconds_total += (double)(clock_now_us() - t0) / 1e6;
        if (rc == PERMITD_OK) {
            st->status.done_total++;
            if (st->status.pending > 0)
                st->status.pending--;
        } else {
            st->status.failures_total++;
        }
        pthread_mutex_unlock(&st->lock);
        first = end;
    }
    free(items);
}

/* The runner: a pass at start, then one whenever kicked (each sync pass,
 * each edit). */
static void *run(void *arg)
{
    struct settle *st = arg;
    struct permitd_error err = {0, ""};

    if (wait_long(st, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "settle calls keep the decision path's redis timeout",
                "error=\"%s\"", err.message);
    for (;;) {
        pthread_mutex_lock(&st->lock);
        while (!st->stopping && !st->kicked)
            pthread_cond_wait(&st->wake, &st->lock);
        if (st->stopping) {
            pthread_mutex_unlock(&st->lock);
            break;
        }
        st->kicked = 0;
        pthread_mutex_unlock(&st->lock);
        pass(st);
    }
    return NULL;
}

int settle_start(struct settle *st, struct permitd_error *err)
{
    st->kicked = 1;                     /* the first pass at once */
    if (pthread_create(&st->thread, NULL, run, st) != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "cannot start the settle thread");
    st->started = 1;
    return PERMITD_OK;
}

void settle_free(struct settle *st)
{
    if (st == NULL)
        return;
    if (st->started) {
        pthread_mutex_lock(&st->lock);
        st->stopping = 1;
        pthread_cond_signal(&st->wake);
        pthread_mutex_unlock(&st->lock);
        pthread_join(st->thread, NULL);
    }
    strs_clear(&st->unrecorded);
    free(st->unrecorded.v);
    pthread_cond_destroy(&st->wake);
    pthread_mutex_destroy(&st->lock);
    free(st);
}
