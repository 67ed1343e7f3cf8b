/*
 * trafficsvc.c - TrafficService (see trafficsvc.h).
 *
 * A series' range is one of four, each with a fixed bucket (1h: 1 min,
 * 24h: 5 min, 7d: 1 h, 30d: 2 h), so a chart has 60 to 360 points whatever
 * the range and the UI reads every one the same way: "decisions per
 * minute", a bucket's count divided by its minutes. The range ends at the
 * end of the bucket holding now (its last bucket is still filling).
 * Totals are read by whole hours (traffic_hours: at 10,000 policies the
 * last 60 minutes summed from the minutes took 3 s, from the hours two
 * rows a policy): [the hour before this one, the next hour) for "1h", the
 * range's hours up to the end of this one for the others; the answer says
 * which. Names are checked against the policy-name rule before they reach
 * SQL.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/admin.h"
#include "control/listing.h"
#include "control/trafficsvc.h"
#include "permit/v1/traffic.pb-c.h"
#include "stores/policy.h"
#include "stores/trafficdb.h"
#include "transport/connect.h"

#define TRAFFICSVC_LIMIT_DEFAULT 20
#define TRAFFICSVC_LIMIT_MAX 1000

struct trafficsvc {
    const struct config *cfg;
    struct admin *admin;
    struct trafficdb *db;
    pthread_mutex_t lock;           /* db: one statement at a time */
};

/* The ranges a caller may ask for. */
static const struct range {
    const char *name;
    int seconds, step;
} ranges[] = {
    {"1h", 3600, 60},
    {"24h", 86400, 300},
    {"7d", 7 * 86400, 3600},
    {"30d", 30 * 86400, 7200},
};

int trafficsvc_new(const struct config *cfg, struct admin *admin, struct trafficsvc **out,
                   struct permitd_error *err)
{
    struct trafficsvc *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->cfg = cfg;
    s->admin = admin;
    if ((rc = trafficdb_new(cfg, &s->db, err)) != PERMITD_OK) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return PERMITD_OK;
}

