/*
 * redis_sentinel.c - Redis Sentinel: which server is the master, now.
 *
 * With redis+sentinel://s1:p,s2:p/name, permitd's one Redis node (nodes[0])
 * has no address of its own: redis_conn_ensure() asks this file for the
 * master's (redis_sentinel_master()) each time it connects, and a
 * connection made to an older master is closed on its next use
 * (redis_sentinel_epoch() moved on), so the workers' pipes, the blocking
 * calls and the change notices' subscription all follow a failover.
 *
 * A thread of its own does the talking, in blocking calls:
 *  - it asks the sentinels in turn, one that cannot be reached or does not
 *    know the master skipped, SENTINEL get-master-addr-by-name, then
 *    checks the answer with ROLE on that server (with the URL's user and
 *    password): only a server that says "master" is taken;
 *  - it stays SUBSCRIBEd to +switch-master on the sentinel that answered
 *    and asks again when one names our master; when that sentinel goes
 *    down, it moves to the next;
 *  - a call that saw the master fail (refused, broken, READONLY from a
 *    demoted master: redis_route_refresh_soon()) sets `ask`, so a missed
 *    notice costs at most one round of asking (at most every 100 ms).
 * The sentinels are dialled with --redis-sentinel-user/-password and, for
 * rediss+sentinel://, over TLS with the same settings as the master.
 */
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "core/clock.h"
#include "core/log.h"
#include "stores/redis_conn.h"
#include "stores/redis_tls.h"

#define SENTINEL_TIMEOUT_MS 1000    /* a sentinel's or the master's connect and call */
#define ASK_EVERY_US 100000         /* asks at most this often */
#define POLL_MS 100                 /* the thread looks at `ask` and `stopping` this often */
#define START_WAIT_MS 3000          /* redis_sentinel_start() waits this long for a master */
#define RECHECK_US 5000000          /* and asks anyway this often (a notice may be lost) */

struct redis_sentinel {
    struct redis *r;
    pthread_t thread;
    _Atomic int stopping;
    _Atomic int ask;                /* a call saw the master fail: ask again soon */
    pthread_mutex_t lock;           /* the master below */
    pthread_cond_t known;           /* signalled when a master is first known */
    char host[256];                 /* the master as the sentinels name it; "" unknown */
    char ip[RESOLVE_ADDR_MAX];      /* its numeric address */
    int port;
    _Atomic uint64_t epoch;         /* +1 each time the master changes */
    _Atomic uint64_t switches;      /* master changes seen after the first */
    int current;                    /* the sentinel last answering (the thread's) */
    char why[200];                  /* why no master is known (under lock) */
};

/* A blocking connection the thread makes and closes. */
struct link {
    redisContext *ctx;
    struct redis_tls_session *tls;
};

static void link_close(struct link *l)
{
    redis_tls_session_free(l->tls);
    l->tls = NULL;
    if (l->ctx != NULL)
        redisFree(l->ctx);
    l->ctx = NULL;
}

static redisReply *link_call(struct link *l, int argc, const char **argv)
{
    size_t lens[8];

    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return redis_io_command(l->ctx, l->tls, argc, argv, lens);
}

/* Connects to host:port (TLS when rediss), AUTH with user/password when
 * password is set. 0, or -1 with why. */
