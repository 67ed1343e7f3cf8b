/*
 * redis.c - hiredis behind per-thread connections, deadlines and redirects;
 * the connection setup and reply reading that redis_pipe.c and
 * redis_script.c share.
 *
 * This file holds what every way of calling Redis needs (redis_conn.h): the
 * address, connecting with backoff, the script registry and the handshake,
 * and reading a script's answer and Redis's error replies (pure functions,
 * tests/unit/test_redis.c); then the blocking calls: one command on the
 * node that serves its key (redis_call(): redirects, TRYAGAIN and NOSCRIPT
 * handled), plain commands alone or pipelined, SCAN and PING. The scripts'
 * calls are redis_script.c's; the pipelined calls of a worker's loop are
 * redis_pipe.c's.
 *
 * The idea: the HTTP worker threads are few and long-lived, so each keeps
 * one blocking hiredis connection of its own (thread-local, found through a
 * pthread key whose destructor closes it when the thread ends). No lock is
 * taken on the hot path and no connection is shared.
 *
 * Every call is bounded: the socket timeout is set to the smaller of the
 * caller's remaining deadline and the configured Redis timeout, so a hung
 * Redis costs a request at most that long. A connection that failed in any
 * way is closed at once (its protocol state is unknown); the next call
 * reconnects, but not before a backoff that doubles from 25 ms to 1 s while
 * Redis stays unreachable, so a dead Redis gets at most a few connection
 * attempts a second per thread and requests fail fast in between.
 *
 * Scripts are loaded with SCRIPT LOAD on every new connection (after a
 * restart Redis has none) and called by EVALSHA; NOSCRIPT (SCRIPT FLUSH
 * behind our back) reloads and retries once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "core/clock.h"
#include "core/embed.h"
#include "core/log.h"
#include "stores/cluster.h"
#include "stores/redis.h"
#include "stores/redis_conn.h"
#include "stores/redis_tls.h"
#include "stores/resolve.h"

#define BACKOFF_MIN_MS 25
#define BACKOFF_MAX_MS 1000
#define MAX_ARGV 64             /* a command's argv on the stack; longer ones: argv_fill() */
#define RESOLVE_WAIT_MS 2000    /* at start, for the Redis host's first lookup */

const char *const redis_script_files[REDIS_SCRIPT_COUNT] = {
    [REDIS_SCRIPT_BUCKET] = "bucket.lua",
    [REDIS_SCRIPT_SYNC] = "sync.lua",
    [REDIS_SCRIPT_FIXED_WINDOW] = "fixed_window.lua",
    [REDIS_SCRIPT_SLIDING_WINDOW] = "sliding_window.lua",
    [REDIS_SCRIPT_SLIDING_LOG] = "sliding_log.lua",
    [REDIS_SCRIPT_CONCURRENCY] = "concurrency.lua",
    [REDIS_SCRIPT_LEASE_RETURN] = "lease_return.lua",
    [REDIS_SCRIPT_RESERVATION] = "reservation.lua",
};

const char *redis_script_name(enum redis_script script)
{
    return (unsigned)script < REDIS_SCRIPT_COUNT ? redis_script_files[script] : "?";
}

int redis_script_present(const struct redis *r, enum redis_script script)
{
    return (unsigned)script < REDIS_SCRIPT_COUNT && r->scripts[script] != NULL;
}

/* A thread's blocking connections, one per node it has called (a single
 * Redis: conns[0] only), made on demand. */
struct thread_conns {
    struct redis_conn *conns[REDIS_NODES_MAX];
    int timeout_ms;     /* redis_thread_timeout()'s, 0: the configured one */
};

/* This thread's share of r, made on first use (NULL: out of memory). */
static struct thread_conns *thread_conns(struct redis *r)
{
    struct thread_conns *t = pthread_getspecific(r->key);

    if (t == NULL && (t = calloc(1, sizeof(*t))) != NULL)
        pthread_setspecific(r->key, t);
    return t;
}

/* How long a call on this thread may wait for Redis: the configured Redis
 * timeout (sized for the decision path), or this thread's own
 * (redis_thread_timeout()). */
static int thread_timeout_ms(struct redis *r)
{
    struct thread_conns *t = pthread_getspecific(r->key);

    return t != NULL && t->timeout_ms > 0 ? t->timeout_ms : r->cfg->redis_timeout_ms;
}

