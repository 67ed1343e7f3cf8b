/*
 * limiter_plan.c - an AcquireBatch laid out as script calls (limiter_plan.h),
 * sent (directly, or on a worker's queue) and answered.
 */
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

/* An all_or_nothing AcquireBatch's script mode: every item of every call,
 * or none. */
static const struct redis_str MODE_ALL = {"all", 3};

/* ---- AcquireBatch ----
 *
 * A plan (limiter_plan.h) is an AcquireBatch on its way: its items checked,
 * sorted by policy, and laid out as one script call per policy (all of them
 * in one for all_or_nothing). limiter_acquire_batch() sends it and waits;
 * limiter_acquire_batch_queued() hands it to the worker's queue, where it
 * travels with the Acquires of the same pass. */

/* The group of an item's call in a cluster: the master of its slot, so
 * that a pass sends each master one call; CLUSTER_SLOTS + slot (a call of
 * that slot alone) when per_slot, when no master is known for it, or with
 * no Redis handle (the unit tests). */
int limiter_plan_call_group(struct limiter *l, unsigned slot, int per_slot)
{
    int master = per_slot || l->redis == NULL ? -1 : redis_slot_master(l->redis, slot);

    return master >= 0 ? master : CLUSTER_SLOTS + (int)slot;
}

/* Sorting item indices by policy name groups one policy's items together
 * (and, in a cluster, its items of one slot: a call's keys share one);
 * ties keep request order, so a policy's items reach Redis in order. */
static int by_bucket(const void *a, const void *b, void *pl_)
{
    const struct limiter_plan *pl = pl_;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = 0;

    if (pl->l->slot_calls && !pl->all_or_nothing)
        c = pl->groups[i] - pl->groups[j];
    if (c == 0)     /* one script per call: a call's policies share an algorithm */
        c = (int)pl->entries[i]->algorithm - (int)pl->entries[j]->algorithm;
    if (c == 0)
        c = strcmp(pl->reqs[i].bucket, pl->reqs[j].bucket);
    if (c == 0)     /* a policy's items under one override's limits side by side */
        c = limiter_limits_cmp(&pl->lims[i], &pl->lims[j]);
    if (c == 0 && pl->l->slot_calls && !pl->all_or_nothing)
        c = (int)pl->slots[i] - (int)pl->slots[j];
    return c != 0 ? c : (i < j ? -1 : (i > j));
}

void limiter_plan_free(struct limiter_plan *pl)
{
    for (size_t k = 0; pl->entries != NULL && k < pl->valid; k++)
        policies_release(pl->entries[pl->order[k]]);
    free(pl->block);
    pl->block = NULL;
    pl->entries = NULL;
}

/* Carves the next array of n elements of size each off a block being laid
 * out: *at is the offset so far, rounded up for any object; the array's
 * offset is returned and *at moves past it. With base NULL only the size
 * is reckoned (the first pass, for the one malloc). */
static void *carve(unsigned char *base, size_t *at, size_t n, size_t size)
{
    size_t align = alignof(max_align_t), off = (*at + align - 1) & ~(align - 1);

    *at = off + n * size;
    return base == NULL ? NULL : base + off;
}

/* The plan's arrays for n requests, in one block (pl->block): one
 * allocation a batch where there were fourteen. entries and leases start
 * zeroed, the rest is written before it is read. 0, or -1 out of memory. */
