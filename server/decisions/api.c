/*
 * api.c - RateLimitService over Connect (Acquire, Peek, AcquireBatch,
 * Release, Renew), plus /healthz.
 *
 * Each procedure is a thin translation between its protobuf-c messages and
 * the limiter; connect.c does the protocol. Acquire replies also carry the
 * IETF draft RateLimit headers, so a proxy in front can act on a decision
 * without parsing the body:
 *   RateLimit-Policy: "<policy>";q=<max_permits>;w=<seconds to fill>
 *   RateLimit: "<policy>";r=<remaining>;t=<seconds until full>
 *   Retry-After: <seconds, rounded up>            (denials only)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decisions/api.h"
#include "decisions/api_internal.h"
#include "decisions/appkeys.h"
#include "decisions/forward.h"
#include "decisions/hotkeys.h"
#include "core/clock.h"
#include "transport/connect.h"
#include "permit/v1/ratelimit.pb-c.h"
#include "stores/policy.h"

struct api {
    const struct config *cfg;
    struct limiter *limiter;
    struct stats *stats;
    struct appkeys *keys;           /* who may call (issue 21); NULL: not checked */
    struct forward *forward;        /* /v1/forward-auth (issue 25); NULL: not served */
    struct hotkeys *hot;            /* each key's takes counted (issue 23); NULL: not */
    struct connect_limits limits;
    /* AcquireResponse's allowed and remaining: written in JSON even when
     * false and 0 (a denial says so; proto3 JSON would leave them out), in
     * Acquire replies and in AcquireBatch items alike. NULL-ended. */
    const ProtobufCFieldDescriptor *always[3];
    /* ReleaseResponse's released and RenewResponse's renewed, likewise:
     * false is the answer "the lease was not held". */
    const ProtobufCFieldDescriptor *always_released[2], *always_renewed[2];
};

/* One HTTP worker's: its decisions' queue, and the sketches its takes are
 * counted in (hotkeys.h: its own, so no worker waits for another). */
struct worker {
    struct limiter_queue *queue;
    struct hotkeys_worker *hot;     /* NULL without api_set_hotkeys() */
};

static int64_t ceil_div(int64_t a, int64_t b)
{
    /* Not (a + b - 1) / b: that overflows for a near INT64_MAX. */
    return a <= 0 ? 0 : a / b + (a % b != 0);
}

/* A header value under construction (ratelimit_headers()). Every piece
 * is bounded: a policy name is at most 128 bytes, a number 20 digits. */
struct value {
    char s[192];
    size_t n;
};

static void value_str(struct value *v, const char *s, size_t len)
{
    if (len > sizeof(v->s) - v->n)
        len = sizeof(v->s) - v->n;
    memcpy(v->s + v->n, s, len);
    v->n += len;
}

static void value_int(struct value *v, int64_t x)
{
    char digits[24];
    size_t i = sizeof(digits);
    uint64_t u = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;

    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (x < 0)
        digits[--i] = '-';
    value_str(v, digits + i, sizeof(digits) - i);
}

/* `"<policy>"<k1><a><k2><b>`, the shape both RateLimit headers share
 * (k1 and k2 as "\";q=" and ";w="). */
static void policy_header(struct http_response *resp, const char *header, const char *policy,
                          const char *k1, int64_t a, const char *k2, int64_t b)
{
    struct value v;

    v.n = 0;                    /* not {0}: that would clear all of s[] */
    value_str(&v, "\"", 1);
    value_str(&v, policy, strlen(policy));
    value_str(&v, k1, strlen(k1));
    value_int(&v, a);
    value_str(&v, k2, strlen(k2));
    value_int(&v, b);
    http_response_header_set(resp, header, v.s, v.n);
}