int redis_thread_timeout(struct redis *r, int timeout_ms, struct permitd_error *err)
{
    struct thread_conns *t;

    if (timeout_ms < 0 || timeout_ms > REDIS_THREAD_TIMEOUT_MAX_MS)
        return permitd_error_set(err, PERMITD_EINVAL, "a thread's redis timeout of %d ms is "
                                 "not in 0..%d ms", timeout_ms, REDIS_THREAD_TIMEOUT_MAX_MS);
    if ((t = thread_conns(r)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    t->timeout_ms = timeout_ms;
    return PERMITD_OK;
}

static void conn_free(void *p)
{
    struct thread_conns *t = p;

    if (t == NULL)
        return;
    for (int i = 0; i < REDIS_NODES_MAX; i++)
        if (t->conns[i] != NULL) {
            redis_conn_close(t->conns[i]);
            free(t->conns[i]);
        }
    free(t);
}

int redis_new(const struct config *cfg, struct redis **out, struct permitd_error *err)
{
    struct redis *r;

    *out = NULL;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    r->cfg = cfg;
    for (int i = 0; i < REDIS_SCRIPT_COUNT; i++) {
        r->scripts[i] = embed_find(lua_script_files, redis_script_files[i]);
        /* An algorithm's script may be missing from a build (issue 20:
         * they land one by one): its policies fail, the others serve. */
        if (r->scripts[i] == NULL && i != REDIS_SCRIPT_BUCKET && i != REDIS_SCRIPT_SYNC)
            continue;
        if (r->scripts[i] == NULL) {
            free(r);
            return permitd_error_set(err, PERMITD_EINTERNAL,
                                     "script %s is not embedded in this binary", redis_script_files[i]);
        }
    }
    if (pthread_key_create(&r->key, conn_free) != 0) {
        free(r);
        return permitd_error_set(err, PERMITD_EINTERNAL, "pthread_key_create failed");
    }
    pthread_mutex_init(&r->nodes_lock, NULL);
    if (cfg->redis_tls && redis_tls_new(cfg, &r->tls, err) != PERMITD_OK) {
        redis_free(r);
        return err->code;
    }
    if (cfg->redis_sentinel) {
        config_redis_url_masked(cfg, r->where, sizeof(r->where));
        if (redis_sentinel_start(r, err) != PERMITD_OK) {
            redis_free(r);
            return err->code;
        }
    } else if (cfg->redis_cluster) {
        config_redis_url_masked(cfg, r->where, sizeof(r->where));
        if (redis_route_start(r, err) != PERMITD_OK) {
            redis_free(r);
            return err->code;
        }
    } else {
        int sock = cfg->redis_socket[0] != '\0';
        if (redis_node_get(r, sock ? cfg->redis_socket : cfg->redis_host,
                           sock ? 0 : cfg->redis_port, RESOLVE_WAIT_MS) == NULL) {
            redis_free(r);
            return permitd_error_set(err, PERMITD_EINTERNAL, "cannot set up redis at %s%s%d",
                                     sock ? cfg->redis_socket : cfg->redis_host, sock ? "" : ":",
                                     sock ? 0 : cfg->redis_port);
        }
        snprintf(r->where, sizeof(r->where), "%s", r->nodes[0]->where);
    }
    *out = r;
    return PERMITD_OK;
}

void redis_free(struct redis *r)
{
    if (r == NULL)
        return;
    /* The calling thread's connection, if it made one; the worker threads'
     * were freed by the key destructor when they ended. */
    conn_free(pthread_getspecific(r->key));
    pthread_setspecific(r->key, NULL);
    pthread_key_delete(r->key);
    redis_route_stop(r);
    redis_sentinel_stop(r);
    for (int i = 0; i < atomic_load(&r->nnodes); i++) {
        resolver_free(r->nodes[i]->resolver);
        free(r->nodes[i]);
    }
    pthread_mutex_destroy(&r->nodes_lock);
    redis_tls_free(r->tls);
    free(r);
}

static struct timeval tv_ms(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

void redis_conn_close(struct redis_conn *c)
{
    redis_tls_session_free(c->tls);
    c->tls = NULL;
    if (c->ctx != NULL) {
        redisFree(c->ctx);
        c->ctx = NULL;
    }
}

int redis_error_status(const char *reply)
{
    static const char *const codes[] = {"LOADING", "BUSY", "READONLY", "MASTERDOWN",
                                        "TRYAGAIN", "CLUSTERDOWN"};

    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (strncmp(reply, codes[i], strlen(codes[i])) == 0)
            return PERMITD_EUNAVAILABLE;
    return PERMITD_EINTERNAL;
}

int redis_error_noscript(const char *reply)
{
    return strncmp(reply, "NOSCRIPT", 8) == 0;
}

/* Runs one command on a connected context; NULL reply means the connection
 * is broken (ctx->errstr says why). The reply is the caller's to free. */
static redisReply *command(struct redis_conn *c, int argc, const char **argv, const size_t *lens)
{
    return redis_io_command(c->ctx, c->tls, argc, argv, lens);
}

/* How long a connection's greeting may take at least. It is sent once per
 * connection (and again after Redis lost its scripts), not per decision:
 * the scripts' SCRIPT LOADs on a busy Redis may take longer than
 * --redis-timeout-ms, and failing them would mark a healthy node down and
 * refuse every call until its backoff has passed. */
#define REDIS_HANDSHAKE_MS 1000

static int greet(struct redis *r, struct redis_conn *c);

/* AUTH, SELECT and SCRIPT LOAD on a fresh connection, with the socket
 * timeout raised to REDIS_HANDSHAKE_MS for them and set back to
 * c->timeout_ms after. 0 or -1 with c->last_error set. */
int redis_conn_handshake(struct redis *r, struct redis_conn *c)
{
    int rc, raised = c->timeout_ms < REDIS_HANDSHAKE_MS;

    if (raised) {
        redisSetTimeout(c->ctx, tv_ms(REDIS_HANDSHAKE_MS));
        redis_tls_set_timeout(c->tls, REDIS_HANDSHAKE_MS);
    }
    rc = greet(r, c);
    if (raised && c->ctx != NULL) {
        redisSetTimeout(c->ctx, tv_ms(c->timeout_ms));
        redis_tls_set_timeout(c->tls, c->timeout_ms);
    }
    return rc;
}

static int greet(struct redis *r, struct redis_conn *c)
{
    const struct config *cfg = r->cfg;
    redisReply *rep;
    char db[16];

    if (cfg->redis_password[0] != '\0') {
        const char *argv[3] = {"AUTH", cfg->redis_user, cfg->redis_password};
        size_t lens[3] = {4, strlen(cfg->redis_user), strlen(cfg->redis_password)};
        int argc = cfg->redis_user[0] ? 3 : 2;
        if (argc == 2) {
            argv[1] = cfg->redis_password;
            lens[1] = lens[2];
        }
        rep = command(c, argc, argv, lens);
        if (rep == NULL || rep->type == REDIS_REPLY_ERROR) {
            snprintf(c->last_error, sizeof(c->last_error), "AUTH failed: %s",
                     rep ? rep->str : c->ctx->errstr);
            freeReplyObject(rep);
            return -1;
        }
        freeReplyObject(rep);
    }
    if (cfg->redis_db != 0) {
        snprintf(db, sizeof(db), "%d", cfg->redis_db);
        const char *argv[2] = {"SELECT", db};
        size_t lens[2] = {6, strlen(db)};
        rep = command(c, 2, argv, lens);
        if (rep == NULL || rep->type == REDIS_REPLY_ERROR) {
            snprintf(c->last_error, sizeof(c->last_error), "SELECT %s failed: %s", db,
                     rep ? rep->str : c->ctx->errstr);
            freeReplyObject(rep);
            return -1;
        }
        freeReplyObject(rep);
    }
    for (int i = 0; i < REDIS_SCRIPT_COUNT; i++) {
        if (r->scripts[i] == NULL)
            continue;
        const char *argv[3] = {"SCRIPT", "LOAD", r->scripts[i]->data};
        size_t lens[3] = {6, 4, r->scripts[i]->len};
        rep = command(c, 3, argv, lens);
        if (rep == NULL || rep->type != REDIS_REPLY_STRING || rep->len != 40) {
            snprintf(c->last_error, sizeof(c->last_error), "SCRIPT LOAD %s failed: %s",
                     redis_script_files[i],
                     rep ? (rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply")
                         : c->ctx->errstr);
            freeReplyObject(rep);
            return -1;
        }
        memcpy(c->sha[i], rep->str, 41);
        freeReplyObject(rep);
    }
    return 0;
}

/* c could not be connected (or, for a pipe, its new connection failed
 * before its first reply): backs off, so a dead Redis is not hammered. The
 * next attempt goes to the host's next address, if it has several. */
int redis_conn_down(struct redis *r, struct redis_conn *c, struct permitd_error *err)
{
    redis_conn_close(c);
    if (c->ip[0] != '\0' && c->node->resolver != NULL) {
        resolver_failed(c->node->resolver, c->ip);
        c->ip[0] = '\0';
    }
    redis_route_refresh_soon(r);        /* a master that cannot be reached: failed over? */
    atomic_fetch_add(&c->node->errors, 1);
    c->backoff_ms = c->backoff_ms == 0 ? BACKOFF_MIN_MS
                  : (c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2);
    c->retry_at_us = clock_now_us() + (int64_t)c->backoff_ms * 1000;
    log_msg(LOG_LEVEL_WARN, "redis connect failed", "addr=%s error=\"%s\" retry_in_ms=%d",
            c->node->where, c->last_error, c->backoff_ms);
    atomic_fetch_add(&r->errors, 1);
    return permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s is unavailable: %s",
                             c->node->where, c->last_error);
}

/* Drops c, whose Redis answered that it cannot serve now: the next call
 * connects afresh, and the host name is looked up again (after a failover
 * it may name the new primary). */
void redis_conn_drop(struct redis *r, struct redis_conn *c)
{
    redis_conn_close(c);
    if (c->ip[0] != '\0' && c->node->resolver != NULL) {
        resolver_failed(c->node->resolver, c->ip);
        c->ip[0] = '\0';
    }
    redis_route_refresh_soon(r);
}

/* Sentinel: c was connected in an older epoch (redis_conn.h). */
int redis_conn_stale(const struct redis *r, const struct redis_conn *c)
{
    return r->sentinel != NULL && c->ctx != NULL && c->epoch != redis_sentinel_epoch(r);
}

/* c answered on a new connection: the backoff is over. */
void redis_conn_up(struct redis *r, struct redis_conn *c)
{
    if (c->backoff_ms != 0)
        log_msg(LOG_LEVEL_INFO, "redis reconnected", "addr=%s", c->node->where);
    (void)r;
    c->backoff_ms = 0;
    c->retry_at_us = 0;
}

/* Connects c if it is not, with the backoff after failures, by numeric
 * address (a host name is looked up by the resolver's thread, never by the
 * caller). greet: blocking, within timeout_ms, with redis_conn_handshake(),
 * and the socket timeout set to timeout_ms; else non-blocking (a pipe: the
 * connect completes, and the handshake goes out, while the caller's loop
 * waits on the socket). */
int redis_conn_ensure(struct redis *r, struct redis_conn *c, int timeout_ms, int greet,
                       struct permitd_error *err)
{
    const char *sock = c->node->host, *name = c->node->host;
    int unix_socket = c->node->port == 0, port = c->node->port;
    struct timeval tv = tv_ms(timeout_ms);
    char master[256];
    int64_t now;

    if (c->ctx != NULL && redis_conn_stale(r, c)) {
        /* Sentinel: the master changed since c connected; the old one may
         * be a replica now (READONLY) or unreachable (a hang). */
        redis_conn_close(c);
        c->retry_at_us = 0;
    }
    if (c->ctx != NULL) {
        if (greet && c->timeout_ms != timeout_ms) {
            redisSetTimeout(c->ctx, tv);
            redis_tls_set_timeout(c->tls, timeout_ms);
            c->timeout_ms = timeout_ms;
        }
        return PERMITD_OK;
    }
    now = clock_now_us();
    if (now < c->retry_at_us && redis_sentinel_epoch(r) == c->epoch) {
        redis_route_refresh_soon(r);    /* cluster: has a replica taken over? */
        return permitd_error_set(err, PERMITD_EUNAVAILABLE,
                                 "redis at %s is unavailable (%s); next attempt in %lld ms",
                                 c->node->where, c->last_error,
                                 (long long)((c->retry_at_us - now + 999) / 1000));
    }
    if (r->sentinel != NULL) {
        if (redis_sentinel_master(r, c->ip, master, sizeof(master), &port, &c->epoch,
                                  c->last_error, sizeof(c->last_error)) != 0)
            return redis_conn_down(r, c, err);
        name = master;          /* the name its certificate carries */
    } else if (!unix_socket &&
               resolver_address(c->node->resolver, c->ip, c->last_error,
                                sizeof(c->last_error)) != 0) {
        return redis_conn_down(r, c, err);
    }
    if (greet)
        c->ctx = unix_socket ? redisConnectUnixWithTimeout(sock, tv)
                             : redisConnectWithTimeout(c->ip, port, tv);
    else
        c->ctx = unix_socket ? redisConnectUnixNonBlock(sock) : redisConnectNonBlock(c->ip, port);
    if (c->ctx == NULL || c->ctx->err) {
        const char *why = c->ctx ? c->ctx->errstr : "out of memory";
        if (unix_socket)
            snprintf(c->last_error, sizeof(c->last_error), "%s", why);
        else
            snprintf(c->last_error, sizeof(c->last_error), "%.120s (address %s)", why, c->ip);
        return redis_conn_down(r, c, err);
    }
    if (!unix_socket)
        redisEnableKeepAlive(c->ctx);
    if (r->tls != NULL) {
        struct permitd_error why = {0, ""};
        /* Blocking: the handshake now, within REDIS_HANDSHAKE_MS at least
         * (once per connection, as the greeting). A pipe: its first writes
         * and reads drive it on the worker's loop, as the connect itself
         * (its batch's deadline bounds both). */
        int hs_ms = timeout_ms < REDIS_HANDSHAKE_MS ? REDIS_HANDSHAKE_MS : timeout_ms;
        if (redis_tls_start(r->tls, c->ctx, name, c->node->where, hs_ms, greet,
                            &c->tls, &why) != PERMITD_OK) {
            snprintf(c->last_error, sizeof(c->last_error), "%.190s", why.message);
            return redis_conn_down(r, c, err);
        }
    }
    atomic_fetch_add(&r->connects, 1);
    atomic_fetch_add(&c->node->connects, 1);
    if (!greet)
        return PERMITD_OK;      /* a pipe's handshake goes out with its first batch */
    redisSetTimeout(c->ctx, tv);
    redis_tls_set_timeout(c->tls, timeout_ms);
    c->timeout_ms = timeout_ms;
    if (redis_conn_handshake(r, c) != 0)
        return redis_conn_down(r, c, err);
    redis_conn_up(r, c);
    return PERMITD_OK;
}

/* Returns this thread's connection to node, connected, with its socket
 * timeout set to timeout_ms; or NULL with err set (unavailable) while the
 * node cannot be reached or the backoff since the last failure has not
 * passed. */
struct redis_conn *redis_conn_acquire(struct redis *r, struct redis_node *node, int timeout_ms,
                                      struct permitd_error *err)
{
    struct thread_conns *t = thread_conns(r);
    struct redis_conn *c;

    if (t == NULL) {
        permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        return NULL;
    }
    c = t->conns[node->index];
    if (c == NULL) {
        c = calloc(1, sizeof(*c));
        if (c == NULL) {
            permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            return NULL;
        }
        c->node = node;
        t->conns[node->index] = c;
    }
    return redis_conn_ensure(r, c, timeout_ms, 1, err) == PERMITD_OK ? c : NULL;
}

/* The socket timeout for a call: the configured Redis timeout (this
 * thread's own, when it set one: redis_thread_timeout()), or less when the
 * caller's deadline is nearer. *bound_by_deadline tells which won. */
int redis_call_timeout(struct redis *r, int64_t deadline_us, int *bound_by_deadline,
                        struct permitd_error *err)
{
    int64_t left_ms = (deadline_us - clock_now_us()) / 1000;
    int timeout_ms = thread_timeout_ms(r);

    *bound_by_deadline = 0;
    if (left_ms <= 0) {
        *bound_by_deadline = 1;
        return permitd_error_set(err, PERMITD_EDEADLINE, "deadline exceeded before calling redis");
    }
    if (left_ms < timeout_ms) {
        *bound_by_deadline = 1;
        return (int)left_ms;
    }
    return timeout_ms;
}

/* Turns a broken connection into an error, dropping the connection. */
int redis_conn_broken(struct redis *r, struct redis_conn *c, int bound_by_deadline,
                      int timeout_ms, struct permitd_error *err)
{
    int timed_out = c->ctx->err == REDIS_ERR_IO &&
                    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINPROGRESS);
    int rc;

    if (timed_out && bound_by_deadline)
        rc = permitd_error_set(err, PERMITD_EDEADLINE,
                               "deadline exceeded waiting %d ms for redis", timeout_ms);
    else if (timed_out)
        rc = permitd_error_set(err, PERMITD_EUNAVAILABLE,
                               "redis at %s did not answer within %d ms", c->node->where, timeout_ms);
    else
        rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s",
                               c->node->where, c->ctx->errstr);
    snprintf(c->last_error, sizeof(c->last_error), "%.190s", err ? err->message : "broken");
    atomic_fetch_add(&r->errors, 1);
    atomic_fetch_add(&c->node->errors, 1);
    if (!timed_out)
        redis_route_refresh_soon(r);
    redis_conn_close(c);
    /* Reconnect on the next call without waiting: one failure is often just
     * a restart. Backoff starts only if that reconnect fails too. */
    c->retry_at_us = 0;
    return rc;
}

/* redis_conn_acquire() or a pipe's connect failed (redis_conn.h). */
int redis_conn_failed(struct redis *r, int bound_by_deadline, int64_t deadline_us,
                       struct permitd_error *err)
{
    if (err == NULL)
        return PERMITD_EUNAVAILABLE;
    /* Under 1 ms left counts as passed, as in redis_call_timeout(). */
    if (bound_by_deadline && err->code == PERMITD_EUNAVAILABLE &&
        (deadline_us - clock_now_us()) / 1000 <= 0)
        return permitd_error_set(err, PERMITD_EDEADLINE,
                                 "deadline exceeded connecting to redis at %s", r->where);
    return err->code;
}

#define REDIRECTED 1    /* call_node(): the node answered MOVED or ASK */
#define TRY_AGAIN 2     /* call_node(): TRYAGAIN (a slot's keys half migrated) */
#define TRYAGAIN_PAUSE_US 5000  /* then the call is sent again after this */

/* Runs one command on this thread's connection to node within the
 * deadline; with asking, an ASKING goes just before it (an ASK redirect).
 * For an EVALSHA, `script` names it so a NOSCRIPT reply reloads the
 * scripts on that node and retries once (argv[1] is then replaced by the
 * fresh SHA); otherwise pass -1. On PERMITD_OK *out is a reply that is not
 * an error (free it with freeReplyObject); REDIRECTED (cluster mode) with
 * *rd filled when the node sent the call elsewhere; TRY_AGAIN (cluster
 * mode) when the node answered TRYAGAIN (err says so); every failure is
 * turned into err here. */
static int call_node(struct redis *r, struct redis_node *node, int asking, int argc,
                     const char **argv, const size_t *lens, int script, int64_t deadline_us,
                     redisReply **out, struct cluster_redirect *rd, struct permitd_error *err)
{
    static const char *const asking_argv[1] = {"ASKING"};
    static const size_t asking_len[1] = {6};
    int bound, timeout_ms, rc;
    struct redis_conn *c;
    redisReply *rep = NULL;

    *out = NULL;
    timeout_ms = redis_call_timeout(r, deadline_us, &bound, err);
    if (timeout_ms < 0)
        return timeout_ms;
    c = redis_conn_acquire(r, node, timeout_ms, err);
    if (c == NULL)
        return redis_conn_failed(r, bound, deadline_us, err);
    if (script >= 0)
        argv[1] = c->sha[script];

    for (int attempt = 0; attempt < 2; attempt++) {
        if (asking) {
            rep = command(c, 1, (const char **)asking_argv, asking_len);
            if (rep == NULL)
                return redis_conn_broken(r, c, bound, timeout_ms, err);
            freeReplyObject(rep);
        }
        redis_count_script(r, script);
        rep = command(c, argc, argv, lens);
        if (rep == NULL)
            return redis_conn_broken(r, c, bound, timeout_ms, err);
        if (script >= 0 && attempt == 0 && rep->type == REDIS_REPLY_ERROR &&
            redis_error_noscript(rep->str)) {
            freeReplyObject(rep);
            rep = NULL;
            log_msg(LOG_LEVEL_WARN, "redis lost its scripts; reloading", "addr=%s", node->where);
            if (redis_conn_handshake(r, c) != 0) {
                rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s",
                                       node->where, c->last_error);
                redis_conn_close(c);
                return rc;
            }
            argv[1] = c->sha[script];
            continue;
        }
        break;
    }

    if (rep->type == REDIS_REPLY_ERROR && r->route != NULL &&
        cluster_redirect_parse(rep->str, rep->len, rd) != CLUSTER_REDIRECT_NONE) {
        freeReplyObject(rep);
        return REDIRECTED;
    }
    if (rep->type == REDIS_REPLY_ERROR && r->route != NULL && strncmp(rep->str, "TRYAGAIN", 8) == 0) {
        permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s", node->where, rep->str);
        freeReplyObject(rep);
        return TRY_AGAIN;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        /* Anything but a Redis that cannot serve now is a bug of ours (a
         * script error, say). */
        int transient = redis_error_status(rep->str) == PERMITD_EUNAVAILABLE;
        rc = permitd_error_set(err, transient ? PERMITD_EUNAVAILABLE : PERMITD_EINTERNAL,
                               "redis at %s: %s", node->where, rep->str);
        if (transient)
            redis_conn_drop(r, c);
        freeReplyObject(rep);
        return rc;
    }
    *out = rep;
    return PERMITD_OK;
}

