/*
 * limiter.c - request validation and the one script call per decision.
 *
 * All bucket arithmetic lives in lua/bucket.lua, inside Redis, against the
 * Redis clock: that is what makes one limit hold across any number of
 * permitd instances. This file only decides what to ask and how to read
 * the answer.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter.h"
#include "policy.h"

struct limiter {
    const struct config *cfg;
    struct redis *redis;
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
    *out = l;
    return PERMITD_OK;
}

void limiter_free(struct limiter *l)
{
    free(l);
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
    return PERMITD_OK;
}

/* Maps the script's status (a negated Connect code, see lua/bucket.lua)
 * to an error that names the policy. */
static int script_error(long long status, const struct limiter_request *req,
                        int64_t permits, long long limit, struct permitd_error *err)
{
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
        return permitd_error_set(err, PERMITD_ERANGE,
                                 "permits: %" PRId64 " is more than policy \"%s\" ever holds "
                                 "(max_permits %lld)", permits, req->bucket, limit);
    default:
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "policy \"%s\" in redis is not a valid policy (script status %lld)",
                                 req->bucket, status);
    }
}

/* validate: 0 for permitd's own calls (app "*" may look at any bucket). */
static int decide(struct limiter *l, const struct limiter_request *req, int take, int check,
                  int64_t deadline_us, struct limiter_result *res, struct permitd_error *err)
{
    char hash_key[POLICY_REDIS_KEY_MAX], state_key[POLICY_REDIS_KEY_MAX], permits_s[24];
    struct redis_str keys[2], args[3];
    long long out[8];
    int64_t permits = req->permits == 0 ? 1 : req->permits;
    int rc;

    memset(res, 0, sizeof(*res));
    if (check && (rc = validate(req, take, err)) != PERMITD_OK)
        return rc;

    keys[0].p = hash_key;
    keys[0].len = policy_redis_key(hash_key, l->cfg->redis_prefix, req->bucket,
                                   POLICY_KEY_HASH, NULL);
    keys[1].p = state_key;
    keys[1].len = policy_redis_key(state_key, l->cfg->redis_prefix, req->bucket,
                                   POLICY_KEY_BUCKET, req->key);
    args[0].p = req->app;
    args[0].len = strlen(req->app);
    args[1].p = permits_s;
    args[1].len = (size_t)snprintf(permits_s, sizeof(permits_s), "%" PRId64, take ? permits : 1);
    args[2].p = take ? "1" : "0";
    args[2].len = 1;

    rc = redis_script_run(l->redis, REDIS_SCRIPT_BUCKET, keys, 2, args, 3, deadline_us,
                          out, 8, err);
    if (rc != PERMITD_OK)
        return rc;
    res->limit = out[3];
    if (out[0] != 0)
        return script_error(out[0], req, permits, out[3], err);
    res->allowed = out[1] != 0;
    res->remaining = out[2];
    res->retry_after_ms = out[4];
    res->reset_after_ms = out[5];
    res->window_s = out[6];
    res->tokens_micro = out[7];
    return PERMITD_OK;
}

int limiter_acquire(struct limiter *l, const struct limiter_request *req,
                    int64_t deadline_us, struct limiter_result *res,
                    struct permitd_error *err)
{
    return decide(l, req, 1, 1, deadline_us, res, err);
}

int limiter_peek(struct limiter *l, const struct limiter_request *req,
                 int64_t deadline_us, struct limiter_result *res,
                 struct permitd_error *err)
{
    return decide(l, req, 0, 1, deadline_us, res, err);
}

int limiter_inspect(struct limiter *l, const char *bucket, const char *key,
                    int64_t deadline_us, struct limiter_result *res,
                    struct permitd_error *err)
{
    struct limiter_request req = {bucket, "*", key ? key : "", 1};
    int rc;

    if ((rc = policy_check_name("name", bucket, err)) != PERMITD_OK ||
        (rc = policy_check_key("key", req.key, err)) != PERMITD_OK)
        return rc;
    return decide(l, &req, 0, 0, deadline_us, res, err);
}

int limiter_reset(struct limiter *l, const char *bucket, const char *key,
                  int64_t deadline_us, struct permitd_error *err)
{
    char state_key[POLICY_REDIS_KEY_MAX];
    struct redis_str del[2];
    int rc;

    if ((rc = policy_check_name("name", bucket, err)) != PERMITD_OK ||
        (rc = policy_check_key("key", key ? key : "", err)) != PERMITD_OK)
        return rc;
    del[0].p = "DEL";
    del[0].len = 3;
    del[1].p = state_key;
    del[1].len = policy_redis_key(state_key, l->cfg->redis_prefix, bucket, POLICY_KEY_BUCKET, key);
    return redis_command(l->redis, del, 2, deadline_us, NULL, NULL, NULL, err);
}
