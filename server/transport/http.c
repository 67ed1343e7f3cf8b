/*
 * http.c - libmicrohttpd listener, worker event loops, body buffering, limits.
 *
 * `threads` worker threads listen on one port, each on a socket of its
 * own (SO_REUSEPORT: the kernel spreads connections between them). Each
 * turns its own event loop (loop.c): its first source is one
 * libmicrohttpd daemon in external-epoll mode (the connections it
 * accepted); the sources after it are what the handler's owner made for
 * that worker with that loop (http_options.worker_open: api.c's limiter
 * queue, with its pipelined Redis connection).
 * Handlers run on the worker thread. A handler may answer at once, block
 * briefly (one Redis round trip on the thread's own connection), or defer
 * (http_request_defer()): a source answers it later from the same loop, so
 * a deferred answer costs no thread switch and no lock.
 *
 * A deferred request is not suspended: libmicrohttpd (0.9.75, external
 * epoll) takes a suspended connection out of its epoll set and puts it back
 * once resumed, two epoll_ctl calls per request (a fifth of permitd's CPU
 * per Acquire under load). Left alone instead, the connection waits in
 * libmicrohttpd's ready list and the handler is asked again on each run
 * (on_request() says "not yet" until the answer is there); the price is
 * that libmicrohttpd then always asks for a zero timeout, which the loop
 * heeds only when its last run moved something (see worker_want()).
 *
 * The limits that span connections are kept across the workers: the
 * connection limit is split between them (as libmicrohttpd's own thread
 * pool does) and the per-address count is shared (core/iplimit.c, asked
 * by apc()).
 *
 * Bodies are buffered per request up to max_body_bytes. A Content-Length
 * above the limit is refused before any byte of the body is read; a
 * chunked body that grows past it is dropped as it arrives (memory stays
 * bounded) and the handler is told, so it can answer with a clear error.
 *
 * Connection deadlines (http_conn.c). libmicrohttpd
 * 0.9.75 has only an idle timeout, reset by every byte: a client sending one
 * header line every few seconds, or a crowd of silent sockets, held every
 * slot for as long as it liked. Each worker keeps its connections in lists
 * by phase (awaiting a request head, busy with a request, idle between
 * requests), each in the order it entered the phase, so the oldest is
 * always first: a timer of the loop closes those past their deadline, and
 * when the worker's slots are all taken the oldest idle keep-alive
 * connection is closed first to make room. The records are preallocated
 * per worker and moved between lists in O(1): no allocation or syscall
 * per request.
 *
 * Framing (framing.c, http_recv.c): on a plain-HTTP listener every byte
 * libmicrohttpd reads goes through framing_read() first, so a request
 * that could be read two ways (two Content-Lengths, Content-Length with
 * Transfer-Encoding: request smuggling behind a proxy that reads the
 * other), is malformed (a length that is not a number, a bad chunk), or
 * passes a limit (a head over max_header_bytes, a body, declared or
 * chunked, over max_body_bytes) is answered by http.c with the listener's
 * own error body, once, and its connection is closed; libmicrohttpd never
 * sees it, and so never answers with a page of its own (0.9.75 sends some
 * twice). Bytes past the limit are not read. With TLS the same holds of
 * the bytes GnuTLS decrypts for libmicrohttpd (http_recv_tls()), and the
 * refusal is sent on the connection's TLS session.
 *
 * TLS is libmicrohttpd's (GnuTLS): the versions and suites offered are a
 * GnuTLS priority string (config.h's default: TLS 1.2 and 1.3, forward
 * secret AEAD suites only), checked once at start-up by
 * http_tls_check_priorities() so a bad one is refused with GnuTLS's own
 * words instead of a bare failure to start.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <microhttpd.h>

#include "core/arena.h"
#include "core/clock.h"
#include "core/iplimit.h"
#include "transport/framing.h"
#include "transport/http.h"
#include "transport/http_conn.h"
#include "transport/http_recv.h"
#include "core/log.h"
#include "core/loop.h"

#define WAITING_POLL_MS 10      /* see worker_want() */
#define HTTP_REFUSAL_LOG_US 1000000 /* per-address refusals are logged at most this often */

_Thread_local struct http_worker *http_current_worker;


#define REQUEST_SPARE_MAX 256   /* finished requests a worker keeps for reuse */
#define REQUEST_STORE 1024      /* http_request_alloc()'s room inside a request */

/* What http_request_alloc() handed out beyond a request's store[]. */
struct store_block {
    struct store_block *next;
    _Alignas(max_align_t) unsigned char data[];
};

/* One request in progress; MHD's con_cls. Requests are recycled by the
 * worker that served them: on the hot path neither the request, nor the
 * record its deferred work keeps (api.c), nor a binary reply's body costs
 * an allocation (http_request_alloc()). */
struct http_request {
    struct MHD_Connection *conn;
    struct http_conn *rec;      /* its connection's record (NULL: untracked); valid until
                                 * on_completed() */
    int64_t started_us;
    const char *method;
    const char *path;
    char *body;                 /* small[] or malloc'd */
    size_t len, cap;
    int too_large;
    int refused;                /* answered by http.c itself: the rest is not read */
    /* Deferred answers (http_request_defer): the work runs elsewhere and
     * http_request_resume() hands the answer back. */
    int answered;               /* 1 once resume stored `answer` */
    int orphaned;               /* the client went while the answer was awaited */
    struct http_worker *deferred; /* counted in this worker's deferred */
    struct http_worker *worker; /* whose spare list takes it back (NULL: none) */
    struct http_request *next_spare;
    char who[LOG_WHO_MAX];      /* " app=... key=..." for the access log, or "" */
    struct arena storage;       /* over store[] (http_request_alloc()) */
    struct store_block *blocks; /* what did not fit in store[] */
    /* http_request_detach(): the headers and query arguments, copied into
     * storage, which the accessors then read instead of libmicrohttpd's */
    struct detached *detached;
    /* Not cleared when a request is reused: */
    struct http_response answer;        /* read only once `answered` */
    char small[512];            /* most request bodies fit: no second allocation */
    _Alignas(max_align_t) unsigned char store[REQUEST_STORE];
};

