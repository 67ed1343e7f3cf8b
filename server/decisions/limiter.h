/*
 * limiter.h - Acquire and Peek decisions.
 *
 * Validates a request the same way for every transport, builds the Redis
 * keys of its bucket and asks lua/bucket.lua, in one script call, for the
 * decision. A denial is a result (allowed = 0), not an error; errors are
 * the request's fault (invalid_argument, not_found, permission_denied,
 * out_of_range, failed_precondition) or Redis's (unavailable,
 * deadline_exceeded).
 */
#ifndef PERMITD_LIMITER_H
#define PERMITD_LIMITER_H

#include <stdint.h>

#include "core/config.h"
#include "stores/redis.h"
#include "core/status.h"

struct limiter;
struct limiter_queue;
struct loop;

struct limiter_request {
    const char *bucket;     /* policy name */
    const char *app;        /* calling application */
    const char *key;        /* partition within the policy; "" = shared bucket */
    int64_t permits;        /* 0 means 1; negative is invalid */
    const char *request_id; /* NULL or "": none; else a retry of a take with the same
                               id answers what the first answered (issue 20) */
    const char *lease_id;   /* Release and Renew: the lease (NULL: none) */
    const struct limiter_own_limit *own;    /* NULL: none; else the request's own limit
                                               (below), lasting as its strings do */
};

/* A request's own limit (issue 37): an Envoy descriptor's `limit` or
 * `unlimited`, honoured only when the descriptor's mapping allows it
 * (stores/envoymap.h). It stands in for the policy's limits as an override
 * would, below any override stored for the key (an admin's block or limit
 * wins over what the caller sends). */
struct limiter_own_limit {
    int unlimited;          /* allowed, still counted (as an exempt override) */
    int64_t max_permits;    /* requests_per_unit (>= 1) */
    int64_t unit_ms;        /* the unit, in ms (>= 1) */
};

#define LIMITER_REQUEST_ID_MAX 128
#define LIMITER_LEASE_ID_LEN 32     /* hex characters of a lease id */

/* What a decision answers, the same fields for every algorithm, each in
 * its own sense (lua/bucket.lua's header: the RECORD). */
struct limiter_result {
    int allowed;            /* Release: released; Renew: renewed */
    int64_t remaining;      /* whole permits left */
    int64_t limit;          /* max_permits */
    int64_t retry_after_ms; /* 0 when allowed */
    int64_t reset_after_ms; /* until nothing of the past limits a request any more */
    int64_t window_s;       /* the RateLimit-Policy w: seconds to fill, the window, the
                               lease ttl */
    int64_t tokens_micro;   /* the level for the admin gauge, in millionths of a permit */
    int64_t lease_expires_ms;   /* concurrency: an allowed take or renew, until its lease
                                   expires; else 0 */
    int replayed;           /* the answer of an earlier take with the same request_id */
    int noop;               /* Release, Renew: the lease was not held; nothing changed */
    int shadow;             /* an Acquire: its policy is in shadow mode and would have
                               denied it; allowed is 1 all the same, the other fields are
                               the denial's (nothing taken). A Peek: the policy is in
                               shadow mode */
    char lease_id[LIMITER_LEASE_ID_LEN + 1];    /* an allowed concurrency take's; else "" */
    int open_pass;          /* Acquire: let through by failure_mode open, Redis not deciding */
    int blocked;            /* Acquire, Peek: an override blocks the key (issue 37): denied
                               without asking Redis; reason says which */
    int exempt;             /* an override exempts the key: allowed whatever the bucket
                               holds (the take still counted), the other fields are the
                               bucket's */
    char reason[160];       /* blocked: why ("blocked by override prefix \"premium_\" of
                               policy \"api\""); else "" */
};

/* Returns a new limiter in *out, free with limiter_free(). cfg and redis
 * must outlive it. */
int limiter_new(const struct config *cfg, struct redis *redis, struct limiter **out,
                struct permitd_error *err);
void limiter_free(struct limiter *l);

/* Checks a request as an Acquire or a Peek would be, without asking Redis. */
int limiter_check(const struct limiter_request *req, struct permitd_error *err);

/* Called once when a queued Acquire or Peek is decided, on the queuing
 * thread. On PERMITD_OK, res holds the decision; otherwise err says why,
 * and for out_of_range, permission_denied and failed_precondition
 * res->limit is set. res and err are valid during the call. */
