/*
 * stats.c - per-second decision counters in a fixed, lock-free table.
 *
 * A policy owns a slot found by hashing its name (open addressing, a few
 * probes); a slot holds a ring of STATS_SECONDS seconds, each stamped with
 * the Unix second it counts, so a stale entry is recognised and restarted
 * rather than cleared by a timer. The hot path is a hash, a compare and two
 * relaxed atomic adds. Memory is fixed: SLOTS slots, whatever the traffic,
 * so a flood of made-up policy names cannot grow it.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stores/policy.h"
#include "decisions/stats.h"
#include "core/status.h"

#define SLOTS 256
#define PROBES 8

struct second {
    _Atomic int64_t second;   /* the Unix second counted here */
    _Atomic int64_t allowed, denied;
};

#define NCODES PERMITD_STATUS_COUNT      /* -PERMITD_E* codes, 0 unused */

struct slot {
    _Atomic uint64_t hash;              /* 0 = free */
    char name[POLICY_NAME_MAX + 1];
    _Atomic int ready;                  /* name written */
    struct second ring[STATS_SECONDS];
    _Atomic uint64_t allowed, denied;   /* since start */
    _Atomic uint64_t errors[NCODES];
};

/* Latency buckets' upper bounds, in microseconds. */
static const int64_t bounds_us[] = {100, 250, 500, 1000, 2500, 5000, 10000, 25000,
                                    50000, 100000, 250000, 1000000};
#define NBOUNDS (sizeof(bounds_us) / sizeof(bounds_us[0]))

struct stats {
    struct slot slots[SLOTS];
    _Atomic uint64_t unknown_errors[NCODES];    /* errors naming no policy */
    _Atomic uint64_t untracked;                 /* decisions of policies past SLOTS */
    _Atomic uint64_t hist[NBOUNDS + 1];
    _Atomic uint64_t hist_sum_us;
};