/* Written by hand rather than through printf: every decision carries them. */
void api_ratelimit_headers(struct http_response *resp, const char *policy,
                           const struct limiter_result *r)
{
    policy_header(resp, "RateLimit-Policy", policy, "\";q=", r->limit, ";w=", r->window_s);
    policy_header(resp, "RateLimit", policy, "\";r=", r->remaining, ";t=",
                  ceil_div(r->reset_after_ms, 1000));
    /* A shadow answer (allowed, flagged) keeps what enforcing would have
     * said in RateLimit (r=0 ...), but no Retry-After: a proxy in front
     * would act on it, and the policy is not to refuse anything yet. */
    if (!r->allowed) {
        struct value v;
        v.n = 0;
        value_int(&v, ceil_div(r->retry_after_ms, 1000));
        http_response_header_set(resp, "Retry-After", v.s, v.n);
    }
}

void api_decision_message(Permit__V1__AcquireResponse *m, const struct limiter_result *r)
{
    permit__v1__acquire_response__init(m);
    m->allowed = r->allowed;
    m->remaining = r->remaining;
    m->limit = r->limit;
    m->retry_after_ms = r->retry_after_ms;
    m->reset_after_ms = r->reset_after_ms;
    m->lease_id = (char *)r->lease_id;     /* "" unless a lease was granted */
    m->lease_expires_after_ms = r->lease_expires_ms;
    m->replayed = r->replayed;
    m->shadow = r->shadow;
}

void api_peek_message(Permit__V1__PeekResponse *m, const struct limiter_result *r)
{
    permit__v1__peek_response__init(m);
    m->remaining = r->remaining;
    m->limit = r->limit;
    m->reset_after_ms = r->reset_after_ms;
    m->shadow = r->shadow;
}

void api_batch_item(Permit__V1__AcquireBatchResult *item, Permit__V1__AcquireResponse *answer,
                    Permit__V1__BatchError *error, const struct limiter_result *r,
                    const struct permitd_error *err)
{
    permit__v1__acquire_batch_result__init(item);
    if (err->code != PERMITD_OK) {
        permit__v1__batch_error__init(error);
        error->code = (char *)permitd_status_name(err->code);
        error->message = (char *)err->message;
        item->result_case = PERMIT__V1__ACQUIRE_BATCH_RESULT__RESULT_ERROR;
        item->error = error;
    } else {
        api_decision_message(answer, r);
        item->result_case = PERMIT__V1__ACQUIRE_BATCH_RESULT__RESULT_RESPONSE;
        item->response = answer;
    }
}

struct limiter_request api_acquire_request(const Permit__V1__AcquireRequest *rq)
{
    return (struct limiter_request){rq->bucket, rq->app, rq->key, rq->permits, rq->request_id,
                                    NULL};
}

/* Permits are not a Peek's: 0 passes limiter_check(), and the script looks
 * for one. */
struct limiter_request api_peek_request(const Permit__V1__PeekRequest *rq)
{
    return (struct limiter_request){rq->bucket, rq->app, rq->key, 0, NULL, NULL};
}

void api_always_fields(const ProtobufCFieldDescriptor *always[3])
{
    always[0] = protobuf_c_message_descriptor_get_field_by_name(
        &permit__v1__acquire_response__descriptor, "allowed");
    always[1] = protobuf_c_message_descriptor_get_field_by_name(
        &permit__v1__acquire_response__descriptor, "remaining");
    always[2] = NULL;
}

/* Counts an Acquire's (or a batch item's) error for /metrics, under its
 * policy when that is a real one. invalid_argument (negative permits on
 * a real policy, as on a made-up name) and not_found are checked here
 * before Redis is asked, so only the in-memory policy table (a policy
 * this instance holds, from MySQL or kept by hand) or an earlier decision
 * (stats.h) can say the policy is real; any other error came from the
 * script, Redis or the policy itself. Made-up names stay out of the
 * labels. */
static void count_error(struct api *a, const char *bucket, int code)
{
    int real = code != PERMITD_EINVAL && code != PERMITD_ENOTFOUND;

    if (a->stats == NULL)
        return;
    if (!real)
        real = limiter_known_policy(a->limiter, bucket);
    stats_record_error(a->stats, bucket, code, real);
}

/* How a decision is counted: a shadow policy's would-be denial apart from
 * both its allowed and its denied Acquires (stats.h). */
static int counted_as(const struct limiter_result *r)
{
    return r->shadow    ? STATS_RESULT_SHADOW_DENIED
           : r->allowed ? STATS_RESULT_ALLOWED
                        : STATS_RESULT_DENIED;
}

