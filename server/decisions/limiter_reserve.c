/*
 * limiter_reserve.c - reservations (issue 38): Reserve, Commit, Cancel and
 * the expiry sweep (the contract is limiter_reserve.h's).
 *
 * A Reserve claims its record first (lua/reservation.lua "claim": a retry
 * with the same request id finds it and answers it, holding nothing
 * again), then holds the items: one call of the items' decision script in
 * mode "hold" per group of items that one call may decide (one algorithm,
 * and in a Redis Cluster one slot), each all or nothing; the Redis time
 * each hold was decided at comes back with it and is kept per item, so a
 * later refund names the window its take was counted in. When a group is
 * refused, the groups held before it are refunded and the record dropped.
 * Once every group is held the record is opened (its items, their holds'
 * times, each policy's expiry rule), and the reservation indexed: by
 * expiry for the sweep (<prefix>{rsv}:exp) and per policy for the
 * inspector (<prefix>{rsv}:o:NAME, one member per item held).
 *
 * Commit and Cancel first make the record's one transition out of "open"
 * (lua/reservation.lua "close"), then refund or charge each item
 * (limiter_refund(), limiter_charge()) and note the outcome in the
 * record. A crash between the two leaves the estimate held (a refund not
 * made: the safe side) or an excess uncharged (at most that commit's
 * excess); the record still answers "committed".
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/sha256.h"
#include "decisions/limiter.h"
#include "decisions/limiter_internal.h"
#include "decisions/limiter_reserve.h"
#include "decisions/policies.h"
#include "stores/cluster.h"
#include "stores/policy.h"

/* Wall-clock microseconds: the expiry index's scores and the inspector's
 * ages (the record's own expiry is decided on Redis TIME). */
static int64_t wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#define HOLD_NUMBERS 8          /* a compact RECORD's numbers (lua/bucket.lua's header) */
#define SWEEP_BATCH 100
#define KEY_MAX (sizeof(((struct config *)0)->redis_prefix) + 16 + POLICY_NAME_MAX + \
                 LIMITER_RESERVE_ID_LEN)

/* ---- keys ---- */

static size_t record_key(const struct limiter *l, const char *id, char *buf)
{
    return (size_t)snprintf(buf, KEY_MAX, "%s{rsv:%s}", l->cfg->redis_prefix, id);
}

static size_t expiry_key(const struct limiter *l, char *buf)
{
    return (size_t)snprintf(buf, KEY_MAX, "%s{rsv}:exp", l->cfg->redis_prefix);
}

static size_t open_key(const struct limiter *l, const char *policy, char *buf)
{
    return (size_t)snprintf(buf, KEY_MAX, "%s{rsv}:o:%s", l->cfg->redis_prefix, policy);
}

static struct redis_str str(const char *s)
{
    return (struct redis_str){s, strlen(s)};
}

/* ---- the record, as lua/reservation.lua answers it ---- */

struct rec_item {
    char b[POLICY_NAME_MAX + 1], k[POLICY_KEY_MAX + 1];
    int64_t e, at, a, r, c;
    int x, has_a;
};

struct rec {
    int strings;                    /* read so far */
    char word[16], state[16], app[POLICY_NAME_MAX + 1];
    char field[16];                 /* the name of the value to come */
    int64_t created_us, expires_us;
    size_t n;
    int noted;                      /* the outcome is noted (an item's r): settled whole */
    struct rec_item it[LIMITER_RESERVE_ITEMS_MAX];
};

static int64_t num(const char *s, size_t len)
{
    char buf[32];

    if (len >= sizeof(buf))
        return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return strtoll(buf, NULL, 10);
}

static void copy(char *dst, size_t cap, const char *s, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, s, len);
    dst[len] = '\0';
}

/* An item's field "e|at|x|f|b|k" (lua/reservation.lua) into it. */
static void item_read(struct rec_item *it, const char *s, size_t len)
{
    const char *end = s + len, *p = s;
    int64_t v[4];

    for (int f = 0; f < 5; f++) {
        const char *bar = memchr(p, '|', (size_t)(end - p));
        if (bar == NULL)
            return;
        if (f < 4)
            v[f] = num(p, (size_t)(bar - p));
        else
            copy(it->b, sizeof(it->b), p, (size_t)(bar - p));
        if (f == 2)
            it->x = bar - p == 6 && memcmp(p, "refund", 6) == 0;
        p = bar + 1;
    }
    copy(it->k, sizeof(it->k), p, (size_t)(end - p));
    it->e = v[0];
    it->at = v[1];
}

