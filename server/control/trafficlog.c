/*
 * trafficlog.c - the traffic history's writer (see trafficlog.h).
 *
 * As control/fleet.c does for Redis: the request path only counts
 * (decisions/traffic.c, atomic adds); this thread turns running totals
 * into differences. It keeps, per place of the table, the totals as of
 * the last flush MySQL took; a flush sends every pair whose totals moved
 * since, as rows of the minute the flush closes, in one transaction
 * (trafficdb_add()). Only when MySQL committed does the kept state move
 * on: after a failure the next flush sends the difference again, larger,
 * into its own minute, so a count lands late but is neither lost nor
 * counted twice (except when the connection is lost during the COMMIT
 * itself, when nobody can know whether it was taken: trafficdb.h).
 *
 * A flush runs FLUSH_OFFSET_MS after a multiple of the period on this
 * instance's wall clock and writes into the minute that contains the
 * moment just before it, so with the default period (a minute) every
 * minute's counts land in that minute's row, and instances with clocks in
 * step (NTP) add into the same rows.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/trafficlog.h"
#include "core/log.h"
#include "stores/trafficdb.h"

#define FLUSH_OFFSET_MS 500             /* a flush runs this long after its boundary */
#define PRUNE_EVERY_S 60                /* rows past the retention deleted this often */
#define PRUNE_BATCH 10000               /* rows of one DELETE */
#define PRUNE_BATCHES 20                /* DELETEs of one pruning, at most */

_Static_assert((int)TRAFFIC_COUNTERS == (int)TRAFFICDB_COUNTERS,
               "traffic.h's counters are traffic_minutes' columns");

struct trafficlog {
    const struct config *cfg;
    struct traffic *traffic;
    struct trafficdb *db;
    uint64_t (*last)[TRAFFIC_COUNTERS]; /* per place: totals as of the last flush taken */
    struct trafficdb_row *rows;         /* a flush's rows (capacity of them) */
    uint64_t (*next)[TRAFFIC_COUNTERS]; /* per row: the totals it brings last[] to */
    size_t *places;                     /* per row: its place */
    size_t nrows;
    int64_t minute;                     /* the flush's minute */
    int64_t pruned_at;                  /* Unix s of the last pruning */
    int failing;                        /* the last flush failed (logged once) */

    pthread_t thread;
    int started_thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stopping;
    _Atomic uint64_t flushes, failures, rows_sent, pruned;
};

int trafficlog_new(const struct config *cfg, struct traffic *traffic, struct trafficlog **out,
                   struct permitd_error *err)
{
    struct trafficlog *l = calloc(1, sizeof(*l));
    size_t cap = traffic_capacity(traffic);
    int rc;

    *out = NULL;
    if (l == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "trafficlog: out of memory");
    if (cfg->traffic_flush_ms > 0 && cfg->traffic_flush_ms < 100) {
        free(l);
        return permitd_error_set(err, PERMITD_EINVAL, "--traffic-flush-ms (PERMITD_TRAFFIC_"
                                 "FLUSH_MS): %d is not 0 (off) or 100 .. 60000",
                                 cfg->traffic_flush_ms);
    }
    l->cfg = cfg;
    l->traffic = traffic;
    /* calloc: the pages no pair reaches cost no memory. */
    l->last = calloc(cap, sizeof(*l->last));
    l->next = calloc(cap, sizeof(*l->next));
    l->rows = calloc(cap + 1, sizeof(*l->rows));        /* and the sum of them all */
    l->places = calloc(cap, sizeof(*l->places));
    if (l->last == NULL || l->next == NULL || l->rows == NULL || l->places == NULL) {
        trafficlog_free(l);
        return permitd_error_set(err, PERMITD_EINTERNAL, "trafficlog: out of memory for %zu "
                                 "pairs", cap);
    }
    if ((rc = trafficdb_new(cfg, &l->db, err)) != PERMITD_OK) {
        trafficlog_free(l);
        return rc;
    }
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->wake, NULL);
    *out = l;
    return PERMITD_OK;
}

/* traffic_totals()'s callback: a row for every place whose totals moved. */
static void collect(void *ud, size_t place, const char *policy, const char *app,
                    const uint64_t total[TRAFFIC_COUNTERS])
{
    struct trafficlog *l = ud;
    struct trafficdb_row *r = &l->rows[l->nrows];
    int moved = 0;

    for (int k = 0; k < TRAFFIC_COUNTERS; k++) {
        r->v[k] = total[k] - l->last[place][k];
        moved |= r->v[k] != 0;
    }
    if (!moved)
        return;
    r->policy = policy;     /* a place's names never change (traffic.c) */
    r->app = app;
    r->minute = l->minute;
    memcpy(l->next[l->nrows], total, sizeof(l->next[0]));
    l->places[l->nrows] = place;
    l->nrows++;
}

