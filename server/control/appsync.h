/*
 * appsync.h - keeping the in-memory API key table (decisions/appkeys.h)
 * current with MySQL.
 *
 * Loaded once at start (appsync_load, before the API listener opens), then
 * again after every pass of the policy sync (its pass hook, so at least
 * every --sync-interval-ms), and at once when a change notice arrives on
 * <prefix>app-changes: the instance that issues or revokes a key changes
 * its own table at once and publishes a notice, and every other instance
 * reloads within milliseconds (within one sync interval if the notice is
 * lost). Each load also writes last_used_at for the keys used since the
 * previous one.
 */
#ifndef PERMITD_APPSYNC_H
#define PERMITD_APPSYNC_H

#include "core/config.h"
#include "core/status.h"
#include "decisions/appkeys.h"
#include "stores/redis.h"

struct appsync;

/* Returns a new appsync in *out (free with appsync_free()); cfg->mysql
 * must be set. cfg, redis and keys must outlive it. */
int appsync_new(const struct config *cfg, struct redis *redis, struct appkeys *keys,
                struct appsync **out, struct permitd_error *err);

/* Reads every key from MySQL into the table now (thread-safe). */
int appsync_load(struct appsync *s, struct permitd_error *err);

/* appsync_load() for the sync's pass hook (ud: the appsync): a failure is
 * logged, once until it recovers. */
void appsync_pass(void *ud);

/* Starts listening for change notices (a thread of its own). */
int appsync_start(struct appsync *s, struct permitd_error *err);

/* Tells every instance that keys or apps changed: PUBLISH "<what>" on
 * <prefix>app-changes. */
int appsync_notify(const struct config *cfg, struct redis *redis, const char *what,
                   struct permitd_error *err);

/* Notices received so far. */
unsigned long long appsync_notices(struct appsync *s);

/* Stops the listener and frees s. NULL is a no-op. */
void appsync_free(struct appsync *s);

#endif