/* Each string of the script's answer: the word, then name, value, ... */
static void rec_each(void *ud, const char *s, size_t len)
{
    struct rec *r = ud;
    int at = r->strings++;
    char *dot;
    long i;

    if (at == 0) {
        copy(r->word, sizeof(r->word), s, len);
        return;
    }
    if (at % 2 == 1) {
        copy(r->field, sizeof(r->field), s, len);
        return;
    }
    if (strcmp(r->field, "state") == 0) {
        copy(r->state, sizeof(r->state), s, len);
    } else if (strcmp(r->field, "app") == 0) {
        copy(r->app, sizeof(r->app), s, len);
    } else if (strcmp(r->field, "created_us") == 0) {
        r->created_us = num(s, len);
    } else if (strcmp(r->field, "expires_us") == 0) {
        r->expires_us = num(s, len);
    } else if (strcmp(r->field, "n") == 0) {
        int64_t n = num(s, len);
        r->n = n > 0 && n <= LIMITER_RESERVE_ITEMS_MAX ? (size_t)n : 0;
    } else if ((i = strtol(r->field, &dot, 10)) >= 1 && i <= LIMITER_RESERVE_ITEMS_MAX) {
        struct rec_item *it = &r->it[i - 1];
        const char *f = dot + 1;
        if (*dot == '\0')
            item_read(it, s, len);
        else if (*dot != '.')
            return;
        else if (strcmp(f, "a") == 0) it->a = num(s, len), it->has_a = 1;
        else if (strcmp(f, "r") == 0) it->r = num(s, len), r->noted = 1;
        else if (strcmp(f, "c") == 0) it->c = num(s, len);
    }
}

/* One lua/reservation.lua call on the record of id: mode, then args. */
static int rec_call(struct limiter *l, const char *id, const char *mode,
                    const struct redis_str *args, int nargs, int64_t deadline_us, struct rec *r,
                    struct permitd_error *err)
{
    char key[KEY_MAX];
    struct redis_str k = {key, record_key(l, id, key)}, a[40];

    if (nargs + 1 > (int)(sizeof(a) / sizeof(a[0])))
        return permitd_error_set(err, PERMITD_EINTERNAL, "too many reservation arguments");
    a[0] = str(mode);
    for (int i = 0; i < nargs; i++)
        a[1 + i] = args[i];
    memset(r, 0, sizeof(*r));
    return redis_script_strings(l->redis, REDIS_SCRIPT_RESERVATION, &k, 1, a, 1 + nargs,
                                deadline_us, rec_each, r, err);
}

/* ---- holds ---- */

/* One item of a Reserve on its way: its policy (held), its state key,
 * its group (one script call) and, once held, the Redis time of it. */
struct hold_item {
    const struct policies_entry *e;
    const char *app;                /* the caller's (the request's strings) */
    struct limiter_limits lim;      /* its limits, an override's too (issue 37) */
    char key[POLICY_REDIS_KEY_MAX];
    size_t key_len;
    int group, held;
    int64_t at;
    long long out[HOLD_NUMBERS];
};

/* The items of group g in one call of their script in mode "hold":
 * PERMITD_OK with each item's RECORD in its out and, when the group was
 * granted, its time in at and held set; *granted says which. A "stale"
 * answer reloads the policy and asks once more. */
static int hold_group(struct limiter *l, const struct limiter_reserve_item *items,
                      struct hold_item *h, size_t n, int g, int retried, int64_t deadline_us,
                      int *granted, struct permitd_error *err)
{
    struct redis_str keys[LIMITER_RESERVE_ITEMS_MAX], args[64];
    char index_s[LIMITER_RESERVE_ITEMS_MAX][8], permits_s[LIMITER_RESERVE_ITEMS_MAX][24];
    char np_s[8];
    const struct policies_entry *pol[LIMITER_RESERVE_ITEMS_MAX];
    const struct limiter_limits *lim[LIMITER_RESERVE_ITEMS_MAX];
    long long out[HOLD_NUMBERS * LIMITER_RESERVE_ITEMS_MAX + 1];
    size_t member[LIMITER_RESERVE_ITEMS_MAX], ni = 0, np = 0;
    int nargs, rc;

    for (size_t i = 0; i < n; i++) {
        if (h[i].group != g)
            continue;
        size_t j = 0;
        while (j < np && (pol[j] != h[i].e || limiter_limits_cmp(lim[j], &h[i].lim) != 0))
            j++;
        if (j == np) {
            lim[np] = &h[i].lim;
            pol[np++] = h[i].e;
        }
        member[ni] = i;
        keys[ni] = (struct redis_str){h[i].key, h[i].key_len};
        snprintf(index_s[ni], sizeof(index_s[ni]), "%zu", j + 1);
        snprintf(permits_s[ni], sizeof(permits_s[ni]), "%" PRId64, items[i].estimate);
        ni++;
    }
    snprintf(np_s, sizeof(np_s), "%zu", np);
    limiter_script_call_head(l, (struct redis_str){"hold", 4}, np_s, 0, args);
    for (size_t j = 0; j < np; j++)
        limiter_script_policy_args(pol[j], lim[j], &args[3 + 4 * j]);
    nargs = 3 + 4 * (int)np;
    for (size_t x = 0; x < ni; x++) {
        args[nargs++] = str(index_s[x]);
        args[nargs++] = str(permits_s[x]);
    }
    rc = redis_script_run(l->redis, limiter_script_of(h[member[0]].e), keys, (int)ni, args, nargs,
                          deadline_us, out, HOLD_NUMBERS * (int)ni + 1, err);
    if (rc != PERMITD_OK)
        return rc;
    *granted = 1;
    for (size_t x = 0; x < ni; x++) {
        const long long *o = &out[HOLD_NUMBERS * x];
        size_t i = member[x];
        if (o[0] == SCRIPT_STALE && !retried) {
            if ((rc = limiter_script_restale(l, items[i].bucket, o[2], 0, deadline_us,
                                             err)) != PERMITD_OK)
                return rc;
            /* the entries held are the old ones: reloaded, the next try reads them anew */
            for (size_t y = 0; y < n; y++)
                if (h[y].group == g) {
                    const struct policies_entry *e = policies_get(l->policies, items[y].bucket);
                    if (e == NULL)
                        return permitd_error_set(err, PERMITD_ENOTFOUND, "bucket: no policy "
                                                 "named \"%s\"", items[y].bucket);
                    struct limiter_request req = {items[y].bucket, h[y].app, items[y].key,
                                                  items[y].estimate, NULL, NULL, NULL};
                    policies_release(h[y].e);
                    h[y].e = e;
                    limiter_script_limits(l, e, &req, 1, &h[y].lim);
                }
            return hold_group(l, items, h, n, g, 1, deadline_us, granted, err);
        }
        if (o[0] == PERMITD_ERANGE)
            return permitd_error_set(err, PERMITD_ERANGE, "items: the estimates of one bucket "
                                     "of policy \"%s\" ask %lld together, more than it ever "
                                     "holds (max_permits %lld)", items[i].bucket, o[2], o[3]);
        if (o[0] != 0 && o[0] != PERMITD_EABORTED)
            return permitd_error_set(err, PERMITD_EINTERNAL, "policy \"%s\": its bucket could "
                                     "not be held (script status %lld; see permitd's log)",
                                     items[i].bucket, o[0]);
        if (o[0] != 0 || o[1] == 0)
            *granted = 0;
        memcpy(h[i].out, o, sizeof(h[i].out));
    }
    for (size_t x = 0; *granted && x < ni; x++) {
        h[member[x]].held = 1;
        h[member[x]].at = out[HOLD_NUMBERS * ni];
    }
    return PERMITD_OK;
}