void trafficsvc_free(struct trafficsvc *s)
{
    if (s == NULL)
        return;
    trafficdb_free(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* The range named (""  is 1h) and its bounds as of now: [*from, *to) in
 * buckets of *step for a series, or (hours set) in whole hours, at least
 * two, for totals. */
static int range_of(const char *name, int hours, int64_t *from, int64_t *to, int *step,
                    struct permitd_error *err)
{
    int64_t now = (int64_t)time(NULL);

    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
        if (strcmp(name[0] ? name : "1h", ranges[i].name) == 0) {
            *step = hours ? 3600 : ranges[i].step;
            *to = (now / *step + 1) * *step;
            *from = *to - (hours && ranges[i].seconds < 7200 ? 7200 : ranges[i].seconds);
            return PERMITD_OK;
        }
    }
    return permitd_error_set(err, PERMITD_EINVAL, "range: \"%.20s\" is not 1h, 24h, 7d or 30d",
                             name);
}

/* policy and app of a request: "" (any) or a name by the rule. */
static int names(const char *policy, const char *app, struct permitd_error *err)
{
    if (policy[0] && policy_check_name("policy", policy, err) != PERMITD_OK)
        return PERMITD_EINVAL;
    if (app[0] && policy_check_name("app", app, err) != PERMITD_OK)
        return PERMITD_EINVAL;
    return PERMITD_OK;
}

static int get_series(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct trafficsvc *s = ud;
    const Permit__V1__GetTrafficSeriesRequest *rq = (const void *)in_;
    Permit__V1__GetTrafficSeriesResponse *rs = (void *)out_;
    struct trafficdb_point *v = NULL;
    int64_t from = 0, to = 0, *cols[TRAFFICDB_COUNTERS];
    char me[129];
    size_t n = 0;
    int step = 60, rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, ADMIN_VIEWER, me, sizeof(me), err)) != PERMITD_OK ||
        (rc = names(rq->policy, rq->app, err)) != PERMITD_OK ||
        (rc = range_of(rq->range, 0, &from, &to, &step, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = trafficdb_series(s->db, rq->policy[0] ? rq->policy : NULL, rq->app[0] ? rq->app : NULL,
                          from, to, step, &v, &n, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        return rc;
    for (int k = 0; k < TRAFFICDB_COUNTERS; k++)
        if ((cols[k] = connect_call_alloc(call, (n + 1) * sizeof(int64_t))) == NULL) {
            free(v);
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < TRAFFICDB_COUNTERS; k++)
            cols[k][i] = (int64_t)v[i].v[k];
    free(v);
    rs->start_unix = from;
    rs->step_seconds = step;
    rs->unit = (char *)"decisions per minute";
    rs->allowed = cols[TRAFFICDB_ALLOWED];
    rs->denied = cols[TRAFFICDB_DENIED];
    rs->shadow_denied = cols[TRAFFICDB_SHADOW_DENIED];
    rs->errors = cols[TRAFFICDB_ERRORS];
    rs->passes = cols[TRAFFICDB_PASSES];
    rs->n_allowed = rs->n_denied = rs->n_shadow_denied = rs->n_errors = rs->n_passes = n;
    rs->retention_days = s->cfg->traffic_history_days;
    rs->flush_seconds = (s->cfg->traffic_flush_ms + 999) / 1000;
    return PERMITD_OK;
}

static int parse_group(const char *in, enum trafficdb_group *g)
{
    if (in[0] == '\0' || strcmp(in, "policy") == 0)
        *g = TRAFFICDB_BY_POLICY;
    else if (strcmp(in, "app") == 0)
        *g = TRAFFICDB_BY_APP;
    else if (strcmp(in, "policy_app") == 0)
        *g = TRAFFICDB_BY_POLICY_APP;
    else
        return -1;
    return 0;
}

static int parse_order(const char *in, int *order)
{
    static const struct { const char *name; int order; } orders[] = {
        {"allowed", TRAFFICDB_ALLOWED}, {"denied", TRAFFICDB_DENIED},
        {"shadow_denied", TRAFFICDB_SHADOW_DENIED}, {"errors", TRAFFICDB_ERRORS},
        {"passes", TRAFFICDB_PASSES}, {"decided", TRAFFICDB_ORDER_DECIDED},
        {"denied_share", TRAFFICDB_ORDER_DENIED_SHARE},
    };

    if (in[0] == '\0') {
        *order = TRAFFICDB_DENIED;
        return 0;
    }
    for (size_t i = 0; i < sizeof(orders) / sizeof(orders[0]); i++) {
        if (strcmp(in, orders[i].name) == 0) {
            *order = orders[i].order;
            return 0;
        }
    }
    return -1;
}

static int get_totals(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct trafficsvc *s = ud;
    const Permit__V1__GetTrafficTotalsRequest *rq = (const void *)in_;
    Permit__V1__GetTrafficTotalsResponse *rs = (void *)out_;
    struct trafficdb_total *v = NULL;
    enum trafficdb_group group;
    int64_t from = 0, to = 0;
    char me[129];
    size_t n = 0;
    int step = 3600, order = 0, rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, ADMIN_VIEWER, me, sizeof(me), err)) != PERMITD_OK ||
        (rc = names(rq->policy, rq->app, err)) != PERMITD_OK ||
        (rc = range_of(rq->range, 1, &from, &to, &step, err)) != PERMITD_OK)
        return rc;
    if (parse_group(rq->group_by, &group) != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "group_by: \"%.20s\" is not policy, app "
                                 "or policy_app", rq->group_by);
    if (parse_order(rq->order_by, &order) != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "order_by: \"%.20s\" is not allowed, "
                                 "denied, shadow_denied, errors, passes, decided or denied_share",
                                 rq->order_by);
    if (rq->limit < 0 || rq->limit > TRAFFICSVC_LIMIT_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "limit: %d is not 1 to %d (0: %d)",
                                 rq->limit, TRAFFICSVC_LIMIT_MAX, TRAFFICSVC_LIMIT_DEFAULT);
    pthread_mutex_lock(&s->lock);
    rc = trafficdb_totals(s->db, group, rq->policy[0] ? rq->policy : NULL,
                          rq->app[0] ? rq->app : NULL, from, to, order,
                          rq->limit ? rq->limit : TRAFFICSVC_LIMIT_DEFAULT, &v, &n, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        return rc;
    rs->start_unix = from;
    rs->end_unix = to;
    if ((rs->totals = connect_call_alloc(call, (n + 1) * sizeof(*rs->totals))) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; rc == PERMITD_OK && i < n; i++) {
        Permit__V1__TrafficTotal *t = connect_call_alloc(call, sizeof(*t));
        if (t == NULL) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            break;
        }
        permit__v1__traffic_total__init(t);
        t->policy = connect_call_strdup(call, v[i].policy);
        t->app = connect_call_strdup(call, v[i].app);
        if (t->policy == NULL || t->app == NULL) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            break;
        }
        t->allowed = (int64_t)v[i].v[TRAFFICDB_ALLOWED];
        t->denied = (int64_t)v[i].v[TRAFFICDB_DENIED];
        t->shadow_denied = (int64_t)v[i].v[TRAFFICDB_SHADOW_DENIED];
        t->errors = (int64_t)v[i].v[TRAFFICDB_ERRORS];
        t->passes = (int64_t)v[i].v[TRAFFICDB_PASSES];
        rs->totals[rs->n_totals++] = t;
    }
    free(v);
    return rc;
}

