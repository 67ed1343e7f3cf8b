/*
 * limiter_deny.c - the limiter's glue to the deny cache
 * (decisions/deny_cache.h).
 *
 * Which requests it may answer: an Acquire (never a Peek: its answer is the
 * bucket as it stands, which the cache does not know) without a request
 * id, of a policy whose permits come back only with time (not concurrency:
 * a Release frees them) and that enforces (not in shadow mode: its denials
 * are answered allowed, see shadow()). A take with a request id goes to
 * Redis whatever the cache holds: it may be the retry of a take another
 * instance allowed, which must be answered allowed again (its record is in
 * Redis, and only there); its denial writes nothing (lua/lib/records.lua),
 * so a client over its limit grows no key whatever ids it sends. What the cache denies, Redis would deny too: see deny_cache.h for
 * the clocks; the policy's version stamp and the reset epoch for edits and
 * resets (limiter_reset(), the change notices). */
#define _GNU_SOURCE     /* qsort_r */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/clock.h"
#include "decisions/deny_cache.h"
#include "decisions/limiter.h"
#include "decisions/limiter_plan.h"
#include "decisions/limiter_internal.h"
#include "core/log.h"
#include "core/loop.h"
#include "decisions/policies.h"
#include "stores/cluster.h"
#include "stores/policy.h"

/* A take decided under an override (issue 37) is neither answered from
 * the cache nor remembered there: a limit override is Redis's to decide,
 * and an entry remembered under one would outlive its expiry, which
 * changes no version stamp. Every other entry holds the stamp with the
 * policy's override count in it, so any override written since misses. */
int limiter_deny_cacheable(const struct limiter_queue *q, int take,
                           const struct policies_entry *e, const struct limiter_limits *lim)
{
    return q->deny != NULL && take == DO_TAKE && e->algorithm != POLICY_CONCURRENCY &&
           !e->shadow && lim->action == OVERRIDES_NONE && !lim->matched;
}

/* Answers req from the cache when it holds a denial still in force for
 * it: 1 with res filled, else 0 (counted as a miss). */
int limiter_deny_answer(struct limiter_queue *q, const struct limiter_request *req,
                        const struct limiter_limits *lim, uint64_t epoch,
                        struct limiter_result *res)
{
    struct deny_cache_answer a;

    if (!deny_cache_get(q->deny, req->bucket, req->key ? req->key : "", lim->stamp, epoch,
                        req->permits == 0 ? 1 : req->permits, clock_now_us(), &a)) {
        limiter_count(&q->counts.deny_misses);
        return 0;
    }
    limiter_count(&q->counts.deny_hits);
    memset(res, 0, sizeof(*res));
    res->allowed = 0;
    res->remaining = a.remaining;
    res->limit = a.limit;
    res->retry_after_ms = a.retry_after_ms;
    res->reset_after_ms = a.reset_after_ms;
    res->window_s = a.window_s;
    res->tokens_micro = a.tokens_micro;
    return 1;
}

/* Remembers a denial Redis answered for job j (a script answer of its own,
 * not replayed, not asked again after a stale one). */
void limiter_deny_remember(struct limiter_queue *q, const struct job *j,
                           const struct limiter_result *res)
{
    struct deny_cache_answer a = {res->remaining, res->limit, res->retry_after_ms,
                                  res->reset_after_ms, res->window_s, res->tokens_micro};

    if (deny_cache_put(q->deny, j->req.bucket, j->req.key ? j->req.key : "", j->lim.stamp,
                       j->epoch, j->req.permits == 0 ? 1 : j->req.permits, j->sent_us,
                       clock_now_us(), &a))
        atomic_fetch_add_explicit(&q->l->deny_evictions, 1, memory_order_relaxed);
}