/* The groups of h: items of one script and, in a cluster, one slot go in
 * one call. Returns the number of groups. */
static int group_items(const struct limiter *l, struct hold_item *h, size_t n)
{
    int groups = 0;

    for (size_t i = 0; i < n; i++) {
        h[i].group = -1;
        for (size_t j = 0; j < i && h[i].group < 0; j++)
            if (limiter_script_of(h[j].e) == limiter_script_of(h[i].e) &&
                (!l->slot_calls || cluster_keyslot(h[j].key, h[j].key_len) ==
                                   cluster_keyslot(h[i].key, h[i].key_len)))
                h[i].group = h[j].group;
        if (h[i].group < 0)
            h[i].group = groups++;
    }
    return groups;
}

/* Gives back what h's held items hold (a refused or failed Reserve). */
static void give_back(struct limiter *l, const struct limiter_reserve_item *items,
                      struct hold_item *h, size_t n, int64_t deadline_us)
{
    for (size_t i = 0; i < n; i++) {
        struct limiter_result res;
        struct permitd_error why;
        int64_t back;
        if (!h[i].held)
            continue;
        if (limiter_refund(l, items[i].bucket, h[i].app, items[i].key, items[i].estimate,
                           h[i].at, deadline_us, &res, &back, &why) != PERMITD_OK)
            log_msg(LOG_LEVEL_WARN, "a refused reservation's hold was not given back",
                    "policy=%s error=%s", log_q(items[i].bucket), log_q(why.message));
        h[i].held = 0;
    }
}

/* ---- Reserve ---- */

/* The reservation id of app's request_id (the same for a retry), or a
 * random one; -1 when the kernel gives no random bytes. */
static int reservation_id(const char *app, const char *request_id, char *id)
{
    char buf[POLICY_NAME_MAX + LIMITER_REQUEST_ID_MAX + 16], hex[SHA256_HEX_LEN + 1];

    if (request_id == NULL || request_id[0] == '\0')
        return limiter_script_random_id(id);
    snprintf(buf, sizeof(buf), "reserve\n%s\n%s", app, request_id);
    sha256_hex(buf, strlen(buf), hex);
    memcpy(id, hex, LIMITER_RESERVE_ID_LEN);
    id[LIMITER_RESERVE_ID_LEN] = '\0';
    return 0;
}

/* The answer of a Reserve found done (a retry with its request id). */
static int replayed(const struct rec *r, const char *id, struct limiter_reserve_answer *out,
                    struct permitd_error *err)
{
    int64_t left;

    if (strcmp(r->state, "pending") == 0)
        return permitd_error_set(err, PERMITD_EUNAVAILABLE, "request_id: a Reserve with this "
                                 "id is under way; retry");
    memset(out, 0, sizeof(*out));
    out->allowed = 1;
    out->replayed = 1;
    snprintf(out->id, sizeof(out->id), "%s", id);
    left = (r->expires_us - wall_us()) / 1000;
    out->expires_after_ms = left > 0 ? left : 0;
    out->n = r->n;
    for (size_t i = 0; i < r->n; i++)
        out->items[i].held = r->it[i].e;
    return PERMITD_OK;
}

/* The reservation's indexes (see the top): by expiry (wall clock) and
 * per policy, one member per item. Errors are logged: the reservation
 * stands, settled on its commit all the same. */
