/*
 * limiter_bucket.c - the calls about one bucket rather than a decision:
 * inspect (what it holds), own (a lease's holder), reset (its keys
 * deleted and the reset announced), and the settle pass's calls.
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

/* The words of a script's "inspect" answer (lua/concurrency.lua's header):
 * the RECORD's ten numbers, the window's reset, the events, k and k ages,
 * j and j leases of three numbers each. */
#define INSPECT_WORDS (REDIS_RECORD_NUMBERS + 3 + LIMITER_INSPECT_LIST_MAX + 1 + \
                       3 * LIMITER_INSPECT_LIST_MAX)

/* Reads the part of an "inspect" answer after the RECORD's numbers (x,
 * INSPECT_WORDS - REDIS_RECORD_NUMBERS words) into more; counts beyond
 * the list's room are cut to it. */
static void inspection_read(const long long *x, struct limiter_inspection *more)
{
    size_t k = x[2] < 0 ? 0 : (size_t)x[2], j;

    if (k > LIMITER_INSPECT_LIST_MAX)
        k = LIMITER_INSPECT_LIST_MAX;
    more->window_reset_after_ms = x[0];
    more->events = x[1];
    more->n_ages = k;
    for (size_t i = 0; i < k; i++)
        more->event_ages_ms[i] = x[3 + i];
    x += 3 + k;
    j = x[0] < 0 ? 0 : (size_t)x[0];
    if (j > LIMITER_INSPECT_LIST_MAX)
        j = LIMITER_INSPECT_LIST_MAX;
    more->n_leases = j;
    for (size_t i = 0; i < j; i++) {
        const long long *v = x + 1 + 3 * i;
        snprintf(more->leases[i].id_prefix, sizeof(more->leases[i].id_prefix), "%08llx",
                 (unsigned long long)v[0] & 0xffffffffULL);
        more->leases[i].permits = v[1];
        more->leases[i].expires_after_ms = v[2];
    }
}

/* limiter_inspect() once the names are checked: a peek of the bucket, and
 * for every algorithm but the token bucket (whose peek says all there is)
 * the script's mode "inspect", which answers the peek's RECORD and the
 * algorithm's view of the state in one call. A "stale" answer reloads the
 * policy and asks once more (retried), as a decision does. */
static int inspect(struct limiter *l, const struct limiter_request *req, int retried,
                   int64_t deadline_us, struct limiter_result *res,
                   struct limiter_inspection *more, struct permitd_error *err)
{
    static const struct redis_str mode_inspect = {"inspect", 7};
    char name[POLICY_REDIS_KEY_MAX], permits_s[24], lease[LIMITER_LEASE_ID_LEN + 1] = "";
    struct redis_str key, args[11];
    const struct policies_entry *e;
    long long out[INSPECT_WORDS];
    enum redis_script script;
    struct limiter_limits lim;
    struct limiter_decision d = {l, req, DO_PEEK, 0, retried, deadline_us, res, err, &lim};
    int rc, nitem;

    memset(res, 0, sizeof(*res));
    memset(more, 0, sizeof(*more));
    if ((rc = limiter_script_admit(&d, &e)) != PERMITD_OK || e == NULL)
        return rc;
    more->algorithm = policy_algorithm_name(e->algorithm);
    if (e->algorithm == POLICY_TOKEN_BUCKET) {
        policies_release(e);
        return limiter_script_decide(&d);
    }
    /* wide, though a peek: "inspect" answers the RECORD's ten numbers
     * (a compact call's RECORD has eight); a peek draws no lease id:
     * limiter_script_item_call() cannot fail */
    limiter_script_call_head(l, mode_inspect, LIMITER_POLICY_INDEX, 1, args);
    limiter_script_policy_args(e, &lim, &args[3]);
    nitem = limiter_script_item_call(req, DO_PEEK, e->algorithm, 1, name,
                                     limiter_script_bucket_key(l, req, e, name), permits_s,
                                     LIMITER_POLICY_INDEX, lease, &key, &args[7]);
    script = limiter_script_of(e);
    /* e is held until the call is answered: args point into its strings
     * (limiter_script_policy_args()), which a reload on another thread may free */
    rc = redis_script_run(l->redis, script, &key, 1, args, 7 + nitem, deadline_us, out,
                          INSPECT_WORDS, err);
    policies_release(e);
    if (rc == PERMITD_OK && out[0] == SCRIPT_STALE && !retried) {
        if ((rc = limiter_script_restale(l, req->bucket, out[2], 0, deadline_us,
                                         err)) != PERMITD_OK)
            return rc;
        return inspect(l, req, 1, deadline_us, res, more, err);
    }
    /* limiter_script_conclude() as for a second try: a stale answer now is an error */
    d.retried = 1;
    if ((rc = limiter_script_conclude(&d, rc, out)) != PERMITD_OK)
        return rc;
    inspection_read(out + REDIS_RECORD_NUMBERS, more);
    return PERMITD_OK;
}

