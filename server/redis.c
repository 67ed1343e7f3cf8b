/*
 * redis.c - hiredis behind per-thread connections, deadlines and EVALSHA.
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
#include <sys/epoll.h>

#include "clock.h"
#include "embed.h"
#include "log.h"
#include "redis.h"
#include "resolve.h"

#define BACKOFF_MIN_MS 25
#define BACKOFF_MAX_MS 1000
#define MAX_ARGV 64
#define RESOLVE_WAIT_MS 2000    /* at start, for the Redis host's first lookup */

static const char *const script_files[REDIS_SCRIPT_COUNT] = {
    [REDIS_SCRIPT_BUCKET] = "bucket.lua",
    [REDIS_SCRIPT_SYNC] = "sync.lua",
};

struct redis {
    const struct config *cfg;
    const struct embedded_file *scripts[REDIS_SCRIPT_COUNT];
    pthread_key_t key;           /* -> this thread's struct conn */
    _Atomic uint64_t errors;     /* calls that failed on Redis's side */
    _Atomic uint64_t connects;   /* connections made (the first, and reconnects) */
    char where[300];             /* "127.0.0.1:6379" or the socket path, for messages */
    struct resolver *resolver;   /* the host's addresses (resolve.h); NULL with a socket */
};

/* One thread's connection. Owned by that thread; freed by conn_free() from
 * the pthread key destructor. */
struct conn {
    redisContext *ctx;            /* NULL while disconnected */
    int timeout_ms;               /* socket timeout currently set on ctx */
    int64_t retry_at_us;          /* no reconnect attempt before this */
    int backoff_ms;
    char sha[REDIS_SCRIPT_COUNT][41];
    char ip[RESOLVE_ADDR_MAX];    /* the address it connects to ("" with a socket) */
    char last_error[200];         /* why the last connect failed */
};

static void conn_free(void *p)
{
    struct conn *c = p;

    if (c == NULL)
        return;
    if (c->ctx != NULL)
        redisFree(c->ctx);
    free(c);
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
        r->scripts[i] = embed_find(lua_script_files, script_files[i]);
        if (r->scripts[i] == NULL) {
            free(r);
            return permitd_error_set(err, PERMITD_EINTERNAL,
                                     "script %s is not embedded in this binary", script_files[i]);
        }
    }
    if (pthread_key_create(&r->key, conn_free) != 0) {
        free(r);
        return permitd_error_set(err, PERMITD_EINTERNAL, "pthread_key_create failed");
    }
    if (cfg->redis_socket[0] != '\0') {
        snprintf(r->where, sizeof(r->where), "%s", cfg->redis_socket);
    } else {
        snprintf(r->where, sizeof(r->where), "%s:%d", cfg->redis_host, cfg->redis_port);
        if (resolver_new(cfg->redis_host, RESOLVE_WAIT_MS, &r->resolver, err) != PERMITD_OK) {
            pthread_key_delete(r->key);
            free(r);
            return err->code;
        }
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
    resolver_free(r->resolver);
    free(r);
}

