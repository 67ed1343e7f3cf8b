/*
 * stats.h - what this instance's decisions looked like: allowed and denied
 * Acquires per second per policy (the admin UI's live chart, 5 minutes:
 * every policy with traffic, up to --stats-policies, the least recently
 * active dropped first past that), running totals per policy and result
 * (labels for the first 256 policies, the rest summed), and a latency
 * histogram; written out in the Prometheus text format for /metrics.
 */
#ifndef PERMITD_STATS_H
#define PERMITD_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

#define STATS_SECONDS 300
#define STATS_POLICIES_MAX 1000000      /* --stats-policies' ceiling */

struct stats;

/* Makes an empty table in *out with room for the charts of `policies`
 * policies (1 .. STATS_POLICIES_MAX; about 4.9 KB each, taken as they
 * fill): PERMITD_OK, PERMITD_EINVAL for a count out of range, or
 * PERMITD_EINTERNAL with err saying what could not be allocated (*out is
 * then NULL). Free with stats_free(); stats_free(NULL) does nothing. */
int stats_new(size_t policies, struct stats **out, struct permitd_error *err);
void stats_free(struct stats *s);

/* What a decision was, as stats_record() counts it: 0 and 1 are a
 * denial and an allowed Acquire (so `allowed` may be passed as it is);
 * STATS_SHADOW_DENIED an Acquire a policy in shadow mode would have denied
 * and allowed (issue 23), counted apart from both (result="shadow_denied"
 * on /metrics, the chart's shadow series). */
enum stats_result { STATS_DENIED = 0, STATS_ALLOWED = 1, STATS_SHADOW_DENIED = 2 };

/* Counts one decision (result: enum stats_result) for policy (safe from
 * any thread; a read lock, and the write lock for a policy's first
 * decision or its first after an eviction). Its chart always counts it,
 * evicting the least recently active policy's when the table is full; its
 * totals have labels of their own for the first 256 policies, else count
 * as untracked. */
void stats_record(struct stats *s, const char *policy, int result);

/* stats_record() as of the Unix second now, which stats_record() reads
 * from time(NULL): for a caller that drives the clock itself (the unit
 * test rolls the ring this way). */
void stats_record_at(struct stats *s, const char *policy, int result, int64_t now);

/* Counts an Acquire that ended in an error (code: PERMITD_E*) under its
 * policy when that is a real one: real says the caller knows it is (Redis
 * or MySQL answered for it); otherwise only a policy this table tracks
 * already (it has had decisions) gets the error. Errors that name no real
 * policy (made-up names, malformed ones, NULL) are counted under policy ""
 * so they cannot grow the label set. */
void stats_record_error(struct stats *s, const char *policy, int code, int real);

/* Adds one Acquire's handling time to the latency histogram. */
void stats_observe(struct stats *s, int64_t micros);

/* Writes the Prometheus text of the totals and the histogram to out. */
void stats_prometheus(struct stats *s, FILE *out);

/* Fills allowed[] and denied[] with the last `seconds` seconds ending at
 * *end_unix (the current second), oldest first. Returns seconds. *known
 * (may be NULL) is 1 when the table has figures for policy, 0 when it has
 * none (no decision since start, or evicted): the zeros are then no
 * measurement, and the UI says so. */
size_t stats_series(struct stats *s, const char *policy, size_t seconds, int64_t *end_unix,
                    int64_t *allowed, int64_t *denied, int *known);

/* stats_series() ending at the Unix second now instead of the current one
 * (stats_series() passes time(NULL) and hands it back in *end_unix). */
size_t stats_series_at(struct stats *s, const char *policy, size_t seconds, int64_t now,
                       int64_t *allowed, int64_t *denied, int *known);

/* The shadow-mode denials (STATS_SHADOW_DENIED) of the last `seconds`
 * seconds ending at the Unix second now into shadow[], oldest first, as
 * stats_series_at() fills allowed[] (zeros for a policy without figures).
 * Returns seconds. */
size_t stats_shadow_series_at(struct stats *s, const char *policy, size_t seconds, int64_t now,
                              int64_t *shadow);

#endif
