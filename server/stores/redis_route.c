/*
 * redis_route.c - which node a call goes to: the one Redis, or in a Redis
 * Cluster the master of its key's slot; the slot map kept current.
 *
 * The nodes permitd talks to live in one registry (struct redis's nodes[]),
 * made on first mention and kept until the process ends, so connections
 * (per thread, per pipe) can point at a node without reference counts. In
 * cluster mode the map is one array of 16384 node indexes, read with a
 * single atomic load per call (no lock on the hot path) and
 * written under the route's lock:
 *   - at start, from the seeds (cluster.c's cluster_discover());
 *   - by a refresher thread of its own, every REFRESH_EVERY_MS, and soon
 *     (at most every REFRESH_MIN_GAP_MS) when a call saw MOVED, a master
 *     could not be reached, or a slot had no master;
 *   - at once for one slot, when a call answers MOVED (the redirect names
 *     the new owner), so the retry and the calls after it go straight there.
 * An ASK changes nothing (the slot is moving; only that key is elsewhere).
 *
 * Host names (of the seeds and of the nodes the cluster announces) are
 * resolved by resolve.c's threads, never inside hiredis: the refresher
 * hands cluster_discover() numeric addresses only.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "stores/cluster.h"
#include "stores/redis.h"
#include "stores/redis_conn.h"
#include "stores/resolve.h"

#define REFRESH_EVERY_MS 2000       /* the map is fetched again this often anyway */
#define REFRESH_MIN_GAP_MS 100      /* and when asked, at most this often */
#define RESOLVE_WAIT_MS 2000        /* a seed's first lookup, at start */

struct redis_route {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    int started, stop, wanted;
    _Atomic int16_t slot_node[CLUSTER_SLOTS];   /* node index; -1: no master */
    int masters[REDIS_NODES_MAX];               /* node indexes, in the map's order */
    int nmasters;
    int have_map;
    struct resolver *seeds[CONFIG_REDIS_SEEDS_MAX];
    _Atomic uint64_t moved, ask, refreshes;
};

struct redis_node *redis_node_get(struct redis *r, const char *host, int port, int wait_ms)
{
    struct redis_node *n = NULL;
    struct permitd_error err = {0, ""};
    int count;