/* Runs one command on the node that serves key (len bytes; NULL: any
 * master), following redirects: MOVED (the map is pointed at the new
 * owner) and ASK (ASKING then the call, on the node named, once), at most
 * two hops; TRYAGAIN (a multi-key call whose slot is half migrated) sends
 * it again to the same node every 5 ms until the Redis timeout or the
 * deadline comes. Otherwise as call_node(). */
int redis_call(struct redis *r, const char *key, size_t keylen, int argc, const char **argv,
               const size_t *lens, int script, int64_t deadline_us, redisReply **out,
               struct permitd_error *err)
{
    struct cluster_redirect rd;
    struct redis_node *node;
    unsigned slot = 0;
    int asking = 0, rc, hop = 0;
    int64_t give_up_us = clock_now_us() + (int64_t)thread_timeout_ms(r) * 1000;

    *out = NULL;
    if (deadline_us < give_up_us)
        give_up_us = deadline_us;
    if (r->route == NULL) {
        node = r->nodes[0];
    } else if (key != NULL) {
        if ((node = redis_route_node(r, key, keylen, &slot)) == NULL)
            return permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis cluster %s: no master "
                                     "serves slot %u (of key \"%.*s\") yet", r->where, slot,
                                     (int)(keylen > 80 ? 80 : keylen), key);
    } else if (redis_route_masters(r, &node, 1) == 0) {
        redis_route_refresh_soon(r);
        return permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis cluster %s: the slot map "
                                 "is not known yet (no seed answered)", r->where);
    }
    for (;; hop++) {
        rc = call_node(r, node, asking, argc, argv, lens, script, deadline_us, out, &rd, err);
        if (rc == TRY_AGAIN) {
            if (clock_now_us() + TRYAGAIN_PAUSE_US >= give_up_us)
                return PERMITD_EUNAVAILABLE;    /* err says TRYAGAIN */
            usleep(TRYAGAIN_PAUSE_US);
            hop--;
            continue;
        }
        if (rc != REDIRECTED)
            return rc;
        if (hop == 2 || (node = redis_route_redirect(r, &rd, node)) == NULL)
            return permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis cluster %s: slot %u "
                                     "is still redirected (%s to %s:%d) after %d hops", r->where,
                                     rd.slot, rd.kind == CLUSTER_REDIRECT_ASK ? "ASK" : "MOVED",
                                     rd.host, rd.port, hop + 1);
        asking = rd.kind == CLUSTER_REDIRECT_ASK;
    }
}