int stats_new(struct stats **out, struct permitd_error *err)
{
    if ((*out = calloc(1, sizeof(struct stats))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "stats: out of memory for the %zu-byte counter table",
                                 sizeof(struct stats));
    return PERMITD_OK;
}

void stats_free(struct stats *s)
{
    free(s);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h ? h : 1;
}

/* The slot of policy; claims a free one when create is set. */
static struct slot *find(struct stats *s, const char *policy, int create)
{
    uint64_t h = fnv1a(policy);

    for (int i = 0; i < PROBES; i++) {
        struct slot *sl = &s->slots[(h + (uint64_t)i) % SLOTS];
        uint64_t cur = atomic_load_explicit(&sl->hash, memory_order_acquire);

        if (cur == h && atomic_load_explicit(&sl->ready, memory_order_acquire) &&
            strcmp(sl->name, policy) == 0)
            return sl;
        if (cur == 0 && create) {
            uint64_t expect = 0;
            if (atomic_compare_exchange_strong(&sl->hash, &expect, h)) {
                strncpy(sl->name, policy, POLICY_NAME_MAX);
                atomic_store_explicit(&sl->ready, 1, memory_order_release);
                return sl;
            }
            if (expect == h)
                i--;    /* someone claimed it for the same hash: look again */
        }
    }
    return NULL;
}

void stats_record(struct stats *s, const char *policy, int allowed)
{
    stats_record_at(s, policy, allowed, (int64_t)time(NULL));
}

void stats_record_at(struct stats *s, const char *policy, int allowed, int64_t now)
{
    struct slot *sl = find(s, policy, 1);
    struct second *sec;
    int64_t stamp;

    if (sl == NULL) {
        atomic_fetch_add_explicit(&s->untracked, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(allowed ? &sl->allowed : &sl->denied, 1, memory_order_relaxed);
    sec = &sl->ring[now % STATS_SECONDS];
    stamp = atomic_load_explicit(&sec->second, memory_order_relaxed);
    if (stamp != now && atomic_compare_exchange_strong(&sec->second, &stamp, now)) {
        /* First decision of a new second in this cell: restart it. A count
         * racing with the restart may be lost; this is a chart, not a bill. */
        atomic_store_explicit(&sec->allowed, 0, memory_order_relaxed);
        atomic_store_explicit(&sec->denied, 0, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(allowed ? &sec->allowed : &sec->denied, 1, memory_order_relaxed);
}

size_t stats_series(struct stats *s, const char *policy, size_t seconds, int64_t *end_unix,
                    int64_t *allowed, int64_t *denied)
{
    *end_unix = (int64_t)time(NULL);
    return stats_series_at(s, policy, seconds, *end_unix, allowed, denied);
}

size_t stats_series_at(struct stats *s, const char *policy, size_t seconds, int64_t now,
                       int64_t *allowed, int64_t *denied)
{
    struct slot *sl = find(s, policy, 0);

    if (seconds > STATS_SECONDS)
        seconds = STATS_SECONDS;
    for (size_t i = 0; i < seconds; i++) {
        int64_t t = now - (int64_t)(seconds - 1 - i);
        allowed[i] = denied[i] = 0;
        if (sl != NULL && t >= 0) {
            struct second *sec = &sl->ring[t % STATS_SECONDS];
            if (atomic_load_explicit(&sec->second, memory_order_relaxed) == t) {
                allowed[i] = atomic_load_explicit(&sec->allowed, memory_order_relaxed);
                denied[i] = atomic_load_explicit(&sec->denied, memory_order_relaxed);
            }
        }
    }
    return seconds;
}

void stats_record_error(struct stats *s, const char *policy, int code, int real)
{
    int c = -code;
    struct slot *sl;

    if (c <= 0 || c >= NCODES)
        c = -PERMITD_EUNKNOWN;
    if (policy == NULL || (sl = find(s, policy, real)) == NULL) {
        atomic_fetch_add_explicit(&s->unknown_errors[c], 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&sl->errors[c], 1, memory_order_relaxed);
}

void stats_observe(struct stats *s, int64_t micros)
{
    size_t i = 0;

    while (i < NBOUNDS && micros > bounds_us[i])
        i++;
    atomic_fetch_add_explicit(&s->hist[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->hist_sum_us, (uint64_t)(micros < 0 ? 0 : micros),
                              memory_order_relaxed);
}

void stats_prometheus(struct stats *s, FILE *out)
{
    uint64_t cum = 0;

    fprintf(out, "# HELP permitd_acquires_total Acquire decisions and errors, by policy and result.\n"
                 "# TYPE permitd_acquires_total counter\n");
    for (size_t i = 0; i < SLOTS; i++) {
        struct slot *sl = &s->slots[i];
        if (!atomic_load(&sl->ready))
            continue;
        fprintf(out, "permitd_acquires_total{policy=\"%s\",result=\"allowed\"} %llu\n", sl->name,
                (unsigned long long)atomic_load(&sl->allowed));
        fprintf(out, "permitd_acquires_total{policy=\"%s\",result=\"denied\"} %llu\n", sl->name,
                (unsigned long long)atomic_load(&sl->denied));
        for (int c = 1; c < NCODES; c++) {
            uint64_t v = atomic_load(&sl->errors[c]);
            if (v > 0)
                fprintf(out, "permitd_acquires_total{policy=\"%s\",result=\"%s\"} %llu\n",
                        sl->name, permitd_status_name(-c), (unsigned long long)v);
        }
    }
    for (int c = 1; c < NCODES; c++) {
        uint64_t v = atomic_load(&s->unknown_errors[c]);
        if (v > 0)
            fprintf(out, "permitd_acquires_total{policy=\"\",result=\"%s\"} %llu\n",
                    permitd_status_name(-c), (unsigned long long)v);
    }
    fprintf(out, "# HELP permitd_acquires_untracked_total Decisions of policies beyond the %d "
                 "tracked one by one.\n# TYPE permitd_acquires_untracked_total counter\n"
                 "permitd_acquires_untracked_total %llu\n", SLOTS,
            (unsigned long long)atomic_load(&s->untracked));
    fprintf(out, "# HELP permitd_acquire_duration_seconds Time to answer an Acquire, "
                 "from decoded request to encoded reply.\n"
                 "# TYPE permitd_acquire_duration_seconds histogram\n");
    for (size_t i = 0; i <= NBOUNDS; i++) {
        cum += atomic_load(&s->hist[i]);
        if (i < NBOUNDS)
            fprintf(out, "permitd_acquire_duration_seconds_bucket{le=\"%g\"} %llu\n",
                    (double)bounds_us[i] / 1e6, (unsigned long long)cum);
        else
            fprintf(out, "permitd_acquire_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
                    (unsigned long long)cum);
    }
    fprintf(out, "permitd_acquire_duration_seconds_sum %.6f\n"
                 "permitd_acquire_duration_seconds_count %llu\n",
            (double)atomic_load(&s->hist_sum_us) / 1e6, (unsigned long long)cum);
}
