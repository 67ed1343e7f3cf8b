/*
 * http.h - an HTTP/1.1 listener on libmicrohttpd (which stays inside http.c).
 *
 * http.c owns sockets, threads, connection limits and timeouts, and the
 * buffering of request bodies (Content-Length or chunked) up to a byte
 * limit; it knows nothing of Connect. Each complete request is handed to
 * one handler function on the worker thread that owns the connection; each
 * worker thread turns one event loop (loop.h), whose libmicrohttpd daemon
 * is its first source. What a handler's work needs per worker (api.c: a
 * limiter queue, a source of the same loop) is made for each worker with
 * that loop (worker_open), so a deferred answer comes back on that thread.
 */
#ifndef PERMITD_HTTP_H
#define PERMITD_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct http_server;
struct loop;
struct http_request;          /* opaque; read with the accessors below */

#define HTTP_MAX_HEADERS 8

struct http_response {
    int status;
    const char *content_type;   /* static string */
    char *body;                 /* freed with free() after sending when body_owned */
    size_t body_len;
    int body_owned;
    int nheaders;
    struct {
        const char *name;       /* static string */
        char value[192];
    } headers[HTTP_MAX_HEADERS];
};

/* Makes resp what a handler's starts as: status 200, no body, no headers.
 * (Only those fields: the header slots are written as headers are added.) */
void http_response_init(struct http_response *resp);

/* Called once per complete request. resp arrives as http_response_init()
 * leaves it; the handler fills it. Runs on an HTTP worker thread. */
typedef void (*http_handler_fn)(void *ud, const struct http_request *req,
                                struct http_response *resp);

struct http_options {
    const char *host;             /* "" or NULL = all interfaces */
    int port;                     /* 0 = any free port */
    int threads;
    int max_body_bytes;
    int max_connections;
    int connection_timeout_s;     /* idle: libmicrohttpd's timer, reset by every byte */
    int header_timeout_s;         /* a request head (line + headers) must be whole by then */
    int request_timeout_s;        /* and the whole request, body included, by then */
    int first_byte_timeout_s;     /* a new connection silent this long is closed */
    int max_connections_per_ip;   /* 0 = no limit */
    int max_header_bytes;         /* largest request line + headers */
    int access_log;
    const char *tls_cert_pem;     /* both NULL: plain HTTP */
    const char *tls_key_pem;
    const char *tls_priorities;   /* GnuTLS priority string; NULL: GnuTLS's default */
    const char *name;             /* "api", for logs */
    /* Fills resp for a request that http.c refuses itself, before any
     * handler (bad framing, a head over max_header_bytes): err says why.
     * http.c then sets the status it needs and closes the connection after
     * the answer. NULL: a plain-text answer. (connect_error_reply fits.) */
    void (*refuse)(struct http_response *resp, const struct permitd_error *err);
    /* Per-worker state (both NULL: none). worker_open(ud, loop, &worker,
     * err) runs for each worker at start, before its thread does, with the
     * loop that worker will turn; an error stops the start.
     * http_request_worker() hands *worker to the handler; worker_close(ud,
     * worker) frees it once the worker's loop has closed. ud is the
     * handler's. */
    int (*worker_open)(void *ud, struct loop *loop, void **worker, struct permitd_error *err);
    void (*worker_close)(void *ud, void *worker);
};

/* Binds, listens and starts the worker threads. Returns PERMITD_OK and a
 * server in *out (stop with http_server_stop()), or an error naming the
 * address. */
int http_server_start(const struct http_options *opts, http_handler_fn fn, void *ud,
                      struct http_server **out, struct permitd_error *err);

/* Checks a GnuTLS priority string (the TLS versions and suites offered);
 * PERMITD_EINVAL with err naming the part GnuTLS refused. */
int http_tls_check_priorities(const char *priorities, struct permitd_error *err);

/* Connections open right now. */
unsigned http_server_connections(const struct http_server *s);

/* How full a listener is, for /readyz and /metrics. Read from any thread;
 * the counts are each exact but not one snapshot. */