typedef void (*limiter_done_fn)(void *ud, int rc, const struct limiter_result *res,
                                const struct permitd_error *err);

/* Returns in *out a new queue for the decisions of one event loop (one
 * HTTP worker): attached to loop as a source, with a Redis connection of
 * its own (nothing is shared between queues). Free with
 * limiter_queue_free() once the loop has closed (loop_close(): what is
 * left is answered then) or never turned. l must outlive it. An error
 * says why (out of memory, the loop full). */
int limiter_queue_new(struct limiter *l, struct loop *loop, struct limiter_queue **out,
                      struct permitd_error *err);
void limiter_queue_free(struct limiter_queue *q);

/* Acquire: takes req->permits from the bucket if they are all there, else
 * nothing. Calls queued on one queue go to Redis together, pipelined in one
 * write on the queue's connection, driven by its loop; call from that
 * loop's thread. req must have passed limiter_check(); its strings must
 * stay valid until done has run (the caller owns them; the app is copied,
 * as what Redis may be sent again after done has run). done runs exactly
 * once, on the loop's thread: later, from the loop (or at once, deciding
 * in place, when out of memory). */
void limiter_acquire_queued(struct limiter_queue *q, const struct limiter_request *req,
                            int64_t deadline_us, limiter_done_fn done, void *ud);

/* Peek, queued like limiter_acquire_queued(): the bucket as it stands;
 * takes nothing. req->permits is ignored; res->allowed is always 1. */
void limiter_peek_queued(struct limiter_queue *q, const struct limiter_request *req,
                         int64_t deadline_us, limiter_done_fn done, void *ud);

/* Release and Renew of a concurrency policy's lease req->lease_id, queued
 * like limiter_acquire_queued(). res->allowed says whether it was done;
 * res->noop that the lease was not held (released already, expired, or
 * never was): an answer, not an error. A policy of another algorithm
 * answers failed_precondition naming it. Check req with
 * limiter_check_lease() first. */
void limiter_release_queued(struct limiter_queue *q, const struct limiter_request *req,
                            int64_t deadline_us, limiter_done_fn done, void *ud);
void limiter_renew_queued(struct limiter_queue *q, const struct limiter_request *req,
                          int64_t deadline_us, limiter_done_fn done, void *ud);

/* Checks a Release or Renew as limiter_check() does an Acquire, and its
 * lease_id: 32 lowercase hex characters. */
int limiter_check_lease(const struct limiter_request *req, struct permitd_error *err);

/* fn is called (from a request thread) when the in-memory table holds a
 * MySQL policy whose hash Redis lost (decisions/policies.h: `missing`): the
 * sync must put it back now. Set once at start-up. While it is missing,
 * the policy's requests follow its failure_mode, as when Redis is down.
 * (failure_mode, like the limits, is read from the policy's entry in that
 * table: MySQL's policies and those kept by hand alike.) */
void limiter_set_missing_hook(struct limiter *l, void (*fn)(void *ud), void *ud);

/* Drops a deleted policy from the in-memory table, so it answers
 * not_found at once. */
void limiter_forget(struct limiter *l, const char *name);

/* Whether the in-memory table holds a policy of that name: a real policy,
 * for counting a request's error under it. */
int limiter_known_policy(struct limiter *l, const char *name);

struct policies;
struct overrides;

/* The limiter's in-memory copy of the overrides (decisions/overrides.h),
 * for the override sync that feeds it (control/overridesync.c); it lives as
 * long as l. */
struct overrides *limiter_overrides(struct limiter *l);

/* fn reads one policy's overrides from MySQL into that table now
 * (blocking): called when the script answers "stale" for a bucket written
 * under a newer override count than this instance's copy holds. Set once
 * at start-up. */
void limiter_set_overrides_reload(struct limiter *l,
                                  int (*fn)(void *ud, const char *policy,
                                            struct permitd_error *err),
                                  void *ud);

/* Whether each script call's keys share one Redis Cluster slot (set for a
 * redis+cluster:// URL; a single Redis takes one policy's buckets in one
 * call, whatever their slots). The setter is for tests and for main. */
int limiter_slot_calls(const struct limiter *l);
void limiter_set_slot_calls(struct limiter *l, int on);

/* The limiter's in-memory copy of the policies (decisions/policies.h), for
 * those who feed it: the sync, the admin writes, the change notices. It
 * lives as long as l. */
