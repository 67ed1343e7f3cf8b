/*
 * limiter_internal.h - what the limiter's own files share: struct limiter,
 * the loader's and a queue's structs, and the functions one part of the
 * limiter calls in another. For server/decisions/limiter*.c and their unit
 * tests (tests/unit/decisions/test_limiter*.c) only: everything else uses
 * decisions/limiter.h.
 *
 * The limiter's parts: limiter.c (making one, counters), limiter_script.c
 * (validation, admission, the script call of a decision and its answer),
 * limiter_plan.c (AcquireBatch as calls), limiter_queue.c (a worker's
 * queued decisions), limiter_deny.c (the deny cache's glue),
 * limiter_loader.c (policies a queue lacks, read off its thread; the
 * names known absent), limiter_bucket.c (inspect, own, reset, settle)
 * and limiter_refund.c (permits given back: issue 38).
 */
#ifndef PERMITD_LIMITER_INTERNAL_H
#define PERMITD_LIMITER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"
#include "decisions/deny_cache.h"
#include "decisions/limiter.h"
#include "decisions/limiter_plan.h"
#include "decisions/locallease.h"
#include "decisions/overrides.h"
#include "decisions/policies.h"
#include "stores/policy.h"
#include "stores/redis.h"

/* lua/bucket.lua's "stale": no Connect code, never leaves the limiter. */
#define SCRIPT_STALE (-17)
/* The RECORD's flags (lua/bucket.lua's header). */
#define FLAG_REPLAYED 1
#define FLAG_NOOP 2
#define RW REDIS_RECORD_WORDS       /* an item's answer in out[]: its RECORD */

/* Policy numbers (1-based) as the script's arguments: np, and each item's
 * policy, which is 1 in every call of one policy. */
#define LIMITER_POLICY_INDEX "1"

/* What a decision does with its item (the `take` argument below, named
 * for what nearly every one does): ARGV[1] "peek", "take", "release",
 * "renew", "refund" (limiter_refund.c; all_or_nothing's "all" is a
 * batch's). */
enum { DO_PEEK = 0, DO_TAKE = 1, DO_RELEASE = 2, DO_RENEW = 3, DO_REFUND = 4,
       DO_LEASE = 5,        /* a local lease's take: a "take" of want + N + P with the
                               lease id as request id (decisions/locallease.h) */
       DO_RETURN = 6 };     /* a local lease's give-back (lua/lease_return.lua) */

/* The counters a decision served without Redis bumps (a grant from a local
 * lease, a deny-cache lookup): each worker's queue keeps its own, written
 * by that worker alone, so the hot path writes no cache line another
 * worker writes too (with every worker granting from one hot bucket, one
 * shared counter's line moved between the cores at every decision). Read
 * (summed) under the limiter's queues_lock: limiter_lease_counters(),
 * limiter_deny_cache_counters(). */
struct limiter_hot_counts {
    _Atomic uint64_t lease_grants, deny_hits, deny_misses;
};