static void drop_body(struct http_request *req)
{
    if (req->body != req->small)
        free(req->body);
    req->body = NULL;
    req->len = req->cap = 0;
}

static struct http_request *request_new(void)
{
    struct http_worker *w = http_current_worker;
    struct http_request *req = w != NULL ? w->spare : NULL;

    if (req != NULL) {
        w->spare = req->next_spare;
        w->nspare--;
    } else if ((req = malloc(sizeof(*req))) == NULL) {
        return NULL;
    }
    memset(req, 0, offsetof(struct http_request, answer));
    arena_init(&req->storage, req->store, sizeof(req->store));
    req->worker = w;
    return req;
}

/* Ends req: what it holds is freed, and it goes back to its worker's
 * spare list when this is that worker's thread (libmicrohttpd stopping
 * ends the last ones from the main thread). */
static void request_end(struct http_request *req)
{
    struct http_worker *w = req->worker;

    drop_body(req);
    while (req->blocks != NULL) {
        struct store_block *b = req->blocks;
        req->blocks = b->next;
        free(b);
    }
    if (w == NULL || w != http_current_worker || w->nspare >= REQUEST_SPARE_MAX) {
        free(req);
        return;
    }
    req->next_spare = w->spare;
    w->spare = req;
    w->nspare++;
}

/* Only [A-Za-z0-9._-] reach the log line; anything else is '?'. */
void http_request_log_who(const struct http_request *creq, const char *app, const char *key)
{
    struct http_request *req = (struct http_request *)creq;

    log_who(req->who, app, key);
}

void *http_request_alloc(const struct http_request *creq, size_t size)
{
    struct http_request *req = (struct http_request *)creq;
    struct store_block *b;
    void *p;

    if ((p = arena_alloc(&req->storage, size)) != NULL)
        return p;
    if (size > SIZE_MAX - sizeof(*b) || (b = malloc(sizeof(*b) + size)) == NULL)
        return NULL;
    b->next = req->blocks;
    req->blocks = b;
    return b->data;
}

const char *http_request_method(const struct http_request *req) { return req->method; }
const char *http_request_path(const struct http_request *req) { return req->path; }

/* What http_request_detach() copied (in the request's storage). */
struct detached {
    size_t n;
    struct {
        int header;             /* else a query argument */
        const char *key, *value;
    } *kv;
    int addr_ok;
    char addr[INET6_ADDRSTRLEN];
};

static const char *detached_value(const struct detached *d, int header, const char *name)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->kv[i].header == header &&
            (header ? strcasecmp(d->kv[i].key, name) : strcmp(d->kv[i].key, name)) == 0)
            return d->kv[i].value;
    return NULL;
}

const char *http_request_header(const struct http_request *req, const char *name)
{
    if (req->detached != NULL)
        return detached_value(req->detached, 1, name);
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

/* What header_all() gathers: the lines of one header, joined. */
struct joining {
    const char *name;
    char *out;                  /* NULL: measuring */
    size_t len;
};

static void join(struct joining *j, const char *value)
{
    size_t n = strlen(value);

    if (j->out != NULL) {
        if (j->len > 0)
            memcpy(j->out + j->len, ", ", 2);
        memcpy(j->out + j->len + (j->len > 0 ? 2 : 0), value, n + 1);
    }
    j->len += n + (j->len > 0 ? 2 : 0);
}

static enum MHD_Result join_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    struct joining *j = cls;

    (void)kind;
    if (key != NULL && value != NULL && strcasecmp(key, j->name) == 0)
        join(j, value);
    return MHD_YES;
}

const char *http_request_header_all(const struct http_request *creq, const char *name)
{
    struct http_request *req = (struct http_request *)creq;
    struct joining j = {name, NULL, 0};
    const struct detached *d = req->detached;

    for (int pass = 0; pass < 2; pass++) {
        if (d != NULL) {
            for (size_t i = 0; i < d->n; i++)
                if (d->kv[i].header && d->kv[i].value != NULL &&
                    strcasecmp(d->kv[i].key, name) == 0)
                    join(&j, d->kv[i].value);
        } else {
            MHD_get_connection_values(req->conn, MHD_HEADER_KIND, join_value, &j);
        }
        if (pass == 1 || (j.len == 0 && http_request_header(req, name) == NULL))
            break;
        if ((j.out = http_request_alloc(req, j.len + 1)) == NULL)
            return NULL;
        j.out[0] = '\0';
        j.len = 0;
    }
    return j.out;
}

static char *storage_strdup(struct http_request *req, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = http_request_alloc(req, n);

    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

struct copying {
    struct http_request *req;
    struct detached *d;
    size_t room;
    int failed;
};

static enum MHD_Result copy_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    struct copying *c = cls;
    struct detached *d = c->d;

    if (d->n == c->room || key == NULL)
        return MHD_YES;
    d->kv[d->n].header = kind == MHD_HEADER_KIND;
    d->kv[d->n].key = storage_strdup(c->req, key);
    d->kv[d->n].value = value != NULL ? storage_strdup(c->req, value) : NULL;
    if (d->kv[d->n].key == NULL || (value != NULL && d->kv[d->n].value == NULL))
        c->failed = 1;
    else
        d->n++;
    return MHD_YES;
}

int http_request_detach(const struct http_request *creq)
{
    struct http_request *req = (struct http_request *)creq;
    enum MHD_ValueKind kinds = MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND;
    struct copying c = {req, NULL, 0, 0};
    int n;

    if (req->detached != NULL)
        return 0;
    if ((c.d = http_request_alloc(req, sizeof(*c.d))) == NULL)
        return -1;
    memset(c.d, 0, sizeof(*c.d));
    n = MHD_get_connection_values(req->conn, kinds, NULL, NULL);
    c.room = n > 0 ? (size_t)n : 0;
    if (c.room > 0 && (c.d->kv = http_request_alloc(req, c.room * sizeof(*c.d->kv))) == NULL)
        return -1;
    MHD_get_connection_values(req->conn, kinds, copy_value, &c);
    c.d->addr_ok = http_request_client_addr(req, c.d->addr, sizeof(c.d->addr)) == 0;
    if (c.failed || (req->method = storage_strdup(req, req->method)) == NULL ||
        (req->path = storage_strdup(req, req->path)) == NULL)
        return -1;
    req->detached = c.d;
    return 0;
}