static void index_add(struct limiter *l, const char *id, const struct limiter_reserve_item *items,
                      size_t n, int64_t ttl_ms, int64_t deadline_us)
{
    char key[KEY_MAX], score[24], member[LIMITER_RESERVE_ID_LEN + 48];
    int64_t now = wall_us();
    struct permitd_error why;
    struct redis_str zadd[4] = {str("ZADD"), {key, expiry_key(l, key)}, {score, 0}, str(id)};

    zadd[2].len = (size_t)snprintf(score, sizeof(score), "%" PRId64, now + ttl_ms * 1000);
    if (redis_command(l->redis, zadd, 4, deadline_us, NULL, NULL, NULL, &why) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "a reservation was not indexed for its expiry",
                "id=%s error=%s", id, log_q(why.message));
    zadd[2].len = (size_t)snprintf(score, sizeof(score), "%" PRId64, now);
    for (size_t i = 0; i < n; i++) {
        zadd[1].len = open_key(l, items[i].bucket, key);
        zadd[3].p = member;
        zadd[3].len = (size_t)snprintf(member, sizeof(member), "%s|%zu|%" PRId64, id, i + 1,
                                       items[i].estimate);
        if (redis_command(l->redis, zadd, 4, deadline_us, NULL, NULL, NULL, &why) != PERMITD_OK)
            log_msg(LOG_LEVEL_WARN, "a reservation was not indexed for the inspector",
                    "id=%s error=%s", id, log_q(why.message));
    }
}

static void index_remove(struct limiter *l, const char *id, const struct rec *r,
                         int64_t deadline_us)
{
    char key[KEY_MAX], member[LIMITER_RESERVE_ID_LEN + 48];
    struct permitd_error why;
    struct redis_str zrem[3] = {str("ZREM"), {key, expiry_key(l, key)}, str(id)};

    redis_command(l->redis, zrem, 3, deadline_us, NULL, NULL, NULL, &why);
    for (size_t i = 0; i < r->n; i++) {
        zrem[1].len = open_key(l, r->it[i].b, key);
        zrem[2].p = member;
        zrem[2].len = (size_t)snprintf(member, sizeof(member), "%s|%zu|%" PRId64, id, i + 1,
                                       r->it[i].e);
        redis_command(l->redis, zrem, 3, deadline_us, NULL, NULL, NULL, &why);
    }
}

/* Checks and admits every item (h[i].e held on PERMITD_OK; released on
 * an error), and the ttl: the smallest of the request's and each
 * policy's cap. */
static int admit_items(struct limiter *l, const char *const *apps,
                       const struct limiter_reserve_item *items, size_t n, int64_t *ttl_ms,
                       int64_t deadline_us, struct hold_item *h, size_t *failed,
                       struct permitd_error *err)
{
    int rc = PERMITD_OK;
    size_t i;

    for (i = 0; i < n && rc == PERMITD_OK; i++) {
        struct limiter_request req = {items[i].bucket, apps[i], items[i].key, 1, NULL, NULL, NULL};
        *failed = i;
        struct limiter_result res;
        struct limiter_decision d = {l, &req, DO_PEEK, 1, 0, deadline_us, &res, err,
                                     &h[i].lim};
        const struct policies_entry *e = NULL;

        if ((rc = limiter_script_validate(&req, 1, err)) != PERMITD_OK)
            break;
        if (items[i].estimate < 1) {
            rc = permitd_error_set(err, PERMITD_EINVAL, "items[%zu].estimate: %" PRId64 " is "
                                   "not a whole number >= 1", i, items[i].estimate);
            break;
        }
        if ((rc = limiter_script_admit(&d, &e)) != PERMITD_OK)
            break;
        if (e == NULL && res.blocked) {
            rc = permitd_error_set(err, PERMITD_EPERM, "items[%zu]: %s", i, res.reason);
            break;
        }
        if (e == NULL) {
            rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "bucket: policy \"%s\" cannot "
                                   "hold a reservation now", items[i].bucket);
            break;
        }
        h[i].e = e;
        h[i].app = apps[i];
        h[i].key_len = limiter_script_bucket_key(l, &req, e, h[i].key);
        if (e->algorithm == POLICY_CONCURRENCY)
            rc = permitd_error_set(err, PERMITD_EPRECONDITION, "bucket: policy \"%s\" is a "
                                   "concurrency policy, which holds leases: Reserve is for "
                                   "token_bucket, fixed_window, sliding_window and sliding_log",
                                   items[i].bucket);
        else if (items[i].estimate > h[i].lim.max_permits)
            rc = permitd_error_set(err, PERMITD_ERANGE, "items[%zu].estimate: %" PRId64 " is "
                                   "more than policy \"%s\" ever holds (max_permits %" PRId64
                                   "%s)", i, items[i].estimate, items[i].bucket,
                                   h[i].lim.max_permits,
                                   h[i].lim.ovid != 0 ? " for this caller" : "");
        else if (*ttl_ms <= 0 || *ttl_ms > e->reserve_ttl_ms)
            *ttl_ms = e->reserve_ttl_ms;
    }
    if (rc != PERMITD_OK)
        for (size_t j = 0; j < n; j++) {
            policies_release(h[j].e);
            h[j].e = NULL;
        }
    return rc;
}

int limiter_reserve_open(struct limiter *l, const char *app,
                         const struct limiter_reserve_item *items, size_t n, int64_t ttl_ms,
                         const char *request_id, int64_t deadline_us,
                         struct limiter_reserve_answer *out, struct permitd_error *err)
{
    struct hold_item h[LIMITER_RESERVE_ITEMS_MAX];
    struct redis_str args[6 + 2 * LIMITER_RESERVE_ITEMS_MAX];
    char fields[LIMITER_RESERVE_ITEMS_MAX][8];
    char values[LIMITER_RESERVE_ITEMS_MAX][96 + POLICY_NAME_MAX + POLICY_KEY_MAX];
    char pending_s[24], ttl_s[24], grace_s[24], n_s[8];
    int64_t grace = strtoll(l->ttl_s, NULL, 10);
    const char *apps[LIMITER_RESERVE_ITEMS_MAX];
    struct rec r;
    size_t failed;
    int groups, rc, nargs, granted = 1;

