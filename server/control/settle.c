/*
 * settle.c - the settle runner: a policy's buckets set to expire on its new
 * limits, in the background, every master in parallel, each over the
 * policy's bucket index; and the index's upkeep (its build, once per Redis,
 * and its prune).
 *
 * Why a settle at all: every bucket write sets its key to expire when the
 * bucket would be full, and a missing key reads as full. After a lower
 * rate or a higher max_permits, keys written under the old limits expire
 * too soon; bucket.lua "settle" sets each one's expiry again, and rewrites
 * a bucket stamped before the newest rate edit as of now, so that the rate
 * history can then be trimmed (lua/bucket.lua, top). Decisions never wait
 * for it: from the write on, they are exact under the new limits.
 *
 * Why here, and not on the thread that made the edit: a policy may own
 * millions of buckets (issue 22). So an edit only records that a settle is
 * due, in the Redis set <prefix>settle, a member "<stamp> <name>" per edit
 * (stamp: the version stamp the edit wrote, MySQL row id * 2^24 +
 * version), and wakes this runner; the admin RPC and the sync pass go on at
 * once. The runner, at its start and at every sync pass, reads the set (so
 * a settle queued by an instance that died is finished by another, or by
 * the next start)
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
 *   - the buckets are found through the bucket index (lua/bucket.lua's
 *     top: a list P{T}il:NAME for each group of 64 slots, and the sets
 *     P{T}ix:NAME of single slots, which bucket.lua fills as it creates
 *     buckets), not by a SCAN of the keyspace, whose cost grew with every
 *     key of every policy (0.9 s per million keys; at 10 M keys a settle
 *     never finished). One thread per master (redis_slot_master(): one on
 *     a single Redis) SSCANs the sets of the slots that master serves,
 *     SETTLE_SLOT_BATCH of them in one pipelined round trip, and reads the
 *     lists of the groups whose first slot is among them (settle_groups():
 *     each list's LLEN, then LRANGEs of SETTLE_LIST_RANGE blobs, and the
 *     hashes P{T}ig:NAME:<i> that held the entries before the lists,
 *     SETTLE_BOX_BATCH reads a round trip), and sends the keys each round
 *     trip brought to limiter_settle() (the one door to bucket.lua) in one
 *     more, which also takes the entries whose bucket is gone out of the
 *     index. So a settle costs the policy's buckets, plus the 16,384 sets
 *     and 256 groups read (most sets empty), the masters in parallel. The
 *     threads have their own connections (redis.c: per thread), made at
 *     their start, and their own Redis timeout (redis_thread_timeout():
 *     each call may take SETTLE_REDIS_DEADLINE_MS), since
 *     --redis-timeout-ms is sized for the decision path and a step on a
 *     big Redis may take longer.
 *   - the index build: buckets written by a permitd from before the index
 *     are in no index. The first pass of a runner on a Redis (prefix)
 *     without the marker <prefix>bucket-index SCANs every master once for
 *     every policy's token-bucket keys and indexes them (bucket.lua
 *     "index"), under the lease <prefix>bucket-index:lease, then sets the
 *     marker. Settles wait for it: without it they would miss those
 *     buckets.
 *   - the index prune (settle_prune.c): a bucket that fills up has no key
 *     but stays in its index until a settle meets it; a policy never
 *     edited would keep every key it ever had. So each runner walks every
 *     master's keyspace for index keys, a slice of SETTLE_PRUNE_STEPS SCAN
 *     steps per master every --index-prune-ms, and removes the dead
 *     entries of each set (bucket.lua "index") and list (bucket.lua
 *     "sweep") it finds; the walk is kept in memory (an instance
 *     that restarts starts it again) and its rounds are logged.
 *   - progress is logged every SETTLE_PROGRESS_MS (keys and slots done per
 *     master),
 *     and once at the end with totals and time; /metrics has the counters
 *     (settle_get_status()).
 *   - resumable: each master's thread records the slots it has done, a
 *     batch at a time, in the bitmap <prefix>settle:<name>:slots beside
 *     the lease (the progress hash's `stamp` says for which version). A
 *     settle of the same version that finds a record of one left running
 *     or failed (its instance died, or Redis failed it) skips those slots:
 *     their buckets were set under the same limits, and one created since
 *     was written under them. Another version starts afresh. Done: the
 *     bitmap is deleted.
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
#include "control/settle_internal.h"

#define SETTLE_SLOT_BATCH 1024          /* index keys (slots) read per round trip */
#define SETTLE_LEASE_MS 15000           /* a lease's life; renewed every progress tick */
#define SETTLE_PROGRESS_MS 2000         /* a progress line (and a lease renewal) this often */

/* One pending edit, as read from <prefix>settle. */
struct settle_item {
    char member[POLICY_NAME_MAX + 32];  /* as the set holds it */
    char name[POLICY_NAME_MAX + 1];
    uint64_t stamp;
};