static struct timeval tv_ms(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

static void disconnect(struct conn *c)
{
    if (c->ctx != NULL) {
        redisFree(c->ctx);
        c->ctx = NULL;
    }
}

/* An error reply that says this Redis cannot serve us now (loading its data,
 * a script running too long, a replica after a failover...), not a fault of
 * ours: the caller gets unavailable, and the policy's failure_mode. */
static int unserving(const char *reply)
{
    static const char *const codes[] = {"LOADING", "BUSY", "READONLY", "MASTERDOWN",
                                        "TRYAGAIN"};

    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (strncmp(reply, codes[i], strlen(codes[i])) == 0)
            return 1;
    return 0;
}

/* Runs one command on a connected context; NULL reply means the connection
 * is broken (ctx->errstr says why). The reply is the caller's to free. */
static redisReply *command(struct conn *c, int argc, const char **argv, const size_t *lens)
{
    return redisCommandArgv(c->ctx, argc, argv, lens);
}

/* AUTH, SELECT and SCRIPT LOAD on a fresh connection. 0 or -1 with
 * c->last_error set. */
static int handshake(struct redis *r, struct conn *c)
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
        const char *argv[3] = {"SCRIPT", "LOAD", r->scripts[i]->data};
        size_t lens[3] = {6, 4, r->scripts[i]->len};
        rep = command(c, 3, argv, lens);
        if (rep == NULL || rep->type != REDIS_REPLY_STRING || rep->len != 40) {
            snprintf(c->last_error, sizeof(c->last_error), "SCRIPT LOAD %s failed: %s",
                     script_files[i],
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
static int conn_down(struct redis *r, struct conn *c, struct permitd_error *err)
{
    disconnect(c);
    if (c->ip[0] != '\0') {
        resolver_failed(r->resolver, c->ip);
        c->ip[0] = '\0';
    }
    c->backoff_ms = c->backoff_ms == 0 ? BACKOFF_MIN_MS
                  : (c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2);
    c->retry_at_us = clock_now_us() + (int64_t)c->backoff_ms * 1000;
    log_msg(LOG_WARN, "redis connect failed", "addr=%s error=\"%s\" retry_in_ms=%d",
            r->where, c->last_error, c->backoff_ms);
    atomic_fetch_add(&r->errors, 1);
    return permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s is unavailable: %s",
                             r->where, c->last_error);
}

/* Drops c, whose Redis answered that it cannot serve now: the next call
 * connects afresh, and the host name is looked up again (after a failover
 * it may name the new primary). */
static void drop_unserving(struct redis *r, struct conn *c)
{
    disconnect(c);
    if (c->ip[0] != '\0') {
        resolver_failed(r->resolver, c->ip);
        c->ip[0] = '\0';
    }
}

/* c answered on a new connection: the backoff is over. */
static void conn_up(struct redis *r, struct conn *c)
{
    if (c->backoff_ms != 0)
        log_msg(LOG_INFO, "redis reconnected", "addr=%s", r->where);
    c->backoff_ms = 0;
    c->retry_at_us = 0;
}

/* Connects c if it is not, with the backoff after failures, by numeric
 * address (a host name is looked up by the resolver's thread, never by the
 * caller). greet: blocking, within timeout_ms, with the handshake(), and the
 * socket timeout set to timeout_ms; else non-blocking (a pipe: the connect
 * completes, and the handshake goes out, while the caller's loop waits on
 * the socket). */
static int conn_ensure(struct redis *r, struct conn *c, int timeout_ms, int greet,
                       struct permitd_error *err)
{
    const char *sock = r->cfg->redis_socket;
    int unix_socket = sock[0] != '\0', port = r->cfg->redis_port;
    struct timeval tv = tv_ms(timeout_ms);
    int64_t now;

    if (c->ctx != NULL) {
        if (greet && c->timeout_ms != timeout_ms) {
            redisSetTimeout(c->ctx, tv);
            c->timeout_ms = timeout_ms;
        }
        return PERMITD_OK;
    }
    now = clock_now_us();
    if (now < c->retry_at_us)
        return permitd_error_set(err, PERMITD_EUNAVAILABLE,
                                 "redis at %s is unavailable (%s); next attempt in %lld ms",
                                 r->where, c->last_error,
                                 (long long)((c->retry_at_us - now + 999) / 1000));
    if (!unix_socket &&
        resolver_address(r->resolver, c->ip, c->last_error, sizeof(c->last_error)) != 0)
        return conn_down(r, c, err);
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
        return conn_down(r, c, err);
    }
    if (!unix_socket)
        redisEnableKeepAlive(c->ctx);
    atomic_fetch_add(&r->connects, 1);
    if (!greet)
        return PERMITD_OK;      /* a pipe's handshake goes out with its first batch */
    redisSetTimeout(c->ctx, tv);
    c->timeout_ms = timeout_ms;
    if (handshake(r, c) != 0)
        return conn_down(r, c, err);
    conn_up(r, c);
    return PERMITD_OK;
}

/* Returns this thread's connection, connected, with its socket timeout set
 * to timeout_ms; or NULL with err set (unavailable) while Redis cannot be
 * reached or the backoff since the last failure has not passed. */
static struct conn *acquire_conn(struct redis *r, int timeout_ms, struct permitd_error *err)
{
    struct conn *c = pthread_getspecific(r->key);

    if (c == NULL) {
        c = calloc(1, sizeof(*c));
        if (c == NULL) {
            permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            return NULL;
        }
        pthread_setspecific(r->key, c);
    }
    return conn_ensure(r, c, timeout_ms, 1, err) == PERMITD_OK ? c : NULL;
}

/* The socket timeout for a call: the configured Redis timeout, or less when
 * the caller's deadline is nearer. *bound_by_deadline tells which won. */
static int call_timeout(struct redis *r, int64_t deadline_us, int *bound_by_deadline,
                        struct permitd_error *err)
{
    int64_t left_ms = (deadline_us - clock_now_us()) / 1000;

    *bound_by_deadline = 0;
    if (left_ms <= 0) {
        *bound_by_deadline = 1;
        return permitd_error_set(err, PERMITD_EDEADLINE, "deadline exceeded before calling redis");
    }
    if (left_ms < r->cfg->redis_timeout_ms) {
        *bound_by_deadline = 1;
        return (int)left_ms;
    }
    return r->cfg->redis_timeout_ms;
}

/* Turns a broken connection into an error, dropping the connection. */
static int broken(struct redis *r, struct conn *c, int bound_by_deadline, int timeout_ms,
                  struct permitd_error *err)
{
    int timed_out = c->ctx->err == REDIS_ERR_IO &&
                    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINPROGRESS);
    int rc;

    if (timed_out && bound_by_deadline)
        rc = permitd_error_set(err, PERMITD_EDEADLINE,
                               "deadline exceeded waiting %d ms for redis", timeout_ms);
    else if (timed_out)
        rc = permitd_error_set(err, PERMITD_EUNAVAILABLE,
                               "redis at %s did not answer within %d ms", r->where, timeout_ms);
    else
        rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s",
                               r->where, c->ctx->errstr);
    snprintf(c->last_error, sizeof(c->last_error), "%.190s", err ? err->message : "broken");
    atomic_fetch_add(&r->errors, 1);
    disconnect(c);
    /* Reconnect on the next call without waiting: one failure is often just
     * a restart. Backoff starts only if that reconnect fails too. */
    c->retry_at_us = 0;
    return rc;
}

/* acquire_conn() failed. When the caller's deadline, not the Redis
 * timeout, bounded the connect and it has now passed, the answer is
 * deadline_exceeded (Connect: the deadline expired), not unavailable. */