int limiter_inspect(struct limiter *l, const char *bucket, const char *key,
                    int64_t deadline_us, struct limiter_result *res,
                    struct limiter_inspection *more, struct permitd_error *err)
{
    struct limiter_request req = {bucket, "*", key ? key : "", 1, NULL, NULL, NULL};
    struct limiter_decision d = {l, &req, DO_PEEK, 0, 0, deadline_us, res, err, NULL};
    int rc;

    if ((rc = policy_check_name("name", bucket, err)) != PERMITD_OK ||
        (rc = policy_check_key("key", req.key, err)) != PERMITD_OK)
        return rc;
    if (more != NULL)
        return inspect(l, &req, 0, deadline_us, res, more, err);
    return limiter_script_decide(&d);
}

int limiter_own(struct limiter *l, const char *bucket, const char *key, int take,
                int64_t deadline_us, struct limiter_result *res, struct permitd_error *err)
{
    struct limiter_request req = {bucket, "*", key ? key : "", 1, NULL, NULL, NULL};
    struct limiter_decision d = {l, &req, take, 0, 0, deadline_us, res, err, NULL};
    int rc;

    if ((rc = policy_check_key("key", req.key, err)) != PERMITD_OK)
        return rc;
    return limiter_script_decide(&d);
}

/* The reset deletes a bucket's state under every algorithm's letter
 * (policy.h: policy_bucket_key()), not only the policy's own algorithm's:
 * a policy whose algorithm was edited may still hold the old one's state
 * for the key, which no script reads, and deleting it is harmless. The
 * state of one layout, all letters, shares a slot (one hash tag), so each
 * layout is one DEL: the shared bucket one, a key two (spread and
 * colocated: the policy may have set or cleared colocate, and a bucket
 * written before issue 19 has the colocated one). In a cluster the two
 * layouts live in different slots, so they cannot be one DEL. */
/* After a reset (the state deleted: not before, or a denial Redis answered
 * in between would be remembered as new): every deny cache here forgets
 * what it held, and "<name> reset" on <prefix>changes tells the other
 * instances to do the same (control/follow.c), or they would deny what
 * Redis now allows until their entries ran out. */
static int reset_notice(struct limiter *l, const char *bucket, int64_t deadline_us,
                        struct permitd_error *err)
{
    char channel[160], msg[POLICY_NAME_MAX + 8];
    struct redis_str pub[3] = {{"PUBLISH", 7}, {channel, 0}, {msg, 0}};
    struct permitd_error why = {0, ""};
    int rc;

    limiter_deny_cache_clear(l);
    pub[1].len = (size_t)snprintf(channel, sizeof(channel), "%schanges", l->cfg->redis_prefix);
    pub[2].len = (size_t)snprintf(msg, sizeof(msg), "%s reset", bucket);
    rc = redis_command(l->redis, pub, 3, deadline_us, NULL, NULL, NULL, &why);
    if (rc != PERMITD_OK)
        return permitd_error_set(err, rc, "bucket of policy \"%s\" reset, but the notice to the "
                                 "other permitd instances (PUBLISH on %s) failed: %s; reset it "
                                 "again", bucket, channel, why.message);
    return PERMITD_OK;
}

int limiter_reset(struct limiter *l, const char *bucket, const char *key,
                  int64_t deadline_us, struct permitd_error *err)
{
    char names[POLICY_ALGORITHMS][POLICY_REDIS_KEY_MAX];
    struct redis_str del[1 + POLICY_ALGORITHMS];
    int rc;

    if ((rc = policy_check_name("name", bucket, err)) != PERMITD_OK ||
        (rc = policy_check_key("key", key ? key : "", err)) != PERMITD_OK)
        return rc;
    del[0].p = "DEL";
    del[0].len = 3;
    for (int colocate = 0; colocate <= 1; colocate++) {
        for (int a = 0; a < POLICY_ALGORITHMS; a++) {
            del[1 + a].p = names[a];
            del[1 + a].len = policy_bucket_key(names[a], l->cfg->redis_prefix, bucket,
                                               (enum policy_algorithm)a, colocate, key);
        }
        if ((rc = redis_command(l->redis, del, 1 + POLICY_ALGORITHMS, deadline_us, NULL, NULL,
                                NULL, err)) != PERMITD_OK)
            return rc;
        if (key == NULL || key[0] == '\0')
            break;
    }
    return reset_notice(l, bucket, deadline_us, err);
}

