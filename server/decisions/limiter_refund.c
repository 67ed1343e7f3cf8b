/*
 * limiter_refund.c - permits given back to a bucket (issue 38): the
 * unused permits of a local lease, a reservation's estimate above what
 * its work cost. One call of the policy's decision script in its mode
 * "refund" (lua/lib/refund_<algorithm>.lua, spliced into each script), so
 * the give-back is as atomic and as exact as a take: a token bucket is
 * refilled to now at the rate in force and then topped up, never above
 * max_permits (nothing earned is re-priced); a window counter or a log
 * gives back only what still counts (the take's window, the entries still
 * in the window), never below empty. Concurrency keeps its leases
 * (Release): a refund of one answers failed_precondition.
 *
 * A charge (limiter_charge(): a reservation's commit above its estimate)
 * is the same call in mode "charge": the permits taken whether the bucket
 * holds them or not, down to the policy's debt floor below empty.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "decisions/limiter.h"
#include "decisions/limiter_internal.h"
#include "decisions/policies.h"
#include "stores/policy.h"

static const struct redis_str MODE_REFUND = {"refund", 6}, MODE_CHARGE = {"charge", 6};

/* One try of limiter_refund() or limiter_charge() (charge; retried: after
 * a "stale" answer and a reload of the policy). */
static int refund(struct limiter *l, const struct limiter_request *req, int charge,
                  int64_t taken_at_us, int retried, int64_t deadline_us,
                  struct limiter_result *res, int64_t *refunded, struct permitd_error *err)
{
    char name[POLICY_REDIS_KEY_MAX], permits_s[24], at_s[24] = "", lease[1] = "", floor_s[24];
    struct redis_str key, args[11];
    const struct policies_entry *e;
    long long out[RW];
    struct limiter_limits lim;      /* the caller's limits: an override's too (issue 37) */
    struct limiter_decision d = {l, req, DO_REFUND, 0, retried, deadline_us, res, err, &lim};
    int rc;

    memset(res, 0, sizeof(*res));
    if ((rc = limiter_script_admit(&d, &e)) != PERMITD_OK || e == NULL)
        return rc;
    if (taken_at_us > 0)
        snprintf(at_s, sizeof(at_s), "%" PRId64, taken_at_us);
    /* wide: the item's third argument is the take's time, not a request id */
    limiter_script_call_head(l, charge ? MODE_CHARGE : MODE_REFUND, LIMITER_POLICY_INDEX, 1,
                             args);
    limiter_script_policy_args(e, &lim, &args[3]);
    limiter_script_item_call(req, DO_REFUND, e->algorithm, 0, name,
                             limiter_script_bucket_key(l, req, e, name), permits_s,
                             LIMITER_POLICY_INDEX, lease, &key, &args[7]);
    args[9] = (struct redis_str){at_s, strlen(at_s)};
    /* a charge's fourth argument: the policy's debt floor */
    args[10].len = (size_t)snprintf(floor_s, sizeof(floor_s), "%" PRId64, e->debt_floor);
    args[10].p = floor_s;
    if (!charge)
        args[10].len = 0;
    /* e is held until the call is answered: args point into its strings */
    rc = redis_script_run(l->redis, limiter_script_of(e), &key, 1, args, 11, deadline_us, out,
                          RW, err);
    policies_release(e);
    if (rc == PERMITD_OK && out[0] == SCRIPT_STALE && !retried) {
        if ((rc = limiter_script_restale(l, req->bucket, out[2], 0, deadline_us,
                                         err)) != PERMITD_OK)
            return rc;
        return refund(l, req, charge, taken_at_us, 1, deadline_us, res, refunded, err);
    }
    d.retried = 1;      /* a stale answer now is an error (limiter_script_conclude()) */
    if ((rc = limiter_script_conclude(&d, rc, out)) != PERMITD_OK)
        return rc;
    *refunded = out[8];         /* the script's RECORD: lease_expires_ms carries it */
    res->lease_expires_ms = 0;
    return PERMITD_OK;
}

int limiter_refund(struct limiter *l, const char *bucket, const char *app, const char *key,
                   int64_t permits, int64_t taken_at_us, int64_t deadline_us,
                   struct limiter_result *res, int64_t *refunded, struct permitd_error *err)
{
    struct limiter_request req = {bucket, app ? app : "*", key ? key : "", permits, NULL, NULL,
                                  NULL};
    int rc;

    memset(res, 0, sizeof(*res));
    *refunded = 0;
    if ((rc = policy_check_name("bucket", bucket, err)) != PERMITD_OK ||
        (rc = policy_check_key("key", req.key, err)) != PERMITD_OK)
        return rc;
    if (permits < 1)
        return permitd_error_set(err, PERMITD_EINVAL, "permits: a refund gives back at least 1 "
                                 "(got %" PRId64 ")", permits);
    if (taken_at_us < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "taken_at_us: %" PRId64 " is negative",
                                 taken_at_us);
    return refund(l, &req, 0, taken_at_us, 0, deadline_us, res, refunded, err);
}

int limiter_charge(struct limiter *l, const char *bucket, const char *app, const char *key,
                   int64_t permits, int64_t deadline_us, struct limiter_result *res,
                   int64_t *charged, struct permitd_error *err)
{
    struct limiter_request req = {bucket, app ? app : "*", key ? key : "", permits, NULL, NULL,
                                  NULL};
    int rc;

    memset(res, 0, sizeof(*res));
    *charged = 0;
    if ((rc = policy_check_name("bucket", bucket, err)) != PERMITD_OK ||
        (rc = policy_check_key("key", req.key, err)) != PERMITD_OK)
        return rc;
    if (permits < 1)
        return permitd_error_set(err, PERMITD_EINVAL, "permits: a charge takes at least 1 "
                                 "(got %" PRId64 ")", permits);
    return refund(l, &req, 1, 0, 0, deadline_us, res, charged, err);
}
