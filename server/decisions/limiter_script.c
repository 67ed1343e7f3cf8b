/*
 * limiter_script.c - a decision's checks and its script call: a request
 * validated and admitted against the in-memory policy (limiter_script_admit()),
 * the call's arguments laid out (limiter_script_call_head(),
 * limiter_script_item_call()), and the script's answer read
 * (limiter_script_conclude()): a stale policy reloaded and asked once more,
 * failure_mode "open", shadow mode. Every other part of the limiter sends
 * its calls through these.
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
#include <time.h>

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

/* How many of n calls met a redirect over several slots (REDIS_CALL_SPLIT). */
uint64_t limiter_script_split_calls(const struct redis_script_call *calls, size_t n)
{
    uint64_t splits = 0;

    for (size_t i = 0; i < n; i++)
        splits += calls[i].rc == REDIS_CALL_SPLIT;
    return splits;
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
int limiter_script_open_pass(struct limiter *l, const struct limiter_request *req,
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
    if (take == DO_TAKE && limiter_script_open_pass(l, req, res))
        return PERMITD_OK;
    return permitd_error_set(err, PERMITD_EUNAVAILABLE,
                             "bucket: policy \"%s\" is in MySQL but not back in Redis yet "
                             "(Redis restarted or was flushed); it is being reloaded", req->bucket);
}

int limiter_script_validate(const struct limiter_request *req, int take, struct permitd_error *err)
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
enum redis_script limiter_script_of(const struct policies_entry *e)
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

    if ((rc = limiter_script_validate(req, 0, err)) != PERMITD_OK)
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

/* ---- overrides (issue 37): the limits a decision sends ---- */

/* Unix microseconds now: an override's expiry is a wall-clock time
 * (MySQL's expires_at), the same on every instance. */
static int64_t wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The policy's rate in force at Unix microsecond t, from its rate history
 * (policies_entry.rates: "t1:<rate before t1>;t2:...", newest first): the
 * rate before the oldest edit after t, else the rate now. Into buf
 * (size bytes); returns buf. */
static const char *rate_at(const struct policies_entry *e, int64_t t, char *buf, size_t size)
{
    const char *r = e->rates != NULL ? e->rates : "", *found = e->rate_s;
    size_t flen = strlen(e->rate_s);

    while (*r != '\0') {
        char *end;
        long long at = strtoll(r, &end, 10);
        const char *colon = end, *semi;
        if (end == r || *colon != ':')
            break;
        semi = strchr(colon + 1, ';');
        if (at > t) {
            found = colon + 1;
            flen = semi != NULL ? (size_t)(semi - found) : strlen(found);
        }
        if (semi == NULL)
            break;
        r = semi + 1;
    }
    snprintf(buf, size, "%.*s", (int)flen, found);
    return buf;
}

/* Appends "t:rate" (a rate history entry, lua/bucket.lua) to lim->p2_s;
 * 0, or -1 when it does not fit. */
static int rates_put(struct limiter_limits *lim, size_t *n, int64_t t, const char *rate)
{
    int w = snprintf(lim->p2_s + *n, sizeof(lim->p2_s) - *n, "%s%" PRId64 ":%s",
                     *n > 0 ? ";" : "", t, rate);

    if (w < 0 || (size_t)w >= sizeof(lim->p2_s) - *n)
        return -1;
    *n += (size_t)w;
    return 0;
}

/* The rate history of a token bucket key under override hit (in force:
 * the policy's rate until the override's since_us, the override's after;
 * expired: that, then the policy's again from expires_us, and the
 * policy's own edits after that), so turning an override on, and its
 * expiry, re-price nothing the bucket earned before (the rate-edit rule):
 * a bucket last written before the change is folded across it. Into
 * lim->p2_s (own_p2); left to the entry's when it does not fit. */
static void override_rates(const struct policies_entry *e, const struct overrides_hit *hit,
                           int expired, struct limiter_limits *lim)
{
    char ov_rate[40], before[40];
    size_t n = 0;
    int ok = 0;

    snprintf(ov_rate, sizeof(ov_rate), "%.17g", hit->rate);
    if (hit->since_us <= 0)
        return;
    if (!expired) {
        ok = rates_put(lim, &n, hit->since_us, rate_at(e, hit->since_us, before,
                                                       sizeof(before))) == 0;
    } else if (hit->expires_us > hit->since_us) {
        /* the policy's edits after the expiry, newest first, as they stand */
        const char *r = e->rates != NULL ? e->rates : "";
        ok = 1;
        while (ok && *r != '\0') {
            char *end;
            long long at = strtoll(r, &end, 10);
            const char *semi = strchr(r, ';');
            size_t len = semi != NULL ? (size_t)(semi - r) : strlen(r);
            if (end == r || *end != ':' || at <= hit->expires_us)
                break;
            if (n + len + 2 >= sizeof(lim->p2_s))
                ok = 0;
            else
                n += (size_t)snprintf(lim->p2_s + n, sizeof(lim->p2_s) - n, "%s%.*s",
                                      n > 0 ? ";" : "", (int)len, r);
            r = semi != NULL ? semi + 1 : r + len;
        }
        ok = ok && rates_put(lim, &n, hit->expires_us, ov_rate) == 0 &&
             rates_put(lim, &n, hit->since_us, rate_at(e, hit->since_us, before,
                                                       sizeof(before))) == 0;
    }
    if (ok)
        lim->own_p2 = 1;
}

/* See limiter_internal.h (struct limiter_limits): the limits a decision
 * of req under policy e sends, overrides looked up (check: a client's
 * request; permitd's own look, the inspector, sees a blocked or exempt
 * key's bucket under the policy's limits). */
void limiter_script_limits(const struct limiter *l, const struct policies_entry *e,
                           const struct limiter_request *req, int check,
                           struct limiter_limits *lim)
{
    struct overrides_hit hit;
    int has = l != NULL && l->overrides != NULL &&
              overrides_lookup(l->overrides, e->name, req->key, req->app, wall_us(), &hit);
    int expired = has && hit.action == OVERRIDES_NONE && hit.id != 0;
    int64_t max = e->max_permits, window = 0;
    double rate = 0;

    lim->action = OVERRIDES_NONE;
    lim->matched = 0;
    lim->ovid = 0;
    lim->expires_us = 0;
    lim->own_p1 = lim->own_p2 = 0;
    lim->match[0] = '\0';
    lim->stamp = e->stamp + (has ? hit.changes : 0);
    if (has && hit.action != OVERRIDES_NONE) {
        lim->action = hit.action;
        lim->matched = 1;
        lim->ovid = hit.id;
        lim->expires_us = hit.expires_us;
        lim->kind = hit.kind;
        memcpy(lim->match, hit.match, sizeof(lim->match));
        if (hit.action == OVERRIDES_LIMIT) {
            max = hit.max_permits > 0 ? hit.max_permits : max;
            rate = hit.rate;
            window = hit.window_ms;
        }
    } else if (req->own != NULL && check) {
        /* the request's own limit (Envoy's descriptor `limit`), below any
         * stored override */
        lim->ovid = -1;
        lim->action = req->own->unlimited ? OVERRIDES_EXEMPT : OVERRIDES_LIMIT;
        if (!req->own->unlimited) {
            max = req->own->max_permits;
            window = req->own->unit_ms;
            rate = (double)req->own->max_permits * 1000.0 / (double)req->own->unit_ms;
        }
    }
    if (!check && lim->action != OVERRIDES_LIMIT)
        lim->action = OVERRIDES_NONE;   /* the inspector: the bucket as it is */
    if (e->algorithm == POLICY_SLIDING_LOG && max > POLICY_LOG_MAX_PERMITS)
        max = POLICY_LOG_MAX_PERMITS;   /* a log holds one entry per permit */
    lim->max_permits = max;
    /* the policy's own strings when they stand (nearly every decision: no
     * printf on the hot path) */
    if (lim->stamp == e->stamp)
        memcpy(lim->stamp_s, e->stamp_s, sizeof(lim->stamp_s));
    else
        snprintf(lim->stamp_s, sizeof(lim->stamp_s), "%" PRIu64, lim->stamp);
    if (max == e->max_permits)
        memcpy(lim->max_s, e->max_s, sizeof(lim->max_s));
    else
        snprintf(lim->max_s, sizeof(lim->max_s), "%" PRId64, max);
    if (e->algorithm == POLICY_TOKEN_BUCKET) {
        if (lim->action == OVERRIDES_LIMIT && rate > 0) {
            snprintf(lim->p1_s, sizeof(lim->p1_s), "%.17g", rate);
            lim->own_p1 = 1;
            lim->own_p2 = 1;        /* "" unless override_rates() says more */
            lim->p2_s[0] = '\0';
            if (lim->ovid > 0) {
                lim->own_p2 = 0;
                hit.rate = rate;
                override_rates(e, &hit, 0, lim);
                if (!lim->own_p2) {
                    lim->own_p2 = 1;
                    lim->p2_s[0] = '\0';
                }
            }
        } else if (expired && hit.rate > 0) {
            lim->matched = 1;
            override_rates(e, &hit, 1, lim);
        }
    } else if (lim->action == OVERRIDES_LIMIT && window > 0) {
        /* the window (a calendar fixed window's too: the override's own
         * length replaces the calendar unit) or a concurrency lease */
        snprintf(lim->p1_s, sizeof(lim->p1_s), "%" PRId64, window);
        lim->own_p1 = 1;
        lim->own_p2 = 1;
        lim->p2_s[0] = '\0';
    }
    if (expired)
        lim->matched = 1;
}

/* The order of two decisions' limits, for laying calls out: those of one
 * policy that compare equal share its place in a call. */
int limiter_limits_cmp(const struct limiter_limits *a, const struct limiter_limits *b)
{
    int c;

    if (a->ovid != b->ovid)
        return a->ovid < b->ovid ? -1 : 1;
    if (a->matched != b->matched)
        return a->matched - b->matched;
    if (a->own_p2 != b->own_p2)
        return a->own_p2 - b->own_p2;
    if ((c = strcmp(a->max_s, b->max_s)) != 0 || (a->own_p1 && (c = strcmp(a->p1_s, b->p1_s))))
        return c;
    return a->own_p2 ? strcmp(a->p2_s, b->p2_s) : 0;
}

/* A blocked key's answer: denied, nothing asked of Redis, the reason. */
static void blocked(const struct limiter_request *req, int take, const struct limiter_limits *lim,
                    struct limiter_result *res)
{
    int64_t left = lim->expires_us > 0 ? (lim->expires_us - wall_us() + 999) / 1000 : 0;

    memset(res, 0, sizeof(*res));
    res->allowed = take == DO_PEEK;    /* a Peek's allowed is always 1 (limiter.h) */
    res->blocked = 1;
    res->limit = 0;
    /* until the block expires; one that never does: an hour, a hint */
    res->retry_after_ms = left > 0 ? left : 3600000;
    res->reset_after_ms = res->retry_after_ms;
    snprintf(res->reason, sizeof(res->reason), "blocked by override %s \"%.64s\" of policy "
             "\"%.40s\"", overrides_kind_name(lim->kind), lim->match, req->bucket);
}

/* A new random id of LIMITER_LEASE_ID_LEN hex characters (a lease's, a
 * reservation's: limiter_reserve.c); -1 when the kernel gives none. */
int limiter_script_random_id(char *out)
{
    return new_lease_id(out);
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
int limiter_script_admit(const struct limiter_decision *d, const struct policies_entry **out)
{
    return limiter_script_admit_loaded(d, NULL, out);
}

/* limiter_script_admit(); loaded: the loader has read the policies missing (its outcome
 * per name, rc and err; a name it does not hold could not be handed to
 * the loader, over LOADER_PENDING_MAX: resource_exhausted), so a policy
 * still missing is not read again; NULL: it is read here. A name Redis
 * said a moment ago holds no policy (limiter_loader_absent_has()) is not read again
 * either way. */
int limiter_script_admit_loaded(const struct limiter_decision *d, const struct load *loaded,
                                const struct policies_entry **out)
{
    struct limiter *l = d->l;
    const struct limiter_request *req = d->req;
    struct limiter_result *res = d->res;
    struct permitd_error *err = d->err;
    const struct policies_entry *e = policies_get(l->policies, req->bucket);
    int rc, found = 0;

    *out = NULL;
    if (e == NULL) {
        const struct pend *x =
            loaded != NULL ? limiter_loader_load_find(loaded, req->bucket) : NULL;
        if (limiter_loader_absent_has(l, req->bucket)) {
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
            rc = policies_reload(l->policies, req->bucket, d->deadline_us, &found, err);
        }
        if (rc == PERMITD_EUNAVAILABLE && d->take == DO_TAKE && d->check &&
            limiter_script_open_pass(l, req, res))
            return PERMITD_OK;
        if (rc != PERMITD_OK)
            return rc;
        if (found)
            e = policies_get(l->policies, req->bucket);
        if (e == NULL)
            return permitd_error_set(err, PERMITD_ENOTFOUND, "bucket: no policy named \"%s\"",
                                     req->bucket);
    }
    return limiter_script_admit_entry(d, e, out);
}

/* limiter_script_admit() once the entry is found (e: a reference, which is the caller's
 * on PERMITD_OK in *out, else released). */
int limiter_script_admit_entry(const struct limiter_decision *d, const struct policies_entry *e,
                               const struct policies_entry **out)
{
    struct limiter *l = d->l;
    const struct limiter_request *req = d->req;
    int take = d->take, check = d->check;
    struct limiter_result *res = d->res;
    struct permitd_error *err = d->err;
    int64_t permits = req->permits == 0 ? 1 : req->permits;
    struct limiter_limits own, *lim = d->lim != NULL ? d->lim : &own;
    int rc;

    *out = NULL;
    res->limit = e->max_permits;
    if (e->broken == NULL)
        limiter_script_limits(l, e, req, check, lim);
    else
        lim->action = OVERRIDES_NONE, lim->max_permits = e->max_permits;
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
    else if (take == DO_REFUND && e->algorithm == POLICY_CONCURRENCY)
        rc = permitd_error_set(err, PERMITD_EPRECONDITION,
                               "bucket: policy \"%s\" is a concurrency policy: its permits come "
                               "back by Release, not by a refund", req->bucket);
    else if ((take == DO_RELEASE || take == DO_RENEW) && e->algorithm != POLICY_CONCURRENCY)
        rc = permitd_error_set(err, PERMITD_EPRECONDITION,
                               "bucket: policy \"%s\" is a %s, which holds no leases: %s "
                               "is for concurrency policies", req->bucket,
                               policy_algorithm_name(e->algorithm),
                               take == DO_RELEASE ? "Release" : "Renew");
    else if (take == DO_TAKE && permits > lim->max_permits && lim->action != OVERRIDES_BLOCK)
        rc = permitd_error_set(err, PERMITD_ERANGE,
                               "permits: %" PRId64 " is more than policy \"%s\" ever holds "
                               "(max_permits %" PRId64 "%s)", permits, req->bucket,
                               lim->max_permits, lim->ovid != 0 ? " for this caller" : "");
    else if (e->missing && !check)     /* permitd's own look: not there */
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "bucket: no policy named \"%s\"",
                               req->bucket);
    else if (e->missing)
        rc = missing(l, req, take, res, err);
    else if (l != NULL && l->redis != NULL && !redis_script_present(l->redis, limiter_script_of(e)))
        rc = permitd_error_set(err, PERMITD_EUNIMPLEMENTED,
                               "bucket: policy \"%s\" is a %s, and this build of permitd lacks "
                               "its script (lua/%s)", req->bucket,
                               policy_algorithm_name(e->algorithm),
                               redis_script_name(limiter_script_of(e)));
    else
        rc = PERMITD_OK;
    if (rc == PERMITD_OK && lim->action == OVERRIDES_BLOCK &&
        (take == DO_TAKE || take == DO_PEEK)) {
        /* blocked (issue 37): a denial Redis is not asked for, saying why */
        blocked(req, take, lim, res);
        policies_release(e);
        return PERMITD_OK;
    }
    if (rc != PERMITD_OK || e->missing) {
        policies_release(e);
        return rc;
    }
    res->limit = lim->max_permits;
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
int limiter_script_call_refused(int rc, const char *bucket, struct permitd_error *err)
{
    if (rc == PERMITD_EUNAVAILABLE)
        return permitd_error_set(err, rc, "redis cannot decide policy \"%s\" now (loading, busy "
                                 "or read-only: see permitd's log)", bucket);
    return permitd_error_set(err, rc, "redis could not decide policy \"%s\" (see permitd's log)",
                             bucket);
}


/* The script answered "stale" for a bucket of policy `bucket` (stamp: the
 * version stamp the bucket was written under): this instance's copy is
 * older than the one another instance decided it under. The policy is
 * reloaded from Redis; PERMITD_OK when the caller may ask once more. A
 * second "stale" (retried) is an error: Redis's own copy of the policy is
 * older than the bucket's, which only a policy hash rewritten by hand with
 * a lower version can cause. */
int limiter_script_restale(struct limiter *l, const char *bucket, long long stamp, int retried,
                           int64_t deadline_us, struct permitd_error *err)
{
    if (retried)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "policy \"%s\": a bucket was decided under version stamp %lld, "
                                 "newer than redis's copy of the policy (%" PRIu64 "); was the "
                                 "policy hash rewritten with a lower version?", bucket, stamp,
                                 policies_stamp(l->policies, bucket));
    atomic_fetch_add(&l->stale_retries, 1);
    /* The bucket may carry a newer override count (another instance had
     * the change notice first): this policy's overrides read again. A
     * failure leaves the copy as it is (the retry may then be stale). */
    if (l->overrides_reload != NULL) {
        struct permitd_error ignored = {0, ""};
        (void)l->overrides_reload(l->overrides_ud, bucket, &ignored);
    }
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
int limiter_script_conclude(const struct limiter_decision *d, int rc, const long long *out)
{
    struct limiter *l = d->l;
    const struct limiter_request *req = d->req;
    struct limiter_result *res = d->res;
    struct permitd_error *err = d->err;
    int take = d->take, check = d->check;
    int64_t permits = req->permits == 0 ? 1 : req->permits;

    if (rc == PERMITD_EUNAVAILABLE && take == DO_TAKE && check &&
        limiter_script_open_pass(l, req, res))
        return PERMITD_OK;
    if (rc != PERMITD_OK)
        return rc;
    res->limit = out[3];
    if (out[0] == SCRIPT_STALE) {
        struct limiter_decision again = *d;
        if ((rc = limiter_script_restale(l, req->bucket, out[2], d->retried, d->deadline_us,
                                         err)) != PERMITD_OK)
            return rc;
        again.retried = 1;
        return limiter_script_decide(&again);
    }
    if (out[0] != 0)
        return script_error(l, out, req, permits, err);
    res->allowed = out[1] != 0;
    /* a bucket in debt (issue 38: limiter_charge()) has nothing left, not less */
    res->remaining = out[2] < 0 ? 0 : out[2];
    res->retry_after_ms = out[4];
    res->reset_after_ms = out[5];
    res->window_s = out[6];
    res->tokens_micro = out[7] < 0 ? 0 : out[7];
    res->lease_expires_ms = out[8];
    res->replayed = (out[9] & FLAG_REPLAYED) != 0;
    res->noop = (out[9] & FLAG_NOOP) != 0;
    res->lease_id[0] = '\0';
    res->shadow = 0;
    if (check && (take == DO_PEEK || (take == DO_TAKE && !res->allowed)))
        shadow(l, req, take, res);
    if (check && take == DO_TAKE && d->lim != NULL && d->lim->action == OVERRIDES_EXEMPT) {
        /* exempt (issue 37): allowed whatever the bucket holds; a take
         * the bucket allowed was counted there, a denied one took nothing */
        res->exempt = 1;
        res->allowed = 1;
        res->shadow = 0;
    }
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

/* The script's first argument: what a call does with its items
 * (an all_or_nothing AcquireBatch's "all" is limiter_plan.c's). */
static const struct redis_str MODE_TAKE = {"take", 4}, MODE_PEEK = {"peek", 4},
                              MODE_RELEASE = {"release", 7}, MODE_RENEW = {"renew", 5};

struct redis_str limiter_script_mode_arg(int take)
{
    switch (take) {
    case DO_TAKE: case DO_LEASE: return MODE_TAKE;
    case DO_RELEASE: return MODE_RELEASE;
    case DO_RENEW: return MODE_RENEW;
    default: return MODE_PEEK;
    }
}

/* The one place a decision script's call is laid out (lua/bucket.lua's
 * header, for every algorithm): ARGV[1] the mode, ARGV[2] np, ARGV[3] the
 * request-id time-to-live (limiter_script_call_head()), then 4 per policy
 * (limiter_script_policy_args()), then 4 per item
 * (limiter_script_item_call()), then the keys of other slots. A call none
 * of whose items carries a request id or a lease id
 * (limiter_script_item_wide(): nearly every call) is compact: ARGV[3] ""
 * and 2 per item,
 * its policy and permits, two empty strings an item fewer for Redis to
 * read (tests/bench/redis-cost.sh). */

/* A policy's four, as one call sends them (ARGV[4..7] of policy 1): its
 * version stamp, max_permits, p1 and p2 (policies_p1(): rate and rate
 * history for a token bucket, window or lease for the others), as lim
 * (limiter_script_limits()) has them: the override's or the policy's. The
 * strings are lim's and e's: they live as long as lim and the caller's
 * reference. */
void limiter_script_policy_args(const struct policies_entry *e, const struct limiter_limits *lim,
                                struct redis_str *args)
{
    const char *p1 = lim->own_p1 ? lim->p1_s : policies_p1(e);
    const char *p2 = lim->own_p2 ? lim->p2_s : policies_p2(e);

    args[0] = (struct redis_str){lim->stamp_s, strlen(lim->stamp_s)};
    args[1] = (struct redis_str){lim->max_s, strlen(lim->max_s)};
    args[2] = (struct redis_str){p1, strlen(p1)};
    args[3] = (struct redis_str){p2, strlen(p2)};
}

/* ARGV[1..3]: the mode, np (in npol, which the caller fills and keeps)
 * and the request-id time-to-live, or "" when no item is wide (the
 * compact call). */
void limiter_script_call_head(const struct limiter *l, struct redis_str mode, const char *npol,
                              int wide, struct redis_str *args)
{
    args[0] = mode;
    args[1] = (struct redis_str){npol, strlen(npol)};
    args[2] = wide ? (struct redis_str){l->ttl_s, strlen(l->ttl_s)} : (struct redis_str){"", 0};
}

/* Whether an item carries a request id (a take's) or a lease id (a
 * concurrency take's new one; a release's or renew's): its call then
 * sends 4 arguments an item, not 2 (limiter_script_item_call()). */
int limiter_script_item_wide(const struct limiter_request *req, int take,
                             enum policy_algorithm algo)
{
    if (take == DO_TAKE)
        return algo == POLICY_CONCURRENCY || (req->request_id != NULL && req->request_id[0]);
    return take == DO_RELEASE || take == DO_RENEW || take == DO_LEASE;
}

/* The Redis key of req's bucket under policy e (colocated or not) into name;
 * returns its length. */
size_t limiter_script_bucket_key(const struct limiter *l, const struct limiter_request *req,
                                 const struct policies_entry *e, char *name)
{
    return policy_bucket_key(name, l->cfg->redis_prefix, req->bucket, e->algorithm,
                             e->colocate, req->key);
}

/* One item of a script call: its Redis key (*key, the string in name,
 * built there already: limiter_script_bucket_key()) and its arguments, four in a wide
 * call (limiter_script_call_head()), else the first two (args[4]: its policy's number
                * in the call, index; its permits, in permits_s; its request id, on a
                * take; its lease id, in lease: a concurrency take's new one, drawn here
                * unless lease holds one already (start it empty), or the lease a release
                * or renew acts on). The strings must live until the call is answered:
 * the caller's (a job's, a plan's). Returns the number of arguments (2
 * or 4), -1 when no lease id could be drawn (its 4 arguments laid out
 * all the same, the lease id empty: the script refuses such a take). */
int limiter_script_item_call(const struct limiter_request *req, int take,
                             enum policy_algorithm algo, int wide, char *name, size_t name_len,
                             char *permits_s, const char *index, char *lease,
                             struct redis_str *key, struct redis_str *args)
{
    int64_t permits = req->permits == 0 ? 1 : req->permits;
    const char *rid;
    int n = 4;

    if (take == DO_LEASE)
        take = DO_TAKE;             /* a take whose request id is the lease's */
    rid = take == DO_TAKE && req->request_id ? req->request_id : "";

    key->p = name;
    key->len = name_len;
    args[0].p = index;
    args[0].len = strlen(index);
    args[1].p = permits_s;
    args[1].len = (size_t)snprintf(permits_s, 24, "%" PRId64,
                                   take == DO_TAKE || take == DO_REFUND ? permits : 1);
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
int limiter_script_decide(const struct limiter_decision *d)
{
    struct limiter *l = d->l;
    const struct limiter_request *req = d->req;
    int take = d->take;
    struct permitd_error *err = d->err;
    char name[POLICY_REDIS_KEY_MAX], permits_s[24], lease[LIMITER_LEASE_ID_LEN + 1] = "";
    struct redis_str key, args[11];
    const struct policies_entry *e;
    long long out[RW];
    struct limiter_limits own;
    struct limiter_decision with = *d;
    int rc, wide, nitem;

    if (with.lim == NULL)
        with.lim = &own;
    d = &with;
    memset(d->res, 0, sizeof(*d->res));
    if (d->check && (rc = limiter_script_validate(req, take, err)) != PERMITD_OK)
        return rc;
    if ((rc = limiter_script_admit(d, &e)) != PERMITD_OK || e == NULL)
        return rc;
    wide = limiter_script_item_wide(req, take, e->algorithm);
    limiter_script_call_head(l, limiter_script_mode_arg(take), LIMITER_POLICY_INDEX, wide, args);
    limiter_script_policy_args(e, d->lim, &args[3]);
    if ((nitem = limiter_script_item_call(req, take, e->algorithm, wide, name,
                                          limiter_script_bucket_key(l, req, e, name), permits_s,
                                          LIMITER_POLICY_INDEX, lease, &key, &args[7])) < 0) {
        policies_release(e);
        return permitd_error_set(err, PERMITD_EINTERNAL, "getrandom() gave no lease id: %s",
                                 strerror(errno));
    }
    rc = redis_script_run(l->redis, limiter_script_of(e), &key, 1, args, 7 + nitem,
                          d->deadline_us, out, RW, err);
    rc = limiter_script_conclude(d, rc, out);
    policies_release(e);
    return rc;
}

int limiter_check(const struct limiter_request *req, struct permitd_error *err)
{
    return limiter_script_validate(req, 1, err);
}
