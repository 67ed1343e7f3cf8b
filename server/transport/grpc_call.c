/*
 * grpc_call.c - the gRPC listener's calls: their records (recycled per
 * worker), the call API the handler uses (grpc.h), and their answers
 * (HEADERS, one message, trailers; or Trailers-Only for an error).
 * grpc.c's opening comment tells the whole listener's story.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "core/clock.h"
#include "transport/grpc_conn.h"

#define CALL_SPARE_MAX 128         /* finished calls a worker keeps for reuse */

/* ---- calls ---- */

/* A call record for w, cleared: one from w's spare list, else a new one
 * (NULL when out of memory). It goes back with grpc_call_end(). */
struct grpc_call *grpc_call_take(struct grpc_worker *w)
{
    struct grpc_call *call = w->spare;

    if (call != NULL) {
        w->spare = call->next;
        w->nspare--;
    } else if ((call = malloc(sizeof(*call))) == NULL) {
        return NULL;
    } else {
        call->body = call->reply = NULL;
        call->body_cap = call->reply_cap = 0;
    }
    memset(call, 0, offsetof(struct grpc_call, w));
    call->w = w;
    call->who[0] = '\0';
    arena_init(&call->storage, call->store, sizeof(call->store));
    return call;
}

/* Frees a record and its buffers (w's spare list, at the end). */
static void call_destroy(struct grpc_call *call)
{
    free(call->body);
    free(call->reply);
    free(call);
}

/* Ends call: the blocks grpc_call_alloc() had to malloc are freed, and the
 * record, with its body and reply buffers (unless one grew over
 * GRPC_CALL_KEEP_BYTES), goes back to its worker's spare list, or is freed
 * when CALL_SPARE_MAX wait there. Every pointer into the call is gone. Runs
 * on the worker's thread, or after it has ended (grpc_server_stop()). */
void grpc_call_end(struct grpc_call *call)
{
    struct grpc_worker *w;

    if (call == NULL)
        return;
    w = call->w;
    while (call->blocks != NULL) {
        struct grpc_call_block *b = call->blocks;
        call->blocks = b->next;
        free(b);
    }
    if (w->nspare >= CALL_SPARE_MAX) {
        call_destroy(call);
        return;
    }
    if (call->body_cap > GRPC_CALL_KEEP_BYTES) {
        free(call->body);
        call->body = NULL;
        call->body_cap = 0;
    }
    if (call->reply_cap > GRPC_CALL_KEEP_BYTES) {
        free(call->reply);
        call->reply = NULL;
        call->reply_cap = 0;
    }
    call->next = w->spare;
    w->spare = call;
    w->nspare++;
}

/* Frees w's spare calls. */
void grpc_call_spare_free(struct grpc_worker *w)
{
    while (w->spare != NULL) {
        struct grpc_call *call = w->spare;
        w->spare = call->next;
        call_destroy(call);
    }
    w->nspare = 0;
}

void grpc_call_unlink(struct grpc_call *call)
{
    struct grpc_conn *c = call->conn;

    if (c == NULL)
        return;
    if (call->prev != NULL)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next != NULL)
        call->next->prev = call->prev;
    call->prev = call->next = NULL;
}

const char *grpc_call_path(const struct grpc_call *call)
{
    return call->path;
}

const char *grpc_call_metadata(const struct grpc_call *call, const char *name)
{
    return strcmp(name, "authorization") == 0 ? call->authz : NULL;
}

const void *grpc_call_message(const struct grpc_call *call, size_t *len)
{
    *len = call->body_len >= 5 ? call->body_len - 5 : 0;
    return call->body_len >= 5 ? call->body + 5 : (const void *)"";
}

int64_t grpc_call_deadline_us(const struct grpc_call *call)
{
    return call->deadline_us;
}

void *grpc_call_worker(const struct grpc_call *call)
{
    return call->worker_ctx;
}

int grpc_call_gone(const struct grpc_call *call)
{
    return call->conn == NULL;
}

/* From the call's store[] while it has room; else a block of malloc's,
 * chained to the call and freed with it (grpc_call_end()). */
void *grpc_call_alloc(struct grpc_call *call, size_t size)
{
    struct grpc_call_block *b;
    void *p;

    if ((p = arena_alloc(&call->storage, size)) != NULL)
        return memset(p, 0, size);
    if (size > SIZE_MAX - sizeof(*b) || (b = calloc(1, sizeof(*b) + size)) == NULL)
        return NULL;
    b->next = call->blocks;
    call->blocks = b;
    return b->data;
}

/* Grows the call's reply buffer to hold a message of len bytes after its
 * prefix; the buffer is the call's (kept with the record, freed by
 * call_destroy()). NULL when out of memory. */
