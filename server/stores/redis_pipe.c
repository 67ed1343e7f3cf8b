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
 * can sit in front of both.
 *
 * In a Redis Cluster, the pipe a limiter holds is a front (same API) over
 * one node pipe per master, made on demand; the front owns an epoll fd that
 * holds the node pipes' sockets, and that one fd is what the worker's loop
 * waits on (an epoll fd is readable when one of its sockets is ready). A
 * batch is split by the master of each call's first key (every key of one
 * script call shares a slot: the limiter's contract), each node's share
 * goes out at once, and each node's replies are handled as they come,
 * without waiting for the other nodes. A call answered MOVED (the slot map
 * is pointed at the new owner) or ASK (sent again after ASKING) is queued on
 * the node named and goes out when that node's pipe has no round out; at
 * most REDIRECT_HOPS_MAX hops, then unavailable. NOSCRIPT reloads per node
 * as above. The arrays are kept and reused: no allocation per batch once
 * the largest batch has been seen.
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
#include "stores/cluster.h"
#include "stores/redis.h"
#include "stores/redis_conn.h"
#include "stores/redis_tls.h"

/* One reply as the pipe's reader files it. hiredis's default reader builds
 * an object per reply (and per element of an array). The pipe's reader
 * allocates nothing: a script's numbers go straight into the out[] of the
 * call the reply answers, and an error or another string (SCRIPT LOAD's
 * SHA) is copied here, truncated. */
#define CALL_REDIRECTED (-3)      /* a node pipe's call rc: MOVED or ASK, see redir[] */
#define REDIRECT_HOPS_MAX 3       /* a call is redirected at most this often */
#define TRYAGAIN_PAUSE_US 5000    /* a call answered TRYAGAIN goes again after this */
#define REDIR_ASK 1               /* redir_ask[] bits: send ASKING first */
#define REDIR_PAUSE 2             /*   TRYAGAIN: wait TRYAGAIN_PAUSE_US first */
#define FRONT_EVENTS_MAX 16
/* What Redis 7 answers when a script touches a key of a slot its node does
 * not serve (or a key of a slot being migrated that is not there): not a
 * redirect but an error raised inside the script (lua/bucket.lua's top). */
#define SCRIPT_NON_LOCAL "Script attempted to access a non local key"

struct pipe_reply {
    int type;                     /* REDIS_REPLY_* of the reply itself */
    int asking;                   /* it answers the ASKING before call */
    struct redis_script_call *call; /* the call it answers; NULL: a preamble reply */
    int numbers;                  /* its numbers are in call->out */
    char str[192];
    size_t len;
};

struct redis_pipe {
    struct redis *r;
    struct redis_conn c;
    uint64_t generation;          /* counts connections: the loop's epoll key */
    struct redis_script_call *calls;
    size_t n;
    size_t awaiting;              /* replies still due in this round */
    size_t cursor;                /* the first call that may be awaiting one */
    int greet;                    /* a new connection: AUTH and SELECT go first */
    int load;                     /* SCRIPT LOAD goes first (new connection, NOSCRIPT) */
    const char *preamble[2 + REDIS_SCRIPT_COUNT];  /* the commands sent before the calls,
                                                      in order */
    int preamble_script[2 + REDIS_SCRIPT_COUNT];   /* a SCRIPT LOAD's script */
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

    /* A node pipe of a cluster front: the front's calls it carries this
     * round (own[], copies pointing at the caller's out[]), by the front's
     * index (orig[]); ASKING before a call (asking[]: 0 no, 1 its reply is
     * due, 2 answered); where a redirected call goes (redir[], redir_ask[]);
     * the front's calls waiting for this round to end (queued[]). */
    struct redis_script_call *own;
    size_t *orig;
    unsigned char *asking, *redir_ask;
    struct redis_node **redir;
    size_t own_cap;
    size_t *queued;
    unsigned char *queued_ask;
    size_t nqueued, queued_cap;
    int reg_fd;                   /* as the front's epoll holds it: fd, events, generation */
    uint32_t reg_events;
    uint64_t reg_gen;