struct policies *limiter_policies(struct limiter *l);

/* How many decisions the script answered "stale" (a bucket written under a
 * newer version of its policy than this instance's copy), each asked once
 * more after a reload. For /metrics. */
uint64_t limiter_stale_retries(struct limiter *l);

/* How many script calls over several Redis Cluster slots met a redirect
 * (a slot moving) and had their items sent again, one call per slot. For
 * /metrics. */
uint64_t limiter_split_calls(struct limiter *l);

/* How many Acquires failure_mode "open" let through so far. */
uint64_t limiter_open_passes(struct limiter *l);

/* Makes every worker's deny cache (--deny-cache, decisions/deny_cache.h)
 * forget what it holds, at once and without a lock: a bucket was reset
 * (limiter_reset() here; a "<name> reset" change notice from another
 * instance), or notices may have been lost (the listener subscribed
 * again). Any thread. */
void limiter_deny_cache_clear(struct limiter *l);

/* Ends every local lease (decisions/locallease.h) of every worker at
 * once, without a lock: nothing more is granted from any lease taken
 * before, and each is given back at its worker's next look (within
 * 20 ms). limiter_deny_cache_clear() does it too (a reset: those leases
 * are not given back). THE HOOK for an override change (wip/overrides):
 * an override switched on, off or edited ends the leases, as a policy
 * edit ends its own (their version stamp). Any thread. */
void limiter_leases_end(struct limiter *l);

/* The local leases' counters, for /metrics. */
struct limiter_lease_counters {
    uint64_t grants;        /* Acquires granted from a lease, without Redis */
    uint64_t takes;         /* leases taken */
    uint64_t refused;       /* lease takes Redis refused (the Acquire went as itself) */
    uint64_t returns;       /* give-backs sent and answered */
    uint64_t returned;      /* whole permits they gave back */
    uint64_t late;          /* unused permits a give-back brought after its lease's key
                               had expired: refused, spent */
    uint64_t ended_early;   /* leases ended by an edit, reset or override change */
    int64_t held;           /* leases held now, over every worker */
};
void limiter_lease_counters(struct limiter *l, struct limiter_lease_counters *c);

/* After every worker's queue has stopped (the listeners drained and their
 * loops closed: each gave its local leases back, limiter_queue.c's
 * lease_stop()): logs once, at info, how many leases went back and with
 * how many permits, and how many could not (Redis down or past the
 * timeout: spent, as a crash's). Nothing when no lease was held. */
void limiter_stopped(struct limiter *l);

/* The deny caches' counters, for /metrics: Acquires answered from a cache
 * (hits), Acquires a cache could have answered but did not hold (misses:
 * they went to Redis), entries still in force pushed out by newer ones
 * (evictions). */
void limiter_deny_cache_counters(struct limiter *l, uint64_t *hits, uint64_t *misses,
                                 uint64_t *evictions);

#define LIMITER_BATCH_MAX 1000

/* Decides n Acquires (n <= LIMITER_BATCH_MAX) in one Redis round trip.
 * Each item gets its own answer: res[i] when errs[i].code is PERMITD_OK,
 * else errs[i] says why, exactly as a single Acquire would have. Items of
 * one policy go to Redis in one script call, so they see each other's takes
 * in order. With all_or_nothing, either every item is granted or nothing is
 * taken (one atomic script call); the items must then share one Redis
 * Cluster slot (one policy), else the call fails with PERMITD_EPRECONDITION.
 * The return value is an error of the whole call (Redis unreachable, ...). */
int limiter_acquire_batch(struct limiter *l, const struct limiter_request *reqs, size_t n,
                          int all_or_nothing, int64_t deadline_us,
                          struct limiter_result *res, struct permitd_error *errs,
                          struct permitd_error *err);

/* Called once when a queued AcquireBatch is decided, on the queuing thread:
 * rc and err as limiter_acquire_batch() returns them; res and errs filled. */
typedef void (*limiter_batch_done_fn)(void *ud, int rc, const struct permitd_error *err);

/* limiter_acquire_batch(), queued like limiter_acquire_queued(): its calls
 * travel with the Acquires of the same pass. reqs (and their strings), res
 * and errs must stay valid until done has run; what a call sends (request
 * ids included) is the limiter's own copy, as Redis may be sent it again
 * after done has run (NOSCRIPT, a redirect). A policy name the in-memory
 * table lacks is looked up off the loop (at most 1,000 names at once over
 * the process: an item past that answers resource_exhausted; one Redis
 * said a moment ago holds no policy answers not_found from memory). */