void *grpc_call_reply_space(struct grpc_call *call, size_t len)
{
    if (len > SIZE_MAX - 5)
        return NULL;
    if (len + 5 > call->reply_cap) {
        size_t cap = call->reply_cap ? call->reply_cap : 256;
        uint8_t *b;
        while (cap < len + 5)
            cap = cap > SIZE_MAX / 2 ? len + 5 : cap * 2;
        /* Nothing to keep: the old contents are not an answer yet. */
        if ((b = malloc(cap)) == NULL)
            return NULL;
        free(call->reply);
        call->reply = b;
        call->reply_cap = cap;
    }
    return call->reply + 5;
}

int grpc_call_header(struct grpc_call *call, const char *name, const char *value, size_t len)
{
    if (call->nheaders >= GRPC_CALL_HEADERS_MAX)
        return -1;
    if (len > sizeof(call->headers[0].value))
        len = sizeof(call->headers[0].value);
    call->headers[call->nheaders].name = name;
    memcpy(call->headers[call->nheaders].value, value, len);
    call->headers[call->nheaders].len = len;
    call->nheaders++;
    return 0;
}

size_t grpc_percent_encode(const char *msg, char *out, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    if (size == 0)
        return 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p != '\0'; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            if (n + 1 >= size)
                break;
            out[n++] = (char)*p;
        } else {
            if (n + 3 >= size)
                break;
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    out[n] = '\0';
    return n;
}

int grpc_parse_timeout(const char *value, int64_t *us, struct permitd_error *err)
{
    size_t len = strlen(value), digits = len - 1;
    int64_t v = 0;

    if (len < 2 || len > 9)
        goto bad;
    for (size_t i = 0; i < digits; i++) {
        if (value[i] < '0' || value[i] > '9')
            goto bad;
        v = v * 10 + (value[i] - '0');
    }
    switch (value[digits]) {
    case 'H': *us = v * 3600 * 1000000; break;
    case 'M': *us = v * 60 * 1000000; break;
    case 'S': *us = v * 1000000; break;
    case 'm': *us = v * 1000; break;
    case 'u': *us = v; break;
    case 'n': *us = v / 1000 + (v % 1000 != 0); break;
    default: goto bad;
    }
    return PERMITD_OK;
bad:
    return permitd_error_set(err, PERMITD_EINVAL,
                             "grpc-timeout: \"%.40s\" is not 1 to 8 digits and a unit "
                             "(H, M, S, m, u, n)", value);
}

