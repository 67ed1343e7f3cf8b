/*
 * overridesync.h - keeping the in-memory overrides (decisions/overrides.h,
 * the limiter's table) current with MySQL (issue 37).
 *
 * Loaded whole once at start, then after every pass of the policy sync (so
 * at least every --sync-interval-ms: a DBA's plain-SQL edit, whose triggers
 * count it, is in force within a sync interval; a pass with nothing
 * changed costs one aggregate query); one policy's at once on every
 * instance when a notice names it on <prefix>override-changes (the admin
 * API publishes it after a write: overridesync_publish()); and one
 * policy's on a worker when the script says a bucket carries a newer
 * override count than this instance holds. Decisions never read MySQL.
 */
#ifndef PERMITD_OVERRIDESYNC_H
#define PERMITD_OVERRIDESYNC_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"
#include "decisions/limiter.h"
#include "stores/redis.h"

struct overridesync;

/* Returns a new overridesync in *out (free with overridesync_free()),
 * feeding limiter's table (limiter_overrides()) and set as the limiter's
 * reload on a stale answer; cfg->mysql must be set. cfg, redis and limiter
 * must outlive it. */
int overridesync_new(const struct config *cfg, struct redis *redis, struct limiter *limiter,
                     struct overridesync **out, struct permitd_error *err);

/* Reads every override from MySQL into the table now (thread-safe). */
int overridesync_load(struct overridesync *s, struct permitd_error *err);

/* Reads the overrides of one policy into the table now (thread-safe). */
int overridesync_load_policy(struct overridesync *s, const char *policy,
                             struct permitd_error *err);

/* The sync's pass hook (ud: the overridesync): the whole table read again
 * when the change counts moved since the last load; a failure is logged,
 * once until it recovers, and the table keeps what it had. */
void overridesync_pass(void *ud);

/* Starts listening for change notices (a thread of its own). */
int overridesync_start(struct overridesync *s, struct permitd_error *err);

/* Tells every instance that policy's overrides changed: PUBLISH policy on
 * <prefix>override-changes. For the admin API after a write. */
int overridesync_publish(const struct config *cfg, struct redis *redis, const char *policy,
                         struct permitd_error *err);

/* What the last whole load took: rows, policies, milliseconds, and the
 * bytes the table holds. */
void overridesync_last(struct overridesync *s, size_t *rows, size_t *policies, double *ms,
                       size_t *bytes);

/* Stops the listener and frees s. NULL is a no-op. */
void overridesync_free(struct overridesync *s);

#endif
