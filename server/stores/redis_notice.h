/*
 * redis_notice.h - Redis pub/sub for permitd's change notices.
 *
 * lua/sync.lua PUBLISHes "<name> <version>" on <prefix>changes after every
 * write of a policy; each permitd instance listens here, on a blocking
 * connection of its own (a subscribed connection can do nothing else),
 * driven by a thread of its own, and reloads the policy named. In Redis
 * Cluster, PUBLISH reaches the subscribers on every node, so any one node
 * will do.
 */
#ifndef PERMITD_REDIS_NOTICE_H
#define PERMITD_REDIS_NOTICE_H

#include <stddef.h>

#include "core/status.h"
#include "stores/redis.h"

struct redis_notice;

/* Called on the listener's thread for each message on the channel (msg,
 * len bytes, valid during the call). */
typedef void (*redis_notice_fn)(void *ud, const char *msg, size_t len);

/* Called on the listener's thread each time it has (re)subscribed (notices
 * sent while it was not listening are lost: the caller catches up here),
 * and then every every_ms while it listens (0: only on subscribing). */
typedef void (*redis_notice_tick_fn)(void *ud);

/* Starts the listener's thread on `channel`. It (re)connects with the
 * usual backoff, for as long as it runs. drained (may be NULL) is called
 * once every notice read so far has gone to fn, before the thread waits
 * for more: a burst of notices (a sync batch writes 200 policies) can be
 * acted on as one batch. r, channel (copied) and ud must outlive it.
 * Returns a new listener in *out, stop it with redis_notice_stop(). */
int redis_notice_start(struct redis *r, const char *channel, redis_notice_fn fn,
                       redis_notice_tick_fn drained, redis_notice_tick_fn tick, int every_ms,
                       void *ud,
                       struct redis_notice **out, struct permitd_error *err);

/* How many notices arrived, and how many times it subscribed. */
void redis_notice_counters(struct redis_notice *n, unsigned long long *notices,
                           unsigned long long *subscribed);

/* Stops the thread and frees n. NULL is a no-op. */
void redis_notice_stop(struct redis_notice *n);

#endif