int http_request_client_addr(const struct http_request *req, char *buf, size_t len)
{
    if (req->detached != NULL) {
        if (!req->detached->addr_ok)
            return -1;
        snprintf(buf, len, "%s", req->detached->addr);
        return 0;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;
    const void *a;

    if (sa == NULL)
        return -1;
    if (sa->sa_family == AF_INET6)
        a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    else if (sa->sa_family == AF_INET)
        a = &((const struct sockaddr_in *)sa)->sin_addr;
    else
        return -1;
    return inet_ntop(sa->sa_family, a, buf, (socklen_t)len) != NULL ? 0 : -1;
}

const char *http_request_query(const struct http_request *req, const char *name)
{
    if (req->detached != NULL)
        return detached_value(req->detached, 0, name);
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *http_request_body(const struct http_request *req, size_t *len)
{
    *len = req->len;
    return req->body != NULL ? req->body : "";
}

int http_request_body_too_large(const struct http_request *req)
{
    return req->too_large;
}

int http_response_header_set(struct http_response *resp, const char *name, const char *value,
                             size_t len)
{
    char *to;

    if (resp->nheaders >= HTTP_MAX_HEADERS)
        return -1;
    to = resp->headers[resp->nheaders].value;
    if (len > sizeof(resp->headers[0].value) - 1)
        len = sizeof(resp->headers[0].value) - 1;
    memcpy(to, value, len);
    to[len] = '\0';
    resp->headers[resp->nheaders++].name = name;
    return 0;
}

int http_response_header(struct http_response *resp, const char *name, const char *fmt, ...)
{
    va_list ap;

    if (resp->nheaders >= HTTP_MAX_HEADERS)
        return -1;
    resp->headers[resp->nheaders].name = name;
    va_start(ap, fmt);
    vsnprintf(resp->headers[resp->nheaders].value, sizeof(resp->headers[0].value), fmt, ap);
    va_end(ap);
    resp->nheaders++;
    return 0;
}

/* Appends upload data, or drops it once the body is over the limit. */
static void append(struct http_request *req, const char *data, size_t n, size_t max)
{
    if (req->too_large)
        return;
    if (req->len + n > max) {
        req->too_large = 1;
        drop_body(req);
        return;
    }
    if (req->body == NULL) {
        req->body = req->small;
        req->cap = sizeof(req->small);
    }
    if (req->len + n > req->cap) {
        size_t cap = req->cap * 2;
        char *b;
        while (cap < req->len + n)
            cap *= 2;
        if (cap > max)
            cap = max;
        b = req->body == req->small ? malloc(cap) : realloc(req->body, cap);
        if (b == NULL) {
            req->too_large = 1;     /* treated like an oversized body */
            drop_body(req);
            return;
        }
        if (req->body == req->small)
            memcpy(b, req->small, req->len);
        req->body = b;
        req->cap = cap;
    }
    memcpy(req->body + req->len, data, n);
    req->len += n;
}

/* The Date header of this second (RFC 9110's IMF-fixdate), made once a
 * second per thread. libmicrohttpd makes its own for a response without
 * one, every time, through gmtime_r(), which takes glibc's time-zone lock:
 * 3-5 % of a leased Acquire's CPU. */
static const char *date_now(void)
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    static _Thread_local time_t made = -1;
    static _Thread_local char date[32];
    time_t now = time(NULL);
    struct tm tm;

    if (now != made && gmtime_r(&now, &tm) != NULL) {
        snprintf(date, sizeof(date), "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7],
                 tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                 tm.tm_sec);
        made = now;
    }
    return date;
}

static enum MHD_Result send_response(struct MHD_Connection *conn,
                                     const struct http_response *resp)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    if (resp->body_owned)
        r = MHD_create_response_from_buffer(resp->body_len, resp->body, MHD_RESPMEM_MUST_FREE);
    else
        r = MHD_create_response_from_buffer(resp->body_len, resp->body, MHD_RESPMEM_PERSISTENT);
    if (r == NULL) {
        if (resp->body_owned)
            free(resp->body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_DATE, date_now());
    if (resp->content_type != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, resp->content_type);
    for (int i = 0; i < resp->nheaders; i++)
        MHD_add_response_header(r, resp->headers[i].name, resp->headers[i].value);
    ret = MHD_queue_response(conn, (unsigned int)resp->status, r);
    MHD_destroy_response(r);
    return ret;
}

void http_request_defer(const struct http_request *creq)
{
    struct http_request *req = (struct http_request *)creq;

    assert(req->deferred == NULL && req->worker == http_current_worker);
    req->deferred = http_current_worker;
    req->deferred->deferred++;
    req->deferred->waiting++;
}

void http_response_init(struct http_response *resp)
{
    resp->status = 200;
    resp->content_type = NULL;
    resp->body = NULL;
    resp->body_len = 0;
    resp->body_owned = 0;
    resp->nheaders = 0;
}

void http_request_resume(const struct http_request *creq, const struct http_response *resp)
{
    struct http_request *req = (struct http_request *)creq;
    struct http_worker *w = req->deferred;

    assert(w == http_current_worker);
    w->waiting--;
    if (req->orphaned) {
        /* on_completed() left req to us: nobody is left to answer. */
        if (resp->body_owned)
            free(resp->body);
        w->deferred--;
        request_end(req);
        return;
    }
    /* The fields and the headers set, not all eight slots (1.6 kB). */
    memcpy(&req->answer, resp, offsetof(struct http_response, headers) +
                               (size_t)resp->nheaders * sizeof(resp->headers[0]));
    req->answered = 1;
    w->answers++;               /* libmicrohttpd must run to send it */
    loop_again(w->loop);
}

/* Logs (when asked to) and queues resp for req. */
static void answer(struct http_server *s, struct http_request *req,
                   const struct http_response *resp);

/* Sends the answer a deferred request was handed back. */
static void answer_deferred(struct http_server *s, struct http_request *req)
{
    req->answered = 0;
    answer(s, req, &req->answer);
    req->deferred->deferred--;
    req->deferred = NULL;
}

static void request_read(struct http_request *req)
{
    if (req->rec != NULL && req->rec->phase == HTTP_PHASE_BODY)
        http_conn_move(http_current_worker, req->rec, HTTP_PHASE_BUSY, clock_now_us());
}

static void dispatch(struct http_server *s, struct http_request *req)
{
    struct http_response resp;

    request_read(req);
    http_response_init(&resp);
    s->fn(s->ud, req, &resp);
    if (req->deferred != NULL) {
        if (req->answered)      /* answered at once, from the handler */
            answer_deferred(s, req);
        return;
    }
    answer(s, req, &resp);
}

static void answer(struct http_server *s, struct http_request *req,
                   const struct http_response *resp)
{
    if (s->opts.access_log) {
        /* The method and the path are the client's: log_q() quotes them,
         * so no quote or control character forges a field or a line. */
        log_msg(LOG_LEVEL_INFO, "request", "listener=%s method=%s path=%s status=%d bytes=%zu us=%lld%s",
                s->name, log_q(req->method), log_q(req->path), resp->status, resp->body_len,
                (long long)(clock_now_us() - req->started_us), req->who);
    }
    if (send_response(req->conn, resp) != MHD_YES)
        log_msg(LOG_LEVEL_WARN, "could not queue response", "listener=%s path=%s", s->name,
                log_q(req->path));
}


/* ---- framing ---- */

struct head_framing {
    int ncl, nte;
    const char *cl[2];          /* the first two Content-Length values */
    const char *te;             /* the first Transfer-Encoding value */
};

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    struct head_framing *f = cls;

    (void)kind;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (f->ncl < 2)
            f->cl[f->ncl] = value;
        f->ncl++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        if (f->nte == 0)
            f->te = value;
        f->nte++;
    }
    return MHD_YES;
}

