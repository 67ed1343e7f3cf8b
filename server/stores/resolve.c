/*
 * resolve.c - a host name's address, looked up on a thread of its own.
 *
 * One lookup at a time: the thread sleeps until a lookup is wanted (start,
 * resolver_failed(), an answer gone stale), runs getaddrinfo() without the
 * lock, and files the addresses, or the error, under it. Callers only ever
 * read what was filed. IPv4 addresses come first, as in hiredis's own
 * connect (so "localhost" reaches a Redis bound to 127.0.0.1 only), and
 * every address of the name is tried in its turn: one per attempt, the
 * next after a failure.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "core/log.h"
#include "stores/resolve.h"

#define RESOLVE_STALE_US (60 * 1000000LL)   /* an answer is looked up again after */
#define RESOLVE_GAP_US 1000000LL            /* no two lookups closer than this */
#define RESOLVE_ADDRS 8                     /* addresses kept per name */

struct resolver {
    char host[256];
    int numeric;                /* host is an address already: no thread */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;        /* on CLOCK_MONOTONIC */
    int wanted, stop, answers;  /* answers: lookups finished */
    int looking;                /* a lookup is running (the lock is not held) */
    int64_t looked_at_us;       /* when the last lookup started */
    char addrs[RESOLVE_ADDRS][RESOLVE_ADDR_MAX];
    int naddrs;                 /* 0 until a lookup succeeded */
    int cur;                    /* the address connects use now */
    char error[160];            /* the last lookup's failure, "" after a success */
};

/* The addresses getaddrinfo() gives for host, numeric, IPv4 first, into
 * addrs (returns how many); or 0 with the failure in error. */
static int lookup(const char *host, char (*addrs)[RESOLVE_ADDR_MAX], char *error, size_t errlen)
{
    struct addrinfo hints, *res = NULL;
    int rc, n = 0;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(error, errlen, "cannot resolve %.100s: %s", host, gai_strerror(rc));
        return 0;
    }
    for (int pass = 0; pass < 2; pass++)
        for (struct addrinfo *ai = res; ai != NULL && n < RESOLVE_ADDRS; ai = ai->ai_next)
            if ((ai->ai_family == AF_INET) == (pass == 0) &&
                getnameinfo(ai->ai_addr, ai->ai_addrlen, addrs[n], RESOLVE_ADDR_MAX, NULL, 0,
                            NI_NUMERICHOST) == 0)
                n++;
    freeaddrinfo(res);
    if (n == 0)
        snprintf(error, errlen, "cannot resolve %.100s: no usable address", host);
    return n;
}

static void *resolver_main(void *arg)
{
    struct resolver *rs = arg;
    char addrs[RESOLVE_ADDRS][RESOLVE_ADDR_MAX], error[sizeof(rs->error)];

    pthread_mutex_lock(&rs->lock);
    for (;;) {
        while (!rs->wanted && !rs->stop)
            pthread_cond_wait(&rs->cond, &rs->lock);
        if (rs->stop)
            break;
        rs->wanted = 0;
        rs->looking = 1;
        rs->looked_at_us = clock_now_us();
        pthread_mutex_unlock(&rs->lock);

        int n = lookup(rs->host, addrs, error, sizeof(error));

        pthread_mutex_lock(&rs->lock);
        rs->looking = 0;
        if (rs->stop)
            break;              /* resolver_free() left the resolver to us */
        if (n > 0) {
            /* The same answer keeps the address in use; a new one starts
             * from its first address. */
            int same = n == rs->naddrs;
            for (int i = 0; same && i < n; i++)
                same = strcmp(addrs[i], rs->addrs[i]) == 0;
            if (!same) {
                log_msg(rs->naddrs ? LOG_LEVEL_INFO : LOG_LEVEL_DEBUG, "redis host resolved",
                        "host=%s addr=%s addresses=%d previous=%s", rs->host, addrs[0], n,
                        rs->naddrs ? rs->addrs[rs->cur] : "none");
                memcpy(rs->addrs, addrs, sizeof(addrs[0]) * (size_t)n);
                rs->naddrs = n;
                rs->cur = 0;
            }
            rs->error[0] = '\0';
        } else {
            log_msg(LOG_LEVEL_WARN, "redis host lookup failed", "host=%s error=\"%s\" keeping=%s",
                    rs->host, error, rs->naddrs ? rs->addrs[rs->cur] : "none");
            memcpy(rs->error, error, sizeof(error));
        }
        rs->answers++;
        pthread_cond_broadcast(&rs->cond);
    }
    if (rs->stop == 2) {
        pthread_mutex_unlock(&rs->lock);
        pthread_cond_destroy(&rs->cond);
        pthread_mutex_destroy(&rs->lock);
        free(rs);
        return NULL;
    }
    pthread_mutex_unlock(&rs->lock);
    return NULL;
}