static int plan_arrays(struct limiter_plan *pl, size_t n)
{
    unsigned char *base = NULL;
    size_t text = 0;

    /* room for every request id, each cut to one byte over the most
     * limiter_script_validate() takes (a longer one is refused, never sent) */
    for (size_t i = 0; i < n; i++)
        if (pl->reqs[i].request_id != NULL)
            text += strnlen(pl->reqs[i].request_id, LIMITER_REQUEST_ID_MAX + 1) + 1;
    for (int pass = 0; pass < 2; pass++) {
        size_t at = 0;

        pl->order = carve(base, &at, n, sizeof(*pl->order));
        pl->entries = carve(base, &at, n, sizeof(*pl->entries));
        pl->lims = carve(base, &at, n, sizeof(*pl->lims));
        pl->keys = carve(base, &at, n, sizeof(*pl->keys));
        pl->args = carve(base, &at, 12 * n, sizeof(*pl->args));     /* per call 3 + 4, per item 5 */
        pl->knames = carve(base, &at, n, sizeof(*pl->knames));
        pl->klen = carve(base, &at, n, sizeof(*pl->klen));
        pl->slots = carve(base, &at, n, sizeof(*pl->slots));
        pl->groups = carve(base, &at, n, sizeof(*pl->groups));
        pl->permits = carve(base, &at, n, sizeof(*pl->permits));
        pl->index = carve(base, &at, n, sizeof(*pl->index));
        pl->npol = carve(base, &at, n, sizeof(*pl->npol));
        pl->out = carve(base, &at, RW * n, sizeof(*pl->out));
        pl->calls = carve(base, &at, n, sizeof(*pl->calls));
        pl->leases = carve(base, &at, n, sizeof(*pl->leases));
        pl->rids = carve(base, &at, n, sizeof(*pl->rids));
        pl->rid_text = carve(base, &at, text + 1, 1);
        if (pass == 0 && (base = pl->block = malloc(at)) == NULL)
            return -1;
    }
    memset(pl->entries, 0, n * sizeof(*pl->entries));
    memset(pl->leases, 0, n * sizeof(*pl->leases));
    return 0;
}

/* all_or_nothing is one script call, whose keys must share one Redis
 * Cluster slot (in any mode: a batch that passes on a single Redis passes
 * on a cluster). PERMITD_OK, or failed_precondition naming the items
 * (request indices, policy and key) outside item order[0]'s slot. */
static int one_slot(const struct limiter_plan *pl, struct permitd_error *err)
{
    size_t first = pl->order[0], off = 0, named = 0;
    char list[360];
    int len = 0;

    list[0] = '\0';
    for (size_t k = 1; k < pl->valid; k++) {
        size_t i = pl->order[k];
        if (pl->slots[i] == pl->slots[first])
            continue;
        off++;
        if (named < 4 && len < (int)sizeof(list) - 1) {
            len += snprintf(list + len, sizeof(list) - (size_t)len, "%s%zu (policy \"%.40s\" key "
                            "\"%.40s\")", named ? ", " : "", i, pl->reqs[i].bucket,
                            pl->reqs[i].key);
            named++;
        }
    }
    if (off == 0)
        return PERMITD_OK;
    return permitd_error_set(err, PERMITD_EPRECONDITION,
                             "all_or_nothing: item%s %s%s %s not in the Redis Cluster slot of "
                             "item %zu (policy \"%.40s\" key \"%.40s\"): one script decides an "
                             "all_or_nothing batch, and its buckets must share a slot; set "
                             "colocate on the policy to keep all its buckets in one slot, or send "
                             "them in separate calls", off > 1 ? "s" : "", list,
                             off > named ? ", ..." : "", off > 1 ? "are" : "is", first,
                             pl->reqs[first].bucket, pl->reqs[first].key);
}