/* Whether req's head can be read only one way and fits max_header_bytes.
 * PERMITD_OK, or an error saying what is wrong with *status the HTTP
 * status to answer. Two Content-Lengths are refused even when equal
 * (RFC 9110 allows either; a proxy may have merged or split them). */
static int check_framing(const struct http_server *s, struct MHD_Connection *conn,
                         int *status, struct permitd_error *err)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    struct head_framing f = {0, 0, {NULL, NULL}, NULL};

    *status = 400;
    if (ci != NULL && s->opts.max_header_bytes > 0 &&
        ci->header_size > (size_t)s->opts.max_header_bytes) {
        *status = 431;
        return permitd_error_set(err, PERMITD_EEXHAUSTED,
                                 "request head is %zu bytes, over the %d-byte limit "
                                 "(--max-header-bytes)", ci->header_size,
                                 s->opts.max_header_bytes);
    }
    MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_header, &f);
    if (f.ncl > 1)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "Content-Length is given %d times (\"%.32s\", \"%.32s\"): "
                                 "a request has one length", f.ncl, f.cl[0], f.cl[1]);
    if (f.ncl > 0 && f.nte > 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "Content-Length \"%.32s\" and Transfer-Encoding \"%.32s\" "
                                 "together: a request is framed by one of them", f.cl[0], f.te);
    if (f.nte > 1 || (f.nte == 1 && strcasecmp(f.te, "chunked") != 0)) {
        *status = 501;
        return permitd_error_set(err, PERMITD_EUNIMPLEMENTED,
                                 "Transfer-Encoding \"%.32s\"%s is not supported: only a single "
                                 "\"chunked\"", f.te, f.nte > 1 ? " (given more than once)" : "");
    }
    return PERMITD_OK;
}

/* Answers req with err (the listener's error body, status, and
 * Connection: close) and stops reading it. */
static void refuse(struct http_server *s, struct http_request *req, int status,
                   const struct permitd_error *err)
{
    struct http_response resp;

    http_response_init(&resp);
    if (s->opts.refuse != NULL) {
        s->opts.refuse(&resp, err);
    } else {
        resp.content_type = "text/plain; charset=utf-8";
        resp.body = (char *)err->message;
        resp.body_len = strlen(err->message);
    }
    resp.status = status;
    http_response_header(&resp, "Connection", "close");
    req->refused = 1;
    request_read(req);
    atomic_fetch_add_explicit(&s->refused, 1, memory_order_relaxed);
    answer(s, req, &resp);
}