/* What a reply that is not a script's numbers was, for the log. */
const char *redis_reply_kind(int type)
{
    switch (type) {
    case REDIS_REPLY_STRING: return "a malformed string";
    case REDIS_REPLY_ARRAY: return "an array";
    case REDIS_REPLY_INTEGER: return "an integer";
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_STATUS: return "a status";
    default: return "an error";
    }
}

int redis_answer_numbers(const char *s, size_t len, long long *out, int nout,
                         struct permitd_error *err)
{
    if (len % 8 != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "a script's answer of %zu bytes is not "
                                 "a whole number of 8-byte doubles", len);
    for (size_t i = 0; i < len / 8; i++) {
        const unsigned char *b = (const unsigned char *)s + 8 * i;
        uint64_t bits = 0;
        double d;

        for (int k = 7; k >= 0; k--)
            bits = bits << 8 | b[k];
        memcpy(&d, &bits, sizeof(d));
        /* NaN fails every comparison; the range check makes the cast safe. */
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) ||
            d != (double)(long long)d)
            return permitd_error_set(err, PERMITD_EINTERNAL, "number %zu of a script's answer "
                                     "is %.17g, not a whole number a long long holds", i, d);
        if (i < (size_t)nout)
            out[i] = (long long)d;
    }
    for (size_t i = len / 8; i < (size_t)nout; i++)
        out[i] = 0;
    return PERMITD_OK;
}

