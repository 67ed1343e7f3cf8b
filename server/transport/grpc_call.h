/*
 * grpc_call.h - the gRPC listener's call records (grpc_call.c): a call is
 * one HTTP/2 stream, its request, its answer. Internal to the listener
 * (grpc.c, grpc_call.c, grpc_conn.c): the layers above include grpc.h,
 * never this.
 */
#ifndef PERMITD_GRPC_CALL_H
#define PERMITD_GRPC_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/log.h"
#include "core/status.h"
#include "transport/grpc.h"

#define GRPC_CALL_PATH_MAX_LEN 256
#define GRPC_CALL_AUTHZ_MAX_LEN 1024
#define GRPC_CALL_STORE 4096       /* grpc_call_alloc()'s room inside a call */
#define GRPC_CALL_KEEP_BYTES 16384 /* a body or reply buffer over this is not kept */

struct grpc_conn;
struct grpc_worker;

struct grpc_call_block {
    struct grpc_call_block *next;
    max_align_t data[];
};

/* A call's record. Finished ones go back to their worker's spare list
 * (grpc_call_end()) and serve its next calls: a warmed-up call allocates
 * nothing here. Everything up to `w` is cleared for each call; from `w` on
 * the record keeps what it has (its buffers, grown only when a bigger
 * message comes). */
struct grpc_call {
    struct grpc_conn *conn;         /* NULL once the client has gone */
    struct grpc_call *prev, *next;  /* the connection's calls; next: the spare list */
    int32_t id;
    int dispatched, answered;
    int bad_method, bad_type, head_too_big;
    char path[GRPC_CALL_PATH_MAX_LEN];
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
    struct grpc_call_block *blocks; /* grpc_call_alloc()'s that did not fit in store[] */
    void *worker_ctx;
    /* Kept when the record is reused: */
    struct grpc_worker *w;          /* whose spare list takes it back */
    char who[LOG_WHO_MAX];          /* " app=... key=..." for the access log, or "" */
    uint8_t *body;                  /* the request: prefix + message; body_cap bytes */
    size_t body_cap;
    uint8_t *reply;                 /* the answer: prefix + message; reply_cap bytes */
    size_t reply_cap;
    struct arena storage;           /* over store[]: grpc_call_alloc() */
    char authz_buf[GRPC_CALL_AUTHZ_MAX_LEN + 1];
    _Alignas(max_align_t) unsigned char store[GRPC_CALL_STORE];
};

/* Answers call with the error code and the formatted sentence. */
#define GRPC_CALL_FAIL(call, code, ...)                         \
    do {                                                        \
        struct permitd_error e_;                                \
        permitd_error_set(&e_, (code), __VA_ARGS__);            \
        grpc_call_answer((call), 200, NULL, 0, &e_);            \
    } while (0)

/* A call record for w, cleared, from w's spare list or malloc (NULL: out
 * of memory); it goes back with grpc_call_end(). */
struct grpc_call *grpc_call_take(struct grpc_worker *w);
/* Ends call (see grpc_call.c). */
void grpc_call_end(struct grpc_call *call);
/* Takes call out of its connection's list. */
void grpc_call_unlink(struct grpc_call *call);
/* Frees w's spare calls. */
void grpc_call_spare_free(struct grpc_worker *w);
/* Sends the answer: msg (a reply) when err is NULL, else Trailers-Only
 * with err. */
void grpc_call_answer(struct grpc_call *call, int http_status, const void *msg, size_t len,
                      const struct permitd_error *err);
/* The request is whole: checks its head and its one message, then hands
 * it to the handler. */
void grpc_call_dispatch(struct grpc_call *call);

#endif