    memset(out, 0, sizeof(*out));
    memset(h, 0, sizeof(h));
    if (n < 1 || n > LIMITER_RESERVE_ITEMS_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "items: %zu items; a reservation holds 1 "
                                 "to %d", n, LIMITER_RESERVE_ITEMS_MAX);
    if (ttl_ms < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "ttl_ms: %" PRId64 " is negative", ttl_ms);
    for (size_t i = 0; i < n; i++)
        apps[i] = app;
    if ((rc = admit_items(l, apps, items, n, &ttl_ms, deadline_us, h, &failed, err)) != PERMITD_OK)
        return rc;
    if (reservation_id(app, request_id, out->id) != 0) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "getrandom() gave no reservation id");
        goto done;
    }
    /* the claim: a retry finds the record */
    args[0] = str(app);
    args[1].p = pending_s;
    args[1].len = (size_t)snprintf(pending_s, sizeof(pending_s), "%" PRId64,
                                   (deadline_us == INT64_MAX ? 10000 :
                                    (deadline_us - clock_now_us()) / 1000) + 1000);
    if ((rc = rec_call(l, out->id, "claim", args, 2, deadline_us, &r, err)) != PERMITD_OK)
        goto done;
    if (strcmp(r.word, "exists") == 0) {
        char id[LIMITER_RESERVE_ID_LEN + 1];
        memcpy(id, out->id, sizeof(id));
        rc = replayed(&r, id, out, err);
        goto done;
    }
    groups = group_items(l, h, n);
    for (int g = 0; g < groups && granted && rc == PERMITD_OK; g++)
        rc = hold_group(l, items, h, n, g, 0, deadline_us, &granted, err);
    out->n = n;
    for (size_t i = 0; i < n; i++) {
        out->items[i].held = h[i].held ? items[i].estimate : 0;
        out->items[i].remaining = h[i].out[2] < 0 ? 0 : h[i].out[2];
        out->items[i].limit = h[i].e->max_permits;
        out->items[i].retry_after_ms = h[i].out[4];
        if (h[i].out[4] > out->retry_after_ms)
            out->retry_after_ms = h[i].out[4];
    }
    if (rc != PERMITD_OK || !granted) {
        struct permitd_error why;
        give_back(l, items, h, n, deadline_us);
        rec_call(l, out->id, "drop", NULL, 0, deadline_us, &r, &why);
        for (size_t i = 0; i < n; i++)
            out->items[i].held = 0;
        out->id[0] = '\0';
        goto done;
    }
    /* every group held: the record opened */
    nargs = 0;
    args[nargs].p = ttl_s;
    args[nargs++].len = (size_t)snprintf(ttl_s, sizeof(ttl_s), "%" PRId64, ttl_ms);
    args[nargs].p = grace_s;
    args[nargs++].len = (size_t)snprintf(grace_s, sizeof(grace_s), "%" PRId64,
                                         grace > 0 ? grace : 60000);
    args[nargs++] = str("app");     /* again: the pending record may have expired meanwhile */
    args[nargs++] = str(app);
    args[nargs++] = str("n");
    args[nargs].p = n_s;
    args[nargs++].len = (size_t)snprintf(n_s, sizeof(n_s), "%zu", n);
    for (size_t i = 0; i < n; i++) {
        snprintf(fields[i], sizeof(fields[i]), "%zu", i + 1);
        args[nargs++] = str(fields[i]);
        args[nargs].p = values[i];
        args[nargs++].len = (size_t)snprintf(values[i], sizeof(values[i]),
                                             "%" PRId64 "|%" PRId64 "|%s|%" PRId64 "|%s|%s",
                                             items[i].estimate, h[i].at,
                                             h[i].e->expiry_refund ? "refund" : "keep",
                                             h[i].e->debt_floor, items[i].bucket, items[i].key);
    }
    if ((rc = rec_call(l, out->id, "open", args, nargs, deadline_us, &r, err)) != PERMITD_OK) {
        struct permitd_error why;
        give_back(l, items, h, n, deadline_us);
        rec_call(l, out->id, "drop", NULL, 0, deadline_us, &r, &why);
        out->id[0] = '\0';
        goto done;
    }
    out->allowed = 1;
    out->retry_after_ms = 0;
    out->expires_after_ms = ttl_ms;
    atomic_fetch_add(&l->rsv_reserved, 1);
    index_add(l, out->id, items, n, ttl_ms, deadline_us);
done:
    for (size_t i = 0; i < n; i++)
        policies_release(h[i].e);
    return rc;
}

/* ---- AcquireBatch all_or_nothing across slots ---- */