static int conn_failed(struct redis *r, int bound_by_deadline, int64_t deadline_us,
                       struct permitd_error *err)
{
    if (err == NULL)
        return PERMITD_EUNAVAILABLE;
    /* Under 1 ms left counts as passed, as in call_timeout(). */
    if (bound_by_deadline && err->code == PERMITD_EUNAVAILABLE &&
        (deadline_us - clock_now_us()) / 1000 <= 0)
        return permitd_error_set(err, PERMITD_EDEADLINE,
                                 "deadline exceeded connecting to redis at %s", r->where);
    return err->code;
}

/* Runs one command on this thread's connection within the deadline. For
 * an EVALSHA, `script` names it so a NOSCRIPT reply reloads the scripts and
 * retries once (argv[1] is then replaced by the fresh SHA); otherwise pass
 * -1. On PERMITD_OK *out is a reply that is not an error (free it with
 * freeReplyObject); every failure is turned into err here. */
static int call(struct redis *r, int argc, const char **argv, const size_t *lens,
                int script, int64_t deadline_us, redisReply **out, struct permitd_error *err)
{
    int bound, timeout_ms, rc;
    struct conn *c;
    redisReply *rep = NULL;

    *out = NULL;
    timeout_ms = call_timeout(r, deadline_us, &bound, err);
    if (timeout_ms < 0)
        return timeout_ms;
    c = acquire_conn(r, timeout_ms, err);
    if (c == NULL)
        return conn_failed(r, bound, deadline_us, err);
    if (script >= 0)
        argv[1] = c->sha[script];

    for (int attempt = 0; attempt < 2; attempt++) {
        rep = command(c, argc, argv, lens);
        if (rep == NULL)
            return broken(r, c, bound, timeout_ms, err);
        if (script >= 0 && attempt == 0 && rep->type == REDIS_REPLY_ERROR &&
            strncmp(rep->str, "NOSCRIPT", 8) == 0) {
            freeReplyObject(rep);
            rep = NULL;
            log_msg(LOG_WARN, "redis lost its scripts; reloading", "addr=%s", r->where);
            if (handshake(r, c) != 0) {
                rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s",
                                       r->where, c->last_error);
                disconnect(c);
                return rc;
            }
            argv[1] = c->sha[script];
            continue;
        }
        break;
    }

    if (rep->type == REDIS_REPLY_ERROR) {
        /* Anything but a Redis that cannot serve now is a bug of ours (a
         * script error, say). */
        int transient = unserving(rep->str);
        rc = permitd_error_set(err, transient ? PERMITD_EUNAVAILABLE : PERMITD_EINTERNAL,
                               "redis at %s: %s", r->where, rep->str);
        if (transient)
            drop_unserving(r, c);
        freeReplyObject(rep);
        return rc;
    }
    *out = rep;
    return PERMITD_OK;
}

/* What a reply that is not a script's numbers was, for the log. */
static const char *reply_kind(int type)
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

/* The little-endian doubles that make up s into out[0..nout), the rest of
 * out 0. -1 unless every one is a whole number in a long long's range
 * (what Redis itself makes of a Lua number it answers as an integer). */
static int doubles_out(const char *s, size_t len, long long *out, int nout)
{
    if (len % 8 != 0)
        return -1;
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
            return -1;
        if (i < (size_t)nout)
            out[i] = (long long)d;
    }
    for (size_t i = len / 8; i < (size_t)nout; i++)
        out[i] = 0;
    return 0;
}

/* A script's numbers into out[0..nout); those it did not send read 0.
 * bucket.lua sends them as one string of doubles (Redis answers a string
 * with one copy, a table at ~650 instructions a number), sync.lua, called a
 * few times a minute, as an array of integers. -1 for any other reply. */
static int script_numbers(const redisReply *rep, long long *out, int nout)
{
    if (rep->type == REDIS_REPLY_STRING)
        return doubles_out(rep->str, rep->len, out, nout);
    if (rep->type != REDIS_REPLY_ARRAY)
        return -1;
    for (int i = 0; i < nout; i++)
        out[i] = (size_t)i < rep->elements && rep->element[i]->type == REDIS_REPLY_INTEGER
                 ? rep->element[i]->integer : 0;
    return 0;
}

int redis_script_run(struct redis *r, enum redis_script script,
                     const struct redis_str *keys, int nkeys,
                     const struct redis_str *args, int nargs,
                     int64_t deadline_us, long long *out, int nout,
                     struct permitd_error *err)
{
    const char *argv[MAX_ARGV];
    size_t lens[MAX_ARGV];
    char nkeys_s[12];
    int argc = 0, rc;
    redisReply *rep;

    if (3 + nkeys + nargs > MAX_ARGV)
        return permitd_error_set(err, PERMITD_EINTERNAL, "too many script arguments");
    snprintf(nkeys_s, sizeof(nkeys_s), "%d", nkeys);
    argv[argc] = "EVALSHA"; lens[argc++] = 7;
    argv[argc] = NULL; lens[argc++] = 40;       /* the SHA, filled in by call() */
    argv[argc] = nkeys_s; lens[argc++] = strlen(nkeys_s);
    for (int i = 0; i < nkeys; i++) {
        argv[argc] = keys[i].p;
        lens[argc++] = keys[i].len;
    }
    for (int i = 0; i < nargs; i++) {
        argv[argc] = args[i].p;
        lens[argc++] = args[i].len;
    }
    if ((rc = call(r, argc, argv, lens, (int)script, deadline_us, &rep, err)) != PERMITD_OK)
        return rc;
    if (script_numbers(rep, out, nout) != 0) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL,
                               "script %s answered with %s instead of its numbers",
                               script_files[script], reply_kind(rep->type));
        freeReplyObject(rep);
        return rc;
    }
    freeReplyObject(rep);
    return PERMITD_OK;
}

