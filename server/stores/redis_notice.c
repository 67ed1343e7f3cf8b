/*
 * redis_notice.c - the change-notice listener (see redis_notice.h).
 *
 * One thread, one blocking hiredis connection made the way every other is
 * (redis_conn_ensure(): address, AUTH, SELECT, backoff), in subscribed
 * mode. The thread polls the socket with a short timeout rather than
 * blocking in a read, so that it notices a stop and its periodic tick on
 * time; hiredis parses what arrives (redisBufferRead, then the replies
 * already read). A broken connection is dropped and made again, and every
 * new subscription starts with a tick: notices sent meanwhile are lost.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "core/clock.h"
#include "core/log.h"
#include "stores/redis_conn.h"
#include "stores/redis_tls.h"
#include "stores/redis_notice.h"

#define NOTICE_POLL_MS 50           /* how soon a stop is noticed */
#define NOTICE_TIMEOUT_MS 2000      /* connect and SUBSCRIBE */

struct redis_notice {
    struct redis *r;
    char *channel;
    redis_notice_fn fn;
    redis_notice_tick_fn drained;
    redis_notice_tick_fn tick;
    int every_ms;
    void *ud;
    pthread_t thread;
    _Atomic int stopping;
    _Atomic unsigned long long notices, subscribed;
    struct redis_conn conn;
};

/* Connects and subscribes. 0, or -1 (the connection closed again). */
static int subscribe(struct redis_notice *n)
{
    struct permitd_error err = {0, ""};
    const char *argv[2] = {"SUBSCRIBE", n->channel};
    size_t lens[2] = {9, strlen(n->channel)};
    redisReply *rep;

    /* The node to listen on: the one Redis, or in a cluster the master of
     * the channel's slot (PUBLISH reaches every node's subscribers, so any
     * node would do; the master may change with a failover, so it is
     * chosen again for each new connection). */
    if (n->conn.ctx == NULL) {
        unsigned slot;
        struct redis_node *node = redis_route_node(n->r, n->channel, strlen(n->channel), &slot);

        if (node == NULL)
            return -1;              /* no slot map yet: the next try */
        n->conn.node = node;
    }
    if (redis_conn_ensure(n->r, &n->conn, NOTICE_TIMEOUT_MS, 1, &err) != PERMITD_OK)
        return -1;
    rep = redis_io_command(n->conn.ctx, n->conn.tls, 2, argv, lens);
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY) {
        log_msg(LOG_LEVEL_WARN, "change notices: SUBSCRIBE failed; retrying", "channel=%s error=\"%s\"",
                n->channel, rep ? (rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply")
                                : n->conn.ctx->errstr);
        freeReplyObject(rep);
        redis_conn_close(&n->conn);
        return -1;
    }
    freeReplyObject(rep);
    atomic_fetch_add(&n->subscribed, 1);
    return 0;
}

/* Hands a "message" reply to fn (1); anything else is ignored (0). */
static int deliver(struct redis_notice *n, redisReply *rep)
{
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 3 &&
        rep->element[0]->type == REDIS_REPLY_STRING && strcmp(rep->element[0]->str, "message") == 0 &&
        rep->element[2]->type == REDIS_REPLY_STRING) {
        atomic_fetch_add(&n->notices, 1);
        n->fn(n->ud, rep->element[2]->str, rep->element[2]->len);
        return 1;
    }
    return 0;
}

static void *run(void *arg)
{
    struct redis_notice *n = arg;
    int64_t next_tick = INT64_MAX;
    size_t delivered = 0;           /* notices since the last drained() */

    while (!atomic_load(&n->stopping)) {
        struct pollfd pfd;
        void *reply = NULL;

        if (redis_conn_stale(n->r, &n->conn)) {
            /* Sentinel: subscribed on a server that is no longer the
             * master; listen on the new one. */
            log_msg(LOG_LEVEL_INFO, "change notices: the master changed; resubscribing",
                    "channel=%s", n->channel);
            redis_conn_close(&n->conn);
        }
        if (n->conn.ctx == NULL) {
            if (subscribe(n) != 0) {
                usleep(NOTICE_POLL_MS * 1000);
                continue;
            }
            if (n->tick != NULL)
                n->tick(n->ud);
            next_tick = n->every_ms > 0 ? clock_now_us() + (int64_t)n->every_ms * 1000 : INT64_MAX;
        }
        if (redisGetReplyFromReader(n->conn.ctx, &reply) != REDIS_OK) {
            redis_conn_close(&n->conn);
            continue;
        }
        if (reply != NULL) {
            delivered += deliver(n, reply);
            freeReplyObject(reply);
            continue;
        }
        if (delivered > 0 && n->drained != NULL)
            n->drained(n->ud);      /* every notice read so far is handed over */
        delivered = 0;
        if (clock_now_us() >= next_tick) {
            n->tick(n->ud);
            next_tick = clock_now_us() + (int64_t)n->every_ms * 1000;
        }
        pfd = (struct pollfd){.fd = n->conn.ctx->fd, .events = POLLIN};
        if (poll(&pfd, 1, NOTICE_POLL_MS) > 0 && redis_io_read(n->conn.ctx, n->conn.tls) != REDIS_OK) {
            log_msg(LOG_LEVEL_WARN, "change notices: connection lost; resubscribing",
                    "channel=%s error=\"%s\"", n->channel, n->conn.ctx->errstr);
            redis_conn_close(&n->conn);
        }
    }
    redis_conn_close(&n->conn);
    return NULL;
}

int redis_notice_start(struct redis *r, const char *channel, redis_notice_fn fn,
                       redis_notice_tick_fn drained, redis_notice_tick_fn tick, int every_ms,
                       void *ud,
                       struct redis_notice **out, struct permitd_error *err)
{
    struct redis_notice *n = calloc(1, sizeof(*n));

    *out = NULL;
    if (n == NULL || (n->channel = strdup(channel)) == NULL) {
        free(n);
        return permitd_error_set(err, PERMITD_EINTERNAL, "change notices: out of memory");
    }
    n->r = r;
    n->fn = fn;
    n->drained = drained;
    n->tick = tick;
    n->every_ms = tick != NULL ? every_ms : 0;
    n->ud = ud;
    if (pthread_create(&n->thread, NULL, run, n) != 0) {
        free(n->channel);
        free(n);
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "change notices: cannot start the listener's thread");
    }
    *out = n;
    return PERMITD_OK;
}

void redis_notice_counters(struct redis_notice *n, unsigned long long *notices,
                           unsigned long long *subscribed)
{
    *notices = atomic_load(&n->notices);
    *subscribed = atomic_load(&n->subscribed);
}

void redis_notice_stop(struct redis_notice *n)
{
    if (n == NULL)
        return;
    atomic_store(&n->stopping, 1);
    pthread_join(n->thread, NULL);
    free(n->channel);
    free(n);
}
