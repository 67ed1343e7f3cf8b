/*
 * grpc_conn.h - the gRPC listener's connections and workers (grpc_conn.c:
 * nghttp2's session callbacks, the connection's bytes, its flow-control
 * budget, the deadlines and shedding). Internal to the listener (grpc.c,
 * grpc_call.c, grpc_conn.c): the layers above include grpc.h, never this.
 * nghttp2's session is only named here (a pointer), so this header does
 * not include nghttp2.h.
 */
#ifndef PERMITD_GRPC_CONN_H
#define PERMITD_GRPC_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <gnutls/gnutls.h>

#include "transport/grpc_call.h"

struct iplimit;
struct loop;
struct nghttp2_session;

#define GRPC_CONN_SWEEP_US 1000000  /* idle connections are looked for every second */


struct grpc_conn {
    struct grpc_worker *w;
    int fd;                         /* -1: grpc_feed()'s connection, output dropped */
    struct nghttp2_session *session;
    struct grpc_call *calls;
    struct grpc_conn *prev, *next;  /* the worker's connections */
    struct grpc_conn *dirty_next;   /* on the worker's dirty list */
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

struct grpc_worker {
    struct grpc_server *s;
    struct loop *loop;              /* NULL: grpc_feed() */
    pthread_t thread;
    int started, opened;
    int epfd;
    void *ctx;
    struct grpc_conn *conns, *dirty;
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
    atomic_uint_fast64_t shed_idle, shed_stalled;   /* closed by grpc_conn_shed() */
    _Atomic int64_t refusal_logged_us;  /* when a refusal was last logged */
    int grace_ms;
    gnutls_certificate_credentials_t cred;  /* NULL: cleartext */
    gnutls_priority_t prio;
    int nworkers;
    struct grpc_worker workers[];
};

/* A new connection's session on fd, with its SETTINGS queued, in w's list
 * (NULL: out of memory or no session); it ends with grpc_conn_close(). */
struct grpc_conn *grpc_conn_add(struct grpc_worker *w, int fd);
/* Closes c's socket at once; grpc_conn_free() frees it at the end of the
 * pass. The one way every connection ends. */
void grpc_conn_close(struct grpc_conn *c);
void grpc_conn_free(struct grpc_conn *c);
/* c has something to send: the worker's flush writes it. */
void grpc_conn_mark_dirty(struct grpc_conn *c);
/* Bytes from the client: nghttp2 parses them (and calls
 * grpc_call_dispatch()). */
void grpc_conn_read(struct grpc_conn *c);
/* Writes what nghttp2 has to send, as far as the socket takes it. */
void grpc_conn_send(struct grpc_conn *c);
/* call's bytes leave its connection's flow-control count (stream_open 0:
 * its stream is closing). */
void grpc_conn_release(struct grpc_call *call, int stream_open);
/* The listener is full: closes one of w's connections to make room. 1
 * when one was closed. */
int grpc_conn_shed(struct grpc_worker *w, int64_t now);
/* The calls and connections past their deadlines (see grpc_conn.c). */
void grpc_conn_sweep(struct grpc_worker *w, int64_t now);

#endif