/* argv for one EVALSHA of a pipeline: a new array (free()) of 3 + nkeys +
 * nargs entries, with the SHA already in place. */
static int evalsha_argv(const char *sha, const struct redis_script_call *c, char *nkeys_s,
                        const char ***argv, size_t **lens)
{
    size_t argc = 3 + (size_t)c->nkeys + (size_t)c->nargs, i = 0;

    *argv = malloc(argc * sizeof(**argv));
    *lens = malloc(argc * sizeof(**lens));
    if (*argv == NULL || *lens == NULL) {
        free(*argv);
        free(*lens);
        return -1;
    }
    snprintf(nkeys_s, 12, "%d", c->nkeys);
    (*argv)[i] = "EVALSHA"; (*lens)[i++] = 7;
    (*argv)[i] = sha; (*lens)[i++] = 40;
    (*argv)[i] = nkeys_s; (*lens)[i++] = strlen(nkeys_s);
    for (int k = 0; k < c->nkeys; k++, i++) {
        (*argv)[i] = c->keys[k].p;
        (*lens)[i] = c->keys[k].len;
    }
    for (int k = 0; k < c->nargs; k++, i++) {
        (*argv)[i] = c->args[k].p;
        (*lens)[i] = c->args[k].len;
    }
    return (int)argc;
}

int redis_script_pipeline(struct redis *r, enum redis_script script,
                          struct redis_script_call *calls, size_t n,
                          int64_t deadline_us, struct permitd_error *err)
{
    int bound, timeout_ms, rc = PERMITD_OK, reloaded = 0;
    struct conn *c;
    size_t sent = 0, pending;

    timeout_ms = call_timeout(r, deadline_us, &bound, err);
    if (timeout_ms < 0)
        return timeout_ms;
    c = acquire_conn(r, timeout_ms, err);
    if (c == NULL)
        return conn_failed(r, bound, deadline_us, err);
    for (size_t i = 0; i < n; i++)
        calls[i].rc = -1;       /* not answered yet */

again:
    /* Queue every unanswered call, then read the replies in order. */
    sent = 0;
    for (size_t i = 0; i < n; i++) {
        const char **argv;
        size_t *lens;
        char nkeys_s[12];
        int argc;

        if (calls[i].rc != -1)
            continue;
        argc = evalsha_argv(c->sha[script], &calls[i], nkeys_s, &argv, &lens);
        if (argc < 0)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        rc = redisAppendCommandArgv(c->ctx, argc, argv, lens) == REDIS_OK ? PERMITD_OK : -1;
        free(argv);
        free(lens);
        if (rc != PERMITD_OK)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        sent++;
    }
    pending = 0;
    for (size_t i = 0; i < n && sent > 0; i++) {
        redisReply *rep = NULL;

        if (calls[i].rc != -1)
            continue;
        sent--;
        if (redisGetReply(c->ctx, (void **)&rep) != REDIS_OK || rep == NULL)
            return broken(r, c, bound, timeout_ms, err);
        if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0) {
            pending++;          /* stays -1: sent again after the reload */
        } else if (rep->type != REDIS_REPLY_ERROR &&
                   script_numbers(rep, calls[i].out, calls[i].nout) == 0) {
            calls[i].rc = PERMITD_OK;
        } else {
            log_msg(LOG_WARN, "script call failed", "script=%s error=\"%.200s\"",
                    script_files[script],
                    rep->type == REDIS_REPLY_ERROR ? rep->str : reply_kind(rep->type));
            calls[i].rc = PERMITD_EINTERNAL;
        }
        freeReplyObject(rep);
    }
    if (pending > 0) {
        if (reloaded || handshake(r, c) != 0) {
            rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: scripts could not be "
                                   "loaded: %s", r->where, c->last_error);
            disconnect(c);
            return rc;
        }
        log_msg(LOG_WARN, "redis lost its scripts; reloading", "addr=%s", r->where);
        reloaded = 1;
        goto again;
    }
    return PERMITD_OK;
}

/* ---- pipes: pipelined script calls driven by an event loop ----
 *
 * A pipe has its own connection (never the thread's blocking one, which the
 * same thread may need for a synchronous call while a batch is out). Nothing
 * on it blocks: it connects without waiting, to the numeric address the
 * resolver keeps (resolve.h: no DNS on the loop), with the same backoff as
 * any connection; the batch is written as one RESP buffer, replies are read
 * as the loop reports the socket readable, and the batch fails as a whole
 * at its deadline. NOSCRIPT (Redis restarted or flushed its scripts) sends
 * SCRIPT LOAD and the calls it refused once more, on the same connection,
 * without blocking. A Redis that cannot serve now (unserving()) fails the
 * calls it refused with unavailable, and the connection is dropped. */