    pthread_mutex_lock(&r->nodes_lock);
    count = atomic_load(&r->nnodes);
    for (int i = 0; i < count; i++)
        if (r->nodes[i]->port == port && strcmp(r->nodes[i]->host, host) == 0) {
            n = r->nodes[i];
            goto out;
        }
    if (count == REDIS_NODES_MAX) {
        log_msg(LOG_LEVEL_ERROR, "redis: too many nodes", "node=%s:%d max=%d", host, port,
                REDIS_NODES_MAX);
        goto out;
    }
    if ((n = calloc(1, sizeof(*n))) == NULL)
        goto out;
    snprintf(n->host, sizeof(n->host), "%s", host);
    n->port = port;
    n->index = count;
    if (port == 0) {
        snprintf(n->where, sizeof(n->where), "%s", host);       /* a unix socket */
    } else {
        snprintf(n->where, sizeof(n->where), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
        if (resolver_new(host, wait_ms, &n->resolver, &err) != PERMITD_OK) {
            log_msg(LOG_LEVEL_ERROR, "redis: cannot resolve node", "node=%s error=\"%s\"",
                    n->where, err.message);
            free(n);
            n = NULL;
            goto out;
        }
    }
    r->nodes[count] = n;
    atomic_store(&r->nnodes, count + 1);
out:
    pthread_mutex_unlock(&r->nodes_lock);
    return n;
}

/* Asks the current masters, then the seeds, for the map (numeric addresses
 * only: the resolvers looked the names up) and applies it. 0 or -1. */
static int refresh(struct redis *r, int timeout_ms)
{
    struct redis_route *rt = r->route;
    struct config_redis_cluster *ask = calloc(1, sizeof(*ask));
    struct redis_node *masters[REDIS_NODES_MAX];
    struct permitd_error err = {0, ""};
    struct cluster_map *m = NULL;
    size_t nm;
    char why[200];
    int16_t idx[REDIS_NODES_MAX];
    size_t total;

    if (ask == NULL)
        return -1;
    snprintf(ask->user, sizeof(ask->user), "%s", r->cfg->redis_user);
    snprintf(ask->password, sizeof(ask->password), "%s", r->cfg->redis_password);
    nm = redis_route_masters(r, masters, REDIS_NODES_MAX);
    for (size_t i = 0; i < nm && ask->nseeds < CONFIG_REDIS_SEEDS_MAX / 2; i++) {
        struct config_redis_seed *s = &ask->seeds[ask->nseeds];
        if (resolver_address(masters[i]->resolver, s->host, why, sizeof(why)) == 0) {
            s->port = masters[i]->port;
            ask->nseeds++;
        }
    }
    for (int i = 0; i < r->cfg->redis_seeds.nseeds && ask->nseeds < CONFIG_REDIS_SEEDS_MAX; i++) {
        struct config_redis_seed *s = &ask->seeds[ask->nseeds];
        int dup = 0;
        if (resolver_address(rt->seeds[i], s->host, why, sizeof(why)) != 0)
            continue;
        s->port = r->cfg->redis_seeds.seeds[i].port;
        for (int k = 0; k < ask->nseeds; k++)
            dup |= ask->seeds[k].port == s->port && strcmp(ask->seeds[k].host, s->host) == 0;
        if (!dup)
            ask->nseeds++;
    }
    if (ask->nseeds == 0) {
        free(ask);
        log_msg(LOG_LEVEL_WARN, "redis cluster: no seed address known yet", "url=%s", r->where);
        return -1;
    }
    if (cluster_discover(ask, r->tls, timeout_ms, &m, &err) != PERMITD_OK) {
        /* No seed answered: each seed's name is tried at its next address
         * next time (a name with an IPv6 and an IPv4 address, say). */
        for (int i = 0; i < r->cfg->redis_seeds.nseeds; i++) {
            char ip[RESOLVE_ADDR_MAX];
            if (resolver_address(rt->seeds[i], ip, why, sizeof(why)) == 0)
                resolver_failed(rt->seeds[i], ip);
        }
        free(ask);
        log_msg(LOG_LEVEL_WARN, "redis cluster: slot map refresh failed", "error=\"%s\"",
                err.message);
        return -1;
    }
    free(ask);
    atomic_fetch_add(&rt->refreshes, 1);
    total = cluster_map_masters(m);
    if (total > REDIS_NODES_MAX)
        total = REDIS_NODES_MAX;
    for (size_t i = 0; i < total; i++) {
        const struct cluster_node *cn = cluster_map_master(m, i);
        struct redis_node *n = redis_node_get(r, cn->host, cn->port, RESOLVE_WAIT_MS);
        idx[i] = n != NULL ? (int16_t)n->index : -1;
    }
    pthread_mutex_lock(&rt->lock);
    for (unsigned slot = 0; slot < CLUSTER_SLOTS; slot++) {
        int mi = cluster_map_master_index(m, slot);
        atomic_store_explicit(&rt->slot_node[slot],
                              mi >= 0 && (size_t)mi < total ? idx[mi] : (int16_t)-1,
                              memory_order_release);
    }
    rt->nmasters = 0;
    for (size_t i = 0; i < total; i++)
        if (idx[i] >= 0)
            rt->masters[rt->nmasters++] = idx[i];
    if (!rt->have_map)
        log_msg(LOG_LEVEL_INFO, "redis cluster: slot map loaded", "masters=%d", rt->nmasters);
    rt->have_map = 1;
    pthread_mutex_unlock(&rt->lock);
    cluster_map_free(m);
    return 0;
}

/* The refresher's thread: a refresh when one is due (every
 * REFRESH_EVERY_MS; REFRESH_MIN_GAP_MS after the last when a call asked for
 * one; with a backoff from 25 ms to 1 s while there is no map at all). A
 * storm of failing calls makes one refresh every 100 ms, no more. */
static void *refresher(void *arg)
{
    struct redis *r = arg;
    struct redis_route *rt = r->route;
    int backoff_ms = 25;
    int64_t last_us = clock_now_us();

    pthread_mutex_lock(&rt->lock);
    while (!rt->stop) {
        int64_t now = clock_now_us();
        int64_t due = last_us + 1000LL * (!rt->have_map ? backoff_ms
                                          : rt->wanted ? REFRESH_MIN_GAP_MS : REFRESH_EVERY_MS);
        struct timespec ts;
        int ok;

        if (now < due) {
            int64_t wait_us = due - now;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (time_t)(wait_us / 1000000);
            ts.tv_nsec += (long)(wait_us % 1000000) * 1000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&rt->cond, &rt->lock, &ts);
            continue;           /* woken by a wish or stop, or the time came: look again */
        }
        rt->wanted = 0;
        pthread_mutex_unlock(&rt->lock);
        ok = refresh(r, r->cfg->redis_timeout_ms > 200 ? r->cfg->redis_timeout_ms : 200) == 0;
        pthread_mutex_lock(&rt->lock);
        last_us = clock_now_us();
        backoff_ms = ok ? 25 : (backoff_ms * 2 > 1000 ? 1000 : backoff_ms * 2);
    }
    pthread_mutex_unlock(&rt->lock);
    return NULL;
}