/* The data source of an answer's one message; the trailers go after it. */
static ssize_t read_reply(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                          size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                          void *user_data)
{
    struct grpc_call *call = source->ptr;
    size_t n = call->reply_len - call->reply_off;
    static const nghttp2_nv ok[] = {
        {(uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, NGHTTP2_NV_FLAG_NONE},
    };

    (void)user_data;
    if (n > length)
        n = length;
    memcpy(buf, call->reply + call->reply_off, n);
    call->reply_off += n;
    if (call->reply_off == call->reply_len) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        if (nghttp2_submit_trailer(session, stream_id, ok, 1) != 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return (ssize_t)n;
}

#define NV(n, v, vl) {(uint8_t *)(n), (uint8_t *)(v), strlen(n), (vl), NGHTTP2_NV_FLAG_NONE}

/* Sends the answer: msg (a reply) when err is NULL, else Trailers-Only with
 * err. http_status is 200 but for a content type that is not gRPC's. */
void grpc_call_answer(struct grpc_call *call, int http_status, const void *msg, size_t len,
                   const struct permitd_error *err)
{
    struct grpc_conn *c = call->conn;
    nghttp2_nv nv[4 + GRPC_CALL_HEADERS_MAX];
    char status[16], code[16], text[3 * sizeof(err->message) + 1];
    size_t n = 0;
    int rv;

    if (call->answered)
        return;
    call->answered = 1;
    if (call->w->s->opts.access_log) {
        /* The path is the client's: log_q() quotes it (see http.c's line). */
        log_msg(LOG_LEVEL_INFO, "request", "listener=%s method=POST path=%s status=%d "
                "grpc_status=%d bytes=%zu us=%lld%s%s", call->w->s->opts.name, log_q(call->path),
                http_status, err == NULL ? 0 : err->code < 0 ? -err->code : 2,
                err == NULL ? len : 0, (long long)(clock_now_us() - call->opened_us),
                call->who, c == NULL ? " client_gone=1" : "");
    }
    if (c == NULL) {            /* the client went while the handler worked */
        grpc_call_end(call);
        return;
    }
    grpc_conn_release(call, 1);
    if (call->dispatched) {     /* an answer refused early is no progress */
        c->active_us = clock_now_us();
        c->served = 1;
    }
    snprintf(status, sizeof(status), "%d", http_status);
    nv[n++] = (nghttp2_nv)NV(":status", status, strlen(status));
    nv[n++] = (nghttp2_nv)NV("content-type", "application/grpc", 16);
    for (int i = 0; i < call->nheaders; i++)
        nv[n++] = (nghttp2_nv)NV(call->headers[i].name, call->headers[i].value,
                                 call->headers[i].len);
    if (err == NULL) {
        nghttp2_data_provider prd;
        /* msg may be the call's own reply space already: then no copy. */
        int in_place = call->reply != NULL && msg == call->reply + 5;
        if (!in_place && grpc_call_reply_space(call, len) == NULL) {
            struct permitd_error oom;
            call->answered = 0;
            permitd_error_set(&oom, PERMITD_EINTERNAL, "out of memory");
            grpc_call_answer(call, 200, NULL, 0, &oom);
            return;
        }
        call->reply[0] = 0;
        call->reply[1] = (uint8_t)(len >> 24);
        call->reply[2] = (uint8_t)(len >> 16);
        call->reply[3] = (uint8_t)(len >> 8);
        call->reply[4] = (uint8_t)len;
        if (len > 0 && !in_place)
            memcpy(call->reply + 5, msg, len);
        call->reply_len = len + 5;
        prd.source.ptr = call;
        prd.read_callback = read_reply;
        rv = nghttp2_submit_response(c->session, call->id, nv, n, &prd);
    } else {
        snprintf(code, sizeof(code), "%d", err->code < 0 ? -err->code : 2);
        grpc_percent_encode(err->message, text, sizeof(text));
        nv[n++] = (nghttp2_nv)NV("grpc-status", code, strlen(code));
        nv[n++] = (nghttp2_nv)NV("grpc-message", text, strlen(text));
        rv = nghttp2_submit_response(c->session, call->id, nv, n, NULL);
    }
    if (rv != 0)
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, call->id, NGHTTP2_INTERNAL_ERROR);
    grpc_conn_mark_dirty(c);
}

void grpc_call_log_who(struct grpc_call *call, const char *app, const char *key)
{
    log_who(call->who, app, key);
}

void grpc_call_reply(struct grpc_call *call, const void *msg, size_t len)
{
    grpc_call_answer(call, 200, msg, len, NULL);
}

void grpc_call_fail(struct grpc_call *call, const struct permitd_error *err)
{
    grpc_call_answer(call, 200, NULL, 0, err);
}


/* The request is whole: checks its head and its one message, then hands it
 * to the handler. */
void grpc_call_dispatch(struct grpc_call *call)
{
    struct grpc_server *s = call->conn->w->s;
    uint32_t mlen = 0;

    if (call->answered)
        return;
    if (call->body_len >= 5)
        mlen = (uint32_t)call->body[1] << 24 | (uint32_t)call->body[2] << 16 |
               (uint32_t)call->body[3] << 8 | call->body[4];
    if (call->bad_type) {
        struct permitd_error err;
        permitd_error_set(&err, PERMITD_EINVAL, "content-type must be application/grpc "
                          "(or application/grpc+proto)");
        grpc_call_answer(call, 415, NULL, 0, &err);
    } else if (call->bad_method) {
        GRPC_CALL_FAIL(call, PERMITD_EUNIMPLEMENTED, ":method: gRPC calls are POST");
    } else if (call->head_too_big) {
        GRPC_CALL_FAIL(call, PERMITD_EINVAL, ":path or authorization is longer than %d or %d bytes",
                       GRPC_CALL_PATH_MAX_LEN - 1, GRPC_CALL_AUTHZ_MAX_LEN);
    } else if (call->head_err.code != PERMITD_OK) {
        grpc_call_answer(call, 200, NULL, 0, &call->head_err);
    } else if (call->body_len == 0) {
        GRPC_CALL_FAIL(call, PERMITD_EINVAL, "no request message: a unary call sends one "
                       "length-prefixed message");
    } else if (call->body_len < 5) {
        GRPC_CALL_FAIL(call, PERMITD_EINVAL,
                       "the 5-byte message prefix was cut short: %zu bytes came",
                       call->body_len);
    } else if (call->body[0] == 1) {
        GRPC_CALL_FAIL(call, PERMITD_EUNIMPLEMENTED,
                       "a compressed message (flag 1) is not accepted: "
                       "send it uncompressed (grpc-encoding identity)");
    } else if (call->body[0] != 0) {
        GRPC_CALL_FAIL(call, PERMITD_EINVAL, "the message prefix's flag is %u, not 0 or 1",
                       (unsigned)call->body[0]);
    } else if (mlen != call->body_len - 5) {
        GRPC_CALL_FAIL(call, PERMITD_EINVAL,
                       "the message prefix says %u bytes, %zu followed (a unary "
                       "call sends exactly one message)", (unsigned)mlen, call->body_len - 5);
    } else if (call->deadline_us != INT64_MAX && clock_now_us() >= call->deadline_us) {
        GRPC_CALL_FAIL(call, PERMITD_EDEADLINE, "grpc-timeout passed before the request was whole");
    } else {
        call->dispatched = 1;
        call->conn->active_us = clock_now_us();
        call->worker_ctx = call->conn->w->ctx;
        s->fn(s->ud, call);
    }
}
