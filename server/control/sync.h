/*
 * sync.h - keeping Redis's copy of the policies in step with MySQL.
 *
 * A background thread loads every policy from MySQL into Redis at start-up
 * and then reconciles every --sync-interval-ms: changed policies are
 * written, deleted ones removed, each through lua/sync.lua, which refuses
 * to let an older snapshot overwrite a newer one (several permitd
 * instances sync at once). Redis flushed or restarted empty is healed by
 * the next pass; MySQL down leaves Redis as it is (Acquire keeps working)
 * and the thread retries with backoff, probing MySQL with a SELECT 1 every
 * 250 ms meanwhile so that it passes as soon as MySQL answers again.
 */
#ifndef PERMITD_SYNC_H
#define PERMITD_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "decisions/limiter.h"
#include "stores/redis.h"
#include "core/status.h"

struct sync;

/* What one pass did. */
struct sync_result {
    size_t policies;        /* in the MySQL snapshot */
    size_t written;         /* policies (re)written into Redis */
    size_t deleted;         /* policies removed from Redis */
    size_t failed;          /* policies Redis did not take (offered again next pass) */
};

/* For /readyz and logs. Times are clock_now_us() (monotonic). */
struct sync_status {
    int ever_succeeded;
    int failing;                    /* the last pass failed */
    int64_t last_success_us;        /* monotonic (core/clock.h) */
    int64_t last_success_unix_ms;   /* the same moment on the wall clock, for /metrics */
    int64_t last_attempt_us;
    uint64_t passes, failures;
    struct sync_result last;
    char last_error[512];
    size_t skipped;                 /* rows the last pass that read MySQL skipped */
    uint64_t policy_failures;       /* policies a pass failed to write, since start */
    int64_t last_pass_us;           /* how long the last pass took */
};

/* Returns a new sync in *out (free with sync_free()); cfg, redis and
 * limiter (which learns each policy's failure_mode from every snapshot; may
 * be NULL) must outlive it. Nothing runs until sync_start(). */
int sync_new(const struct config *cfg, struct redis *redis, struct limiter *limiter,
             struct sync **out, struct permitd_error *err);

/* Starts the background thread; its first pass runs at once. */
int sync_start(struct sync *s, struct permitd_error *err);

/* One reconcile pass on the calling thread. Policies go to Redis in
 * pipelined batches of 200 (one round trip each; in a cluster one per
 * master); a policy whose call fails is counted in res->failed, logged and
 * offered again at the next pass, and the pass goes on. The pass fails
 * (an error) when MySQL cannot be read, when no policy got through, when
 * three batches in a row failed as a whole (Redis down), or when removing
 * deleted policies fails. */
int sync_once(struct sync *s, struct sync_result *res, struct permitd_error *err);

struct store_policy;

/* Write-through after an administrator's change, on the calling thread:
 * offers p to Redis now, exactly as a pass would, so the next Acquire sees
 * it. PERMITD_OK when Redis holds p (or something newer) afterwards. */
int sync_write_policy(struct sync *s, const struct store_policy *p, struct permitd_error *err);

/* Writes a policy permitd keeps for itself, not in MySQL (the login
 * throttle's "_login"), through lua/sync.lua "set" like every policy hash:
 * fields[0..n) are field/value pairs (no `version`: the script raises it).
 * PERMITD_OK when Redis took them. */
int sync_own_policy(struct sync *s, const char *name, const char *const *fields, size_t n,
                    struct permitd_error *err);

/* Removes a deleted policy's hash from Redis now. */
int sync_remove_policy(struct sync *s, const char *name, struct permitd_error *err);

/* Asks the background thread for a pass now (it runs at most every 100 ms
 * this way). Callable from any thread; ud is the struct sync. */
void sync_kick(void *ud);

/* Calls fn(ud) on the sync thread after every pass, whatever it did (the
 * API keys' reload rides on it: control/appsync.h). Call before
 * sync_start(). */
void sync_set_pass_hook(struct sync *s, void (*fn)(void *ud), void *ud);

/* Copies the current status (thread-safe). */
void sync_get_status(struct sync *s, struct sync_status *out);

/* The rows of MySQL that the last pass which read it skipped because a
 * name fails validation (a policy's name, an app row such as "pay,admin"),
 * one line each naming the row and why. Each is logged once, when it
 * first appears (and once when it is gone), not at every pass. On
 * PERMITD_OK *out is a new array of *n strings (free with
 * sync_skipped_free()); thread-safe. */
int sync_skipped(struct sync *s, char ***out, size_t *n);
void sync_skipped_free(char **v, size_t n);

/* The settle runner (control/settle.h) the sync queues limit edits to
 * (NULL without a limiter), for /metrics. Lives as long as s. */
struct settle;
struct settle *sync_settle(struct sync *s);

/* Stops the thread (if started) and frees s. NULL is a no-op. */
void sync_free(struct sync *s);

#endif
