/*
 * grpcapi.c - permit.v1.RateLimitService over gRPC: Acquire, Peek,
 * AcquireBatch, Release and Renew for stock gRPC clients (issue 25).
 *
 * The Connect path's translations are shared (api_internal.h: the
 * limiter's view of a request, the reply messages, the RateLimit headers);
 * what differs is only how a call arrives and leaves: a decoded protobuf
 * from grpc.h instead of an HTTP request, a packed message or a gRPC
 * status instead of a Connect body. A call's record (struct pending), its
 * decoded request and its answer's arrays live in the call's own storage
 * (grpc_call_alloc(), kept with grpc.c's call record for the worker's next
 * calls), and the answer is packed into the call's reply buffer: a
 * warmed-up call allocates nothing here. The record keeps copies of its
 * strings until the decision, queued on the worker's limiter queue, comes
 * back on the worker's loop; a call whose client has gone meanwhile is
 * still decided and counted, and its answer dropped by grpc.c.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decisions/grpcapi.h"
#include "decisions/api.h"
#include "decisions/api_internal.h"
#include "decisions/appkeys.h"
#include "core/clock.h"
#include "core/utf8.h"
#include "permit/v1/ratelimit.pb-c.h"
#include "stores/policy.h"

struct grpcapi {
    struct limiter *limiter;
    struct stats *stats;
    struct appkeys *keys;
    grpc_handler_fn next;           /* other services (Envoy's) */
    void *next_ud;
};

enum kind { KIND_ACQUIRE, KIND_PEEK, KIND_RELEASE, KIND_RENEW, KIND_BATCH };

static const struct method {
    const char *path;
    const ProtobufCMessageDescriptor *input;
    enum kind kind;
} methods[] = {
    {"/permit.v1.RateLimitService/Acquire", &permit__v1__acquire_request__descriptor,
     KIND_ACQUIRE},
    {"/permit.v1.RateLimitService/Peek", &permit__v1__peek_request__descriptor, KIND_PEEK},
    {"/permit.v1.RateLimitService/AcquireBatch", &permit__v1__acquire_batch_request__descriptor,
     KIND_BATCH},
    {"/permit.v1.RateLimitService/Release", &permit__v1__release_request__descriptor,
     KIND_RELEASE},
    {"/permit.v1.RateLimitService/Renew", &permit__v1__renew_request__descriptor, KIND_RENEW},
    {NULL, NULL, 0},
};

/* One unary call waiting for its decision. */
struct pending {
    struct grpcapi *g;
    struct grpc_call *call;
    enum kind kind;
    struct limiter_request lr;
    char bucket[POLICY_NAME_MAX + 1], app[POLICY_NAME_MAX + 1], key[POLICY_KEY_MAX + 1];
    char request_id[LIMITER_REQUEST_ID_MAX + 1], lease_id[LIMITER_LEASE_ID_LEN + 1];
    int64_t t0;
};

/* One AcquireBatch waiting for its decisions: the items and their answers,
 * each array in the call's storage. */
struct pending_batch {
    struct grpcapi *g;
    struct grpc_call *call;
    size_t n;
    struct limiter_request *reqs;
    struct limiter_result *res;
    struct permitd_error *errs;
};

/* s into dst (size bytes), cut to fit: limiter_check() bounds the fields. */
static void copy_field(char *dst, size_t size, const char *s)
{
    size_t n = strnlen(s ? s : "", size - 1);

    memcpy(dst, s ? s : "", n);
    dst[n] = '\0';
}

/* An error of an Acquire (or a batch item) counted for /metrics, under its
 * policy when that is a real one, as api.c counts the Connect path's. */
static void count_error(struct grpcapi *g, const char *bucket, int code)
{
    int real = code != PERMITD_EINVAL && code != PERMITD_ENOTFOUND;

    if (g->stats == NULL)
        return;
    if (!real)
        real = limiter_known_policy(g->limiter, bucket);
    stats_record_error(g->stats, bucket, code, real);
}

/* Packed straight into the call's reply buffer (grpc_call_reply_space()),
 * which the call keeps: no copy, no allocation once the call record has
 * answered as big a message before. */
void grpcapi_reply(struct grpc_call *call, const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = grpc_call_reply_space(call, len);
    struct permitd_error err;

    if (buf == NULL) {
        permitd_error_set(&err, PERMITD_EINTERNAL, "out of memory");
        grpc_call_fail(call, &err);
        return;
    }
    protobuf_c_message_pack(msg, buf);
    grpc_call_reply(call, buf, len);
}