static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct http_server *s = cls;
    struct http_request *req = *con_cls;

    if (req != NULL && req->deferred != NULL) {
        /* libmicrohttpd asks again on every run until there is a response. */
        if (!req->answered)
            return MHD_YES;
        answer_deferred(s, req);
        http_current_worker->moved = 1;
        return MHD_YES;
    }
    http_current_worker->moved = 1;
    if (req == NULL) {
        struct http_conn *c = http_conn_of(conn);
        struct permitd_error err;
        const char *cl;
        int status;

        /* The first call for a request: its head is whole; its body is to
         * come, within request_timeout_s of the request's start. */
        if (c != NULL) {
            int64_t start = clock_now_us();
            if (c->first) {
                c->first = 0;
                start = c->since_us;        /* the accept */
                if (s->opts.first_byte_timeout_s < s->opts.connection_timeout_s)
                    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
                                              (unsigned int)s->opts.connection_timeout_s);
            }
            http_conn_move(http_current_worker, c, HTTP_PHASE_BODY, start);
        }
        req = request_new();
        if (req == NULL)
            return MHD_NO;
        req->rec = c;
        atomic_fetch_add(&s->in_flight, 1);
        req->started_us = clock_now_us();
        req->conn = conn;
        req->detached = NULL;
        req->method = method;
        req->path = url;
        *con_cls = req;
        if (check_framing(s, conn, &status, &err) != PERMITD_OK) {
            refuse(s, req, status, &err);
            return MHD_YES;
        }
        /* A declared body over the limit is refused before it is read
         * (framing_read() has done so already for a framed connection:
         * this covers one past the socket table's size);
         * MHD then closes the connection rather than read the body. */
        cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl != NULL && strtoull(cl, NULL, 10) > (unsigned long long)s->opts.max_body_bytes) {
            permitd_error_set(&err, PERMITD_EEXHAUSTED, "request body of %.24s bytes is over "
                              "the %d-byte limit (--max-body-bytes)", cl, s->opts.max_body_bytes);
            refuse(s, req, 429, &err);
        }
        return MHD_YES;
    }
    if (req->refused) {
        *upload_data_size = 0;  /* answered on the first call; nothing more is read */
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        append(req, upload_data, *upload_data_size, (size_t)s->opts.max_body_bytes);
        *upload_data_size = 0;
        return MHD_YES;
    }
    dispatch(s, req);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct http_server *s = cls;
    struct http_request *req = *con_cls;
    struct http_conn *c;

    if (http_current_worker != NULL && (c = http_conn_of(conn)) != NULL &&
        c->phase != HTTP_PHASE_CLOSING) {
        http_conn_move(http_current_worker, c, HTTP_PHASE_IDLE, clock_now_us());
        c->answered++;
        if (c->framing.fail && c->answered == c->framing.requests) {
            /* A later request failed while this one, the last before it,
             * was answered. */
            http_recv_answer(http_current_worker, c);
            http_conn_close(http_current_worker, c, clock_now_us());
        }
    }
    if (req == NULL)
        return;
    req->rec = NULL;
    atomic_fetch_sub(&s->in_flight, 1);
    *con_cls = NULL;
    if (req->deferred != NULL && !req->answered) {
        /* The client went (or timed out) while the answer was awaited:
         * the work still holds req, and http_request_resume() ends it. */
        req->orphaned = 1;
        return;
    }
    if (req->deferred != NULL) {
        /* The answer came but was never sent. */
        req->deferred->deferred--;
        if (req->answer.body_owned)
            free(req->answer.body);
    }
    request_end(req);
}

__attribute__((format(printf, 2, 0)))
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char buf[512];
    size_t n;

    vsnprintf(buf, sizeof(buf), fmt, ap);
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    for (char *c = buf; *c; c++)
        if (*c == '"')
            *c = '\'';
    log_msg(LOG_LEVEL_DEBUG, "libmicrohttpd", "listener=%s detail=\"%s\"", (const char *)cls, buf);
}

/* The listening sockets are made here, not by libmicrohttpd, so any address
 * family works, port 0 can be read back, and each worker gets its own. */

/* The address of listener o (host, port), for bind(). */
static int listener_address(const struct http_options *o, int port, struct addrinfo **res,
                            struct permitd_error *err)
{
    struct addrinfo hints;
    char service[8];
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(service, sizeof(service), "%d", port);
    rc = getaddrinfo(o->host && o->host[0] ? o->host : NULL, service, &hints, res);
    if (rc != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "%s listener: cannot resolve \"%s\": %s",
                                 o->name, o->host, gai_strerror(rc));
    return PERMITD_OK;
}

/* A socket bound to listener o's address on port, listening unless probe
 * (then only bound: it proves the port free, or picks one for port 0, and
 * takes no connection). reuseport: one of several sockets on one port, the
 * kernel spreading new connections between them. Returns the socket and
 * sets *port_out to the port it is bound to. */
static int open_listener(const struct http_options *o, int port, int probe, int reuseport,
                         int *port_out, struct permitd_error *err)
{
    struct addrinfo *res = NULL;
    int fd = -1, one = 1, rc;

    if ((rc = listener_address(o, port, &res, err)) != PERMITD_OK)
        return rc;
    /* Non-blocking: libmicrohttpd accepts until the queue is empty. */
    fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, res->ai_protocol);
    if (fd < 0)
        goto fail;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0)
        goto fail;
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || (!probe && listen(fd, 1024) != 0))
        goto fail;
    {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        getsockname(fd, (struct sockaddr *)&ss, &sl);
        *port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    }
    freeaddrinfo(res);
    return fd;

fail:
    rc = errno;
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return permitd_error_set(err, PERMITD_EUNAVAILABLE, "%s listener: cannot listen on %s:%d: %s",
                             o->name, o->host, port, strerror(rc));
}

/* Every worker's listening socket. With one worker, one plain socket. With
 * several, one each on the same port (SO_REUSEPORT): the kernel spreads
 * connections evenly, where on one shared socket whichever loop woke first
 * took a run of them (one worker held 92% of a benchmark's connections).
 * The port is first bound without SO_REUSEPORT, so a port already taken
 * (another permitd, say) still fails here instead of being joined. */
static int open_listeners(struct http_server *s, struct permitd_error *err)
{
    int probe, port;

    if (s->nworkers == 1) {
        s->workers[0].listen_fd = open_listener(&s->opts, s->opts.port, 0, 0, &s->port, err);
        return s->workers[0].listen_fd < 0 ? s->workers[0].listen_fd : PERMITD_OK;
    }
    probe = open_listener(&s->opts, s->opts.port, 1, 0, &s->port, err);
    if (probe < 0)
        return probe;
    close(probe);
    for (int i = 0; i < s->nworkers; i++) {
        s->workers[i].listen_fd = open_listener(&s->opts, s->port, 0, 1, &port, err);
        if (s->workers[i].listen_fd < 0)
            return s->workers[i].listen_fd;
    }
    return PERMITD_OK;
}