/* One writer's count: a load and a store, no locked instruction. */
static inline void limiter_count(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

struct limiter {
    const struct config *cfg;
    struct redis *redis;
    _Atomic uint64_t open_passes;
    void (*missing_hook)(void *ud); /* set once at start-up */
    void *missing_ud;
    struct policies *policies;      /* the in-memory copy of the policies */
    struct overrides *overrides;    /* the in-memory copy of the overrides (issue 37) */
    /* Reads one policy's overrides from MySQL now, blocking (a "stale"
     * answer whose bucket carries a newer override count than this
     * instance's copy); set once at start-up, NULL without a store. */
    int (*overrides_reload)(void *ud, const char *policy, struct permitd_error *err);
    void *overrides_ud;
    _Atomic uint64_t stale_retries;
    _Atomic uint64_t splits;        /* calls over several slots sent again per slot
                                       (limiter_split_calls()) */
    struct loader *loader;          /* started on the first miss of a queue */
    int slot_calls;                 /* Redis Cluster: a call's keys share one slot */
    pthread_mutex_t loader_lock;    /* guards starting it */
    /* Names Redis just said hold no policy (the loader read them), each
     * answered not_found from here for LIMITER_ABSENT_LIFE_US without
     * asking again: direct-mapped by name_hash(), a newer name pushing an
     * older one out (see "the loader" below). */
    pthread_mutex_t absent_lock;
    struct absent *absent;
    char ttl_s[24];                 /* ARGV[3]: --request-id-ttl in ms */
    /* The workers' deny caches (decisions/deny_cache.h): entries per
     * worker (--deny-cache, 0 = off), the reset epoch every entry must
     * match (limiter_deny_cache_clear() raises it), and counters. */
    size_t deny_size;
    _Atomic uint64_t deny_epoch;
    _Atomic uint64_t deny_evictions;
    /* Local leases (decisions/locallease.h): the epoch every lease must
     * match (limiter_leases_end() raises it) and counters for /metrics. */
    _Atomic uint64_t lease_epoch;
    _Atomic uint64_t lease_takes, lease_refused, lease_returns, lease_returned, lease_late,
                     lease_ended_early;
    /* The queues (one a worker), for the counters each keeps of its own
     * (struct limiter_hot_counts), and what the freed ones had counted. */
    pthread_mutex_t queues_lock;
    struct limiter_queue *queues;
    struct limiter_hot_counts gone;
    _Atomic int64_t leases_held;
    /* Given back as the workers stopped (lease_stop() in limiter_queue.c;
     * limiter_stopped() logs them): give-backs Redis took, the permits
     * they brought back, give-backs that failed or were never sent. */
    _Atomic uint64_t stop_returns, stop_returned, stop_lost;
    /* Reservations (limiter_reserve.c): reservations made, committed,
     * expired; permits refunded and charged into debt. */
    _Atomic uint64_t rsv_reserved, rsv_committed, rsv_expired, rsv_refunded, rsv_debt;
};
/* See "the loader" below for these. */
#define LOADER_PENDING_MAX 1000     /* names waiting for the loader or being read */
#define LOADER_HASH 2048            /* the loader's hash chains (a power of 2) */
#define LIMITER_ABSENT_SLOTS 4096   /* names known absent (a power of 2) */
#define LIMITER_ABSENT_LIFE_US 2000000  /* how long one is answered not_found from memory */

struct absent {
    uint64_t hash;                  /* 0: an empty slot */
    int64_t until_us;
    char name[POLICY_NAME_MAX + 1];
};

/* One policy name for the loader to read: one however many requests of
 * however many queues wait for it. Its fields are the loader's (under its
 * lock) until state is PEND_DONE; rc and err are then fixed, and a queue
 * holding a waiter's count may read them without the lock. */
enum { PEND_WAIT, PEND_READING, PEND_DONE };
struct pend {
    struct pend *chain;             /* the loader's hash chain */
    struct pend *fifo, *fifo_prev;  /* the next and previous to read (PEND_WAIT) */
    uint64_t hash;
    int state;
    size_t waiters;                 /* parked jobs counting on it, over all queues */
    int64_t until_us;               /* the latest of their deadlines: past it, not read */
    const void *mark;               /* the AcquireBatch registering now
                                       (limiter_loader_park_batch()) */
    int rc;                         /* PEND_DONE: the reload's */
    struct permitd_error err;
    char name[POLICY_NAME_MAX + 1];
};

/* What a parked job waits for: the names it counts on (p[0..n), sorted by
 * name for an AcquireBatch), and how many missing names it could not be
 * given (over: LOADER_PENDING_MAX reached). limiter_plan_make() reads an
 * AcquireBatch's outcome from it (limiter_script_admit_loaded()). */
struct load {
    struct pend **p;
    size_t n, over;
};

struct loader {
    struct limiter *l;
    pthread_t thread;
    pthread_mutex_t lock;           /* guards what follows, and every pend's waiters */
    pthread_cond_t wake;
    struct pend *chains[LOADER_HASH];   /* every pend, by name_hash() */
    struct pend *head, *tail;       /* to read, in the order asked (PEND_WAIT) */
    size_t npend;                   /* pends held: LOADER_PENDING_MAX at most */
    struct limiter_queue *queues;   /* the queues to wake (loader_watch()) */
    _Atomic uint64_t reads;         /* names read so far: a queue looks when it moves */
    int stopping;
};

/* What a decision sends as its policy's limits (ARGV[4..7] of its policy
 * in the call, lua/bucket.lua) once overrides are looked at (issue 37,
 * limiter_script_limits()): the entry's own numbers, or an override's. The
 * version stamp the scripts compare is 2 * (the entry's stamp + the
 * policy's override change count) + 1 when an override matched the key
 * (in force, or expired: see limiter_script.c), so:
 *   - any change of a policy's overrides (even a delete) is newer for
 *     every key of it: no bucket goes back to an older override set;
 *   - the settle pass, which sends the policy's own limits (even), leaves
 *     the buckets of overridden keys (odd: newer) as they are;
 *   - an override's expiry changes no stamp: every instance reads the
 *     same clock, and the key keeps its odd stamp.
 * Lives in the caller's storage (a job's, a plan's, the stack); the p1 and
 * p2 it sends are its own strings or the entry's (own_p1, own_p2), which
 * the caller holds. */
#define LIMITER_RATES_MAX 160
struct limiter_limits {
    enum overrides_action action;   /* OVERRIDES_NONE: the policy's own limits */
    int matched;                    /* an override matched the key, in force or expired */
    int64_t ovid;                   /* the override in force (0: none; -1: the request's own
                                       limit, an Envoy descriptor's) */
    int64_t max_permits;
    int64_t expires_us;             /* the override in force's, 0: never */
    uint64_t stamp;
    int own_p1, own_p2;             /* p1_s / p2_s are sent, else the entry's */
    enum overrides_kind kind;
    char match[OVERRIDES_MATCH_SHOWN + 1];
    char stamp_s[24], max_s[24], p1_s[40], p2_s[LIMITER_RATES_MAX];
};

#define QUEUE_BATCH_MAX 256     /* jobs per batch */
#define QUEUE_SPARE_MAX 256     /* finished jobs kept for reuse */

/* One queued piece of work: an Acquire or a Peek (an item of a script
 * call; its strings live here, its RECORD in the batch's out), or an
 * AcquireBatch (plan: its calls, one per policy). */
struct job {
    struct job *next;
    int64_t deadline_us;
    size_t first;                   /* its (first) call in the batch out */
    struct limiter_plan *plan;              /* NULL: an Acquire or a Peek */
    int take;                       /* DO_TAKE (an Acquire), DO_PEEK, DO_RELEASE, DO_RENEW */
    struct limiter_request req;
    limiter_done_fn done;
    void *ud;
    const struct policies_entry *entry;    /* its policy (held), an Acquire's or a Peek's */
    struct limiter_limits lim;      /* what its call sends as the policy's limits */
    char name[POLICY_REDIS_KEY_MAX];        /* its bucket's key (batch_items()) */
    size_t name_len;
    unsigned slot;                  /* the key's cluster slot */
    int group;                      /* its call's: the master of slot, or (split,
                                       or no master known) CLUSTER_SLOTS + slot */
    int split;                      /* a call over several slots it went in met
                                       a redirect: it goes again in one per slot */
    struct limiter *l;              /* for by_call() */
    char permits[24];
    /* A call's policies are at most its items, LIMITER_BATCH_MAX: written
     * as an unsigned short, 5 digits at most. */
    char index[8];                  /* its policy's number in its call */
    char npol[8];                   /* the lead job of a call: its number of policies */
    char app[POLICY_NAME_MAX + 1];  /* req.app: what the call sends is the job's own
                                       (the pipe may send it again after the
                                       job was answered: NOSCRIPT) */
    char request_id[LIMITER_REQUEST_ID_MAX + 1];    /* req.request_id, likewise */
    char lease[LIMITER_LEASE_ID_LEN + 1];   /* what the call sends as the lease id */
    const long long *out;           /* an Acquire's or a Peek's answer */
    int64_t sent_us;                /* when its batch was written (the deny cache) */
    uint64_t epoch;                 /* the reset epoch when it was queued */
    int answered;                   /* its caller has its answer (the deadline
                                       passed while its batch was out) */
    struct load load;               /* parked: the names it waits for (an Acquire's
                                       or a Peek's: one, in one) */
    struct pend *one;
    /* DO_LEASE: the Acquire's own permits and the slot of its lease;
     * DO_RETURN: what goes back, and its call's own key, arguments and
     * answer (it is no item of a decision script). */
    int64_t want;
    struct locallease_slot *ls;
    struct locallease_return ret;
    struct redis_str rkey, rargs[6];
    char rnum[4][24];
    long long rout[2];
};

/* The batch out: every call of its jobs, contiguous, as the pipe wants
 * them; the keys, arguments and answers of its Acquires and Peeks, each
 * call's items side by side. */
struct batch {
    struct job *jobs[QUEUE_BATCH_MAX];
    size_t njobs;
    size_t items[QUEUE_BATCH_MAX];  /* the Acquires and Peeks, as indices of jobs */
    struct redis_str keys[QUEUE_BATCH_MAX];
    struct redis_str args[12 * QUEUE_BATCH_MAX];    /* per call 3 + 4, per item 5 */
    long long out[RW * QUEUE_BATCH_MAX];
    struct redis_script_call *calls;
    size_t ncalls, cap;
};

struct limiter_queue {
    struct limiter *l;
    struct loop *loop;
    struct redis_pipe *pipe;
    struct job *head, *tail;        /* waiting for the next batch */
    struct job *parked;             /* waiting for their policy (the loader) */
    struct job *parked_batches;     /* AcquireBatches waiting for their policies */
    struct limiter_queue *watching; /* the next queue the loader wakes (loader_watch()) */
    int watched;                    /* on the loader's list */
    uint64_t reads;                 /* the loader's reads when its parked jobs were looked at */
    struct batch batch;
    struct job *spare;              /* finished jobs, for the next ones */
    size_t nspare;
    size_t timed;                   /* jobs with a deadline of their own, not yet answered */
    struct deny_cache *deny;        /* this worker's (NULL: --deny-cache 0) */
    struct locallease *leases;      /* this worker's local leases (NULL: --local-leases off
                                       and no policy asks for them) */
    char lease_life_s[24];          /* a lease take's ARGV[3]: its key's life R in ms */
    int64_t lease_sweep_us;         /* when held leases are next looked over */
    int stopping;                   /* its loop is closing: give-backs are counted as
                                       the stop's (lease_stop()) */
    struct limiter_queue *next;     /* the limiter's list (queues_lock) */
    struct limiter_hot_counts counts;   /* this worker's */
};

/* One decision on its way through the limiter's parts, carried whole
 * instead of as eight parameters and three flags: what is asked and what
 * to do with it, by when, and where its answer goes. Lives on its caller's
 * stack (the queued paths allocate nothing); every pointer is the
 * caller's. */
struct limiter_decision {
    struct limiter *l;
    const struct limiter_request *req;
    int take;                       /* DO_PEEK, DO_TAKE, DO_RELEASE or DO_RENEW */
    int check;                      /* a client's request, not permitd's own look:
                                       validated, its app must be let in */
    int retried;                    /* asked again after a "stale" answer */
    int64_t deadline_us;
    struct limiter_result *res;
    struct permitd_error *err;
    struct limiter_limits *lim;     /* filled by the admission: the limits to send (NULL:
                                       a local copy is used) */
};

/* The functions of one part called from another, by the file that defines
 * them; each one's contract is above its definition. */

/* limiter_loader.c */
int limiter_loader_absent_has(struct limiter *l, const char *name);
void limiter_loader_absent_put(struct limiter *l, const char *name);
struct pend *limiter_loader_pend_get(struct loader *ld, const char *name);
void limiter_loader_pend_drop(struct loader *ld, struct pend *p);
const struct pend *limiter_loader_load_find(const struct load *x, const char *name);
void limiter_loader_free(struct loader *ld);
void limiter_loader_cancel(struct limiter_queue *q);
void limiter_loader_parked_end(struct limiter_queue *q, struct job *j, int rc,
                               const struct limiter_result *res, const struct permitd_error *err);
void limiter_loader_parked_batch_end(struct limiter_queue *q, struct job *j);
int limiter_loader_parked_for(const struct limiter_queue *q, const char *bucket);
void limiter_loader_park(struct limiter_queue *q, struct job *j);
void limiter_loader_queue_loaded(struct limiter_queue *q);
int limiter_loader_park_batch(struct limiter_queue *q, struct job *j, struct limiter_plan *pl);

/* limiter_script.c */
uint64_t limiter_script_split_calls(const struct redis_script_call *calls, size_t n);
int limiter_script_open_pass(struct limiter *l, const struct limiter_request *req,
                             struct limiter_result *res);
int limiter_script_validate(const struct limiter_request *req, int take, struct permitd_error *err);
enum redis_script limiter_script_of(const struct policies_entry *e);
int limiter_script_admit(const struct limiter_decision *d, const struct policies_entry **out);
int limiter_script_admit_loaded(const struct limiter_decision *d, const struct load *loaded,
                                const struct policies_entry **out);
int limiter_script_admit_entry(const struct limiter_decision *d, const struct policies_entry *e,
                               const struct policies_entry **out);
int limiter_script_call_refused(int rc, const char *bucket, struct permitd_error *err);
int limiter_script_restale(struct limiter *l, const char *bucket, long long stamp, int retried,
                           int64_t deadline_us, struct permitd_error *err);
int limiter_script_conclude(const struct limiter_decision *d, int rc, const long long *out);
struct redis_str limiter_script_mode_arg(int take);
void limiter_script_limits(const struct limiter *l, const struct policies_entry *e,
                           const struct limiter_request *req, int check,
                           struct limiter_limits *lim);
int limiter_limits_cmp(const struct limiter_limits *a, const struct limiter_limits *b);
void limiter_script_policy_args(const struct policies_entry *e, const struct limiter_limits *lim,
                                struct redis_str *args);
void limiter_script_call_head(const struct limiter *l, struct redis_str mode, const char *npol,
                              int wide, struct redis_str *args);
int limiter_script_item_wide(const struct limiter_request *req, int take,
                             enum policy_algorithm algo);
size_t limiter_script_bucket_key(const struct limiter *l, const struct limiter_request *req,
                                 const struct policies_entry *e, char *name);
int limiter_script_item_call(const struct limiter_request *req, int take,
                             enum policy_algorithm algo, int wide, char *name, size_t name_len,
                             char *permits_s, const char *index, char *lease,
                             struct redis_str *key, struct redis_str *args);
int limiter_script_decide(const struct limiter_decision *d);
int limiter_script_random_id(char *out);

/* limiter_queue.c */
struct job *limiter_queue_job_get(struct limiter_queue *q);
void limiter_queue_job_put(struct limiter_queue *q, struct job *j);
void limiter_queue_enqueue(struct limiter_queue *q, struct job *j);

/* limiter_deny.c */
int limiter_deny_cacheable(const struct limiter_queue *q, int take,
                           const struct policies_entry *e, const struct limiter_limits *lim);
int limiter_deny_answer(struct limiter_queue *q, const struct limiter_request *req,
                        const struct limiter_limits *lim, uint64_t epoch,
                        struct limiter_result *res);
void limiter_deny_remember(struct limiter_queue *q, const struct job *j,
                           const struct limiter_result *res);

/* limiter_plan.c */
int limiter_plan_call_group(struct limiter *l, unsigned slot, int per_slot);
void limiter_plan_answer(struct limiter_plan *pl, int rc, const struct redis_script_call *calls,
                         struct permitd_error *err);

#endif
