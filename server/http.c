/*
 * http.c - libmicrohttpd listener, body buffering, limits.
 *
 * libmicrohttpd runs a pool of `threads` worker threads, each with its own
 * event loop (epoll) over the connections it accepted; the handler runs on
 * that thread and may block briefly (one Redis round trip), which is why
 * each worker has its own Redis connection rather than sharing one.
 *
 * Bodies are buffered per request up to max_body_bytes. A Content-Length
 * above the limit is refused before any byte of the body is read; a
 * chunked body that grows past it is dropped as it arrives (memory stays
 * bounded) and the handler is told, so it can answer with a clear error.
 * The connection timeout bounds slow senders.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "clock.h"
#include "http.h"
#include "log.h"

struct http_server {
    struct MHD_Daemon *daemon;
    int listen_fd;
    int port;
    http_handler_fn fn;
    void *ud;
    struct http_options opts;
    char name[32];
    atomic_int in_flight;       /* requests begun and not yet completed */
    atomic_int deferred;        /* suspended, or resumed and not yet answered */
};

/* One request in progress; MHD's con_cls. */
struct http_request {
    struct MHD_Connection *conn;
    int64_t started_us;
    const char *method;
    const char *path;
    char *body;                 /* small[] or malloc'd */
    size_t len, cap;
    int too_large;
    /* Deferred answers (http_request_defer): the work runs elsewhere and
     * http_request_resume() hands the answer back. */
    void (*start)(void *arg);
    void *start_arg;
    _Atomic int answered;               /* 1 once resume stored `answer` */
    int deferred;                       /* counted in s->deferred */
    struct http_response answer;
    char small[512];            /* most request bodies fit: no second allocation */
};

static void drop_body(struct http_request *req)
{
    if (req->body != req->small)
        free(req->body);
    req->body = NULL;
    req->len = req->cap = 0;
}

const char *http_request_method(const struct http_request *req) { return req->method; }
const char *http_request_path(const struct http_request *req) { return req->path; }

const char *http_request_header(const struct http_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *http_request_query(const struct http_request *req, const char *name)
{
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

static enum MHD_Result send_response(struct MHD_Connection *conn, struct http_response *resp)
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
    if (resp->content_type != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, resp->content_type);
    for (int i = 0; i < resp->nheaders; i++)
        MHD_add_response_header(r, resp->headers[i].name, resp->headers[i].value);
    ret = MHD_queue_response(conn, (unsigned int)resp->status, r);
    MHD_destroy_response(r);
    return ret;
}

void http_request_defer(const struct http_request *creq, void (*start)(void *arg), void *arg)
{
    struct http_request *req = (struct http_request *)creq;

    req->start = start;
    req->start_arg = arg;
}

void http_request_resume(const struct http_request *creq, const struct http_response *resp)
{
    struct http_request *req = (struct http_request *)creq;

    req->answer = *resp;
    atomic_store_explicit(&req->answered, 1, memory_order_release);
    MHD_resume_connection(req->conn);
}

/* Logs (when asked to) and queues resp for req. */
static void answer(struct http_server *s, struct http_request *req, struct http_response *resp);

static void dispatch(struct http_server *s, struct http_request *req)
{
    struct http_response resp;

    memset(&resp, 0, sizeof(resp));
    resp.status = 200;
    s->fn(s->ud, req, &resp);
    if (req->start != NULL) {
        /* Suspend first, then start the work: its completion may resume
         * the connection from another thread at any moment after. */
        void (*start)(void *) = req->start;
        req->start = NULL;
        atomic_fetch_add(&s->deferred, 1);
        req->deferred = 1;
        MHD_suspend_connection(req->conn);
        start(req->start_arg);
        return;
    }
    answer(s, req, &resp);
}

static void answer(struct http_server *s, struct http_request *req, struct http_response *resp_)
{
    struct http_response resp = *resp_;

    if (s->opts.access_log) {
        char path[201];
        size_t i = 0;
        /* The path is the client's: no quote or control character may
         * reach the log line and forge fields. */
        for (; req->path[i] && i < sizeof(path) - 1; i++) {
            unsigned char c = (unsigned char)req->path[i];
            path[i] = (c < 0x20 || c == 0x7f || c == '"' || c == '\\') ? '?' : (char)c;
        }
        path[i] = '\0';
        log_msg(LOG_INFO, "request", "listener=%s method=%.16s path=\"%s\" status=%d bytes=%zu us=%lld",
                s->name, req->method, path, resp.status, resp.body_len,
                (long long)(clock_now_us() - req->started_us));
    }
    if (send_response(req->conn, &resp) != MHD_YES)
        log_msg(LOG_WARN, "could not queue response", "listener=%s path=\"%.100s\"",
                s->name, req->path);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct http_server *s = cls;
    struct http_request *req = *con_cls;

    if (req == NULL) {
        const char *cl;

        req = calloc(1, sizeof(*req));
        if (req == NULL)
            return MHD_NO;
        atomic_fetch_add(&s->in_flight, 1);
        req->started_us = clock_now_us();
        req->conn = conn;
        req->method = method;
        req->path = url;
        *con_cls = req;
        /* A declared body over the limit is refused before it is read;
         * MHD then closes the connection rather than read the body. */
        cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl != NULL && strtoull(cl, NULL, 10) > (unsigned long long)s->opts.max_body_bytes) {
            req->too_large = 1;
            dispatch(s, req);
        }
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        append(req, upload_data, *upload_data_size, (size_t)s->opts.max_body_bytes);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (atomic_load_explicit(&req->answered, memory_order_acquire)) {
        /* Resumed: the deferred work left its answer. */
        atomic_store_explicit(&req->answered, 0, memory_order_relaxed);
        answer(s, req, &req->answer);
        req->deferred = 0;
        atomic_fetch_sub(&s->deferred, 1);
        return MHD_YES;
    }
    if (req->too_large && MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                      MHD_HTTP_HEADER_CONTENT_LENGTH) != NULL)
        return MHD_YES;   /* already answered on the first call */
    dispatch(s, req);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct http_server *s = cls;
    struct http_request *req = *con_cls;

    if (req == NULL)
        return;
    atomic_fetch_sub(&s->in_flight, 1);
    if (req->deferred) {
        /* The client went away while its answer was pending; the answer
         * (if it came) was never sent. */
        atomic_fetch_sub(&s->deferred, 1);
        if (atomic_load(&req->answered) && req->answer.body_owned)
            free(req->answer.body);
    }
    drop_body(req);
    free(req);
    *con_cls = NULL;
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
    log_msg(LOG_DEBUG, "libmicrohttpd", "listener=%s detail=\"%s\"", (const char *)cls, buf);
}