/* One reply as the pipe's reader files it. hiredis's default reader builds
 * an object per reply (and per element of an array). The pipe's reader
 * allocates nothing: a script's numbers go straight into the out[] of the
 * call the reply answers, and an error or another string (SCRIPT LOAD's
 * SHA) is copied here, truncated. */
struct pipe_reply {
    int type;                     /* REDIS_REPLY_* of the reply itself */
    struct redis_script_call *call; /* the call it answers; NULL: a preamble reply */
    int numbers;                  /* its numbers are in call->out */
    char str[192];
    size_t len;
};

struct redis_pipe {
    struct redis *r;
    struct conn c;
    uint64_t generation;          /* counts connections: the loop's epoll key */
    enum redis_script script;
    struct redis_script_call *calls;
    size_t n;
    size_t awaiting;              /* replies still due in this round */
    size_t cursor;                /* the first call that may be awaiting one */
    int greet;                    /* a new connection: AUTH and SELECT go first */
    int load;                     /* SCRIPT LOAD goes first (new connection, NOSCRIPT) */
    const char *preamble[3];      /* the commands sent before the calls, in order */
    int npreamble, answered;      /* how many; how many have their reply */
    int reloaded;
    int unserving;                /* Redis said it cannot serve now: drop after the round */
    int write_pending;
    int busy;                     /* a batch is out */
    int bound;                    /* deadline_us was the caller's, not the Redis timeout */
    int timeout_ms;
    int64_t deadline_us;
    char *buf;                    /* the RESP of one round, reused */
    size_t buf_cap;
    size_t buf_len, buf_sent;     /* this round's bytes; how many are written */
    struct pipe_reply rep;        /* the reply being read */
};

int redis_pipe_new(struct redis *r, struct redis_pipe **out)
{
    *out = calloc(1, sizeof(**out));
    if (*out == NULL)
        return PERMITD_EINTERNAL;
    (*out)->r = r;
    return PERMITD_OK;
}

void redis_pipe_free(struct redis_pipe *p)
{
    if (p == NULL)
        return;
    disconnect(&p->c);
    free(p->buf);
    free(p);
}

/* Appends n bytes to the round's buffer; -1 when out of memory. */
static int buf_put(struct redis_pipe *p, size_t *len, const char *s, size_t n)
{
    if (*len + n > p->buf_cap) {
        size_t cap = p->buf_cap ? p->buf_cap : 4096;
        char *b;
        while (cap < *len + n)
            cap *= 2;
        if ((b = realloc(p->buf, cap)) == NULL)
            return -1;
        p->buf = b;
        p->buf_cap = cap;
    }
    memcpy(p->buf + *len, s, n);
    *len += n;
    return 0;
}

/* Writes v in decimal into out (no NUL); returns how many digits. Every
 * call of a batch needs several numbers: no printf on that path. */
static size_t put_uint(char *out, size_t v)
{
    char digits[24];
    size_t n = 0, k = 0;

    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0)
        out[k++] = digits[--n];
    return k;
}

/* Writes the RESP line "<mark><v>\r\n" into out; returns its length. */
static size_t resp_len(char *out, char mark, size_t v)
{
    size_t k = 1 + put_uint(out + 1, v);

    out[0] = mark;
    out[k++] = '\r';
    out[k++] = '\n';
    return k;
}

/* One bulk string ($<n>\r\n<s>\r\n) of RESP. */
static int buf_bulk(struct redis_pipe *p, size_t *len, const char *s, size_t n)
{
    char head[32];

    return buf_put(p, len, head, resp_len(head, '$', n)) || buf_put(p, len, s, n) ||
           buf_put(p, len, "\r\n", 2) ? -1 : 0;
}

/* Queues this round, as one formatted buffer: on a new connection AUTH and
 * SELECT (when configured), then SCRIPT LOAD when asked, then an EVALSHA
 * for every call still awaiting its reply (rc -1). Nothing waits for the
 * preamble: Redis answers in order, and pipe_preamble() checks it. */
static int pipe_queue(struct redis_pipe *p)
{
    const struct config *cfg = p->r->cfg;
    const struct embedded_file *script = p->r->scripts[p->script];
    size_t len = 0;
    char head[32];
    int h;

    p->awaiting = 0;
    p->cursor = 0;
    p->npreamble = p->answered = 0;
    if (p->greet && cfg->redis_password[0] != '\0') {
        int user = cfg->redis_user[0] != '\0';
        if (buf_put(p, &len, user ? "*3\r\n" : "*2\r\n", 4) || buf_bulk(p, &len, "AUTH", 4) ||
            (user && buf_bulk(p, &len, cfg->redis_user, strlen(cfg->redis_user))) ||
            buf_bulk(p, &len, cfg->redis_password, strlen(cfg->redis_password)))
            return -1;
        p->preamble[p->npreamble++] = "AUTH";
    }
    if (p->greet && cfg->redis_db != 0) {
        h = snprintf(head, sizeof(head), "%d", cfg->redis_db);
        if (buf_put(p, &len, "*2\r\n", 4) || buf_bulk(p, &len, "SELECT", 6) ||
            buf_bulk(p, &len, head, (size_t)h))
            return -1;
        p->preamble[p->npreamble++] = "SELECT";
    }
    if (p->load) {
        if (buf_put(p, &len, "*3\r\n", 4) || buf_bulk(p, &len, "SCRIPT", 6) ||
            buf_bulk(p, &len, "LOAD", 4) || buf_bulk(p, &len, script->data, script->len))
            return -1;
        p->preamble[p->npreamble++] = "SCRIPT LOAD";
    }
    p->awaiting = (size_t)p->npreamble;
    for (size_t i = 0; i < p->n; i++) {
        const struct redis_script_call *c = &p->calls[i];
        if (c->rc != -1)
            continue;
        if (buf_put(p, &len, head, resp_len(head, '*', (size_t)(3 + c->nkeys + c->nargs))) ||
            buf_bulk(p, &len, "EVALSHA", 7) || buf_bulk(p, &len, p->c.sha[p->script], 40))
            return -1;
        if (buf_bulk(p, &len, head, put_uint(head, (size_t)c->nkeys)))
            return -1;
        for (int k = 0; k < c->nkeys; k++)
            if (buf_bulk(p, &len, c->keys[k].p, c->keys[k].len))
                return -1;
        for (int k = 0; k < c->nargs; k++)
            if (buf_bulk(p, &len, c->args[k].p, c->args[k].len))
                return -1;
        p->awaiting++;
    }
    p->buf_len = len;
    p->buf_sent = 0;
    return 0;
}