int redis_answer_records(const char *s, size_t len, size_t rec_bytes, long long *out, int nout,
                         struct permitd_error *err)
{
    int numbers = rec_bytes == REDIS_RECORD_SHORT ? REDIS_RECORD_SHORT_NUMBERS
                                                  : REDIS_RECORD_NUMBERS;
    size_t n;
    int rc;

    if (rec_bytes != REDIS_RECORD_BYTES && rec_bytes != REDIS_RECORD_SHORT)
        return permitd_error_set(err, PERMITD_EINTERNAL, "a record of %zu bytes is neither "
                                 "%d nor %d", rec_bytes, REDIS_RECORD_BYTES, REDIS_RECORD_SHORT);
    if (len % rec_bytes != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "a script's answer of %zu bytes is not "
                                 "a whole number of %zu-byte records", len, rec_bytes);
    n = len / rec_bytes;
    for (size_t i = 0; i < n && (int)(i * REDIS_RECORD_WORDS) < nout; i++) {
        long long *o = out + i * REDIS_RECORD_WORDS;
        int room = nout - (int)(i * REDIS_RECORD_WORDS);
        const char *rec = s + i * rec_bytes;
        /* (a short RECORD's missing numbers read 0: redis_answer_numbers()) */
        if ((rc = redis_answer_numbers(rec, 8 * (size_t)numbers, o,
                                       room < REDIS_RECORD_NUMBERS ? room : REDIS_RECORD_NUMBERS,
                                       err)) != PERMITD_OK)
            return rc;
        if (room < REDIS_RECORD_WORDS)
            continue;
        if (rec_bytes == REDIS_RECORD_BYTES)
            memcpy(o + REDIS_RECORD_LEASE, rec + 8 * REDIS_RECORD_NUMBERS, 32);
        else
            memset(o + REDIS_RECORD_LEASE, 0, 32);     /* a short RECORD: no lease */
    }
    for (size_t i = n * REDIS_RECORD_WORDS; i < (size_t)nout; i++)
        out[i] = 0;
    return PERMITD_OK;
}

int redis_answer_read(enum redis_script script, const char *s, size_t len, long long *out,
                      int nout, struct permitd_error *err)
{
    size_t items = nout > 0 && nout % REDIS_RECORD_WORDS == 0
                   ? (size_t)nout / REDIS_RECORD_WORDS : 0;
    size_t rec = items > 0 && len % items == 0 ? len / items : 0;

    if (script != REDIS_SCRIPT_SYNC && (rec == REDIS_RECORD_BYTES || rec == REDIS_RECORD_SHORT))
        return redis_answer_records(s, len, rec, out, nout, err);
    return redis_answer_numbers(s, len, out, nout, err);
}