/* ---- settle (issue 22): the settle pass's calls of bucket.lua ---- */

/* bucket.lua "settle"'s ARGV for policy e (lua/bucket.lua, "settle": the
 * head and the policy's limits as every call lays them out, no items)
 * into args[7]. */
static int settle_args(const struct limiter *l, const struct policies_entry *e,
                       struct limiter_limits *lim, struct redis_str args[7])
{
    static const struct limiter_request shared = {"", "", "", 1, NULL, NULL, NULL};

    /* the policy's own limits, its override count in the stamp (what a
     * key no override matches is decided under) */
    limiter_script_limits(l, e, &shared, 0, lim);
    limiter_script_call_head(l, (struct redis_str){"settle", 6}, LIMITER_POLICY_INDEX, 1, args);
    limiter_script_policy_args(e, lim, args + 3);
    return 7;
}

/* The key (in out, POLICY_KEY_MAX + 1 bytes) of token bucket state key k
 * of policy e (policy_bucket_key(): P{NAME:KEY}:k, P{NAME}:k:KEY); 0 when
 * k is no keyed bucket of it. */
static int bucket_key_of(const struct limiter *l, const struct policies_entry *e,
                         const struct redis_str *k, char *out)
{
    size_t p = strlen(l->cfg->redis_prefix), nl = strlen(e->name), len;
    const char *s = k->p;

    if (k->len < p + nl + 4 || memcmp(s, l->cfg->redis_prefix, p) != 0 || s[p] != '{' ||
        memcmp(s + p + 1, e->name, nl) != 0)
        return 0;
    s += p + 1 + nl;
    len = k->len - (p + 1 + nl);
    if (len > 4 && s[0] == ':' && memcmp(s + len - 3, "}:k", 3) == 0) {
        len -= 4;
        s += 1;
    } else if (len > 4 && memcmp(s, "}:k:", 4) == 0) {
        len -= 4;
        s += 4;
    } else {
        return 0;
    }
    if (len > POLICY_KEY_MAX)
        return 0;
    memcpy(out, s, len);
    out[len] = '\0';
    return 1;
}

/* Leaves out of keys[0..*n) the buckets an override matches (in force or
 * expired): they were written under the override's limits (a stamp the
 * settle's does not reach, or the same one when the override is only an
 * app's), which the settle's policy limits must not re-price nor expire. */
static void settle_skip_overridden(const struct limiter *l, const struct policies_entry *e,
                                   struct redis_str *keys, size_t *n)
{
    char key[POLICY_KEY_MAX + 1];
    size_t kept = 0;

    for (size_t i = 0; i < *n; i++) {
        struct limiter_request req = {e->name, "", key, 1, NULL, NULL, NULL};
        struct limiter_limits lim;
        if (bucket_key_of(l, e, &keys[i], key)) {
            limiter_script_limits(l, e, &req, 1, &lim);
            if (lim.matched)
                continue;
        }
        keys[kept++] = keys[i];
    }
    *n = kept;
}

static int settle_by_slot(const void *a, const void *b)
{
    const struct redis_str *x = a, *y = b;
    unsigned sx = cluster_keyslot(x->p, x->len), sy = cluster_keyslot(y->p, y->len);

    return sx < sy ? -1 : sx > sy;
}

/* keys[0..n) through bucket.lua with args (mode `what`, for the message):
 * in a cluster one call per slot, at most LIMITER_SETTLE_CALL_KEYS keys a
 * call, every call in one pipelined round trip (per master); each call
 * answers nout numbers, added into sums[0..nout). */
