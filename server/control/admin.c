/*
 * admin.c - what administrators reach: the admin UI's files, the
 * PolicyService and AdminAuthService RPCs (over connect.c), /healthz,
 * /readyz and /metrics (health.c), the other control modules' services
 * (admin_add_methods(): AppService, UserService, AuditService, ...); and the `permitd
 * admin` command line's dispatch (add-user: usersvc.c; apps: appsvc.c).
 *
 * Who may do what is decided here, for every RPC, not only in the UI:
 *   - every RPC but Login needs a live session (cookie permitd_session,
 *     HttpOnly, SameSite=Strict); viewers may call the read-only ones,
 *     editors all of them, and admins also manage users (usersvc.c);
 *   - a POST must carry an Origin equal to this listener's own origin
 *     (scheme://Host), and every request but the probes a Host that is an
 *     IP address, localhost or a name --admin-hosts lists, whatever the
 *     bind (which stops DNS rebinding), so a page on another site cannot make a
 *     logged-in browser change anything, and no CORS header is ever sent; connect.c
 *     already refuses any content type but JSON and proto, which a plain
 *     HTML form cannot send;
 *   - every login spends, before its password is checked, a try from
 *     permitd's own token buckets: one for the user name from the client
 *     address (policy "_login": 5 tries, then one every 10 s) and one for
 *     the user name from every address together ("_login_account":
 *     --login-account-tries a minute); the right password gives them back.
 *     So password guessing is slowed by the very mechanism permitd sells,
 *     logins checked at once never outnumber the tries, and many addresses
 *     guessing one account share one small budget that refills quickly;
 *   - passwords are checked on verifier.c's threads, never on the admin
 *     listener's one loop thread: a login is deferred and answered when its
 *     check comes back, and a login that finds --login-queue checks already
 *     waiting is answered resource_exhausted at once, so a flood of logins
 *     from anywhere costs bounded argon2 work and /readyz never waits on it.
 *
 * Writes go to MySQL first (store.c: one transaction with the audit row),
 * then straight through to Redis (sync.c), so the next Acquire after an
 * RPC returns sees the change. The store connection is used from the admin
 * listener's threads under one mutex: admin traffic is light.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "control/admin.h"
#include "control/appsvc.h"
#include "control/hotkeysvc.h"
#include "control/usersvc.h"
#include "control/auth.h"
#include "core/clock.h"
#include "transport/connect.h"
#include "core/embed.h"
#include "control/health.h"
#include "control/listing.h"
#include "control/settle.h"
#include "core/log.h"
#include "core/pool.h"
#include "permit/v1/admin.pb-c.h"
#include "stores/policy.h"
#include "stores/redis.h"
#include "stores/store.h"
#include "control/verifier.h"

#define ADMIN_REDIS_DEADLINE_MS 1000
#define SESSION_TTL_S (12 * 3600)
#define LOGIN_POLICY "_login"
#define LOGIN_TRIES 5
#define LOGIN_RATE "0.1"
#define LOGIN_ACCOUNT_POLICY "_login_account"
#define LOGIN_PATH "/permit.v1.AdminAuthService/Login"
#define ADMIN_HSTS_MAX_AGE_S (365 * 24 * 3600)
/* The admin RPCs' pool (core/pool.h): two threads, so one slow page does not
 * hold the next editor's RPC either; 64 waiting at most. */
#define ADMIN_RPC_WORKERS 2
#define ADMIN_RPC_QUEUE 64
/* How long a DeletePolicy that was committed is still told from a delete
 * of a policy that never existed, for its retry (delete_policy()): a
 * client's retries come within seconds; ten minutes covers a slow one. */
#define ADMIN_DELETE_RETRY_S 600

/* The roles, in rank order: each may do what the ones below it may. */
enum role { ROLE_VIEWER = ADMIN_VIEWER, ROLE_EDITOR = ADMIN_EDITOR, ROLE_ADMIN = ADMIN_ADMIN };

/* The most other services served here (admin_add_methods()). */
#define ADMIN_SERVICES_MAX 12

struct admin {
    const struct config *cfg;
    struct redis *redis;
    struct limiter *limiter;
    struct sync *sync;
    struct stats *stats;
    struct store *store;            /* NULL without --mysql-url */
    struct verifier *verifier;      /* password checks; NULL without a store */
    struct pool *rpcs;              /* the RPCs run here, off the listener's thread */
    struct health health;           /* what /readyz and /metrics report on */
    pthread_mutex_t store_lock;
    struct connect_limits limits;
    struct {
        const struct connect_method *methods;
        void *ud;
    } services[ADMIN_SERVICES_MAX]; /* admin_add_methods() */
    size_t nservices;
};

/* What each admin listener worker's loop has (admin_worker_open()): the
 * inboxes through which password checks and RPCs run elsewhere come back. */
struct admin_worker {
    struct pool_inbox *logins;      /* NULL without a store */
    struct pool_inbox *rpcs;
};

int admin_new(const struct config *cfg, struct redis *redis, struct limiter *limiter,
              struct sync *sync, struct stats *stats, struct admin **out,
              struct permitd_error *err)
{
    struct admin *a = calloc(1, sizeof(*a));
    int rc;

