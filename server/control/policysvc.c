/*
 * policysvc.c - PolicyService (proto/permit/v1/admin.proto) on the admin
 * listener: list, read, create, update and delete policies, their
 * history, and the live buckets (GetBucket, ResetBucket, GetPolicyStats,
 * GetPolicyReservations).
 *
 * Writes go to MySQL first (store.c: one transaction with the audit row),
 * then straight through to Redis (sync.c), so the next Acquire after an
 * RPC returns sees the change. Two editors of one policy are told apart by
 * its version: the second gets aborted. Who may do what is session.c's:
 * viewers read, editors write. The store connection is shared with
 * session.c under one mutex: admin traffic is light. A ResetBucket is
 * written to bucket_audit (store_bucket_audit()) with the bucket as it
 * was, before Redis resets it.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/listing.h"
#include "control/overridesync.h"
#include "control/policysvc.h"
#include "control/session.h"
#include "control/settle.h"
#include "core/clock.h"
#include "core/log.h"
#include "decisions/limiter_reserve.h"
#include "permit/v1/admin.pb-c.h"
#include "stores/policy.h"
#include "stores/store.h"
#include "stores/trafficdb.h"
#include "transport/json.h"

#define POLICYSVC_REDIS_DEADLINE_MS 1000
/* How long a DeletePolicy that was committed is still told from a delete
 * of a policy that never existed, for its retry (delete_policy()): a
 * client's retries come within seconds; ten minutes covers a slow one. */
#define POLICYSVC_DELETE_RETRY_S 600

struct policysvc {
    const struct config *cfg;
    struct redis *redis;
    struct limiter *limiter;
    struct sync *sync;              /* NULL without a store */
    struct stats *stats;
    struct store *store;            /* NULL without --mysql-url */
    pthread_mutex_t *store_lock;    /* held around every use of store */
    struct session *sessions;       /* who calls */
    struct trafficdb *traffic;      /* the list's fleet orders (issue 39); NULL without a store */
    pthread_mutex_t traffic_lock;
};

int policysvc_new(const struct config *cfg, struct redis *redis, struct limiter *limiter,
                  struct sync *sync, struct stats *stats, struct store *store,
                  pthread_mutex_t *store_lock, struct session *sessions,
                  struct policysvc **out, struct permitd_error *err)
{
    struct policysvc *p = calloc(1, sizeof(*p));