void limiter_acquire_batch_queued(struct limiter_queue *q, const struct limiter_request *reqs,
                                  size_t n, int all_or_nothing, int64_t deadline_us,
                                  struct limiter_result *res, struct permitd_error *errs,
                                  limiter_batch_done_fn done, void *ud);

#define LIMITER_INSPECT_LIST_MAX 100     /* log entries or leases an inspection lists */

/* A lease as the inspector shows it: never its whole id, which is a
 * capability (whoever holds it may release the lease). */
struct limiter_lease_view {
    char id_prefix[9];          /* the lease id's first 8 hex characters */
    int64_t permits;
    int64_t expires_after_ms;   /* until it expires unless renewed or released */
};

/* What the inspector shows of a bucket beside a decision's fields, in its
 * algorithm's terms (read by the script, on the Redis clock); what does
 * not fit the algorithm is 0. */
struct limiter_inspection {
    const char *algorithm;              /* policy_algorithm_name(): static */
    int64_t window_reset_after_ms;      /* fixed and sliding window: until the current
                                           window ends */
    int64_t events;                     /* sliding log: the entries in the window */
    size_t n_ages;                      /* sliding log: the newest entries' ages, newest */
    int64_t event_ages_ms[LIMITER_INSPECT_LIST_MAX];    /* first */
    size_t n_leases;                    /* concurrency: the leases held, soonest */
    struct limiter_lease_view leases[LIMITER_INSPECT_LIST_MAX];  /* expiry first */
};

/* Like limiter_peek, for permitd's own use (the admin bucket inspector):
 * any app may look. key "" is the shared bucket. more (NULL: not wanted)
 * receives the algorithm's own view of the bucket (each decision script's
 * mode "inspect"); a token bucket has none beyond res. */
int limiter_inspect(struct limiter *l, const char *bucket, const char *key,
                    int64_t deadline_us, struct limiter_result *res,
                    struct limiter_inspection *more, struct permitd_error *err);

/* limiter_inspect() of the shared buckets of n policies (n <=
 * LIMITER_BATCH_MAX; the admin policy list's gauges), in one pipelined
 * Redis round trip: on a single Redis one script call per algorithm among
 * them, not one per policy (in a cluster one per slot). res[i] when
 * errs[i].code is PERMITD_OK, else errs[i] says why (a disabled policy:
 * failed_precondition; res[i].limit is set when the policy is known). The
 * return value is an error of the whole call (Redis unreachable, ...). */
int limiter_inspect_batch(struct limiter *l, const char *const *names, size_t n,
                          int64_t deadline_us, struct limiter_result *res,
                          struct permitd_error *errs, struct permitd_error *err);

/* An Acquire of one permit (take 1) or a Peek (take 0) on a policy of
 * permitd's own (the admin login throttle, "_login": a name no request can
 * give, so it is not checked): any app may take, no failure_mode applies.
 * key "" is the shared bucket. */
int limiter_own(struct limiter *l, const char *bucket, const char *key, int take,
                int64_t deadline_us, struct limiter_result *res, struct permitd_error *err);

/* Deletes a bucket's state, whatever the policy's algorithm: it is as if
 * nothing had been taken (a token bucket full, a window's count 0, a log
 * empty, every lease freed: its holder's Release becomes a no-op). Then
 * clears the deny caches here and PUBLISHes "<name> reset" on
 * <prefix>changes, on which every other instance clears its own; an error
 * of that PUBLISH says the state was deleted all the same. */
int limiter_reset(struct limiter *l, const char *bucket, const char *key,
                  int64_t deadline_us, struct permitd_error *err);

