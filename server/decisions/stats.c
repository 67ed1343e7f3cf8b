/*
 * stats.c - per-second decision counters for the admin UI's chart, and
 * running totals for /metrics, in two tables of bounded size.
 *
 * The chart's table (issue 22) has a place for every policy with traffic,
 * up to --stats-policies of them: a place holds a ring of STATS_SECONDS
 * seconds, each stamped with the Unix second it counts (a stale cell is
 * recognised and restarted rather than cleared by a timer), and the second
 * of its last decision. A policy that finds no place takes a free one, or,
 * with every place taken, the one of the least recently active policy
 * (evicted: its figures are gone, and the UI says "no figures yet" for it,
 * never zero). Before, the first 256 policies took every place for good and
 * the rest read as zero traffic although they were serving. Lookups hold a
 * read lock (many at once; the counts are relaxed atomic adds); taking or
 * evicting a place holds the write lock, and only a policy's first
 * decision (or its first after an eviction) does that.
 *
 * A policy in shadow mode (issue 23) has its would-be denials counted
 * apart (result "shadow_denied", the rings' shadow count): they were
 * answered allowed, and neither figure would be true with them in it.
 *
 * The totals behind permitd_acquires_total{policy,result} keep the
 * Prometheus label cap as before: the first STATS_LABELS policies to be
 * counted get labels of their own, found by hashing the name (open
 * addressing, a few probes, lock-free) and never freed, since a Prometheus
 * counter must not go back to zero; the decisions of the rest are summed
 * in permitd_acquires_untracked_total. A flood of made-up policy names
 * grows neither table: only real policies are counted (decisions/api.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stores/policy.h"
#include "decisions/stats.h"
#include "core/status.h"

#define STATS_LABELS 256
#define PROBES 8

#define NCODES PERMITD_STATUS_COUNT      /* -PERMITD_E* codes, 0 unused */

/* A policy's totals, with labels of its own on /metrics. */
struct label {
    _Atomic uint64_t hash;              /* 0 = free */
    char name[POLICY_NAME_MAX + 1];
    _Atomic int ready;                  /* name written */
    _Atomic uint64_t allowed, denied;   /* since start */
    _Atomic uint64_t shadow_denied;     /* shadow mode's would-be denials (issue 23) */
    _Atomic uint64_t errors[NCODES];
};

/* One second of a policy's chart. 32 bits: seconds since 1970 fit until
 * 2106, and 4 billion decisions of one policy in one second will not. */
struct cell {
    _Atomic uint32_t second;            /* the Unix second counted here */
    _Atomic uint32_t allowed, denied, shadow;
};

/* A policy's place in the chart's table (name written under the lock). */
struct series {
    char name[POLICY_NAME_MAX + 1];
    _Atomic int64_t active;             /* the Unix second of its last decision */
    struct cell ring[STATS_SECONDS];
};

/* Latency buckets' upper bounds, in microseconds. */
static const int64_t bounds_us[] = {100, 250, 500, 1000, 2500, 5000, 10000, 25000,
                                    50000, 100000, 250000, 1000000};
#define NBOUNDS (sizeof(bounds_us) / sizeof(bounds_us[0]))

struct stats {
    struct label labels[STATS_LABELS];
    _Atomic uint64_t unknown_errors[NCODES];    /* errors naming no policy */
    _Atomic uint64_t untracked;                 /* decisions of policies past STATS_LABELS */
    _Atomic uint64_t hist[NBOUNDS + 1];
    _Atomic uint64_t hist_sum_us;

    pthread_rwlock_t lock;      /* read: find a place; write: take or evict one */
    size_t cap, used;           /* places, places taken */
    size_t mask;                /* index slots - 1 (a power of two, >= 2 * cap) */
    uint32_t *index;            /* linear probing: place + 1, 0 = empty */
    struct series *series;      /* cap places */
    _Atomic uint64_t evictions;
};

int stats_new(size_t policies, struct stats **out, struct permitd_error *err)
{
    struct stats *s;
    size_t slots = 2;

    *out = NULL;
    if (policies < 1 || policies > STATS_POLICIES_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "stats: %zu policies tracked: must be 1 .. %d",
                                 policies, STATS_POLICIES_MAX);
    while (slots < 2 * policies)
        slots *= 2;
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "stats: out of memory for the %zu-byte counter table", sizeof(*s));
    s->cap = policies;
    s->mask = slots - 1;
    /* calloc: pages the chart's table never reaches cost no memory. */
    s->index = calloc(slots, sizeof(*s->index));
    s->series = calloc(policies, sizeof(*s->series));
    if (s->index == NULL || s->series == NULL) {
        stats_free(s);
        return permitd_error_set(err, PERMITD_EINTERNAL, "stats: out of memory for %zu policies' "
                                 "series (%zu bytes)", policies, policies * sizeof(struct series));
    }
    pthread_rwlock_init(&s->lock, NULL);
    *out = s;
    return PERMITD_OK;
}