    *out = NULL;
    if (p == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    *p = (struct policysvc){cfg, redis, limiter, sync, stats, store, store_lock, sessions, NULL, {{0}}};
    if (store != NULL && trafficdb_new(cfg, &p->traffic, err) != PERMITD_OK) {
        free(p);
        return err->code;
    }
    pthread_mutex_init(&p->traffic_lock, NULL);
    *out = p;
    return PERMITD_OK;
}

void policysvc_free(struct policysvc *p)
{
    if (p == NULL)
        return;
    trafficdb_free(p->traffic);
    pthread_mutex_destroy(&p->traffic_lock);
    free(p);
}

static int64_t deadline(void)
{
    return clock_now_us() + (int64_t)POLICYSVC_REDIS_DEADLINE_MS * 1000;
}

/* ---- conversions between store.c and the protobuf messages ---- */

static Permit__V1__Policy *to_proto(struct connect_call *call, const struct store_policy *p)
{
    Permit__V1__Policy *m = connect_call_alloc(call, sizeof(*m));
    char window[POLICY_DURATION_TEXT], lease[POLICY_DURATION_TEXT] = "";
    char rsv_ttl[POLICY_DURATION_TEXT];
    size_t n = 0;

    if (m == NULL)
        return NULL;
    /* The limits as stored, in the canonical form (60000 ms is "1m"). */
    policy_format_window(window, p->window_ms, p->calendar);
    if (p->lease_ms > 0)
        policy_format_duration(lease, p->lease_ms);
    permit__v1__policy__init(m);
    m->name = connect_call_strdup(call, p->name);
    m->max_permits = p->max_permits;
    m->rate = connect_call_strdup(call, p->rate);
    m->description = connect_call_strdup(call, p->description ? p->description : "");
    m->enabled = p->enabled;
    m->failure_mode = connect_call_strdup(call, p->failure_mode);
    m->colocate = p->colocate != 0;
    m->shadow = p->shadow != 0;
    m->algorithm = connect_call_strdup(call, policy_algorithm_name(p->algorithm));
    m->window = connect_call_strdup(call, window);
    m->lease_ttl = connect_call_strdup(call, lease);
    policy_format_duration(rsv_ttl, p->reserve_ttl_ms > 0 ? p->reserve_ttl_ms : 300000);
    m->reserve_ttl = connect_call_strdup(call, rsv_ttl);
    m->debt_floor = p->debt_floor;
    m->reserve_expiry = (char *)(p->expiry_refund ? "refund" : "keep");
    m->version = (int64_t)p->version;
    m->created_by = connect_call_strdup(call, p->created_by);
    m->updated_by = connect_call_strdup(call, p->updated_by);
    m->created_at = connect_call_strdup(call, p->created_at);
    m->updated_at = connect_call_strdup(call, p->updated_at);
    if (p->apps != NULL && p->apps[0] != '\0') {
        n = 1;
        for (const char *c = p->apps; *c; c++)
            n += *c == ',';
        char *copy = connect_call_strdup(call, p->apps);
        m->apps = connect_call_alloc(call, n * sizeof(char *));
        if (copy == NULL || m->apps == NULL)
            return NULL;
        m->n_apps = 0;
        for (char *tok = strtok(copy, ","); tok != NULL; tok = strtok(NULL, ","))
            m->apps[m->n_apps++] = tok;
    }
    if (!m->name || !m->rate || !m->description || !m->failure_mode || !m->created_by ||
        !m->updated_by || !m->created_at || !m->updated_at || !m->algorithm || !m->window ||
        !m->lease_ttl || !m->reserve_ttl)
        return NULL;
    return m;
}

/* Trims a policy's rate as MySQL prints it ("0.500000000000" -> "0.5"). */
static void tidy_rate(char *rate)
{
    char *dot = strchr(rate, '.');
    size_t n;

    if (dot == NULL)
        return;
    n = strlen(rate);
    while (n > 0 && rate[n - 1] == '0')
        rate[--n] = '\0';
    if (n > 0 && rate[n - 1] == '.')
        rate[--n] = '\0';
}

/* Checks an editor's policy and turns it into a store input: the fields,
 * then the algorithm and the limits that go with it (each error names the
 * field that does not fit, and the algorithm). */
static int from_proto(const Permit__V1__Policy *m, struct store_policy_input *in,
                      struct permitd_error *err)
{
    int rc;

    if (m == NULL)
        return permitd_error_set(err, PERMITD_EINVAL, "policy: is required");
    memset(in, 0, sizeof(*in));
    in->name = m->name;
    in->apps = (const char *const *)m->apps;
    in->napps = m->n_apps;
    in->description = m->description;
    in->enabled = m->enabled;
    in->failure_mode = m->failure_mode[0] ? m->failure_mode : "closed";
    in->colocate = m->colocate;
    in->shadow = m->shadow;
    /* reservations (issue 38) */
    in->reserve_ttl_ms = 300000;
    if (m->reserve_ttl[0] != '\0' &&
        (rc = policy_parse_duration("reserve_ttl", m->reserve_ttl, &in->reserve_ttl_ms,
                                    err)) != PERMITD_OK)
        return rc;
    if (in->reserve_ttl_ms > 86400000)
        return permitd_error_set(err, PERMITD_EINVAL, "reserve_ttl: \"%s\" is longer than 1d",
                                 m->reserve_ttl);
    if (m->debt_floor < 0 || m->debt_floor > 1000000000000LL)
        return permitd_error_set(err, PERMITD_EINVAL, "debt_floor: %lld is not 0 .. 10^12",
                                 (long long)m->debt_floor);
    in->debt_floor = m->debt_floor;
    if (m->reserve_expiry[0] != '\0' && strcmp(m->reserve_expiry, "keep") != 0 &&
        strcmp(m->reserve_expiry, "refund") != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "reserve_expiry: \"%.40s\" is not keep "
                                 "or refund", m->reserve_expiry);
    in->expiry_refund = strcmp(m->reserve_expiry, "refund") == 0;
    if ((rc = policy_check_fields(in->name, in->apps, in->napps, in->description,
                                  in->failure_mode, err)) != PERMITD_OK)
        return rc;
    return policy_check_limits(m->algorithm, (long long)m->max_permits, m->rate, m->window,
                               m->lease_ttl, &in->limits, err);
}

/* The algorithm's own view (limiter_inspect()'s more) into b: copied into
 * the call's memory. */
static int bucket_more(struct connect_call *call, const struct limiter_inspection *m,
                       Permit__V1__Bucket *b, struct permitd_error *err)
{
    b->algorithm = connect_call_strdup(call, m->algorithm ? m->algorithm : "");
    b->window_reset_after_ms = m->window_reset_after_ms;
    b->events = m->events;
    if (b->algorithm == NULL ||
        (m->n_ages > 0 &&
         (b->event_ages_ms = connect_call_alloc(call, m->n_ages * sizeof(int64_t))) == NULL) ||
        (m->n_leases > 0 &&
         (b->leases = connect_call_alloc(call, m->n_leases * sizeof(*b->leases))) == NULL))
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; i < m->n_ages; i++)
        b->event_ages_ms[i] = m->event_ages_ms[i];
    b->n_event_ages_ms = m->n_ages;
    for (size_t i = 0; i < m->n_leases; i++) {
        Permit__V1__Lease *x = connect_call_alloc(call, sizeof(*x));
        if (x == NULL)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        permit__v1__lease__init(x);
        if ((x->id_prefix = connect_call_strdup(call, m->leases[i].id_prefix)) == NULL)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        x->permits = m->leases[i].permits;
        x->expires_after_ms = m->leases[i].expires_after_ms;
        b->leases[b->n_leases++] = x;
    }
    return PERMITD_OK;
}

