/*
 * locallease.h - one worker's local leases of hot buckets (issue 41).
 *
 * A hot bucket's every decision is a script call, so one bucket can go no
 * faster than one Redis thread runs the script. A worker that sees a
 * bucket hot takes a LEASE of its permits in one call of the bucket's own
 * decision script (an ordinary take, of want + N + P permits, with a
 * request id of permitd's own: the lease id), then grants the next
 * Acquires of that bucket from the N it holds, with no Redis call, until
 * they run out or the lease's time is over (--local-lease-ms); then it
 * gives back what it did not grant (lua/lease_return.lua). A local grant
 * is only ever of permits already taken from the bucket in Redis.
 *
 * Why P, and why a give-back must be early. While permits sit in a lease,
 * the bucket in Redis refills as if they were spent: without more, a
 * bucket full again plus a lease's permits would admit max + N at once.
 * So a token bucket's lease also takes P = rate x R permits, R being the
 * life of its key in Redis (the take's request-id record, R = lease time +
 * LOCALLEASE_SLACK_MS): while the lease is out, P pays the refill the
 * bucket earns. The give-back returns the unused permits and the part of
 * P the lease's remaining life did not use (rate x its key's PTTL), and is
 * refused once the key has expired. Then level + every lease's unused
 * permits + their unused P never grows but by the refill (and by nothing
 * while a lease is out), never passes max_permits, and every admission
 * lowers it: admitted <= max_permits + rate x T over any T, across any
 * number of instances and leases (docs/algorithms.md, "Local leases").
 * The price: while k leases of one bucket are out at once, it earns
 * (k - 1) x rate less (each lease's P decays at the rate); the unused
 * permits a lease holds are refused elsewhere until they come back. A
 * fixed window's lease takes no P: it ends with its window.
 *
 * Ends early: a policy edit (its version stamp differs from the lease's),
 * a reset or an override change (the limiter's lease epoch moved:
 * limiter_leases_end()). Nothing is granted from such a lease; an edited
 * policy's lease gives back, a reset's does not (the reset gave everything
 * back already). A lease whose worker dies is not given back: its permits
 * (N + P) are spent, as if granted. One whose worker stops (permitd's
 * SIGTERM) is: limiter_queue.c's lease_stop() ends every lease held.
 *
 * Not thread-safe: one table per worker (limiter_queue.c owns it), used
 * from its loop's thread only; no lock, no atomics on the hot path.
 */
#ifndef PERMITD_LOCALLEASE_H
#define PERMITD_LOCALLEASE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "stores/policy.h"

struct limiter_result;

#define LOCALLEASE_SLOTS 512        /* buckets a worker tracks (a power of 2) */
#define LOCALLEASE_PROBE 8          /* slots looked at for one bucket */
#define LOCALLEASE_SLACK_MS 50      /* a lease's key outlives its local time by this */
#define LOCALLEASE_ID_LEN 33        /* 0x01 then 32 hex characters */
#define LOCALLEASE_PERMITS_MIN 8    /* a lease sized by traffic takes at least this */

enum locallease_state {
    LOCALLEASE_EMPTY = 0,           /* no bucket */
    LOCALLEASE_COUNTING,            /* traffic counted, no lease */
    LOCALLEASE_TAKING,              /* a lease's take is out */
    LOCALLEASE_HELD                 /* a lease grants */
};

/* One bucket's: what was counted, and its lease. */
struct locallease_slot {
    enum locallease_state state;
    uint64_t hash;                  /* of policy and bkey */
    char policy[POLICY_NAME_MAX + 1];
    char bkey[POLICY_KEY_MAX + 1];  /* the request's key ("": the shared bucket) */
    char key[POLICY_REDIS_KEY_MAX]; /* the bucket's Redis key (set with its lease) */
    size_t key_len;
    int64_t window_us;              /* the counting window's start */
    uint32_t count, last;           /* Acquires in this window, in the last one */
    int64_t scarce_until_us;        /* a lease was refused: none before then */
    /* the lease (HELD; TAKING: what it asked) */
    char id[LOCALLEASE_ID_LEN + 1];
    uint64_t stamp, epoch;          /* its policy's version stamp, the lease epoch */
    int fixed_window;               /* else a token bucket */
    int64_t max;                    /* max_permits when taken */
    int64_t n, p;                   /* permits to grant; the refill's part (token bucket) */
    int64_t left;                   /* of n, not granted yet */
    int64_t until_us;               /* grants end (monotonic) */
    int64_t remaining, reset_after_ms, window_s;    /* what Redis answered the take */
};