int redis_scan(struct redis *r, char cursor[24], const char *pattern, int count,
               int64_t deadline_us, void (*each)(void *ud, const char *s, size_t len),
               void *ud, struct permitd_error *err)
{
    char count_s[12], node_cursor[24] = "0";
    const char *argv[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", count_s};
    struct redis_node *masters[REDIS_NODES_MAX];
    struct cluster_redirect rd;
    size_t lens[6], nmasters = 0;
    unsigned long master = 0;
    redisReply *rep;
    int rc;

    snprintf(count_s, sizeof(count_s), "%d", count);
    if (r->route != NULL) {
        /* Every master in turn: the cursor reads "<master>-<its cursor>". */
        char *dash = strchr(cursor, '-');
        nmasters = redis_route_masters(r, masters, REDIS_NODES_MAX);
        if (nmasters == 0)
            return permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis cluster %s: the slot "
                                     "map is not known yet (no seed answered)", r->where);
        if (dash != NULL) {
            master = strtoul(cursor, NULL, 10);
            snprintf(node_cursor, sizeof(node_cursor), "%s", dash + 1);
        }
        if (master >= nmasters)     /* the cluster lost a master mid-scan: done */
            return snprintf(cursor, 24, "0"), PERMITD_OK;
        argv[1] = node_cursor;
    }
    for (int i = 0; i < 6; i++)
        lens[i] = strlen(argv[i]);
    rc = r->route == NULL
         ? redis_call(r, NULL, 0, 6, argv, lens, -1, deadline_us, &rep, err)
         : call_node(r, masters[master], 0, 6, argv, lens, -1, deadline_us, &rep, &rd, err);
    if (rc == REDIRECTED)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "SCAN was redirected");
    if (rc != PERMITD_OK)
        return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_STRING || rep->element[0]->len >= 24 ||
        rep->element[1]->type != REDIS_REPLY_ARRAY) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "SCAN answered with %s, not a cursor "
                               "and keys", redis_reply_kind(rep->type));
        freeReplyObject(rep);
        return rc;
    }
    if (r->route == NULL)
        memcpy(cursor, rep->element[0]->str, rep->element[0]->len + 1);
    else if (strcmp(rep->element[0]->str, "0") != 0) {
        char next[48];
        int len = snprintf(next, sizeof(next), "%lu-%s", master, rep->element[0]->str);
        if (len < 0 || len >= 24) {
            freeReplyObject(rep);
            return permitd_error_set(err, PERMITD_EINTERNAL, "SCAN cursor \"%s\" of master %lu "
                                     "is too long", next, master);
        }
        memcpy(cursor, next, (size_t)len + 1);
    }
    else if (master + 1 < nmasters)
        snprintf(cursor, 24, "%lu-0", master + 1);
    else
        snprintf(cursor, 24, "0");
    for (size_t i = 0; i < rep->element[1]->elements; i++) {
        const redisReply *k = rep->element[1]->element[i];
        if (k->type == REDIS_REPLY_STRING)
            each(ud, k->str, k->len);
    }
    freeReplyObject(rep);
    return PERMITD_OK;
}

size_t redis_masters(struct redis *r)
{
    struct redis_node *masters[REDIS_NODES_MAX];

    return redis_route_masters(r, masters, REDIS_NODES_MAX);
}

int redis_scan_master(struct redis *r, size_t master, char node[REDIS_WHERE_MAX], char cursor[24],
                      const char *pattern, int count, int64_t deadline_us,
                      void (*each)(void *ud, const char *s, size_t len), void *ud,
                      struct permitd_error *err)
{
    char count_s[12];
    const char *argv[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", count_s};
    struct redis_node *masters[REDIS_NODES_MAX];
    size_t lens[6], nmasters = redis_route_masters(r, masters, REDIS_NODES_MAX);
    struct cluster_redirect rd;
    redisReply *rep;
    int rc;

    if (master >= nmasters || (node[0] != '\0' && strcmp(node, masters[master]->where) != 0))
        return permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis %s: master %zu is no longer "
                                 "%s (the masters changed during the scan)", r->where, master,
                                 node[0] ? node : "known");
    snprintf(node, REDIS_WHERE_MAX, "%s", masters[master]->where);
    snprintf(count_s, sizeof(count_s), "%d", count);
    for (int i = 0; i < 6; i++)
        lens[i] = strlen(argv[i]);
    rc = call_node(r, masters[master], 0, 6, argv, lens, -1, deadline_us, &rep, &rd, err);
    if (rc == REDIRECTED)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "SCAN was redirected by %s", node);
    if (rc != PERMITD_OK)
        return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_STRING || rep->element[0]->len >= 24 ||
        rep->element[1]->type != REDIS_REPLY_ARRAY) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "SCAN on %s answered with %s, not a "
                               "cursor and keys", node, redis_reply_kind(rep->type));
        freeReplyObject(rep);
        return rc;
    }
    memcpy(cursor, rep->element[0]->str, rep->element[0]->len + 1);
    for (size_t i = 0; i < rep->element[1]->elements; i++) {
        const redisReply *k = rep->element[1]->element[i];
        if (k->type == REDIS_REPLY_STRING)
            each(ud, k->str, k->len);
    }
    freeReplyObject(rep);
    return PERMITD_OK;
}

/* The argv of one plain command: on the stack up to MAX_ARGV entries, from
 * the heap beyond (a hot keys list is a ZADD of 2 + 4 x HOTKEYS_K). Filled
 * by argv_fill(), released by argv_release() whatever it returned. */
struct argv_buf {
    const char **v;
    size_t *len;
    const char *stack_v[MAX_ARGV];
    size_t stack_len[MAX_ARGV];
};

static int argv_fill(struct argv_buf *b, const struct redis_str *args, int n)
{
    b->v = b->stack_v;
    b->len = b->stack_len;
    if (n > MAX_ARGV) {
        b->v = malloc((size_t)n * sizeof(*b->v));
        b->len = malloc((size_t)n * sizeof(*b->len));
        if (b->v == NULL || b->len == NULL)
            return -1;
    }
    for (int i = 0; i < n; i++) {
        b->v[i] = args[i].p;
        b->len[i] = args[i].len;
    }
    return 0;
}

static void argv_release(struct argv_buf *b)
{
    if (b->v != b->stack_v)
        free(b->v);
    if (b->len != b->stack_len)
        free(b->len);
}

int redis_command(struct redis *r, const struct redis_str *args, int nargs,
                  int64_t deadline_us, long long *integer,
                  void (*each)(void *ud, const char *s, size_t len), void *ud,
                  struct permitd_error *err)
{
    struct argv_buf a;
    redisReply *rep;
    int rc;

