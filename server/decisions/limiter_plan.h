/*
 * limiter_plan.h - how limiter_plan.c lays an AcquireBatch out as script
 * calls; for the limiter's files and their unit test only
 * (tests/unit/decisions/test_limiter.c).
 *
 * A plan is an AcquireBatch on its way: its items checked, sorted by
 * policy, and laid out as one script call per policy (all of them in one
 * for all_or_nothing). Making one asks nothing of Redis, so what a batch
 * will send (which items, grouped how, refused why) can be checked
 * without a server.
 */
#ifndef PERMITD_LIMITER_PLAN_H
#define PERMITD_LIMITER_PLAN_H

#include <stddef.h>

#include "decisions/limiter.h"
#include "decisions/policies.h"
#include "stores/policy.h"
#include "stores/redis.h"

struct load;
struct limiter_limits;

struct limiter_plan {
    /* Filled by the caller: */
    struct limiter *l;
    const struct limiter_request *reqs;
    size_t n;
    int all_or_nothing;
    struct limiter_result *res;     /* n of them, cleared by limiter_plan_make() */
    struct permitd_error *errs;     /* n: each item's own error, or PERMITD_OK */
    limiter_batch_done_fn done;     /* queued only */
    void *ud;
    int64_t deadline_us;            /* for what is asked on the way (a reload) */
    int retried;                    /* a second try after a "stale" answer */
    const struct load *loaded;      /* the loader read the missing policies (limiter_loader.c) */
    int peek;                       /* a Peek batch, permitd's own look (any app may look,
                                       nothing is taken, no failure_mode): on a single
                                       Redis one call per algorithm, not per policy */
    int per_slot;                   /* cluster: one call per policy and slot, never one
                                       over several slots (a blocking run, and the items
                                       of a call that met a redirect) */
    /* Filled by limiter_plan_make(): */
    size_t *order;                  /* the items to send's indices, grouped by policy, in
                                       request order */
    const struct policies_entry **entries;  /* per request index: its policy, held
                                               (those in order[0..valid)) */
    struct limiter_limits *lims;    /* per request index: the limits its call sends
                                       (an override's, issue 37) */
    size_t *klen;                   /* per request index: its bucket key's length */
    unsigned *slots;                /* per request index: its bucket key's cluster slot */
    int *groups;                    /* per request index: its call's group (the master
                                       of its slot, or CLUSTER_SLOTS + its slot) */
    size_t valid, ngroups;          /* valid items; script calls (calls[0..ngroups)) */
    struct redis_str *keys, *args;
    char (*knames)[POLICY_REDIS_KEY_MAX];   /* per request index: its bucket key */
    char (*permits)[24];
    char (*index)[8];               /* per item: its policy's number in its call */
    char (*npol)[8];                /* per call: how many policies it carries */
    char (*leases)[LIMITER_LEASE_ID_LEN + 1];   /* per item: a concurrency take's new lease */
    long long *out;
    struct redis_script_call *calls;
    const char **rids;              /* per request index: its request id, the plan's own copy
                                       (in rid_text): a call may be sent again after its
                                       caller was answered and freed its strings (NOSCRIPT,
                                       a redirect) */
    char *rid_text;
    void *block;                    /* every array above, in one allocation */
};

/* Checks every item (errs[i] says what is wrong with one: invalid, or
 * refused by its policy's in-memory copy, which is reloaded from Redis when
 * missing) and lays out the calls: one per policy, its items in request
 * order (in a cluster one per master, carrying its policies and slots,
 * unless per_slot; all in one call with all_or_nothing, whose items must then share a
 * Redis Cluster slot, and where one bad item aborts the others). PERMITD_OK with ngroups 0 when
 * nothing is left to ask Redis; else an error for the whole batch (over
 * LIMITER_BATCH_MAX items, policies in different slots, out of memory).
 * What it allocates is freed by limiter_plan_free(), even on error. */
int limiter_plan_make(struct limiter_plan *pl, struct permitd_error *err);

void limiter_plan_free(struct limiter_plan *pl);

#endif