int limiter_reserve_batch_all(struct limiter *l, const struct limiter_request *reqs, size_t n,
                              int64_t deadline_us, struct limiter_result *res,
                              struct permitd_error *errs, struct permitd_error *err)
{
    struct limiter_reserve_item items[LIMITER_RESERVE_ITEMS_MAX] = {{NULL, NULL, 0}};
    const char *apps[LIMITER_RESERVE_ITEMS_MAX] = {NULL};
    struct hold_item h[LIMITER_RESERVE_ITEMS_MAX];
    int64_t ttl = 0, retry = 0;
    struct permitd_error why;
    size_t failed = 0;
    int groups, rc = PERMITD_OK, granted = 1;

    if (n > LIMITER_RESERVE_ITEMS_MAX)
        return permitd_error_set(err, PERMITD_EPRECONDITION, "all_or_nothing: %zu items span "
                                 "Redis Cluster slots (or algorithms); such a batch is held "
                                 "slot by slot, at most %d items: set colocate on the policy, "
                                 "or send fewer", n, LIMITER_RESERVE_ITEMS_MAX);
    for (size_t i = 0; i < n; i++)
        if (reqs[i].request_id != NULL && reqs[i].request_id[0] != '\0')
            return permitd_error_set(err, PERMITD_EPRECONDITION, "all_or_nothing: the items "
                                     "span Redis Cluster slots (or algorithms) and item %zu "
                                     "carries a request_id: such a batch is held slot by "
                                     "slot, which keeps no request ids (Reserve does)", i);
    memset(h, 0, sizeof(h));
    for (size_t i = 0; i < n; i++) {
        items[i] = (struct limiter_reserve_item){reqs[i].bucket, reqs[i].key,
                                                 reqs[i].permits == 0 ? 1 : reqs[i].permits};
        apps[i] = reqs[i].app;
        memset(&res[i], 0, sizeof(res[i]));
        errs[i] = (struct permitd_error){PERMITD_OK, ""};
    }
    if (admit_items(l, apps, items, n, &ttl, deadline_us, h, &failed, &why) != PERMITD_OK) {
        /* the item refused on its own says why; the others are aborted */
        for (size_t i = 0; i < n; i++)
            if (i != failed)
                permitd_error_set(&errs[i], PERMITD_EABORTED, "not granted: another item of "
                                  "this all_or_nothing batch was refused");
        errs[failed] = why;
        return PERMITD_OK;
    }
    groups = group_items(l, h, n);
    for (int g = 0; g < groups && granted && rc == PERMITD_OK; g++)
        rc = hold_group(l, items, h, n, g, 0, deadline_us, &granted, err);
    if (rc != PERMITD_OK || !granted)
        give_back(l, items, h, n, deadline_us);
    for (size_t i = 0; rc == PERMITD_OK && i < n; i++)
        if (h[i].out[4] > retry)
            retry = h[i].out[4];
    for (size_t i = 0; rc == PERMITD_OK && i < n; i++) {
        res[i].allowed = granted;
        res[i].remaining = h[i].out[2] < 0 ? 0 : h[i].out[2];
        res[i].limit = h[i].e->max_permits;
        res[i].retry_after_ms = granted ? 0 : retry;
        res[i].reset_after_ms = h[i].out[5];
        res[i].window_s = h[i].out[6];
        res[i].tokens_micro = h[i].out[7] < 0 ? 0 : h[i].out[7];
    }
    for (size_t i = 0; i < n; i++)
        policies_release(h[i].e);
    return rc;
}

/* ---- Commit, Cancel, expiry ---- */

/* Settles r's items once its transition is made (see the top): commit
 * (actual per item), cancel (everything back) or expiry (as each item's
 * rule says); notes the outcome in the record. */
static void settle(struct limiter *l, const char *id, struct rec *r, enum limiter_reserve_state to,
                   int64_t deadline_us)
{
    struct redis_str args[4 * LIMITER_RESERVE_ITEMS_MAX];
    char names[LIMITER_RESERVE_ITEMS_MAX][2][24], vals[LIMITER_RESERVE_ITEMS_MAX][2][24];
    struct permitd_error why;
    struct rec ignored;
    int nargs = 0;

    for (size_t i = 0; i < r->n; i++) {
        struct rec_item *it = &r->it[i];
        struct limiter_result res;
        int64_t back = 0, charged = 0, give = 0, take = 0;
        int rc = PERMITD_OK;

        if (to == LIMITER_RESERVE_COMMITTED && it->a > it->e)
            take = it->a - it->e;
        else if (to == LIMITER_RESERVE_COMMITTED)
            give = it->e - it->a;
        else if (to == LIMITER_RESERVE_CANCELLED || it->x)
            give = it->e;
        if (give > 0)
            rc = limiter_refund(l, it->b, r->app, it->k, give, it->at, deadline_us, &res, &back,
                                &why);
        else if (take > 0)
            rc = limiter_charge(l, it->b, r->app, it->k, take, deadline_us, &res, &charged, &why);
        if (rc != PERMITD_OK)
            log_msg(LOG_LEVEL_WARN, "a reservation's item was not settled", "id=%s policy=%s "
                    "error=%s", id, log_q(it->b), log_q(why.message));
        it->r = back;
        it->c = charged;
        atomic_fetch_add(&l->rsv_refunded, (uint64_t)back);
        atomic_fetch_add(&l->rsv_debt, (uint64_t)charged);
        snprintf(names[i][0], sizeof(names[i][0]), "%zu.r", i + 1);
        snprintf(names[i][1], sizeof(names[i][1]), "%zu.c", i + 1);
        snprintf(vals[i][0], sizeof(vals[i][0]), "%" PRId64, back);
        snprintf(vals[i][1], sizeof(vals[i][1]), "%" PRId64, charged);
        args[nargs++] = str(names[i][0]);
        args[nargs++] = str(vals[i][0]);
        args[nargs++] = str(names[i][1]);
        args[nargs++] = str(vals[i][1]);
    }
    if (rec_call(l, id, "note", args, nargs, deadline_us, &ignored, &why) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "a reservation's outcome was not noted", "id=%s error=%s", id,
                log_q(why.message));
    atomic_fetch_add(to == LIMITER_RESERVE_EXPIRED ? &l->rsv_expired : &l->rsv_committed,
                     to == LIMITER_RESERVE_CANCELLED ? 0 : 1);
    index_remove(l, id, r, deadline_us);
}