/* ---- connections per client address, across the workers ----
 *
 * apc() refuses a connection whose address already has its limit; the
 * count itself moves with libmicrohttpd's start and close notifications,
 * which come in pairs, so no count can leak. Two workers accepting from one
 * address at the same instant can each pass the check: the limit can be
 * overshot by at most threads - 1 for that moment. */

static enum MHD_Result apc(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    struct http_server *s = cls;
    int64_t now, last;
    uint64_t n;
    char text[INET6_ADDRSTRLEN] = "?";

    (void)addrlen;
    if (iplimit_allows(s->perip, addr))
        return MHD_YES;
    /* Counted, and logged when none was in the last second (a flood from
     * one address is one line a second, with the count so far). */
    n = atomic_fetch_add_explicit(&s->refused_per_ip, 1, memory_order_relaxed) + 1;
    now = clock_now_us();
    last = atomic_load(&s->refusal_logged_us);
    if (now - last < HTTP_REFUSAL_LOG_US ||
        !atomic_compare_exchange_strong(&s->refusal_logged_us, &last, now))
        return MHD_NO;
    if (addr->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)addr)->sin6_addr, text, sizeof(text));
    else if (addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, text, sizeof(text));
    log_msg(LOG_LEVEL_WARN, "connection refused: its address has --max-connections-per-ip open",
            "listener=%s addr=%s limit=%d refused_per_ip_total=%llu", s->name, text,
            s->opts.max_connections_per_ip, (unsigned long long)n);
    return MHD_NO;
}

/* A connection opens or closes (cls: its worker; on close, possibly from
 * the main thread once the worker has ended): its deadline record, then
 * its address's count. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct http_worker *w = cls;
    struct http_server *s = w->s;
    const union MHD_ConnectionInfo *ci;
    struct http_conn *rec = *socket_context;

    if (code == MHD_CONNECTION_NOTIFY_STARTED && (rec = w->free_conns) != NULL) {
        int64_t now = clock_now_us();
        w->free_conns = rec->next;
        rec->mhd = conn;
        rec->first = 1;
        rec->fd = -1;
        rec->tls = NULL;                /* http_recv_tls() sets it at its first read */
        ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (w->by_fd != NULL && ci != NULL && ci->connect_fd >= 0 &&
            (size_t)ci->connect_fd < w->nfds) {
            rec->fd = ci->connect_fd;
            rec->answered = 0;
            framing_init(&rec->framing);
            w->by_fd[rec->fd] = rec;
        }
        http_conn_append(w, rec, HTTP_PHASE_HEAD, now);
        *socket_context = rec;
        if (s->opts.first_byte_timeout_s < s->opts.connection_timeout_s)
            MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
                                      (unsigned int)s->opts.first_byte_timeout_s);
        http_conn_shed(w, now);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && rec != NULL) {
        http_conn_unlink(w, rec);
        if (rec->fd >= 0 && w->by_fd != NULL && w->by_fd[rec->fd] == rec)
            w->by_fd[rec->fd] = NULL;
        rec->fd = -1;
        rec->tls = NULL;
        rec->mhd = NULL;
        rec->next = w->free_conns;
        w->free_conns = rec;
        *socket_context = NULL;
        w->closed++;            /* libmicrohttpd must run again (worker_flush()) */
        loop_again(w->loop);
    }
    if (s->opts.max_connections_per_ip <= 0)
        return;
    ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci == NULL || ci->client_addr == NULL)
        return;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        iplimit_count(s->perip, ci->client_addr);
    else
        iplimit_put(s->perip, ci->client_addr);
}

/* ---- the worker's event loop ----
 *
 * The daemon is the loop's first source (loop.h): it waits on
 * libmicrohttpd's own epoll fd, and for the earliest of libmicrohttpd's
 * timeout and the connection deadlines. Its pass runs libmicrohttpd when
 * the turn woke for something, or when answers came back or connections
 * closed since it last ran; the sources attached after it then flush what
 * the handlers of that run queued. */

void *http_request_worker(const struct http_request *req)
{
    return req->worker != NULL ? req->worker->ctx : NULL;
}

/* The earlier of a (a time or INT64_MAX) and ms from now. */
static int64_t sooner(int64_t a, int64_t now, int64_t ms)
{
    return now + ms * 1000 < a ? now + ms * 1000 : a;
}

static void worker_want(void *ud, struct loop_want *want)
{
    struct http_worker *w = ud;
    MHD_UNSIGNED_LONG_LONG mhd_ms;
    int64_t now = clock_now_us(), at = http_conn_due(w);

    want->fd = w->mhd_fd;
    want->events = EPOLLIN;
    if (MHD_get_timeout(w->daemon, &mhd_ms) == MHD_YES) {
        int64_t ms = mhd_ms > INT32_MAX ? INT32_MAX : (int64_t)mhd_ms;
        /* A request waiting for its answer keeps libmicrohttpd's ready list
         * non-empty, and so its timeout at zero: running it again is worth
         * it only when its last run moved something (read a request, sent
         * an answer). Else the loop waits for an event, or for
         * WAITING_POLL_MS, in case libmicrohttpd holds work no handler saw
         * (a header larger than one read, a partly sent answer). */
        if (ms == 0 && w->waiting > 0 && !w->moved)
            ms = WAITING_POLL_MS;
        at = sooner(at, now, ms);
    }
    if (atomic_load_explicit(&w->quiesced, memory_order_relaxed))
        at = sooner(at, now, 5);    /* draining: look at the counts often */
    want->at_us = at;
}

/* libmicrohttpd's fd is ready (its run comes in the pass), or a time came:
 * connections past their deadline are closed. */
static void worker_ready(void *ud, uint32_t revents)
{
    struct http_worker *w = ud;
    int64_t now;

    if (revents == 0 && http_conn_due(w) <= (now = clock_now_us()))
        http_conn_sweep(w, now);
}

