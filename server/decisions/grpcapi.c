/*
 * grpcapi.c - permit.v1.RateLimitService over gRPC: Acquire, Peek,
 * AcquireBatch, Release and Renew for stock gRPC clients (issue 25);
 * Reserve, Commit and Cancel (issue 38), answered when the service's
 * reservations pool has decided them.
 *
 * A door: the decision is the service's (service.h: key, app, UTF-8 and
 * validation, the limiter, the counting), the translations are shared
 * with Connect (answer.h); what is this file's is only how a call arrives
 * and leaves: a decoded protobuf from grpc.h instead of an HTTP request,
 * a packed message or a gRPC status instead of a Connect body, the
 * RateLimit headers as metadata. A call's record (struct pending), its
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

#include "decisions/grpcapi.h"
#include "decisions/answer.h"
#include "decisions/service.h"
#include "permit/v1/ratelimit.pb-c.h"

struct grpcapi {
    struct service *service;
    grpc_handler_fn next;           /* other services (Envoy's) */
    void *next_ud;
};

/* The service's kinds (service.h), and the batch. */
enum { KIND_BATCH = SERVICE_RENEW + 1, KIND_RESERVE, KIND_COMMIT, KIND_CANCEL };

static const struct method {
    const char *path;
    const ProtobufCMessageDescriptor *input;
    int kind;
} methods[] = {
    {"/permit.v1.RateLimitService/Acquire", &permit__v1__acquire_request__descriptor,
     SERVICE_ACQUIRE},
    {"/permit.v1.RateLimitService/Peek", &permit__v1__peek_request__descriptor, SERVICE_PEEK},
    {"/permit.v1.RateLimitService/AcquireBatch", &permit__v1__acquire_batch_request__descriptor,
     KIND_BATCH},
    {"/permit.v1.RateLimitService/Release", &permit__v1__release_request__descriptor,
     SERVICE_RELEASE},
    {"/permit.v1.RateLimitService/Renew", &permit__v1__renew_request__descriptor, SERVICE_RENEW},
    {"/permit.v1.RateLimitService/Reserve", &permit__v1__reserve_request__descriptor,
     KIND_RESERVE},
    {"/permit.v1.RateLimitService/Commit", &permit__v1__commit_request__descriptor, KIND_COMMIT},
    {"/permit.v1.RateLimitService/Cancel", &permit__v1__cancel_request__descriptor, KIND_CANCEL},
    {NULL, NULL, 0},
};

/* One unary call waiting for its decision: the service's record, in the
 * call's storage. */
struct pending {
    struct service_take take;
    struct grpc_call *call;
};

/* One AcquireBatch waiting for its decisions: the service's record, each
 * array in the call's storage. */
struct pending_batch {
    struct service_batch b;
    struct grpc_call *call;
};

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

/* The RateLimit headers of a decision (answer_ratelimit_headers()), as the
 * answer's metadata, lowercase as HTTP/2 wants. */