int resolver_new(const char *host, int wait_ms, struct resolver **out, struct permitd_error *err)
{
    struct resolver *rs;
    unsigned char buf[sizeof(struct in6_addr)];
    pthread_condattr_t attr;
    int64_t until;

    *out = NULL;
    if (strlen(host) >= sizeof(rs->host))
        return permitd_error_set(err, PERMITD_EINVAL, "redis host: \"%.40s...\" is longer than "
                                 "%zu characters", host, sizeof(rs->host) - 1);
    rs = calloc(1, sizeof(*rs));
    if (rs == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    snprintf(rs->host, sizeof(rs->host), "%s", host);
    if (inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1) {
        rs->numeric = 1;
        snprintf(rs->addrs[0], sizeof(rs->addrs[0]), "%s", host);
        rs->naddrs = 1;
        *out = rs;
        return PERMITD_OK;
    }
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&rs->cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&rs->lock, NULL);
    rs->wanted = 1;
    if (pthread_create(&rs->thread, NULL, resolver_main, rs) != 0) {
        pthread_cond_destroy(&rs->cond);
        pthread_mutex_destroy(&rs->lock);
        free(rs);
        return permitd_error_set(err, PERMITD_EINTERNAL, "cannot start the resolver thread");
    }
    until = clock_now_us() + (int64_t)wait_ms * 1000;
    pthread_mutex_lock(&rs->lock);
    while (rs->answers == 0) {
        struct timespec ts = {until / 1000000, (until % 1000000) * 1000};
        if (pthread_cond_timedwait(&rs->cond, &rs->lock, &ts) != 0 && clock_now_us() >= until)
            break;
    }
    if (rs->answers == 0)
        log_msg(LOG_LEVEL_WARN, "redis host lookup is slow; serving meanwhile", "host=%s waited_ms=%d",
                host, wait_ms);
    pthread_mutex_unlock(&rs->lock);
    *out = rs;
    return PERMITD_OK;
}

void resolver_free(struct resolver *rs)
{
    if (rs == NULL)
        return;
    if (!rs->numeric) {
        pthread_mutex_lock(&rs->lock);
        if (rs->looking) {
            /* getaddrinfo() cannot be interrupted, and a dead DNS holds it
             * for its timeouts (tens of seconds): shutting down does not
             * wait for it. The thread frees the resolver when it returns. */
            rs->stop = 2;
            pthread_mutex_unlock(&rs->lock);
            pthread_detach(rs->thread);
            return;
        }
        rs->stop = 1;
        pthread_cond_broadcast(&rs->cond);
        pthread_mutex_unlock(&rs->lock);
        pthread_join(rs->thread, NULL);
        pthread_cond_destroy(&rs->cond);
        pthread_mutex_destroy(&rs->lock);
    }
    free(rs);
}

/* Wants a lookup unless one ran within RESOLVE_GAP_US. Lock held. */
static void want(struct resolver *rs, int64_t now)
{
    if (!rs->wanted && now - rs->looked_at_us >= RESOLVE_GAP_US) {
        rs->wanted = 1;
        pthread_cond_broadcast(&rs->cond);
    }
}

int resolver_address(struct resolver *rs, char *ip, char *why, size_t whylen)
{
    int64_t now;
    int rc = 0;

    if (rs->numeric) {
        memcpy(ip, rs->addrs[0], sizeof(rs->addrs[0]));
        return 0;
    }
    pthread_mutex_lock(&rs->lock);
    now = clock_now_us();
    if (rs->naddrs > 0) {
        memcpy(ip, rs->addrs[rs->cur], sizeof(rs->addrs[0]));
        if (now - rs->looked_at_us >= RESOLVE_STALE_US)
            want(rs, now);
    } else {
        snprintf(why, whylen, "%s", rs->answers == 0 ? "still looking up the host name"
                                                      : rs->error);
        want(rs, now);
        rc = -1;
    }
    pthread_mutex_unlock(&rs->lock);
    return rc;
}

void resolver_failed(struct resolver *rs, const char *ip)
{
    if (rs->numeric)
        return;
    pthread_mutex_lock(&rs->lock);
    /* Several connections may fail on one address at once: only the first
     * report moves on from it. */
    if (rs->naddrs > 0 && strcmp(ip, rs->addrs[rs->cur]) == 0)
        rs->cur = (rs->cur + 1) % rs->naddrs;
    want(rs, clock_now_us());
    pthread_mutex_unlock(&rs->lock);
}
