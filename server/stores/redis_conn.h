/*
 * redis_conn.h - what redis.c shares with the other redis_*.c files, and
 * no one else.
 *
 * permitd talks to Redis two ways: blocking calls on a connection per
 * thread (redis.c, and redis_script.c for the scripts: the admin listener,
 * the sync, health checks, bucket reset and inspection) and pipelined
 * calls on a non-blocking connection driven by a worker's loop
 * (redis_pipe.c). Both make their connections, back off, load scripts and
 * read replies the same way: that part lives in redis.c and is declared
 * here. Like hiredis itself, this header stays inside the stores layer's
 * redis_*.c files (everyone else includes redis.h).
 */
#ifndef PERMITD_REDIS_CONN_H
#define PERMITD_REDIS_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/config.h"
#include "core/embed.h"
#include "stores/redis.h"
#include "stores/resolve.h"
#include "core/status.h"

struct redisContext;
struct redisReply;
struct redis_route;
struct redis_sentinel;
struct redis_tls;
struct redis_tls_session;
struct cluster_redirect;

/* The nodes one process may talk to: the one Redis, or a cluster's masters
 * (and the nodes redirects named). */
#define REDIS_NODES_MAX 64

/* A Redis server permitd connects to. Made once (single Redis: at start;
 * cluster: when the slot map or a redirect first names it) and kept until
 * redis_free(), so a pointer to it stays valid for the process's life. */
struct redis_node {
    char host[256];               /* as the URL or the cluster named it */
    int port;                     /* 0 with a unix socket */
    char where[300];              /* "127.0.0.1:6379" or the socket path, for messages */
    struct resolver *resolver;    /* the host's addresses (resolve.h); NULL with a socket */
    int index;                    /* in struct redis's nodes[] */
    _Atomic uint64_t errors;      /* failed calls on this node */
    _Atomic uint64_t connects;    /* connections made to it */
};

/* The scripts' file names in lua/, by enum redis_script. */
extern const char *const redis_script_files[REDIS_SCRIPT_COUNT];

struct redis {
    const struct config *cfg;
    const struct embedded_file *scripts[REDIS_SCRIPT_COUNT];
    pthread_key_t key;           /* -> this thread's struct redis_conn */
    _Atomic uint64_t errors;     /* calls that failed on Redis's side */
    _Atomic uint64_t connects;   /* connections made (the first, and reconnects) */
    _Atomic uint64_t script_calls[REDIS_SCRIPT_COUNT];  /* EVALSHAs sent, by script */
    char where[300];             /* the URL, masked: the Redis as a whole, for messages */
    /* nodes[0 .. nnodes): single Redis: the one node; cluster: every node
     * met so far (redis_route.c adds them under its lock, and publishes
     * nnodes after the node is complete). */
    struct redis_node *nodes[REDIS_NODES_MAX];
    _Atomic int nnodes;
    pthread_mutex_t nodes_lock;  /* adding to nodes[] */
    struct redis_route *route;   /* the slot map and its refresher; NULL: single Redis */
    struct redis_tls *tls;       /* rediss: every connection's credentials; NULL: plaintext */
    struct redis_sentinel *sentinel;  /* redis+sentinel: who the master is; NULL: not */
};

/* One connection: a thread's blocking one (owned by that thread; freed
 * from the pthread key's destructor), or a pipe's. */
struct redis_conn {
    struct redis_node *node;      /* the server it connects to */
    struct redisContext *ctx;     /* NULL while disconnected */
    struct redis_tls_session *tls;    /* rediss: ctx's session (redis_tls.h); else NULL */
    int timeout_ms;               /* socket timeout currently set on ctx */
    int64_t retry_at_us;          /* no reconnect attempt before this */
    int backoff_ms;
    char sha[REDIS_SCRIPT_COUNT][41];
    char ip[RESOLVE_ADDR_MAX];    /* the address it connects to ("" with a socket) */
    char last_error[200];         /* why the last connect failed */
    uint64_t epoch;               /* sentinel: redis_sentinel_epoch() when connected */
};

/* One EVALSHA of script (-1: not a script call) sent to Redis: counted for
 * /metrics, so an instance's own share of Redis's work is known however
 * many others share that Redis. */
static inline void redis_count_script(struct redis *r, int script)
{
    if (script >= 0)
        atomic_fetch_add_explicit(&r->script_calls[script], 1, memory_order_relaxed);
}

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

/* ---- The blocking calls (redis.c), which redis_script.c's go through ---- */

/* This thread's connection to node (made on first use; the thread owns it,
 * the pthread key's destructor frees it), connected, with its socket
 * timeout set to timeout_ms; or NULL with err set (unavailable) while the
 * node cannot be reached or the backoff since its last failure has not
 * passed. */
struct redis_conn *redis_conn_acquire(struct redis *r, struct redis_node *node, int timeout_ms,
                                      struct permitd_error *err);

