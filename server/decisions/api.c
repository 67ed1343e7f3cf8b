/*
 * api.c - RateLimitService over Connect (Acquire, Peek, AcquireBatch,
 * Release, Renew, Reserve, Commit, Cancel), plus /healthz; forward-auth's
 * path handed to forward.c.
 *
 * A door: each procedure decodes (connect.c does the protocol), hands the
 * request and the caller's Authorization to the decision service
 * (service.h: key, app, validation, the limiter, the counting) and encodes
 * its answer (answer.h). Only the access log line and the Connect reply
 * are written here. Acquire replies also carry the
 * IETF draft RateLimit headers, so a proxy in front can act on a decision
 * without parsing the body:
 *   RateLimit-Policy: "<policy>";q=<max_permits>;w=<seconds to fill>
 *   RateLimit: "<policy>";r=<remaining>;t=<seconds until full>
 *   Retry-After: <seconds, rounded up>            (denials only)
 */
#include <stdlib.h>
#include <string.h>

#include "decisions/api.h"
#include "decisions/answer.h"
#include "decisions/forward.h"
#include "decisions/service.h"
#include "transport/connect.h"
#include "permit/v1/ratelimit.pb-c.h"
#include "stores/policy.h"

struct api {
    const struct config *cfg;
    struct service *service;
    struct forward *forward;        /* /v1/forward-auth (issue 25); NULL: not served */
    struct connect_limits limits;
    /* AcquireResponse's allowed and remaining: written in JSON even when
     * false and 0 (a denial says so; proto3 JSON would leave them out), in
     * Acquire replies and in AcquireBatch items alike. NULL-ended. */
    const ProtobufCFieldDescriptor *always[3];
    /* ReleaseResponse's released and RenewResponse's renewed, likewise:
     * false is the answer "the lease was not held". */
    const ProtobufCFieldDescriptor *always_released[2], *always_renewed[2];
    /* ReserveResponse's allowed (a refusal says so) and the settled items'
     * numbers (a refund of 0 is an answer) */
    const ProtobufCFieldDescriptor *always_reserved[2], *always_settled[5];
};

/* Hands a deferred call's answer back: resp as filled, or the Connect error
 * for rc. */
static void deferred_answer(const struct http_request *http, int rc, struct http_response *resp,
                            const struct permitd_error *err)
{
    if (rc != PERMITD_OK)
        connect_error_reply(resp, err);
    http_request_resume(http, resp);
}

/* A unary call waiting for its decision: the service's record and what
 * the reply needs, in the request's own storage (http_request_alloc()),
 * as long as the request. */
struct pending {
    struct service_take take;
    struct api *a;
    const struct http_request *http;
    enum connect_codec codec;
};

static void decided(void *ud, int rc, const struct limiter_result *r,
                    const struct permitd_error *err)
{
    struct pending *p = ud;
    struct api *a = p->a;
    struct http_response resp;
    struct permitd_error e = *err;
    Permit__V1__AcquireResponse acq;
    Permit__V1__PeekResponse peek;
    Permit__V1__ReleaseResponse rel = PERMIT__V1__RELEASE_RESPONSE__INIT;
    Permit__V1__RenewResponse ren = PERMIT__V1__RENEW_RESPONSE__INIT;

    http_response_init(&resp);
    if (rc == PERMITD_OK) {
        switch (p->take.kind) {
        case SERVICE_ACQUIRE:
            answer_decision_message(&acq, r);
            rc = connect_reply(p->http, p->codec, &acq.base, a->always, &resp, &e);
            if (rc == PERMITD_OK)
                answer_ratelimit_headers(&resp, p->take.bucket, r);
            break;
        case SERVICE_PEEK:
            answer_peek_message(&peek, r);
            rc = connect_reply(p->http, p->codec, &peek.base, NULL, &resp, &e);
            break;
        case SERVICE_RELEASE:
            rel.released = r->allowed && !r->noop;
            rel.remaining = r->remaining;
            rel.limit = r->limit;
            rc = connect_reply(p->http, p->codec, &rel.base, a->always_released, &resp, &e);
            break;
        default:
            ren.renewed = r->allowed && !r->noop;
            ren.lease_expires_after_ms = ren.renewed ? r->lease_expires_ms : 0;
            rc = connect_reply(p->http, p->codec, &ren.base, a->always_renewed, &resp, &e);
        }
    }
    deferred_answer(p->http, rc, &resp, &e);
}

/* Every unary procedure: the request handed to the service with the
 * caller's key, the access log told who called, the answer deferred to
 * the worker's loop (the worker goes back to its connections instead of
 * waiting for Redis). */
