/*
 * limiter_reserve.h - reservations (issue 38): take an estimate now,
 * settle the real cost later.
 *
 * Reserve holds each item's estimate in its bucket, all or nothing, and
 * answers a reservation id; Commit(id, actual per item) refunds what the
 * estimate took beyond the actual (limiter_refund()'s rules: never above
 * max_permits, never re-priced, only what still counts) or charges the
 * excess, which may take a bucket below empty down to its policy's debt
 * floor; Cancel refunds it all; a reservation not settled by its expiry is
 * settled as each item's policy says (keep the estimate, or refund it),
 * by whichever instance touches it first: a Commit or Cancel that comes
 * late, or the expiry sweep (limiter_reserve_sweep(), about once a second
 * on every instance). Commit and Cancel are idempotent: the record's one
 * transition out of "open" (lua/reservation.lua) decides once, a retry
 * answers what the record says and changes nothing.
 *
 * All or nothing across Redis Cluster slots: the items are held per slot
 * (and per algorithm: one script call each), in turn; when one group is
 * refused, the groups already held are refunded at once. What may be
 * briefly held and given back: the estimates of the groups held before
 * the refusal, for the round trips until their refund (under-admission,
 * never over: a refund gives back only what still counts). The same holds
 * serve an all_or_nothing AcquireBatch whose items span slots.
 *
 * Every call here is blocking, on the calling thread's Redis connection.
 */
#ifndef PERMITD_LIMITER_RESERVE_H
#define PERMITD_LIMITER_RESERVE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "decisions/limiter.h"
#include "stores/policy.h"

#define LIMITER_RESERVE_ITEMS_MAX 8    /* one script call's arguments hold 8 items of 8 policies */
#define LIMITER_RESERVE_ID_LEN 32       /* hex characters */

struct limiter_reserve_item {
    const char *bucket;     /* policy name */
    const char *key;        /* "" = the shared bucket */
    int64_t estimate;       /* >= 1: what is held until the commit */
};

/* What Reserve answers. */
struct limiter_reserve_answer {
    int allowed;            /* every item held (0: none is) */
    int replayed;           /* the reservation of an earlier Reserve with this request id */
    char id[LIMITER_RESERVE_ID_LEN + 1];    /* allowed: the reservation */
    int64_t expires_after_ms;   /* allowed: until it expires (capped per policy) */
    int64_t retry_after_ms;     /* refused: the longest of the items' waits */
    size_t n;
    struct {
        int64_t held;           /* the estimate held (0 when refused) */
        int64_t remaining, limit, retry_after_ms;
    } items[LIMITER_RESERVE_ITEMS_MAX];
};

enum limiter_reserve_state {
    LIMITER_RESERVE_COMMITTED = 1,
    LIMITER_RESERVE_CANCELLED = 2,
    LIMITER_RESERVE_EXPIRED = 3,
};

/* What Commit and Cancel answer: the reservation's end and each item's
 * settlement. */
struct limiter_reserve_settled {
    enum limiter_reserve_state state;   /* what happened: committed, cancelled, or expired
                                           (then the actuals were not charged) */
    int replayed;                       /* settled before: this answers the record */
    size_t n;
    struct {
        char bucket[POLICY_NAME_MAX + 1];
        char key[POLICY_KEY_MAX + 1];
        int64_t held, actual;           /* actual: -1 when none was committed */
        int64_t refunded, charged;      /* permits given back; charged beyond the estimate */
        int expiry_refund;              /* the policy's rule at expiry: refund (else keep) */
    } items[LIMITER_RESERVE_ITEMS_MAX];
};

/* Reserve: app's n items (1..LIMITER_RESERVE_ITEMS_MAX; a policy may
 * appear more than once), all or nothing; ttl_ms 0 = the policies' cap,
 * else capped to each item's policy's reserve_ttl_ms. request_id (NULL or
 * "": none) makes it retry-safe: the same app and id answer the same
 * reservation, replayed, and hold nothing again. A refusal is an answer
 * (allowed 0, retry_after_ms); errors: invalid_argument, not_found,
 * permission_denied (app), failed_precondition (a disabled policy, a
 * concurrency policy), out_of_range (an estimate over max_permits),
 * unavailable (Redis; a Reserve with this request id still under way). */
int limiter_reserve_open(struct limiter *l, const char *app,
                         const struct limiter_reserve_item *items, size_t n, int64_t ttl_ms,
                         const char *request_id, int64_t deadline_us,
                         struct limiter_reserve_answer *out, struct permitd_error *err);

/* Commit with actual[0..n) (n the reservation's items, each >= 0), or
 * Cancel (actual NULL): see the top. Errors: not_found (no such
 * reservation, or past its expiry's grace), permission_denied (another
 * app's), invalid_argument (the actuals), unavailable. */
int limiter_reserve_close(struct limiter *l, const char *app, const char *id,
                          const int64_t *actual, size_t n, int64_t deadline_us,
                          struct limiter_reserve_settled *out, struct permitd_error *err);

/* An all_or_nothing AcquireBatch of n requests whose buckets span Redis
 * Cluster slots or algorithms (limiter_acquire_batch() answers those
 * failed_precondition): held group by group as a Reserve's items are (see
 * the top), the groups held given back when one is refused; the holds of
 * a granted batch are its takes. res[i] or errs[i] per item, as
 * limiter_acquire_batch() fills them (a refused batch: every item denied
 * with the longest wait). At most LIMITER_RESERVE_ITEMS_MAX items and no
 * request ids (failed_precondition saying so). Blocking. */
int limiter_reserve_batch_all(struct limiter *l, const struct limiter_request *reqs, size_t n,
                              int64_t deadline_us, struct limiter_result *res,
                              struct permitd_error *errs, struct permitd_error *err);

/* The expiry sweep: settles up to 100 reservations past their expiry
 * (the wall clock picks them, the record's Redis clock decides), adding
 * the number settled here to *settled. */
int limiter_reserve_sweep(struct limiter *l, int64_t deadline_us, int *settled,
                          struct permitd_error *err);

/* A policy's outstanding reservations, for the inspector and the policy
 * page: how many items, the permits they hold, and the age in ms of the
 * oldest (0 when none). */
int limiter_reserve_outstanding(struct limiter *l, const char *policy, int64_t deadline_us,
                                int64_t *count, int64_t *amount, int64_t *oldest_ms,
                                struct permitd_error *err);

/* /metrics: reservations made, committed, expired; permits refunded (by
 * commits, cancels and expiries) and charged into debt. */
void limiter_reserve_counters(struct limiter *l, uint64_t *reserved, uint64_t *committed,
                              uint64_t *expired, uint64_t *refunded, uint64_t *debt);

#endif