    if (argv_fill(&a, args, nargs) != 0) {
        argv_release(&a);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    rc = redis_call(r, nargs > 1 ? a.v[1] : NULL, nargs > 1 ? a.len[1] : 0, nargs, a.v, a.len,
                    -1, deadline_us, &rep, err);
    argv_release(&a);
    if (rc != PERMITD_OK)
        return rc;
    if (integer != NULL)
        *integer = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    if (each != NULL && rep->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < rep->elements; i++)
            if (rep->element[i]->type == REDIS_REPLY_STRING)
                each(ud, rep->element[i]->str, (size_t)rep->element[i]->len);
    if (each != NULL && (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS))
        each(ud, rep->str, (size_t)rep->len);
    freeReplyObject(rep);
    return PERMITD_OK;
}

/* Hands a command's reply to its call: an array's strings, or one string
 * or status (as redis_command()); the strings of an array inside the
 * array follow in their place (SSCAN: the cursor, then the members); an
 * integer into call->integer. */
static void hand_over(struct redis_command_call *call, const redisReply *rep)
{
    if (rep->type == REDIS_REPLY_INTEGER)
        call->integer = rep->integer;
    if (call->each == NULL)
        return;
    if (rep->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < rep->elements; i++) {
            const redisReply *e = rep->element[i];
            if (e->type == REDIS_REPLY_STRING)
                call->each(call->ud, e->str, (size_t)e->len);
            for (size_t k = 0; e->type == REDIS_REPLY_ARRAY && k < e->elements; k++)
                if (e->element[k]->type == REDIS_REPLY_STRING)
                    call->each(call->ud, e->element[k]->str, (size_t)e->element[k]->len);
        }
    if (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS)
        call->each(call->ud, rep->str, (size_t)rep->len);
}

/* The calls of calls[0..n) that node[] sends to `at` (rc -1), in one write
 * on this thread's connection to it, their replies read in order. A
 * redirect or TRYAGAIN leaves its call at -1 with node[i] NULL (sent alone
 * by the caller); an error reply fails its call only. A connection that
 * cannot be made or breaks fails every call of `at` still unanswered, and
 * is returned (the caller decides whether it is the whole pipeline's). */
static int command_group(struct redis *r, struct redis_node *at, struct redis_node **node,
                         struct redis_command_call *calls, size_t n, int64_t deadline_us,
                         struct permitd_error *err)
{
    struct redis_conn *c = NULL;
    int bound, timeout_ms, rc = PERMITD_OK;
    size_t sent = 0;