/* Runs libmicrohttpd when the turn woke for something (an fd, a time: it
 * may have requests to read, or sources may have handed back answers),
 * or answers came back or connections closed since its last run. A run
 * that closed connections runs again: a daemon that was at its connection
 * limit takes its listening socket back into its epoll set only at the
 * start of a run, and nothing else would wake the loop for a caller
 * already waiting in the backlog (on_connection() asks for that pass). */
static void worker_flush(void *ud, int woke)
{
    struct http_worker *w = ud;

    if (woke || w->answers > 0 || w->closed > 0) {
        w->answers = 0;
        w->closed = 0;
        w->moved = 0;
        MHD_run(w->daemon);
    }
}

static void worker_close(void *ud)
{
    (void)ud;
}

static void *worker_main(void *arg)
{
    struct http_worker *w = arg;
    struct http_server *s = w->s;

    http_current_worker = w;
    for (;;) {
        loop_turn(w->loop);
        if (atomic_load_explicit(&s->stopping, memory_order_acquire)) {
            if (!atomic_load(&w->quiesced)) {
                /* Stop accepting; http_server_stop() closes the listening
                 * socket once every worker has let go of it. */
                MHD_quiesce_daemon(w->daemon);
                atomic_store(&w->quiesced, 1);
            }
            /* Idle keep-alive connections do not hold us up: only requests
             * begun and not answered do, until the grace period ends. A
             * deferred request is bounded by the Redis timeout and holds
             * memory its work still writes to: it is waited for past the
             * grace period too. */
            if (w->deferred == 0 && (atomic_load(&s->in_flight) == 0 ||
                                     clock_now_us() >= s->stop_until_us))
                break;
        }
    }
    loop_close(w->loop);
    http_current_worker = NULL;
    return NULL;
}

static void workers_free(struct http_server *s)
{
    for (int i = 0; i < s->nworkers; i++) {
        struct http_worker *w = &s->workers[i];
        if (w->started)
            pthread_join(w->thread, NULL);
        if (w->daemon != NULL) {
            /* Quiesced, a daemon leaves its listening socket open. */
            if (!atomic_load(&w->quiesced))
                MHD_quiesce_daemon(w->daemon);
            MHD_stop_daemon(w->daemon);
        }
        if (w->listen_fd >= 0)
            close(w->listen_fd);
        if (w->opened && s->opts.worker_close != NULL)
            s->opts.worker_close(s->ud, w->ctx);
        loop_free(w->loop);     /* after the daemon: its last closes call loop_again() */
        while (w->spare != NULL) {
            struct http_request *req = w->spare;
            w->spare = req->next_spare;
            free(req);
        }
        free(w->conns);
        free(w->by_fd);
    }
    iplimit_free(s->perip);
    free(s);
}

/* Starts worker w's daemon on its listening socket. */
static int worker_start(struct http_server *s, struct http_worker *w, struct permitd_error *err)
{
    struct MHD_OptionItem extra[5];
    int nextra = 0;
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    unsigned limit = (unsigned)(s->opts.max_connections / s->nworkers);
    const union MHD_DaemonInfo *info;
    struct loop_source daemon_source = {w, worker_want, worker_ready, worker_flush, worker_close};
    int rc;

    if (limit == 0)
        limit = 1;
    if (s->opts.max_header_bytes > 0)
        /* MHD reads the request line and headers into this per-connection
         * pool, and answers a head that does not fit with an HTML page of
         * its own (or, for a head just short of the pool, with nothing: no
         * room left to parse it). The pool holds twice the limit + 4 KiB,
         * so that a head over max_header_bytes reaches check_framing(),
         * which answers it with the listener's error body; only a head
         * over about twice the limit still gets MHD's page. Not larger:
         * MHD zeroes the whole pool between the requests of a keep-alive
         * connection, and twice the limit + 16 KiB (32 KiB by default) cost
         * every request a memset of 24 KiB over the 8 KiB pool before
         * (callgrind: +37k instructions a request, counting rep stosb by the
         * byte); 20 KiB costs +18k, a few hundred cycles. */
        extra[nextra++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                                  (intptr_t)s->opts.max_header_bytes * 2 + 4096,
                                                  NULL};
    if (s->opts.tls_cert_pem != NULL && s->opts.tls_key_pem != NULL) {
        flags |= MHD_USE_TLS;
        extra[nextra++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
                                                  (void *)s->opts.tls_cert_pem};
        extra[nextra++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0,
                                                  (void *)s->opts.tls_key_pem};
        if (s->opts.tls_priorities != NULL)
            extra[nextra++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                                      (void *)s->opts.tls_priorities};
    }
    extra[nextra] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    w->s = s;
    w->limit = limit;
    /* The loop first: libmicrohttpd's notifications call loop_again(). */
    if ((rc = loop_new(&w->loop, err)) != PERMITD_OK)
        return rc;
    w->conns = calloc(limit, sizeof(w->conns[0]));
    if (w->conns == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s listener: out of memory for %u "
                                 "connection records", s->name, limit);
    for (unsigned i = 0; i < limit; i++) {
        w->conns[i].fd = -1;
        w->conns[i].next = w->free_conns;
        w->free_conns = &w->conns[i];
    }
    {
        /* Every socket number this process can open, so every connection
         * is framed (plain ones by http_recv(), TLS ones by
         * http_recv_tls()); untouched pages of it cost nothing. */
        struct rlimit rl;
        w->tls = (flags & MHD_USE_TLS) != 0;
        w->nfds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
                  rl.rlim_cur < (1u << 24) ? (size_t)rl.rlim_cur : (1u << 24);
        if ((w->by_fd = calloc(w->nfds, sizeof(w->by_fd[0]))) == NULL)
            return permitd_error_set(err, PERMITD_EINTERNAL, "%s listener: out of memory for "
                                     "its table of %zu sockets", s->name, w->nfds);
    }
    w->daemon = MHD_start_daemon(
        flags, 0,
        apc, s, on_request, s,
        MHD_OPTION_LISTEN_SOCKET, w->listen_fd,
        MHD_OPTION_CONNECTION_LIMIT, limit,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)s->opts.connection_timeout_s,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, w,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s->name,
        MHD_OPTION_ARRAY, extra,
        MHD_OPTION_END);
    if (w->daemon == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "%s listener: libmicrohttpd failed to start%s", s->name,
                                 (flags & MHD_USE_TLS) ? " (is the TLS certificate/key pair valid?)"
                                                       : "");
    info = MHD_get_daemon_info(w->daemon, MHD_DAEMON_INFO_EPOLL_FD);
    if (info == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s listener: libmicrohttpd has no "
                                 "epoll fd to wait on", s->name);
    w->mhd_fd = info->epoll_fd;
    if ((rc = loop_attach(w->loop, &daemon_source, err)) != PERMITD_OK)
        return rc;
    if (s->opts.worker_open != NULL) {
        if ((rc = s->opts.worker_open(s->ud, w->loop, &w->ctx, err)) != PERMITD_OK)
            return rc;
        w->opened = 1;
    }
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s listener: cannot start a worker "
                                 "thread", s->name);
    w->started = 1;
    return PERMITD_OK;
}