static void answer(const struct rec *r, enum limiter_reserve_state state, int replay,
                   struct limiter_reserve_settled *out)
{
    memset(out, 0, sizeof(*out));
    out->state = state;
    out->replayed = replay;
    out->n = r->n;
    for (size_t i = 0; i < r->n; i++) {
        snprintf(out->items[i].bucket, sizeof(out->items[i].bucket), "%s", r->it[i].b);
        snprintf(out->items[i].key, sizeof(out->items[i].key), "%s", r->it[i].k);
        out->items[i].held = r->it[i].e;
        out->items[i].actual = r->it[i].has_a && state == LIMITER_RESERVE_COMMITTED
                               ? r->it[i].a : -1;
        out->items[i].refunded = r->it[i].r;
        out->items[i].charged = r->it[i].c;
        out->items[i].expiry_refund = r->it[i].x;
    }
}

static enum limiter_reserve_state state_of(const char *s)
{
    if (strcmp(s, "committed") == 0)
        return LIMITER_RESERVE_COMMITTED;
    if (strcmp(s, "cancelled") == 0)
        return LIMITER_RESERVE_CANCELLED;
    return LIMITER_RESERVE_EXPIRED;
}

static int check_id(const char *id, struct permitd_error *err)
{
    if (id == NULL || strlen(id) != LIMITER_RESERVE_ID_LEN ||
        strspn(id, "0123456789abcdef") != LIMITER_RESERVE_ID_LEN)
        return permitd_error_set(err, PERMITD_EINVAL, "reservation_id: \"%.40s\" is not %d "
                                 "lowercase hex characters", id ? id : "",
                                 LIMITER_RESERVE_ID_LEN);
    return PERMITD_OK;
}

int limiter_reserve_close(struct limiter *l, const char *app, const char *id,
                          const int64_t *actual, size_t n, int64_t deadline_us,
                          struct limiter_reserve_settled *out, struct permitd_error *err)
{
    struct redis_str args[2 + LIMITER_RESERVE_ITEMS_MAX];
    char actual_s[LIMITER_RESERVE_ITEMS_MAX][24];
    enum limiter_reserve_state to = actual ? LIMITER_RESERVE_COMMITTED : LIMITER_RESERVE_CANCELLED;
    struct rec r;
    int rc, nargs = 0;

    memset(out, 0, sizeof(*out));
    if ((rc = check_id(id, err)) != PERMITD_OK ||
        (rc = policy_check_name("app", app, err)) != PERMITD_OK)
        return rc;
    if (actual != NULL && (n < 1 || n > LIMITER_RESERVE_ITEMS_MAX))
        return permitd_error_set(err, PERMITD_EINVAL, "actual: %zu numbers; one per item of "
                                 "the reservation", n);
    args[nargs++] = str(app);
    args[nargs++] = str(actual ? "committed" : "cancelled");
    for (size_t i = 0; actual && i < n; i++) {
        if (actual[i] < 0)
            return permitd_error_set(err, PERMITD_EINVAL, "actual[%zu]: %" PRId64 " is "
                                     "negative", i, actual[i]);
        args[nargs].p = actual_s[i];
        args[nargs++].len = (size_t)snprintf(actual_s[i], sizeof(actual_s[i]), "%" PRId64,
                                             actual[i]);
    }
    /* A reservation another instance is settling (transition made, outcome
     * not noted yet) is read again a few times, so a retry answers what
     * happened rather than a settlement half told; one whose settler died
     * in between answers as it stands. */
    for (int tries = 0;; tries++) {
        if ((rc = rec_call(l, id, "close", args, nargs, deadline_us, &r, err)) != PERMITD_OK)
            return rc;
        if (strcmp(r.word, "settled") != 0 || strcmp(r.state, "pending") == 0 || r.noted ||
            tries >= 20 || clock_now_us() + 20000 > deadline_us)
            break;
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
    }
    if (strcmp(r.word, "none") == 0)
        return permitd_error_set(err, PERMITD_ENOTFOUND, "reservation_id: no reservation "
                                 "\"%s\" (never made, refused, or settled and forgotten)", id);
    if (strcmp(r.word, "app") == 0)
        return permitd_error_set(err, PERMITD_EPERM, "reservation_id: reservation \"%s\" is "
                                 "another app's", id);
    if (strcmp(r.word, "settled") == 0) {
        if (strcmp(r.state, "pending") == 0)
            return permitd_error_set(err, PERMITD_EUNAVAILABLE, "reservation_id: reservation "
                                     "\"%s\" is still being made; retry", id);
        answer(&r, state_of(r.state), 1, out);
        return PERMITD_OK;
    }
    if (strcmp(r.word, "count") == 0)
        return permitd_error_set(err, PERMITD_EINVAL, "actual: %zu numbers for a reservation "
                                 "of more or fewer items: one per item, in the order reserved "
                                 "(nothing changed)", n);
    if (strcmp(r.word, "expired") == 0)
        to = LIMITER_RESERVE_EXPIRED;
    else if (strcmp(r.word, "ok") != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "reservation.lua answered \"%s\"",
                                 r.word);
    settle(l, id, &r, to, deadline_us);
    answer(&r, to, 0, out);
    return PERMITD_OK;
}