/* Hands a deferred call's answer back: resp as filled, or the Connect error
 * for rc. */
static void deferred_answer(const struct http_request *http, int rc, struct http_response *resp,
                            const struct permitd_error *err)
{
    if (rc != PERMITD_OK)
        connect_error_reply(resp, err);
    http_request_resume(http, resp);
}

/* An Acquire or a Peek waiting for its decision (limiter_acquire_queued,
 * limiter_peek_queued): what the reply needs once the decision comes back to
 * the worker's loop. It lives in the request's own storage
 * (http_request_alloc()), as long as the request. */
enum kind { KIND_ACQUIRE, KIND_PEEK, KIND_RELEASE, KIND_RENEW };

struct pending {
    struct api *a;
    const struct http_request *http;
    enum connect_codec codec;
    enum kind kind;
    struct limiter_request lr;
    char bucket[POLICY_NAME_MAX + 1], app[POLICY_NAME_MAX + 1], key[POLICY_KEY_MAX + 1];
    char request_id[LIMITER_REQUEST_ID_MAX + 1], lease_id[LIMITER_LEASE_ID_LEN + 1];
    int64_t deadline_us, t0;
    struct hotkeys_worker *hot;
};

/* s into dst (size bytes), cut to fit: limiter_check() has bounded every
 * field already. */
static void copy_field(char *dst, size_t size, const char *s)
{
    size_t n = strnlen(s, size - 1);

    memcpy(dst, s, n);
    dst[n] = '\0';
}

static void decided(void *ud, int rc, const struct limiter_result *r,
                    const struct permitd_error *err)
{
    struct pending *p = ud;
    struct http_response resp;
    struct permitd_error e = *err;

    http_response_init(&resp);
    if (p->kind == KIND_RELEASE || p->kind == KIND_RENEW) {
        Permit__V1__ReleaseResponse rel;
        Permit__V1__RenewResponse ren;
        ProtobufCMessage *m = &rel.base;
        permit__v1__release_response__init(&rel);
        permit__v1__renew_response__init(&ren);
        if (rc == PERMITD_OK && p->kind == KIND_RELEASE) {
            rel.released = r->allowed && !r->noop;
            rel.remaining = r->remaining;
            rel.limit = r->limit;
        } else if (rc == PERMITD_OK) {
            ren.renewed = r->allowed && !r->noop;
            ren.lease_expires_after_ms = ren.renewed ? r->lease_expires_ms : 0;
            m = &ren.base;
        }
        if (rc == PERMITD_OK)
            rc = connect_reply(p->http, p->codec, m, p->kind == KIND_RELEASE
                               ? p->a->always_released : p->a->always_renewed, &resp, &e);
        deferred_answer(p->http, rc, &resp, &e);
        return;
    }
    if (p->kind == KIND_PEEK) {
        Permit__V1__PeekResponse rs;
        permit__v1__peek_response__init(&rs);
        if (rc == PERMITD_OK) {
            api_peek_message(&rs, r);
            rc = connect_reply(p->http, p->codec, &rs.base, NULL, &resp, &e);
        }
        deferred_answer(p->http, rc, &resp, &e);
        return;
    }
    if (p->a->stats != NULL) {
        stats_observe(p->a->stats, clock_now_us() - p->t0);
        if (rc != PERMITD_OK)
            count_error(p->a, p->bucket, rc);
        else
            api_count_decision(p->a->stats, p->bucket, r);
    }
    if (rc == PERMITD_OK)
        hotkeys_record(p->hot, p->bucket, p->key,
                       r->allowed && !r->shadow ? HOTKEYS_ALLOWED : HOTKEYS_DENIED);
    if (rc == PERMITD_OK) {
        Permit__V1__AcquireResponse rs;
        api_decision_message(&rs, r);
        rc = connect_reply(p->http, p->codec, &rs.base, p->a->always, &resp, &e);
        if (rc == PERMITD_OK)
            api_ratelimit_headers(&resp, p->bucket, r);
    }
    deferred_answer(p->http, rc, &resp, &e);
}

