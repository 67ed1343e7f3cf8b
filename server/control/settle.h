/*
 * settle.h - the settle runner: after an edit of a policy's max_permits or
 * rate, its buckets' expiry is set again in the background.
 *
 * The edit itself is exact at once (lua/bucket.lua's tokens-earned rules
 * and the limits sent with every call); what is left to do is re-setting
 * each bucket key's expiry and folding the rate history (lua/bucket.lua,
 * "settle"). That costs a read of the policy's bucket index on every
 * master (and, once per Redis, a SCAN that builds the index), so it runs
 * on a thread of its own, one more thread per master while a policy
 * settles, and nothing
 * that answers (the admin listener, the sync pass) waits for it. A pending
 * settle is recorded in Redis (the set <prefix>settle), so any instance's
 * runner finishes it, at its start or at the next sync pass, should the
 * instance that queued it die.
 */
#ifndef PERMITD_SETTLE_H
#define PERMITD_SETTLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"
#include "decisions/limiter.h"
#include "stores/redis.h"

struct settle;

/* For /metrics. */
struct settle_status {
    size_t pending;             /* policies waiting in <prefix>settle, as last read */
    size_t running;             /* policies this instance is settling now */
    uint64_t keys_total;        /* bucket keys this instance settled (found and sent) */
    uint64_t done_total;        /* settles this instance finished */
    uint64_t failures_total;    /* settles that failed (tried again at the next pass) */
    double seconds_total;       /* time spent settling, from start to done */
    int64_t last_done_unix_ms;  /* wall clock: when this instance last finished one; 0 none */
};

/* Returns a new runner in *out (free with settle_free()); cfg, redis and
 * limiter must outlive it. Nothing runs until settle_start(). */
int settle_new(const struct config *cfg, struct redis *redis, struct limiter *limiter,
               struct settle **out, struct permitd_error *err);

/* Starts the runner's thread; it looks for pending settles at once. */
int settle_start(struct settle *st, struct permitd_error *err);

/* Records that policy `name`, as written with version stamp `stamp` (its
 * MySQL row id * 2^24 + version), needs a settle: one SADD on the calling
 * thread, then the runner is woken. Should Redis refuse the SADD, the
 * request is kept here and recorded at the next settle_kick(); logged
 * either way. Thread-safe; never waits for the settle. */
void settle_queue(struct settle *st, const char *name, uint64_t stamp);

/* Asks the runner to look at <prefix>settle now (every sync pass does).
 * Thread-safe, returns at once. */
void settle_kick(struct settle *st);

/* Copies the counters (thread-safe). */
void settle_get_status(struct settle *st, struct settle_status *out);

/* One policy's settle as Redis has it (any instance's): the hash
 * <prefix>settle:<name>:progress the runner keeps, and the set of pending
 * edits. */
struct settle_policy_state {
    int pending;                /* an edit of it is in <prefix>settle */
    int running;                /* an instance is settling it now */
    uint64_t keys_done;         /* running: so far; else the last one's */
    int64_t started_ms;         /* Unix ms: the one running, or the last one; 0 none */
    int64_t finished_ms;        /* Unix ms: the last one finished; 0 none */
    int64_t duration_ms;        /* the last one finished */
};

/* Reads policy name's settle state into *out (two Redis reads, on the
 * calling thread, within deadline_us). PERMITD_OK or the Redis error. */
int settle_policy_state(struct redis *redis, const char *prefix, const char *name,
                        int64_t deadline_us, struct settle_policy_state *out,
                        struct permitd_error *err);

/* Stops the runner (a settle under way stops after its current SCAN step,
 * and stays pending in Redis) and frees st. NULL is a no-op. */
void settle_free(struct settle *st);

#endif
