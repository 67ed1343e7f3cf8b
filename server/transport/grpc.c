/*
 * grpc.c - the gRPC listener: HTTP/2 (libnghttp2) sessions on worker event
 * loops, and the gRPC framing of unary calls (issue 25).
 *
 * `threads` workers share one listening socket (each waits on it with
 * EPOLLEXCLUSIVE, so one wakes per connection). A worker's connections and
 * the listening socket sit in an epoll set of its own, whose fd is one
 * source of the worker's loop (loop.h); the handler's per-worker work (a
 * limiter queue) is another source of the same loop, attached after it.
 * So one turn reads every connection that has bytes, nghttp2 parses them,
 * each call whose request is whole goes to the handler, the handler queues
 * its decision, the queue's flush sends the pass's decisions to Redis
 * together, and the answers, handed back on this thread, are written out
 * by this source's flush in the pass after (loop_again()).
 *
 * A call (struct grpc_call) is one HTTP/2 stream. It lives until both its
 * stream has closed and, once handed to the handler, the handler has
 * answered: a client that resets the stream (RST_STREAM), or a connection
 * that closes, while a decision is pending leaves the call detached
 * (conn NULL), and the answer, when it comes, frees it unsent.
 * A finished call's record goes back to its worker (at most CALL_SPARE_MAX
 * wait there) with its buffers: the request body, the reply, and the
 * call's storage that grpc_call_alloc() bumps from (core/arena.h), where
 * the handler keeps its pending record, the decoded request and the
 * answer's arrays. A warmed-up call allocates nothing of permitd's own;
 * what does not fit in the storage comes from malloc, chained to the call
 * and freed with it (tests/e2e/grpc-allocs.test.mjs counts).
 *
 * The framing (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md):
 * a request is HEADERS (:method POST, :path /pkg.Service/Method,
 * content-type application/grpc[+proto], optional grpc-timeout) then DATA
 * holding one length-prefixed message (1 byte compressed flag, 4 bytes
 * big-endian length); the answer is HEADERS (:status 200), DATA with one
 * message and trailers (grpc-status 0), or, for an error, "Trailers-Only":
 * one HEADERS frame with grpc-status and grpc-message, ending the stream.
 * An answer sent before the client has ended its side (a message over the
 * limit, a deadline passed) is followed by RST_STREAM NO_ERROR, so the
 * client stops sending (on_frame_send()).
 * Every refusal names the bad value: a length prefix that does not match
 * the bytes sent, a message over the limit, a compressed message, a bad
 * grpc-timeout. Limits: SETTINGS_MAX_CONCURRENT_STREAMS per connection,
 * a connection count over all workers, a count per client address (the
 * listener's own table, core/iplimit.c, as each HTTP listener has), the
 * message size, the request bytes a connection holds (flow control:
 * hold(), release()), and time (issue 42): a call's request must be whole
 * request_timeout_s after its HEADERS whatever grpc-timeout says, and a
 * connection is idle when it makes no progress (a request whole, an
 * answer), not when it has no call, so stalled calls hold nothing for
 * ever (sweep()).
 *
 * A connection over the count is given the slot of one of its worker's
 * connections that is idle or stalled (shed(), the policy of http.c's
 * conn_shed()); when there is none, and for one over the count per
 * address, it is closed at accept, counted by reason, and logged at most
 * once a second (a client hammering a full listener must not flood the
 * log). A connection gives its slots back in conn_close(), the one way
 * every connection ends: a client's close, a protocol error, a failed TLS
 * handshake, the idle sweep, a shed, the drain at stop.
 */
#define _GNU_SOURCE 1   /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <nghttp2/nghttp2.h>

#include "transport/grpc.h"
#include "core/arena.h"
#include "core/clock.h"
#include "core/iplimit.h"
#include "core/log.h"
#include "core/loop.h"

#define PATH_MAX_LEN 256
#define AUTHZ_MAX_LEN 1024
#define READ_CHUNK 16384
#define READS_PER_EVENT 8          /* fairness: then back to the other connections */
#define SWEEP_US 1000000           /* idle connections are looked for every second */
#define SHED_AGE_US 1000000        /* when full, a connection stalled this long may be shed */
#define CLOSING_US 1000000         /* a connection told to go (GOAWAY) is closed this after */
#define BUFFER_MESSAGES 4          /* a connection buffers this many whole messages' bytes */
#define REFUSAL_LOG_US 1000000     /* refused connections are logged at most this often */
#define CALL_STORE 4096            /* grpc_call_alloc()'s room inside a call */
#define CALL_SPARE_MAX 128         /* finished calls a worker keeps for reuse */
#define CALL_KEEP_BYTES 16384      /* a body or reply buffer over this is not kept */

struct conn;
struct worker;

struct block {
    struct block *next;
    max_align_t data[];
};

/* A call's record. Finished ones go back to their worker's spare list
 * (call_end()) and serve its next calls: a warmed-up call allocates
 * nothing here. Everything up to `w` is cleared for each call; from `w` on
 * the record keeps what it has (its buffers, grown only when a bigger
 * message comes). */
struct grpc_call {
    struct conn *conn;              /* NULL once the client has gone */
    struct grpc_call *prev, *next;  /* the connection's calls; next: the spare list */
    int32_t id;
    int dispatched, answered;
    int bad_method, bad_type, head_too_big;
    char path[PATH_MAX_LEN];
    char *authz;                    /* authz_buf; NULL: none sent */
    int64_t opened_us;              /* its HEADERS came */
    int64_t deadline_us;            /* grpc-timeout's; INT64_MAX: none */
    int64_t request_due_us;         /* HEADERS + request_timeout_s: the request is whole by then */
    struct permitd_error head_err;  /* grpc-timeout or grpc-encoding refused */
    size_t body_len;
    size_t held;                    /* of body_len, counted in the connection's held */
    size_t unacked;                 /* of held, not given back to the flow-control windows */
    int too_large;                  /* answered resource_exhausted while data came */
    size_t reply_len, reply_off;
    int nheaders;
    struct {
        const char *name;
        char value[192];
        size_t len;
    } headers[GRPC_CALL_HEADERS_MAX];
    struct block *blocks;           /* grpc_call_alloc()'s that did not fit in store[] */
    void *worker_ctx;
    /* Kept when the record is reused: */
    struct worker *w;               /* whose spare list takes it back */
    char who[LOG_WHO_MAX];          /* " app=... key=..." for the access log, or "" */
    uint8_t *body;                  /* the request: prefix + message; body_cap bytes */
    size_t body_cap;
    uint8_t *reply;                 /* the answer: prefix + message; reply_cap bytes */
    size_t reply_cap;
    struct arena storage;           /* over store[]: grpc_call_alloc() */
    char authz_buf[AUTHZ_MAX_LEN + 1];
    _Alignas(max_align_t) unsigned char store[CALL_STORE];
};