static int link_open(struct redis *r, const char *host, int port, const char *user,
                     const char *password, struct link *l, char *why, size_t whylen)
{
    struct timeval tv = {SENTINEL_TIMEOUT_MS / 1000, (SENTINEL_TIMEOUT_MS % 1000) * 1000};
    char where[300];

    snprintf(where, sizeof(where), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    l->ctx = redisConnectWithTimeout(host, port, tv);
    l->tls = NULL;
    if (l->ctx == NULL || l->ctx->err) {
        snprintf(why, whylen, "%.80s: %.70s", where, l->ctx ? l->ctx->errstr : "out of memory");
        link_close(l);
        return -1;
    }
    redisSetTimeout(l->ctx, tv);
    if (r->tls != NULL) {
        struct permitd_error e = {0, ""};
        if (redis_tls_start(r->tls, l->ctx, host, where, SENTINEL_TIMEOUT_MS, 1, &l->tls,
                            &e) != PERMITD_OK) {
            snprintf(why, whylen, "%.60s: %.90s", where, e.message);
            link_close(l);
            return -1;
        }
        redis_tls_set_timeout(l->tls, SENTINEL_TIMEOUT_MS);
    }
    if (password[0] != '\0') {
        const char *argv[3] = {"AUTH", user[0] ? user : password, password};
        redisReply *rep = link_call(l, user[0] ? 3 : 2, argv);
        if (rep == NULL || rep->type == REDIS_REPLY_ERROR) {
            snprintf(why, whylen, "%.60s: AUTH failed: %.80s", where,
                     rep ? rep->str : l->ctx->errstr);
            freeReplyObject(rep);
            link_close(l);
            return -1;
        }
        freeReplyObject(rep);
    }
    return 0;
}

/* host's numeric address into ip (this thread may block on DNS). */
static int numeric(const char *host, char *ip, size_t iplen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;

    if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
        return -1;
    getnameinfo(res->ai_addr, res->ai_addrlen, ip, (socklen_t)iplen, NULL, 0, NI_NUMERICHOST);
    freeaddrinfo(res);
    return 0;
}

/* ROLE on host:port, with the URL's user and password: 0 when it says
 * master. */
static int is_master(struct redis *r, const char *host, int port, char *why, size_t whylen)
{
    const struct config *cfg = r->cfg;
    const char *argv[1] = {"ROLE"};
    struct link l;
    redisReply *rep;
    int rc = -1;

    if (link_open(r, host, port, cfg->redis_user, cfg->redis_password, &l, why, whylen) != 0)
        return -1;
    rep = link_call(&l, 1, argv);
    if (rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
        rep->element[0]->type == REDIS_REPLY_STRING && strcmp(rep->element[0]->str, "master") == 0)
        rc = 0;
    else
        snprintf(why, whylen, "%.60s:%d answers ROLE with %.60s", host, port,
                 rep == NULL ? l.ctx->errstr
                 : rep->type == REDIS_REPLY_ERROR ? rep->str
                 : rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
                   rep->element[0]->type == REDIS_REPLY_STRING ? rep->element[0]->str
                 : "an unexpected reply");
    freeReplyObject(rep);
    link_close(&l);
    return rc;
}

/* host:port checked to be the master: made the current one (a new epoch
 * when it changed). */
static void take(struct redis_sentinel *s, const char *host, int port)
{
    char ip[RESOLVE_ADDR_MAX] = "", old[300] = "";
    int changed;

    if (numeric(host, ip, sizeof(ip)) != 0)
        return;
    pthread_mutex_lock(&s->lock);
    changed = s->port != port || strcmp(s->ip, ip) != 0;
    if (changed) {
        if (s->host[0] != '\0')
            snprintf(old, sizeof(old), "%s:%d", s->host, s->port);
        snprintf(s->host, sizeof(s->host), "%s", host);
        snprintf(s->ip, sizeof(s->ip), "%s", ip);
        s->port = port;
        atomic_fetch_add(&s->epoch, 1);
        pthread_cond_broadcast(&s->known);
    }
    s->why[0] = '\0';
    pthread_mutex_unlock(&s->lock);
    if (changed && old[0] != '\0') {
        atomic_fetch_add(&s->switches, 1);
        log_msg(LOG_LEVEL_WARN, "redis sentinel: the master changed", "master=%s from=%s to=%s:%d",
                s->r->cfg->redis_sentinel_master, old, host, port);
    } else if (changed) {
        log_msg(LOG_LEVEL_INFO, "redis sentinel: master found", "master=%s addr=%s:%d",
                s->r->cfg->redis_sentinel_master, host, port);
    }
}

static void set_why(struct redis_sentinel *s, const char *why)
{
    pthread_mutex_lock(&s->lock);
    snprintf(s->why, sizeof(s->why), "%s", why);
    pthread_mutex_unlock(&s->lock);
}

/* Asks sentinel i (on l, open) for the master and checks it. 0 when the
 * master is known and took; -1 with why. */
static int ask_one(struct redis_sentinel *s, struct link *l, char *why, size_t whylen)
{
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name",
                           s->r->cfg->redis_sentinel_master};
    redisReply *rep = link_call(l, 3, argv);
    char host[256];
    int port;

    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_STRING || rep->element[1]->type != REDIS_REPLY_STRING) {
        snprintf(why, whylen, "the sentinel does not know master \"%.40s\" (%.60s)",
                 s->r->cfg->redis_sentinel_master,
                 rep == NULL ? l->ctx->errstr : rep->type == REDIS_REPLY_ERROR ? rep->str
                 : rep->type == REDIS_REPLY_NIL ? "nil" : "an unexpected reply");
        freeReplyObject(rep);
        return -1;
    }
    snprintf(host, sizeof(host), "%s", rep->element[0]->str);
    port = atoi(rep->element[1]->str);
    freeReplyObject(rep);
    if (port < 1 || port > 65535 || is_master(s->r, host, port, why, whylen) != 0)
        return -1;
    take(s, host, port);
    return 0;
}

