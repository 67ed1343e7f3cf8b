/*
 * redis_pipe.c - pipelined script calls on a non-blocking connection,
 * driven by an event loop (a limiter queue's, on a worker's loop).
 *
 * A pipe has its own connection (never the thread's blocking one, which the
 * same thread may need for a synchronous call while a batch is out). Nothing
 * on it blocks: it connects without waiting, to the numeric address the
 * resolver keeps (resolve.h: no DNS on the loop), with the same backoff as
 * any connection (redis.c, through redis_conn.h); the batch is written as
 * one RESP buffer, replies are read as the loop reports the socket
 * readable, and the batch fails as a whole at its deadline. NOSCRIPT (Redis
 * restarted or flushed its scripts) sends SCRIPT LOAD and the calls it
 * refused once more, on the same connection, without blocking. A Redis that
 * cannot serve now (redis_error_status()) fails the calls it refused with
 * unavailable, and the connection is dropped.
 *
 * Kept apart from the blocking calls of redis.c so that a cluster router
 * can sit in front of both (one pipe per master per worker).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "core/clock.h"
#include "core/log.h"
#include "stores/redis.h"
#include "stores/redis_conn.h"

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
    struct redis_conn c;
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

int redis_pipe_new(struct redis *r, struct redis_pipe **out, struct permitd_error *err)
{
    *out = calloc(1, sizeof(**out));
    if (*out == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "redis pipe: out of memory");
    (*out)->r = r;
    return PERMITD_OK;
}

void redis_pipe_free(struct redis_pipe *p)
{
    if (p == NULL)
        return;
    redis_conn_close(&p->c);
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
        redis_conn_down(p->r, &p->c, NULL);
        return rc;
    }
    atomic_fetch_add(&p->r->errors, 1);
    redis_conn_close(&p->c);
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
        p->rep.numbers = redis_answer_numbers(s, len, c->out, c->nout, NULL) == PERMITD_OK;
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

    timeout_ms = redis_call_timeout(p->r, deadline_us, &bound, err);
    if (timeout_ms < 0)
        return timeout_ms;
    if (p->c.ctx == NULL) {
        /* Nothing here blocks: the connect completes, and the handshake
         * goes out with the first batch, while the loop waits on the
         * socket; the batch's deadline covers them all. So neither an
         * unreachable Redis nor one that accepts but does not answer can
         * stall the caller's loop. */
        rc = redis_conn_ensure(p->r, &p->c, timeout_ms, 0, err);
        if (rc != PERMITD_OK)
            return redis_conn_failed(p->r, bound, deadline_us, err);
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
            redis_conn_up(p->r, &p->c);
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
    if (rep->type == REDIS_REPLY_ERROR && redis_error_noscript(rep->str)) {
        c->rc = -2;             /* sent again once the script is loaded */
    } else if (rep->type == REDIS_REPLY_ERROR &&
               redis_error_status(rep->str) == PERMITD_EUNAVAILABLE) {
        if (!p->unserving)
            log_msg(LOG_LEVEL_WARN, "redis cannot serve now", "addr=%s error=\"%.200s\"",
                    p->r->where, rep->str);
        p->unserving = 1;
        c->rc = PERMITD_EUNAVAILABLE;
    } else if (rep->numbers) {
        c->rc = PERMITD_OK;     /* they are in c->out already */
    } else {
        log_msg(LOG_LEVEL_WARN, "script call failed", "script=%s error=\"%.200s\"",
                redis_script_files[p->script],
                rep->type == REDIS_REPLY_ERROR ? rep->str : redis_reply_kind(rep->type));
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
        redis_conn_drop(p->r, &p->c);
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
    log_msg(LOG_LEVEL_WARN, "redis lost its scripts; reloading", "addr=%s", p->r->where);
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
            log_msg(LOG_LEVEL_DEBUG, "redis pipe connection dropped while idle", "addr=%s", p->r->where);
            redis_conn_close(&p->c);
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