    *out = NULL;
    if (a == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    a->cfg = cfg;
    a->redis = redis;
    a->limiter = limiter;
    a->sync = sync;
    a->stats = stats;
    a->limits.max_body_bytes = (size_t)cfg->max_body_bytes;
    a->health.redis = redis;
    a->health.limiter = limiter;
    a->health.sync = sync;
    a->health.stats = stats;
    if (cfg->mysql_url[0] != '\0' && (rc = store_new(cfg, &a->store, err)) != PERMITD_OK) {
        free(a);
        return rc;
    }
    if (a->store != NULL &&
        (rc = verifier_new(cfg->login_workers, cfg->login_queue, &a->verifier, err)) != PERMITD_OK) {
        store_free(a->store);
        free(a);
        return rc;
    }
    if ((rc = pool_new(ADMIN_RPC_WORKERS, ADMIN_RPC_QUEUE, "admin rpc pool", &a->rpcs,
                       err)) != PERMITD_OK) {
        verifier_free(a->verifier);
        store_free(a->store);
        free(a);
        return rc;
    }
    a->health.verifier = a->verifier;
    pthread_mutex_init(&a->store_lock, NULL);
    *out = a;
    return PERMITD_OK;
}

void admin_free(struct admin *a)
{
    if (a == NULL)
        return;
    verifier_free(a->verifier);
    pool_free(a->rpcs);
    store_free(a->store);
    pthread_mutex_destroy(&a->store_lock);
    free(a);
}

static int64_t deadline(void)
{
    return clock_now_us() + (int64_t)ADMIN_REDIS_DEADLINE_MS * 1000;
}

/* ---- sessions and roles ---- */

static int need_store(struct admin *a, struct permitd_error *err)
{
    if (a->store == NULL)
        return permitd_error_set(err, PERMITD_EPRECONDITION,
                                 "no policy store: start permitd with --mysql-url "
                                 "(PERMITD_MYSQL_URL) to administer policies");
    return PERMITD_OK;
}

/* A role's rank; an unknown one ranks below viewer. */
static int rank(const char *role)
{
    if (strcmp(role, "admin") == 0)
        return ROLE_ADMIN;
    if (strcmp(role, "editor") == 0)
        return ROLE_EDITOR;
    return strcmp(role, "viewer") == 0 ? ROLE_VIEWER : -1;
}

/* Finds the caller's session and checks its role; fills *user. */
static int authenticate(struct admin *a, struct connect_call *call, enum role need,
                        struct store_user *user, struct permitd_error *err)
{
    char token[AUTH_TOKEN_LEN + 1];
    int rc;