struct conn {
    struct worker *w;
    int fd;                         /* -1: grpc_feed()'s connection, output dropped */
    nghttp2_session *session;
    struct grpc_call *calls;
    struct conn *prev, *next;       /* the worker's connections */
    struct conn *dirty_next;        /* on the worker's dirty list */
    int dirty, epollout, dead;
    uint8_t *out;                   /* what the socket did not take yet */
    size_t out_len, out_off, out_cap;
    int64_t active_us;              /* its last progress: accepted, a request whole, an answer */
    int64_t opened_us;              /* the last call opened (HEADERS) */
    int64_t closing_us;             /* told to go (GOAWAY) at; 0: not */
    int served;                     /* it has answered a call handed to the handler */
    size_t held;                    /* request bytes its calls hold */
    size_t unacked;                 /* of held, not given back to the windows (over budget) */
    gnutls_session_t tls;           /* NULL: cleartext (h2c) */
    int handshaken;                 /* TLS: the handshake is over, ALPN said h2 */
    struct sockaddr_storage peer;   /* the client's address */
    int per_ip;                     /* counted in the server's perip: put back at close */
};

struct worker {
    struct grpc_server *s;
    struct loop *loop;              /* NULL: grpc_feed() */
    pthread_t thread;
    int started, opened;
    int epfd;
    void *ctx;
    struct conn *conns, *dirty;
    struct grpc_call *spare;        /* finished calls, for the next ones */
    int nspare;
    int64_t next_due;               /* earliest sweep: idle connections, call deadlines */
    int draining;
    int64_t drain_until;
};

struct grpc_server {
    struct grpc_options opts;
    grpc_handler_fn fn;
    void *ud;
    int listen_fd;
    int port;
    atomic_int stopping;
    atomic_uint nconns;
    struct iplimit *perip;          /* connections per client address */
    atomic_uint_fast64_t refused_full, refused_per_ip;
    atomic_uint_fast64_t shed_idle, shed_stalled;   /* closed by shed() */
    _Atomic int64_t refusal_logged_us;  /* when a refusal was last logged */
    int grace_ms;
    gnutls_certificate_credentials_t cred;  /* NULL: cleartext */
    gnutls_priority_t prio;
    int nworkers;
    struct worker workers[];
};

static void conn_close(struct conn *c);
static void mark_dirty(struct conn *c);

/* ---- calls ---- */

/* A call record for w, cleared: one from w's spare list, else a new one
 * (NULL when out of memory). It goes back with call_end(). */
static struct grpc_call *call_new(struct worker *w)
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
 * CALL_KEEP_BYTES), goes back to its worker's spare list, or is freed
 * when CALL_SPARE_MAX wait there. Every pointer into the call is gone. Runs
 * on the worker's thread, or after it has ended (grpc_server_stop()). */
static void call_end(struct grpc_call *call)
{
    struct worker *w;

    if (call == NULL)
        return;
    w = call->w;
    while (call->blocks != NULL) {
        struct block *b = call->blocks;
        call->blocks = b->next;
        free(b);
    }
    if (w->nspare >= CALL_SPARE_MAX) {
        call_destroy(call);
        return;
    }
    if (call->body_cap > CALL_KEEP_BYTES) {
        free(call->body);
        call->body = NULL;
        call->body_cap = 0;
    }
    if (call->reply_cap > CALL_KEEP_BYTES) {
        free(call->reply);
        call->reply = NULL;
        call->reply_cap = 0;
    }
    call->next = w->spare;
    w->spare = call;
    w->nspare++;
}

/* Frees w's spare calls. */
static void spare_free(struct worker *w)
{
    while (w->spare != NULL) {
        struct grpc_call *call = w->spare;
        w->spare = call->next;
        call_destroy(call);
    }
    w->nspare = 0;
}