/* The ids due in the expiry index, for the sweep. */
struct due {
    size_t n;
    char id[SWEEP_BATCH][LIMITER_RESERVE_ID_LEN + 1];
};

static void due_each(void *ud, const char *s, size_t len)
{
    struct due *d = ud;

    if (d->n < SWEEP_BATCH && len == LIMITER_RESERVE_ID_LEN) {
        memcpy(d->id[d->n], s, len);
        d->id[d->n++][len] = '\0';
    }
}

int limiter_reserve_sweep(struct limiter *l, int64_t deadline_us, int *settled,
                          struct permitd_error *err)
{
    char key[KEY_MAX], max_s[24], batch_s[8];
    struct redis_str zr[7] = {str("ZRANGEBYSCORE"), {key, expiry_key(l, key)}, str("-inf"),
                              {max_s, 0}, str("LIMIT"), str("0"), {batch_s, 0}};
    struct due *d = calloc(1, sizeof(*d));
    int rc;

    if (d == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    zr[3].len = (size_t)snprintf(max_s, sizeof(max_s), "%" PRId64, wall_us());
    zr[6].len = (size_t)snprintf(batch_s, sizeof(batch_s), "%d", SWEEP_BATCH);
    rc = redis_command(l->redis, zr, 7, deadline_us, NULL, due_each, d, err);
    for (size_t i = 0; rc == PERMITD_OK && i < d->n; i++) {
        struct rec r;
        if ((rc = rec_call(l, d->id[i], "expire", NULL, 0, deadline_us, &r, err)) != PERMITD_OK)
            break;
        if (strcmp(r.word, "expired") == 0) {
            settle(l, d->id[i], &r, LIMITER_RESERVE_EXPIRED, deadline_us);
            (*settled)++;
        } else {
            /* settled already, gone, or not yet past expiry on Redis's clock: only the
             * first two leave the index */
            struct rec look;
            struct redis_str a[2] = {str(""), str("")};
            if (rec_call(l, d->id[i], "close", a, 0, deadline_us, &look, err) == PERMITD_OK &&
                strcmp(look.word, "none") == 0) {
                struct redis_str zrem[3] = {str("ZREM"), {key, expiry_key(l, key)},
                                            str(d->id[i])};
                redis_command(l->redis, zrem, 3, deadline_us, NULL, NULL, NULL, err);
            }
        }
    }
    free(d);
    return rc;
}

/* ---- the inspector's figures ---- */

struct tally {
    int64_t count, amount, oldest_us;
    int member;     /* the next string is a member (else its score) */
};

static void tally_each(void *ud, const char *s, size_t len)
{
    struct tally *t = ud;
    const char *bar;

    if (t->member) {
        bar = memchr(s, '|', len);
        bar = bar ? memchr(bar + 1, '|', len - (size_t)(bar + 1 - s)) : NULL;
        if (bar != NULL)
            t->amount += num(bar + 1, len - (size_t)(bar + 1 - s));
        t->count++;
    } else {
        int64_t at = num(s, len);
        if (t->oldest_us == 0 || at < t->oldest_us)
            t->oldest_us = at;
    }
    t->member = !t->member;
}

int limiter_reserve_outstanding(struct limiter *l, const char *policy, int64_t deadline_us,
                                int64_t *count, int64_t *amount, int64_t *oldest_ms,
                                struct permitd_error *err)
{
    char key[KEY_MAX];
    struct redis_str zr[5] = {str("ZRANGE"), {key, 0}, str("0"), str("-1"), str("WITHSCORES")};
    struct tally t = {0, 0, 0, 1};
    int rc;

    *count = *amount = *oldest_ms = 0;
    if ((rc = policy_check_name("name", policy, err)) != PERMITD_OK)
        return rc;
    zr[1].len = open_key(l, policy, key);
    if ((rc = redis_command(l->redis, zr, 5, deadline_us, NULL, tally_each, &t, err)) != PERMITD_OK)
        return rc;
    *count = t.count;
    *amount = t.amount;
    if (t.count > 0 && t.oldest_us > 0)
        *oldest_ms = (wall_us() - t.oldest_us) / 1000;
    if (*oldest_ms < 0)
        *oldest_ms = 0;
    return PERMITD_OK;
}

void limiter_reserve_counters(struct limiter *l, uint64_t *reserved, uint64_t *committed,
                              uint64_t *expired, uint64_t *refunded, uint64_t *debt)
{
    *reserved = atomic_load(&l->rsv_reserved);
    *committed = atomic_load(&l->rsv_committed);
    *expired = atomic_load(&l->rsv_expired);
    *refunded = atomic_load(&l->rsv_refunded);
    *debt = atomic_load(&l->rsv_debt);
}
