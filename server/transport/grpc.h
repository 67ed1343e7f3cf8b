/*
 * grpc.h - a gRPC listener: unary calls over HTTP/2 (libnghttp2, which
 * stays inside grpc.c), cleartext with prior knowledge (h2c), issue 25.
 *
 * grpc.c owns sockets, worker threads, HTTP/2 sessions and the gRPC
 * framing: the 5-byte length prefix of a message, grpc-timeout, and the
 * answer's grpc-status / grpc-message trailers. It knows nothing of
 * protobuf: a call hands its handler the path, the metadata it asked for
 * and the message's bytes; the handler answers with bytes or an error.
 * Like http.h, each worker thread turns one event loop (loop.h) whose first
 * source is the listener's connections; what a handler's work needs per
 * worker (a limiter queue on the same loop) is made with worker_open, so a
 * deferred answer comes back on that thread.
 */
#ifndef PERMITD_GRPC_H
#define PERMITD_GRPC_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct grpc_server;
struct grpc_call;             /* one unary call; opaque */
struct loop;

/* Called once per call whose request message is whole. The handler must
 * answer it exactly once, with grpc_call_reply() or grpc_call_fail(): at
 * once or later, on the same thread (a source of the worker's loop). */
typedef void (*grpc_handler_fn)(void *ud, struct grpc_call *call);

struct grpc_options {
    const char *host;             /* "" or NULL = all interfaces */
    int port;                     /* 0 = any free port */
    int threads;
    int max_connections;          /* across the workers */
    int max_connections_per_ip;   /* from one client address, across the workers; 0: no limit */
    int max_streams;              /* concurrent streams per connection */
    size_t max_message_bytes;     /* largest request message (after the 5-byte prefix) */
    int idle_timeout_s;           /* a connection without progress (a request whole, an
                                   * answer) this long, nor a call with the handler, closes */
    int request_timeout_s;        /* a call's request must be whole this long after its
                                   * HEADERS, whatever grpc-timeout says; 0: no bound */
    const char *tls_cert_pem;     /* both NULL: cleartext h2c; else TLS, ALPN "h2" */
    const char *tls_key_pem;
    const char *tls_priorities;   /* GnuTLS priority string; NULL: GnuTLS's default */
    const char *name;             /* "grpc", for logs */
    int access_log;               /* one line per answered call, as http_options' */
    /* Per-worker state, as http_options' (both NULL: none). */
    int (*worker_open)(void *ud, struct loop *loop, void **worker, struct permitd_error *err);
    void (*worker_close)(void *ud, void *worker);
};

/* Binds, listens and starts the workers. PERMITD_OK and a server in *out
 * (stop with grpc_server_stop()), or an error naming the address. */
int grpc_server_start(const struct grpc_options *opts, grpc_handler_fn fn, void *ud,
                      struct grpc_server **out, struct permitd_error *err);

/* The port actually bound (useful with port 0). */
int grpc_server_port(const struct grpc_server *s);

/* Connections open right now (any thread; for /metrics and tests). */
unsigned grpc_server_connections(const struct grpc_server *s);

/* The listener's connections and what was refused at accept, for /metrics
 * (any thread; each field read on its own, not one snapshot). */
struct grpc_server_load {
    unsigned open;                /* connections open now */
    unsigned limit;               /* max_connections */
    unsigned per_ip_limit;        /* max_connections_per_ip; 0: none */
    uint64_t refused_full;        /* closed at accept: max_connections open */
    uint64_t refused_per_ip;      /* closed at accept: the address had its limit open */
    uint64_t shed_idle;           /* closed to make room when full: no call */
    uint64_t shed_stalled;        /* closed to make room when full: calls without progress */
};
void grpc_server_load(const struct grpc_server *s, struct grpc_server_load *out);

/* Stops accepting, tells every connection to go (GOAWAY), waits up to
 * grace_ms for calls in flight, then closes everything and frees s. NULL
 * is a no-op. */
