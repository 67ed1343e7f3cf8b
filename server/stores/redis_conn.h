/*
 * redis_conn.h - what redis.c shares with redis_pipe.c, and no one else.
 *
 * permitd talks to Redis two ways: blocking calls on a connection per
 * thread (redis.c: the admin listener, the sync, health checks, bucket
 * reset and inspection) and pipelined calls on a non-blocking connection
 * driven by a worker's loop (redis_pipe.c). Both make their connections,
 * back off, load scripts and read replies the same way: that part lives in
 * redis.c and is declared here. Like hiredis itself, this header stays
 * inside the two files (everyone else includes redis.h).
 */
#ifndef PERMITD_REDIS_CONN_H
#define PERMITD_REDIS_CONN_H

#include <pthread.h>
#include <stdint.h>

#include "core/config.h"
#include "core/embed.h"
#include "stores/redis.h"
#include "stores/resolve.h"
#include "core/status.h"

struct redisContext;

/* The scripts' file names in lua/, by enum redis_script. */
extern const char *const redis_script_files[REDIS_SCRIPT_COUNT];

struct redis {
    const struct config *cfg;
    const struct embedded_file *scripts[REDIS_SCRIPT_COUNT];
    pthread_key_t key;           /* -> this thread's struct redis_conn */
    _Atomic uint64_t errors;     /* calls that failed on Redis's side */
    _Atomic uint64_t connects;   /* connections made (the first, and reconnects) */
    char where[300];             /* "127.0.0.1:6379" or the socket path, for messages */
    struct resolver *resolver;   /* the host's addresses (resolve.h); NULL with a socket */
};

/* One connection: a thread's blocking one (owned by that thread; freed
 * from the pthread key's destructor), or a pipe's. */
struct redis_conn {
    struct redisContext *ctx;     /* NULL while disconnected */
    int timeout_ms;               /* socket timeout currently set on ctx */
    int64_t retry_at_us;          /* no reconnect attempt before this */
    int backoff_ms;
    char sha[REDIS_SCRIPT_COUNT][41];
    char ip[RESOLVE_ADDR_MAX];    /* the address it connects to ("" with a socket) */
    char last_error[200];         /* why the last connect failed */
};

/* Closes c's connection, if any; c can be connected again. */
void redis_conn_close(struct redis_conn *c);

/* Connects c if it is not, with the backoff after failures, by numeric
 * address (a host name is looked up by the resolver's thread, never by the
 * caller). greet: blocking, within timeout_ms, with AUTH, SELECT and SCRIPT
 * LOAD, and the socket timeout set to timeout_ms; else non-blocking (a
 * pipe: the connect completes, and its handshake goes out, while the
 * caller's loop waits on the socket). PERMITD_OK, or unavailable naming
 * the address and why. */
int redis_conn_ensure(struct redis *r, struct redis_conn *c, int timeout_ms, int greet,
                      struct permitd_error *err);

/* c could not be connected (or, for a pipe, its new connection failed
 * before its first reply): backs off, so a dead Redis is not hammered. The
 * next attempt goes to the host's next address, if it has several.
 * Returns unavailable, with err (may be NULL) naming the address. */
int redis_conn_down(struct redis *r, struct redis_conn *c, struct permitd_error *err);

/* Drops c, whose Redis answered that it cannot serve now: the next call
 * connects afresh, and the host name is looked up again (after a failover
 * it may name the new primary). */
void redis_conn_drop(struct redis *r, struct redis_conn *c);

/* c answered on a new connection: the backoff is over. */
void redis_conn_up(struct redis *r, struct redis_conn *c);

/* The socket timeout for a call: the configured Redis timeout, or less when
 * the caller's deadline is nearer. *bound_by_deadline tells which won.
 * PERMITD_EDEADLINE (negative) when the deadline has passed. */
int redis_call_timeout(struct redis *r, int64_t deadline_us, int *bound_by_deadline,
                       struct permitd_error *err);

/* A connect failed. When the caller's deadline, not the Redis timeout,
 * bounded the connect and it has now passed, the answer is
 * deadline_exceeded (Connect: the deadline expired), not unavailable. */
int redis_conn_failed(struct redis *r, int bound_by_deadline, int64_t deadline_us,
                      struct permitd_error *err);

/* What a reply of hiredis type `type` that is not a script's numbers was,
 * for the log ("an array", "nil", ...). */
const char *redis_reply_kind(int type);

#endif