/* Ends the batch with rc: the connection is dropped (its replies can no
 * longer be matched), to be made again by the next send. */
static int pipe_fail(struct redis_pipe *p, int rc, struct permitd_error *err)
{
    snprintf(p->c.last_error, sizeof(p->c.last_error), "%.190s", err ? err->message : "broken");
    p->busy = 0;
    p->write_pending = 0;
    if (p->greet) {
        /* The connection failed before its first reply: it never came
         * up (refused, unreachable, AUTH): back off. */
        conn_down(p->r, &p->c, NULL);
        return rc;
    }
    atomic_fetch_add(&p->r->errors, 1);
    disconnect(&p->c);
    p->c.retry_at_us = 0;       /* as broken(): reconnect at once, back off after */
    return rc;
}

/* Writes what the socket takes of this round. The round goes out from the
 * pipe's own buffer: hiredis's output buffer would copy it, and be freed and
 * made again for every round. */
static int pipe_write(struct redis_pipe *p, struct permitd_error *err)
{
    while (p->buf_sent < p->buf_len) {
        ssize_t n = write(p->c.ctx->fd, p->buf + p->buf_sent, p->buf_len - p->buf_sent);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;              /* the rest when the socket is writable (also: still connecting) */
        if (n < 0)
            return pipe_fail(p, permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s",
                                                  p->r->where, strerror(errno)), err);
        p->buf_sent += (size_t)n;
    }
    p->write_pending = p->buf_sent < p->buf_len;
    return PERMITD_OK;
}

/* The call the next reply answers, or NULL while the preamble's replies
 * are due: the walk pipe_reply() makes, without moving. */
static struct redis_script_call *reply_target(const struct redis_pipe *p)
{
    size_t k = p->cursor;

    if (p->answered < p->npreamble)
        return NULL;
    while (k < p->n && p->calls[k].rc != -1)
        k++;
    return k < p->n ? &p->calls[k] : NULL;
}

/* The pipe's reader (struct pipe_reply). hiredis calls these as it parses;
 * task->parent is NULL for the reply itself, else the array holding the
 * element. Each returns the pipe's one reply record: never NULL, which
 * hiredis would take for out of memory. */
static void *reply_begin(const redisReadTask *task, int type)
{
    struct redis_pipe *p = task->privdata;

    if (task->parent == NULL) {
        p->rep.type = type;
        p->rep.call = reply_target(p);
        p->rep.numbers = 0;
        p->rep.len = 0;
        p->rep.str[0] = '\0';
    }
    return &p->rep;
}

static void *reply_string(const redisReadTask *task, char *s, size_t len)
{
    struct redis_pipe *p = task->privdata;
    void *obj = reply_begin(task, task->type);

    if (task->parent == NULL && task->type == REDIS_REPLY_STRING && p->rep.call != NULL) {
        struct redis_script_call *c = p->rep.call;
        p->rep.numbers = doubles_out(s, len, c->out, c->nout) == 0;
    } else if (task->parent == NULL) {
        p->rep.len = len < sizeof(p->rep.str) ? len : sizeof(p->rep.str) - 1;
        memcpy(p->rep.str, s, p->rep.len);
        p->rep.str[p->rep.len] = '\0';
    }
    return obj;
}

static void *reply_array(const redisReadTask *task, int elements)
{
    struct redis_pipe *p = task->privdata;
    void *obj = reply_begin(task, REDIS_REPLY_ARRAY);
    struct redis_script_call *c = p->rep.call;

    (void)elements;
    if (task->parent == NULL && c != NULL) {
        memset(c->out, 0, (size_t)c->nout * sizeof(*c->out));  /* what is not sent reads 0 */
        p->rep.numbers = 1;
    }
    return obj;
}

static void *reply_integer(const redisReadTask *task, long long v)
{
    struct redis_pipe *p = task->privdata;
    void *obj = reply_begin(task, REDIS_REPLY_INTEGER);
    struct redis_script_call *c = p->rep.call;

    /* An element of the reply's own array, not of one nested in it. */
    if (task->parent != NULL && task->parent->parent == NULL && c != NULL &&
        p->rep.type == REDIS_REPLY_ARRAY && task->idx >= 0 && task->idx < c->nout)
        c->out[task->idx] = v;
    return obj;
}