/* Opens sentinel i. 0 or -1 with why. */
static int open_sentinel(struct redis_sentinel *s, int i, struct link *l, char *why, size_t whylen)
{
    const struct config *cfg = s->r->cfg;

    return link_open(s->r, cfg->redis_seeds.seeds[i].host, cfg->redis_seeds.seeds[i].port,
                     cfg->redis_sentinel_user, cfg->redis_sentinel_password, l, why, whylen);
}

/* Asks the sentinels in turn, from the current one, until one names a
 * server that is the master. On success, with sub not NULL, leaves that
 * sentinel's link in *sub, SUBSCRIBEd to +switch-master. 0 or -1. */
static int ask_all(struct redis_sentinel *s, struct link *sub)
{
    int n = s->r->cfg->redis_seeds.nseeds;
    char why[200] = "no sentinel given";

    for (int k = 0; k < n; k++) {
        int i = (s->current + k) % n;
        struct link l;
        char one[160];

        if (open_sentinel(s, i, &l, one, sizeof(one)) != 0) {
            snprintf(why, sizeof(why), "sentinel %s", one);
            continue;           /* a sentinel that is down is skipped */
        }
        if (ask_one(s, &l, one, sizeof(one)) != 0) {
            snprintf(why, sizeof(why), "sentinel %s:%d: %s", s->r->cfg->redis_seeds.seeds[i].host,
                     s->r->cfg->redis_seeds.seeds[i].port, one);
            link_close(&l);
            continue;
        }
        s->current = i;
        if (sub != NULL && sub->ctx == NULL) {
            const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
            redisReply *rep = link_call(&l, 2, argv);
            if (rep != NULL && rep->type == REDIS_REPLY_ARRAY) {
                *sub = l;
                l.ctx = NULL;
                l.tls = NULL;
            }
            freeReplyObject(rep);
        }
        link_close(&l);
        return 0;
    }
    set_why(s, why);
    return -1;
}

/* A +switch-master message for our master: 1. */
static int switch_message(struct redis_sentinel *s, redisReply *rep)
{
    const char *name = s->r->cfg->redis_sentinel_master;
    size_t len = strlen(name);

    return rep->type == REDIS_REPLY_ARRAY && rep->elements == 3 &&
           rep->element[0]->type == REDIS_REPLY_STRING &&
           strcmp(rep->element[0]->str, "message") == 0 &&
           rep->element[2]->type == REDIS_REPLY_STRING &&
           strncmp(rep->element[2]->str, name, len) == 0 && rep->element[2]->str[len] == ' ';
}

static void *run(void *arg)
{
    struct redis_sentinel *s = arg;
    struct link sub = {NULL, NULL};
    int64_t last_ask = 0;

    while (!atomic_load(&s->stopping)) {
        int64_t now = clock_now_us();
        void *reply = NULL;
        struct pollfd pfd;

        if (sub.ctx == NULL || (atomic_load(&s->ask) && now - last_ask >= ASK_EVERY_US) ||
            now - last_ask >= RECHECK_US) {
            atomic_store(&s->ask, 0);
            last_ask = now;
            if (ask_all(s, &sub) != 0 || sub.ctx == NULL) {
                usleep(POLL_MS * 1000);
                continue;
            }
        }
        if (redisGetReplyFromReader(sub.ctx, &reply) != REDIS_OK) {
            link_close(&sub);
            continue;
        }
        if (reply != NULL) {
            if (switch_message(s, reply)) {
                log_msg(LOG_LEVEL_INFO, "redis sentinel: +switch-master", "message=\"%.200s\"",
                        ((redisReply *)reply)->element[2]->str);
                atomic_store(&s->ask, 1);
                last_ask = 0;
            }
            freeReplyObject(reply);
            continue;
        }
        pfd = (struct pollfd){.fd = sub.ctx->fd, .events = POLLIN};
        if (poll(&pfd, 1, POLL_MS) > 0 && redis_io_read(sub.ctx, sub.tls) != REDIS_OK) {
            log_msg(LOG_LEVEL_WARN, "redis sentinel: connection lost; trying the next",
                    "sentinel=%s:%d error=\"%s\"", s->r->cfg->redis_seeds.seeds[s->current].host,
                    s->r->cfg->redis_seeds.seeds[s->current].port, sub.ctx->errstr);
            link_close(&sub);
            s->current = (s->current + 1) % s->r->cfg->redis_seeds.nseeds;
        }
    }
    link_close(&sub);
    return NULL;
}