/* Deletes the rows past the retention, at most once PRUNE_EVERY_S. */
static void prune(struct trafficlog *l, int64_t now)
{
    struct permitd_error err = {0, ""};
    int64_t before = now - (int64_t)l->cfg->traffic_history_days * 86400;
    uint64_t deleted = PRUNE_BATCH;

    if (now - l->pruned_at < PRUNE_EVERY_S)
        return;
    l->pruned_at = now;
    before -= before % 60;
    for (int i = 0; i < PRUNE_BATCHES && deleted == PRUNE_BATCH; i++) {
        if (trafficdb_prune(l->db, before, PRUNE_BATCH, &deleted, &err) != PERMITD_OK) {
            log_msg(LOG_LEVEL_WARN, "traffic history not pruned: tried again in a minute",
                    "error=\"%s\"", err.message);
            return;
        }
        atomic_fetch_add(&l->pruned, deleted);
    }
}

/* One flush into minute (Unix s, a multiple of 60). */
static void flush(struct trafficlog *l, int64_t minute)
{
    struct permitd_error err = {0, ""};
    int rc;

    l->nrows = 0;
    l->minute = minute;
    traffic_totals(l->traffic, collect, l);
    if (l->nrows > 0) {
        /* The fleet's row: the sum of this flush's (trafficdb.h). */
        struct trafficdb_row *all = &l->rows[l->nrows];
        *all = (struct trafficdb_row){TRAFFICDB_ALL, "", minute, {0}};
        for (size_t i = 0; i < l->nrows; i++)
            for (int k = 0; k < TRAFFIC_COUNTERS; k++)
                all->v[k] += l->rows[i].v[k];
        if ((rc = trafficdb_add(l->db, l->rows, l->nrows + 1, &err)) != PERMITD_OK) {
            atomic_fetch_add(&l->failures, 1);
            if (!l->failing)
                log_msg(LOG_LEVEL_WARN, "traffic history not written: sent again, with what "
                        "is counted meanwhile, at every flush until mysql takes it",
                        "rows=%zu error=\"%s\"", l->nrows, err.message);
            l->failing = 1;
            return;
        }
        for (size_t i = 0; i < l->nrows; i++)
            memcpy(l->last[l->places[i]], l->next[i], sizeof(l->last[0]));
        atomic_fetch_add(&l->rows_sent, l->nrows);
    }
    if (l->failing)
        log_msg(LOG_LEVEL_INFO, "traffic history written again", NULL);
    l->failing = 0;
    atomic_fetch_add(&l->flushes, 1);
    prune(l, minute + 60);
}

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The minute holding the moment just before the boundary passed at ms. */
static int64_t closed_minute(int64_t ms)
{
    int64_t s = (ms - FLUSH_OFFSET_MS - 1) / 1000;

    return s - s % 60;
}

static void *run(void *arg)
{
    struct trafficlog *l = arg;
    int64_t period = l->cfg->traffic_flush_ms;

    pthread_mutex_lock(&l->lock);
    while (!l->stopping) {
        int64_t next = (wall_ms() / period + 1) * period + FLUSH_OFFSET_MS;
        struct timespec at = {(time_t)(next / 1000), (long)(next % 1000) * 1000000};

        while (!l->stopping && wall_ms() < next)
            pthread_cond_timedwait(&l->wake, &l->lock, &at);
        if (l->stopping)
            break;
        pthread_mutex_unlock(&l->lock);
        flush(l, closed_minute(wall_ms()));
        pthread_mutex_lock(&l->lock);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

int trafficlog_start(struct trafficlog *l, struct permitd_error *err)
{
    if (l->cfg->traffic_flush_ms == 0) {
        log_msg(LOG_LEVEL_INFO, "traffic history off (--traffic-flush-ms 0): this instance's "
                "decisions are missing from it", NULL);
        return PERMITD_OK;
    }
    if (pthread_create(&l->thread, NULL, run, l) != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "trafficlog: cannot start its thread");
    l->started_thread = 1;
    return PERMITD_OK;
}

void trafficlog_counters(struct trafficlog *l, uint64_t *flushes, uint64_t *failures,
                         uint64_t *rows, uint64_t *pruned)
{
    *flushes = atomic_load(&l->flushes);
    *failures = atomic_load(&l->failures);
    *rows = atomic_load(&l->rows_sent);
    *pruned = atomic_load(&l->pruned);
}

void trafficlog_free(struct trafficlog *l)
{
    if (l == NULL)
        return;
    if (l->started_thread) {
        pthread_mutex_lock(&l->lock);
        l->stopping = 1;
        pthread_cond_signal(&l->wake);
        pthread_mutex_unlock(&l->lock);
        pthread_join(l->thread, NULL);
        /* What was counted since the last flush: into the current minute. */
        flush(l, closed_minute(wall_ms() + FLUSH_OFFSET_MS + 1));
        pthread_cond_destroy(&l->wake);
        pthread_mutex_destroy(&l->lock);
    } else if (l->db != NULL) {
        pthread_cond_destroy(&l->wake);
        pthread_mutex_destroy(&l->lock);
    }
    trafficdb_free(l->db);
    free(l->last);
    free(l->next);
    free(l->rows);
    free(l->places);
    free(l);
}