static void *reply_nil(const redisReadTask *task)
{
    return reply_begin(task, REDIS_REPLY_NIL);
}

static void reply_free(void *obj)
{
    (void)obj;                  /* the record is the pipe's */
}

static redisReplyObjectFunctions pipe_reader = {
    reply_string, reply_array, reply_integer, reply_nil, reply_free,
};

int redis_pipe_send(struct redis_pipe *p, enum redis_script script,
                    struct redis_script_call *calls, size_t n, int64_t deadline_us,
                    struct permitd_error *err)
{
    int bound, timeout_ms, rc;

    timeout_ms = call_timeout(p->r, deadline_us, &bound, err);
    if (timeout_ms < 0)
        return timeout_ms;
    if (p->c.ctx == NULL) {
        /* Nothing here blocks: the connect completes, and the handshake
         * goes out with the first batch, while the loop waits on the
         * socket; the batch's deadline covers them all. So neither an
         * unreachable Redis nor one that accepts but does not answer can
         * stall the caller's loop. */
        rc = conn_ensure(p->r, &p->c, timeout_ms, 0, err);
        if (rc != PERMITD_OK)
            return conn_failed(p->r, bound, deadline_us, err);
        p->c.ctx->reader->fn = &pipe_reader;
        p->c.ctx->reader->privdata = p;
        p->greet = p->load = 1;
        /* The SHA is known before Redis says it (the build computed it):
         * the EVALSHAs can follow the SCRIPT LOAD in the same write. */
        memcpy(p->c.sha[script], p->r->scripts[script]->sha1, 41);
        p->generation++;
    }
    p->script = script;
    p->calls = calls;
    p->n = n;
    p->reloaded = p->unserving = 0;
    for (size_t i = 0; i < n; i++)
        calls[i].rc = -1;       /* awaiting its reply */
    if (pipe_queue(p) != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    p->bound = bound;
    p->timeout_ms = timeout_ms;
    /* The caller's deadline to the microsecond when it is the nearer (a
     * job must not be failed a fraction of a millisecond before its own). */
    p->deadline_us = bound ? deadline_us : clock_now_us() + (int64_t)timeout_ms * 1000;
    p->busy = 1;
    return pipe_write(p, err);
}

/* Checks one reply to the preamble: AUTH and SELECT answer OK, SCRIPT LOAD
 * the SHA. 0, or -1 (the batch fails, and the connection with it). */
static int pipe_preamble(struct redis_pipe *p, const struct pipe_reply *rep)
{
    const char *what = p->preamble[p->answered++];
    int load = strcmp(what, "SCRIPT LOAD") == 0;

    if (rep->type == REDIS_REPLY_ERROR || (load && (rep->type != REDIS_REPLY_STRING ||
                                                    rep->len != 40))) {
        snprintf(p->c.last_error, sizeof(p->c.last_error), "%s failed: %.100s", what,
                 rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
        return -1;
    }
    if (load)
        memcpy(p->c.sha[p->script], rep->str, 41);
    if (p->answered == p->npreamble) {
        if (p->greet)
            conn_up(p->r, &p->c);
        p->greet = p->load = 0;
    }
    return 0;
}

/* Files one reply of this round. 0, or -1 when the preamble failed (the
 * batch fails). */
static int pipe_reply(struct redis_pipe *p, const struct pipe_reply *rep)
{
    struct redis_script_call *c = rep->call;

    p->awaiting--;
    if (c == NULL && p->answered >= p->npreamble) {
        snprintf(p->c.last_error, sizeof(p->c.last_error), "a reply nothing asked for");
        return -1;
    }
    if (c == NULL)
        return pipe_preamble(p, rep);
    p->cursor = (size_t)(c - p->calls) + 1;
    if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0) {
        c->rc = -2;             /* sent again once the script is loaded */
    } else if (rep->type == REDIS_REPLY_ERROR && unserving(rep->str)) {
        if (!p->unserving)
            log_msg(LOG_WARN, "redis cannot serve now", "addr=%s error=\"%.200s\"",
                    p->r->where, rep->str);
        p->unserving = 1;
        c->rc = PERMITD_EUNAVAILABLE;
    } else if (rep->numbers) {
        c->rc = PERMITD_OK;     /* they are in c->out already */
    } else {
        log_msg(LOG_WARN, "script call failed", "script=%s error=\"%.200s\"",
                script_files[p->script],
                rep->type == REDIS_REPLY_ERROR ? rep->str : reply_kind(rep->type));
        c->rc = PERMITD_EINTERNAL;
    }
    return 0;
}

/* The round is complete: done, or a second round for NOSCRIPT. */
static int pipe_round_over(struct redis_pipe *p, struct permitd_error *err)
{
    size_t refused = 0;

    for (size_t i = 0; i < p->n; i++)
        if (p->calls[i].rc == -2) {
            p->calls[i].rc = -1;
            refused++;
        }
    if (p->unserving) {
        /* Calls refused with NOSCRIPT in this round are not sent again:
         * unavailable too; the connection is not used again. */
        p->unserving = 0;
        for (size_t i = 0; i < p->n; i++)
            if (p->calls[i].rc == -1)
                p->calls[i].rc = PERMITD_EUNAVAILABLE;
        drop_unserving(p->r, &p->c);
        p->busy = 0;
        return 1;
    }
    if (refused == 0) {
        p->busy = 0;
        return 1;
    }
    if (p->reloaded)
        return pipe_fail(p, permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s refused "
                                              "the script just loaded", p->r->where), err);
    log_msg(LOG_WARN, "redis lost its scripts; reloading", "addr=%s", p->r->where);
    p->reloaded = p->load = 1;
    if (pipe_queue(p) != 0)
        return pipe_fail(p, permitd_error_set(err, PERMITD_EINTERNAL, "out of memory"), err);
    {
        int rc = pipe_write(p, err);
        return rc == PERMITD_OK ? 0 : rc;
    }
}