/* What to give back for a lease that ended: a copy, as the slot is reused. */
struct locallease_return {
    char key[POLICY_REDIS_KEY_MAX];
    size_t key_len;
    char id[LOCALLEASE_ID_LEN + 1];
    int fixed_window;
    int64_t max, permits, p;
};

struct locallease_conf {
    int mode;                       /* CONFIG_LOCAL_LEASES_OFF, _ON, _AUTO (core/config.h) */
    int64_t lease_ms;
    int64_t permits;                /* 0: sized by traffic */
    int64_t auto_rate;              /* Acquires a second that make a bucket hot (auto) */
};

struct locallease;

/* Returns a new table in *out (LOCALLEASE_SLOTS slots, allocated once);
 * free with locallease_free() (NULL: no-op). */
int locallease_new(const struct locallease_conf *conf, struct locallease **out,
                   struct permitd_error *err);
void locallease_free(struct locallease *t);

/* The slot of the bucket of policy `policy` and key `key` ("": the
 * shared bucket), found or claimed, its traffic counted (one Acquire at
 * now_us, monotonic); NULL when every slot it may use holds another
 * bucket (it is then decided in Redis, as without leases). Valid until
 * the next call that claims a slot. No Redis key is built here: the hot
 * path of a bucket that is not leased pays a hash and a compare. */
struct locallease_slot *locallease_find(struct locallease *t, const char *policy,
                                        const char *key, int64_t now_us);

/* Grants `want` permits from the slot's lease if it is HELD, in force at
 * now_us under stamp and epoch, and holds them: 1 with res filled (an
 * allowed answer; remaining: what Redis said at the take, plus what the
 * lease still holds), else 0. A lease that is out of time, stamp or
 * epoch, or cannot serve want, is ended (locallease_end()) first, its
 * give-back in *ret when ret->permits > 0 (the caller sends it). */
int locallease_grant(struct locallease *t, struct locallease_slot *s, uint64_t stamp,
                     uint64_t epoch, int64_t want, int64_t now_us, struct limiter_result *res,
                     struct locallease_return *ret);

/* Whether to take a lease for this Acquire of `want` now (mode: the
 * policy's, CONFIG_LOCAL_LEASES_*): 1 with *extra (N + P, what the take asks
 * beyond want) and the slot TAKING, else 0. rate: permits a second (0 for
 * a fixed window), max its max_permits, permits the policy's own lease
 * size (0: the table's, --local-lease-permits). */
int locallease_begin(struct locallease *t, struct locallease_slot *s, int mode, int fixed_window,
                     int64_t max, double rate, int64_t permits, int64_t want, uint64_t stamp,
                     uint64_t epoch, int64_t now_us, int64_t *extra);

/* The bucket's Redis key (len bytes), for the give-back: set once
 * locallease_begin() said yes. */
void locallease_set_key(struct locallease_slot *s, const char *key, size_t len);

/* The lease's take was answered. granted: the take was allowed (res: its
 * answer, for want + N + P): the lease is HELD from sent_us (when the take
 * was sent) and res is turned into the Acquire's own answer. Else the
 * bucket is left to Redis for a lease's time (scarce). */
void locallease_taken(struct locallease *t, struct locallease_slot *s, int granted,
                      int64_t sent_us, struct limiter_result *res);

/* Ends the slot's lease: its give-back into *ret (ret->permits 0: none).
 * give: whether the unused permits go back (not after a reset). */
void locallease_end(struct locallease *t, struct locallease_slot *s, int give,
                    struct locallease_return *ret);

/* The slot of the next lease to end at now_us (out of time; or, check set,
 * whose stamp_of(policy) or epoch is not its own), starting at *cursor;
 * NULL when none is left. */
struct locallease_slot *locallease_due(struct locallease *t, size_t *cursor, int64_t now_us,
                                       uint64_t epoch, uint64_t (*stamp_of)(void *ud,
                                                                            const char *policy),
                                       void *ud);

/* How many leases are held; when the next one ends (INT64_MAX: none). */
size_t locallease_held(const struct locallease *t);
int64_t locallease_next_end(const struct locallease *t);

/* The lease's key life R in ms, as the take's ARGV[3] sends it. */
int64_t locallease_life_ms(const struct locallease *t);

#endif
