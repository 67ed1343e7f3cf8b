/*
 * api.c - RateLimitService over Connect (Acquire, Peek, AcquireBatch), plus
 * /healthz.
 *
 * Each procedure is a thin translation between its protobuf-c messages and
 * the limiter; connect.c does the protocol. Acquire replies also carry the
 * IETF draft RateLimit headers, so a proxy in front can act on a decision
 * without parsing the body:
 *   RateLimit-Policy: "<policy>";q=<max_permits>;w=<seconds to fill>
 *   RateLimit: "<policy>";r=<remaining>;t=<seconds until full>
 *   Retry-After: <seconds, rounded up>            (denials only)
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "clock.h"
#include "connect.h"
#include "permit/v1/ratelimit.pb-c.h"
#include "policy.h"

struct api {
    const struct config *cfg;
    struct limiter *limiter;
    struct stats *stats;
    struct connect_limits limits;
};

static int64_t ceil_div(int64_t a, int64_t b)
{
    return a <= 0 ? 0 : (a + b - 1) / b;
}

static void ratelimit_headers(struct http_response *resp, const char *policy,
                              const struct limiter_result *r)
{
    http_response_header(resp, "RateLimit-Policy", "\"%s\";q=%" PRId64 ";w=%" PRId64,
                         policy, r->limit, r->window_s);
    http_response_header(resp, "RateLimit", "\"%s\";r=%" PRId64 ";t=%" PRId64,
                         policy, r->remaining, ceil_div(r->reset_after_ms, 1000));
    if (!r->allowed)
        http_response_header(resp, "Retry-After", "%" PRId64,
                             ceil_div(r->retry_after_ms, 1000));
}

/* An Acquire waiting for its decision (limiter_acquire_queued): what the
 * reply needs once the decision comes back to the worker's loop. */
struct pending {
    struct api *a;
    const struct http_request *http;
    enum connect_codec codec;
    struct limiter_request lr;
    char bucket[POLICY_NAME_MAX + 1], app[POLICY_NAME_MAX + 1], key[POLICY_KEY_MAX + 1];
    int64_t deadline_us, t0;
};

static void acquire_done(void *ud, int rc, const struct limiter_result *r,
                         const struct permitd_error *err)
{
    struct pending *p = ud;
    struct http_response resp;
    struct permitd_error e = *err;

    memset(&resp, 0, sizeof(resp));
    resp.status = 200;
    if (p->a->stats != NULL) {
        stats_observe(p->a->stats, clock_now_us() - p->t0);
        if (rc != PERMITD_OK)
            stats_record_error(p->a->stats, p->bucket, rc);
        else
            stats_record(p->a->stats, p->bucket, r->allowed);
    }
    if (rc == PERMITD_OK) {
        Permit__V1__AcquireResponse rs = PERMIT__V1__ACQUIRE_RESPONSE__INIT;
        rs.allowed = r->allowed;
        rs.remaining = r->remaining;
        rs.limit = r->limit;
        rs.retry_after_ms = r->retry_after_ms;
        rs.reset_after_ms = r->reset_after_ms;
        rc = connect_reply(p->codec, &rs.base, &resp, &e);
        if (rc == PERMITD_OK)
            ratelimit_headers(&resp, p->bucket, r);
    }
    if (rc != PERMITD_OK)
        connect_error_reply(&resp, &e);
    http_request_resume(p->http, &resp);
    free(p);
}

static void acquire_start(void *arg)
{
    struct pending *p = arg;

    limiter_acquire_queued(p->a->limiter, &p->lr, p->deadline_us, acquire_done, p);
}

/* Acquire is checked here and decided from the worker's loop, pipelined
 * with the other Acquires that arrive meanwhile (limiter.c): the worker goes
 * back to its connections instead of waiting for Redis. */