int redis_sentinel_start(struct redis *r, struct permitd_error *err)
{
    struct redis_sentinel *s = calloc(1, sizeof(*s));
    struct redis_node *n = calloc(1, sizeof(*n));
    struct timespec until;

    if (s == NULL || n == NULL) {
        free(s);
        free(n);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    /* The one node: its address is the sentinels' to give (port -1). */
    snprintf(n->host, sizeof(n->host), "%s", r->cfg->redis_sentinel_master);
    snprintf(n->where, sizeof(n->where), "master %s", r->cfg->redis_sentinel_master);
    n->port = -1;
    pthread_mutex_lock(&r->nodes_lock);
    n->index = 0;
    r->nodes[0] = n;
    atomic_store(&r->nnodes, 1);
    pthread_mutex_unlock(&r->nodes_lock);
    s->r = r;
    snprintf(s->why, sizeof(s->why), "no sentinel has answered yet");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->known, NULL);
    r->sentinel = s;
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        r->sentinel = NULL;
        pthread_cond_destroy(&s->known);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return permitd_error_set(err, PERMITD_EINTERNAL, "cannot start the sentinel thread");
    }
    /* Start serving with the master known, when the sentinels answer
     * soon; else calls answer unavailable until they do. */
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += START_WAIT_MS / 1000;
    pthread_mutex_lock(&s->lock);
    while (s->host[0] == '\0' && pthread_cond_timedwait(&s->known, &s->lock, &until) == 0)
        ;
    if (s->host[0] == '\0')
        log_msg(LOG_LEVEL_WARN, "redis sentinel: no master known yet; calls fail until one is",
                "master=%s error=\"%s\"", r->cfg->redis_sentinel_master, s->why);
    pthread_mutex_unlock(&s->lock);
    return PERMITD_OK;
}

void redis_sentinel_stop(struct redis *r)
{
    struct redis_sentinel *s = r->sentinel;

    if (s == NULL)
        return;
    atomic_store(&s->stopping, 1);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->known);
    pthread_mutex_destroy(&s->lock);
    free(s);
    r->sentinel = NULL;
}

int redis_sentinel_master(struct redis *r, char *ip, char *host, size_t hostlen, int *port,
                          uint64_t *epoch, char *why, size_t whylen)
{
    struct redis_sentinel *s = r->sentinel;
    int rc = 0;

    pthread_mutex_lock(&s->lock);
    if (s->host[0] == '\0') {
        snprintf(why, whylen, "no master \"%s\" known: %.150s", r->cfg->redis_sentinel_master,
                 s->why);
        rc = -1;
    } else {
        snprintf(ip, RESOLVE_ADDR_MAX, "%s", s->ip);
        snprintf(host, hostlen, "%s", s->host);
        *port = s->port;
        *epoch = atomic_load(&s->epoch);
    }
    pthread_mutex_unlock(&s->lock);
    if (rc != 0)
        atomic_store(&s->ask, 1);
    return rc;
}

uint64_t redis_sentinel_epoch(const struct redis *r)
{
    return r->sentinel != NULL ? atomic_load(&r->sentinel->epoch) : 0;
}

void redis_sentinel_ask(struct redis *r)
{
    if (r->sentinel != NULL)
        atomic_store(&r->sentinel->ask, 1);
}

int redis_sentinel_counters(const struct redis *r, uint64_t *changes)
{
    *changes = r->sentinel != NULL ? atomic_load(&r->sentinel->switches) : 0;
    return r->sentinel != NULL;
}