/* A ProtobufCAllocator over the call's storage (grpc_call_alloc()): what a
 * request decodes into lives until the call is answered, and is given back
 * with the call, so free does nothing. */
static void *call_pb_alloc(void *call, size_t size)
{
    return grpc_call_alloc(call, size);
}

static void call_pb_free(void *call, void *p)
{
    (void)call;
    (void)p;
}

ProtobufCAllocator grpcapi_allocator(struct grpc_call *call)
{
    ProtobufCAllocator al = {call_pb_alloc, call_pb_free, call};

    return al;
}

/* The RateLimit headers of a decision (api_ratelimit_headers()), as the
 * answer's metadata, lowercase as HTTP/2 wants. */
static void ratelimit_metadata(struct grpc_call *call, const char *policy,
                               const struct limiter_result *r)
{
    struct http_response resp;

    http_response_init(&resp);
    api_ratelimit_headers(&resp, policy, r);
    for (int i = 0; i < resp.nheaders; i++) {
        const char *n = resp.headers[i].name;
        const char *lower = strcmp(n, "RateLimit-Policy") == 0 ? "ratelimit-policy"
                            : strcmp(n, "RateLimit") == 0 ? "ratelimit"
                            : strcmp(n, "Retry-After") == 0 ? "retry-after" : NULL;
        if (lower != NULL)
            grpc_call_header(call, lower, resp.headers[i].value, strlen(resp.headers[i].value));
    }
}

static void decided(void *ud, int rc, const struct limiter_result *r,
                    const struct permitd_error *err)
{
    struct pending *p = ud;
    struct grpc_call *call = p->call;

    if (p->kind == KIND_ACQUIRE && p->g->stats != NULL) {
        stats_observe(p->g->stats, clock_now_us() - p->t0);
        if (rc != PERMITD_OK)
            count_error(p->g, p->bucket, rc);
        else
            api_count_decision(p->g->stats, p->bucket, r);
    }
    if (rc != PERMITD_OK) {
        grpc_call_fail(call, err);
        return;
    }
    switch (p->kind) {
    case KIND_ACQUIRE: {
        Permit__V1__AcquireResponse m;
        api_decision_message(&m, r);
        ratelimit_metadata(call, p->bucket, r);
        grpcapi_reply(call, &m.base);
        break;
    }
    case KIND_PEEK: {
        Permit__V1__PeekResponse m;
        api_peek_message(&m, r);
        grpcapi_reply(call, &m.base);
        break;
    }
    case KIND_RELEASE: {
        Permit__V1__ReleaseResponse m = PERMIT__V1__RELEASE_RESPONSE__INIT;
        m.released = r->allowed && !r->noop;
        m.remaining = r->remaining;
        m.limit = r->limit;
        grpcapi_reply(call, &m.base);
        break;
    }
    default: {
        Permit__V1__RenewResponse m = PERMIT__V1__RENEW_RESPONSE__INIT;
        m.renewed = r->allowed && !r->noop;
        m.lease_expires_after_ms = m.renewed ? r->lease_expires_ms : 0;
        grpcapi_reply(call, &m.base);
    }
    }
}

int grpcapi_authorize(struct grpcapi *g, const struct grpc_call *call, const char *app,
                      char *app_out, struct permitd_error *err)
{
    char prefix[APPKEYS_PREFIX_LEN + 1] = "";
    struct timespec now;

    app_out[0] = '\0';
    if (g->keys == NULL)
        return PERMITD_OK;
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
    return appkeys_check(g->keys, grpc_call_metadata(call, "authorization"), app,
                         (int64_t)now.tv_sec, app_out, prefix, NULL, err);
}

/* A unary decision: key checked, request checked, decision queued. */
static int decide(struct grpcapi *g, struct grpc_call *call, enum kind kind,
                  struct limiter_request lr, struct permitd_error *err)
{
    char app[POLICY_NAME_MAX + 1];
    struct pending *p;
    struct limiter_queue *q = grpcapi_queue(call);
    int rc;