#define TRENDS_STEP 300
#define TRENDS_BUCKETS 12

static int get_trends(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct trafficsvc *s = ud;
    const Permit__V1__GetTrafficTrendsRequest *rq = (const void *)in_;
    Permit__V1__GetTrafficTrendsResponse *rs = (void *)out_;
    size_t n = rq->n_policies, nb = TRENDS_BUCKETS;
    uint64_t *allowed = NULL, *denied = NULL, *hours_a = NULL, *hours_d = NULL, *hours_k = NULL;
    int64_t now = (int64_t)time(NULL), to, from, hours_to = (now / 3600 + 1) * 3600;
    char me[129];
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, ADMIN_VIEWER, me, sizeof(me), err)) != PERMITD_OK)
        return rc;
    if (n > TRAFFICDB_TRENDS_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "policies: %zu names, at most %d", n,
                                 TRAFFICDB_TRENDS_MAX);
    to = (now / TRENDS_STEP + 1) * TRENDS_STEP;
    from = to - TRENDS_STEP * TRENDS_BUCKETS;
    allowed = calloc(n * nb + 1, sizeof(*allowed));
    denied = calloc(n * nb + 1, sizeof(*denied));
    hours_a = calloc(n + 1, sizeof(*hours_a));
    hours_d = calloc(n + 1, sizeof(*hours_d));
    hours_k = calloc(n + 1, sizeof(*hours_k));
    if (allowed == NULL || denied == NULL || hours_a == NULL || hours_d == NULL || hours_k == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto out;
    }
    pthread_mutex_lock(&s->lock);
    rc = trafficdb_trends(s->db, (const char *const *)rq->policies, n, from, to, TRENDS_STEP,
                          allowed, denied, NULL, err);
    /* The hours the list's fleet orders sort by (listing.c): one bucket. */
    if (rc == PERMITD_OK)
        rc = trafficdb_trends(s->db, (const char *const *)rq->policies, n,
                              hours_to - LISTING_FLEET_SECONDS, hours_to, LISTING_FLEET_SECONDS,
                              hours_a, hours_d, hours_k, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        goto out;
    rs->start_unix = from;
    rs->step_seconds = TRENDS_STEP;
    rs->hours_start_unix = hours_to - LISTING_FLEET_SECONDS;
    if ((rs->trends = connect_call_alloc(call, (n + 1) * sizeof(*rs->trends))) == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        Permit__V1__PolicyTrend *t = connect_call_alloc(call, sizeof(*t));
        int64_t *a = connect_call_alloc(call, nb * sizeof(int64_t));
        int64_t *d = connect_call_alloc(call, nb * sizeof(int64_t));
        if (t != NULL)
            permit__v1__policy_trend__init(t);
        if (t == NULL || a == NULL || d == NULL ||
            (t->policy = connect_call_strdup(call, rq->policies[i])) == NULL) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            goto out;
        }
        for (size_t b = 0; b < nb; b++) {
            a[b] = (int64_t)allowed[i * nb + b];
            d[b] = (int64_t)denied[i * nb + b];
        }
        t->allowed = a;
        t->denied = d;
        t->hours_allowed = (int64_t)hours_a[i];
        t->hours_denied = (int64_t)hours_d[i];
        t->hours_keyed = (int64_t)hours_k[i];
        t->n_allowed = t->n_denied = nb;
        rs->trends[rs->n_trends++] = t;
    }
out:
    free(allowed);
    free(denied);
    free(hours_a);
    free(hours_d);
    free(hours_k);
    return rc;
}

const struct connect_method trafficsvc_methods[] = {
    ADMIN_METHOD("TrafficService", "GetTrafficSeries", get_traffic_series, 1, get_series),
    ADMIN_METHOD("TrafficService", "GetTrafficTotals", get_traffic_totals, 1, get_totals),
    ADMIN_METHOD("TrafficService", "GetTrafficTrends", get_traffic_trends, 1, get_trends),
    {NULL, NULL, NULL, 0, NULL},
};