static int acquire(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                   ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    struct api *a = ud;
    const Permit__V1__AcquireRequest *rq = (const Permit__V1__AcquireRequest *)in;
    struct limiter_request lr = {rq->bucket, rq->app, rq->key, rq->permits};
    struct pending *p;
    int rc;

    if ((rc = limiter_check(&lr, err)) != PERMITD_OK) {
        if (a->stats != NULL)
            stats_record_error(a->stats, rq->bucket, rc);
        return rc;
    }
    p = malloc(sizeof(*p));
    if (p == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    p->a = a;
    p->http = call->http;
    p->codec = call->codec;
    snprintf(p->bucket, sizeof(p->bucket), "%s", rq->bucket);
    snprintf(p->app, sizeof(p->app), "%s", rq->app);
    snprintf(p->key, sizeof(p->key), "%s", rq->key);
    p->lr = (struct limiter_request){p->bucket, p->app, p->key, rq->permits};
    p->deadline_us = call->deadline_us;
    p->t0 = clock_now_us();
    http_request_defer(call->http, acquire_start, p);
    return CONNECT_DEFERRED;
}

static int peek(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    struct api *a = ud;
    const Permit__V1__PeekRequest *rq = (const Permit__V1__PeekRequest *)in;
    Permit__V1__PeekResponse *rs = (Permit__V1__PeekResponse *)out;
    struct limiter_request lr = {rq->bucket, rq->app, rq->key, 0};
    struct limiter_result r;
    int rc;

    rc = limiter_peek(a->limiter, &lr, call->deadline_us, &r, err);
    if (rc != PERMITD_OK)
        return rc;
    rs->remaining = r.remaining;
    rs->limit = r.limit;
    rs->reset_after_ms = r.reset_after_ms;
    return PERMITD_OK;
}

/* The Connect error of one batch item, as the unary call would answer. */
static Permit__V1__BatchError *batch_error(struct connect_call *call, const struct permitd_error *e)
{
    Permit__V1__BatchError *be = connect_call_alloc(call, sizeof(*be));

    if (be == NULL)
        return NULL;
    permit__v1__batch_error__init(be);
    be->code = (char *)connect_code_name(e->code);
    be->message = connect_call_strdup(call, e->message);
    return be->message ? be : NULL;
}

static int acquire_batch(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                         ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    struct api *a = ud;
    const Permit__V1__AcquireBatchRequest *rq = (const Permit__V1__AcquireBatchRequest *)in;
    Permit__V1__AcquireBatchResponse *rs = (Permit__V1__AcquireBatchResponse *)out;
    size_t n = rq->n_requests;
    struct limiter_request *reqs;
    struct limiter_result *res;
    struct permitd_error *errs;
    Permit__V1__AcquireBatchResult *results;
    Permit__V1__AcquireResponse *answers;
    int rc;

    if (n > LIMITER_BATCH_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "requests: %zu items, the limit is %d",
                                 n, LIMITER_BATCH_MAX);
    reqs = connect_call_alloc(call, (n + 1) * sizeof(*reqs));
    res = connect_call_alloc(call, (n + 1) * sizeof(*res));
    errs = connect_call_alloc(call, (n + 1) * sizeof(*errs));
    results = connect_call_alloc(call, (n + 1) * sizeof(*results));
    answers = connect_call_alloc(call, (n + 1) * sizeof(*answers));
    rs->results = connect_call_alloc(call, (n + 1) * sizeof(*rs->results));
    if (!reqs || !res || !errs || !results || !answers || !rs->results)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const Permit__V1__AcquireRequest *r = rq->requests[i];
        reqs[i].bucket = r->bucket;
        reqs[i].app = r->app;
        reqs[i].key = r->key;
        reqs[i].permits = r->permits;
    }
    rc = limiter_acquire_batch(a->limiter, reqs, n, rq->all_or_nothing, call->deadline_us,
                               res, errs, err);
    if (rc != PERMITD_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        Permit__V1__AcquireBatchResult *r = &results[i];
        permit__v1__acquire_batch_result__init(r);
        if (errs[i].code != PERMITD_OK) {
            if (a->stats != NULL)
                stats_record_error(a->stats, reqs[i].bucket, errs[i].code);
            r->result_case = PERMIT__V1__ACQUIRE_BATCH_RESULT__RESULT_ERROR;
            if ((r->error = batch_error(call, &errs[i])) == NULL)
                return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        } else {
            Permit__V1__AcquireResponse *ar = &answers[i];
            permit__v1__acquire_response__init(ar);
            ar->allowed = res[i].allowed;
            ar->remaining = res[i].remaining;
            ar->limit = res[i].limit;
            ar->retry_after_ms = res[i].retry_after_ms;
            ar->reset_after_ms = res[i].reset_after_ms;
            r->result_case = PERMIT__V1__ACQUIRE_BATCH_RESULT__RESULT_RESPONSE;
            r->response = ar;
            if (a->stats != NULL)
                stats_record(a->stats, reqs[i].bucket, res[i].allowed);
        }
        rs->results[i] = r;
    }
    rs->n_results = n;
    return PERMITD_OK;
}

static const struct connect_method methods[] = {
    {"/permit.v1.RateLimitService/Acquire", &permit__v1__acquire_request__descriptor,
     &permit__v1__acquire_response__descriptor, 0, acquire},
    {"/permit.v1.RateLimitService/Peek", &permit__v1__peek_request__descriptor,
     &permit__v1__peek_response__descriptor, 1, peek},
    {"/permit.v1.RateLimitService/AcquireBatch", &permit__v1__acquire_batch_request__descriptor,
     &permit__v1__acquire_batch_response__descriptor, 0, acquire_batch},
    {NULL, NULL, NULL, 0, NULL},
};

int api_new(const struct config *cfg, struct limiter *limiter, struct stats *stats,
            struct api **out, struct permitd_error *err)
{
    struct api *a = calloc(1, sizeof(*a));

    *out = NULL;
    if (a == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    a->cfg = cfg;
    a->limiter = limiter;
    a->stats = stats;
    a->limits.max_body_bytes = (size_t)cfg->max_body_bytes;
    *out = a;
    return PERMITD_OK;
}

void api_free(struct api *a)
{
    free(a);
}

void api_handle(void *ud, const struct http_request *req, struct http_response *resp)
{
    struct api *a = ud;
    const char *path = http_request_path(req);
    struct permitd_error err;

    if (strcmp(path, "/healthz") == 0) {
        resp->content_type = "text/plain";
        resp->body = (char *)"ok\n";
        resp->body_len = 3;
        return;
    }
    if (connect_serve(methods, a, &a->limits, req, resp))
        return;
    permitd_error_set(&err, PERMITD_EUNIMPLEMENTED, "no procedure %.200s", path);
    connect_error_reply(resp, &err);
    resp->status = 404;
}