static void call_unlink(struct grpc_call *call)
{
    struct conn *c = call->conn;

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
 * chained to the call and freed with it (call_end()). */
void *grpc_call_alloc(struct grpc_call *call, size_t size)
{
    struct block *b;
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

/* ---- flow control ----
 *
 * nghttp2 gives window back to the client (WINDOW_UPDATE) only for the
 * bytes we say we consumed (NGHTTP2_OPT_NO_AUTO_WINDOW_UPDATE). A
 * request's bytes are consumed as they come while its connection holds at
 * most budget() of them, over all its calls; past it they are held
 * unacknowledged, so the client can send at most the connection's window
 * (64 KiB, never raised) more, however many streams it opens. A call's
 * bytes leave the count when it is answered or its stream closes, and
 * then, under the budget again, the ones waiting are acknowledged. */

/* The request bytes one connection may hold before the window stops. */
static size_t budget(const struct conn *c)
{
    return BUFFER_MESSAGES * (c->w->s->opts.max_message_bytes + 5);
}

/* len bytes just stored in call's body count against its connection. */
static void hold(struct conn *c, struct grpc_call *call, size_t len)
{
    call->held += len;
    c->held += len;
    if (c->held <= budget(c)) {
        nghttp2_session_consume(c->session, call->id, len);
    } else {
        call->unacked += len;
        c->unacked += len;
    }
}

/* call's bytes leave its connection's count (it was answered, or its
 * stream is closing: stream_open 0) and its body buffer, when it grew
 * past CALL_KEEP_BYTES and no handler reads it, is freed now; when the
 * connection is under its budget again, every call's waiting bytes are
 * acknowledged. */
static void release(struct grpc_call *call, int stream_open)
{
    struct conn *c = call->conn;

    if (c == NULL || c->session == NULL)
        return;
    c->held -= call->held;
    call->held = 0;
    if (call->unacked > 0) {
        if (stream_open)
            nghttp2_session_consume(c->session, call->id, call->unacked);
        else
            nghttp2_session_consume_connection(c->session, call->unacked);
        c->unacked -= call->unacked;
        call->unacked = 0;
    }
    if (call->body_cap > CALL_KEEP_BYTES && (!call->dispatched || call->answered)) {
        free(call->body);       /* the handler may still read it until it answers */
        call->body = NULL;
        call->body_cap = call->body_len = 0;
    }
    if (c->unacked > 0 && c->held <= budget(c)) {
        for (struct grpc_call *o = c->calls; o != NULL; o = o->next) {
            if (o->unacked == 0)
                continue;
            nghttp2_session_consume(c->session, o->id, o->unacked);
            c->unacked -= o->unacked;
            o->unacked = 0;
        }
    }
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
static void answer(struct grpc_call *call, int http_status, const void *msg, size_t len,
                   const struct permitd_error *err)
{
    struct conn *c = call->conn;
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
        call_end(call);
        return;
    }
    release(call, 1);
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
            answer(call, 200, NULL, 0, &oom);
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
    mark_dirty(c);
}

void grpc_call_log_who(struct grpc_call *call, const char *app, const char *key)
{
    log_who(call->who, app, key);
}

void grpc_call_reply(struct grpc_call *call, const void *msg, size_t len)
{
    answer(call, 200, msg, len, NULL);
}

void grpc_call_fail(struct grpc_call *call, const struct permitd_error *err)
{
    answer(call, 200, NULL, 0, err);
}

/* Answers call with the error code and the formatted sentence. */
#define FAIL(call, code, ...)                                   \
    do {                                                        \
        struct permitd_error e_;                                \
        permitd_error_set(&e_, (code), __VA_ARGS__);            \
        answer((call), 200, NULL, 0, &e_);                      \
    } while (0)

/* The request is whole: checks its head and its one message, then hands it
 * to the handler. */
static void dispatch(struct grpc_call *call)
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
        answer(call, 415, NULL, 0, &err);
    } else if (call->bad_method) {
        FAIL(call, PERMITD_EUNIMPLEMENTED, ":method: gRPC calls are POST");
    } else if (call->head_too_big) {
        FAIL(call, PERMITD_EINVAL, ":path or authorization is longer than %d or %d bytes",
             PATH_MAX_LEN - 1, AUTHZ_MAX_LEN);
    } else if (call->head_err.code != PERMITD_OK) {
        answer(call, 200, NULL, 0, &call->head_err);
    } else if (call->body_len == 0) {
        FAIL(call, PERMITD_EINVAL, "no request message: a unary call sends one "
             "length-prefixed message");
    } else if (call->body_len < 5) {
        FAIL(call, PERMITD_EINVAL, "the 5-byte message prefix was cut short: %zu bytes came",
             call->body_len);
    } else if (call->body[0] == 1) {
        FAIL(call, PERMITD_EUNIMPLEMENTED, "a compressed message (flag 1) is not accepted: "
             "send it uncompressed (grpc-encoding identity)");
    } else if (call->body[0] != 0) {
        FAIL(call, PERMITD_EINVAL, "the message prefix's flag is %u, not 0 or 1",
             (unsigned)call->body[0]);
    } else if (mlen != call->body_len - 5) {
        FAIL(call, PERMITD_EINVAL, "the message prefix says %u bytes, %zu followed (a unary "
             "call sends exactly one message)", (unsigned)mlen, call->body_len - 5);
    } else if (call->deadline_us != INT64_MAX && clock_now_us() >= call->deadline_us) {
        FAIL(call, PERMITD_EDEADLINE, "grpc-timeout passed before the request was whole");
    } else {
        call->dispatched = 1;
        call->conn->active_us = clock_now_us();
        call->worker_ctx = call->conn->w->ctx;
        s->fn(s->ud, call);
    }
}

/* ---- nghttp2's callbacks (user_data: the conn) ---- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct conn *c = ud;
    struct grpc_call *call;

    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    call = call_new(c->w);
    if (call == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    call->conn = c;
    call->id = frame->hd.stream_id;
    call->deadline_us = INT64_MAX;
    call->opened_us = c->opened_us = clock_now_us();
    /* The request must be whole in time whatever grpc-timeout says:
     * opening a call is not progress of the connection (active_us). */
    call->request_due_us = INT64_MAX;
    if (c->w->s->opts.request_timeout_s > 0) {
        call->request_due_us = call->opened_us + (int64_t)c->w->s->opts.request_timeout_s * 1000000;
        if (call->request_due_us < c->w->next_due)
            c->w->next_due = call->request_due_us;
    }
    call->next = c->calls;
    if (c->calls != NULL)
        c->calls->prev = call;
    c->calls = call;
    nghttp2_session_set_stream_user_data(session, call->id, call);
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
    struct conn *c = ud;
    struct grpc_call *call;

    (void)flags;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (call == NULL)
        return 0;
#define IS(s) (namelen == sizeof(s) - 1 && memcmp(name, s, namelen) == 0)
    if (IS(":method")) {
        call->bad_method = !(valuelen == 4 && memcmp(value, "POST", 4) == 0);
    } else if (IS(":path")) {
        if (valuelen >= sizeof(call->path)) {
            call->head_too_big = 1;
        } else {
            memcpy(call->path, value, valuelen);
            call->path[valuelen] = '\0';
        }
    } else if (IS("content-type")) {
        call->bad_type = !(valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
                           (valuelen == 16 || value[16] == '+' || value[16] == ';'));
    } else if (IS("authorization")) {
        call->authz = NULL;
        if (valuelen > AUTHZ_MAX_LEN) {
            call->head_too_big = 1;
        } else {
            memcpy(call->authz_buf, value, valuelen);
            call->authz_buf[valuelen] = '\0';
            call->authz = call->authz_buf;
        }
    } else if (IS("grpc-timeout")) {
        char v[16];
        int64_t us;
        snprintf(v, sizeof(v), "%.*s", (int)(valuelen < 15 ? valuelen : 15), value);
        if (valuelen >= 15) {
            permitd_error_set(&call->head_err, PERMITD_EINVAL, "grpc-timeout: \"%s...\" is "
                              "longer than 8 digits and a unit", v);
        } else if (grpc_parse_timeout(v, &us, &call->head_err) == PERMITD_OK) {
            int64_t now = clock_now_us();
            call->deadline_us = us > INT64_MAX - now ? INT64_MAX - 1 : now + us;
            if (call->deadline_us < c->w->next_due)
                c->w->next_due = call->deadline_us;
        }
    } else if (IS("grpc-encoding")) {
        if (!(valuelen == 8 && memcmp(value, "identity", 8) == 0))
            permitd_error_set(&call->head_err, PERMITD_EUNIMPLEMENTED,
                              "grpc-encoding: \"%.*s\" is not accepted; send identity "
                              "(uncompressed) messages", (int)(valuelen < 64 ? valuelen : 64),
                              value);
    }