/* Creates the listening socket ourselves, so any address family works and
 * port 0 can be read back. */
static int open_listener(const struct http_options *o, int *port_out, struct permitd_error *err)
{
    struct addrinfo hints, *res = NULL;
    char port[8];
    int fd = -1, one = 1, rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(port, sizeof(port), "%d", o->port);
    rc = getaddrinfo(o->host && o->host[0] ? o->host : NULL, port, &hints, &res);
    if (rc != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "%s listener: cannot resolve \"%s\": %s",
                                 o->name, o->host, gai_strerror(rc));
    fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    if (fd < 0)
        goto fail;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0)
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
                             o->name, o->host, o->port, strerror(rc));
}

int http_server_start(const struct http_options *opts, http_handler_fn fn, void *ud,
                      struct http_server **out, struct permitd_error *err)
{
    struct http_server *s;
    int fd;

    *out = NULL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->fn = fn;
    s->ud = ud;
    s->opts = *opts;
    snprintf(s->name, sizeof(s->name), "%s", opts->name ? opts->name : "http");
    s->opts.name = s->name;
    fd = open_listener(&s->opts, &s->port, err);
    if (fd < 0) {
        free(s);
        return fd;
    }
    s->listen_fd = fd;
    /* A pool of one is no pool: libmicrohttpd warns about it, so the
     * option is only passed for two threads or more. */
    struct MHD_OptionItem extra[8];
    int nextra = 0;
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
                     MHD_ALLOW_SUSPEND_RESUME;

    if (opts->threads > 1)
        extra[nextra++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, opts->threads, NULL};
    if (opts->max_connections_per_ip > 0)
        extra[nextra++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                                  opts->max_connections_per_ip, NULL};
    if (opts->max_header_bytes > 0)
        /* MHD reads the request line and headers into this per-connection
         * pool; anything larger is answered 431/413 by MHD itself. */
        extra[nextra++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                                  opts->max_header_bytes, NULL};
    if (opts->tls_cert_pem != NULL && opts->tls_key_pem != NULL) {
        flags |= MHD_USE_TLS;
        extra[nextra++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
                                                  (void *)opts->tls_cert_pem};
        extra[nextra++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0,
                                                  (void *)opts->tls_key_pem};
    }
    extra[nextra] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    if ((flags & MHD_USE_TLS) && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        close(fd);
        free(s);
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s listener: this libmicrohttpd was built without TLS", opts->name);
    }
    s->daemon = MHD_start_daemon(
        flags, 0,
        NULL, NULL, on_request, s,
        MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)opts->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)opts->connection_timeout_s,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s->name,
        MHD_OPTION_ARRAY, extra,
        MHD_OPTION_END);
    if (s->daemon == NULL) {
        close(fd);
        free(s);
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "%s listener: libmicrohttpd failed to start%s", opts->name,
                                 (flags & MHD_USE_TLS) ? " (is the TLS certificate/key pair valid?)"
                                                       : "");
    }
    *out = s;
    return PERMITD_OK;
}

unsigned http_server_connections(const struct http_server *s)
{
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

    return info ? info->num_connections : 0;
}

int http_server_port(const struct http_server *s)
{
    return s->port;
}

void http_server_stop(struct http_server *s, int grace_ms)
{
    int64_t until;

    if (s == NULL)
        return;
    /* Stop accepting; connections already open carry on. */
    MHD_socket lfd = MHD_quiesce_daemon(s->daemon);
    if (lfd != MHD_INVALID_SOCKET)
        close(lfd);
    until = clock_now_us() + (int64_t)grace_ms * 1000;
    /* Idle keep-alive connections do not hold us up: only requests that
     * have begun and not yet been answered do. */
    while (atomic_load(&s->in_flight) > 0 && clock_now_us() < until)
        usleep(5 * 1000);
    /* A deferred request is bounded by the Redis timeout and must be back
     * from suspension before libmicrohttpd may stop: wait for it past the
     * grace period too. */
    while (atomic_load(&s->deferred) > 0)
        usleep(5 * 1000);
    MHD_stop_daemon(s->daemon);
    free(s);
}