/* One bucket as the admin API answers it; detail: with its algorithm's
 * own view (GetBucket, ResetBucket), not only the gauge's fields
 * (ListPolicies). */
static int bucket_proto(struct policysvc *a, struct connect_call *call, const char *name,
                        const char *key, int detail, Permit__V1__Bucket **out,
                        struct permitd_error *err)
{
    struct limiter_result r;
    struct limiter_inspection more;
    Permit__V1__Bucket *b;
    int rc;

    *out = NULL;
    if ((rc = limiter_inspect(a->limiter, name, key, deadline(), &r, detail ? &more : NULL,
                              err)) != PERMITD_OK)
        return rc;
    b = connect_call_alloc(call, sizeof(*b));
    if (b == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    permit__v1__bucket__init(b);
    b->policy = connect_call_strdup(call, name);
    b->key = connect_call_strdup(call, key ? key : "");
    if (b->policy == NULL || b->key == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    b->tokens = (double)r.tokens_micro / 1e6;
    b->remaining = r.remaining;
    b->limit = r.limit;
    b->reset_after_ms = r.reset_after_ms;
    if (detail && (rc = bucket_more(call, &more, b, err)) != PERMITD_OK)
        return rc;
    if (detail && (rc = limiter_reserve_outstanding(a->limiter, name, deadline(),
                                                    &b->reservations, &b->reserved_permits,
                                                    &b->oldest_reservation_ms, err)) != PERMITD_OK)
        return rc;
    *out = b;
    return PERMITD_OK;
}

/* After MySQL took a change: Redis too, now. A failure here is reported
 * but the change stands (MySQL is the truth); the next sync pass heals. */
static void write_through(struct policysvc *a, const struct store_policy *p)
{
    struct permitd_error err = {0, ""};

    if (a->sync != NULL && sync_write_policy(a->sync, p, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "write-through to redis failed; the next sync pass will retry",
                "policy=%s error=%s", p->name, log_q(err.message));
}

/* ---- PolicyService ---- */

/* The rows the sync skips (sync_skipped()), for the policy list's notice:
 * copied into the call's memory. */
static int skipped_rows(struct policysvc *a, struct connect_call *call,
                        Permit__V1__ListPoliciesResponse *rs, struct permitd_error *err)
{
    char **rows = NULL;
    size_t n = 0;
    int rc = PERMITD_OK;

    if (sync_skipped(a->sync, &rows, &n) != PERMITD_OK ||
        (n > 0 && (rs->skipped_rows = connect_call_alloc(call, n * sizeof(char *))) == NULL))
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; rc == PERMITD_OK && i < n; i++) {
        if ((rs->skipped_rows[i] = connect_call_strdup(call, rows[i])) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        else
            rs->n_skipped_rows++;
    }
    sync_skipped_free(rows, n);
    return rc;
}

/* The gauges of a page: every policy's shared bucket in one pipelined
 * Redis round trip (limiter_inspect_batch()). A policy not yet in Redis
 * (sync lag), a disabled one, or Redis down: an empty gauge with the
 * limit, not a failed table. */
static int page_buckets(struct policysvc *a, struct connect_call *call,
                        const struct listing_page *pg,
                        Permit__V1__ListPoliciesResponse *rs, struct permitd_error *err)
{
    struct limiter_result *res = calloc(pg->n + 1, sizeof(*res));
    struct permitd_error *errs = calloc(pg->n + 1, sizeof(*errs)), whole = {0, ""};
    const char **names = calloc(pg->n + 1, sizeof(*names));
    int rc = PERMITD_OK, got;

    rs->buckets = connect_call_alloc(call, (pg->n + 1) * sizeof(*rs->buckets));
    if (res == NULL || errs == NULL || names == NULL || rs->buckets == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < pg->n; i++)
        names[i] = pg->v[i].name;
    got = limiter_inspect_batch(a->limiter, names, pg->n, deadline(), res, errs, &whole) ==
          PERMITD_OK;
    /* Redis not answering is said once for the page (issue 23): a gauge
     * at 0 would read as an empty bucket. */
    for (size_t i = 0; got && i < pg->n && whole.code == PERMITD_OK; i++)
        if (errs[i].code == PERMITD_EUNAVAILABLE || errs[i].code == PERMITD_EDEADLINE)
            whole = errs[i];
    if (pg->n > 0 && whole.code != PERMITD_OK &&
        (rs->buckets_error = connect_call_strdup(call, whole.message)) == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < pg->n; i++) {
        Permit__V1__Bucket *b = connect_call_alloc(call, sizeof(*b));
        if (b == NULL) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            goto done;
        }
        permit__v1__bucket__init(b);
        b->policy = rs->policies[i]->name;
        b->key = "";
        b->limit = pg->v[i].max_permits;
        if (got && errs[i].code == PERMITD_OK) {
            b->tokens = (double)res[i].tokens_micro / 1e6;
            b->remaining = res[i].remaining;
            b->limit = res[i].limit;
            b->reset_after_ms = res[i].reset_after_ms;
        }
        rs->buckets[rs->n_buckets++] = b;
    }
done:
    free(res);
    free(errs);
    free(names);
    return rc;
}

/* One page of the policy list (control/listing.c makes it). */
static int list_policies(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                         ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct policysvc *a = ud;
    const Permit__V1__ListPoliciesRequest *rq = (const void *)in_;
    Permit__V1__ListPoliciesResponse *rs = (void *)out_;
    const struct listing_sources src = {a->store, a->store_lock, a->stats, a->limiter,
                                        a->traffic, &a->traffic_lock};
    const struct listing_query q = {rq->page_size, rq->page_token, rq->filter, rq->order_by,
                                    rq->descending};
    struct listing_page pg;
    struct store_user user;
    int rc;

    if ((rc = session_authenticate(a->sessions, call, ADMIN_VIEWER, &user, err)) != PERMITD_OK)
        return rc;
    if ((rc = listing_page(&src, &q, deadline(), &pg, err)) != PERMITD_OK)
        goto done;
    rs->total_size = (int32_t)pg.total;
    rs->offset = (int32_t)pg.offset;
    if (pg.next[0] != '\0' && (rs->next_page_token = connect_call_strdup(call, pg.next)) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rs->policies = connect_call_alloc(call, (pg.n + 1) * sizeof(*rs->policies));
    if (rc != PERMITD_OK || rs->policies == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    if (a->sync != NULL && (rc = skipped_rows(a, call, rs, err)) != PERMITD_OK)
        goto done;
    for (size_t i = 0; i < pg.n; i++) {
        tidy_rate(pg.v[i].rate);
        if ((rs->policies[i] = to_proto(call, &pg.v[i])) == NULL) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            goto done;
        }
        rs->n_policies++;
    }
    if (rq->include_buckets)
        rc = page_buckets(a, call, &pg, rs, err);
done:
    listing_page_clear(&pg);
    return rc;
}

static int get_policy(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct policysvc *a = ud;
    const Permit__V1__GetPolicyRequest *rq = (const void *)in_;
    Permit__V1__GetPolicyResponse *rs = (void *)out_;
    struct store_policy p;
    struct store_user user;
    char refs[1024];
    int rc, count = 0;

    if ((rc = session_authenticate(a->sessions, call, ADMIN_VIEWER, &user, err)) != PERMITD_OK ||
        (rc = policy_check_name("name", rq->name, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(a->store_lock);
    rc = store_policy_get(a->store, rq->name, &p, err);
    if (rc == PERMITD_OK &&
        (rc = store_policy_refs(a->store, rq->name, refs, sizeof(refs), &count, err)) != PERMITD_OK)
        store_policy_clear(&p);
    pthread_mutex_unlock(a->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    tidy_rate(p.rate);
    rs->policy = to_proto(call, &p);
    store_policy_clear(&p);
    rs->references = connect_call_strdup(call, refs);
    rs->reference_count = count;
    return rs->policy && rs->references ? PERMITD_OK : permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
}

/* Whether the committed policy p is what the write `in` makes of it:
 * every editable field equal (the rate as a number: MySQL prints
 * "0.500000000000" for "0.5"; the apps as a set). */
static int same_fields(const struct store_policy *p, const struct store_policy_input *in)
{
    const struct policy_limits *l = &in->limits;
    size_t n = 0;
    int same;

    if (strcmp(p->name, in->name) != 0 || p->max_permits != l->max_permits ||
        p->algorithm != l->algorithm || p->window_ms != l->window_ms ||
        p->calendar != l->calendar || p->lease_ms != l->lease_ms ||
        (p->enabled != 0) != (in->enabled != 0) || (p->colocate != 0) != (in->colocate != 0) ||
        (p->shadow != 0) != (in->shadow != 0) ||
        p->reserve_ttl_ms != in->reserve_ttl_ms || p->debt_floor != in->debt_floor ||
        (p->expiry_refund != 0) != (in->expiry_refund != 0) ||
        strcmp(p->failure_mode, in->failure_mode) != 0 ||
        strcmp(p->description ? p->description : "", in->description ? in->description : "") != 0)
        return 0;
    const char *rate = l->rate ? l->rate : "";

    if ((rate[0] != '\0' || p->rate[0] != '\0') &&
        (rate[0] == '\0' || p->rate[0] == '\0' || strtod(rate, NULL) != strtod(p->rate, NULL)))
        return 0;
    /* The apps, as sets: each given one is among the committed ones
     * (store.c keeps them unique, comma-separated), and the given ones
     * are as many distinct names as the committed list holds. */
    const char *apps = p->apps ? p->apps : "";
    size_t committed = apps[0] ? 1 : 0;
    for (const char *c = apps; *c; c++)
        committed += *c == ',';
    same = 1;
    for (size_t i = 0; i < in->napps && same; i++) {
        size_t len = strlen(in->apps[i]);
        int dup = 0, found = 0;
        for (size_t j = 0; j < i && !dup; j++)
            dup = strcmp(in->apps[i], in->apps[j]) == 0;
        n += !dup;
        for (const char *c = apps; *c && !found; c = strchr(c, ',') ? strchr(c, ',') + 1 : "")
            found = strncmp(c, in->apps[i], len) == 0 && (c[len] == ',' || c[len] == '\0');
        same = found;
    }
    return same && n == committed;
}

/* A create answered already_exists, or an update answered aborted: is it
 * the retry of a write that was committed (a client that timed out and
 * sent it again)? It is when the policy as committed now is exactly what
 * this write makes (same_fields()), by the same editor, and nothing came
 * after it: an update's committed version is the one it was sent with + 1,
 * a create's is still 1. Then it answers success with that policy (in *p,
 * to clear with store_policy_clear()) and returns 1; else 0 and the
 * caller's error stands. Under store_lock. */
static int retried_write(struct policysvc *a, const struct store_policy_input *in, uint64_t version,
                         const char *username, struct store_policy *p)
{
    struct permitd_error why = {0, ""};

    if (store_policy_get(a->store, in->name, p, &why) != PERMITD_OK)
        return 0;
    if (p->version == version + 1 && strcmp(p->updated_by, username) == 0 &&
        (version != 0 || strcmp(p->created_by, username) == 0) && same_fields(p, in))
        return 1;
    store_policy_clear(p);
    return 0;
}

/* Create and update: validate, write to MySQL, write through, answer. */
static int write_policy(struct policysvc *a, struct connect_call *call, const Permit__V1__Policy *m,
                        int create, Permit__V1__Policy **out, struct permitd_error *err)
{
    struct store_policy_input in;
    struct store_policy p;
    struct store_user user;
    int rc, applied = 0;

    if ((rc = session_authenticate(a->sessions, call, ADMIN_EDITOR, &user, err)) != PERMITD_OK ||
        (rc = from_proto(m, &in, err)) != PERMITD_OK)
        return rc;
    if (!create && m->version <= 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "version: send the version you edited (from GetPolicy)");
    pthread_mutex_lock(a->store_lock);
    rc = create ? store_policy_create(a->store, &in, user.username, &p, err)
                : store_policy_update(a->store, &in, (uint64_t)m->version, user.username, &p, err);
    if ((rc == PERMITD_EABORTED && !create) || (rc == PERMITD_EEXIST && create))
        applied = retried_write(a, &in, create ? 0 : (uint64_t)m->version, user.username, &p);
    pthread_mutex_unlock(a->store_lock);
    if (applied) {
        log_msg(LOG_LEVEL_INFO, create ? "policy create retried: already applied"
                                       : "policy update retried: already applied",
                "policy=%s version=%" PRIu64 " by=%s", p.name, p.version, user.username);
        tidy_rate(p.rate);
        *out = to_proto(call, &p);
        store_policy_clear(&p);
        return *out ? PERMITD_OK : permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    if (rc != PERMITD_OK)
        return rc;
    write_through(a, &p);
    log_msg(LOG_LEVEL_INFO, create ? "policy created" : "policy updated",
            "policy=%s version=%" PRIu64 " by=%s", p.name, p.version, user.username);
    tidy_rate(p.rate);
    *out = to_proto(call, &p);
    store_policy_clear(&p);
    return *out ? PERMITD_OK : permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
}

static int create_policy(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                         ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    const Permit__V1__CreatePolicyRequest *rq = (const void *)in_;
    Permit__V1__CreatePolicyResponse *rs = (void *)out_;

    return write_policy(ud, call, rq->policy, 1, &rs->policy, err);
}

static int update_policy(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                         ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    const Permit__V1__UpdatePolicyRequest *rq = (const void *)in_;
    Permit__V1__UpdatePolicyResponse *rs = (void *)out_;

    return write_policy(ud, call, rq->policy, 0, &rs->policy, err);
}

static int delete_policy(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                         ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct policysvc *a = ud;
    const Permit__V1__DeletePolicyRequest *rq = (const void *)in_;
    struct store_user user;
    struct permitd_error why = {0, ""};
    int rc;

    if ((rc = session_authenticate(a->sessions, call, ADMIN_EDITOR, &user, err)) != PERMITD_OK ||
        (rc = policy_check_name("name", rq->name, err)) != PERMITD_OK)
        return rc;
    if (rq->version < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "version: %" PRId64 " is negative", rq->version);
    pthread_mutex_lock(a->store_lock);
    rc = store_policy_delete(a->store, rq->name, (uint64_t)rq->version, rq->remove_references,
                             user.username, err);
    /* Gone: the retry of this very delete (a client that timed out after
     * it was committed) if the name's last change is a delete by this
     * editor, of the version sent, less than POLICYSVC_DELETE_RETRY_S ago.
     * That answers success; a name that never was, or was deleted by
     * someone else, another version or long ago, stays not_found. The
     * first try removed it from Redis (or the sync does). */
    if (rc == PERMITD_ENOTFOUND &&
        store_policy_deleted(a->store, rq->name, (uint64_t)rq->version, user.username,
                             POLICYSVC_DELETE_RETRY_S, &why) == PERMITD_OK) {
        pthread_mutex_unlock(a->store_lock);
        log_msg(LOG_LEVEL_INFO, "policy delete retried: already applied", "policy=%s by=%s",
                rq->name, user.username);
        return PERMITD_OK;
    }
    pthread_mutex_unlock(a->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    limiter_forget(a->limiter, rq->name);
    /* Its overrides went with it (policyrefs_remove()) or it had none:
     * every instance (this one too, subscribed) drops what it holds of the
     * name, so a policy made again under it starts with none. */
    if (overridesync_publish(a->cfg, a->redis, rq->name, &why) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "override change notice not sent after a policy delete; "
                "instances drop its overrides at their next sync pass", "policy=%s error=%s",
                rq->name, log_q(why.message));
    if (a->sync != NULL && sync_remove_policy(a->sync, rq->name, &why) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "removing a deleted policy from redis failed; the next sync pass will",
                "policy=%s error=%s", rq->name, log_q(why.message));
    log_msg(LOG_LEVEL_INFO, "policy deleted", "policy=%s by=%s", rq->name, user.username);
    return PERMITD_OK;
}

static int list_policy_history(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                               ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct policysvc *a = ud;
    const Permit__V1__ListPolicyHistoryRequest *rq = (const void *)in_;
    Permit__V1__ListPolicyHistoryResponse *rs = (void *)out_;
    struct store_change *v = NULL;
    struct store_user user;
    size_t n = 0;
    int rc, limit = rq->limit <= 0 ? 100 : (rq->limit > 1000 ? 1000 : rq->limit);

    if ((rc = session_authenticate(a->sessions, call, ADMIN_VIEWER, &user, err)) != PERMITD_OK ||
        (rc = policy_check_name("name", rq->name, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(a->store_lock);
    rc = store_history(a->store, rq->name, limit, &v, &n, err);
    pthread_mutex_unlock(a->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    rs->changes = connect_call_alloc(call, (n + 1) * sizeof(*rs->changes));
    for (size_t i = 0; rs->changes != NULL && i < n; i++) {
        Permit__V1__PolicyChange *c = connect_call_alloc(call, sizeof(*c));
        if (c == NULL)
            break;
        permit__v1__policy_change__init(c);
        c->action = connect_call_strdup(call, v[i].action);
        c->actor = connect_call_strdup(call, v[i].actor);
        c->changed_at = connect_call_strdup(call, v[i].changed_at);
        c->old_value = connect_call_strdup(call, v[i].old_value);
        c->new_value = connect_call_strdup(call, v[i].new_value);
        if (!c->action || !c->actor || !c->changed_at || !c->old_value || !c->new_value)
            break;
        rs->changes[rs->n_changes++] = c;
    }
    store_history_free(v, n);
    if (rs->n_changes != n)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    return PERMITD_OK;
}

static int get_bucket(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct policysvc *a = ud;
    const Permit__V1__GetBucketRequest *rq = (const void *)in_;
    Permit__V1__GetBucketResponse *rs = (void *)out_;
    struct store_user user;
    int rc;

    if ((rc = session_authenticate(a->sessions, call, ADMIN_VIEWER, &user, err)) != PERMITD_OK)
        return rc;
    return bucket_proto(a, call, rq->name, rq->key, 1, &rs->bucket, err);
}

static int reset_bucket(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                        ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct policysvc *a = ud;
    const Permit__V1__ResetBucketRequest *rq = (const void *)in_;
    Permit__V1__ResetBucketResponse *rs = (void *)out_;
    struct store_user user;

    Permit__V1__Bucket *before;
    const ProtobufCFieldDescriptor *always[4];
    char *json;
    size_t len;
    int rc;

    /* Audited before it is done, with the bucket as the inspector saw it
     * (issue 40): no audit row, no reset. */
    if ((rc = session_authenticate(a->sessions, call, ADMIN_EDITOR, &user, err)) != PERMITD_OK ||
        (rc = bucket_proto(a, call, rq->name, rq->key, 1, &before, err)) != PERMITD_OK)
        return rc;
    always[0] = protobuf_c_message_descriptor_get_field_by_name(&permit__v1__bucket__descriptor,
                                                                "tokens");
    always[1] = protobuf_c_message_descriptor_get_field_by_name(&permit__v1__bucket__descriptor,
                                                                "remaining");
    always[2] = protobuf_c_message_descriptor_get_field_by_name(&permit__v1__bucket__descriptor,
                                                                "limit");
    always[3] = NULL;
    if ((json = json_encode_always(&before->base, always, NULL, &len)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    pthread_mutex_lock(a->store_lock);
    rc = store_bucket_audit(a->store, rq->name, rq->key, user.username, json, err);
    pthread_mutex_unlock(a->store_lock);
    free(json);
    if (rc != PERMITD_OK ||
        (rc = limiter_reset(a->limiter, rq->name, rq->key, deadline(), err)) != PERMITD_OK)
        return rc;
    log_msg(LOG_LEVEL_INFO, "bucket reset", "policy=%s key=%s by=%s remaining_before=%lld",
            rq->name, log_q(rq->key), user.username, (long long)before->remaining);
    return bucket_proto(a, call, rq->name, rq->key, 1, &rs->bucket, err);
}

static int get_policy_stats(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                            ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct policysvc *a = ud;
    const Permit__V1__GetPolicyStatsRequest *rq = (const void *)in_;
    Permit__V1__GetPolicyStatsResponse *rs = (void *)out_;
    struct store_user user;
    size_t seconds = rq->seconds <= 0 ? STATS_SECONDS : (size_t)rq->seconds;
    int rc, known = 0;

    if ((rc = session_authenticate(a->sessions, call, ADMIN_VIEWER, &user, err)) != PERMITD_OK ||
        (rc = policy_check_name("name", rq->name, err)) != PERMITD_OK)
        return rc;
    if (seconds > STATS_SECONDS)
        seconds = STATS_SECONDS;
    rs->allowed = connect_call_alloc(call, seconds * sizeof(int64_t));
    rs->denied = connect_call_alloc(call, seconds * sizeof(int64_t));
    rs->shadow_denied = connect_call_alloc(call, seconds * sizeof(int64_t));
    if (rs->allowed == NULL || rs->denied == NULL || rs->shadow_denied == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rs->n_allowed = rs->n_denied =
        stats_series(a->stats, rq->name, seconds, &rs->end_unix, rs->allowed, rs->denied, &known);
    rs->n_shadow_denied = stats_shadow_series_at(a->stats, rq->name, seconds, rs->end_unix,
                                                 rs->shadow_denied);
    rs->known = known;
    /* The settle of its buckets after a limit edit, for the policy page
     * (issue 22): left out when Redis cannot say, the series still answered. */
    {
        struct settle_policy_state ss;
        struct permitd_error serr = {0, ""};
        Permit__V1__SettleState *m;

        if (settle_policy_state(a->redis, a->cfg->redis_prefix, rq->name, deadline(), &ss,
                                &serr) == PERMITD_OK &&
            (m = connect_call_alloc(call, sizeof(*m))) != NULL) {
            permit__v1__settle_state__init(m);
            m->pending = ss.pending;
            m->running = ss.running;
            m->keys_done = (int64_t)ss.keys_done;
            m->started_unix_ms = ss.started_ms;
            m->finished_unix_ms = ss.finished_ms;
            m->duration_ms = ss.duration_ms;
            rs->settle = m;
        }
    }
    return PERMITD_OK;
}

/* A policy's outstanding reservations (issue 38) for its page: the
 * reservation index read through limiter_reserve_outstanding(), on the
 * admin RPC pool's thread. */
static int get_policy_reservations(void *ud, struct connect_call *call,
                                   const ProtobufCMessage *in_, ProtobufCMessage *out_,
                                   char *scratch, struct permitd_error *err)
{
    struct policysvc *a = ud;
    const Permit__V1__GetPolicyReservationsRequest *rq = (const void *)in_;
    Permit__V1__GetPolicyReservationsResponse *rs = (void *)out_;
    struct store_user user;
    int rc;

    (void)scratch;
    if ((rc = session_authenticate(a->sessions, call, ADMIN_VIEWER, &user, err)) != PERMITD_OK ||
        (rc = policy_check_name("name", rq->name, err)) != PERMITD_OK)
        return rc;
    return limiter_reserve_outstanding(a->limiter, rq->name, deadline(), &rs->count,
                                       &rs->amount, &rs->oldest_ms, err);
}

const struct connect_method policysvc_methods[] = {
    ADMIN_METHOD("PolicyService", "ListPolicies", list_policies, 1, list_policies),
    ADMIN_METHOD("PolicyService", "GetPolicy", get_policy, 1, get_policy),
    ADMIN_METHOD("PolicyService", "CreatePolicy", create_policy, 0, create_policy),
    ADMIN_METHOD("PolicyService", "UpdatePolicy", update_policy, 0, update_policy),
    ADMIN_METHOD("PolicyService", "DeletePolicy", delete_policy, 0, delete_policy),
    ADMIN_METHOD("PolicyService", "ListPolicyHistory", list_policy_history, 1,
                 list_policy_history),
    ADMIN_METHOD("PolicyService", "GetBucket", get_bucket, 1, get_bucket),
    ADMIN_METHOD("PolicyService", "ResetBucket", reset_bucket, 0, reset_bucket),
    ADMIN_METHOD("PolicyService", "GetPolicyStats", get_policy_stats, 1, get_policy_stats),
    ADMIN_METHOD("PolicyService", "GetPolicyReservations", get_policy_reservations, 1,
                 get_policy_reservations),
    {NULL, NULL, NULL, 0, NULL},
};