    if ((timeout_ms = redis_call_timeout(r, deadline_us, &bound, err)) < 0)
        rc = timeout_ms;
    else if ((c = redis_conn_acquire(r, at, timeout_ms, err)) == NULL)
        rc = redis_conn_failed(r, bound, deadline_us, err);
    for (size_t i = 0; i < n && rc == PERMITD_OK; i++) {
        struct argv_buf a;
        int appended;

        if (node[i] != at || calls[i].rc != -1)
            continue;
        appended = argv_fill(&a, calls[i].args, calls[i].nargs) == 0 &&
                   redisAppendCommandArgv(c->ctx, calls[i].nargs, a.v, a.len) == REDIS_OK;
        argv_release(&a);
        if (!appended) {
            redis_conn_close(c);        /* half a batch in its buffer: not to be sent */
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            break;
        }
        calls[i].rc = -2;               /* sent: its reply comes in order */
        sent++;
    }
    for (size_t i = 0; i < n && sent > 0 && rc == PERMITD_OK; i++) {
        redisReply *rep = NULL;
        struct cluster_redirect rd;

        if (node[i] != at || calls[i].rc != -2)
            continue;
        sent--;
        if (redis_io_get_reply(c->ctx, c->tls, (void **)&rep) != REDIS_OK || rep == NULL) {
            rc = redis_conn_broken(r, c, bound, timeout_ms, err);
            break;
        }
        if (rep->type == REDIS_REPLY_ERROR && r->route != NULL &&
            (strncmp(rep->str, "TRYAGAIN", 8) == 0 ||
             cluster_redirect_parse(rep->str, rep->len, &rd) != CLUSTER_REDIRECT_NONE)) {
            calls[i].rc = -1;
            node[i] = NULL;             /* alone, by the caller */
        } else if (rep->type == REDIS_REPLY_ERROR) {
            log_msg(LOG_LEVEL_WARN, "redis command failed", "command=%.*s error=\"%.200s\"",
                    (int)calls[i].args[0].len, calls[i].args[0].p, rep->str);
            calls[i].rc = redis_error_status(rep->str);
        } else {
            hand_over(&calls[i], rep);
            calls[i].rc = PERMITD_OK;
        }
        freeReplyObject(rep);
    }
    for (size_t i = 0; i < n && rc != PERMITD_OK; i++)
        if (node[i] == at && (calls[i].rc == -1 || calls[i].rc == -2))
            calls[i].rc = rc;
    return rc;
}

int redis_command_pipeline(struct redis *r, struct redis_command_call *calls, size_t n,
                           int64_t deadline_us, struct permitd_error *err)
{
    struct redis_node **node = calloc(n + 1, sizeof(*node));
    int rc = PERMITD_OK;

    if (node == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        unsigned slot;

        calls[i].rc = -1;               /* not answered yet */
        if (calls[i].nargs < 1)
            calls[i].rc = permitd_error_set(err, PERMITD_EINTERNAL, "a pipelined command of "
                                            "no arguments");
        else if (r->route == NULL)
            node[i] = r->nodes[0];
        else if (calls[i].nargs > 1)
            node[i] = redis_route_node(r, calls[i].args[1].p, calls[i].args[1].len, &slot);
    }
    for (size_t first = 0; first < n && rc != PERMITD_EDEADLINE; first++) {
        struct permitd_error e = {0, ""};
        int failed;

        if (calls[first].rc != -1 || node[first] == NULL)
            continue;
        failed = command_group(r, node[first], node, calls, n, deadline_us, &e);
        if (failed == PERMITD_OK)
            continue;
        /* A single Redis that fails fails the whole pipeline; in a cluster a
         * master fails its own calls, and the deadline ends the lot. */
        if (r->route == NULL || failed == PERMITD_EDEADLINE)
            rc = permitd_error_set(err, failed, "%s", e.message);
        else
            log_msg(LOG_LEVEL_WARN, "redis commands failed", "error=\"%.200s\"", e.message);
    }
    for (size_t i = 0; i < n; i++) {
        struct permitd_error e = {0, ""};
        redisReply *rep = NULL;
        struct argv_buf a;

        if (calls[i].rc != -1)
            continue;
        if (rc != PERMITD_OK) {
            calls[i].rc = rc;
            continue;
        }
        /* Sent alone: redirected, TRYAGAIN, or no master known for its slot
         * (redis_call() follows, waits or names the slot). */
        if (argv_fill(&a, calls[i].args, calls[i].nargs) != 0)
            calls[i].rc = permitd_error_set(&e, PERMITD_EINTERNAL, "out of memory");
        else
            calls[i].rc = redis_call(r, calls[i].nargs > 1 ? a.v[1] : NULL,
                                     calls[i].nargs > 1 ? a.len[1] : 0, calls[i].nargs, a.v,
                                     a.len, -1, deadline_us, &rep, &e);
        argv_release(&a);
        if (calls[i].rc == PERMITD_OK)
            hand_over(&calls[i], rep);
        else
            log_msg(LOG_LEVEL_WARN, "redis command failed", "command=%.*s error=\"%.200s\"",
                    (int)calls[i].args[0].len, calls[i].args[0].p, e.message);
        freeReplyObject(rep);
        if (calls[i].rc == PERMITD_EDEADLINE)
            rc = permitd_error_set(err, PERMITD_EDEADLINE, "%s", e.message);
    }
    free(node);
    return rc;
}

/* Collects the masters that failed a PING into one message. */
struct ping_failures {
    char text[400];
    size_t len;
    int n;
};

static void ping_failed(void *ud, const char *where, int rc, const char *error)
{
    struct ping_failures *f = ud;

    if (rc == PERMITD_OK || f->len >= sizeof(f->text))
        return;
    f->len += (size_t)snprintf(f->text + f->len, sizeof(f->text) - f->len, "%s%s: %s",
                               f->n++ ? "; " : "", where, error);
}

int redis_ping(struct redis *r, int64_t deadline_us, struct permitd_error *err)
{
    const struct redis_str ping = {"PING", 4};
    struct ping_failures f = {"", 0, 0};
    int rc;

    if (r->route == NULL)
        return redis_command(r, &ping, 1, deadline_us, NULL, NULL, NULL, err);
    rc = redis_ping_each(r, deadline_us, ping_failed, &f);
    if (rc != PERMITD_OK)
        return permitd_error_set(err, rc, "redis cluster: %s", f.n ? f.text
                                 : "the slot map is not known yet (no seed answered)");
    return PERMITD_OK;
}

/* Every master is pinged at once: PING is written to each master's
 * connection (this thread's) first, then the replies are read, each read
 * bounded by what is left of the deadline. So /readyz over N masters takes
 * one round trip (the slowest master's), not N of them, and a master that
 * hangs costs the deadline once (250 ms for /readyz; 1 ms more for each
 * further one that hangs) instead of leaving every master after it
 * "deadline exceeded" unasked. A master with no
 * connection yet is connected first, in turn (the connect and its
 * handshake are bounded by the deadline too). */
int redis_ping_each(struct redis *r, int64_t deadline_us,
                    void (*each)(void *ud, const char *where, int rc, const char *error),
                    void *ud)
{
    static const char *const argv[1] = {"PING"};
    static const size_t lens[1] = {4};
    struct redis_node *masters[REDIS_NODES_MAX];
    struct redis_conn *conns[REDIS_NODES_MAX];
    struct permitd_error errs[REDIS_NODES_MAX];
    int rcs[REDIS_NODES_MAX], bound = 0, first = PERMITD_OK;
    size_t n = redis_route_masters(r, masters, REDIS_NODES_MAX);

    if (n == 0)
        return PERMITD_EUNAVAILABLE;
    for (size_t i = 0; i < n; i++) {
        int timeout_ms, done = 0;

        errs[i] = (struct permitd_error){0, ""};
        rcs[i] = PERMITD_OK;
        conns[i] = NULL;
        if ((timeout_ms = redis_call_timeout(r, deadline_us, &bound, &errs[i])) < 0) {
            rcs[i] = timeout_ms;
            continue;
        }
        if ((conns[i] = redis_conn_acquire(r, masters[i], timeout_ms, &errs[i])) == NULL) {
            rcs[i] = redis_conn_failed(r, bound, deadline_us, &errs[i]);
            continue;
        }
        if (redisAppendCommandArgv(conns[i]->ctx, 1, (const char **)argv, lens) != REDIS_OK) {
            rcs[i] = permitd_error_set(&errs[i], PERMITD_EINTERNAL, "out of memory");
            redis_conn_close(conns[i]);
            conns[i] = NULL;
            continue;
        }
        while (!done)
            if (redis_io_write(conns[i]->ctx, conns[i]->tls, &done) != REDIS_OK) {
                rcs[i] = redis_conn_broken(r, conns[i], bound, timeout_ms, &errs[i]);
                conns[i] = NULL;
                break;
            }
    }
    for (size_t i = 0; i < n; i++) {
        redisReply *rep = NULL;
        int timeout_ms;

        if (conns[i] == NULL)
            continue;
        /* Past the deadline (a master before this one hung), a reply that
         * has come meanwhile is still read: 1 ms for it. */
        if ((timeout_ms = redis_call_timeout(r, deadline_us, &bound, &errs[i])) < 0) {
            timeout_ms = 1;
            bound = 1;
        }
        redisSetTimeout(conns[i]->ctx, tv_ms(timeout_ms));
        redis_tls_set_timeout(conns[i]->tls, timeout_ms);   /* rediss: its reads wait this */
        conns[i]->timeout_ms = timeout_ms;
        if (redis_io_get_reply(conns[i]->ctx, conns[i]->tls, (void **)&rep) != REDIS_OK || rep == NULL) {
            rcs[i] = redis_conn_broken(r, conns[i], bound, timeout_ms, &errs[i]);
            continue;
        }
        if (rep->type == REDIS_REPLY_ERROR) {
            rcs[i] = permitd_error_set(&errs[i], redis_error_status(rep->str), "redis at %s: %s",
                                       masters[i]->where, rep->str);
            if (rcs[i] == PERMITD_EUNAVAILABLE)
                redis_conn_drop(r, conns[i]);
        }
        freeReplyObject(rep);
    }
    for (size_t i = 0; i < n; i++) {
        each(ud, masters[i]->where, rcs[i], rcs[i] == PERMITD_OK ? "" : errs[i].message);
        if (rcs[i] != PERMITD_OK && first == PERMITD_OK)
            first = rcs[i];
    }
    return first;
}

void redis_counters(struct redis *r, uint64_t *errors, uint64_t *connects)
{
    *errors = atomic_load(&r->errors);
    *connects = atomic_load(&r->connects);
}

int redis_tls_failure_info(struct redis *r, int i, const char **reason, uint64_t *n)
{
    if (r->tls == NULL || i < 0 || i >= REDIS_TLS_REASONS)
        return -1;
    *reason = redis_tls_reason_name((enum redis_tls_reason)i);
    *n = redis_tls_failures(r->tls, (enum redis_tls_reason)i);
    return 0;
}

