/*
 * follow.h - keeping the limiter's in-memory policy copy current.
 *
 * The limiter decides from its copy of each policy (decisions/policies.h).
 * This module listens for the change notices lua/sync.lua publishes on
 * <prefix>changes (stores/redis_notice.h) and reloads the policy each one
 * names, so an edit made anywhere is in force here within milliseconds.
 * On every (re)subscription it reloads every policy it holds (notices sent
 * while it was not listening are lost), and, without --mysql-url (no sync
 * thread heals a lost notice), it does the same every --sync-interval-ms
 * for every policy it holds and every name in <prefix>policies.
 */
#ifndef PERMITD_FOLLOW_H
#define PERMITD_FOLLOW_H

#include "core/config.h"
#include "core/status.h"
#include "decisions/limiter.h"
#include "stores/redis.h"

struct follow;

/* Starts following (a thread of its own). passes: 1 to run the periodic
 * pass (no MySQL sync). cfg, redis and limiter must outlive it. Stop with
 * follow_stop(). */
int follow_start(const struct config *cfg, struct redis *redis, struct limiter *limiter,
                 int passes, struct follow **out, struct permitd_error *err);

/* For /metrics: the notices read so far, and the subscriptions made (1
 * once the listener listens; one more after each lost connection, across
 * which notices are lost until the next tick). Zeros for NULL. */
void follow_counters(struct follow *f, unsigned long long *notices,
                     unsigned long long *subscribed);

/* Stops the thread and frees f. NULL is a no-op. */
void follow_stop(struct follow *f);

#endif