#undef IS
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *ud)
{
    struct grpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);
    struct conn *c = ud;
    size_t max = c->w->s->opts.max_message_bytes + 5;

    (void)flags;
    if (call == NULL || call->answered) {
        /* Dropped: the window is given back at once. */
        nghttp2_session_consume(session, stream_id, len);
        return 0;
    }
    if (call->body_len + len > max) {
        /* Refused now, not once the client has sent it all. */
        call->too_large = 1;
        nghttp2_session_consume(session, stream_id, len);
        FAIL(call, PERMITD_EEXHAUSTED, "the request message is over %zu bytes (the limit)",
             c->w->s->opts.max_message_bytes);
        return 0;
    }
    if (call->body_len + len > call->body_cap) {
        size_t cap = call->body_cap ? call->body_cap : 256;
        uint8_t *b;
        while (cap < call->body_len + len)
            cap *= 2;
        if (cap > max)
            cap = max;
        /* realloc keeps what came so far; a record reused keeps its
         * buffer, so this runs only for a body bigger than its last. */
        if ((b = realloc(call->body, cap)) == NULL)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        call->body = b;
        call->body_cap = cap;
    }
    memcpy(call->body + call->body_len, data, len);
    call->body_len += len;
    hold(c, call, len);
    /* A prefix announcing more than the limit is refused before the bytes. */
    if (call->body_len >= 5 && call->body_len - len < 5) {
        uint32_t mlen = (uint32_t)call->body[1] << 24 | (uint32_t)call->body[2] << 16 |
                        (uint32_t)call->body[3] << 8 | call->body[4];
        if (mlen > c->w->s->opts.max_message_bytes)
            FAIL(call, PERMITD_EEXHAUSTED, "the message prefix announces %u bytes, over the "
                 "limit of %zu", (unsigned)mlen, c->w->s->opts.max_message_bytes);
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct grpc_call *call;

    (void)ud;
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (call != NULL && !call->dispatched)
        dispatch(call);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *ud)
{
    struct grpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);

    (void)error_code;
    (void)ud;
    if (call == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(session, stream_id, NULL);
    release(call, 0);
    call_unlink(call);
    if (call->dispatched && !call->answered)
        call->conn = NULL;      /* RST_STREAM: the handler's answer will end it */
    else
        call_end(call);
    return 0;
}

/* A frame went out. When it ended our side of a stream whose client is
 * still sending (an early answer: a message over the limit, a deadline
 * passed before the request was whole), RST_STREAM NO_ERROR follows, as
 * RFC 9113 section 8.1 lets a server that has sent a complete response do:
 * the client stops sending a body nobody will read, and the stream closes
 * now, not whenever the client ends it. */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    (void)ud;
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id) == 0)
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                  NGHTTP2_NO_ERROR);
    return 0;
}

static nghttp2_session_callbacks *callbacks_new(void)
{
    nghttp2_session_callbacks *cb;

    if (nghttp2_session_callbacks_new(&cb) != 0)
        return NULL;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    return cb;
}

/* ---- connections ---- */

static void mark_dirty(struct conn *c)
{
    if (c->dirty)
        return;
    c->dirty = 1;
    c->dirty_next = c->w->dirty;
    c->w->dirty = c;
    if (c->w->loop != NULL)
        loop_again(c->w->loop);
}

static int set_epollout(struct conn *c, int on)
{
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};

    if (c->epollout == on || c->fd < 0)
        return 0;
    c->epollout = on;
    return epoll_ctl(c->w->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* ---- the connection's bytes: the socket itself, or TLS over it ---- */

/* read(2)'s contract over either: > 0 bytes, 0 at the end, -1 with errno
 * (EAGAIN: nothing now). */
static ssize_t io_read(struct conn *c, void *buf, size_t n)
{
    ssize_t r;

    if (c->tls == NULL)
        return read(c->fd, buf, n);
    r = gnutls_record_recv(c->tls, buf, n);
    if (r >= 0)
        return r;
    errno = r == GNUTLS_E_AGAIN ? EAGAIN : r == GNUTLS_E_INTERRUPTED ? EINTR : EPROTO;
    return -1;
}

/* write(2)'s contract over either. GnuTLS keeps a record it could not send
 * whole and sends it at the next call, which gives the same bytes again
 * (they wait in c->out). */
static ssize_t io_write(struct conn *c, const void *buf, size_t n)
{
    ssize_t r;

    if (c->tls == NULL)
        return write(c->fd, buf, n);
    r = gnutls_record_send(c->tls, buf, n);
    if (r >= 0)
        return r;
    errno = r == GNUTLS_E_AGAIN ? EAGAIN : r == GNUTLS_E_INTERRUPTED ? EINTR : EPIPE;
    return -1;
}

/* TLS: moves the handshake on. 1 when it is over (ALPN chose h2), 0 while
 * it waits for the socket (EPOLLOUT asked for when it must write), -1 when
 * it failed (the connection closed). */
static int handshake(struct conn *c)
{
    gnutls_datum_t alpn;
    int rv;

    if (c->tls == NULL || c->handshaken)
        return 1;
    rv = gnutls_handshake(c->tls);
    if (rv == GNUTLS_E_AGAIN || rv == GNUTLS_E_INTERRUPTED) {
        set_epollout(c, gnutls_record_get_direction(c->tls) == 1);
        return 0;
    }
    if (rv < 0 || gnutls_alpn_get_selected_protocol(c->tls, &alpn) != 0 || alpn.size != 2 ||
        memcmp(alpn.data, "h2", 2) != 0) {
        conn_close(c);
        return -1;
    }
    c->handshaken = 1;
    set_epollout(c, 0);
    return 1;
}

/* Writes what nghttp2 has to send, as far as the socket takes it; the rest
 * waits in c->out for EPOLLOUT. Closes a connection nghttp2 is done with. */
static void conn_send(struct conn *c)
{
    if (handshake(c) != 1)
        return;
    for (;;) {
        const uint8_t *data;
        ssize_t n, m;

        while (c->out_off < c->out_len) {
            m = io_write(c, c->out + c->out_off, c->out_len - c->out_off);
            if (m < 0 && errno == EINTR)
                continue;
            if (m < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                set_epollout(c, 1);
                return;
            }
            if (m <= 0) {
                conn_close(c);
                return;
            }
            c->out_off += (size_t)m;
        }
        c->out_off = c->out_len = 0;
        n = nghttp2_session_mem_send(c->session, &data);
        if (n < 0) {
            conn_close(c);
            return;
        }
        if (n == 0)
            break;
        if (c->fd < 0)
            continue;           /* grpc_feed(): nobody to send to */
        m = io_write(c, data, (size_t)n);
        if (m < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            conn_close(c);
            return;
        }
        if (m < 0)
            m = 0;
        if (m < n) {
            size_t rest = (size_t)(n - m);
            if (rest > c->out_cap) {
                uint8_t *b = realloc(c->out, rest);
                if (b == NULL) {
                    conn_close(c);
                    return;
                }
                c->out = b;
                c->out_cap = rest;
            }
            memcpy(c->out, data + m, rest);
            c->out_len = rest;
        }
    }
    set_epollout(c, 0);
    if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session))
        conn_close(c);
}