/* A call on c got no reply (hiredis's reader failed): the error that means
 * (deadline_exceeded when the caller's deadline bounded timeout_ms and it
 * ran out, else unavailable naming the node), counted, and c closed (its
 * protocol state is unknown; the next call reconnects at once). Returns
 * the error's code. */
int redis_conn_broken(struct redis *r, struct redis_conn *c, int bound_by_deadline,
                      int timeout_ms, struct permitd_error *err);

/* AUTH, SELECT and SCRIPT LOAD on c, blocking, the socket timeout raised
 * for them: on a fresh connection, and again when Redis answered NOSCRIPT
 * (it lost its scripts). 0, or -1 with c->last_error set. */
int redis_conn_handshake(struct redis *r, struct redis_conn *c);

/* Runs one command, blocking, on this thread's connection to the master
 * that serves key (keylen bytes; NULL: any master; single Redis: the one),
 * within the deadline: MOVED and ASK followed (two hops at most), TRYAGAIN
 * sent again until the Redis timeout. script names an EVALSHA's script
 * (argv[1], the SHA, is then the connection's; NOSCRIPT reloads the
 * scripts and retries once), -1 any other command. On PERMITD_OK *out is a
 * reply that is not an error: free it with freeReplyObject(). */
int redis_call(struct redis *r, const char *key, size_t keylen, int argc, const char **argv,
               const size_t *lens, int script, int64_t deadline_us, struct redisReply **out,
               struct permitd_error *err);

/* ---- Redis Cluster routing (redis_route.c) ---- */

/* Cluster mode: makes r->route, asks the seeds for the slot map once
 * (keeping going without one: calls answer unavailable until the refresher
 * thread, started here, gets it) and starts that thread. */
int redis_route_start(struct redis *r, struct permitd_error *err);

/* Stops the refresher and frees r->route. NULL route is a no-op. */
void redis_route_stop(struct redis *r);

/* The master serving key's slot (in *slot), or NULL while no master does
 * (the map is then refreshed soon). Lock-free: one atomic load. Single
 * Redis: the one node, slot 0. */
struct redis_node *redis_route_node(struct redis *r, const char *key, size_t len, unsigned *slot);

/* The masters of the current map into out[0..max): how many. */
size_t redis_route_masters(struct redis *r, struct redis_node **out, size_t max);

/* A MOVED or ASK reply's target node (made if new; NULL when the registry
 * is full). A MOVED also points the slot at it in the map, counts, and asks
 * the refresher for a new map; an ASK only counts. asked is the node that
 * answered, for a redirect that names no host. */
struct redis_node *redis_route_redirect(struct redis *r, const struct cluster_redirect *rd,
                                        const struct redis_node *asked);

/* A master failed (connection refused, broken, CLUSTERDOWN, READONLY):
 * the refresher fetches a new map soon (at most every 100 ms); with
 * Sentinel, the sentinels are asked again (redis_sentinel_ask()). */
void redis_route_refresh_soon(struct redis *r);

/* ---- Redis Sentinel (redis_sentinel.c) ---- */

/* Sentinel mode: makes nodes[0] (port -1: its address is the sentinels'),
 * r->sentinel and its thread, and waits up to 3 s for a master (keeping
 * going without one: calls answer unavailable until the thread finds it). */
int redis_sentinel_start(struct redis *r, struct permitd_error *err);

/* Stops the thread and frees r->sentinel. NULL sentinel is a no-op. */
void redis_sentinel_stop(struct redis *r);

/* The master's numeric address (ip[RESOLVE_ADDR_MAX]), its name as the
 * sentinels gave it (for TLS), its port and the epoch they belong to: 0;
 * or -1 with why while none is known (the sentinels are then asked). */
int redis_sentinel_master(struct redis *r, char *ip, char *host, size_t hostlen, int *port,
                          uint64_t *epoch, char *why, size_t whylen);

/* Moves on each time the master changes: a connection made in an older
 * epoch goes to a server that may no longer be the master. 0: no sentinel. */
uint64_t redis_sentinel_epoch(const struct redis *r);

/* A call saw the master fail: the sentinels are asked again soon (at most
 * every 100 ms). No-op without a sentinel. */
void redis_sentinel_ask(struct redis *r);

/* c is connected to a master the sentinels no longer name: 1. */
int redis_conn_stale(const struct redis *r, const struct redis_conn *c);

/* The node for host:port, made and added to r->nodes when new (its
 * resolver waits up to wait_ms for a host name's first address). NULL when
 * r->nodes is full or out of memory. */
struct redis_node *redis_node_get(struct redis *r, const char *host, int port, int wait_ms);

/* What a reply of hiredis type `type` that is not a script's numbers was,
 * for the log ("an array", "nil", ...). */
const char *redis_reply_kind(int type);

#endif