    if ((rc = need_store(a, err)) != PERMITD_OK)
        return rc;
    if (auth_cookie_token(http_request_header(call->http, "Cookie"), token, sizeof(token)) != 0)
        return permitd_error_set(err, PERMITD_EUNAUTHENTICATED, "not logged in");
    pthread_mutex_lock(&a->store_lock);
    rc = store_session_user(a->store, token, user, err);
    pthread_mutex_unlock(&a->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    if (rank(user->role) >= (int)need)
        return PERMITD_OK;
    if (need == ROLE_ADMIN)
        return permitd_error_set(err, PERMITD_EPERM, "%s is a %s: only admins may manage users",
                                 user->username, user->role);
    return permitd_error_set(err, PERMITD_EPERM,
                             "%s is a %s: only editors and admins may change policies, apps "
                             "or buckets", user->username, user->role);
}

int admin_authenticate(struct admin *a, struct connect_call *call, int need, char *user,
                       size_t len, struct permitd_error *err)
{
    struct store_user u;
    int rc = authenticate(a, call,
                          need >= ADMIN_ADMIN ? ROLE_ADMIN : need ? ROLE_EDITOR : ROLE_VIEWER,
                          &u, err);

    if (rc == PERMITD_OK)
        snprintf(user, len, "%s", u.username);
    return rc;
}

void admin_set_fleet(struct admin *a, struct fleet *fleet)
{
    a->health.fleet = fleet;
}

void admin_set_appkeys(struct admin *a, struct appkeys *keys)
{
    a->health.appkeys = keys;
}

int admin_add_methods(struct admin *a, const struct connect_method *methods, void *ud,
                      struct permitd_error *err)
{
    if (a->nservices == ADMIN_SERVICES_MAX)
        return permitd_error_set(err, PERMITD_EEXHAUSTED, "admin listener: no room for the "
                                 "service of %.200s (%d services at most)", methods[0].path,
                                 ADMIN_SERVICES_MAX);
    a->services[a->nservices].methods = methods;
    a->services[a->nservices++].ud = ud;
    return PERMITD_OK;
}

/* ---- conversions between store.c and the protobuf messages ---- */

static Permit__V1__Policy *to_proto(struct connect_call *call, const struct store_policy *p)
{
    Permit__V1__Policy *m = connect_call_alloc(call, sizeof(*m));
    char window[POLICY_DURATION_TEXT], lease[POLICY_DURATION_TEXT] = "";
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
        !m->lease_ttl)
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
static int bucket_proto(struct admin *a, struct connect_call *call, const char *name,
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
    *out = b;
    return PERMITD_OK;
}

/* After MySQL took a change: Redis too, now. A failure here is reported
 * but the change stands (MySQL is the truth); the next sync pass heals. */
static void write_through(struct admin *a, const struct store_policy *p)
{
    struct permitd_error err = {0, ""};

    if (a->sync != NULL && sync_write_policy(a->sync, p, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "write-through to redis failed; the next sync pass will retry",
                "policy=%s error=%s", p->name, log_q(err.message));
}

/* ---- PolicyService ---- */

/* The rows the sync skips (sync_skipped()), for the policy list's notice:
 * copied into the call's memory. */
static int skipped_rows(struct admin *a, struct connect_call *call,
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
static int page_buckets(struct admin *a, struct connect_call *call, const struct listing_page *pg,
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
    struct admin *a = ud;
    const Permit__V1__ListPoliciesRequest *rq = (const void *)in_;
    Permit__V1__ListPoliciesResponse *rs = (void *)out_;
    const struct listing_sources src = {a->store, &a->store_lock, a->stats, a->limiter};
    const struct listing_query q = {rq->page_size, rq->page_token, rq->filter, rq->order_by,
                                    rq->descending};
    struct listing_page pg;
    struct store_user user;
    int rc;

    if ((rc = authenticate(a, call, ROLE_VIEWER, &user, err)) != PERMITD_OK)
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
    struct admin *a = ud;
    const Permit__V1__GetPolicyRequest *rq = (const void *)in_;
    Permit__V1__GetPolicyResponse *rs = (void *)out_;
    struct store_policy p;
    struct store_user user;
    int rc;

    if ((rc = authenticate(a, call, ROLE_VIEWER, &user, err)) != PERMITD_OK ||
        (rc = policy_check_name("name", rq->name, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&a->store_lock);
    rc = store_policy_get(a->store, rq->name, &p, err);
    pthread_mutex_unlock(&a->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    tidy_rate(p.rate);
    rs->policy = to_proto(call, &p);
    store_policy_clear(&p);
    return rs->policy ? PERMITD_OK : permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
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
static int retried_write(struct admin *a, const struct store_policy_input *in, uint64_t version,
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
static int write_policy(struct admin *a, struct connect_call *call, const Permit__V1__Policy *m,
                        int create, Permit__V1__Policy **out, struct permitd_error *err)
{
    struct store_policy_input in;
    struct store_policy p;
    struct store_user user;
    int rc, applied = 0;

    if ((rc = authenticate(a, call, ROLE_EDITOR, &user, err)) != PERMITD_OK ||
        (rc = from_proto(m, &in, err)) != PERMITD_OK)
        return rc;
    if (!create && m->version <= 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "version: send the version you edited (from GetPolicy)");
    pthread_mutex_lock(&a->store_lock);
    rc = create ? store_policy_create(a->store, &in, user.username, &p, err)
                : store_policy_update(a->store, &in, (uint64_t)m->version, user.username, &p, err);
    if ((rc == PERMITD_EABORTED && !create) || (rc == PERMITD_EEXIST && create))
        applied = retried_write(a, &in, create ? 0 : (uint64_t)m->version, user.username, &p);
    pthread_mutex_unlock(&a->store_lock);
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
    struct admin *a = ud;
    const Permit__V1__DeletePolicyRequest *rq = (const void *)in_;
    struct store_user user;
    struct permitd_error why = {0, ""};
    int rc;

    if ((rc = authenticate(a, call, ROLE_EDITOR, &user, err)) != PERMITD_OK ||
        (rc = policy_check_name("name", rq->name, err)) != PERMITD_OK)
        return rc;
    if (rq->version < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "version: %" PRId64 " is negative", rq->version);
    pthread_mutex_lock(&a->store_lock);
    rc = store_policy_delete(a->store, rq->name, (uint64_t)rq->version, user.username, err);
    /* Gone: the retry of this very delete (a client that timed out after
     * it was committed) if the name's last change is a delete by this
     * editor, of the version sent, less than ADMIN_DELETE_RETRY_S ago.
     * That answers success; a name that never was, or was deleted by
     * someone else, another version or long ago, stays not_found. The
     * first try removed it from Redis (or the sync does). */
    if (rc == PERMITD_ENOTFOUND &&
        store_policy_deleted(a->store, rq->name, (uint64_t)rq->version, user.username,
                             ADMIN_DELETE_RETRY_S, &why) == PERMITD_OK) {
        pthread_mutex_unlock(&a->store_lock);
        log_msg(LOG_LEVEL_INFO, "policy delete retried: already applied", "policy=%s by=%s",
                rq->name, user.username);
        return PERMITD_OK;
    }
    pthread_mutex_unlock(&a->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    limiter_forget(a->limiter, rq->name);
    if (a->sync != NULL && sync_remove_policy(a->sync, rq->name, &why) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "removing a deleted policy from redis failed; the next sync pass will",
                "policy=%s error=%s", rq->name, log_q(why.message));
    log_msg(LOG_LEVEL_INFO, "policy deleted", "policy=%s by=%s", rq->name, user.username);
    return PERMITD_OK;
}

static int list_policy_history(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                               ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct admin *a = ud;
    const Permit__V1__ListPolicyHistoryRequest *rq = (const void *)in_;
    Permit__V1__ListPolicyHistoryResponse *rs = (void *)out_;
    struct store_change *v = NULL;
    struct store_user user;
    size_t n = 0;
    int rc, limit = rq->limit <= 0 ? 100 : (rq->limit > 1000 ? 1000 : rq->limit);

    if ((rc = authenticate(a, call, ROLE_VIEWER, &user, err)) != PERMITD_OK ||
        (rc = policy_check_name("name", rq->name, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&a->store_lock);
    rc = store_history(a->store, rq->name, limit, &v, &n, err);
    pthread_mutex_unlock(&a->store_lock);
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
    struct admin *a = ud;
    const Permit__V1__GetBucketRequest *rq = (const void *)in_;
    Permit__V1__GetBucketResponse *rs = (void *)out_;
    struct store_user user;
    int rc;

    if ((rc = authenticate(a, call, ROLE_VIEWER, &user, err)) != PERMITD_OK)
        return rc;
    return bucket_proto(a, call, rq->name, rq->key, 1, &rs->bucket, err);
}

static int reset_bucket(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                        ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct admin *a = ud;
    const Permit__V1__ResetBucketRequest *rq = (const void *)in_;
    Permit__V1__ResetBucketResponse *rs = (void *)out_;
    struct store_user user;
    int rc;

    if ((rc = authenticate(a, call, ROLE_EDITOR, &user, err)) != PERMITD_OK ||
        (rc = limiter_reset(a->limiter, rq->name, rq->key, deadline(), err)) != PERMITD_OK)
        return rc;
    log_msg(LOG_LEVEL_INFO, "bucket reset", "policy=%s key=%s by=%s", rq->name, log_q(rq->key),
            user.username);
    return bucket_proto(a, call, rq->name, rq->key, 1, &rs->bucket, err);
}

static int get_policy_stats(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                            ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct admin *a = ud;
    const Permit__V1__GetPolicyStatsRequest *rq = (const void *)in_;
    Permit__V1__GetPolicyStatsResponse *rs = (void *)out_;
    struct store_user user;
    size_t seconds = rq->seconds <= 0 ? STATS_SECONDS : (size_t)rq->seconds;
    int rc, known = 0;

    if ((rc = authenticate(a, call, ROLE_VIEWER, &user, err)) != PERMITD_OK ||
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

/* ---- AdminAuthService ---- */

/* The login buckets of permitd's own: created (or corrected) on use,
 * through lua/sync.lua like every policy hash (the one writer of their
 * layout); they are in Redis only, so the sync leaves them alone. */
static void login_policy(struct admin *a, const char *name, int tries, const char *rate)
{
    char max[16];
    const char *fields[] = {"name", name, "apps", "*", "max_permits", max,
                            "rate", rate, "enabled", "1"};
    struct permitd_error err = {0, ""};

    snprintf(max, sizeof(max), "%d", tries);
    if (a->sync != NULL &&
        sync_own_policy(a->sync, name, fields, sizeof(fields) / sizeof(fields[0]), &err) !=
            PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "cannot write the login throttle's policy", "policy=%s error=%s",
                name, log_q(err.message));
}

/* The login bucket's key for a user name (lower-cased: Alice = alice)
 * tried from one client address: "alice@127.0.0.2"; addr NULL: the
 * name's own key, "alice", for every address together. */
static void login_key(const char *username, const char *addr, char *out, size_t len)
{
    size_t i = 0;

    for (; username[i] && i + 1 < len; i++)
        out[i] = (char)((username[i] >= 'A' && username[i] <= 'Z') ? username[i] + 32 : username[i]);
    out[i] = '\0';
    if (addr != NULL)
        snprintf(out + i, len - i, "@%s", addr);
}

/* Spends one try of login bucket `policy` for key, before the password is
 * checked, so the logins checked at once can never outnumber the tries
 * left; PERMITD_EEXHAUSTED (with the wait) when none is left. Redis being
 * down must not lock administrators out in an incident: then the check is
 * skipped (and logged). */
static int login_try(struct admin *a, const char *policy, int tries, const char *rate,
                     const char *key, const char *whence, struct permitd_error *err)
{
    struct limiter_result r;
    struct permitd_error why = {0, ""};
    int rc = PERMITD_OK;

    for (int attempt = 0; attempt < 2; attempt++) {
        rc = limiter_own(a->limiter, policy, key, 1, deadline(), &r, &why);
        if (rc != PERMITD_ENOTFOUND)
            break;
        login_policy(a, policy, tries, rate);
    }
    if (rc != PERMITD_OK) {
        log_msg(LOG_LEVEL_WARN, "login throttle unavailable; login allowed", "policy=%s error=%s",
                policy, log_q(why.message));
        return PERMITD_OK;
    }
    if (!r.allowed)
        return permitd_error_set(err, PERMITD_EEXHAUSTED,
                                 "too many failed logins for this user %s; try again in %" PRId64
                                 " s",
                                 whence, (r.retry_after_ms + 999) / 1000);
    return PERMITD_OK;
}

/* Spends a try of the login's (name, address) bucket, then one of the
 * name's own bucket for every address together (--login-account-tries),
 * so many addresses guessing one password are held to it between them.
 * That bucket refills quickly (a try every 60/N s): an attacker can keep
 * the real administrator waiting while guessing, not for long after. */
static int login_spend(struct admin *a, const char *username, const char *addr,
                       struct permitd_error *err)
{
    char key[128], rate[32];
    int n = a->cfg->login_account_tries, rc;

    login_key(username, addr, key, sizeof(key));
    if ((rc = login_try(a, LOGIN_POLICY, LOGIN_TRIES, LOGIN_RATE, key, "from this address",
                        err)) != PERMITD_OK || n <= 0)
        return rc;
    login_key(username, NULL, key, sizeof(key));
    snprintf(rate, sizeof(rate), "%.12f", n / 60.0);
    return login_try(a, LOGIN_ACCOUNT_POLICY, n, rate, key, "from all addresses together", err);
}

/* A login succeeded: the tries it spent (and the ones its address and
 * name had spent before) are given back by deleting both buckets' state
 * (a full bucket is no key), so an administrator who logs in often is
 * never held back. Only the right password does this. */
static void login_refund(struct admin *a, const char *username, const char *addr)
{
    char key[128], name[POLICY_REDIS_KEY_MAX];
    struct redis_str del[2] = {{"DEL", 3}, {name, 0}};
    struct permitd_error err = {0, ""};

    /* One DEL a key: in a cluster the two live in different slots. */
    for (int i = 0; i < 2; i++) {
        login_key(username, i == 0 ? addr : NULL, key, sizeof(key));
        del[1].len = policy_bucket_key(name, a->cfg->redis_prefix,
                                       i == 0 ? LOGIN_POLICY : LOGIN_ACCOUNT_POLICY,
                                       POLICY_TOKEN_BUCKET, 0, key);
        if (redis_command(a->redis, del, 2, deadline(), NULL, NULL, NULL, &err) != PERMITD_OK)
            log_msg(LOG_LEVEL_WARN, "cannot give back a login's tries", "error=%s",
                    log_q(err.message));
    }
}

static void session_cookie(const struct admin *a, struct http_response *resp, const char *token,
                           int max_age)
{
    http_response_header(resp, "Set-Cookie", "%s=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%d%s",
                         AUTH_COOKIE, token, max_age, a->cfg->tls_cert[0] ? "; Secure" : "");
}

/* A login whose password is being checked (verifier.c): what its answer
 * needs once the check comes back to the listener's loop. It lives in the
 * request's own storage (http_request_alloc()), as long as the request. */
struct login {
    struct admin *a;
    const struct http_request *http;
    enum connect_codec codec;
    int found;                      /* user is a real account */
    struct store_user user;
    char *password;                 /* request storage; wiped once handed over */
    size_t password_len;
    char addr[64], username[65];
};

/* Every admin answer's headers (admin_handle() adds them to the answers
 * made at once). */
static void answer_headers(const struct admin *a, struct http_response *resp);

/* Logs the user in: a new session, its cookie and the reply. */
static int login_session(struct login *l, struct http_response *resp, struct permitd_error *err)
{
    struct admin *a = l->a;
    Permit__V1__LoginResponse rs;
    char token[AUTH_TOKEN_LEN + 1];
    int rc;

    if ((rc = auth_new_token(token, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&a->store_lock);
    rc = store_session_create(a->store, token, l->user.id, SESSION_TTL_S, err);
    pthread_mutex_unlock(&a->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    permit__v1__login_response__init(&rs);
    rs.username = l->user.username;
    rs.role = l->user.role;
    if ((rc = connect_reply(l->http, l->codec, &rs.base, NULL, resp, err)) != PERMITD_OK)
        return rc;
    session_cookie(a, resp, token, SESSION_TTL_S);
    log_msg(LOG_LEVEL_INFO, "login", "user=%s role=%s", l->user.username, l->user.role);
    return PERMITD_OK;
}

/* The password check is done (on the listener's loop): answers the login. */
static void login_checked(void *ud, int match)
{
    struct login *l = ud;
    struct http_response resp;
    struct permitd_error err = {0, ""};
    int rc;

    http_response_init(&resp);
    if (!match || !l->found) {
        log_msg(LOG_LEVEL_WARN, "login failed", "user=%s addr=%s", log_q(l->username), l->addr);
        rc = permitd_error_set(&err, PERMITD_EUNAUTHENTICATED, "wrong user name or password");
    } else {
        login_refund(l->a, l->username, l->addr);
        rc = login_session(l, &resp, &err);
    }
    if (rc != PERMITD_OK) {
        if (resp.body_owned)
            free(resp.body);
        http_response_init(&resp);
        connect_error_reply(&resp, &err);
    }
    answer_headers(l->a, &resp);
    http_request_resume(l->http, &resp);
}

/* Hands the password to the verifier threads; a full queue is answered at
 * once (resource_exhausted), the rest by login_checked(). */
static void login_start(struct login *l)
{
    struct http_response resp;
    struct permitd_error err = {0, ""};
    int rc;

    /* Verify even for an unknown user (the dummy hash), so timing does
     * not tell which user names exist. */
    rc = verifier_submit(l->a->verifier,
                         ((struct admin_worker *)http_request_worker(l->http))->logins,
                         l->found ? l->user.password_hash : NULL, l->password, login_checked, l,
                         &err);
    explicit_bzero(l->password, l->password_len);
    if (rc == PERMITD_OK)
        return;
    if (rc == PERMITD_EEXHAUSTED)
        log_msg(LOG_LEVEL_DEBUG, "login shed: password checks full", "user=%s addr=%s",
                log_q(l->username), l->addr);
    http_response_init(&resp);
    connect_error_reply(&resp, &err);
    answer_headers(l->a, &resp);
    http_request_resume(l->http, &resp);
}

/* Checks what can be checked on the listener's thread (the name, the
 * throttle, the account), then defers: argon2 runs on a verifier thread
 * (verifier.c), never here, so /readyz and the other RPCs never wait for a
 * password check, and a flood of logins is capped by the verifier's queue. */
static int login(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                 ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct admin *a = ud;
    const Permit__V1__LoginRequest *rq = (const void *)in_;
    struct permitd_error miss = {0, ""};
    struct login *l;
    int rc;

    if ((rc = need_store(a, err)) != PERMITD_OK)
        return rc;
    /* Only a name `permitd admin add-user` accepts can exist: the rest are
     * refused before the password is tried. MySQL compares names without
     * case (and would match "ed " or "éd" to "ed"), so within these the
     * lower-cased name is the one account's key for the login throttle. */
    if ((rc = policy_check_name("username", rq->username, err)) != PERMITD_OK)
        return rc;
    if (strlen(rq->username) > 64)
        return permitd_error_set(err, PERMITD_EINVAL, "username: at most 64 characters");
    if ((l = http_request_alloc(call->http, sizeof(*l))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    memset(l, 0, sizeof(*l));
    l->a = a;
    l->http = call->http;
    l->codec = call->codec;
    snprintf(l->username, sizeof(l->username), "%s", rq->username);
    if (http_request_client_addr(call->http, l->addr, sizeof(l->addr)) != 0)
        snprintf(l->addr, sizeof(l->addr), "unknown");
    if ((rc = login_spend(a, rq->username, l->addr, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&a->store_lock);
    rc = store_user_get(a->store, rq->username, &l->user, &miss);
    pthread_mutex_unlock(&a->store_lock);
    if (rc != PERMITD_OK && rc != PERMITD_ENOTFOUND)
        return permitd_error_set(err, rc, "%s", miss.message);
    l->found = rc == PERMITD_OK;
    /* The decoded request is gone once this returns: login_start() hands
     * a copy to the verifier (which keeps its own) and wipes it. */
    l->password_len = strlen(rq->password);
    if ((l->password = http_request_alloc(call->http, l->password_len + 1)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    memcpy(l->password, rq->password, l->password_len + 1);
    http_request_defer(call->http);
    login_start(l);
    return CONNECT_DEFERRED;
}

static int logout(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                  ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct admin *a = ud;
    char token[AUTH_TOKEN_LEN + 1];
    struct store_user user;
    int rc;

    /* The browser's copy goes either way; but like every RPC except Login,
     * Logout needs a live session (admin.proto), else unauthenticated. */
    session_cookie(a, call->resp, "", 0);
    if ((rc = authenticate(a, call, ROLE_VIEWER, &user, err)) != PERMITD_OK)
        return rc;
    if (auth_cookie_token(http_request_header(call->http, "Cookie"), token, sizeof(token)) != 0)
        return permitd_error_set(err, PERMITD_EUNAUTHENTICATED, "not logged in");
    pthread_mutex_lock(&a->store_lock);
    rc = store_session_delete(a->store, token, err);
    pthread_mutex_unlock(&a->store_lock);
    return rc;
}

static int who_am_i(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                    ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct admin *a = ud;
    Permit__V1__WhoAmIResponse *rs = (void *)out_;
    struct store_user user;
    int rc;

    if ((rc = authenticate(a, call, ROLE_VIEWER, &user, err)) != PERMITD_OK)
        return rc;
    rs->username = connect_call_strdup(call, user.username);
    rs->role = connect_call_strdup(call, user.role);
    return rs->username && rs->role ? PERMITD_OK
                                    : permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
}

static const struct connect_method methods[] = {
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
    ADMIN_METHOD("AdminAuthService", "Login", login, 0, login),
    ADMIN_METHOD("AdminAuthService", "Logout", logout, 0, logout),
    /* protoc-c spells WhoAmIRequest who_am_irequest */
    {"/permit.v1.AdminAuthService/WhoAmI", &permit__v1__who_am_irequest__descriptor,
     &permit__v1__who_am_iresponse__descriptor, 1, who_am_i},
    {NULL, NULL, NULL, 0, NULL},
};

/* ---- /readyz and /metrics (health.c) ---- */

int admin_worker_open(void *ud, struct loop *loop, void **worker, struct permitd_error *err)
{
    struct admin *a = ud;
    struct admin_worker *w = calloc(1, sizeof(*w));
    int rc;

    *worker = NULL;
    if (w == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    /* (no store: no logins to check) */
    if ((a->verifier != NULL &&
         (rc = verifier_inbox_new(a->verifier, loop, &w->logins, err)) != PERMITD_OK) ||
        (rc = pool_inbox_new(a->rpcs, loop, &w->rpcs, err)) != PERMITD_OK) {
        free(w);                    /* the loop's close frees an inbox attached */
        return rc;
    }
    *worker = w;
    return PERMITD_OK;
}

void admin_worker_close(void *ud, void *worker)
{
    (void)ud;
    free(worker);
}

void admin_set_listeners(struct admin *a, struct http_server *api, struct http_server *admin)
{
    a->health.listeners[0] = api;
    a->health.listeners[1] = admin;
}

void admin_set_grpc(struct admin *a, struct grpc_server *grpc)
{
    a->health.grpc = grpc;
}

/* ---- the UI's files ---- */

static const char *content_type(const char *name)
{
    const char *dot = strrchr(name, '.');

    if (dot == NULL)
        return "application/octet-stream";
    if (strcmp(dot, ".html") == 0)
        return "text/html; charset=utf-8";
    if (strcmp(dot, ".js") == 0 || strcmp(dot, ".mjs") == 0)
        return "text/javascript; charset=utf-8";
    if (strcmp(dot, ".css") == 0)
        return "text/css; charset=utf-8";
    if (strcmp(dot, ".svg") == 0)
        return "image/svg+xml";
    if (strcmp(dot, ".png") == 0)
        return "image/png";
    if (strcmp(dot, ".ico") == 0)
        return "image/x-icon";
    if (strcmp(dot, ".json") == 0)
        return "application/json";
    return "application/octet-stream";
}

/* Serves one UI file: from --admin-ui-dir when set (development), else
 * from the copy embedded in the binary. Returns 0 when not found. */
static int ui_file(struct admin *a, const char *name, struct http_response *resp)
{
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '-' || *c == '_') || (c == name && *c == '.'))
            return 0;
    if (a->cfg->admin_ui_dir[0] != '\0') {
        char path[1200];
        FILE *f;
        long len;

        snprintf(path, sizeof(path), "%s/%s", a->cfg->admin_ui_dir, name);
        f = fopen(path, "rb");
        if (f == NULL)
            return 0;
        if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
            (resp->body = malloc((size_t)len + 1)) == NULL) {
            fclose(f);
            return 0;
        }
        resp->body_len = fread(resp->body, 1, (size_t)len, f);
        resp->body_owned = 1;
        fclose(f);
    } else {
        const struct embedded_file *e = embed_find(admin_ui_files, name);
        if (e == NULL)
            return 0;
        resp->body = (char *)e->data;
        resp->body_len = e->len;
    }
    resp->content_type = content_type(name);
    http_response_header(resp, "Cache-Control", "no-cache");
    http_response_header(resp, "X-Content-Type-Options", "nosniff");
    http_response_header(resp, "X-Frame-Options", "DENY");
    http_response_header(resp, "Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                         "script-src 'self'; connect-src 'self'; frame-ancestors 'none'");
    return 1;
}

/* A name a browser may rightly use for this listener, whatever it is bound
 * to: an IP address (a literal cannot be rebound), "localhost", or a name
 * --admin-hosts lists ("*": any). Any other name in Host is a DNS
 * rebinding page that points its own name at this address, which a
 * loopback bind does not stop either: Docker binds 0.0.0.0 behind a
 * 127.0.0.1 port map, and the port in Host is the map's, not ours. A
 * request without Host (HTTP/1.0) comes from no browser: allowed here
 * (same_origin() still needs one). */
static int host_allowed(const struct admin *a, const char *host)
{
    char name[256];
    const char *colon, *list = a->cfg->admin_hosts;
    size_t n;
    unsigned char addr[16];

    if (host == NULL)
        return 1;
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        if (end == NULL || (size_t)(end - host - 1) >= sizeof(name))
            return 0;
        n = (size_t)(end - host - 1);
        memcpy(name, host + 1, n);
        name[n] = '\0';
        colon = end[1] == ':' ? end + 1 : end[1] == '\0' ? end + 1 : NULL;
        if (colon == NULL)
            return 0;
        if (inet_pton(AF_INET6, name, addr) != 1)
            return 0;
    } else {
        colon = strchr(host, ':');
        n = colon ? (size_t)(colon - host) : strlen(host);
        if (n == 0 || n >= sizeof(name))
            return 0;
        memcpy(name, host, n);
        name[n] = '\0';
        if (colon == NULL)
            colon = host + n;
    }
    /* The port, if any: digits only. */
    if (*colon == ':' && (colon[1] == '\0' || strspn(colon + 1, "0123456789") != strlen(colon + 1)))
        return 0;
    if (host[0] == '[' || inet_pton(AF_INET, name, addr) == 1)
        return 1;
    if (n > 1 && name[n - 1] == '.')
        name[--n] = '\0';
    if (strcasecmp(name, "localhost") == 0)
        return 1;
    while (*list != '\0') {
        size_t len = strcspn(list, ",");
        const char *item = list;
        while (len > 0 && *item == ' ')
            item++, len--;
        while (len > 0 && item[len - 1] == ' ')
            len--;
        if ((len == 1 && item[0] == '*') || (len == n && strncasecmp(item, name, n) == 0))
            return 1;
        list += strcspn(list, ",");
        if (*list == ',')
            list++;
    }
    return 0;
}

/* A state-changing request must come from a page of this listener. */
static int same_origin(const struct admin *a, const struct http_request *req)
{
    const char *origin = http_request_header(req, "Origin");
    const char *host = http_request_header(req, "Host");
    size_t n;

    if (origin == NULL || host == NULL || !host_allowed(a, host))
        return 0;
    if (strncmp(origin, "http://", 7) == 0)
        n = 7;
    else if (strncmp(origin, "https://", 8) == 0)
        n = 8;
    else
        return 0;
    return strcasecmp(origin + n, host) == 0;
}

static void text(struct http_response *resp, int status, const char *body)
{
    resp->status = status;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = (char *)body;
    resp->body_len = strlen(body);
}

/* Everything but the UI's files (which say so themselves) answers with
 * data that is live or private: sessions, policies, health. No cache or
 * proxy may keep it, and no browser may guess it is HTML or script. */
static void no_store(struct http_response *resp)
{
    http_response_header(resp, "Cache-Control", "no-store");
    http_response_header(resp, "X-Content-Type-Options", "nosniff");
}

/* An RPC, or the 404 of a path that is none. */
static void serve(struct admin *a, const struct http_request *req, struct http_response *resp)
{
    struct permitd_error err;

    for (size_t i = 0; i < a->nservices; i++) {
        if (connect_serve(a->services[i].methods, a->services[i].ud, &a->limits, req, resp)) {
            no_store(resp);
            return;
        }
    }
    if (!connect_serve(methods, a, &a->limits, req, resp)) {
        permitd_error_set(&err, PERMITD_EUNIMPLEMENTED, "no procedure or page %.200s",
                          http_request_path(req));
        connect_error_reply(resp, &err);
        resp->status = 404;
    }
    no_store(resp);
}

/* An RPC on its way through the pool (core/pool.h): in the request's
 * storage, as long as the request. */
struct rpc {
    struct pool_job job;            /* first: the pool hands this back */
    struct admin *a;
    const struct http_request *req;
    struct http_response resp;
};

static void rpc_run(struct pool_job *j)
{
    struct rpc *r = (struct rpc *)j;

    http_response_init(&r->resp);
    serve(r->a, r->req, &r->resp);
}

static void rpc_done(struct pool_job *j)
{
    struct rpc *r = (struct rpc *)j;

    answer_headers(r->a, &r->resp);
    http_request_resume(r->req, &r->resp);
}

/* Hands an RPC to the pool, so the listener's thread goes back to
 * accepting and answering /healthz, /readyz and /metrics at once, whatever
 * the RPC costs (issue 22). Login stays here: it defers by itself, and its
 * argon2 runs on the verifier's threads. Returns 1 when the RPC went (it
 * is answered later, or resp holds why not: a full queue), 0 when it is
 * to be served here (no loop to come back to, out of memory). */
static int offload_rpc(struct admin *a, const struct http_request *req,
                       struct http_response *resp)
{
    struct admin_worker *w = http_request_worker(req);
    struct permitd_error err = {0, ""};
    struct pool_load seen;
    struct rpc *r;

    if (w == NULL || w->rpcs == NULL || http_request_detach(req) != 0 ||
        (r = http_request_alloc(req, sizeof(*r))) == NULL)
        return 0;
    r->job = (struct pool_job){rpc_run, rpc_done, NULL, NULL, NULL};
    r->a = a;
    r->req = req;
    http_request_defer(req);
    if (pool_submit(a->rpcs, w->rpcs, &r->job, &seen) != PERMITD_OK) {
        permitd_error_set(&err, PERMITD_EEXHAUSTED, "too many admin calls at once (%u running, "
                          "%u waiting); try again in a moment", seen.busy, seen.waiting);
        http_response_init(&r->resp);
        connect_error_reply(&r->resp, &err);
        rpc_done(&r->job);
    }
    return 1;
}

/* Routes one request; admin_handle() adds what every answer carries. */
static void route(struct admin *a, const struct http_request *req, struct http_response *resp)
{
    const char *path = http_request_path(req), *method = http_request_method(req);
    struct permitd_error err;

    if (strcmp(path, "/healthz") == 0) {
        text(resp, 200, "ok\n");
        no_store(resp);
        return;
    }
    if (strcmp(path, "/readyz") == 0) {
        health_readyz(&a->health, resp);
        no_store(resp);
        return;
    }
    /* Past the probes, whatever the bind: no DNS name this listener was not
     * told it has (host_allowed()). */
    if (!host_allowed(a, http_request_header(req, "Host"))) {
        permitd_error_set(&err, PERMITD_EPERM,
                          "Host %s refused: the admin listener answers to IP addresses, "
                          "localhost and the names in --admin-hosts only (DNS rebinding)",
                          log_q(http_request_header(req, "Host")));
        connect_error_reply(resp, &err);
        no_store(resp);
        return;
    }
    if (strcmp(path, "/metrics") == 0) {
        health_metrics(&a->health, resp);
        no_store(resp);
        return;
    }
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
        if (strcmp(path, "/") == 0 && ui_file(a, "index.html", resp))
            return;
        if (strncmp(path, "/ui/", 4) == 0 && ui_file(a, path + 4, resp))
            return;
    }
    if (strcmp(method, "POST") == 0 && strncmp(path, "/permit.v1.", 11) == 0 && !same_origin(a, req)) {
        permitd_error_set(&err, PERMITD_EPERM,
                          "cross-origin request refused: the Origin header must be this admin "
                          "listener's own origin");
        connect_error_reply(resp, &err);
        no_store(resp);
        return;
    }
    if (strncmp(path, "/permit.v1.", 11) == 0 && strcmp(path, LOGIN_PATH) != 0 &&
        offload_rpc(a, req, resp))
        return;
    serve(a, req, resp);
}

/* Under TLS, a browser that has seen this listener once never talks to it
 * over plain HTTP again (a year), so no one on the path can downgrade it
 * and read the session cookie. */
static void hsts(const struct admin *a, struct http_response *resp)
{
    if (a->cfg->tls_cert[0] != '\0')
        http_response_header(resp, "Strict-Transport-Security", "max-age=%d", ADMIN_HSTS_MAX_AGE_S);
}

static void answer_headers(const struct admin *a, struct http_response *resp)
{
    no_store(resp);
    hsts(a, resp);
}

void admin_handle(void *ud, const struct http_request *req, struct http_response *resp)
{
    struct admin *a = ud;

    route(a, req, resp);
    hsts(a, resp);
}

/* ---- permitd admin ---- */

static void cli_usage(FILE *out)
{
    usersvc_cli_usage(out);
    appsvc_cli_usage(out);
    fprintf(out,
            "\n"
            "The database is PERMITD_MYSQL_URL, as for `permitd migrate`.\n"
            "Each verb's own help: permitd admin VERB --help.\n"
            "\n"
            "  -h, --help   this text (anywhere on the line)\n");
}

int admin_cli_main(const struct config *cfg, int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        cli_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (appsvc_cli_verb(argv[1]))
        return appsvc_cli_main(cfg, argc, argv);
    if (strcmp(argv[1], "add-user") == 0)
        return usersvc_cli_main(cfg, argc, argv);
    fprintf(stderr, "permitd admin: unknown command \"%s\"\n\n", argv[1]);
    cli_usage(stderr);
    return 2;
}