static void conn_unlink_worker(struct conn *c)
{
    struct worker *w = c->w;

    if (c->prev != NULL)
        c->prev->next = c->next;
    else if (w->conns == c)
        w->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* Closes c's socket at once and frees it at the end of the pass (it may be
 * on the dirty list): its calls still pending are detached, to be freed by
 * their answers. */
static void conn_close(struct conn *c)
{
    struct grpc_call *call, *next;

    if (c->dead)
        return;
    c->dead = 1;
    for (call = c->calls; call != NULL; call = next) {
        next = call->next;
        call->prev = call->next = NULL;
        if (call->dispatched && !call->answered)
            call->conn = NULL;
        else
            call_end(call);
    }
    c->calls = NULL;
    nghttp2_session_del(c->session);
    c->session = NULL;
    if (c->tls != NULL)
        gnutls_deinit(c->tls);
    c->tls = NULL;
    if (c->fd >= 0) {
        epoll_ctl(c->w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        atomic_fetch_sub(&c->w->s->nconns, 1);
    }
    if (c->per_ip)
        iplimit_put(c->w->s->perip, (const struct sockaddr *)&c->peer);
    c->per_ip = 0;
    c->fd = -1;
    conn_unlink_worker(c);
    mark_dirty(c);              /* freed by flush */
}

static void conn_free(struct conn *c)
{
    free(c->out);
    free(c);
}

/* A new connection's session, with its SETTINGS queued. */
static struct conn *conn_new(struct worker *w, int fd)
{
    nghttp2_session_callbacks *cb = callbacks_new();
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, (uint32_t)w->s->opts.max_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384},
    };
    struct conn *c = calloc(1, sizeof(*c));
    nghttp2_option *opt = NULL;

    if (c == NULL || cb == NULL || nghttp2_option_new(&opt) != 0)
        goto fail;
    c->w = w;
    c->fd = fd;
    c->active_us = clock_now_us();
    /* Streams over max_streams are refused (REFUSED_STREAM) even before
     * the client has acknowledged our SETTINGS: nghttp2 holds incoming
     * streams to the value it has sent. The window is ours to give back
     * (hold(), release()). */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    if (nghttp2_session_server_new2(&c->session, cb, c, opt) != 0)
        goto fail;
    if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, 2) != 0)
        goto fail;
    if (w->s->cred != NULL && fd >= 0) {
        /* gRPC over TLS is HTTP/2 chosen by ALPN: a client that offers
         * ALPN without h2 fails the handshake (GNUTLS_ALPN_MANDATORY). */
        gnutls_datum_t h2 = {(unsigned char *)"h2", 2};
        if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NONBLOCK) != GNUTLS_E_SUCCESS ||
            gnutls_priority_set(c->tls, w->s->prio) != GNUTLS_E_SUCCESS ||
            gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, w->s->cred) !=
                GNUTLS_E_SUCCESS ||
            gnutls_alpn_set_protocols(c->tls, &h2, 1, GNUTLS_ALPN_MANDATORY) != GNUTLS_E_SUCCESS)
            goto fail;
        gnutls_transport_set_int(c->tls, fd);
    }
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    c->next = w->conns;
    if (w->conns != NULL)
        w->conns->prev = c;
    w->conns = c;
    return c;
fail:
    if (c != NULL && c->session != NULL)
        nghttp2_session_del(c->session);
    if (c != NULL && c->tls != NULL)
        gnutls_deinit(c->tls);
    free(c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    return NULL;
}

/* Bytes from the client: nghttp2 parses them (and calls dispatch()). */
static void conn_read(struct conn *c)
{
    uint8_t buf[READ_CHUNK];

    if (handshake(c) != 1)
        return;
    for (int i = 0; i < READS_PER_EVENT && !c->dead; i++) {
        ssize_t n = io_read(c, buf, sizeof(buf)), rv;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            conn_close(c);
            return;
        }
        rv = nghttp2_session_mem_recv(c->session, buf, (size_t)n);
        if (rv < 0) {
            /* A frame that breaks HTTP/2: nghttp2 queued a GOAWAY naming
             * the error; send it, then close. */
            nghttp2_session_terminate_session(c->session, NGHTTP2_PROTOCOL_ERROR);
            break;
        }
        /* TLS may hold whole records already read off the socket, for
         * which epoll will not wake us: read on while it does. */
        if ((size_t)n < sizeof(buf) && (c->tls == NULL || gnutls_record_check_pending(c->tls) == 0))
            break;
    }
    if (!c->dead)
        mark_dirty(c);
}