    /* A cluster front (front = 1): the node pipes by node index, the epoll
     * fd that holds their sockets, the caller's batch and what is left. */
    int front;
    int epfd;
    struct redis_pipe *subs[REDIS_NODES_MAX];
    struct redis_script_call *fcalls;
    size_t fn, left;
    unsigned char *hops;
    size_t hops_cap;
    int64_t give_up_us;           /* TRYAGAIN is retried until then */
    size_t *later;                /* calls answered TRYAGAIN: sent again at later_at */
    struct redis_node **later_node;
    unsigned char *later_ask;
    size_t nlater;
    int64_t later_at;
    struct permitd_error ferr;    /* the first whole-node failure of the batch */
};

int redis_pipe_new(struct redis *r, struct redis_pipe **out, struct permitd_error *err)
{
    *out = calloc(1, sizeof(**out));
    if (*out == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "redis pipe: out of memory");
    (*out)->r = r;
    (*out)->reg_fd = -1;
    (*out)->epfd = -1;
    if (r->route == NULL) {
        (*out)->c.node = r->nodes[0];
        return PERMITD_OK;
    }
    (*out)->front = 1;
    if (((*out)->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        free(*out);
        *out = NULL;
        return PERMITD_EINTERNAL;
    }
    return PERMITD_OK;
}

void redis_pipe_free(struct redis_pipe *p)
{
    if (p == NULL)
        return;
    for (int i = 0; i < REDIS_NODES_MAX; i++)
        redis_pipe_free(p->subs[i]);
    if (p->epfd >= 0)
        close(p->epfd);
    redis_conn_close(&p->c);
    free(p->buf);
    free(p->own);
    free(p->orig);
    free(p->asking);
    free(p->redir_ask);
    free(p->redir);
    free(p->queued);
    free(p->queued_ask);
    free(p->hops);
    free(p->later);
    free(p->later_node);
    free(p->later_ask);
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
    for (int i = 0; p->load && i < REDIS_SCRIPT_COUNT; i++) {
        /* Every script (a batch may call several: one per algorithm). */
        const struct embedded_file *script = p->r->scripts[i];
        if (script == NULL || i == REDIS_SCRIPT_SYNC)
            continue;
        if (buf_put(p, &len, "*3\r\n", 4) || buf_bulk(p, &len, "SCRIPT", 6) ||
            buf_bulk(p, &len, "LOAD", 4) || buf_bulk(p, &len, script->data, script->len))
            return -1;
        p->preamble_script[p->npreamble] = i;
        p->preamble[p->npreamble++] = "SCRIPT LOAD";
    }
    p->awaiting = (size_t)p->npreamble;
    for (size_t i = 0; i < p->n; i++) {
        const struct redis_script_call *c = &p->calls[i];
        if (c->rc != -1)
            continue;
        if (p->asking != NULL && p->asking[i] != 0) {
            if (buf_put(p, &len, "*1\r\n$6\r\nASKING\r\n", 16))
                return -1;
            p->asking[i] = 1;
            p->awaiting++;
        }
        if (buf_put(p, &len, head, resp_len(head, '*', (size_t)(3 + c->nkeys + c->nargs))) ||
            buf_bulk(p, &len, "EVALSHA", 7) || buf_bulk(p, &len, p->c.sha[c->script], 40))
            return -1;
        if (buf_bulk(p, &len, head, put_uint(head, (size_t)c->nkeys)))
            return -1;
        for (int k = 0; k < c->nkeys; k++)
            if (buf_bulk(p, &len, c->keys[k].p, c->keys[k].len))
                return -1;
        for (int k = 0; k < c->nargs; k++)
            if (buf_bulk(p, &len, c->args[k].p, c->args[k].len))
                return -1;
        redis_count_script(p->r, (int)c->script);
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
        ssize_t n = redis_io_send(p->c.ctx, p->c.tls, p->buf + p->buf_sent,
                                  p->buf_len - p->buf_sent);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;              /* the rest when the socket is writable (also: still connecting) */
        if (n < 0)
            return pipe_fail(p, permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s",
                                                  p->c.node->where, p->c.ctx->errstr), err);
        p->buf_sent += (size_t)n;
    }
    p->write_pending = p->buf_sent < p->buf_len;
    return PERMITD_OK;
}

