/*
 * trafficlog.h - the traffic history's writer (issue 39): once every
 * --traffic-flush-ms (60 s by default, aligned to the clock) a thread of
 * its own reads this instance's running totals per policy and app
 * (decisions/traffic.h) and adds what changed since its last flush to
 * MySQL's traffic_minutes and traffic_hours (stores/trafficdb.h), in the
 * rows of the minute the flush closes, with one row more for the sum of
 * every policy (the fleet's series). Every instance adds its own counts
 * into the same rows, so the history is the fleet's; an instance that dies
 * loses what it had
 * not flushed (at most one flush period, a minute by default), and no
 * other instance's. Rows older than --traffic-history-days are deleted by
 * every instance, at most once a minute, in batches.
 *
 * No MySQL (--mysql-url empty) or --traffic-flush-ms 0: no history.
 */
#ifndef PERMITD_TRAFFICLOG_H
#define PERMITD_TRAFFICLOG_H

#include <stdint.h>

#include "core/config.h"
#include "core/status.h"
#include "decisions/traffic.h"

struct trafficlog;

/* Returns a new writer in *out (free with trafficlog_free()); cfg and
 * traffic must outlive it. Nothing is written until trafficlog_start(). */
int trafficlog_new(const struct config *cfg, struct traffic *traffic, struct trafficlog **out,
                   struct permitd_error *err);

/* Starts the thread (nothing when --traffic-flush-ms is 0). */
int trafficlog_start(struct trafficlog *l, struct permitd_error *err);

/* For /metrics: flushes that MySQL took and that failed, rows sent in the
 * ones it took, rows deleted by the pruning. */
void trafficlog_counters(struct trafficlog *l, uint64_t *flushes, uint64_t *failures,
                         uint64_t *rows, uint64_t *pruned);

/* Stops the thread, flushes once more what was counted (a clean stop
 * loses nothing MySQL takes) and frees l. NULL is a no-op. */
void trafficlog_free(struct trafficlog *l);

#endif