/* A connection refused at accept: counted under its reason, and logged
 * when no refusal was logged in the last second (with the count so far). */
static void refused(struct grpc_server *s, const struct sockaddr_storage *peer, int per_ip)
{
    int64_t now = clock_now_us(), last = atomic_load(&s->refusal_logged_us);
    uint64_t full = per_ip ? atomic_load(&s->refused_full)
                           : atomic_fetch_add(&s->refused_full, 1) + 1;
    uint64_t ip = per_ip ? atomic_fetch_add(&s->refused_per_ip, 1) + 1
                         : atomic_load(&s->refused_per_ip);
    char addr[INET6_ADDRSTRLEN] = "?";

    if (now - last < REFUSAL_LOG_US ||
        !atomic_compare_exchange_strong(&s->refusal_logged_us, &last, now))
        return;
    if (peer->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)peer)->sin6_addr, addr, sizeof(addr));
    else if (peer->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)peer)->sin_addr, addr, sizeof(addr));
    if (per_ip)
        log_msg(LOG_LEVEL_WARN, "connection refused: its address has --max-connections-per-ip "
                "open", "listener=%s addr=%s limit=%d refused_per_ip_total=%llu", s->opts.name,
                addr, s->opts.max_connections_per_ip, (unsigned long long)ip);
    else
        log_msg(LOG_LEVEL_WARN, "connection refused: --max-connections open",
                "listener=%s addr=%s limit=%d refused_full_total=%llu", s->opts.name, addr,
                s->opts.max_connections, (unsigned long long)full);
}

/* 1 when one of c's calls is with the handler: the connection is at work,
 * whatever its client does or does not send. */
static int conn_busy(const struct conn *c)
{
    for (const struct grpc_call *call = c->calls; call != NULL; call = call->next)
        if (call->dispatched && !call->answered)
            return 1;
    return 0;
}

/* What shed() may close: 2, a connection without a call that has served
 * one or is a second old (a new one is likely a caller a moment from
 * sending, as http.c spares a young head); 1, one whose calls make no
 * progress (none whole nor answered for SHED_AGE_US, none opened in that
 * time); 0, any other, and never one with a call at the handler. */
static int shed_rank(const struct conn *c, int64_t now)
{
    if (c->dead || conn_busy(c))
        return 0;
    if (c->calls == NULL)
        return c->served || now - c->active_us >= SHED_AGE_US ? 2 : 0;
    return now - c->active_us >= SHED_AGE_US && now - c->opened_us >= SHED_AGE_US;
}

/* The listener is full: closes one of w's connections to make room for
 * the next caller, as http.c's conn_shed() does: of the highest
 * shed_rank(), the one without progress the longest. 1 when one was
 * closed. */
static int shed(struct worker *w, int64_t now)
{
    struct conn *best = NULL;
    int best_rank = 0;

    for (struct conn *c = w->conns; c != NULL; c = c->next) {
        int rank = shed_rank(c, now);
        if (rank > best_rank || (rank > 0 && rank == best_rank && c->active_us < best->active_us)) {
            best = c;
            best_rank = rank;
        }
    }
    if (best == NULL)
        return 0;
    atomic_fetch_add_explicit(best_rank == 2 ? &w->s->shed_idle : &w->s->shed_stalled, 1,
                              memory_order_relaxed);
    /* A GOAWAY if the socket takes it now; the slot is needed at once. */
    nghttp2_session_terminate_session(best->session, NGHTTP2_NO_ERROR);
    conn_send(best);
    conn_close(best);
    return 1;
}

/* A connection slot for an accepted one: from the count, else by shedding
 * one of w's connections. 1 when taken. */
static int slot_take(struct worker *w)
{
    struct grpc_server *s = w->s;

    if (atomic_fetch_add(&s->nconns, 1) < (unsigned)s->opts.max_connections)
        return 1;
    atomic_fetch_sub(&s->nconns, 1);
    if (!shed(w, clock_now_us()))
        return 0;
    if (atomic_fetch_add(&s->nconns, 1) < (unsigned)s->opts.max_connections)
        return 1;
    atomic_fetch_sub(&s->nconns, 1);
    return 0;
}

/* Takes the connections waiting. One from an address with
 * --max-connections-per-ip open is closed at once; one over
 * --max-connections takes the slot of a connection shed(), or is closed
 * at once when there is none. */
static void accept_all(struct worker *w)
{
    struct grpc_server *s = w->s;

    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage peer;
        socklen_t peerlen = sizeof(peer);
        int fd = accept4(s->listen_fd, (struct sockaddr *)&peer, &peerlen,
                         SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1, rc;
        struct epoll_event ev;
        struct conn *c;

        if (fd < 0)
            return;
        if (atomic_load(&s->stopping)) {
            close(fd);
            continue;
        }
        /* The address's count first: a connection refused for it sheds
         * nobody. */
        if ((rc = iplimit_take(s->perip, (struct sockaddr *)&peer)) != PERMITD_OK) {
            close(fd);          /* --max-connections-per-ip, or out of memory */
            if (rc == PERMITD_EEXHAUSTED)
                refused(s, &peer, 1);
            continue;
        }
        if (!slot_take(w)) {
            iplimit_put(s->perip, (struct sockaddr *)&peer);
            close(fd);          /* full: --max-connections, nothing to shed */
            refused(s, &peer, 0);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if ((c = conn_new(w, fd)) == NULL) {
            atomic_fetch_sub(&s->nconns, 1);
            iplimit_put(s->perip, (struct sockaddr *)&peer);
            close(fd);
            continue;
        }
        c->peer = peer;
        c->per_ip = 1;          /* given back by conn_close() */
        ev.events = EPOLLIN;
        ev.data.ptr = c;
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            conn_close(c);
            continue;
        }
        mark_dirty(c);          /* our SETTINGS */
    }
}

/* Calls whose request is not whole by their deadline (grpc-timeout's, or
 * --grpc-request-timeout after their HEADERS, whichever comes first) are
 * answered deadline_exceeded, their stream reset after it and their bytes
 * let go (those handed over are the handler's: the limiter answers at the
 * deadline). A connection without progress for the idle timeout, and no
 * call with the handler, is told to go (GOAWAY; calls whose requests are
 * still coming may finish for CLOSING_US), then closed. When the listener
 * is full, one connection of the worker is shed, so the next caller finds
 * room (its accept may have landed on another worker). */
