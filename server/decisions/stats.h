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

/* The running totals kept per policy for the fleet publisher. */
enum stats_counter {
    STATS_ALLOWED,      /* decided by Redis: allowed */
    STATS_DENIED,       /* decided by Redis: denied */
    STATS_ERRORS,       /* answered with an error (a real policy's) */
    STATS_PASSES,       /* let through by failure_mode open, Redis not deciding */
    STATS_COUNTERS
};
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
 * STATS_RESULT_SHADOW_DENIED an Acquire a policy in shadow mode would have
 * denied and allowed (issue 23), counted apart from both
 * (result="shadow_denied" on /metrics, the chart's shadow series; the
 * fleet's running totals count it as allowed, which it was answered). */
enum stats_result {
    STATS_RESULT_DENIED = 0,
    STATS_RESULT_ALLOWED = 1,
    STATS_RESULT_SHADOW_DENIED = 2
};

/* Counts one decision (result: enum stats_result) for policy (safe from
 * any thread; no lock but for a policy's first decision or its first
 * after an eviction, which take a mutex). Its chart always counts it,
 * evicting the least recently active policy's when the table is full; its
 * totals have labels of their own for the first 256 policies, else count
 * as untracked. */
void stats_record(struct stats *s, const char *policy, int result);

/* stats_record() as of the Unix second now, which stats_record() reads
 * from time(NULL): for a caller that drives the clock itself (the unit
 * test rolls the ring this way). */
void stats_record_at(struct stats *s, const char *policy, int result, int64_t now);

/* Holds (hold 1) or lets go of (hold 0) the table's mutex, which taking or
 * evicting a place holds: for the unit test, which checks that counting a
 * policy with a place, and reading its series, never wait for it. */
void stats_hold(struct stats *s, int hold);

/* Counts an Acquire that ended in an error (code: PERMITD_E*) under its
 * policy when that is a real one: real says the caller knows it is (Redis
 * or MySQL answered for it); otherwise only a policy this table tracks
 * already (it has had decisions) gets the error. Errors that name no real
 * policy (made-up names, malformed ones, NULL) are counted under policy ""
 * so they cannot grow the label set. */
void stats_record_error(struct stats *s, const char *policy, int code, int real);

/* Counts an Acquire that failure_mode open let through while Redis could
 * not decide: under "allowed" on /metrics and in the chart, under
 * STATS_PASSES in the running totals, and in the policy's
 * permitd_failure_mode_open_passes_by_policy_total. */
void stats_record_pass(struct stats *s, const char *policy);

/* The places of the chart's table (stats_new()'s policies). */
size_t stats_capacity(const struct stats *s);

/* Calls each() for every policy with a place, under the table's lock (each
 * must not call back into s): its place (< stats_capacity()), the place's
 * generation (changes when the place is taken for another policy, whose
 * totals start again from 0), its name and its running totals since it
 * took the place. Counts never go down within one generation. */
void stats_totals(struct stats *s,
                  void (*each)(void *ud, size_t place, uint64_t gen, const char *policy,
                               const uint64_t total[STATS_COUNTERS]),
                  void *ud);

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

/* The shadow-mode denials (STATS_RESULT_SHADOW_DENIED) of the last `seconds`
 * seconds ending at the Unix second now into shadow[], oldest first, as
 * stats_series_at() fills allowed[] (zeros for a policy without figures).
 * Returns seconds. */
size_t stats_shadow_series_at(struct stats *s, const char *policy, size_t seconds, int64_t now,
                              int64_t *shadow);

#endif