static void ratelimit_metadata(struct grpc_call *call, const char *policy,
                               const struct limiter_result *r)
{
    struct http_response resp;

    http_response_init(&resp);
    answer_ratelimit_headers(&resp, policy, r);
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

    if (rc != PERMITD_OK) {
        grpc_call_fail(call, err);
        return;
    }
    switch (p->take.kind) {
    case SERVICE_ACQUIRE: {
        Permit__V1__AcquireResponse m;
        answer_decision_message(&m, r);
        ratelimit_metadata(call, p->take.bucket, r);
        grpcapi_reply(call, &m.base);
        break;
    }
    case SERVICE_PEEK: {
        Permit__V1__PeekResponse m;
        answer_peek_message(&m, r);
        grpcapi_reply(call, &m.base);
        break;
    }
    case SERVICE_RELEASE: {
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

/* A unary call: handed to the service with the call's authorization
 * metadata, answered from the worker's loop. */
static int decide(struct grpc_call *call, enum service_kind kind, struct limiter_request lr,
                  struct permitd_error *err)
{
    struct service_caller c = {grpc_call_metadata(call, "authorization"), "", ""};
    struct pending *p;
    int rc;

    if ((p = grpc_call_alloc(call, sizeof(*p))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    p->call = call;
    rc = service_decide(grpcapi_worker(call), &p->take, kind, &c, &lr,
                        grpc_call_deadline_us(call), decided, p, err);
    grpc_call_log_who(call, c.app[0] ? c.app : lr.app, c.key_prefix);
    if (rc != PERMITD_OK)
        return rc;
    service_queue(grpcapi_worker(call), &p->take);
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
    size_t n = p->b.n ? p->b.n : 1;
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
    for (size_t i = 0; i < p->b.n; i++) {
        answer_batch_item(&results[i], &answers[i], &errors[i], &p->b.res[i], &p->b.errs[i]);
        ptrs[i] = &results[i];
    }
    rs.results = ptrs;
    rs.n_results = p->b.n;
    grpcapi_reply(p->call, &rs.base);
}

static int acquire_batch(struct grpcapi *g, struct grpc_call *call,
                         const Permit__V1__AcquireBatchRequest *rq, struct permitd_error *err)
{
    struct service_caller c = {grpc_call_metadata(call, "authorization"), "", ""};
    size_t n = rq->n_requests, m = n ? n : 1;
    struct pending_batch *p;
    const char *app = c.app;
    int rc;

    rc = service_batch_authorize(g->service, &c, (const Permit__V1__AcquireRequest *const *)
                                 rq->requests, n, err);
    if (n <= LIMITER_BATCH_MAX)                 /* a batch too long names no one */
        grpc_call_log_who(call, c.app, c.key_prefix);
    if (rc != PERMITD_OK)
        return rc;
    if ((p = grpc_call_alloc(call, sizeof(*p))) == NULL ||
        (p->b.reqs = grpc_call_alloc(call, m * sizeof(*p->b.reqs))) == NULL ||
        (p->b.res = grpc_call_alloc(call, m * sizeof(*p->b.res))) == NULL ||
        (p->b.errs = grpc_call_alloc(call, m * sizeof(*p->b.errs))) == NULL)
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
        p->b.reqs[i] = (struct limiter_request){dst[0], dst[1], dst[2], r->permits, dst[3], NULL, NULL};
    }
    p->b.n = n;
    p->call = call;
    service_batch(grpcapi_worker(call), &p->b,
                  rq->all_or_nothing ? SERVICE_BATCH_ALL : SERVICE_BATCH_EACH,
                  grpc_call_deadline_us(call), 0, batch_done, p);
    return PERMITD_OK;
}

/* Reserve, Commit, Cancel: checked here, decided by the service's
 * reservations pool off this worker's loop (service_reserve()), answered
 * when its job comes back (the reply packed into the call's buffer); a
 * full pool is refused at once. */
static void reservation_done(void *ud, int rc, const struct service_reservation *r,
                             const struct permitd_error *err)
{
    struct grpc_call *call = ud;
    struct answer_reserve ans;
    struct answer_settled set;

    if (rc != PERMITD_OK) {
        grpc_call_fail(call, err);
    } else if (r->kind == SERVICE_RESERVE) {
        answer_reserve_message(&ans, r->items, r->n, &r->reserved);
        grpcapi_reply(call, &ans.m.base);
    } else {
        answer_settled_message(&set, r->kind == SERVICE_CANCEL, &r->settled);
        grpcapi_reply(call, r->kind == SERVICE_CANCEL ? &set.cancel.base : &set.commit.base);
    }
}

static int reservation(struct grpc_call *call, int kind, const ProtobufCMessage *in,
                       struct permitd_error *err)
{
    struct service_caller c = {grpc_call_metadata(call, "authorization"), "", ""};
    struct service_worker *w = grpcapi_worker(call);
    int64_t deadline = grpc_call_deadline_us(call);
    const char *app;
    int rc;

    if (kind == KIND_RESERVE) {
        const Permit__V1__ReserveRequest *rq = (const Permit__V1__ReserveRequest *)in;
        rc = service_reserve(w, &c, rq, deadline, reservation_done, call, err);
        app = rq->app;
    } else if (kind == KIND_COMMIT) {
        const Permit__V1__CommitRequest *rq = (const Permit__V1__CommitRequest *)in;
        rc = service_commit(w, &c, rq, deadline, reservation_done, call, err);
        app = rq->app;
    } else {
        const Permit__V1__CancelRequest *rq = (const Permit__V1__CancelRequest *)in;
        rc = service_cancel(w, &c, rq, deadline, reservation_done, call, err);
        app = rq->app;
    }
    grpc_call_log_who(call, c.app[0] ? c.app : app, c.key_prefix);
    return rc;
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
    /* protobuf-c copies string fields as they come: what is not UTF-8
     * the service refuses (service_check()) as Connect's codecs do. */
    switch (m->kind) {
    case SERVICE_ACQUIRE:
        rc = decide(call, SERVICE_ACQUIRE,
                    answer_acquire_request((const Permit__V1__AcquireRequest *)in), &err);
        break;
    case SERVICE_PEEK:
        rc = decide(call, SERVICE_PEEK, answer_peek_request((const Permit__V1__PeekRequest *)in),
                    &err);
        break;
    case SERVICE_RELEASE: {
        const Permit__V1__ReleaseRequest *rq = (const Permit__V1__ReleaseRequest *)in;
        rc = decide(call, SERVICE_RELEASE, (struct limiter_request){rq->bucket, rq->app, rq->key,
                                                                   0, NULL, rq->lease_id, NULL}, &err);
        break;
    }
    case SERVICE_RENEW: {
        const Permit__V1__RenewRequest *rq = (const Permit__V1__RenewRequest *)in;
        rc = decide(call, SERVICE_RENEW, (struct limiter_request){rq->bucket, rq->app, rq->key,
                                                                 0, NULL, rq->lease_id, NULL}, &err);
        break;
    }
    case KIND_RESERVE:
    case KIND_COMMIT:
    case KIND_CANCEL:
        rc = reservation(call, m->kind, in, &err);
        break;
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

struct service_worker *grpcapi_worker(const struct grpc_call *call)
{
    return grpc_call_worker(call);
}

int grpcapi_worker_open(void *ud, struct loop *loop, void **worker, struct permitd_error *err)
{
    struct grpcapi *g = ud;

    return service_worker_open(g->service, loop, (struct service_worker **)worker, err);
}

void grpcapi_worker_close(void *ud, void *worker)
{
    (void)ud;
    service_worker_close(worker);
}

int grpcapi_new(const struct config *cfg, struct service *service, struct grpcapi **out,
                struct permitd_error *err)
{
    struct grpcapi *g = calloc(1, sizeof(*g));

    (void)cfg;
    *out = NULL;
    if (g == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    g->service = service;
    *out = g;
    return PERMITD_OK;
}

void grpcapi_free(struct grpcapi *g)
{
    free(g);
}