static int bucket_pages(struct limiter *l, const char *what, const char *policy,
                        struct redis_str *keys, size_t n, struct redis_str *args, int nargs,
                        int nout, int64_t deadline_us, long long *sums, struct permitd_error *err)
{
    size_t ncalls = 0;      /* at most one per key (a cluster, every key its own slot) */
    struct redis_script_call *calls = calloc(n + 1, sizeof(*calls));
    long long *out = calloc((size_t)nout * (n + 1), sizeof(*out));
    int rc;

    if (calls == NULL || out == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    /* In a cluster a call's keys share one slot: the page sorted by slot,
     * one call per run of a slot. */
    if (l->slot_calls)
        qsort(keys, n, sizeof(*keys), settle_by_slot);
    for (size_t first = 0; first < n;) {
        size_t k = first + 1;
        unsigned slot = cluster_keyslot(keys[first].p, keys[first].len);
        while (k < n && k - first < LIMITER_SETTLE_CALL_KEYS &&
               (!l->slot_calls || cluster_keyslot(keys[k].p, keys[k].len) == slot))
            k++;
        calls[ncalls] = (struct redis_script_call){.keys = &keys[first], .nkeys = (int)(k - first),
                                                   .args = args, .nargs = nargs,
                                                   .out = &out[(size_t)nout * ncalls],
                                                   .nout = nout};
        ncalls++;
        first = k;
    }
    rc = redis_script_pipeline(l->redis, REDIS_SCRIPT_BUCKET, calls, ncalls, deadline_us, err);
    for (size_t c = 0; rc == PERMITD_OK && c < ncalls; c++) {
        if (calls[c].rc != PERMITD_OK)
            rc = permitd_error_set(err, calls[c].rc, "redis refused bucket.lua \"%s\"%s%s%s for "
                                   "key %.*s (see the log above)", what,
                                   policy ? " of policy \"" : "", policy ? policy : "",
                                   policy ? "\"" : "",
                                   (int)(calls[c].keys[0].len > 200 ? 200 : calls[c].keys[0].len),
                                   calls[c].keys[0].p);
        for (int k = 0; k < nout; k++)
            sums[k] += out[(size_t)nout * c + (size_t)k];
    }
done:
    free(calls);
    free(out);
    return rc;
}

int limiter_settle(struct limiter *l, const struct policies_entry *e, struct redis_str *keys,
                   size_t n, int64_t deadline_us, long long *set, long long *removed,
                   long long *gone, struct permitd_error *err)
{
    /* Only a token bucket's keys expire by its rate (the settle pass's
     * whole point); a policy that turned into another algorithm since the
     * settle was queued has fresh keys of its own letter (policy.h). */
    if (e->algorithm != POLICY_TOKEN_BUCKET)
        return PERMITD_OK;

    struct redis_str args[7];
    struct limiter_limits lim;
    int nargs = settle_args(l, e, &lim, args), rc;
    long long sums[3] = {0, 0, 0};

    settle_skip_overridden(l, e, keys, &n);
    if (n == 0)
        return PERMITD_OK;

    rc = bucket_pages(l, "settle", e->name, keys, n, args, nargs, 3, deadline_us, sums, err);
    *set += sums[0];
    *removed += sums[1];
    *gone += sums[2];
    return rc;
}

int limiter_sweep(struct limiter *l, const struct redis_str *list, long long first, int alone,
                  int64_t deadline_us, long long *kept, long long *removed, long long *next,
                  struct permitd_error *err)
{
    char from[24];
    struct redis_str args[4];
    long long out[3] = {0, 0, 0};
    struct redis_script_call call = {.keys = list, .nkeys = 1, .args = args, .nargs = 4,
                                     .out = out, .nout = 3};
    int rc;

    snprintf(from, sizeof(from), "%lld", first);
    limiter_script_call_head(l, (struct redis_str){"sweep", 5}, "0", 0, args);
    args[2] = (struct redis_str){from, strlen(from)};
    args[3] = alone ? (struct redis_str){"1", 1} : (struct redis_str){"0", 1};
    rc = redis_script_pipeline(l->redis, REDIS_SCRIPT_BUCKET, &call, 1, deadline_us, err);
    if (rc == PERMITD_OK && call.rc != PERMITD_OK)
        rc = permitd_error_set(err, call.rc, "redis refused bucket.lua \"sweep\" of %.*s (see "
                               "the log above)", (int)(list->len > 200 ? 200 : list->len),
                               list->p);
    if (rc == PERMITD_OK) {
        *kept += out[0];
        *removed += out[1];
        *next = out[2];
    }
    return rc;
}

int limiter_index(struct limiter *l, struct redis_str *keys, size_t n, int64_t deadline_us,
                  long long *added, long long *removed, struct permitd_error *err)
{
    struct redis_str args[3];
    long long sums[2] = {0, 0};
    int rc;

    limiter_script_call_head(l, (struct redis_str){"index", 5}, "0", 0, args);
    rc = bucket_pages(l, "index", NULL, keys, n, args, 3, 2, deadline_us, sums, err);
    *added += sums[0];
    *removed += sums[1];
    return rc;
}