int redis_route_start(struct redis *r, struct permitd_error *err)
{
    struct redis_route *rt = calloc(1, sizeof(*rt));

    if (rt == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    pthread_mutex_init(&rt->lock, NULL);
    pthread_cond_init(&rt->cond, NULL);
    for (unsigned i = 0; i < CLUSTER_SLOTS; i++)
        atomic_init(&rt->slot_node[i], -1);
    r->route = rt;
    for (int i = 0; i < r->cfg->redis_seeds.nseeds; i++)
        if (resolver_new(r->cfg->redis_seeds.seeds[i].host, RESOLVE_WAIT_MS, &rt->seeds[i],
                         err) != PERMITD_OK) {
            redis_route_stop(r);
            return err->code;
        }
    if (refresh(r, r->cfg->redis_timeout_ms > 500 ? r->cfg->redis_timeout_ms : 500) != 0)
        log_msg(LOG_LEVEL_WARN, "redis cluster: no seed answered at start; calls answer "
                "unavailable until one does", "url=%s", r->where);
    if (pthread_create(&rt->thread, NULL, refresher, r) != 0) {
        redis_route_stop(r);
        return permitd_error_set(err, PERMITD_EINTERNAL, "cannot start the slot map refresher");
    }
    rt->started = 1;
    return PERMITD_OK;
}

void redis_route_stop(struct redis *r)
{
    struct redis_route *rt = r->route;

    if (rt == NULL)
        return;
    if (rt->started) {
        pthread_mutex_lock(&rt->lock);
        rt->stop = 1;
        pthread_cond_signal(&rt->cond);
        pthread_mutex_unlock(&rt->lock);
        pthread_join(rt->thread, NULL);
    }
    for (int i = 0; i < CONFIG_REDIS_SEEDS_MAX; i++)
        resolver_free(rt->seeds[i]);
    pthread_cond_destroy(&rt->cond);
    pthread_mutex_destroy(&rt->lock);
    free(rt);
    r->route = NULL;
}

void redis_route_refresh_soon(struct redis *r)
{
    struct redis_route *rt = r->route;

    redis_sentinel_ask(r);
    if (rt == NULL)
        return;
    pthread_mutex_lock(&rt->lock);
    if (!rt->wanted) {
        rt->wanted = 1;
        /* The refresher waits REFRESH_MIN_GAP_MS from now at most: woken,
         * it recomputes its wait with the wish in place. */
        pthread_cond_signal(&rt->cond);
    }
    pthread_mutex_unlock(&rt->lock);
}

struct redis_node *redis_route_node(struct redis *r, const char *key, size_t len, unsigned *slot)
{
    int idx;

    if (r->route == NULL) {
        *slot = 0;
        return r->nodes[0];
    }
    *slot = cluster_keyslot(key, len);
    /* Acquire pairs with the release that stored the index: the node it
     * names (made by another thread) is complete. A plain load on x86. */
    idx = atomic_load_explicit(&r->route->slot_node[*slot], memory_order_acquire);
    if (idx < 0) {
        redis_route_refresh_soon(r);
        return NULL;
    }
    return r->nodes[idx];
}

int redis_slot_master(struct redis *r, unsigned slot)
{
    int idx;

    if (r->route == NULL)
        return 0;
    if (slot >= CLUSTER_SLOTS)
        return -1;
    idx = atomic_load_explicit(&r->route->slot_node[slot], memory_order_acquire);
    if (idx < 0)
        redis_route_refresh_soon(r);
    return idx;
}

size_t redis_route_masters(struct redis *r, struct redis_node **out, size_t max)
{
    struct redis_route *rt = r->route;
    size_t n = 0;

    if (rt == NULL) {
        if (max > 0)
            out[n++] = r->nodes[0];
        return n;
    }
    pthread_mutex_lock(&rt->lock);
    for (int i = 0; i < rt->nmasters && n < max; i++)
        out[n++] = r->nodes[rt->masters[i]];
    pthread_mutex_unlock(&rt->lock);
    return n;
}

struct redis_node *redis_route_redirect(struct redis *r, const struct cluster_redirect *rd,
                                        const struct redis_node *asked)
{
    struct redis_route *rt = r->route;
    struct redis_node *n;

    if (rt == NULL)
        return NULL;
    n = redis_node_get(r, rd->host[0] ? rd->host : asked->host, rd->port, 0);
    if (rd->kind == CLUSTER_REDIRECT_ASK) {
        atomic_fetch_add(&rt->ask, 1);
        return n;
    }
    atomic_fetch_add(&rt->moved, 1);
    if (n != NULL && rd->slot < CLUSTER_SLOTS) {
        pthread_mutex_lock(&rt->lock);
        atomic_store_explicit(&rt->slot_node[rd->slot], (int16_t)n->index, memory_order_release);
        pthread_mutex_unlock(&rt->lock);
    }
    redis_route_refresh_soon(r);
    return n;
}

int redis_cluster_enabled(const struct redis *r)
{
    return r->route != NULL;
}

void redis_cluster_counters(struct redis *r, uint64_t *moved, uint64_t *ask, uint64_t *refreshes)
{
    struct redis_route *rt = r->route;

    *moved = rt ? atomic_load(&rt->moved) : 0;
    *ask = rt ? atomic_load(&rt->ask) : 0;
    *refreshes = rt ? atomic_load(&rt->refreshes) : 0;
}

int redis_node_info(struct redis *r, int i, struct redis_node_info *out)
{
    const struct redis_node *n;

    if (i < 0 || i >= atomic_load(&r->nnodes))
        return -1;
    n = r->nodes[i];
    snprintf(out->where, sizeof(out->where), "%s", n->where);
    out->connects = atomic_load(&n->connects);
    out->errors = atomic_load(&n->errors);
    return 0;
}