/* Gives `permits` (>= 1) back to the bucket of policy `bucket`, key `key`
 * ("" the shared bucket), on this thread's connection, blocking (issue
 * 38: the unused permits of a local lease, a reservation's estimate above
 * its cost). No app is checked: permitd gives back what it took itself.
 * What "back" means per algorithm (lua/lib/refund_<algorithm>.lua,
 * docs/algorithms.md):
 *   token_bucket    the bucket refilled to now at the rate in force, then
 *                   topped up, never above max_permits (nothing earned is
 *                   re-priced); taken_at_us is not needed (0)
 *   fixed_window    off the current window's count, only when the take
 *                   was in the current window
 *   sliding_window  off the count of the window the take was counted in
 *                   (current or previous; older counts nothing)
 *   sliding_log     the newest entries scored at or before the take still
 *                   in the window
 * taken_at_us is the Redis time in us of the take whose permits come back
 * (a reservation keeps it); 0 = unknown, for which the window algorithms
 * give nothing back (giving a past window's permits to this one could
 * over-admit). Never below empty, never above max: the max the caller's
 * limits hold (app: the app the permits were taken for, NULL for none;
 * an override of its key or app counts, issue 37). concurrency answers
 * failed_precondition (Release gives a lease back). On PERMITD_OK,
 * *refunded holds the whole permits given back, res->allowed whether any
 * were, res->noop that none were, remaining and the rest the bucket after;
 * errors as limiter_inspect()'s (not_found, a disabled policy, Redis). */
int limiter_refund(struct limiter *l, const char *bucket, const char *app, const char *key,
                   int64_t permits, int64_t taken_at_us, int64_t deadline_us,
                   struct limiter_result *res, int64_t *refunded, struct permitd_error *err);

/* Charges `permits` (>= 1) to the bucket whether it holds them or not
 * (issue 38: a reservation's commit above its estimate), down to the
 * policy's debt floor below empty (policies_entry.debt_floor; 0: to
 * empty), blocking as limiter_refund(). A token bucket in debt refills
 * from below zero at its rate, so later takes wait the debt out
 * (retry_after_ms, exactly); a fixed window's count goes past
 * max_permits until the window ends; a sliding window's current counter
 * and a sliding log's entries likewise, until they age out. *charged
 * holds what was charged (less than permits when the floor cut it). */
int limiter_charge(struct limiter *l, const char *bucket, const char *app, const char *key,
                   int64_t permits, int64_t deadline_us, struct limiter_result *res,
                   int64_t *charged, struct permitd_error *err);

struct policies_entry;

/* The settle pass's door to bucket.lua "settle" (server/control/settle.c
 * finds the buckets; this builds the script's arguments, as for every
 * other call of it): sets each bucket of keys[0..n) (state keys of policy
 * e, from its bucket index or one SCAN step of one master) to expire when
 * it would be full under e's limits, rewriting one stamped before e's
 * newest rate edit as of now (lua/bucket.lua, "settle"), and takes each
 * key that holds no bucket (any more) out of its index. In a cluster one
 * call per slot, at most LIMITER_SETTLE_CALL_KEYS keys a call; every call
 * of the page in one pipelined round trip (per master). Adds the buckets
 * set, the keys removed (full already) and the index members removed to
 * *set, *removed and *gone. keys may be reordered; nothing is kept.
 * PERMITD_OK, or the error of the round trip or of the first call Redis
 * refused. */
#define LIMITER_SETTLE_CALL_KEYS 500
int limiter_settle(struct limiter *l, const struct policies_entry *e, struct redis_str *keys,
                   size_t n, int64_t deadline_us, long long *set, long long *removed,
                   long long *gone, struct permitd_error *err);

/* bucket.lua "index" over keys[0..n) (token-bucket state keys of any
 * policies): each that exists is added to its policy's bucket index, each
 * that does not is taken out of it (the index pass: an older permitd's
 * buckets indexed once, dead members pruned). Calls, round trips and the
 * rest as limiter_settle(); adds to *added and *removed. */
int limiter_index(struct limiter *l, struct redis_str *keys, size_t n, int64_t deadline_us,
                  long long *added, long long *removed, struct permitd_error *err);

/* bucket.lua "sweep" of one group list of the bucket index (P{T}il:NAME),
 * from its blob `first` on, a call's share (the prune): the entries whose
 * bucket is gone leave it. `alone`: the sweeps of this list before `first`
 * kept nothing (the script then takes out a list whose blobs are all
 * empty). Sets *next to the blob the next call starts at, 0 once the list
 * is done. A hash of before the lists (P{T}ig:NAME[:<i>]) is swept whole
 * in one call: its live entries move into the lists. Adds to *kept and
 * *removed. */
int limiter_sweep(struct limiter *l, const struct redis_str *list, long long first, int alone,
                  int64_t deadline_us, long long *kept, long long *removed, long long *next,
                  struct permitd_error *err);

#endif