int http_server_start(const struct http_options *opts, http_handler_fn fn, void *ud,
                      struct http_server **out, struct permitd_error *err)
{
    struct http_server *s;
    int nworkers = opts->threads > 0 ? opts->threads : 1;
    int rc;

    *out = NULL;
    if ((opts->tls_cert_pem != NULL && opts->tls_key_pem != NULL) &&
        MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s listener: this libmicrohttpd was built without TLS", opts->name);
    s = calloc(1, sizeof(*s) + (size_t)nworkers * sizeof(s->workers[0]));
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->fn = fn;
    s->ud = ud;
    s->opts = *opts;
    snprintf(s->name, sizeof(s->name), "%s", opts->name ? opts->name : "http");
    s->opts.name = s->name;
    s->nworkers = nworkers;
    s->framing.max_header_bytes =
        opts->max_header_bytes > 0 ? (size_t)opts->max_header_bytes : SIZE_MAX;
    s->framing.max_body_bytes = (uint64_t)opts->max_body_bytes;
    for (int i = 0; i < nworkers; i++)
        s->workers[i].listen_fd = -1;
    if ((rc = iplimit_new(opts->max_connections_per_ip, &s->perip, err)) != PERMITD_OK ||
        (rc = open_listeners(s, err)) != PERMITD_OK) {
        workers_free(s);
        return rc;
    }
    for (int i = 0; i < nworkers; i++) {
        rc = worker_start(s, &s->workers[i], err);
        if (rc != PERMITD_OK) {
            s->stop_until_us = 0;
            atomic_store(&s->stopping, 1);
            for (int k = 0; k < i; k++)
                loop_wake(s->workers[k].loop);
            workers_free(s);
            return rc;
        }
    }
    *out = s;
    return PERMITD_OK;
}

int http_tls_check_priorities(const char *priorities, struct permitd_error *err)
{
    gnutls_priority_t p;
    const char *at = NULL;
    int rc = gnutls_priority_init(&p, priorities, &at);

    if (rc == GNUTLS_E_SUCCESS) {
        gnutls_priority_deinit(p);
        return PERMITD_OK;
    }
    if (at != NULL && *at != '\0')
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "\"%s\" is not a GnuTLS priority string (GnuTLS refused it at "
                                 "\"%.60s\": %s)", priorities, at, gnutls_strerror(rc));
    return permitd_error_set(err, PERMITD_EINVAL,
                             "\"%s\" is not a GnuTLS priority string (GnuTLS: %s)",
                             priorities, gnutls_strerror(rc));
}

unsigned http_server_connections(const struct http_server *s)
{
    unsigned n = 0;

    for (int i = 0; i < s->nworkers; i++) {
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(s->workers[i].daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        n += info ? info->num_connections : 0;
    }
    return n;
}

void http_server_load(const struct http_server *s, struct http_server_load *out)
{
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < s->nworkers; i++) {
        const struct http_worker *w = &s->workers[i];
        out->limit += w->limit;
        for (int p = 0; p < HTTP_PHASES; p++)
            out->open += atomic_load_explicit(&w->count[p], memory_order_relaxed);
        out->idle += atomic_load_explicit(&w->count[HTTP_PHASE_IDLE], memory_order_relaxed);
        out->head += atomic_load_explicit(&w->count[HTTP_PHASE_HEAD], memory_order_relaxed);
    }
    out->header_timeouts = atomic_load_explicit(&s->header_timeouts, memory_order_relaxed);
    out->shed_idle = atomic_load_explicit(&s->shed_idle, memory_order_relaxed);
    out->shed_head = atomic_load_explicit(&s->shed_head, memory_order_relaxed);
    out->request_timeouts = atomic_load_explicit(&s->request_timeouts, memory_order_relaxed);
    out->shed_body = atomic_load_explicit(&s->shed_body, memory_order_relaxed);
    out->refused = atomic_load_explicit(&s->refused, memory_order_relaxed);
    out->refused_per_ip = atomic_load_explicit(&s->refused_per_ip, memory_order_relaxed);
}

int http_server_port(const struct http_server *s)
{
    return s->port;
}

void http_server_stop(struct http_server *s, int grace_ms)
{
    if (s == NULL)
        return;
    s->stop_until_us = clock_now_us() + (int64_t)grace_ms * 1000;
    atomic_store_explicit(&s->stopping, 1, memory_order_release);
    for (int i = 0; i < s->nworkers; i++)
        loop_wake(s->workers[i].loop);
    /* Once every worker has let go of its listening socket, close them
     * all: new connections are refused from then on instead of waiting in
     * a backlog for a server that will not accept them. */
    for (int i = 0; i < s->nworkers; i++)
        while (!atomic_load(&s->workers[i].quiesced))
            usleep(1000);
    for (int i = 0; i < s->nworkers; i++) {
        close(s->workers[i].listen_fd);
        s->workers[i].listen_fd = -1;
    }
    workers_free(s);
}
