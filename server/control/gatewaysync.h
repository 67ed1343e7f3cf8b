/*
 * gatewaysync.h - keeping the in-memory gateway rules
 * (decisions/forward.h) current with MySQL.
 *
 * Loaded once at start, then after every pass of the policy sync (so at
 * least every --sync-interval-ms), at once on this instance after an
 * admin write (control/gatewaysvc.c), and on every other instance when the
 * change notice on <prefix>gateway-changes arrives (within one sync
 * interval if the notice is lost). Forward-auth never reads MySQL.
 */
#ifndef PERMITD_GATEWAYSYNC_H
#define PERMITD_GATEWAYSYNC_H

#include "core/config.h"
#include "core/status.h"
#include "decisions/forward.h"
#include "stores/redis.h"

struct gatewaysync;

/* Returns a new gatewaysync in *out (free with gatewaysync_free());
 * cfg->mysql must be set. cfg, redis and rules must outlive it. */
int gatewaysync_new(const struct config *cfg, struct redis *redis, struct forward_rules *rules,
                    struct gatewaysync **out, struct permitd_error *err);

/* Reads every rule from MySQL into the table now (thread-safe). */
int gatewaysync_load(struct gatewaysync *s, struct permitd_error *err);

/* gatewaysync_load() for the sync's pass hook (ud: the gatewaysync): a
 * failure is logged, once until it recovers; the table keeps its rules. */
void gatewaysync_pass(void *ud);

/* The rules of the last load whose policy does not exist, as words into
 * buf ("rule 3 names policy kb-tokn, ..."; "" for none); returns how many. */
int gatewaysync_broken(struct gatewaysync *s, char *buf, size_t size);

/* Starts listening for change notices (a thread of its own). */
int gatewaysync_start(struct gatewaysync *s, struct permitd_error *err);

/* Tells every instance that the rules changed: PUBLISH on
 * <prefix>gateway-changes. */
int gatewaysync_notify(const struct config *cfg, struct redis *redis, struct permitd_error *err);

/* Stops the listener and frees s. NULL is a no-op. */
void gatewaysync_free(struct gatewaysync *s);

#endif