int redis_pipe_io(struct redis_pipe *p, uint32_t revents, struct permitd_error *err)
{
    redisContext *ctx = p->c.ctx;
    int rc;

    if (ctx == NULL)
        return 0;
    if (!p->busy) {
        /* An idle connection is readable only when Redis closed it (a
         * restart) or sent what nobody asked for: drop it either way. */
        if (revents != 0) {
            log_msg(LOG_DEBUG, "redis pipe connection dropped while idle", "addr=%s", p->r->where);
            disconnect(&p->c);
        }
        return 0;
    }
    if (p->write_pending && (revents & (EPOLLOUT | EPOLLERR | EPOLLHUP)) &&
        (rc = pipe_write(p, err)) != PERMITD_OK)
        return rc;
    if (revents & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        if (redisBufferRead(ctx) != REDIS_OK)
            return pipe_fail(p, permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s",
                                                  p->r->where, ctx->errstr), err);
        for (;;) {
            void *rep = NULL;
            if (redisGetReplyFromReader(ctx, &rep) != REDIS_OK)
                return pipe_fail(p, permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s",
                                                      p->r->where, ctx->errstr), err);
            if (rep == NULL)
                break;
            rc = pipe_reply(p, rep);
            if (rc != 0)
                return pipe_fail(p, permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s",
                                                      p->r->where, p->c.last_error), err);
            if (p->awaiting == 0)
                return pipe_round_over(p, err);
        }
    }
    if (clock_now_us() >= p->deadline_us) {
        if (p->bound)
            rc = permitd_error_set(err, PERMITD_EDEADLINE, "deadline exceeded waiting %d ms for "
                                   "redis", p->timeout_ms);
        else
            rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s did not answer within "
                                   "%d ms", p->r->where, p->timeout_ms);
        return pipe_fail(p, rc, err);
    }
    return 0;
}

void redis_pipe_want(const struct redis_pipe *p, int *fd, uint32_t *events, int64_t *at_us,
                     uint64_t *generation)
{
    *fd = p->c.ctx != NULL ? p->c.ctx->fd : -1;
    *events = EPOLLIN | (p->write_pending ? EPOLLOUT : 0);
    *at_us = p->busy ? p->deadline_us : INT64_MAX;
    *generation = p->generation;
}

int redis_pipe_busy(const struct redis_pipe *p)
{
    return p->busy;
}

int redis_scan(struct redis *r, char cursor[24], const char *pattern, int count,
               int64_t deadline_us, void (*each)(void *ud, const char *s, size_t len),
               void *ud, struct permitd_error *err)
{
    char count_s[12];
    const char *argv[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", count_s};
    size_t lens[6];
    redisReply *rep;
    int rc;

    snprintf(count_s, sizeof(count_s), "%d", count);
    for (int i = 0; i < 6; i++)
        lens[i] = strlen(argv[i]);
    if ((rc = call(r, 6, argv, lens, -1, deadline_us, &rep, err)) != PERMITD_OK)
        return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_STRING || rep->element[0]->len >= 24 ||
        rep->element[1]->type != REDIS_REPLY_ARRAY) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "SCAN answered with %s, not a cursor "
                               "and keys", reply_kind(rep->type));
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

int redis_command(struct redis *r, const struct redis_str *args, int nargs,
                  int64_t deadline_us, long long *integer,
                  void (*each)(void *ud, const char *s, size_t len), void *ud,
                  struct permitd_error *err)
{
    const char *argv[MAX_ARGV];
    size_t lens[MAX_ARGV];
    redisReply *rep;
    int rc;

    if (nargs > MAX_ARGV)
        return permitd_error_set(err, PERMITD_EINTERNAL, "too many command arguments");
    for (int i = 0; i < nargs; i++) {
        argv[i] = args[i].p;
        lens[i] = args[i].len;
    }
    if ((rc = call(r, nargs, argv, lens, -1, deadline_us, &rep, err)) != PERMITD_OK)
        return rc;
    if (integer != NULL)
        *integer = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    if (each != NULL && rep->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < rep->elements; i++)
            if (rep->element[i]->type == REDIS_REPLY_STRING)
                each(ud, rep->element[i]->str, (size_t)rep->element[i]->len);
    freeReplyObject(rep);
    return PERMITD_OK;
}

int redis_ping(struct redis *r, int64_t deadline_us, struct permitd_error *err)
{
    const struct redis_str ping = {"PING", 4};

    return redis_command(r, &ping, 1, deadline_us, NULL, NULL, NULL, err);
}

void redis_counters(struct redis *r, uint64_t *errors, uint64_t *connects)
{
    *errors = atomic_load(&r->errors);
    *connects = atomic_load(&r->connects);
}
