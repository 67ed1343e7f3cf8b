/*
 * limiter.c - the limiter's public face: making and freeing one, its
 * counters, and the wiring of its parts.
 *
 * All bucket arithmetic lives in lua/bucket.lua, inside Redis, against the
 * Redis clock: that is what makes one limit hold across any number of
 * permitd instances. The limiter only decides what to ask and how to read
 * the answer. The policy's limits come from this instance's in-memory copy
 * (decisions/policies.h), which also answers, before any call, whether the
 * policy exists, is enabled and lets the app in; a bucket written under a
 * newer version of its policy than that copy makes the script answer
 * "stale", and the policy is reloaded and the decision asked once more.
 *
 * Its parts, each a file (limiter_internal.h ties them): limiter_script.c
 * (validation and the one script call per decision), limiter_plan.c
 * (AcquireBatch laid out as calls), limiter_queue.c (a worker's queued
 * decisions, pipelined), limiter_deny.c (the deny cache's glue),
 * limiter_loader.c (policies a queue lacks, read off its thread) and
 * limiter_bucket.c (inspect, own, reset, settle: one bucket's calls).
 */
#define _GNU_SOURCE     /* qsort_r */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/clock.h"
#include "decisions/deny_cache.h"
#include "decisions/limiter.h"
#include "decisions/limiter_plan.h"
#include "decisions/limiter_internal.h"
#include "core/log.h"
#include "core/loop.h"
#include "decisions/policies.h"
#include "stores/cluster.h"
#include "stores/policy.h"

int limiter_new(const struct config *cfg, struct redis *redis, struct limiter **out,
                struct permitd_error *err)
{
    struct limiter *l = calloc(1, sizeof(*l));

    *out = NULL;
    if (l == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    l->cfg = cfg;
    l->redis = redis;
    /* A single Redis takes any keys in one call: the Acquires of one
     * policy go together whatever their buckets' slots (fewer, bigger
     * calls: lua/bucket.lua reads them once). */
    l->slot_calls = strncmp(cfg->redis_url, "redis+cluster://", 16) == 0;
    l->deny_size = cfg->deny_cache > 0 ? (size_t)cfg->deny_cache : 0;
    snprintf(l->ttl_s, sizeof(l->ttl_s), "%lld",
             cfg->request_id_ttl_ms > 0 ? cfg->request_id_ttl_ms : 600000LL);
    if (policies_new(cfg, redis, &l->policies, err) != PERMITD_OK) {
        free(l);
        return err->code;
    }
    if ((l->absent = calloc(LIMITER_ABSENT_SLOTS, sizeof(*l->absent))) == NULL ||
        overrides_new(&l->overrides, err) != PERMITD_OK) {
        policies_free(l->policies);
        overrides_free(l->overrides);
        free(l->absent);
        free(l);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    pthread_mutex_init(&l->loader_lock, NULL);
    pthread_mutex_init(&l->absent_lock, NULL);
    pthread_mutex_init(&l->queues_lock, NULL);
    *out = l;
    return PERMITD_OK;
}

int limiter_slot_calls(const struct limiter *l)
{
    return l->slot_calls;
}

void limiter_set_slot_calls(struct limiter *l, int on)
{
    l->slot_calls = on;
}

struct policies *limiter_policies(struct limiter *l)
{
    return l->policies;
}

struct overrides *limiter_overrides(struct limiter *l)
{
    return l->overrides;
}

void limiter_set_overrides_reload(struct limiter *l,
                                  int (*fn)(void *ud, const char *policy,
                                            struct permitd_error *err),
                                  void *ud)
{
    l->overrides_reload = fn;
    l->overrides_ud = ud;
}

uint64_t limiter_stale_retries(struct limiter *l)
{
    return atomic_load(&l->stale_retries);
}

uint64_t limiter_split_calls(struct limiter *l)
{
    return atomic_load(&l->splits);
}
void limiter_free(struct limiter *l)
{
    if (l == NULL)
        return;
    limiter_loader_free(l->loader);
    policies_free(l->policies);
    overrides_free(l->overrides);
    pthread_mutex_destroy(&l->loader_lock);
    pthread_mutex_destroy(&l->absent_lock);
    pthread_mutex_destroy(&l->queues_lock);
    free(l->absent);
    free(l);
}

uint64_t limiter_open_passes(struct limiter *l)
{
    return atomic_load(&l->open_passes);
}

void limiter_deny_cache_clear(struct limiter *l)
{
    atomic_fetch_add(&l->deny_epoch, 1);
    /* a reset, or notices lost: every local lease ends as well */
    atomic_fetch_add(&l->lease_epoch, 1);
}

void limiter_leases_end(struct limiter *l)
{
    atomic_fetch_add(&l->lease_epoch, 1);
}

struct hot_sums {
    uint64_t lease_grants, deny_hits, deny_misses;
};

static void hot_add(struct hot_sums *sum, struct limiter_hot_counts *c)
{
    sum->lease_grants += atomic_load_explicit(&c->lease_grants, memory_order_relaxed);
    sum->deny_hits += atomic_load_explicit(&c->deny_hits, memory_order_relaxed);
    sum->deny_misses += atomic_load_explicit(&c->deny_misses, memory_order_relaxed);
}

/* The workers' hot counters summed: the live queues' and the freed ones'. */
static struct hot_sums hot_counts(struct limiter *l)
{
    struct hot_sums sum = {0, 0, 0};

    pthread_mutex_lock(&l->queues_lock);
    hot_add(&sum, &l->gone);
    for (struct limiter_queue *q = l->queues; q != NULL; q = q->next)
        hot_add(&sum, &q->counts);
    pthread_mutex_unlock(&l->queues_lock);
    return sum;
}

void limiter_lease_counters(struct limiter *l, struct limiter_lease_counters *c)
{
    c->grants = hot_counts(l).lease_grants;
    c->takes = atomic_load(&l->lease_takes);
    c->refused = atomic_load(&l->lease_refused);
    c->returns = atomic_load(&l->lease_returns);
    c->returned = atomic_load(&l->lease_returned);
    c->late = atomic_load(&l->lease_late);
    c->ended_early = atomic_load(&l->lease_ended_early);
    c->held = atomic_load(&l->leases_held);
}

void limiter_stopped(struct limiter *l)
{
    uint64_t returns = atomic_load(&l->stop_returns), lost = atomic_load(&l->stop_lost);

    if (returns == 0 && lost == 0)
        return;
    log_msg(LOG_LEVEL_INFO, "local leases given back at stop",
            "leases=%" PRIu64 " permits=%" PRIu64 " not_given_back=%" PRIu64, returns,
            atomic_load(&l->stop_returned), lost);
}

void limiter_deny_cache_counters(struct limiter *l, uint64_t *hits, uint64_t *misses,
                                 uint64_t *evictions)
{
    struct hot_sums sum = hot_counts(l);

    *hits = sum.deny_hits;
    *misses = sum.deny_misses;
    *evictions = atomic_load_explicit(&l->deny_evictions, memory_order_relaxed);
}

int limiter_known_policy(struct limiter *l, const char *name)
{
    const struct policies_entry *e = name != NULL ? policies_get(l->policies, name) : NULL;

    policies_release(e);
    return e != NULL;
}

void limiter_set_missing_hook(struct limiter *l, void (*fn)(void *ud), void *ud)
{
    l->missing_hook = fn;
    l->missing_ud = ud;
}

void limiter_forget(struct limiter *l, const char *name)
{
    policies_forget(l->policies, name);
}