    if ((rc = grpcapi_authorize(g, call, lr.app, app, err)) != PERMITD_OK)
        return rc;
    if (app[0] != '\0')
        lr.app = app;
    rc = kind == KIND_RELEASE || kind == KIND_RENEW ? limiter_check_lease(&lr, err)
                                                     : limiter_check(&lr, err);
    if (rc != PERMITD_OK) {
        if (kind == KIND_ACQUIRE)
            count_error(g, lr.bucket, rc);
        return rc;
    }
    if ((p = grpc_call_alloc(call, sizeof(*p))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    p->g = g;
    p->call = call;
    p->kind = kind;
    copy_field(p->bucket, sizeof(p->bucket), lr.bucket);
    copy_field(p->app, sizeof(p->app), lr.app);
    copy_field(p->key, sizeof(p->key), lr.key);
    copy_field(p->request_id, sizeof(p->request_id), lr.request_id);
    copy_field(p->lease_id, sizeof(p->lease_id), lr.lease_id);
    p->lr = (struct limiter_request){p->bucket, p->app, p->key, lr.permits, p->request_id,
                                     p->lease_id};
    p->t0 = clock_now_us();
    switch (kind) {
    case KIND_PEEK:
        limiter_peek_queued(q, &p->lr, grpc_call_deadline_us(call), decided, p);
        break;
    case KIND_RELEASE:
        limiter_release_queued(q, &p->lr, grpc_call_deadline_us(call), decided, p);
        break;
    case KIND_RENEW:
        limiter_renew_queued(q, &p->lr, grpc_call_deadline_us(call), decided, p);
        break;
    default:
        limiter_acquire_queued(q, &p->lr, grpc_call_deadline_us(call), decided, p);
    }
    return PERMITD_OK;
}

/* The batch's answer: its arrays in the call's storage, given back with
 * the call. */
static void batch_done(void *ud, int rc, const struct permitd_error *err)
{
    struct pending_batch *p = ud;
    Permit__V1__AcquireBatchResponse rs = PERMIT__V1__ACQUIRE_BATCH_RESPONSE__INIT;
    Permit__V1__AcquireBatchResult *results, **ptrs;
    Permit__V1__AcquireResponse *answers;
    Permit__V1__BatchError *errors;
    size_t n = p->n ? p->n : 1;
    struct permitd_error oom;

    if (rc != PERMITD_OK) {
        grpc_call_fail(p->call, err);
        return;
    }
    if ((results = grpc_call_alloc(p->call, n * sizeof(*results))) == NULL ||
        (ptrs = grpc_call_alloc(p->call, n * sizeof(*ptrs))) == NULL ||
        (answers = grpc_call_alloc(p->call, n * sizeof(*answers))) == NULL ||
        (errors = grpc_call_alloc(p->call, n * sizeof(*errors))) == NULL) {
        permitd_error_set(&oom, PERMITD_EINTERNAL, "out of memory");
        grpc_call_fail(p->call, &oom);
        return;
    }
    for (size_t i = 0; i < p->n; i++) {
        api_batch_item(&results[i], &answers[i], &errors[i], &p->res[i], &p->errs[i]);
        if (p->errs[i].code != PERMITD_OK)
            count_error(p->g, p->reqs[i].bucket, p->errs[i].code);
        else
            api_count_decision(p->g->stats, p->reqs[i].bucket, &p->res[i]);
        ptrs[i] = &results[i];
    }
    rs.results = ptrs;
    rs.n_results = p->n;
    grpcapi_reply(p->call, &rs.base);
}

static int acquire_batch(struct grpcapi *g, struct grpc_call *call,
                         const Permit__V1__AcquireBatchRequest *rq, struct permitd_error *err)
{
    size_t n = rq->n_requests;
    struct pending_batch *p;
    char app[POLICY_NAME_MAX + 1];
    int rc;

    if (n > LIMITER_BATCH_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "requests: %zu items, the limit is %d",
                                 n, LIMITER_BATCH_MAX);
    if ((rc = grpcapi_authorize(g, call, "", app, err)) != PERMITD_OK)
        return rc;
    for (size_t i = 0; g->keys != NULL && appkeys_enforced(g->keys) && i < n; i++)
        if (rq->requests[i]->app[0] != '\0' && strcmp(rq->requests[i]->app, app) != 0) {
            appkeys_refused(g->keys, APPKEYS_APP_MISMATCH);
            return permitd_error_set(err, PERMITD_EPERM,
                                     "requests[%zu].app: \"%.128s\" is not the app of the API "
                                     "key (\"%s\"); send \"%s\" or leave it empty", i,
                                     rq->requests[i]->app, app, app);
        }
    if ((p = grpc_call_alloc(call, sizeof(*p))) == NULL ||
        (p->reqs = grpc_call_alloc(call, (n ? n : 1) * sizeof(*p->reqs))) == NULL ||
        (p->res = grpc_call_alloc(call, (n ? n : 1) * sizeof(*p->res))) == NULL ||
        (p->errs = grpc_call_alloc(call, (n ? n : 1) * sizeof(*p->errs))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const Permit__V1__AcquireRequest *r = rq->requests[i];
        const char *src[4] = {r->bucket, r->app[0] ? r->app : app, r->key, r->request_id};
        const char *dst[4];
        for (int k = 0; k < 4; k++) {
            size_t len = strlen(src[k]) + 1;
            char *s = grpc_call_alloc(call, len);
            if (s == NULL)
                return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            memcpy(s, src[k], len);
            dst[k] = s;
        }
        p->reqs[i] = (struct limiter_request){dst[0], dst[1], dst[2], r->permits, dst[3], NULL};
    }
    p->g = g;
    p->call = call;
    p->n = n;
    limiter_acquire_batch_queued(grpcapi_queue(call), p->reqs, n, rq->all_or_nothing,
                                 grpc_call_deadline_us(call), p->res, p->errs, batch_done, p);
    return PERMITD_OK;
}

void grpcapi_handle(void *ud, struct grpc_call *call)
{
    struct grpcapi *g = ud;
    const char *path = grpc_call_path(call);
    const struct method *m;
    ProtobufCMessage *in;
    ProtobufCAllocator al = grpcapi_allocator(call);
    struct permitd_error err = {PERMITD_OK, ""};
    const void *data;
    size_t len;
    int rc;

    for (m = methods; m->path != NULL && strcmp(m->path, path) != 0; m++)
        ;
    if (m->path == NULL) {
        if (g->next != NULL) {
            g->next(g->next_ud, call);
            return;
        }
        permitd_error_set(&err, PERMITD_EUNIMPLEMENTED, "no procedure %.200s", path);
        grpc_call_fail(call, &err);
        return;
    }
    data = grpc_call_message(call, &len);
    in = protobuf_c_message_unpack(m->input, &al, len, data);
    if (in == NULL) {
        permitd_error_set(&err, PERMITD_EINVAL, "the request is not a valid %s message "
                          "(%zu bytes)", m->input->name, len);
        grpc_call_fail(call, &err);
        return;
    }
    /* protobuf-c copies string fields as they come; the Connect door
     * refuses what is not UTF-8 (core/utf8.c), and so does this one, by
     * the same walk: invalid_argument naming the field. */
    if (utf8_check_message(in, &err) != PERMITD_OK) {
        grpc_call_fail(call, &err);
        return;
    }
    switch (m->kind) {
    case KIND_ACQUIRE:
        rc = decide(g, call, m->kind,
                    api_acquire_request((const Permit__V1__AcquireRequest *)in), &err);
        break;
    case KIND_PEEK:
        rc = decide(g, call, m->kind, api_peek_request((const Permit__V1__PeekRequest *)in),
                    &err);
        break;
    case KIND_RELEASE: {
        const Permit__V1__ReleaseRequest *rq = (const Permit__V1__ReleaseRequest *)in;
        rc = decide(g, call, m->kind, (struct limiter_request){rq->bucket, rq->app, rq->key, 0,
                                                               NULL, rq->lease_id}, &err);
        break;
    }
    case KIND_RENEW: {
        const Permit__V1__RenewRequest *rq = (const Permit__V1__RenewRequest *)in;
        rc = decide(g, call, m->kind, (struct limiter_request){rq->bucket, rq->app, rq->key, 0,
                                                               NULL, rq->lease_id}, &err);
        break;
    }
    default:
        rc = acquire_batch(g, call, (const Permit__V1__AcquireBatchRequest *)in, &err);
    }
    /* in stays in the call's storage, given back with the call. */
    if (rc != PERMITD_OK)
        grpc_call_fail(call, &err);
}

void grpcapi_chain(struct grpcapi *g, grpc_handler_fn fn, void *ud)
{
    g->next = fn;
    g->next_ud = ud;
}

struct limiter_queue *grpcapi_queue(const struct grpc_call *call)
{
    return grpc_call_worker(call);
}

int grpcapi_worker_open(void *ud, struct loop *loop, void **worker, struct permitd_error *err)
{
    struct grpcapi *g = ud;

    return limiter_queue_new(g->limiter, loop, (struct limiter_queue **)worker, err);
}

void grpcapi_worker_close(void *ud, void *worker)
{
    (void)ud;
    limiter_queue_free(worker);
}

int grpcapi_new(const struct config *cfg, struct limiter *limiter, struct stats *stats,
                struct appkeys *keys, struct grpcapi **out, struct permitd_error *err)
{
    struct grpcapi *g = calloc(1, sizeof(*g));

    (void)cfg;
    *out = NULL;
    if (g == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    g->limiter = limiter;
    g->stats = stats;
    g->keys = keys;
    *out = g;
    return PERMITD_OK;
}

void grpcapi_free(struct grpcapi *g)
{
    free(g);
}