/* The call the next reply answers, or NULL while the preamble's replies
 * are due: the walk pipe_reply() makes, without moving. */
static struct redis_script_call *reply_target(const struct redis_pipe *p, int *asking)
{
    size_t k = p->cursor;

    *asking = 0;
    if (p->answered < p->npreamble)
        return NULL;
    while (k < p->n && p->calls[k].rc != -1)
        k++;
    if (k < p->n && p->asking != NULL && p->asking[k] == 1)
        *asking = 1;            /* the ASKING sent before that call */
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
        p->rep.call = reply_target(p, &p->rep.asking);
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

    if (task->parent == NULL && task->type == REDIS_REPLY_STRING && p->rep.call != NULL &&
        !p->rep.asking) {
        struct redis_script_call *c = p->rep.call;
        p->rep.numbers = redis_answer_read(c->script, s, len, c->out, c->nout, NULL) ==
                         PERMITD_OK;
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
    if (task->parent == NULL && c != NULL && !p->rep.asking) {
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
    if (task->parent != NULL && task->parent->parent == NULL && c != NULL && !p->rep.asking &&
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

/* redis_pipe_send() on one node's pipe (the single Redis's, or a front's
 * node pipe). */
static int node_send(struct redis_pipe *p, struct redis_script_call *calls, size_t n,
                     int64_t deadline_us, struct permitd_error *err)
{
    int bound, timeout_ms, rc;

    for (size_t i = 0; i < n; i++)
        if (!redis_script_present(p->r, calls[i].script))
            return permitd_error_set(err, PERMITD_EUNIMPLEMENTED, "script %s is not in this "
                                     "build of permitd", redis_script_name(calls[i].script));

    timeout_ms = redis_call_timeout(p->r, deadline_us, &bound, err);
    if (timeout_ms < 0)
        return timeout_ms;
    if (redis_conn_stale(p->r, &p->c))
        redis_conn_close(&p->c);        /* Sentinel: the master changed (no batch in flight) */
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
        for (int i = 0; i < REDIS_SCRIPT_COUNT; i++)
            if (p->r->scripts[i] != NULL)
                memcpy(p->c.sha[i], p->r->scripts[i]->sha1, 41);
        p->generation++;
    }
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
    int at = p->answered++;
    const char *what = p->preamble[at];
    int load = strcmp(what, "SCRIPT LOAD") == 0;

    if (rep->type == REDIS_REPLY_ERROR || (load && (rep->type != REDIS_REPLY_STRING ||
                                                    rep->len != 40))) {
        snprintf(p->c.last_error, sizeof(p->c.last_error), "%s failed: %.100s", what,
                 rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
        return -1;
    }
    if (load)
        memcpy(p->c.sha[p->preamble_script[at]], rep->str, 41);
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
    struct cluster_redirect rd;

    p->awaiting--;
    if (c == NULL && p->answered >= p->npreamble) {
        snprintf(p->c.last_error, sizeof(p->c.last_error), "a reply nothing asked for");
        return -1;
    }
    if (c == NULL)
        return pipe_preamble(p, rep);
    if (rep->asking) {
        p->asking[c - p->calls] = 2;    /* its call's reply comes next */
        return 0;
    }
    p->cursor = (size_t)(c - p->calls) + 1;
    if (rep->type == REDIS_REPLY_ERROR && p->redir != NULL && c->cross_slot &&
        (cluster_redirect_parse(rep->str, rep->len, &rd) != CLUSTER_REDIRECT_NONE ||
         strncmp(rep->str, "TRYAGAIN", 8) == 0 ||
         strstr(rep->str, SCRIPT_NON_LOCAL) != NULL)) {
        /* A call over several slots cannot follow a redirect whole (the
         * node named serves one of its slots, maybe not the others): its
         * items go again per slot (the limiter's). A MOVED still points
         * its slot at the new owner; a key the node no longer serves asks
         * for a new map. */
        if (strncmp(rep->str, "MOVED", 5) == 0)
            redis_route_redirect(p->r, &rd, p->c.node);
        else if (strstr(rep->str, SCRIPT_NON_LOCAL) != NULL)
            redis_route_refresh_soon(p->r);
        c->rc = REDIS_CALL_SPLIT;
    } else if (rep->type == REDIS_REPLY_ERROR && p->redir != NULL &&
        cluster_redirect_parse(rep->str, rep->len, &rd) != CLUSTER_REDIRECT_NONE) {
        size_t k = (size_t)(c - p->calls);
        p->redir[k] = redis_route_redirect(p->r, &rd, p->c.node);
        p->redir_ask[k] = rd.kind == CLUSTER_REDIRECT_ASK ? REDIR_ASK : 0;
        c->rc = CALL_REDIRECTED;
    } else if (rep->type == REDIS_REPLY_ERROR && p->redir != NULL &&
               strncmp(rep->str, "TRYAGAIN", 8) == 0) {
        /* A multi-key call whose slot is half migrated: the same node again,
         * ASKING again if it was asked, in a moment. */
        size_t k = (size_t)(c - p->calls);
        p->redir[k] = p->c.node;
        p->redir_ask[k] = (unsigned char)(REDIR_PAUSE | (p->asking[k] != 0 ? REDIR_ASK : 0));
        c->rc = CALL_REDIRECTED;
    } else if (rep->type == REDIS_REPLY_ERROR && redis_error_noscript(rep->str)) {
        c->rc = -2;             /* sent again once the script is loaded */
    } else if (rep->type == REDIS_REPLY_ERROR &&
               redis_error_status(rep->str) == PERMITD_EUNAVAILABLE) {
        if (!p->unserving)
            log_msg(LOG_LEVEL_WARN, "redis cannot serve now", "addr=%s error=\"%.200s\"",
                    p->c.node->where, rep->str);
        p->unserving = 1;
        c->rc = PERMITD_EUNAVAILABLE;
    } else if (rep->numbers) {
        c->rc = PERMITD_OK;     /* they are in c->out already */
    } else {
        log_msg(LOG_LEVEL_WARN, "script call failed", "script=%s error=\"%.200s\"",
                redis_script_files[c->script],
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
                                              "the script just loaded", p->c.node->where), err);
    log_msg(LOG_LEVEL_WARN, "redis lost its scripts; reloading", "addr=%s", p->c.node->where);
    p->reloaded = p->load = 1;
    if (pipe_queue(p) != 0)
        return pipe_fail(p, permitd_error_set(err, PERMITD_EINTERNAL, "out of memory"), err);
    {
        int rc = pipe_write(p, err);
        return rc == PERMITD_OK ? 0 : rc;
    }
}

/* redis_pipe_io() on one node's pipe. */
static int node_io(struct redis_pipe *p, uint32_t revents, struct permitd_error *err)
{
    redisContext *ctx = p->c.ctx;
    int rc;

    if (ctx == NULL)
        return 0;
    if (!p->busy) {
        /* An idle connection is readable only when Redis closed it (a
         * restart) or sent what nobody asked for: drop it either way. */
        /* Over TLS, Redis's session tickets arrive after the handshake:
         * read, and drop the connection only for a close or a reply. */
        if (revents != 0 && p->c.tls != NULL && redis_io_read(ctx, p->c.tls) == REDIS_OK &&
            ctx->reader->pos >= ctx->reader->len)
            return 0;
        if (revents != 0) {
            log_msg(LOG_LEVEL_DEBUG, "redis pipe connection dropped while idle", "addr=%s", p->c.node->where);
            redis_conn_close(&p->c);
        }
        return 0;
    }
    if (p->write_pending && (revents & (EPOLLOUT | EPOLLERR | EPOLLHUP)) &&
        (rc = pipe_write(p, err)) != PERMITD_OK)
        return rc;
    if (revents & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        if (redis_io_read(ctx, p->c.tls) != REDIS_OK)
            return pipe_fail(p, permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s",
                                                  p->c.node->where, ctx->errstr), err);
        for (;;) {
            void *rep = NULL;
            if (redisGetReplyFromReader(ctx, &rep) != REDIS_OK)
                return pipe_fail(p, permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s",
                                                      p->c.node->where, ctx->errstr), err);
            if (rep == NULL)
                break;
            rc = pipe_reply(p, rep);
            if (rc != 0)
                return pipe_fail(p, permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: %s",
                                                      p->c.node->where, p->c.last_error), err);
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
                                   "%d ms", p->c.node->where, p->timeout_ms);
        return pipe_fail(p, rc, err);
    }
    return 0;
}

static void node_want(const struct redis_pipe *p, int *fd, uint32_t *events, int64_t *at_us,
                      uint64_t *generation)
{
    *fd = p->c.ctx != NULL ? p->c.ctx->fd : -1;
    *events = EPOLLIN | (p->write_pending && !redis_tls_waits_to_read(p->c.tls) ? EPOLLOUT : 0);
    *at_us = p->busy ? p->deadline_us : INT64_MAX;
    *generation = p->generation;
}

int redis_pipe_busy(const struct redis_pipe *p)
{
    return p->busy;
}

/* ---- The cluster front ---- */

/* Grows the arrays sized by calls: a node pipe's own[] and friends to
 * hold n, the front's hops[] to n. 0 or -1 (out of memory). */
static int grow(void **a, size_t size, size_t n)
{
    void *b = realloc(*a, size * n);

    if (b == NULL)
        return -1;
    *a = b;
    return 0;
}

static int node_reserve(struct redis_pipe *sub, size_t n)
{
    size_t cap = sub->own_cap ? sub->own_cap : 64;

    if (n <= sub->own_cap)
        return 0;
    while (cap < n)
        cap *= 2;
    if (grow((void **)&sub->own, sizeof(*sub->own), cap) ||
        grow((void **)&sub->orig, sizeof(*sub->orig), cap) ||
        grow((void **)&sub->asking, 1, cap) || grow((void **)&sub->redir_ask, 1, cap) ||
        grow((void **)&sub->redir, sizeof(*sub->redir), cap))
        return -1;
    sub->own_cap = cap;
    return 0;
}

/* Brings the front's epoll in line with sub's socket and what it waits for. */
static void node_register(struct redis_pipe *p, struct redis_pipe *sub)
{
    struct epoll_event ev;
    int64_t at;
    uint64_t gen;
    uint32_t events;
    int fd;

    node_want(sub, &fd, &events, &at, &gen);
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.ptr = sub;
    if (fd != sub->reg_fd || gen != sub->reg_gen) {
        /* A new socket. The old one was closed, which took it out of the
         * epoll by itself (no DEL: its number may be another node pipe's
         * socket by now, and a DEL would take that one out). */
        if (fd >= 0 && epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EEXIST)
            epoll_ctl(p->epfd, EPOLL_CTL_MOD, fd, &ev);
    } else if (fd >= 0 && events != sub->reg_events) {
        epoll_ctl(p->epfd, EPOLL_CTL_MOD, fd, &ev);
    }
    sub->reg_fd = fd;
    sub->reg_gen = gen;
    sub->reg_events = events;
}

/* The front's call i ends with rc. */
static void front_done(struct redis_pipe *p, size_t i, int rc)
{
    p->fcalls[i].rc = rc;
    p->left--;
}

/* Queues the front's call i on node's pipe (made on first use). */
static void front_queue(struct redis_pipe *p, struct redis_node *node, size_t i, int ask)
{
    struct redis_pipe *sub = p->subs[node->index];

    if (sub == NULL) {
        if ((sub = calloc(1, sizeof(*sub))) == NULL) {
            front_done(p, i, PERMITD_EINTERNAL);
            return;
        }
        sub->r = p->r;
        sub->c.node = node;
        sub->reg_fd = sub->epfd = -1;
        p->subs[node->index] = sub;
    }
    if (sub->nqueued == sub->queued_cap) {
        size_t cap = sub->queued_cap ? 2 * sub->queued_cap : 64;
        if (grow((void **)&sub->queued, sizeof(*sub->queued), cap) ||
            grow((void **)&sub->queued_ask, 1, cap)) {
            front_done(p, i, PERMITD_EINTERNAL);
            return;
        }
        sub->queued_cap = cap;
    }
    sub->queued[sub->nqueued] = i;
    sub->queued_ask[sub->nqueued++] = (unsigned char)ask;
}

/* Sends what waits on sub, unless a round of it is out. */
static void front_dispatch(struct redis_pipe *p, struct redis_pipe *sub)
{
    struct permitd_error e = {0, ""};
    size_t n = sub->nqueued;
    int rc;

    if (sub->busy || n == 0)
        return;
    if (node_reserve(sub, n) != 0) {
        for (size_t k = 0; k < n; k++)
            front_done(p, sub->queued[k], PERMITD_EINTERNAL);
        sub->nqueued = 0;
        return;
    }
    for (size_t k = 0; k < n; k++) {
        sub->own[k] = p->fcalls[sub->queued[k]];
        sub->orig[k] = sub->queued[k];
        sub->asking[k] = sub->queued_ask[k];
        sub->redir[k] = NULL;
    }
    sub->nqueued = 0;
    rc = node_send(sub, sub->own, n, p->deadline_us, &e);
    if (rc != PERMITD_OK) {
        if (p->ferr.code == 0)
            p->ferr = e;
        for (size_t k = 0; k < n; k++)
            front_done(p, sub->orig[k], rc);
    }
    node_register(p, sub);
}

/* The front's call i goes to node again (ask: after ASKING) in
 * TRYAGAIN_PAUSE_US. */
static void front_later(struct redis_pipe *p, struct redis_node *node, size_t i, int ask)
{
    if (p->nlater == p->fn) {
        front_done(p, i, PERMITD_EINTERNAL);    /* cannot happen: one entry per call */
        return;
    }
    if (p->nlater == 0)
        p->later_at = clock_now_us() + TRYAGAIN_PAUSE_US;
    p->later[p->nlater] = i;
    p->later_node[p->nlater] = node;
    p->later_ask[p->nlater++] = (unsigned char)ask;
}

/* sub's round ended (1) or failed as a whole (rc < 0): its calls end, or
 * go where they were redirected. */
static void front_round(struct redis_pipe *p, struct redis_pipe *sub, int rc,
                        const struct permitd_error *e)
{
    for (size_t k = 0; k < sub->n; k++) {
        size_t i = sub->orig[k];
        int crc = rc < 0 ? rc : sub->own[k].rc;

        if (crc != CALL_REDIRECTED) {
            front_done(p, i, crc);
        } else if (sub->redir_ask[k] & REDIR_PAUSE) {
            if (clock_now_us() + TRYAGAIN_PAUSE_US >= p->give_up_us) {
                log_msg(LOG_LEVEL_WARN, "redis cluster: TRYAGAIN until the timeout", "node=%s",
                        sub->c.node->where);
                front_done(p, i, PERMITD_EUNAVAILABLE);
            } else {
                front_later(p, sub->redir[k], i, sub->redir_ask[k] & REDIR_ASK);
            }
        } else if (++p->hops[i] > REDIRECT_HOPS_MAX || sub->redir[k] == NULL) {
            log_msg(LOG_LEVEL_WARN, "redis cluster: a call is still redirected", "node=%s hops=%d",
                    sub->c.node->where, (int)p->hops[i]);
            front_done(p, i, PERMITD_EUNAVAILABLE);
        } else {
            front_queue(p, sub->redir[k], i, sub->redir_ask[k]);
        }
    }
    if (rc < 0 && p->ferr.code == 0)
        p->ferr = *e;
    sub->n = 0;
}

static int front_send(struct redis_pipe *p, struct redis_script_call *calls, size_t n,
                      int64_t deadline_us, struct permitd_error *err)
{
    if (n > p->hops_cap) {
        if (grow((void **)&p->hops, 1, n) != 0 || grow((void **)&p->later, sizeof(*p->later), n) ||
            grow((void **)&p->later_node, sizeof(*p->later_node), n) ||
            grow((void **)&p->later_ask, 1, n))
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        p->hops_cap = n;
    }
    p->nlater = 0;
    p->give_up_us = clock_now_us() + (int64_t)p->r->cfg->redis_timeout_ms * 1000;
    if (deadline_us < p->give_up_us)
        p->give_up_us = deadline_us;
    p->fcalls = calls;
    p->fn = p->left = n;
    p->deadline_us = deadline_us;
    p->ferr.code = 0;
    p->ferr.message[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        unsigned slot = 0;
        struct redis_node *node = calls[i].nkeys > 0
            ? redis_route_node(p->r, calls[i].keys[0].p, calls[i].keys[0].len, &slot) : NULL;

        calls[i].rc = -1;
        p->hops[i] = 0;
        if (node == NULL) {
            if (p->ferr.code == 0)
                permitd_error_set(&p->ferr, PERMITD_EUNAVAILABLE, "redis cluster %s: no master "
                                  "serves slot %u yet", p->r->where, slot);
            front_done(p, i, PERMITD_EUNAVAILABLE);
        } else {
            front_queue(p, node, i, 0);
        }
    }
    for (int k = 0; k < REDIS_NODES_MAX; k++)
        if (p->subs[k] != NULL)
            front_dispatch(p, p->subs[k]);
    /* Nothing went out and every call failed alike: the whole batch fails,
     * as a single Redis's would. */
    {
        int out = 0;
        for (int k = 0; k < REDIS_NODES_MAX; k++)
            out |= p->subs[k] != NULL && p->subs[k]->busy;
        if (!out && p->left == 0 && p->ferr.code != 0) {
            *err = p->ferr;
            return err->code;
        }
    }
    p->busy = 1;
    return PERMITD_OK;
}

static int front_io(struct redis_pipe *p, uint32_t revents, struct permitd_error *err)
{
    struct epoll_event ev[FRONT_EVENTS_MAX];
    int64_t now;
    int k;

    (void)revents;
    k = epoll_wait(p->epfd, ev, FRONT_EVENTS_MAX, 0);
    for (int i = 0; i < k; i++) {
        struct redis_pipe *sub = ev[i].data.ptr;
        struct permitd_error e = {0, ""};
        int rc = node_io(sub, ev[i].events, &e);

        if (rc != 0)
            front_round(p, sub, rc, &e);
        node_register(p, sub);
    }
    now = clock_now_us();
    for (int i = 0; i < REDIS_NODES_MAX; i++) {
        struct redis_pipe *sub = p->subs[i];
        struct permitd_error e = {0, ""};
        int rc;

        if (sub == NULL || !sub->busy || sub->deadline_us > now)
            continue;
        if ((rc = node_io(sub, 0, &e)) != 0)
            front_round(p, sub, rc, &e);
        node_register(p, sub);
    }
    if (p->nlater > 0 && now >= p->later_at) {
        for (size_t j = 0; j < p->nlater; j++)
            front_queue(p, p->later_node[j], p->later[j], p->later_ask[j]);
        p->nlater = 0;
    }
    for (int i = 0; i < REDIS_NODES_MAX; i++)
        if (p->subs[i] != NULL)
            front_dispatch(p, p->subs[i]);
    if (p->busy && p->left == 0) {
        p->busy = 0;
        if (p->ferr.code != 0)
            *err = p->ferr;
        return 1;
    }
    return 0;
}

static void front_want(const struct redis_pipe *p, int *fd, uint32_t *events, int64_t *at_us,
                       uint64_t *generation)
{
    *fd = p->epfd;
    *events = EPOLLIN;
    *generation = 1;
    *at_us = INT64_MAX;
    if (!p->busy)
        return;
    if (p->left == 0) {
        *at_us = 0;             /* ended without a socket event: say so at once */
        return;
    }
    if (p->nlater > 0)
        *at_us = p->later_at;
    for (int i = 0; i < REDIS_NODES_MAX; i++)
        if (p->subs[i] != NULL && p->subs[i]->busy && p->subs[i]->deadline_us < *at_us)
            *at_us = p->subs[i]->deadline_us;
}

int redis_pipe_send(struct redis_pipe *p, struct redis_script_call *calls, size_t n,
                    int64_t deadline_us, struct permitd_error *err)
{
    return p->front ? front_send(p, calls, n, deadline_us, err)
                    : node_send(p, calls, n, deadline_us, err);
}

int redis_pipe_io(struct redis_pipe *p, uint32_t revents, struct permitd_error *err)
{
    return p->front ? front_io(p, revents, err) : node_io(p, revents, err);
}

void redis_pipe_want(const struct redis_pipe *p, int *fd, uint32_t *events, int64_t *at_us,
                     uint64_t *generation)
{
    if (p->front)
        front_want(p, fd, events, at_us, generation);
    else
        node_want(p, fd, events, at_us, generation);
}