struct http_server_load {
    unsigned open;              /* connections open */
    unsigned limit;             /* most that can be open (the split over workers) */
    unsigned idle;              /* of the open ones, keep-alive ones between requests */
    unsigned head;              /* of the open ones, waiting for a whole request head */
    uint64_t header_timeouts;   /* closed: request head not whole in header_timeout_s */
    uint64_t shed_idle;         /* closed: idle keep-alive, to make room when full */
    uint64_t shed_head;         /* closed: awaiting its head > 1 s, to make room when full */
    uint64_t request_timeouts;  /* closed: request body not whole in request_timeout_s */
    uint64_t shed_body;         /* closed: awaiting its body > 1 s, to make room when full */
    uint64_t refused;           /* answered 400/431 and closed by http.c (framing, head size) */
    uint64_t refused_per_ip;    /* closed at accept: the address had --max-connections-per-ip */
};
void http_server_load(const struct http_server *s, struct http_server_load *out);

/* The port actually bound (useful with port 0). */
int http_server_port(const struct http_server *s);

/* Stops accepting, waits up to grace_ms for requests in flight to finish,
 * then closes everything and frees s. NULL is a no-op. */
void http_server_stop(struct http_server *s, int grace_ms);

/* What worker_open made for the worker serving req (NULL without it); from
 * the handler's thread. */
void *http_request_worker(const struct http_request *req);

/* Request accessors; every pointer is valid only during the handler call. */
const char *http_request_method(const struct http_request *req);
const char *http_request_path(const struct http_request *req);
/* Header value by case-insensitive name, or NULL. */
const char *http_request_header(const struct http_request *req, const char *name);
/* Every line of header name joined with ", " (a list header such as
 * X-Forwarded-For may come as several lines, each adding to the list), in
 * req's storage (http_request_alloc()); NULL when there is none, or out of
 * memory. */
const char *http_request_header_all(const struct http_request *req, const char *name);
/* The client's address as text ("127.0.0.2", "::1") into buf; -1 when
 * unknown. The peer of the TCP connection: behind a proxy, the proxy's. */
int http_request_client_addr(const struct http_request *req, char *buf, size_t len);
/* URL query argument (percent-decoded), or NULL. */
const char *http_request_query(const struct http_request *req, const char *name);
const char *http_request_body(const struct http_request *req, size_t *len);
/* True when the body went over max_body_bytes (what was read is dropped). */
int http_request_body_too_large(const struct http_request *req);

/* Names who sent req in its access log line (app=..., key=... with the
 * key's prefix, never a secret); characters other than [A-Za-z0-9._-] are
 * written as '?'. From the handler's thread. */
void http_request_log_who(const struct http_request *req, const char *app, const char *key);

/* Answers req later: called from the handler, it makes the handler's resp
 * be ignored. Whatever the handler then sets off must end in exactly one
 * http_request_resume() on the worker's thread: at once, from the handler
 * itself (its answer is sent when the handler returns), or later from a
 * source of the worker's loop. req stays valid until then, even if its
 * client goes away meanwhile. */
void http_request_defer(const struct http_request *req);

/* size bytes, aligned for any type, that live as long as req does: until
 * its answer has been sent, or the client has gone. For what a handler and
 * its deferred work keep (their record, the reply's body: set body_owned
 * 0). Requests are recycled by their worker with room for such records, so
 * small ones cost no allocation. NULL when out of memory. Call it from the
 * thread that holds req: the handler's, then whoever answers it. */
void *http_request_alloc(const struct http_request *req, size_t size);

/* Copies into req's storage what the accessors above read from
 * libmicrohttpd (method, path, headers, query arguments, the client's
 * address), so that, once req is deferred, work on another thread may call
 * them: libmicrohttpd frees its copy if the client goes meanwhile. Call it
 * from the handler's thread, before handing req over. 0, or -1 when out of
 * memory. */
int http_request_detach(const struct http_request *req);

/* Hands the answer of a deferred request back, on the worker thread that
 * deferred it; resp is copied (body ownership moves with it). */
void http_request_resume(const struct http_request *req, const struct http_response *resp);

/* Adds a response header; value is copied (truncated to 191 bytes).
 * Returns -1 when HTTP_MAX_HEADERS are already set. */
int http_response_header(struct http_response *resp, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same for a value already made: its len bytes are copied (and
 * truncated the same way). No formatting: for the headers of every
 * decision. */
int http_response_header_set(struct http_response *resp, const char *name, const char *value,
                             size_t len);

#endif