/* As settle_collect(), keeping each string's length too (a bitmap holds NULs). */
static void collect_bytes(void *ud, const char *str, size_t len)
{
    struct strs *sv = ud;
    size_t *lens = realloc(sv->lens, (sv->n + 1) * sizeof(*lens));
    char *copy = malloc(len + 1);

    if (lens == NULL || copy == NULL) {
        free(copy);
        if (lens != NULL)
            sv->lens = lens;
        sv->oom = 1;
        return;
    }
    sv->lens = lens;
    memcpy(copy, str, len);
    copy[len] = '\0';
    settle_collect(ud, "", 0);             /* a slot in v, grown as settle_collect() grows it */
    if (sv->oom || sv->n == 0) {
        free(copy);
        return;
    }
    free(sv->v[sv->n - 1]);
    sv->v[sv->n - 1] = copy;
    sv->lens[sv->n - 1] = len;
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
    snprintf(st->index_key, sizeof(st->index_key), "%sbucket-index", cfg->redis_prefix);
    snprintf(st->index_lease, sizeof(st->index_lease), "%s:lease", st->index_key);
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

    return redis_command(st->redis, sadd, 3, settle_deadline(), NULL, NULL, NULL, err);
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
        settle_collect(&st->unrecorded, member, strlen(member));
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

/* ---- one master's share of one policy's settle, or of the index build ---- */

/* Whether slot s is set in a bitmap as Redis's SETBIT lays it out (bit 0
 * is the top bit of byte 0); NULL: none is. */
static int slot_done(const unsigned char *bits, unsigned s)
{
    return bits != NULL && (bits[s / 8] >> (7 - s % 8)) & 1;
}

/* The key of the slots a settle of policy name has done:
 * <prefix>settle:<name>:slots, a bitmap (bit s: slot s's index read
 * whole and settled), kept with the lease and the progress hash (whose
 * `stamp` says which version it is for). buf: POLICY_REDIS_KEY_MAX. */
static void slots_key(char *buf, const char *prefix, const char *name)
{
    snprintf(buf, POLICY_REDIS_KEY_MAX, "%ssettle:%s:slots", prefix, name);
}

/* Records slots[0..n) as done in the bitmap key (one SETBIT each, in one
 * pipelined round trip). */
static int slots_record(struct settle *st, const char *key, const unsigned *slots, size_t n,
                        struct permitd_error *err)
{
    struct redis_command_call *calls = calloc(n, sizeof(*calls));
    struct redis_str *args = calloc(4 * n, sizeof(*args));
    char (*offs)[8] = calloc(n, sizeof(*offs));
    int rc;

    if (calls == NULL || args == NULL || offs == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        struct redis_str *a = &args[4 * i];
        a[0] = (struct redis_str){"SETBIT", 6};
        a[1] = (struct redis_str){key, strlen(key)};
        a[2] = (struct redis_str){offs[i], (size_t)snprintf(offs[i], sizeof(offs[i]), "%u",
                                                           slots[i])};
        a[3] = (struct redis_str){"1", 1};
        calls[i] = (struct redis_command_call){.args = a, .nargs = 4};
    }
    rc = redis_command_pipeline(st->redis, calls, n, settle_deadline(), err);
    for (size_t i = 0; rc == PERMITD_OK && i < n; i++)
        if (calls[i].rc != PERMITD_OK)
            rc = permitd_error_set(err, calls[i].rc, "SETBIT of %s failed", key);
done:
    free(calls);
    free(args);
    free(offs);
    return rc;
}

/* One SSCAN of one index key, on its way. */
struct sscan {
    char key[POLICY_REDIS_KEY_MAX];
    char cursor[24];
    struct redis_str args[5];
    struct strs got;                /* the cursor, then the members */
    int done;
};

/* The thread of one master's share of a settle: the policy's index keys of
 * the slots that master serves, SETTLE_SLOT_BATCH at a time, each SSCANned
 * to its end (SETTLE_SSCAN_COUNT members a step), every step of a batch
 * in one pipelined round trip, and the members each round trip brought
 * settled in one more (limiter_settle(), which also takes the members
 * whose bucket is gone out of the index). Stops between round trips when
 * the runner stops (the settle stays pending). */
static void *settle_master(void *arg)
{
    struct master_job *j = arg;
    const char *prefix = j->st->cfg->redis_prefix;
    struct sscan *b = calloc(SETTLE_SLOT_BATCH, sizeof(*b));
    struct redis_command_call *calls = calloc(SETTLE_SLOT_BATCH, sizeof(*calls));
    struct redis_str *page = NULL;
    size_t page_cap = 0, at[SETTLE_SLOT_BATCH];
    char count[12];

    snprintf(count, sizeof(count), "%d", SETTLE_SSCAN_COUNT);
    j->rc = b == NULL || calls == NULL ? permitd_error_set(&j->err, PERMITD_EINTERNAL,
                                                           "out of memory")
                                       : wait_long(j->st, &j->err);
    for (size_t first = 0, m = 0; j->rc == PERMITD_OK && first < j->nslots; first += m) {
        m = j->nslots - first < SETTLE_SLOT_BATCH ? j->nslots - first : SETTLE_SLOT_BATCH;
        /* A batch ends where a group of slots ends: a group's sets are read
         * before its list (settle_groups()), so a live entry the prune
         * moves from a set into the list meanwhile is met in one or the
         * other. */
        while (first + m < j->nslots && m > POLICY_INDEX_GROUP &&
               j->slots[first + m] / POLICY_INDEX_GROUP ==
               j->slots[first + m - 1] / POLICY_INDEX_GROUP)
            m--;
        size_t active = m;

        for (size_t i = 0; i < m; i++) {
            policy_index_key(b[i].key, prefix, j->e->name, j->slots[first + i]);
            strcpy(b[i].cursor, "0");
            b[i].done = 0;
        }
        while (active > 0 && j->rc == PERMITD_OK) {
            size_t nc = 0, n = 0;

            if (settle_stopping(j->st)) {
                j->rc = permitd_error_set(&j->err, PERMITD_ECANCELED, "permitd is stopping");
                break;
            }
            for (size_t i = 0; i < m; i++) {
                if (b[i].done)
                    continue;
                b[i].args[0] = (struct redis_str){"SSCAN", 5};
                b[i].args[1] = (struct redis_str){b[i].key, strlen(b[i].key)};
                b[i].args[2] = (struct redis_str){b[i].cursor, strlen(b[i].cursor)};
                b[i].args[3] = (struct redis_str){"COUNT", 5};
                b[i].args[4] = (struct redis_str){count, strlen(count)};
                calls[nc] = (struct redis_command_call){.args = b[i].args, .nargs = 5,
                                                        .each = settle_collect, .ud = &b[i].got};
                at[nc++] = i;
            }
            j->rc = redis_command_pipeline(j->st->redis, calls, nc, settle_deadline(), &j->err);
            for (size_t c = 0; c < nc && j->rc == PERMITD_OK; c++) {
                struct sscan *x = &b[at[c]];
                if (calls[c].rc != PERMITD_OK)
                    j->rc = permitd_error_set(&j->err, calls[c].rc, "SSCAN of %s failed", x->key);
                else if (x->got.oom)
                    j->rc = permitd_error_set(&j->err, PERMITD_EINTERNAL, "out of memory");
                else if (x->got.n == 0 || strlen(x->got.v[0]) >= sizeof(x->cursor))
                    j->rc = permitd_error_set(&j->err, PERMITD_EINTERNAL, "SSCAN of %s answered "
                                              "no cursor", x->key);
                else
                    n += x->got.n - 1;
            }
            if (j->rc == PERMITD_OK)
                j->rc = settle_page_room(&page, &page_cap, n, &j->err);
            n = 0;
            for (size_t c = 0; c < nc && j->rc == PERMITD_OK; c++) {
                struct sscan *x = &b[at[c]];
                for (size_t k = 1; k < x->got.n; k++)
                    page[n++] = (struct redis_str){x->got.v[k], strlen(x->got.v[k])};
                strcpy(x->cursor, x->got.v[0]);
                if (strcmp(x->cursor, "0") == 0) {
                    x->done = 1;
                    active--;
                }
            }
            if (j->rc == PERMITD_OK && n > 0)
                j->rc = limiter_settle(j->st->limiter, j->e, page, n, settle_deadline(), &j->set,
                                       &j->removed, &j->gone, &j->err);
            atomic_fetch_add(&j->keys, n);
            for (size_t c = 0; c < nc; c++)
                settle_strs_clear(&b[at[c]].got);
            j->steps++;
        }
        if (j->rc == PERMITD_OK)
            j->rc = settle_groups(j, &j->slots[first], m);
        if (j->rc == PERMITD_OK && j->done_key != NULL)
            j->rc = slots_record(j->st, j->done_key, &j->slots[first], m, &j->err);
        if (j->rc == PERMITD_OK)
            atomic_fetch_add(&j->slots_done, m);
    }
    for (size_t i = 0; b != NULL && i < SETTLE_SLOT_BATCH; i++) {
        settle_strs_clear(&b[i].got);
        free(b[i].got.v);
    }
    free(b);
    free(calls);
    free(page);
    atomic_store(&j->finished, 1);
    return NULL;
}

/* The thread of one master's share of the index build: SCAN of that
 * master for every key of the prefix's policies, SETTLE_SCAN_COUNT a step,
 * each step's token-bucket keys indexed (limiter_index()). */
static void *build_master(void *arg)
{
    struct master_job *j = arg;
    const char *prefix = j->st->cfg->redis_prefix;
    char pattern[POLICY_PATTERN_MAX], cursor[24] = "0";
    struct strs keys = {0};
    struct redis_str *page = NULL;
    size_t page_cap = 0;

    policy_prefix_pattern(pattern, prefix, "{*");
    j->rc = wait_long(j->st, &j->err);
    while (j->rc == PERMITD_OK) {
        size_t n = 0;

        if (settle_stopping(j->st)) {
            j->rc = permitd_error_set(&j->err, PERMITD_ECANCELED, "permitd is stopping");
            break;
        }
        j->rc = redis_scan_master(j->st->redis, j->scan, j->node, cursor, pattern,
                                  SETTLE_SCAN_COUNT, settle_deadline(), settle_collect, &keys,
                                  &j->err);
        if (j->rc == PERMITD_OK && keys.oom)
            j->rc = permitd_error_set(&j->err, PERMITD_EINTERNAL, "out of memory");
        if (j->rc == PERMITD_OK)
            j->rc = settle_page_room(&page, &page_cap, keys.n, &j->err);
        for (size_t i = 0; j->rc == PERMITD_OK && i < keys.n; i++)
            if (policy_is_bucket_key(prefix, keys.v[i], strlen(keys.v[i])))
                page[n++] = (struct redis_str){keys.v[i], strlen(keys.v[i])};
        if (j->rc == PERMITD_OK && n > 0)
            j->rc = limiter_index(j->st->limiter, page, n, settle_deadline(), &j->set, &j->gone,
                                  &j->err);
        atomic_fetch_add(&j->keys, n);
        settle_strs_clear(&keys);
        j->steps++;
        if (strcmp(cursor, "0") == 0)
            break;
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

    return redis_script_run(st->redis, REDIS_SCRIPT_SYNC, keys, 1, args, arg ? 2 : 1,
                            settle_deadline(), out, 1, err);
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
    if (redis_command(st->redis, set, 6, settle_deadline(), NULL, settle_collect, &ok, err) !=
        PERMITD_OK)
        return -1;
    taken = ok.n == 1 && strcmp(ok.v[0], "OK") == 0;
    settle_strs_clear(&ok);
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
    if (redis_command(st->redis, args, renew ? 3 : 2, settle_deadline(), NULL, NULL, NULL, &err) !=
        PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "settle lease not updated", "lease=%s op=%s error=\"%s\"", lease,
                renew ? "renew" : "release", err.message);
}

/* Unix time in ms (for the policy page: when a settle started, ended). */
static int64_t unix_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The key of policy name's progress hash: <prefix>settle:<name>:progress
 * (a name holds no ':', so it meets no lease). buf: POLICY_REDIS_KEY_MAX. */
static void progress_key(char *buf, const char *prefix, const char *name)
{
    snprintf(buf, POLICY_REDIS_KEY_MAX, "%ssettle:%s:progress", prefix, name);
}

#define SETTLE_PROGRESS_KEPT_MS (7LL * 24 * 3600 * 1000)    /* a finished one's record */

/* HSETs the progress hash key: state, keys and, when not negative,
 * started_ms, finished_ms and duration_ms; a finished one's record then
 * expires after SETTLE_PROGRESS_KEPT_MS. Failures are logged only: the
 * page says less, the settle goes on. */
static void progress_put(struct settle *st, const char *key, const char *state, uint64_t keys,
                         int64_t started_ms, int64_t finished_ms, int64_t duration_ms)
{
    char v[4][24], kept[24];
    struct redis_str args[12] = {{"HSET", 4}, {key, strlen(key)}, {"state", 5},
                                 {state, strlen(state)}, {"keys", 4}, {v[0], 0}};
    struct permitd_error err = {0, ""};
    int n = 6;
    const char *names[3] = {"started_ms", "finished_ms", "duration_ms"};
    int64_t vals[3] = {started_ms, finished_ms, duration_ms};

    args[5].len = (size_t)snprintf(v[0], sizeof(v[0]), "%" PRIu64, keys);
    for (int i = 0; i < 3; i++)
        if (vals[i] >= 0) {
            args[n++] = (struct redis_str){names[i], strlen(names[i])};
            args[n].p = v[i + 1];
            args[n++].len = (size_t)snprintf(v[i + 1], sizeof(v[i + 1]), "%lld",
                                             (long long)vals[i]);
        }
    if (redis_command(st->redis, args, n, settle_deadline(), NULL, NULL, NULL, &err) ==
            PERMITD_OK && finished_ms >= 0) {
        struct redis_str px[3] = {{"PEXPIRE", 7}, {key, strlen(key)}, {kept, 0}};
        px[2].len = (size_t)snprintf(kept, sizeof(kept), "%lld", SETTLE_PROGRESS_KEPT_MS);
        redis_command(st->redis, px, 3, settle_deadline(), NULL, NULL, NULL, &err);
    }
    if (err.code != 0)
        log_msg(LOG_LEVEL_WARN, "settle progress not recorded for the policy page", "key=%s "
                "error=\"%s\"", key, err.message);
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
        if ((rc = policies_reload(t, name, settle_deadline(), NULL, err)) != PERMITD_OK)
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

/* Starts fn on each job, a thread each (or on this thread when none can
 * be had), then waits for them, logging progress (`what`: "settle" or
 * "bucket index build"; name: the policy or "") and renewing the lease
 * every SETTLE_PROGRESS_MS. */
static void run_masters(struct settle *st, const char *what, const char *name, const char *lease,
                        const char *progress, struct master_job *jobs, size_t n,
                        void *(*fn)(void *))
{
    for (size_t i = 0; i < n; i++) {
        if (pthread_create(&jobs[i].thread, NULL, fn, &jobs[i]) == 0)
            jobs[i].running = 1;
        else
            fn(&jobs[i]);               /* no thread to spare: this one does it */
    }
    while (reap(jobs, n) > 0) {
        int64_t tick = clock_now_us() + (int64_t)SETTLE_PROGRESS_MS * 1000;

        while (clock_now_us() < tick && reap(jobs, n) > 0)
            usleep(10 * 1000);
        if (reap(jobs, n) == 0)
            return;
        for (size_t i = 0; i < n; i++) {
            char master[REDIS_WHERE_MAX + 8];
            if (jobs[i].e != NULL)
                snprintf(master, sizeof(master), "#%d", jobs[i].master);
            else
                snprintf(master, sizeof(master), "%s", jobs[i].node[0] ? jobs[i].node : "?");
            log_msg(LOG_LEVEL_INFO, jobs[i].e ? "settle progress" : "bucket index build progress",
                    "%s%s%smaster=%s keys=%" PRIu64 " slots=%zu/%zu %s", name[0] ? "policy=" : "",
                    name, name[0] ? " " : "", master, atomic_load(&jobs[i].keys),
                    atomic_load(&jobs[i].slots_done), jobs[i].nslots,
                    jobs[i].running ? "running" : "done");
        }
        (void)what;
        lease_op(st, lease, 1);
        if (progress != NULL) {
            uint64_t keys = 0;
            for (size_t i = 0; i < n; i++)
                keys += atomic_load(&jobs[i].keys);
            progress_put(st, progress, "running", keys, -1, -1, -1);
        }
    }
}

/* The masters' shares of a settle: each slot's master (redis_slot_master()),
 * and for each master one job with its slots (in *slots_out, which the
 * jobs point into: free it after them). */
static int plan_masters(struct settle *st, const struct policies_entry *e,
                        const unsigned char *done_slots, struct master_job **jobs_out,
                        size_t *njobs, unsigned **slots_out, struct permitd_error *err)
{
    int *owner = malloc(POLICY_SLOTS * sizeof(*owner));
    unsigned *slots = malloc(POLICY_SLOTS * sizeof(*slots));
    struct master_job *jobs = NULL;
    size_t n = 0, at = 0;
    int rc = PERMITD_OK;

    *jobs_out = NULL;
    *njobs = 0;
    *slots_out = NULL;
    if (owner == NULL || slots == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    for (unsigned s = 0; s < POLICY_SLOTS && rc == PERMITD_OK; s++)
        if ((owner[s] = redis_slot_master(st->redis, s)) < 0)
            rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis cluster: no master serves "
                                   "slot %u yet", s);
        else if (slot_done(done_slots, s))
            owner[s] = -1;                  /* a settle that died did it: resumed after it */
    if (rc != PERMITD_OK)
        goto done;
    for (unsigned s = 0; s < POLICY_SLOTS; s++) {
        size_t k = 0;
        if (owner[s] < 0)
            continue;
        while (k < n && jobs[k].master != owner[s])
            k++;
        if (k == n) {
            struct master_job *grown = realloc(jobs, (n + 1) * sizeof(*jobs));
            if (grown == NULL) {
                rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
                goto done;
            }
            jobs = grown;
            jobs[n++] = (struct master_job){.st = st, .e = e, .master = owner[s],
                                            .err = {0, ""}};
        }
        jobs[k].nslots++;
    }
    for (size_t k = 0; k < n; k++) {      /* each job's slots, in order, one run each */
        size_t first = at;
        for (unsigned s = 0; s < POLICY_SLOTS; s++)
            if (owner[s] == jobs[k].master)
                slots[at++] = s;
        jobs[k].slots = &slots[first];
    }
done:
    free(owner);
    if (rc != PERMITD_OK) {
        free(jobs);
        free(slots);
        return rc;
    }
    *jobs_out = jobs;
    *njobs = n;
    *slots_out = slots;
    return PERMITD_OK;
}

/* Records in the progress hash which version (stamp) the slots bitmap is for. */
static void progress_stamp(struct settle *st, const char *progress, const char *stamp)
{
    struct redis_str hset[4] = {{"HSET", 4}, {progress, strlen(progress)}, {"stamp", 5},
                                {stamp, strlen(stamp)}};

    redis_command(st->redis, hset, 4, settle_deadline(), NULL, NULL, NULL, NULL);
}

/* Where a settle of version `stamp` starts: when the progress hash says a
 * settle of that same version was left running or failed, *bits receives
 * the bitmap of the slots it did (free it) and *resumed how many; else the
 * bitmap is deleted (another version's) and the settle starts afresh. The
 * slots done stay done: a bucket there was set under these limits, and
 * one created since was written under them. */
static int resume_point(struct settle *st, const char *progress, const char *done_key,
                        const char *stamp, unsigned char **bits, size_t *resumed,
                        struct permitd_error *err)
{
    struct redis_str hmget[4] = {{"HMGET", 5}, {progress, strlen(progress)}, {"stamp", 5},
                                 {"state", 5}};
    struct redis_str get[2] = {{"GET", 3}, {done_key, strlen(done_key)}};
    struct redis_str del[2] = {{"DEL", 3}, {done_key, strlen(done_key)}};
    struct strs got = {0}, map = {0};
    int same, rc;

    *bits = NULL;
    *resumed = 0;
    rc = redis_command(st->redis, hmget, 4, settle_deadline(), NULL, settle_collect, &got, err);
    /* nil fields are not handed over: two strings means both are there */
    same = rc == PERMITD_OK && got.n == 2 && strcmp(got.v[0], stamp) == 0 &&
           strcmp(got.v[1], "done") != 0;
    settle_strs_clear(&got);
    free(got.v);
    if (rc != PERMITD_OK)
        return rc;
    if (!same)
        return redis_command(st->redis, del, 2, settle_deadline(), NULL, NULL, NULL, err);
    /* a bitmap holds NUL bytes: read it as a whole reply, not as a C string */
    rc = redis_command(st->redis, get, 2, settle_deadline(), NULL, collect_bytes, &map, err);
    if (rc == PERMITD_OK && map.n == 1 && (*bits = calloc(POLICY_SLOTS / 8, 1)) != NULL) {
        memcpy(*bits, map.v[0], map.lens[0] < POLICY_SLOTS / 8 ? map.lens[0] : POLICY_SLOTS / 8);
        for (unsigned s = 0; s < POLICY_SLOTS; s++)
            *resumed += slot_done(*bits, s);
    }
    settle_strs_clear(&map);
    free(map.v);
    free(map.lens);
    return rc;
}

/* Settles policy `name` under a copy of at least version stamp `stamp`
 * (see the top): *settled receives the stamp of the copy it used (0: the
 * policy is gone, nothing to do), *keys_found the bucket keys its index
 * named. */
static int settle_policy(struct settle *st, const char *name, uint64_t stamp, uint64_t *settled,
                         uint64_t *keys_found, struct permitd_error *err)
{
    const char *prefix = st->cfg->redis_prefix;
    char hash[POLICY_REDIS_KEY_MAX], edit[24];
    char lease[sizeof(st->set_key) + POLICY_NAME_MAX + 2], progress[POLICY_REDIS_KEY_MAX] = "";
    const struct policies_entry *e = NULL;
    struct master_job *jobs = NULL;
    unsigned *slots = NULL;
    unsigned char *done_bits = NULL;
    char done_key[POLICY_REDIS_KEY_MAX];
    size_t resumed = 0;
    int64_t started_ms = unix_ms();
    long long set = 0, removed = 0, gone = 0, newest = 0, left = 0;
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
    /* A settle of this very version that an instance left half done
     * (it died; its lease expired): the slots it did are skipped. */
    progress_key(progress, prefix, name);
    slots_key(done_key, prefix, name);
    if ((rc = resume_point(st, progress, done_key, e->stamp_s, &done_bits, &resumed, err)) !=
        PERMITD_OK)
        goto done;
    /* Every master at once, each over the index keys of its own slots. */
    if ((rc = plan_masters(st, e, done_bits, &jobs, &nmasters, &slots, err)) != PERMITD_OK)
        goto done;
    for (size_t i = 0; i < nmasters; i++)
        jobs[i].done_key = done_key;
    log_msg(LOG_LEVEL_INFO, resumed > 0 ? "settle resumed where a settle that stopped left it"
            : "settle started", "policy=%s stamp=%" PRIu64 " masters=%zu max_permits=%s rate=%s "
            "slots_done_before=%zu", name, e->stamp, nmasters, e->max_s, e->rate_s, resumed);
    snprintf(lease, sizeof(lease), "%s:%s", st->set_key, name);
    progress_put(st, progress, "running", 0, started_ms, -1, -1);
    progress_stamp(st, progress, e->stamp_s);
    run_masters(st, "settle", name, lease, progress, jobs, nmasters, settle_master);
    for (size_t i = 0; i < nmasters; i++) {
        set += jobs[i].set;
        removed += jobs[i].removed;
        gone += jobs[i].gone;
        steps += jobs[i].steps;
        *keys_found += atomic_load(&jobs[i].keys);
        if (jobs[i].rc != PERMITD_OK && rc == PERMITD_OK)
            rc = permitd_error_set(err, jobs[i].rc, "master #%d: %s", jobs[i].master,
                                   jobs[i].err.message);
    }
    snprintf(edit, sizeof(edit), "%lld", newest);
    if (rc == PERMITD_OK && newest > 0)
        rc = history_op(st, hash, "trim", edit, &left, err);
    if (rc == PERMITD_OK) {     /* done: the next settle starts from the first slot */
        struct redis_str del[2] = {{"DEL", 3}, {done_key, strlen(done_key)}};
        redis_command(st->redis, del, 2, settle_deadline(), NULL, NULL, NULL, NULL);
    }
    if (progress[0] != '\0')
        progress_put(st, progress, rc == PERMITD_OK ? "done" : "failed", *keys_found, -1,
                     rc == PERMITD_OK ? unix_ms() : -1,
                     rc == PERMITD_OK ? (clock_now_us() - started) / 1000 : -1);
    if (rc == PERMITD_OK)
        log_msg(LOG_LEVEL_INFO, "policy limits changed: buckets set to expire on the new ones",
                "policy=%s buckets=%lld full_removed=%lld keys=%" PRIu64 " index_removed=%lld "
                "masters=%zu index_steps=%zu scan_steps=0 ms=%lld rate_edit_us=%lld "
                "rate_history_left=%lld", name, set, removed, *keys_found, gone, nmasters, steps,
                (long long)(clock_now_us() - started) / 1000, newest, left);
done:
    free(jobs);
    free(slots);
    free(done_bits);
    policies_release(e);
    return rc;
}

/* ---- the bucket index: built once per Redis, pruned a little at a time ---- */

/* 1 when the index build is done (the marker is there, or this instance
 * just did it); 0 when not yet (another instance builds it, or it failed:
 * logged; the next pass tries again). Settles wait for it: without it the
 * buckets of an older permitd would not be found. */
static int index_ready(struct settle *st)
{
    struct redis_str get[2] = {{"GET", 3}, {st->index_key, strlen(st->index_key)}};
    struct permitd_error err = {0, ""};
    struct master_job *jobs = NULL;
    struct strs got = {0};
    size_t n = 0;
    long long added = 0, gone = 0;
    uint64_t keys = 0;
    int64_t started = clock_now_us();
    int rc, taken;

    if (st->index_built)
        return 1;
    rc = redis_command(st->redis, get, 2, settle_deadline(), NULL, settle_collect, &got, &err);
    st->index_built = rc == PERMITD_OK && got.n == 1;
    settle_strs_clear(&got);
    free(got.v);
    if (rc != PERMITD_OK || st->index_built)
        goto out;
    if ((taken = lease_take(st, st->index_lease, &err)) != 1) {
        rc = taken < 0 ? err.code : PERMITD_OK;
        if (taken == 0)
            log_msg(LOG_LEVEL_INFO, "settles wait for the bucket index, which another instance "
                    "is building", "lease=%s", st->index_lease);
        goto out;
    }
    if ((n = redis_masters(st->redis)) == 0) {
        rc = permitd_error_set(&err, PERMITD_EUNAVAILABLE, "redis cluster: the slot map is not "
                               "known yet (no seed answered)");
    } else if ((jobs = calloc(n, sizeof(*jobs))) == NULL) {
        rc = permitd_error_set(&err, PERMITD_EINTERNAL, "out of memory");
    } else {
        log_msg(LOG_LEVEL_INFO, "bucket index build started: one SCAN of every master, once per "
                "redis (buckets an older permitd wrote are not indexed yet)", "masters=%zu", n);
        for (size_t i = 0; i < n; i++)
            jobs[i] = (struct master_job){.st = st, .scan = i, .err = {0, ""}};
        run_masters(st, "bucket index build", "", st->index_lease, NULL, jobs, n, build_master);
        for (size_t i = 0; i < n; i++) {
            added += jobs[i].set;
            gone += jobs[i].gone;
            keys += atomic_load(&jobs[i].keys);
            if (jobs[i].rc != PERMITD_OK && rc == PERMITD_OK)
                rc = permitd_error_set(&err, jobs[i].rc, "master %s: %s",
                                       jobs[i].node[0] ? jobs[i].node : "?", jobs[i].err.message);
        }
    }
    if (rc == PERMITD_OK) {
        struct redis_str set[3] = {{"SET", 3}, {st->index_key, strlen(st->index_key)},
                                   {st->owner, strlen(st->owner)}};
        rc = redis_command(st->redis, set, 3, settle_deadline(), NULL, NULL, NULL, &err);
    }
    lease_op(st, st->index_lease, 0);
    if (rc == PERMITD_OK) {
        st->index_built = 1;
        log_msg(LOG_LEVEL_INFO, "bucket index built", "marker=%s keys=%" PRIu64 " added=%lld "
                "removed=%lld masters=%zu ms=%lld", st->index_key, keys, added, gone, n,
                (long long)(clock_now_us() - started) / 1000);
    }
    free(jobs);
out:
    if (rc != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "bucket index not built: settles wait, tried again at the next "
                "pass", "error=\"%s\"", err.message);
    return st->index_built;
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
    rc = redis_command(st->redis, smembers, 2, settle_deadline(), NULL, settle_collect, &members,
                       err);
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
            redis_command(st->redis, srem, 3, settle_deadline(), NULL, NULL, NULL, NULL);
            continue;
        }
        snprintf(it->member, sizeof(it->member), "%s", m);
        snprintf(it->name, sizeof(it->name), "%s", end + 1);
        it->stamp = stamp;
        (*n)++;
    }
    settle_strs_clear(&members);
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
        settle_collect(&st->unrecorded, todo.v[i], strlen(todo.v[i]));
        pthread_mutex_unlock(&st->lock);
    }
    settle_strs_clear(&todo);
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
    if (!index_ready(st)) {
        for (size_t i = 0; i < n; i++)
            if (i == 0 || strcmp(items[i].name, items[i - 1].name) != 0)
                log_msg(LOG_LEVEL_WARN, "buckets keep the expiry of the policy's old limits until "
                        "the next pass", "policy=%s error=\"the bucket index is not built yet\"",
                        items[i].name);
        free(items);
        return;
    }

    for (size_t first = 0; first < n && !settle_stopping(st);) {
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
            rc = redis_command(st->redis, srem, 3, settle_deadline(), NULL, NULL, NULL, &err);
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
            st->status.last_done_unix_ms = unix_ms();
            if (st->status.pending > 0)
                st->status.pending--;
        } else {
            st->status.failures_total++;
        }
        pthread_mutex_unlock(&st->lock);
        first = end;
    }
    free(items);
    settle_prune_slice(st);
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
    st->prune.next_us = clock_now_us() +
                        (int64_t)st->cfg->index_prune_ms * SETTLE_PRUNE_FIRST * 1000;
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
    settle_strs_clear(&st->unrecorded);
    free(st->unrecorded.v);
    pthread_cond_destroy(&st->wake);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