static void sweep(struct worker *w, int64_t now)
{
    int64_t idle = (int64_t)w->s->opts.idle_timeout_s * 1000000, due = now + SWEEP_US;
    struct conn *c, *next;

    for (c = w->conns; c != NULL; c = next) {
        next = c->next;
        for (struct grpc_call *call = c->calls; call != NULL; call = call->next) {
            if (call->dispatched || call->answered)
                continue;
            if (call->deadline_us <= now) {
                FAIL(call, PERMITD_EDEADLINE, "grpc-timeout passed before the request was whole");
            } else if (call->request_due_us <= now) {
                FAIL(call, PERMITD_EDEADLINE, "the request was not whole %d s after its headers "
                     "(--grpc-request-timeout)", w->s->opts.request_timeout_s);
            } else {
                if (call->deadline_us < due)
                    due = call->deadline_us;
                if (call->request_due_us < due)
                    due = call->request_due_us;
            }
        }
        if (conn_busy(c))
            continue;
        if (c->closing_us != 0 && now - c->closing_us >= CLOSING_US) {
            conn_close(c);
        } else if (c->closing_us == 0 && idle > 0 && now - c->active_us > idle) {
            c->closing_us = now;
            nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                                  nghttp2_session_get_last_proc_stream_id(c->session),
                                  NGHTTP2_NO_ERROR, NULL, 0);
            mark_dirty(c);
        }
    }
    if (atomic_load(&w->s->nconns) >= (unsigned)w->s->opts.max_connections)
        shed(w, now);
    w->next_due = due;
}

/* ---- the worker's loop source ---- */

static void src_want(void *ud, struct loop_want *want)
{
    struct worker *w = ud;

    want->fd = w->epfd;
    want->events = EPOLLIN;
    want->at_us = w->next_due;
    want->generation = 1;
}

static void src_ready(void *ud, uint32_t revents)
{
    struct worker *w = ud;
    struct epoll_event evs[64];
    int64_t now;
    int n;

    if (revents != 0) {
        n = epoll_wait(w->epfd, evs, 64, 0);
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (c == NULL) {
                accept_all(w);
                continue;
            }
            if (c->dead)
                continue;
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                conn_read(c);
            if (!c->dead && (evs[i].events & EPOLLOUT))
                mark_dirty(c);
        }
    }
    now = clock_now_us();
    if (now >= w->next_due)
        sweep(w, now);
}

static void src_flush(void *ud, int woke)
{
    struct worker *w = ud;
    struct conn *c;

    (void)woke;
    while ((c = w->dirty) != NULL) {
        w->dirty = c->dirty_next;
        c->dirty = 0;
        if (!c->dead)
            conn_send(c);
        if (c->dead && !c->dirty)
            conn_free(c);
    }
}

static void close_all(struct worker *w)
{
    while (w->conns != NULL)
        conn_close(w->conns);
    src_flush(w, 0);
}

static void src_close(void *ud)
{
    close_all(ud);
}

/* Calls handed to the handler and not answered yet, over the worker. */
static int pending_calls(const struct worker *w)
{
    for (const struct conn *c = w->conns; c != NULL; c = c->next)
        for (const struct grpc_call *call = c->calls; call != NULL; call = call->next)
            if (!call->answered)
                return 1;
    return 0;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct grpc_server *s = w->s;

    while (!atomic_load(&s->stopping))
        loop_turn(w->loop);
    /* Drain: no new connections, GOAWAY to each, calls in flight finish. */
    epoll_ctl(w->epfd, EPOLL_CTL_DEL, s->listen_fd, NULL);
    for (struct conn *c = w->conns; c != NULL; c = c->next) {
        nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->session),
                              NGHTTP2_NO_ERROR, NULL, 0);
        mark_dirty(c);
    }
    src_flush(w, 0);
    w->drain_until = clock_now_us() + (int64_t)s->grace_ms * 1000;
    while (pending_calls(w) && clock_now_us() < w->drain_until) {
        if (w->next_due > w->drain_until)
            w->next_due = w->drain_until;
        loop_turn(w->loop);
    }
    close_all(w);
    loop_close(w->loop);
    return NULL;
}

/* ---- the listening socket ---- */

static int open_listener(const struct grpc_options *o, int *port_out, struct permitd_error *err)
{
    struct addrinfo hints = {0}, *res = NULL;
    char port[16];
    const char *host = o->host != NULL && o->host[0] != '\0' ? o->host : NULL;
    int fd = -1, one = 1, rc;

    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(port, sizeof(port), "%d", o->port);
    if ((rc = getaddrinfo(host, port, &hints, &res)) != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "%s listener: cannot resolve \"%s\": %s",
                                 o->name, host ? host : "", gai_strerror(rc));
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        rc = errno;
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return permitd_error_set(err, PERMITD_EUNAVAILABLE, "%s listener: cannot listen on "
                                 "%s:%d: %s", o->name, host ? host : "*", o->port, strerror(rc));
    }
    freeaddrinfo(res);
    {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        getsockname(fd, (struct sockaddr *)&ss, &sl);
        *port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    }
    return fd;
}

/* The certificate, key and priorities of a TLS listener, from PEM text. */
static int tls_setup(struct grpc_server *s, struct permitd_error *err)
{
    gnutls_datum_t cert = {(unsigned char *)s->opts.tls_cert_pem,
                           (unsigned)strlen(s->opts.tls_cert_pem)};
    gnutls_datum_t key = {(unsigned char *)s->opts.tls_key_pem,
                          (unsigned)strlen(s->opts.tls_key_pem)};
    const char *where = NULL;
    int rv;

    if ((rv = gnutls_certificate_allocate_credentials(&s->cred)) != GNUTLS_E_SUCCESS)
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s listener: TLS: %s", s->opts.name,
                                 gnutls_strerror(rv));
    rv = gnutls_certificate_set_x509_key_mem(s->cred, &cert, &key, GNUTLS_X509_FMT_PEM);
    if (rv < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "%s listener: the certificate or key "
                                 "(--grpc-tls-cert, --grpc-tls-key) was refused: %s",
                                 s->opts.name, gnutls_strerror(rv));
    rv = s->opts.tls_priorities != NULL && s->opts.tls_priorities[0] != '\0'
             ? gnutls_priority_init(&s->prio, s->opts.tls_priorities, &where)
             : gnutls_priority_init(&s->prio, NULL, NULL);
    if (rv != GNUTLS_E_SUCCESS)
        return permitd_error_set(err, PERMITD_EINVAL, "%s listener: TLS priorities refused at "
                                 "\"%.60s\": %s", s->opts.name, where ? where : "",
                                 gnutls_strerror(rv));
    return PERMITD_OK;
}