static int decide(struct api *a, struct connect_call *call, enum service_kind kind,
                  const struct limiter_request *lr, struct permitd_error *err)
{
    struct service_caller c = {http_request_header(call->http, "Authorization"), "", ""};
    struct pending *p = http_request_alloc(call->http, sizeof(*p));
    int rc;

    if (p == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    p->a = a;
    p->http = call->http;
    p->codec = call->codec;
    rc = service_decide(api_worker(call->http), &p->take, kind, &c, lr, call->deadline_us,
                        decided, p, err);
    http_request_log_who(call->http, c.app[0] ? c.app : lr->app, c.key_prefix);
    if (rc != PERMITD_OK)
        return rc;
    http_request_defer(call->http);
    service_queue(api_worker(call->http), &p->take);
    return CONNECT_DEFERRED;
}

static int acquire(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                   ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    struct limiter_request lr = answer_acquire_request((const Permit__V1__AcquireRequest *)in);

    (void)out;
    (void)scratch;
    return decide(ud, call, SERVICE_ACQUIRE, &lr, err);
}

static int peek(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    struct limiter_request lr = answer_peek_request((const Permit__V1__PeekRequest *)in);

    (void)out;
    (void)scratch;
    return decide(ud, call, SERVICE_PEEK, &lr, err);
}

static int release(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                   ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    const Permit__V1__ReleaseRequest *rq = (const Permit__V1__ReleaseRequest *)in;
    struct limiter_request lr = {rq->bucket, rq->app, rq->key, 0, NULL, rq->lease_id, NULL};

    (void)out;
    (void)scratch;
    return decide(ud, call, SERVICE_RELEASE, &lr, err);
}

static int renew(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                 ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    const Permit__V1__RenewRequest *rq = (const Permit__V1__RenewRequest *)in;
    struct limiter_request lr = {rq->bucket, rq->app, rq->key, 0, NULL, rq->lease_id, NULL};

    (void)out;
    (void)scratch;
    return decide(ud, call, SERVICE_RENEW, &lr, err);
}

/* An AcquireBatch waiting for its decisions, in one block of the request's
 * storage: the service's record, the items with copies of their strings,
 * and room for the answers and the reply message. */
struct pending_batch {
    struct service_batch b;
    struct api *a;
    const struct http_request *http;
    enum connect_codec codec;
    Permit__V1__AcquireBatchResult *results, **result_ptrs;
    Permit__V1__AcquireResponse *answers;
    Permit__V1__BatchError *batch_errors;
};

static void acquire_batch_done(void *ud, int rc, const struct permitd_error *err)
{
    struct pending_batch *p = ud;
    Permit__V1__AcquireBatchResponse rs = PERMIT__V1__ACQUIRE_BATCH_RESPONSE__INIT;
    struct http_response resp;
    struct permitd_error e = *err;

    http_response_init(&resp);
    for (size_t i = 0; rc == PERMITD_OK && i < p->b.n; i++) {
        answer_batch_item(&p->results[i], &p->answers[i], &p->batch_errors[i], &p->b.res[i],
                          &p->b.errs[i]);
        p->result_ptrs[i] = &p->results[i];
    }
    if (rc == PERMITD_OK) {
        rs.results = p->result_ptrs;
        rs.n_results = p->b.n;
        rc = connect_reply(p->http, p->codec, &rs.base, p->a->always, &resp, &e);
    }
    deferred_answer(p->http, rc, &resp, &e);
}

/* AcquireBatch is decided from the worker's loop too: its calls go to Redis
 * with the Acquires of the same pass, and the worker serves other
 * connections meanwhile. */
static int acquire_batch(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                         ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    struct api *a = ud;
    const Permit__V1__AcquireBatchRequest *rq = (const Permit__V1__AcquireBatchRequest *)in;
    struct service_caller c = {http_request_header(call->http, "Authorization"), "", ""};
    size_t n = rq->n_requests, strings = 0, size;
    struct pending_batch *p;
    const char *app = c.app;
    char *at;
    int rc;

    (void)out;
    (void)scratch;
    rc = service_batch_authorize(a->service, &c, (const Permit__V1__AcquireRequest *const *)
                                 rq->requests, n, err);
    if (n <= LIMITER_BATCH_MAX)                 /* a batch too long names no one */
        http_request_log_who(call->http, c.app, c.key_prefix);
    if (rc != PERMITD_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const Permit__V1__AcquireRequest *r = rq->requests[i];
        strings += strlen(r->bucket) + strlen(r->app[0] ? r->app : app) + strlen(r->key) +
                   strlen(r->request_id) + 4;
    }
    size = sizeof(*p) + n * (sizeof(*p->b.reqs) + sizeof(*p->b.res) + sizeof(*p->b.errs) +
                             sizeof(*p->results) + sizeof(*p->result_ptrs) +
                             sizeof(*p->answers) + sizeof(*p->batch_errors)) + strings;
    p = http_request_alloc(call->http, size);
    if (p == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    memset(p, 0, size);
    /* Every array is laid out by its own size in turn: pointers and 64-bit
     * fields first, strings last, so each stays aligned. */
    p->b.reqs = (struct limiter_request *)(p + 1);
    p->b.res = (struct limiter_result *)(p->b.reqs + n);
    p->results = (Permit__V1__AcquireBatchResult *)(p->b.res + n);
    p->answers = (Permit__V1__AcquireResponse *)(p->results + n);
    p->batch_errors = (Permit__V1__BatchError *)(p->answers + n);
    p->result_ptrs = (Permit__V1__AcquireBatchResult **)(p->batch_errors + n);
    p->b.errs = (struct permitd_error *)(p->result_ptrs + n);
    at = (char *)(p->b.errs + n);
    for (size_t i = 0; i < n; i++) {
        const Permit__V1__AcquireRequest *r = rq->requests[i];
        const char *src[4] = {r->bucket, r->app[0] ? r->app : app, r->key, r->request_id};
        const char *dst[4];
        for (int k = 0; k < 4; k++) {
            size_t len = strlen(src[k]) + 1;
            memcpy(at, src[k], len);
            dst[k] = at;
            at += len;
        }
        p->b.reqs[i] = (struct limiter_request){dst[0], dst[1], dst[2], r->permits, dst[3], NULL, NULL};
    }
    p->b.n = n;
    p->a = a;
    p->http = call->http;
    p->codec = call->codec;
    http_request_defer(call->http);
    service_batch(api_worker(call->http), &p->b,
                  rq->all_or_nothing ? SERVICE_BATCH_ALL : SERVICE_BATCH_EACH,
                  call->deadline_us, 0, acquire_batch_done, p);
    return CONNECT_DEFERRED;
}

/* Reserve, Commit and Cancel (issue 38): checked here, decided by the
 * service's reservations pool off this worker's loop (service_reserve()),
 * answered when the pool's job comes back; a full pool is refused at
 * once. */
struct pending_rsv {
    struct api *a;
    const struct http_request *http;
    enum connect_codec codec;
};

static void reservation_done(void *ud, int rc, const struct service_reservation *r,
                             const struct permitd_error *err)
{
    struct pending_rsv *p = ud;
    struct http_response resp;
    struct permitd_error e = *err;
    struct answer_reserve ans;
    struct answer_settled set;

    http_response_init(&resp);
    if (rc == PERMITD_OK && r->kind == SERVICE_RESERVE) {
        answer_reserve_message(&ans, r->items, r->n, &r->reserved);
        rc = connect_reply(p->http, p->codec, &ans.m.base, p->a->always_reserved, &resp, &e);
    } else if (rc == PERMITD_OK) {
        answer_settled_message(&set, r->kind == SERVICE_CANCEL, &r->settled);
        rc = connect_reply(p->http, p->codec,
                           r->kind == SERVICE_CANCEL ? &set.cancel.base : &set.commit.base,
                           p->a->always_settled, &resp, &e);
    }
    deferred_answer(p->http, rc, &resp, &e);
}

static int reservation(struct api *a, struct connect_call *call, enum service_rsv_kind kind,
                       const ProtobufCMessage *in, struct permitd_error *err)
{
    struct service_caller c = {http_request_header(call->http, "Authorization"), "", ""};
    struct pending_rsv *p = http_request_alloc(call->http, sizeof(*p));
    struct service_worker *w = api_worker(call->http);
    const char *app;
    int rc;

    if (p == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    p->a = a;
    p->http = call->http;
    p->codec = call->codec;
    if (kind == SERVICE_RESERVE) {
        const Permit__V1__ReserveRequest *rq = (const Permit__V1__ReserveRequest *)in;
        rc = service_reserve(w, &c, rq, call->deadline_us, reservation_done, p, err);
        app = rq->app;
    } else if (kind == SERVICE_COMMIT) {
        const Permit__V1__CommitRequest *rq = (const Permit__V1__CommitRequest *)in;
        rc = service_commit(w, &c, rq, call->deadline_us, reservation_done, p, err);
        app = rq->app;
    } else {
        const Permit__V1__CancelRequest *rq = (const Permit__V1__CancelRequest *)in;
        rc = service_cancel(w, &c, rq, call->deadline_us, reservation_done, p, err);
        app = rq->app;
    }
    http_request_log_who(call->http, c.app[0] ? c.app : app, c.key_prefix);
    if (rc != PERMITD_OK)
        return rc;
    http_request_defer(call->http);
    return CONNECT_DEFERRED;
}

static int reserve(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                   ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    (void)out;
    (void)scratch;
    return reservation(ud, call, SERVICE_RESERVE, in, err);
}

static int commit(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                  ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    (void)out;
    (void)scratch;
    return reservation(ud, call, SERVICE_COMMIT, in, err);
}

static int cancel(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                  ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    (void)out;
    (void)scratch;
    return reservation(ud, call, SERVICE_CANCEL, in, err);
}

static const struct connect_method methods[] = {
    {"/permit.v1.RateLimitService/Acquire", &permit__v1__acquire_request__descriptor,
     &permit__v1__acquire_response__descriptor, 0, acquire},
    {"/permit.v1.RateLimitService/Peek", &permit__v1__peek_request__descriptor,
     &permit__v1__peek_response__descriptor, 1, peek},
    {"/permit.v1.RateLimitService/AcquireBatch", &permit__v1__acquire_batch_request__descriptor,
     &permit__v1__acquire_batch_response__descriptor, 0, acquire_batch},
    {"/permit.v1.RateLimitService/Release", &permit__v1__release_request__descriptor,
     &permit__v1__release_response__descriptor, 0, release},
    {"/permit.v1.RateLimitService/Renew", &permit__v1__renew_request__descriptor,
     &permit__v1__renew_response__descriptor, 0, renew},
    {"/permit.v1.RateLimitService/Reserve", &permit__v1__reserve_request__descriptor,
     &permit__v1__reserve_response__descriptor, 0, reserve},
    {"/permit.v1.RateLimitService/Commit", &permit__v1__commit_request__descriptor,
     &permit__v1__commit_response__descriptor, 0, commit},
    {"/permit.v1.RateLimitService/Cancel", &permit__v1__cancel_request__descriptor,
     &permit__v1__cancel_response__descriptor, 0, cancel},
    {NULL, NULL, NULL, 0, NULL},
};

int api_new(const struct config *cfg, struct service *service, struct api **out,
            struct permitd_error *err)
{
    struct api *a = calloc(1, sizeof(*a));

    *out = NULL;
    if (a == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    a->cfg = cfg;
    a->service = service;
    a->limits.max_body_bytes = (size_t)cfg->max_body_bytes;
    answer_always_fields(a->always);
    a->always_released[0] = protobuf_c_message_descriptor_get_field_by_name(
        &permit__v1__release_response__descriptor, "released");
    a->always_renewed[0] = protobuf_c_message_descriptor_get_field_by_name(
        &permit__v1__renew_response__descriptor, "renewed");
    a->always_reserved[0] = protobuf_c_message_descriptor_get_field_by_name(
        &permit__v1__reserve_response__descriptor, "allowed");
    {
        static const char *const settled[4] = {"held", "actual", "refunded", "charged"};
        for (int i = 0; i < 4; i++)
            a->always_settled[i] = protobuf_c_message_descriptor_get_field_by_name(
                &permit__v1__settled_item__descriptor, settled[i]);
    }
    *out = a;
    return PERMITD_OK;
}

void api_set_forward(struct api *a, struct forward *forward)
{
    a->forward = forward;
}

void api_free(struct api *a)
{
    free(a);
}

int api_worker_open(void *ud, struct loop *loop, void **worker, struct permitd_error *err)
{
    struct api *a = ud;

    return service_worker_open(a->service, loop, (struct service_worker **)worker, err);
}

struct service_worker *api_worker(const struct http_request *req)
{
    return http_request_worker(req);
}

void api_worker_close(void *ud, void *worker)
{
    (void)ud;
    service_worker_close(worker);
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
    if (a->forward != NULL && forward_path(path)) {
        forward_handle(a->forward, api_worker(req), req, resp);
        return;
    }
    if (connect_serve(methods, a, &a->limits, req, resp))
        return;
    permitd_error_set(&err, PERMITD_EUNIMPLEMENTED, "no procedure %.200s", path);
    connect_error_reply(resp, &err);
    resp->status = 404;
}