/* Collects HGETALL's fields into a settle_policy_state (field, value, ...). */
struct state_read {
    struct settle_policy_state *out;
    char field[16];
    int odd;
};

static void state_field(void *ud, const char *str, size_t len)
{
    struct state_read *r = ud;
    char v[32];

    if (!r->odd) {
        snprintf(r->field, sizeof(r->field), "%.*s", (int)(len < 15 ? len : 15), str);
        r->odd = 1;
        return;
    }
    r->odd = 0;
    snprintf(v, sizeof(v), "%.*s", (int)(len < 31 ? len : 31), str);
    if (strcmp(r->field, "state") == 0)
        r->out->running = strcmp(v, "running") == 0;
    else if (strcmp(r->field, "keys") == 0)
        r->out->keys_done = strtoull(v, NULL, 10);
    else if (strcmp(r->field, "started_ms") == 0)
        r->out->started_ms = strtoll(v, NULL, 10);
    else if (strcmp(r->field, "finished_ms") == 0)
        r->out->finished_ms = strtoll(v, NULL, 10);
    else if (strcmp(r->field, "duration_ms") == 0)
        r->out->duration_ms = strtoll(v, NULL, 10);
}

int settle_policy_state(struct redis *redis, const char *prefix, const char *name,
                        int64_t deadline_us, struct settle_policy_state *out,
                        struct permitd_error *err)
{
    char set[POLICY_REDIS_KEY_MAX], key[POLICY_REDIS_KEY_MAX], lease[POLICY_REDIS_KEY_MAX];
    struct redis_str smembers[2] = {{"SMEMBERS", 8}, {set, 0}};
    struct redis_str hgetall[2] = {{"HGETALL", 7}, {key, 0}};
    struct redis_str exists[2] = {{"EXISTS", 6}, {lease, 0}};
    struct state_read r = {.out = out};
    struct strs members = {0};
    long long held = 0;
    size_t nlen = strlen(name);
    int rc;

    memset(out, 0, sizeof(*out));
    smembers[1].len = (size_t)snprintf(set, sizeof(set), "%ssettle", prefix);
    progress_key(key, prefix, name);
    hgetall[1].len = strlen(key);
    exists[1].len = (size_t)snprintf(lease, sizeof(lease), "%ssettle:%s", prefix, name);
    rc = redis_command(redis, smembers, 2, deadline_us, NULL, settle_collect, &members, err);
    for (size_t i = 0; rc == PERMITD_OK && i < members.n; i++) {
        size_t len = strlen(members.v[i]);
        if (len > nlen && members.v[i][len - nlen - 1] == ' ' &&
            strcmp(members.v[i] + len - nlen, name) == 0)
            out->pending = 1;
    }
    settle_strs_clear(&members);
    free(members.v);
    if (rc == PERMITD_OK)
        rc = redis_command(redis, hgetall, 2, deadline_us, NULL, state_field, &r, err);
    if (rc == PERMITD_OK)
        rc = redis_command(redis, exists, 2, deadline_us, &held, NULL, NULL, err);
    /* "running" with no lease: its instance died mid-way; it is pending again. */
    if (rc == PERMITD_OK && held == 0)
        out->running = 0;
    return rc;
}
