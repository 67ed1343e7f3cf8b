/*
 * deny_cache.h - one worker's memory of the buckets Redis just denied.
 *
 * Under a flood most Acquires hit a few buckets that are over their limit,
 * and each denial would cost Redis a script call. A denial carries, in its
 * retry_after_ms, how long a request of that size must wait at least: until
 * then nothing but a reset or a policy edit can let it through (tokens only
 * grow with time, a window's count and a log's entries only fall with it,
 * and another client's take only makes the wait longer). So each worker
 * keeps, per bucket just denied, until when a request of the same size is
 * denied, and answers such requests itself (decisions/limiter_deny.c decides
 * which requests may ask: a take of a policy whose permits never come back
 * early, without a request_id: only Redis knows what another instance allowed).
 *
 * Exact, never denying what Redis would allow:
 *   - the wait starts when the request was SENT (Redis decided after that,
 *     on its own clock), ends a millisecond before what retry_after_ms
 *     (rounded up) says, less 0.1% for the two clocks' rates; the answer's
 *     remaining wait is counted from when the answer ARRIVED, so a client
 *     that waits it is never early (rounded up, never down) and late by
 *     at most the round trip;
 *   - an entry holds the policy's version stamp and the limiter's reset
 *     epoch at the time of the request: an edit (a new stamp) or a reset
 *     (a new epoch) makes every entry of before miss.
 *
 * A fixed number of entries, allocated once: a ring in the order they came
 * (the oldest is overwritten: "evicting the oldest") and an open-addressed
 * index of twice as many slots over it. Not thread-safe: one per worker,
 * used from its loop's thread only, so the hot path takes no lock.
 */
#ifndef PERMITD_DENY_CACHE_H
#define PERMITD_DENY_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct deny_cache;

/* A denial's fields as the cache answers them (limiter.h's limiter_result
 * for allowed = 0). */
struct deny_cache_answer {
    int64_t remaining;
    int64_t limit;
    int64_t retry_after_ms;
    int64_t reset_after_ms;
    int64_t window_s;
    int64_t tokens_micro;
};

/* Returns in *out a new cache of `size` entries (>= 1; about 450 bytes
 * each, touched only as they fill), free with deny_cache_free(). An error
 * names the size that could not be had. */
int deny_cache_new(size_t size, struct deny_cache **out, struct permitd_error *err);
void deny_cache_free(struct deny_cache *c);

/* Whether a take of `permits` from bucket (policy name) / key ("" the
 * shared bucket) must be denied at now_us (monotonic) under the policy's
 * version stamp and the reset epoch: 1 with *out filled (the remaining
 * wait, rounded up), else 0. An entry found outdated (its wait over, an
 * older stamp or epoch) is dropped. */
int deny_cache_get(struct deny_cache *c, const char *bucket, const char *key, uint64_t stamp,
                   uint64_t epoch, int64_t permits, int64_t now_us, struct deny_cache_answer *out);

/* Remembers that Redis denied a take of `permits` from bucket / key: a
 * request sent at sent_us, answered a at answered_us (monotonic), decided
 * under version stamp `stamp`, in reset epoch `epoch` (both as they were
 * BEFORE the request was sent). Replaces the bucket's entry if it has one;
 * else takes the oldest's place. A wait too short to be sure of (under
 * 2 ms) is not kept. Returns 1 when an entry still in force was evicted,
 * else 0. */
int deny_cache_put(struct deny_cache *c, const char *bucket, const char *key, uint64_t stamp,
                   uint64_t epoch, int64_t permits, int64_t sent_us, int64_t answered_us,
                   const struct deny_cache_answer *a);

/* How many entries are held (in force or not yet found outdated). */
size_t deny_cache_count(const struct deny_cache *c);

#endif