/* Acquire and Peek are checked here and decided from the worker's loop,
 * pipelined with the other calls that arrive meanwhile (limiter.c): the
 * worker goes back to its connections instead of waiting for Redis. */
static int defer_decision(struct api *a, struct connect_call *call, enum kind kind,
                          const struct limiter_request *lr, struct permitd_error *err)
{
    struct worker *w = http_request_worker(call->http);
    struct limiter_queue *q = w->queue;
    struct pending *p;
    int rc;

    rc = kind == KIND_RELEASE || kind == KIND_RENEW ? limiter_check_lease(lr, err)
                                                     : limiter_check(lr, err);
    if (rc != PERMITD_OK) {
        if (kind == KIND_ACQUIRE)
            count_error(a, lr->bucket, rc);
        return rc;
    }
    p = http_request_alloc(call->http, sizeof(*p));
    if (p == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    p->a = a;
    p->http = call->http;
    p->codec = call->codec;
    p->kind = kind;
    copy_field(p->bucket, sizeof(p->bucket), lr->bucket);
    copy_field(p->app, sizeof(p->app), lr->app);
    copy_field(p->key, sizeof(p->key), lr->key);
    copy_field(p->request_id, sizeof(p->request_id), lr->request_id ? lr->request_id : "");
    copy_field(p->lease_id, sizeof(p->lease_id), lr->lease_id ? lr->lease_id : "");
    p->lr = (struct limiter_request){p->bucket, p->app, p->key, lr->permits, p->request_id,
                                     p->lease_id};
    p->deadline_us = call->deadline_us;
    p->t0 = clock_now_us();
    p->hot = w->hot;
    http_request_defer(call->http);
    switch (kind) {
    case KIND_PEEK:
        limiter_peek_queued(q, &p->lr, p->deadline_us, decided, p);
        break;
    case KIND_RELEASE:
        limiter_release_queued(q, &p->lr, p->deadline_us, decided, p);
        break;
    case KIND_RENEW:
        limiter_renew_queued(q, &p->lr, p->deadline_us, decided, p);
        break;
    default:
        limiter_acquire_queued(q, &p->lr, p->deadline_us, decided, p);
    }
    return CONNECT_DEFERRED;
}

/* Issue 21: the app a call acts for, from its API key (appkeys.h): app
 * ("" = the key's) must be the key's; the key's app goes into app_out
 * (POLICY_NAME_MAX + 1 bytes), "" when keys are not checked (the call's
 * own app stands, unchanged). Names the app and the key's prefix in the
 * access log line. Every RateLimitService procedure starts here. */
static int authorize(struct api *a, struct connect_call *call, const char *app, char *app_out,
                     struct permitd_error *err)
{
    char prefix[APPKEYS_PREFIX_LEN + 1] = "";
    struct timespec now;
    int rc = PERMITD_OK;

    app_out[0] = '\0';
    if (a->keys != NULL) {
        clock_gettime(CLOCK_REALTIME_COARSE, &now);
        rc = appkeys_check(a->keys, http_request_header(call->http, "Authorization"), app,
                           (int64_t)now.tv_sec, app_out, prefix, NULL, err);
    }
    http_request_log_who(call->http, app_out[0] ? app_out : app, prefix);
    return rc;
}

/* The tail of every unary decision: the API key checked (authorize()),
 * its app standing in for an empty one, then the decision queued. */
static int decide_for_app(struct api *a, struct connect_call *call, enum kind kind,
                          struct limiter_request *lr, struct permitd_error *err)
{
    char app[POLICY_NAME_MAX + 1];
    int rc;

    if ((rc = authorize(a, call, lr->app, app, err)) != PERMITD_OK)
        return rc;
    if (app[0] != '\0')
        lr->app = app;
    return defer_decision(a, call, kind, lr, err);
}

static int acquire(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                   ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    struct limiter_request lr = api_acquire_request((const Permit__V1__AcquireRequest *)in);

    (void)out;
    (void)scratch;
    return decide_for_app(ud, call, KIND_ACQUIRE, &lr, err);
}

static int peek(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    struct limiter_request lr = api_peek_request((const Permit__V1__PeekRequest *)in);

    (void)out;
    (void)scratch;
    return decide_for_app(ud, call, KIND_PEEK, &lr, err);
}

static int release(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                   ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    const Permit__V1__ReleaseRequest *rq = (const Permit__V1__ReleaseRequest *)in;
    struct limiter_request lr = {rq->bucket, rq->app, rq->key, 0, NULL, rq->lease_id};

    (void)out;
    (void)scratch;
    return decide_for_app(ud, call, KIND_RELEASE, &lr, err);
}

static int renew(void *ud, struct connect_call *call, const ProtobufCMessage *in,
                 ProtobufCMessage *out, char *scratch, struct permitd_error *err)
{
    const Permit__V1__RenewRequest *rq = (const Permit__V1__RenewRequest *)in;
    struct limiter_request lr = {rq->bucket, rq->app, rq->key, 0, NULL, rq->lease_id};

    (void)out;
    (void)scratch;
    return decide_for_app(ud, call, KIND_RENEW, &lr, err);
}

/* An AcquireBatch waiting for its decisions (limiter_acquire_batch_queued),
 * in one block of the request's storage: the items with copies of their
 * strings, and room for the answers and the reply message. */
struct pending_batch {
    struct api *a;
    struct hotkeys_worker *hot;
    const struct http_request *http;
    enum connect_codec codec;
    size_t n;
    struct limiter_request *reqs;
    struct limiter_result *res;
    struct permitd_error *errs;
    Permit__V1__AcquireBatchResult *results, **result_ptrs;
    Permit__V1__AcquireResponse *answers;
    Permit__V1__BatchError *batch_errors;
    int all_or_nothing;
    int64_t deadline_us;
};

static void acquire_batch_done(void *ud, int rc, const struct permitd_error *err)
{
    struct pending_batch *p = ud;
    struct api *a = p->a;
    Permit__V1__AcquireBatchResponse rs = PERMIT__V1__ACQUIRE_BATCH_RESPONSE__INIT;
    struct http_response resp;
    struct permitd_error e = *err;

    http_response_init(&resp);
    for (size_t i = 0; rc == PERMITD_OK && i < p->n; i++) {
        api_batch_item(&p->results[i], &p->answers[i], &p->batch_errors[i], &p->res[i],
                       &p->errs[i]);
        if (p->errs[i].code != PERMITD_OK)
            count_error(a, p->reqs[i].bucket, p->errs[i].code);
        else
            api_count_decision(a->stats, p->reqs[i].bucket, &p->res[i]);
        if (p->errs[i].code == PERMITD_OK)
            hotkeys_record(p->hot, p->reqs[i].bucket, p->reqs[i].key,
                           p->res[i].allowed && !p->res[i].shadow ? HOTKEYS_ALLOWED
                                                                  : HOTKEYS_DENIED);
        p->result_ptrs[i] = &p->results[i];
    }
    if (rc == PERMITD_OK) {
        rs.results = p->result_ptrs;
        rs.n_results = p->n;
        rc = connect_reply(p->http, p->codec, &rs.base, a->always, &resp, &e);
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
    size_t n = rq->n_requests, strings = 0, size;
    struct pending_batch *p;
    char *at, app[POLICY_NAME_MAX + 1];
    int rc;

    (void)out;
    (void)scratch;
    if (n > LIMITER_BATCH_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "requests: %zu items, the limit is %d",
                                 n, LIMITER_BATCH_MAX);
    /* One key for the whole batch; each item's app must be its app. */
    if ((rc = authorize(a, call, "", app, err)) != PERMITD_OK)
        return rc;
    for (size_t i = 0; a->keys != NULL && appkeys_enforced(a->keys) && i < n; i++)
        if (rq->requests[i]->app[0] != '\0' && strcmp(rq->requests[i]->app, app) != 0) {
            appkeys_refused(a->keys, APPKEYS_APP_MISMATCH);
            return permitd_error_set(err, PERMITD_EPERM,
                                     "requests[%zu].app: \"%.128s\" is not the app of the API "
                                     "key (\"%s\"); send \"%s\" or leave it empty", i,
                                     rq->requests[i]->app, app, app);
        }
    for (size_t i = 0; i < n; i++) {
        const Permit__V1__AcquireRequest *r = rq->requests[i];
        strings += strlen(r->bucket) + strlen(r->app[0] ? r->app : app) + strlen(r->key) +
                   strlen(r->request_id) + 4;
    }
    size = sizeof(*p) + n * (sizeof(*p->reqs) + sizeof(*p->res) + sizeof(*p->errs) +
                             sizeof(*p->results) + sizeof(*p->result_ptrs) +
                             sizeof(*p->answers) + sizeof(*p->batch_errors)) + strings;
    p = http_request_alloc(call->http, size);
    if (p == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    memset(p, 0, size);
    /* Every array is laid out by its own size in turn: pointers and 64-bit
     * fields first, strings last, so each stays aligned. */
    p->reqs = (struct limiter_request *)(p + 1);
    p->res = (struct limiter_result *)(p->reqs + n);
    p->results = (Permit__V1__AcquireBatchResult *)(p->res + n);
    p->answers = (Permit__V1__AcquireResponse *)(p->results + n);
    p->batch_errors = (Permit__V1__BatchError *)(p->answers + n);
    p->result_ptrs = (Permit__V1__AcquireBatchResult **)(p->batch_errors + n);
    p->errs = (struct permitd_error *)(p->result_ptrs + n);
    at = (char *)(p->errs + n);
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
        p->reqs[i] = (struct limiter_request){dst[0], dst[1], dst[2], r->permits, dst[3], NULL};
    }
    p->a = a;
    p->http = call->http;
    p->codec = call->codec;
    p->n = n;
    p->all_or_nothing = rq->all_or_nothing;
    p->deadline_us = call->deadline_us;
    p->hot = ((struct worker *)http_request_worker(call->http))->hot;
    http_request_defer(call->http);
    limiter_acquire_batch_queued(((struct worker *)http_request_worker(call->http))->queue,
                                 p->reqs, p->n,
                                 p->all_or_nothing, p->deadline_us, p->res, p->errs,
                                 acquire_batch_done, p);
    return CONNECT_DEFERRED;
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
    api_always_fields(a->always);
    a->always_released[0] = protobuf_c_message_descriptor_get_field_by_name(
        &permit__v1__release_response__descriptor, "released");
    a->always_renewed[0] = protobuf_c_message_descriptor_get_field_by_name(
        &permit__v1__renew_response__descriptor, "renewed");
    *out = a;
    return PERMITD_OK;
}

void api_set_appkeys(struct api *a, struct appkeys *keys)
{
    a->keys = keys;
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
    struct worker *w = calloc(1, sizeof(*w));
    int rc;

    *worker = NULL;
    if (w == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if ((rc = limiter_queue_new(a->limiter, loop, &w->queue, err)) != PERMITD_OK ||
        (a->hot != NULL && (rc = hotkeys_worker_new(a->hot, &w->hot, err)) != PERMITD_OK)) {
        limiter_queue_free(w->queue);
        free(w);
        return rc;
    }
    *worker = w;
    return PERMITD_OK;
}

void api_count_decision(struct stats *s, const char *policy, const struct limiter_result *r)
{
    if (s == NULL)
        return;
    if (r->open_pass)
        stats_record_pass(s, policy);
    else
        stats_record(s, policy, counted_as(r));
}

struct limiter_queue *api_worker_queue(const struct http_request *req)
{
    return ((struct worker *)http_request_worker(req))->queue;
}

void api_worker_close(void *ud, void *worker)
{
    struct worker *w = worker;

    (void)ud;
    if (w == NULL)
        return;
    limiter_queue_free(w->queue);
    hotkeys_worker_free(w->hot);
    free(w);
}

void api_set_hotkeys(struct api *a, struct hotkeys *hot)
{
    a->hot = hot;
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
        forward_handle(a->forward, req, resp);
        return;
    }
    if (connect_serve(methods, a, &a->limits, req, resp))
        return;
    permitd_error_set(&err, PERMITD_EUNIMPLEMENTED, "no procedure %.200s", path);
    connect_error_reply(resp, &err);
    resp->status = 404;
}