void stats_free(struct stats *s)
{
    if (s == NULL)
        return;
    if (s->index != NULL && s->series != NULL)
        pthread_rwlock_destroy(&s->lock);
    free(s->index);
    free(s->series);
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

/* The labels of policy (h: its fnv1a()); claims a free place when create
 * is set. */
static struct label *find_label(struct stats *s, const char *policy, uint64_t h, int create)
{
    for (int i = 0; i < PROBES; i++) {
        struct label *sl = &s->labels[(h + (uint64_t)i) % STATS_LABELS];
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

/* The index slot holding policy's place, or the empty slot where it would
 * go. Under the lock (read or write). */
static size_t probe(const struct stats *s, const char *policy, uint64_t h)
{
    size_t i = (size_t)h & s->mask;

    while (s->index[i] != 0 && strcmp(s->series[s->index[i] - 1].name, policy) != 0)
        i = (i + 1) & s->mask;
    return i;
}

/* Removes index slot i (backward-shift deletion: the entries after it
 * that probed past it move up, so no lookup stops short). Write lock. */
static void unindex(struct stats *s, size_t i)
{
    size_t j = i;

    s->index[i] = 0;
    for (;;) {
        size_t home;
        j = (j + 1) & s->mask;
        if (s->index[j] == 0)
            return;
        home = (size_t)fnv1a(s->series[s->index[j] - 1].name) & s->mask;
        /* Entry j may fill the hole at i unless its home lies in (i, j]. */
        if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
            s->index[i] = s->index[j];
            s->index[j] = 0;
            i = j;
        }
    }
}

/* The place of policy, taking one (a free place, or the least recently
 * active policy's) when it has none. Write lock. */
static struct series *take(struct stats *s, const char *policy, uint64_t h)
{
    size_t i = probe(s, policy, h), place;
    struct series *se;

    if (s->index[i] != 0)
        return &s->series[s->index[i] - 1];
    if (s->used < s->cap) {
        place = s->used++;
    } else {
        place = 0;
        for (size_t k = 1; k < s->cap; k++)
            if (atomic_load_explicit(&s->series[k].active, memory_order_relaxed) <
                atomic_load_explicit(&s->series[place].active, memory_order_relaxed))
                place = k;
        unindex(s, probe(s, s->series[place].name, fnv1a(s->series[place].name)));
        atomic_fetch_add_explicit(&s->evictions, 1, memory_order_relaxed);
        i = probe(s, policy, h);    /* the deletion may have moved the empty slot */
    }
    se = &s->series[place];
    memset(se->ring, 0, sizeof(se->ring));
    snprintf(se->name, sizeof(se->name), "%s", policy);
    s->index[i] = (uint32_t)place + 1;
    return se;
}

/* The counter of a decision of this result among a, d and sd (allowed,
 * denied, shadow-denied). */
#define BY_RESULT(result, a, d, sd) \
    ((result) == STATS_SHADOW_DENIED ? (sd) : (result) == STATS_DENIED ? (d) : (a))

/* Counts one decision in se's ring at second now. Read (or write) lock. */
static void count(struct series *se, int result, int64_t now)
{
    struct cell *c = &se->ring[now % STATS_SECONDS];
    uint32_t stamp = atomic_load_explicit(&c->second, memory_order_relaxed);

    atomic_store_explicit(&se->active, now, memory_order_relaxed);
    if (stamp != (uint32_t)now &&
        atomic_compare_exchange_strong(&c->second, &stamp, (uint32_t)now)) {
        /* First decision of a new second in this cell: restart it. A count
         * racing with the restart may be lost; this is a chart, not a bill. */
        atomic_store_explicit(&c->allowed, 0, memory_order_relaxed);
        atomic_store_explicit(&c->denied, 0, memory_order_relaxed);
        atomic_store_explicit(&c->shadow, 0, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(BY_RESULT(result, &c->allowed, &c->denied, &c->shadow), 1,
                              memory_order_relaxed);
}

void stats_record(struct stats *s, const char *policy, int result)
{
    stats_record_at(s, policy, result, (int64_t)time(NULL));
}

void stats_record_at(struct stats *s, const char *policy, int result, int64_t now)
{
    uint64_t h = fnv1a(policy);
    struct label *sl = find_label(s, policy, h, 1);
    size_t i;

    if (sl == NULL)
        atomic_fetch_add_explicit(&s->untracked, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(BY_RESULT(result, &sl->allowed, &sl->denied, &sl->shadow_denied),
                                  1, memory_order_relaxed);

    pthread_rwlock_rdlock(&s->lock);
    i = probe(s, policy, h);
    if (s->index[i] != 0) {
        count(&s->series[s->index[i] - 1], result, now);
        pthread_rwlock_unlock(&s->lock);
        return;
    }
    pthread_rwlock_unlock(&s->lock);
    pthread_rwlock_wrlock(&s->lock);
    count(take(s, policy, h), result, now);
    pthread_rwlock_unlock(&s->lock);
}

size_t stats_series(struct stats *s, const char *policy, size_t seconds, int64_t *end_unix,
                    int64_t *allowed, int64_t *denied, int *known)
{
    *end_unix = (int64_t)time(NULL);
    return stats_series_at(s, policy, seconds, *end_unix, allowed, denied, known);
}

size_t stats_series_at(struct stats *s, const char *policy, size_t seconds, int64_t now,
                       int64_t *allowed, int64_t *denied, int *known)
{
    const struct series *se;
    size_t i;

    if (seconds > STATS_SECONDS)
        seconds = STATS_SECONDS;
    pthread_rwlock_rdlock(&s->lock);
    i = probe(s, policy, fnv1a(policy));
    se = s->index[i] != 0 ? &s->series[s->index[i] - 1] : NULL;
    if (known != NULL)
        *known = se != NULL;
    for (size_t k = 0; k < seconds; k++) {
        int64_t t = now - (int64_t)(seconds - 1 - k);
        allowed[k] = denied[k] = 0;
        if (se != NULL && t >= 0) {
            const struct cell *c = &se->ring[t % STATS_SECONDS];
            if (atomic_load_explicit(&c->second, memory_order_relaxed) == (uint32_t)t) {
                allowed[k] = atomic_load_explicit(&c->allowed, memory_order_relaxed);
                denied[k] = atomic_load_explicit(&c->denied, memory_order_relaxed);
            }
        }
    }
    pthread_rwlock_unlock(&s->lock);
    return seconds;
}

size_t stats_shadow_series_at(struct stats *s, const char *policy, size_t seconds, int64_t now,
                              int64_t *shadow)
{
    const struct series *se;
    size_t i;

    if (seconds > STATS_SECONDS)
        seconds = STATS_SECONDS;
    pthread_rwlock_rdlock(&s->lock);
    i = probe(s, policy, fnv1a(policy));
    se = s->index[i] != 0 ? &s->series[s->index[i] - 1] : NULL;
    for (size_t k = 0; k < seconds; k++) {
        int64_t t = now - (int64_t)(seconds - 1 - k);
        shadow[k] = 0;
        if (se != NULL && t >= 0) {
            const struct cell *c = &se->ring[t % STATS_SECONDS];
            if (atomic_load_explicit(&c->second, memory_order_relaxed) == (uint32_t)t)
                shadow[k] = atomic_load_explicit(&c->shadow, memory_order_relaxed);
        }
    }
    pthread_rwlock_unlock(&s->lock);
    return seconds;
}

void stats_record_error(struct stats *s, const char *policy, int code, int real)
{
    int c = -code;
    struct label *sl;

    if (c <= 0 || c >= NCODES)
        c = -PERMITD_EUNKNOWN;
    if (policy == NULL || (sl = find_label(s, policy, fnv1a(policy), real)) == NULL) {
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
    size_t used;

    fprintf(out, "# HELP permitd_acquires_total Acquire decisions and errors, by policy and result.\n"
                 "# TYPE permitd_acquires_total counter\n");
    for (size_t i = 0; i < STATS_LABELS; i++) {
        struct label *sl = &s->labels[i];
        if (!atomic_load(&sl->ready))
            continue;
        fprintf(out, "permitd_acquires_total{policy=\"%s\",result=\"allowed\"} %llu\n", sl->name,
                (unsigned long long)atomic_load(&sl->allowed));
        fprintf(out, "permitd_acquires_total{policy=\"%s\",result=\"denied\"} %llu\n", sl->name,
                (unsigned long long)atomic_load(&sl->denied));
        if (atomic_load(&sl->shadow_denied) > 0)
            fprintf(out, "permitd_acquires_total{policy=\"%s\",result=\"shadow_denied\"} %llu\n",
                    sl->name, (unsigned long long)atomic_load(&sl->shadow_denied));
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
                 "permitd_acquires_untracked_total %llu\n", STATS_LABELS,
            (unsigned long long)atomic_load(&s->untracked));
    pthread_rwlock_rdlock(&s->lock);
    used = s->used;
    pthread_rwlock_unlock(&s->lock);
    fprintf(out, "# HELP permitd_stats_policies Policies whose last 5 minutes the admin UI's "
                 "chart has (at most --stats-policies).\n# TYPE permitd_stats_policies gauge\n"
                 "permitd_stats_policies %zu\n"
                 "# HELP permitd_stats_evictions_total Policies whose chart figures were dropped "
                 "for another's (the least recently active first).\n"
                 "# TYPE permitd_stats_evictions_total counter\n"
                 "permitd_stats_evictions_total %llu\n", used,
            (unsigned long long)atomic_load(&s->evictions));
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