void grpc_server_stop(struct grpc_server *s, int grace_ms);

/* The call's path, "/permit.v1.RateLimitService/Acquire". Valid until the
 * call is answered, like every pointer below. */
const char *grpc_call_path(const struct grpc_call *call);

/* The value of metadata `name` (lowercase, as HTTP/2 sends it): only
 * "authorization" is kept. NULL when the call did not send it. */
const char *grpc_call_metadata(const struct grpc_call *call, const char *name);

/* The request message (without its prefix). */
const void *grpc_call_message(const struct grpc_call *call, size_t *len);

/* When the call's grpc-timeout runs out, on clock_now_us()'s scale
 * (INT64_MAX: no timeout). */
int64_t grpc_call_deadline_us(const struct grpc_call *call);

/* What worker_open made for the worker serving the call (NULL without it). */
void *grpc_call_worker(const struct grpc_call *call);

/* size zeroed bytes, aligned for any type, that live until the call is
 * answered: for the handler's record of deferred work, its decoded request
 * (a ProtobufCAllocator over it) and its answer's messages. They come out
 * of the call's own storage, kept with the call record for the worker's
 * next calls, and only when that is full from malloc (freed with the
 * call): nothing to free. NULL when out of memory. */
void *grpc_call_alloc(struct grpc_call *call, size_t size);

/* Room for the answer's message, len bytes, in the call's reply buffer
 * (after the 5-byte prefix), to pack the message into directly and then
 * pass to grpc_call_reply(call, room, len), which copies nothing then.
 * The buffer is the call's: kept with the record for the next calls,
 * grown only when a bigger answer comes. A second call gives new room (what
 * the first held is gone). NULL when out of memory. */
void *grpc_call_reply_space(struct grpc_call *call, size_t len);

/* Adds one metadata entry to the answer's headers (name lowercase, static;
 * value copied). -1 when GRPC_CALL_HEADERS_MAX are set already. */
#define GRPC_CALL_HEADERS_MAX 4
int grpc_call_header(struct grpc_call *call, const char *name, const char *value, size_t len);

/* Answers the call with one message (copied, unless it is the room
 * grpc_call_reply_space() gave) and grpc-status 0; ends the call. When its
 * client has gone (RST_STREAM, the connection closed) the answer is
 * dropped. */
void grpc_call_reply(struct grpc_call *call, const void *msg, size_t len);

/* Names the caller in the call's access log line (--access-log): its app
 * and key, as http_request_log_who() does for the HTTP listeners. */
void grpc_call_log_who(struct grpc_call *call, const char *app, const char *key);

/* Answers the call with err (grpc-status -err->code, grpc-message its text,
 * percent-encoded) and no message; ends the call. */
void grpc_call_fail(struct grpc_call *call, const struct permitd_error *err);

/* 1 when the client has gone (the answer would be dropped). */
int grpc_call_gone(const struct grpc_call *call);

/* Parses a grpc-timeout value: 1 to 8 ASCII digits and a unit, H M S m u n
 * (the gRPC over HTTP/2 spec). PERMITD_OK and *us (microseconds, a
 * nanosecond timeout rounded up), or PERMITD_EINVAL naming the value. */
int grpc_parse_timeout(const char *value, int64_t *us, struct permitd_error *err);

/* Percent-encodes a grpc-message (every byte outside 0x20..0x7e, and '%')
 * into out (size bytes, NUL-ended, cut at a whole escape). Returns the
 * length written. */
size_t grpc_percent_encode(const char *msg, char *out, size_t size);

/* Feeds bytes to a fresh server-side HTTP/2 + gRPC session without a
 * socket, as if one connection had sent them, with handler fn answering
 * every call at once; for the fuzzer (tests/fuzz/fuzz_grpc.c). Returns how
 * many calls reached fn. */
int grpc_feed(const struct grpc_options *opts, grpc_handler_fn fn, void *ud,
              const uint8_t *data, size_t len);

#endif
