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
    else if (take == DO_TAKE && permits > e->max_permits)
        rc = permitd_error_set(err, PERMITD_ERANGE,
                               "permits: %" PRId64 " is more than policy \"%s\" ever holds "
                               "(max_permits %" PRId64 ")", permits, req->bucket, e->max_permits);
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
    case DO_TAKE: return MODE_TAKE;
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
 * history for a token bucket, window or lease for the others). The
 * strings are e's: they live as long as the caller's reference. */
void limiter_script_policy_args(const struct policies_entry *e, struct redis_str *args)
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
    return take == DO_RELEASE || take == DO_RENEW;
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
    const char *rid = take == DO_TAKE && req->request_id ? req->request_id : "";
    int n = 4;

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
    int rc, wide, nitem;

    memset(d->res, 0, sizeof(*d->res));
    if (d->check && (rc = limiter_script_validate(req, take, err)) != PERMITD_OK)
        return rc;
    if ((rc = limiter_script_admit(d, &e)) != PERMITD_OK || e == NULL)
        return rc;
    wide = limiter_script_item_wide(req, take, e->algorithm);
    limiter_script_call_head(l, limiter_script_mode_arg(take), LIMITER_POLICY_INDEX, wide, args);
    limiter_script_policy_args(e, &args[3]);
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