int grpc_server_start(const struct grpc_options *opts, grpc_handler_fn fn, void *ud,
                      struct grpc_server **out, struct permitd_error *err)
{
    int n = opts->threads > 0 ? opts->threads : 1, rc;
    struct grpc_server *s = calloc(1, sizeof(*s) + (size_t)n * sizeof(struct worker));

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->opts = *opts;
    s->listen_fd = -1;
    s->nworkers = n;
    for (int i = 0; i < n; i++)
        s->workers[i].epfd = -1;
    if ((rc = iplimit_new(opts->max_connections_per_ip, &s->perip, err)) != PERMITD_OK) {
        grpc_server_stop(s, 0);
        return rc;
    }
    if (opts->tls_cert_pem != NULL && (rc = tls_setup(s, err)) != PERMITD_OK) {
        grpc_server_stop(s, 0);
        return rc;
    }
    s->fn = fn;
    s->ud = ud;
    if ((s->listen_fd = open_listener(opts, &s->port, err)) < 0) {
        rc = s->listen_fd;
        s->listen_fd = -1;
        grpc_server_stop(s, 0);
        return rc;
    }
    for (int i = 0; i < n; i++) {
        struct worker *w = &s->workers[i];
        struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = NULL};
        struct loop_source src = {w, src_want, src_ready, src_flush, src_close};
        w->s = s;
        w->next_due = clock_now_us() + SWEEP_US;
        if ((w->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
            epoll_ctl(w->epfd, EPOLL_CTL_ADD, s->listen_fd, &ev) != 0) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "%s listener: epoll: %s", opts->name,
                                   strerror(errno));
            goto fail;
        }
        if ((rc = loop_new(&w->loop, err)) != PERMITD_OK ||
            (rc = loop_attach(w->loop, &src, err)) != PERMITD_OK)
            goto fail;
        if (opts->worker_open != NULL) {
            if ((rc = opts->worker_open(ud, w->loop, &w->ctx, err)) != PERMITD_OK)
                goto fail;
            w->opened = 1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]) != 0) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "%s listener: cannot start a "
                                   "thread", opts->name);
            goto fail;
        }
        s->workers[i].started = 1;
    }
    *out = s;
    return PERMITD_OK;
fail:
    grpc_server_stop(s, 0);
    return rc;
}

int grpc_server_port(const struct grpc_server *s)
{
    return s->port;
}

unsigned grpc_server_connections(const struct grpc_server *s)
{
    return atomic_load(&((struct grpc_server *)s)->nconns);
}

void grpc_server_load(const struct grpc_server *s, struct grpc_server_load *out)
{
    struct grpc_server *m = (struct grpc_server *)s;    /* atomics only */

    memset(out, 0, sizeof(*out));
    out->open = atomic_load(&m->nconns);
    out->limit = (unsigned)s->opts.max_connections;
    out->per_ip_limit = (unsigned)s->opts.max_connections_per_ip;
    out->refused_full = atomic_load(&m->refused_full);
    out->refused_per_ip = atomic_load(&m->refused_per_ip);
    out->shed_idle = atomic_load(&m->shed_idle);
    out->shed_stalled = atomic_load(&m->shed_stalled);
}

void grpc_server_stop(struct grpc_server *s, int grace_ms)
{
    if (s == NULL)
        return;
    s->grace_ms = grace_ms;
    atomic_store(&s->stopping, 1);
    for (int i = 0; i < s->nworkers; i++)
        if (s->workers[i].started)
            loop_wake(s->workers[i].loop);
    for (int i = 0; i < s->nworkers; i++) {
        struct worker *w = &s->workers[i];
        if (w->started)
            pthread_join(w->thread, NULL);
        else if (w->loop != NULL)
            loop_close(w->loop);
        if (w->opened && s->opts.worker_close != NULL)
            s->opts.worker_close(s->ud, w->ctx);  /* may answer detached calls */
        spare_free(w);
        loop_free(w->loop);
        if (w->epfd >= 0)
            close(w->epfd);
    }
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->prio != NULL)
        gnutls_priority_deinit(s->prio);
    if (s->cred != NULL)
        gnutls_certificate_free_credentials(s->cred);
    iplimit_free(s->perip);     /* after the workers: their closes put back into it */
    free(s);
}

/* ---- the fuzzer's door ---- */

struct feed_count {
    grpc_handler_fn fn;
    void *ud;
    int calls;
};

static void feed_handler(void *ud, struct grpc_call *call)
{
    struct feed_count *fc = ud;

    fc->calls++;
    fc->fn(fc->ud, call);
}

int grpc_feed(const struct grpc_options *opts, grpc_handler_fn fn, void *ud,
              const uint8_t *data, size_t len)
{
    struct grpc_server s = {0};
    struct worker w = {0};
    struct feed_count fc = {fn, ud, 0};
    struct conn *c;

    s.opts = *opts;
    s.fn = feed_handler;
    s.ud = &fc;
    s.listen_fd = -1;
    w.s = &s;
    w.epfd = -1;
    w.next_due = INT64_MAX;
    if ((c = conn_new(&w, -1)) == NULL)
        return 0;
    /* c leaves w.conns when it closes, and the flush may free it then. */
    while (len > 0 && w.conns == c) {
        size_t n = len < 4096 ? len : 4096;
        if (nghttp2_session_mem_recv(c->session, data, n) < 0)
            break;
        data += n;
        len -= n;
        mark_dirty(c);
        src_flush(&w, 0);
    }
    close_all(&w);
    spare_free(&w);
    return fc.calls;
}
