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
 * the rest read as zero traffic although they were serving.
 *
 * Counting takes no lock (issue 22: a read lock per decision made the
 * lock's word one cache line written by every API worker). It is done as
 * policies.c reads its table (core/readers.h): each thread owns a slot
 * whose counter is odd while it looks a policy up and counts (a probe of
 * the index, atomic adds), and everyone else touches only their own slot's
 * line. Taking a
 * place holds a mutex; a free place is written before the index names it
 * (release), so a lookup finds it whole. Evicting one first takes it out
 * of the index, then waits until every thread that was inside a lookup
 * then has left it (a grace period: nanoseconds, only readers that were
 * inside), and only then clears and reuses it: no lookup can still be
 * comparing its name or counting into its ring. A lookup that misses while
 * the index is being changed (a deletion shifts entries back) takes the
 * mutex and looks again there, so a miss is never a wrong answer. Only a
 * policy's first decision (or its first after an eviction) takes the
 * mutex; a thread past READERS_MAX slots counts under it too.
 *
 * A policy in shadow mode (issue 23) has its would-be denials counted
 * apart (result "shadow_denied", the rings' shadow count): they were
 * answered allowed, and neither figure would be true with them in it.
 * The fleet's running totals (total[]) count them as allowed: that is
 * what was answered.
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
#include "core/readers.h"
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
    _Atomic uint64_t open_passes;       /* of allowed: let through by failure_mode open */
    _Atomic uint64_t errors[NCODES];
};

/* One second of a policy's chart. 32 bits: seconds since 1970 fit until
 * 2106, and 4 billion decisions of one policy in one second will not. */
struct cell {
    _Atomic uint32_t second;            /* the Unix second counted here */
    _Atomic uint32_t allowed, denied, shadow;
};

/* A policy's place in the chart's table (name written under the lock).
 * total[] counts since the place was taken, never reset (the fleet
 * publisher, control/fleet.c, sends the differences); gen tells a place
 * taken again for another policy from the same place kept. */
struct series {
    char name[POLICY_NAME_MAX + 1];
    _Atomic int64_t active;             /* the Unix second of its last decision */
    uint64_t gen;                       /* written under the lock */
    _Atomic uint64_t total[STATS_COUNTERS];
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

    pthread_mutex_t lock;       /* take or evict a place; lookups without a slot */
    size_t cap;                 /* places */
    _Atomic size_t used;        /* places taken (written under the lock) */
    size_t mask;                /* index slots - 1 (a power of two, >= 2 * cap) */
    _Atomic uint32_t *index;    /* linear probing: place + 1, 0 = empty */
    struct series *series;      /* cap places */
    uint64_t gens;              /* places taken so far (under the lock) */
    _Atomic uint64_t evictions;
    struct readers readers;     /* inside a lookup */
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
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return PERMITD_OK;
}

void stats_free(struct stats *s)
{
    if (s == NULL)
        return;
    if (s->index != NULL && s->series != NULL)
        pthread_mutex_destroy(&s->lock);
    free((void *)s->index);
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
 * go. Inside a lookup (the entries it passes are whole: written before the
 * index named them, not reused before every lookup that saw them left),
 * or under the lock. */
static size_t probe(struct stats *s, const char *policy, uint64_t h)
{
    size_t i = (size_t)h & s->mask;
    uint32_t e;

    while ((e = atomic_load_explicit(&s->index[i], memory_order_acquire)) != 0 &&
           strcmp(s->series[e - 1].name, policy) != 0)
        i = (i + 1) & s->mask;
    return i;
}

/* The place index slot i names, or NULL. */
static struct series *at(struct stats *s, size_t i)
{
    uint32_t e = atomic_load_explicit(&s->index[i], memory_order_acquire);

    return e != 0 ? &s->series[e - 1] : NULL;
}

/* Removes index slot i (backward-shift deletion: the entries after it
 * that probed past it move up, so no lookup under the lock stops short; a
 * lookup without it may miss while they move, and then looks again under
 * it). Under the lock. */
static void unindex(struct stats *s, size_t i)
{
    size_t j = i;

    atomic_store_explicit(&s->index[i], 0, memory_order_release);
    for (;;) {
        size_t home;
        uint32_t e;
        j = (j + 1) & s->mask;
        if ((e = atomic_load_explicit(&s->index[j], memory_order_relaxed)) == 0)
            return;
        home = (size_t)fnv1a(s->series[e - 1].name) & s->mask;
        /* Entry j may fill the hole at i unless its home lies in (i, j]. */
        if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
            atomic_store_explicit(&s->index[i], e, memory_order_release);
            atomic_store_explicit(&s->index[j], 0, memory_order_release);
            i = j;
        }
    }
}

/* The place of policy, taking one (a free place, or the least recently
 * active policy's) when it has none. Under the lock. */
static struct series *take(struct stats *s, const char *policy, uint64_t h)
{
    size_t i = probe(s, policy, h), place, used = atomic_load(&s->used);
    struct series *se;

    if ((se = at(s, i)) != NULL)
        return se;
    if (used < s->cap) {
        place = used;
        atomic_store(&s->used, used + 1);
    } else {
        place = 0;
        for (size_t k = 1; k < s->cap; k++)
            if (atomic_load_explicit(&s->series[k].active, memory_order_relaxed) <
                atomic_load_explicit(&s->series[place].active, memory_order_relaxed))
                place = k;
        unindex(s, probe(s, s->series[place].name, fnv1a(s->series[place].name)));
        /* No lookup can reach the place now; wait out those that had. */
        readers_wait(&s->readers);
        atomic_fetch_add_explicit(&s->evictions, 1, memory_order_relaxed);
        i = probe(s, policy, h);    /* the deletion may have moved the empty slot */
    }
    se = &s->series[place];
    memset(se->ring, 0, sizeof(se->ring));
    for (int k = 0; k < STATS_COUNTERS; k++)
        atomic_store_explicit(&se->total[k], 0, memory_order_relaxed);
    se->gen = ++s->gens;
    snprintf(se->name, sizeof(se->name), "%s", policy);
    atomic_store_explicit(&se->active, 0, memory_order_relaxed);
    atomic_store_explicit(&s->index[i], (uint32_t)place + 1, memory_order_release);
    return se;
}

/* The counter of a decision of this result (enum stats_result) among a, d
 * and sd (allowed, denied, shadow-denied). */
#define BY_RESULT(result, a, d, sd)                                   \
    ((result) == STATS_RESULT_SHADOW_DENIED ? (sd) :                  \
     (result) == STATS_RESULT_DENIED ? (d) : (a))

/* Counts one decision (enum stats_result) in se's ring at second now.
 * Inside a lookup, or under the lock. */
static void count(struct series *se, int result, int64_t now)
{
    struct cell *c = &se->ring[now % STATS_SECONDS];
    uint32_t stamp = atomic_load_explicit(&c->second, memory_order_relaxed);

    if (atomic_load_explicit(&se->active, memory_order_relaxed) != now)
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

/* Counts one event of kind (enum stats_counter) in se: the chart for a
 * decision or a pass (result: enum stats_result; a pass reads as allowed
 * there), the running total always. Inside a lookup, or under the lock. */
static void bump(struct series *se, int kind, int result, int64_t now)
{
    if (kind != STATS_ERRORS)
        count(se, result, now);
    atomic_fetch_add_explicit(&se->total[kind], 1, memory_order_relaxed);
}

/* Counts one event of kind in policy's place (h: its fnv1a()), without the
 * lock when the place exists; a policy without a place gets one when
 * create is set, else the event is not counted here. */
static void count_in_place(struct stats *s, const char *policy, uint64_t h, int kind, int result,
                           int create, int64_t now)
{
    struct series *se = NULL;
    int me;

    if ((me = readers_slot()) >= 0) {
        readers_enter(&s->readers, me);
        if ((se = at(s, probe(s, policy, h))) != NULL)
            bump(se, kind, result, now);
        readers_leave(&s->readers, me);
        if (se != NULL)
            return;
    }
    pthread_mutex_lock(&s->lock);
    if ((se = at(s, probe(s, policy, h))) != NULL || create)
        bump(se != NULL ? se : take(s, policy, h), kind, result, now);
    pthread_mutex_unlock(&s->lock);
}

void stats_record_at(struct stats *s, const char *policy, int result, int64_t now)
{
    uint64_t h = fnv1a(policy);
    struct label *sl = find_label(s, policy, h, 1);

    if (sl == NULL)
        atomic_fetch_add_explicit(&s->untracked, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(BY_RESULT(result, &sl->allowed, &sl->denied, &sl->shadow_denied),
                                  1, memory_order_relaxed);
    count_in_place(s, policy, h, result == STATS_RESULT_DENIED ? STATS_DENIED : STATS_ALLOWED,
                   result, 1, now);
}

void stats_record_pass(struct stats *s, const char *policy)
{
    uint64_t h = fnv1a(policy);
    struct label *sl = find_label(s, policy, h, 1);

    if (sl == NULL) {
        atomic_fetch_add_explicit(&s->untracked, 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&sl->allowed, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&sl->open_passes, 1, memory_order_relaxed);
    }
    count_in_place(s, policy, h, STATS_PASSES, STATS_RESULT_ALLOWED, 1, (int64_t)time(NULL));
}

size_t stats_capacity(const struct stats *s)
{
    return s->cap;
}

void stats_totals(struct stats *s,
                  void (*each)(void *ud, size_t place, uint64_t gen, const char *policy,
                               const uint64_t total[STATS_COUNTERS]),
                  void *ud)
{
    uint64_t t[STATS_COUNTERS];
    size_t used;

    pthread_mutex_lock(&s->lock);
    used = atomic_load(&s->used);
    for (size_t i = 0; i < used; i++) {
        const struct series *se = &s->series[i];
        for (int k = 0; k < STATS_COUNTERS; k++)
            t[k] = atomic_load_explicit(&se->total[k], memory_order_relaxed);
        each(ud, i, se->gen, se->name, t);
    }
    pthread_mutex_unlock(&s->lock);
}

/* The last `seconds` seconds of se (NULL: none, all zero) ending at now,
 * oldest first. Inside a lookup, or under the lock. */
static void read_ring(const struct series *se, size_t seconds, int64_t now, int64_t *allowed,
                      int64_t *denied)
{
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
    const struct series *se = NULL;
    uint64_t h = fnv1a(policy);
    int me = readers_slot();

    if (seconds > STATS_SECONDS)
        seconds = STATS_SECONDS;
    if (me >= 0) {
        readers_enter(&s->readers, me);
        if ((se = at(s, probe(s, policy, h))) != NULL)
            read_ring(se, seconds, now, allowed, denied);
        readers_leave(&s->readers, me);
    }
    if (se == NULL) {               /* none, or missed while entries moved */
        pthread_mutex_lock(&s->lock);
        se = at(s, probe(s, policy, h));
        read_ring(se, seconds, now, allowed, denied);
        pthread_mutex_unlock(&s->lock);
    }
    if (known != NULL)
        *known = se != NULL;
    return seconds;
}

void stats_hold(struct stats *s, int hold)
{
    if (hold)
        pthread_mutex_lock(&s->lock);
    else
        pthread_mutex_unlock(&s->lock);
}

/* The shadow count of the last `seconds` seconds of se (NULL: none, all
 * zero) ending at now, oldest first. Inside a lookup, or under the lock. */
static void read_shadow(const struct series *se, size_t seconds, int64_t now, int64_t *shadow)
{
    for (size_t k = 0; k < seconds; k++) {
        int64_t t = now - (int64_t)(seconds - 1 - k);
        shadow[k] = 0;
        if (se != NULL && t >= 0) {
            const struct cell *c = &se->ring[t % STATS_SECONDS];
            if (atomic_load_explicit(&c->second, memory_order_relaxed) == (uint32_t)t)
                shadow[k] = atomic_load_explicit(&c->shadow, memory_order_relaxed);
        }
    }
}

size_t stats_shadow_series_at(struct stats *s, const char *policy, size_t seconds, int64_t now,
                              int64_t *shadow)
{
    const struct series *se = NULL;
    uint64_t h = fnv1a(policy);
    int me = readers_slot();

    if (seconds > STATS_SECONDS)
        seconds = STATS_SECONDS;
    if (me >= 0) {
        readers_enter(&s->readers, me);
        if ((se = at(s, probe(s, policy, h))) != NULL)
            read_shadow(se, seconds, now, shadow);
        readers_leave(&s->readers, me);
    }
    if (se == NULL) {               /* none, or missed while entries moved */
        pthread_mutex_lock(&s->lock);
        read_shadow(at(s, probe(s, policy, h)), seconds, now, shadow);
        pthread_mutex_unlock(&s->lock);
    }
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
        /* A policy past the labels' cap still has its place's total. */
        if (policy != NULL && real)
            count_in_place(s, policy, fnv1a(policy), STATS_ERRORS, 0, 1, (int64_t)time(NULL));
        return;
    }
    atomic_fetch_add_explicit(&sl->errors[c], 1, memory_order_relaxed);
    count_in_place(s, policy, fnv1a(policy), STATS_ERRORS, 0, real, (int64_t)time(NULL));
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
    /* Issue 39: which policies failure_mode open let through, for an alert
     * that names them; 0 written too, so the first passes are an increase
     * Prometheus sees rather than a series that appears. */
    fprintf(out, "# HELP permitd_failure_mode_open_passes_by_policy_total Acquires let through "
                 "by failure_mode open while Redis could not answer, by policy (the tracked "
                 "ones; counted in allowed as well).\n"
                 "# TYPE permitd_failure_mode_open_passes_by_policy_total counter\n");
    for (size_t i = 0; i < STATS_LABELS; i++) {
        struct label *sl = &s->labels[i];
        if (atomic_load(&sl->ready))
            fprintf(out, "permitd_failure_mode_open_passes_by_policy_total{policy=\"%s\"} %llu\n",
                    sl->name, (unsigned long long)atomic_load(&sl->open_passes));
    }
    fprintf(out, "# HELP permitd_acquires_untracked_total Decisions of policies beyond the %d "
                 "tracked one by one.\n# TYPE permitd_acquires_untracked_total counter\n"
                 "permitd_acquires_untracked_total %llu\n", STATS_LABELS,
            (unsigned long long)atomic_load(&s->untracked));
    used = atomic_load(&s->used);
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