/* See limiter_plan.h. */
int limiter_plan_make(struct limiter_plan *pl, struct permitd_error *err)
{
    const struct limiter_request *reqs = pl->reqs;
    size_t n = pl->n, bad = 0, refused = 0, a = 0;
    int rc;

    if (n > LIMITER_BATCH_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "requests: %zu items, the limit is %d",
                                 n, LIMITER_BATCH_MAX);
    if (n == 0)
        return PERMITD_OK;
    if (plan_arrays(pl, n) != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");

    for (size_t i = 0, at = 0; i < n; i++) {
        memset(&pl->res[i], 0, sizeof(pl->res[i]));
        pl->errs[i].code = PERMITD_OK;
        pl->errs[i].message[0] = '\0';
        pl->rids[i] = "";
        if (limiter_script_validate(&reqs[i], 1, &pl->errs[i]) != PERMITD_OK) {
            bad++;
            continue;
        }
        pl->order[pl->valid++] = i;
        if (reqs[i].request_id != NULL && reqs[i].request_id[0] != '\0') {
            /* limiter_script_validate(): <= the max */
            size_t len = strlen(reqs[i].request_id) + 1;
            memcpy(pl->rid_text + at, reqs[i].request_id, len);
            pl->rids[i] = pl->rid_text + at;
            at += len;
        }
    }
    /* What needs no Redis (decisions/policies.h): an item its policy's
     * copy refuses gets its error here and is left out. */
    for (size_t k = 0, valid = pl->valid; k < valid; k++) {
        size_t i = pl->order[k];
        const struct policies_entry *e;
        struct limiter_decision d = {pl->l, &reqs[i], pl->peek ? DO_PEEK : DO_TAKE, !pl->peek,
                                     pl->retried, pl->deadline_us, &pl->res[i], &pl->errs[i],
                                     &pl->lims[i]};
        rc = limiter_script_admit_loaded(&d, pl->loaded, &e);
        if (rc == PERMITD_OK && e == NULL && pl->res[i].blocked && pl->all_or_nothing)
            /* a blocked item refuses the batch, as a denial would */
            rc = permitd_error_set(&pl->errs[i], PERMITD_EABORTED, "not granted: %s",
                                   pl->res[i].reason);
        if (k == 0)
            pl->valid = 0;
        if (rc == PERMITD_OK && e == NULL && pl->all_or_nothing)
            /* failure_mode "open" (Redis down): never a batch in part */
            rc = permitd_error_set(&pl->errs[i], PERMITD_EUNAVAILABLE,
                                   "redis cannot be reached to decide policy \"%s\"",
                                   reqs[i].bucket);
        if (rc != PERMITD_OK || e == NULL) {
            if (rc != PERMITD_OK)
                refused++;
            else
                pl->errs[i] = (struct permitd_error){PERMITD_OK, ""};   /* failure_mode open */
            continue;
        }
        pl->entries[i] = e;
        pl->order[pl->valid++] = i;
        pl->klen[i] = limiter_script_bucket_key(pl->l, &reqs[i], e, pl->knames[i]);
        pl->slots[i] = cluster_keyslot(pl->knames[i], pl->klen[i]);
        pl->groups[i] = limiter_plan_call_group(pl->l, pl->slots[i], pl->per_slot);
    }
    if (pl->all_or_nothing && bad + refused > 0) {
        for (size_t k = 0; k < pl->valid; k++)
            permitd_error_set(&pl->errs[pl->order[k]], PERMITD_EABORTED, bad > 0
                              ? "not granted: another item of this all_or_nothing batch is invalid"
                              : "not granted: another item of this all_or_nothing batch was "
                                "refused");
        for (size_t k = 0; k < pl->valid; k++)
            policies_release(pl->entries[pl->order[k]]);
        pl->valid = 0;
        return PERMITD_OK;
    }
    for (size_t k = 1; pl->all_or_nothing && k < pl->valid; k++) {
        const struct policies_entry *x = pl->entries[pl->order[0]], *y = pl->entries[pl->order[k]];
        if (x->algorithm != y->algorithm)
            return permitd_error_set(err, PERMITD_EPRECONDITION,
                                     "all_or_nothing: item %zu (policy \"%.40s\") is a %s and "
                                     "item %zu (policy \"%.40s\") a %s: one script decides an "
                                     "all_or_nothing batch, so its policies must share an "
                                     "algorithm", pl->order[0], pl->reqs[pl->order[0]].bucket,
                                     policy_algorithm_name(x->algorithm), pl->order[k],
                                     pl->reqs[pl->order[k]].bucket,
                                     policy_algorithm_name(y->algorithm));
    }
    if (pl->all_or_nothing && (rc = one_slot(pl, err)) != PERMITD_OK)
        return rc;
    qsort_r(pl->order, pl->valid, sizeof(*pl->order), by_bucket, pl);

    /* One call per policy (all of them in one for all_or_nothing): its
     * policies' limits once (the newest copy among its items', should a
     * reload have come between them), then per item its policy's number
     * and permits. Everything a call sends is the plan's own or held by
     * it: a job answered at its deadline leaves its caller's memory, while
     * the pipe may still send its calls again (NOSCRIPT). */
    for (size_t k = 0; k < pl->valid;) {
        size_t first = k, np = 0, head = a;
        struct redis_script_call *c = &pl->calls[pl->ngroups++];
        int wide = 0, nitem;

        c->args = &pl->args[a];
        a += 3;                 /* limiter_script_call_head() once its items are known */
        c->keys = &pl->keys[first];
        c->out = &pl->out[RW * first];
        c->cross_slot = 0;
        c->script = limiter_script_of(pl->entries[pl->order[first]]);
        /* the policies of this call, each once: all_or_nothing's all; on a
         * single Redis one; in a cluster those of one group (by_bucket()) */
        for (size_t m = first; m < pl->valid;) {
            const struct policies_entry *newest = pl->entries[pl->order[m]];
            size_t from = m;
            /* (a Peek batch on a single Redis: every policy of one
             * algorithm in one call, whatever its keys' slots) */
            if (!pl->all_or_nothing && m > first &&
                ((!pl->l->slot_calls && !pl->peek) ||
                 (pl->l->slot_calls && pl->groups[pl->order[m]] != pl->groups[pl->order[first]]) ||
                 newest->algorithm != pl->entries[pl->order[first]]->algorithm))
                break;
            size_t newest_i = pl->order[m];
            while (m < pl->valid && strcmp(reqs[pl->order[m]].bucket,
                                           reqs[pl->order[from]].bucket) == 0 &&
                   limiter_limits_cmp(&pl->lims[pl->order[m]], &pl->lims[pl->order[from]]) == 0 &&
                   (pl->all_or_nothing || !pl->l->slot_calls ||
                    pl->groups[pl->order[m]] == pl->groups[pl->order[from]])) {
                c->cross_slot |= !pl->all_or_nothing && pl->l->slot_calls &&
                                 pl->slots[pl->order[m]] != pl->slots[pl->order[first]];
                if (pl->lims[pl->order[m]].stamp > pl->lims[newest_i].stamp) {
                    newest = pl->entries[pl->order[m]];
                    newest_i = pl->order[m];
                }
                m++;
            }
            limiter_script_policy_args(newest, &pl->lims[newest_i], &pl->args[a]);
            a += 4;
            np++;
            snprintf(pl->index[from], sizeof(pl->index[from]), "%zu", np);
            for (size_t x = from + 1; x < m; x++)
                memcpy(pl->index[x], pl->index[from], sizeof(pl->index[x]));
            k = m;
        }
        snprintf(pl->npol[pl->ngroups - 1], sizeof(pl->npol[0]), "%zu", np);
        for (size_t x = first; x < k; x++)
            wide |= limiter_script_item_wide(&reqs[pl->order[x]], pl->peek ? DO_PEEK : DO_TAKE,
                                             pl->entries[pl->order[x]]->algorithm);
        limiter_script_call_head(pl->l, pl->all_or_nothing ? MODE_ALL
                                 : limiter_script_mode_arg(pl->peek ? DO_PEEK : DO_TAKE),
                                 pl->npol[pl->ngroups - 1], wide, &pl->args[head]);
        for (size_t x = first; x < k; x++) {
            size_t i = pl->order[x];
            struct limiter_request own = reqs[i];
            own.request_id = pl->rids[i];   /* the plan's copy: see limiter_plan.h */
            if ((nitem = limiter_script_item_call(&own, pl->peek ? DO_PEEK : DO_TAKE,
                                                  pl->entries[i]->algorithm, wide, pl->knames[i],
                                                  pl->klen[i], pl->permits[x], pl->index[x],
                                                  pl->leases[x], &pl->keys[x], &pl->args[a])) < 0)
                return permitd_error_set(err, PERMITD_EINTERNAL, "getrandom() gave no lease "
                                         "id: %s", strerror(errno));
            a += (size_t)nitem;
        }
        /* Over several slots: KEYS is the first key, the others follow. */
        for (size_t x = first + 1; c->cross_slot && x < k; x++)
            pl->args[a++] = pl->keys[x];
        c->nkeys = c->cross_slot ? 1 : (int)(k - first);
        c->nargs = (int)(a - head);
        c->nout = (int)(RW * (k - first));
    }
    return PERMITD_OK;
}

static int batch_run(struct limiter_plan *pl, struct permitd_error *err);

/* The items of pl's calls over several slots that met a redirect (rc
 * REDIS_CALL_SPLIT: the script wrote nothing) asked again, one call per
 * slot, whose redirects are followed; their answers become the items'.
 * Blocking, on the caller's thread (a worker's loop for a queued batch,
 * as for a stale answer): it happens only while slots move. */
static void plan_resend(struct limiter_plan *pl)
{
    struct limiter_request *reqs = NULL;
    struct limiter_result *res = NULL;
    struct permitd_error *errs = NULL, err = {0, ""};
    size_t *idx = NULL, m = 0, k = 0;
    uint64_t splits = limiter_script_split_calls(pl->calls, pl->ngroups);
    int rc;

    if (splits > 0)
        atomic_fetch_add(&pl->l->splits, splits);
    for (size_t g = 0; g < pl->ngroups; g++)
        if (pl->calls[g].rc == REDIS_CALL_SPLIT)
            m += (size_t)pl->calls[g].nout / RW;
    if (m == 0)
        return;
    reqs = malloc(m * sizeof(*reqs));
    res = calloc(m, sizeof(*res));
    errs = calloc(m, sizeof(*errs));
    idx = malloc(m * sizeof(*idx));
    m = 0;
    for (size_t g = 0; g < pl->ngroups; g++) {
        size_t items = (size_t)pl->calls[g].nout / RW;
        for (size_t j = 0; j < items; j++, k++) {
            if (pl->calls[g].rc != REDIS_CALL_SPLIT)
                continue;
            if (reqs == NULL || res == NULL || errs == NULL || idx == NULL)
                permitd_error_set(&pl->errs[pl->order[k]], PERMITD_EINTERNAL,
                                  "out of memory sending an item again after a redirect");
            else
                reqs[m] = pl->reqs[pl->order[k]];
            if (idx != NULL)
                idx[m] = pl->order[k];
            m++;
        }
    }
    if (reqs == NULL || res == NULL || errs == NULL || idx == NULL)
        m = 0;
    rc = m == 0 ? PERMITD_OK
                : batch_run(&(struct limiter_plan){.l = pl->l, .reqs = reqs, .n = m,
                                                   .peek = pl->peek, .retried = pl->retried,
                                                   .res = res, .errs = errs,
                                                   .deadline_us = pl->deadline_us}, &err);
    for (size_t x = 0; x < m; x++) {
        size_t i = idx[x];
        if (rc != PERMITD_OK) {
            permitd_error_set(&pl->errs[i], rc, "%s", err.message);
            continue;
        }
        pl->res[i] = res[x];
        pl->errs[i] = errs[x];
    }
    free(reqs);
    free(res);
    free(errs);
    free(idx);
}

/* Reads the answers of the calls (rc: the whole round trip's) into res and
 * errs; returns the batch's rc. A "stale" item is asked again after its
 * policy is reloaded (once): on its own, or, all_or_nothing, with the whole
 * batch (the script wrote nothing then). */
static int plan_conclude(struct limiter_plan *pl, int rc, struct permitd_error *err)
{
    const struct limiter_request *reqs = pl->reqs;

    if ((rc == PERMITD_EUNAVAILABLE || rc == PERMITD_EDEADLINE) && !pl->all_or_nothing) {
        /* Each item gets the error; when Redis failed (not the caller's
         * own deadline), as its policy's failure_mode says. */
        for (size_t k = 0; k < pl->valid; k++) {
            size_t i = pl->order[k];
            if (rc == PERMITD_EDEADLINE || pl->peek ||
                !limiter_script_open_pass(pl->l, &reqs[i], &pl->res[i]))
                permitd_error_set(&pl->errs[i], rc, "%s", err->message);
        }
        return PERMITD_OK;
    }
    if (rc != PERMITD_OK)
        return rc;
    if (pl->all_or_nothing && pl->ngroups == 1 && pl->calls[0].rc == PERMITD_OK) {
        for (size_t k = 0; k < pl->valid; k++) {
            const long long *out = &pl->calls[0].out[RW * k];
            if (out[0] == SCRIPT_STALE) {
                size_t i = pl->order[k];
                rc = limiter_script_restale(pl->l, reqs[i].bucket, out[2], pl->retried,
                                            pl->deadline_us, &pl->errs[i]);
                if (rc != PERMITD_OK)
                    return permitd_error_set(err, rc, "%s", pl->errs[i].message);
                return batch_run(&(struct limiter_plan){.l = pl->l, .reqs = reqs, .n = pl->n,
                                                        .all_or_nothing = 1, .retried = 1,
                                                        .res = pl->res, .errs = pl->errs,
                                                        .deadline_us = pl->deadline_us}, err);
            }
        }
    }
    plan_resend(pl);
    for (size_t g = 0, k = 0; g < pl->ngroups; g++) {
        size_t m = (size_t)pl->calls[g].nout / RW;
        for (size_t j = 0; j < m; j++, k++) {
            size_t i = pl->order[k];
            const long long *out = &pl->calls[g].out[RW * j];
            int crc = PERMITD_OK;
            if (pl->calls[g].rc == REDIS_CALL_SPLIT)
                continue;       /* answered by plan_resend() */
            if (pl->calls[g].rc != PERMITD_OK) {
                /* A call Redis refused: as for a single Acquire,
                 * failure_mode applies when it could not serve now; but
                 * all_or_nothing never passes in part. */
                crc = limiter_script_call_refused(pl->calls[g].rc, reqs[i].bucket, &pl->errs[i]);
                out = NULL;
                if (pl->all_or_nothing)
                    continue;
            }
            /* The same reading as a single Acquire's. */
            struct limiter_decision d = {pl->l, &reqs[i], pl->peek ? DO_PEEK : DO_TAKE, !pl->peek,
                                         pl->retried, pl->deadline_us, &pl->res[i], &pl->errs[i],
                                         &pl->lims[i]};
            if (limiter_script_conclude(&d, crc, out) == PERMITD_OK) {
                pl->errs[i].code = PERMITD_OK;
                pl->errs[i].message[0] = '\0';
            }
        }
    }
    return PERMITD_OK;
}

/* Runs the AcquireBatch (or the Peeks) pl describes, filled by the caller
 * as limiter_plan.h says (l, reqs, n, all_or_nothing, peek, retried, res,
 * errs, deadline_us), on this thread's connection; frees what the plan
 * made. */
static int batch_run(struct limiter_plan *pl, struct permitd_error *err)
{
    int rc;

    /* Blocking: one call per slot (redis.c follows each call's redirects) */
    pl->per_slot = 1;
    rc = limiter_plan_make(pl, err);
    if (rc == PERMITD_OK && pl->ngroups > 0) {
        /* one pipeline per run of calls of one script (one per algorithm) */
        for (size_t g = 0, end; rc == PERMITD_OK && g < pl->ngroups; g = end) {
            for (end = g + 1; end < pl->ngroups && pl->calls[end].script == pl->calls[g].script;)
                end++;
            rc = redis_script_pipeline(pl->l->redis, pl->calls[g].script, &pl->calls[g], end - g,
                                       pl->deadline_us, err);
        }
        rc = plan_conclude(pl, rc, err);
    }
    limiter_plan_free(pl);
    return rc;
}

int limiter_acquire_batch(struct limiter *l, const struct limiter_request *reqs, size_t n,
                          int all_or_nothing, int64_t deadline_us,
                          struct limiter_result *res, struct permitd_error *errs,
                          struct permitd_error *err)
{
    return batch_run(&(struct limiter_plan){.l = l, .reqs = reqs, .n = n,
                                            .all_or_nothing = all_or_nothing, .res = res,
                                            .errs = errs, .deadline_us = deadline_us}, err);
}

int limiter_inspect_batch(struct limiter *l, const char *const *names, size_t n,
                          int64_t deadline_us, struct limiter_result *res,
                          struct permitd_error *errs, struct permitd_error *err)
{
    struct limiter_request *reqs;
    int rc;

    if (n > LIMITER_BATCH_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "names: %zu policies, the limit is %d", n,
                                 LIMITER_BATCH_MAX);
    if (n == 0)
        return PERMITD_OK;
    if ((reqs = calloc(n, sizeof(*reqs))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    /* permitd's own look: no app is checked (the plan's peek), the name
     * only has to be one, as the plan validates every item */
    for (size_t i = 0; i < n; i++)
        reqs[i] = (struct limiter_request){names[i], "permitd", "", 1, NULL, NULL, NULL};
    rc = batch_run(&(struct limiter_plan){.l = l, .reqs = reqs, .n = n, .peek = 1, .res = res,
                                          .errs = errs, .deadline_us = deadline_us}, err);
    free(reqs);
    return rc;
}

/* Answers a queued plan's caller: calls are the batch's copies of its calls
 * (their rc; the answers went straight to pl->out), NULL when none was
 * sent or its deadline passed first. The plan itself is freed with its job
 * (job_end()): a batch still out writes into pl->out. */
void limiter_plan_answer(struct limiter_plan *pl, int rc, const struct redis_script_call *calls,
                         struct permitd_error *err)
{
    for (size_t g = 0; calls != NULL && g < pl->ngroups; g++)
        pl->calls[g].rc = calls[g].rc;
    rc = plan_conclude(pl, rc, err);
    pl->done(pl->ud, rc, err);
}
