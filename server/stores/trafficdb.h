/*
 * trafficdb.h - the traffic history in MySQL (migration 0017,
 * traffic_minutes: decisions per policy, app and minute; traffic_hours:
 * the same by hour, and policy TRAFFICDB_ALL the sum of every policy),
 * written by every
 * instance's control/trafficlog.c and read by control/trafficsvc.c;
 * libmariadb stays inside trafficdb.c.
 *
 * A struct trafficdb is one connection of its own, used by one thread at a
 * time (the caller locks); it connects lazily and again after a failure.
 */
#ifndef PERMITD_TRAFFICDB_H
#define PERMITD_TRAFFICDB_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"

/* The counters, in traffic_minutes' column order (as decisions/traffic.h's
 * enum traffic_counter). */
enum {
    TRAFFICDB_ALLOWED, TRAFFICDB_DENIED, TRAFFICDB_SHADOW_DENIED, TRAFFICDB_ERRORS,
    TRAFFICDB_PASSES, TRAFFICDB_KEYED, TRAFFICDB_COUNTERS
};

#define TRAFFICDB_NAME_MAX 128
#define TRAFFICDB_ROWS_PER_INSERT 1000  /* rows of one INSERT statement */

/* The policy of the rows that sum every policy (the fleet's series). */
#define TRAFFICDB_ALL "*"

/* One row to add: this instance's counts of one pair in one minute. */
struct trafficdb_row {
    const char *policy;             /* the policy-name rule (checked), or TRAFFICDB_ALL */
    const char *app;                /* "" or the rule */
    int64_t minute;                 /* the minute's start, Unix s (a multiple of 60) */
    uint64_t v[TRAFFICDB_COUNTERS];
};

/* A bucket of a series: counts summed over [start, start + step). */
struct trafficdb_point {
    int64_t start;
    uint64_t v[TRAFFICDB_COUNTERS];
};

/* What a total is grouped by. */
enum trafficdb_group { TRAFFICDB_BY_POLICY, TRAFFICDB_BY_APP, TRAFFICDB_BY_POLICY_APP };

/* How totals are ordered, largest first: by one counter (0 ..
 * TRAFFICDB_COUNTERS - 1), by allowed + denied, or by the share denied
 * (denied / (allowed + denied), ties by denied). */
enum { TRAFFICDB_ORDER_DECIDED = TRAFFICDB_COUNTERS, TRAFFICDB_ORDER_DENIED_SHARE };

/* One group's sums. */
struct trafficdb_total {
    char policy[TRAFFICDB_NAME_MAX + 1];    /* "" when grouped by app */
    char app[TRAFFICDB_NAME_MAX + 1];       /* "" when grouped by policy (or no app) */
    uint64_t v[TRAFFICDB_COUNTERS];
};

struct trafficdb;

/* A new, not yet connected handle for cfg's --mysql-url (free with
 * trafficdb_free(); NULL is a no-op); cfg must outlive it. */
int trafficdb_new(const struct config *cfg, struct trafficdb **out, struct permitd_error *err);
void trafficdb_free(struct trafficdb *d);

/* Adds the rows' counts to traffic_minutes and to their hour's rows of
 * traffic_hours (a row met for the first time is inserted, else its
 * counters grow by these), all in one transaction:
 * PERMITD_OK when MySQL committed every row; an error when it committed
 * none (PERMITD_EUNAVAILABLE: MySQL unreachable or lost; PERMITD_EINVAL: a
 * row's name or minute out of the rules, nothing sent). A connection lost
 * during the COMMIT leaves it unknown, as with any client: the caller's
 * retry may then count those rows twice. */
int trafficdb_add(struct trafficdb *d, const struct trafficdb_row *rows, size_t n,
                  struct permitd_error *err);

/* Deletes up to limit rows of minutes before `before` (Unix s) from
 * traffic_minutes, and as many of the hours before before's hour from
 * traffic_hours; *deleted says how many went of both (fewer than limit
 * from each: none are left). */
int trafficdb_prune(struct trafficdb *d, int64_t before, int limit, uint64_t *deleted,
                    struct permitd_error *err);

/* The series of [from, to) in buckets of step seconds (a multiple of 60;
 * of 3600: read from traffic_hours), summed over the rows of policy (NULL:
 * every policy) and app (NULL: every app; "": the rows without one): *out
 * holds one point per bucket, every
 * bucket of the range, oldest first, zeros where nothing was written (free
 * with free()); *n their count, (to - from) / step. from and to must be
 * multiples of step. */
int trafficdb_series(struct trafficdb *d, const char *policy, const char *app, int64_t from,
                     int64_t to, int step, struct trafficdb_point **out, size_t *n,
                     struct permitd_error *err);

/* The series of [from, to) in buckets of step seconds of each of the n
 * policies (names by the policy-name rule, at most TRAFFICDB_TRENDS_MAX),
 * all apps summed: allowed[i * nb + b] and denied[i * nb + b] (nb = (to -
 * from) / step, the caller's arrays, zeroed here) for policy i and bucket
 * b (buckets from `from`, a whole minute; to - from a multiple of step);
 * keyed (NULL: not wanted) the same of the takes that named a key.
 * One statement whatever n: the policy list's trend column. A step of
 * whole hours (from a whole hour) reads traffic_hours. */
#define TRAFFICDB_TRENDS_MAX 500
int trafficdb_trends(struct trafficdb *d, const char *const *policies, size_t n, int64_t from,
                     int64_t to, int step, uint64_t *allowed, uint64_t *denied, uint64_t *keyed,
                     struct permitd_error *err);

/* The sums over [from, to) (multiples of 3600: read from traffic_hours,
 * whatever the number of policies two rows a policy for two hours) grouped
 * by group, of policy (NULL: all) and app (NULL: all), ordered by order
 * (see above), at most limit of them, into a new array *out of *n (free
 * with free()). Groups whose sums are all zero are not listed. */
int trafficdb_totals(struct trafficdb *d, enum trafficdb_group group, const char *policy,
                     const char *app, int64_t from, int64_t to, int order, int limit,
                     struct trafficdb_total **out, size_t *n, struct permitd_error *err);

#endif
