/*
 * fleetsvc.c - FleetService (see fleetsvc.h): the fleet's counts and
 * heartbeats, read from the keys control/fleet.c writes.
 *
 * A range is read as the slabs (hashes) that cover it, all in one
 * redis_command_pipeline() (one round trip per master): 6 keys for the
 * last 5 minutes at 1 s, 7 for the hour at 10 s, 25 for the day at 1 min;
 * the list's last minute, one or two per policy of the page, all of the
 * page's in one pipeline.
 * Every field names its bucket, instance and counter, so the sum over the
 * fleet and each instance's series come from the same reading. A bucket
 * nobody wrote reads 0: no instance counted anything then (an instance
 * that publishes nothing, --fleet-publish-ms 0, is not in the figures,
 * which README says). Redis not answering is an error (unavailable), never
 * a flat line.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/admin.h"
#include "control/fleet.h"
#include "control/fleetsvc.h"
#include "core/clock.h"
#include "permit/v1/fleet.pb-c.h"
#include "stores/policy.h"
#include "transport/connect.h"

#define FLEETSVC_REDIS_DEADLINE_MS 1000
#define FLEETSVC_TRAFFIC_SECONDS 60
#define FLEETSVC_TRAFFIC_MAX 500        /* policies in one GetFleetTraffic */
#define FLEETSVC_INSTANCES_MAX 1000     /* series (and instances) in one answer */
#define FLEETSVC_KEYS_MAX 32            /* slabs in one range: 25 for the day */

struct fleetsvc {
    const struct config *cfg;
    struct admin *admin;
    struct redis *redis;
    struct fleet *fleet;
};

int fleetsvc_new(const struct config *cfg, struct admin *admin, struct redis *redis,
                 struct fleet *fleet, struct fleetsvc **out, struct permitd_error *err)
{
    struct fleetsvc *s = calloc(1, sizeof(*s));

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "fleetsvc: out of memory");
    s->cfg = cfg;
    s->admin = admin;
    s->redis = redis;
    s->fleet = fleet;
    *out = s;
    return PERMITD_OK;
}

void fleetsvc_free(struct fleetsvc *s)
{
    free(s);
}

static int64_t deadline(void)
{
    return clock_now_us() + (int64_t)FLEETSVC_REDIS_DEADLINE_MS * 1000;
}

/* ---- reading counts ---- */

/* One series being summed: the fleet's or an instance's. */
struct sums {
    char id[FLEET_ID_MAX];
    int64_t *v[STATS_COUNTERS];
};

/* A range being read: buckets first, first + step, ... (n of them). */
struct reading {
    struct connect_call *call;
    int64_t first;
    int step;
    size_t n;
    struct sums fleet;
    struct sums **inst;             /* per_instance: one per id met */
    size_t ninst, capinst;
    int per_instance;
    int oom;
};

/* One HGETALL's reply, read as field, value, field, value ... */
struct reply {
    struct reading *r;
    int value_next;                 /* the next string is a value */
    int keep;                       /* the field before it is ours and in range */
    size_t at;
    int counter;
    char id[FLEET_ID_MAX];
};

static int sums_init(struct connect_call *call, struct sums *x, size_t n)
{
    for (int k = 0; k < STATS_COUNTERS; k++)
        if ((x->v[k] = connect_call_alloc(call, (n + 1) * sizeof(int64_t))) == NULL)
            return -1;
    return 0;
}

/* The series of instance id, made on first sight. NULL when out of memory
 * or past FLEETSVC_INSTANCES_MAX. */
static struct sums *instance(struct reading *r, const char *id)
{
    struct sums *x;

    for (size_t i = 0; i < r->ninst; i++)
        if (strcmp(r->inst[i]->id, id) == 0)
            return r->inst[i];
    if (r->ninst >= FLEETSVC_INSTANCES_MAX)
        return NULL;
    if (r->ninst == r->capinst) {
        size_t cap = r->capinst ? r->capinst * 2 : 8;
        struct sums **v = realloc(r->inst, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        r->inst = v;
        r->capinst = cap;
    }
    if ((x = connect_call_alloc(r->call, sizeof(*x))) == NULL ||
        sums_init(r->call, x, r->n) != 0)
        return NULL;
    snprintf(x->id, sizeof(x->id), "%s", id);
    r->inst[r->ninst++] = x;
    return x;
}

static void each_string(void *ud, const char *str, size_t len)
{
    struct reply *p = ud;
    struct reading *r = p->r;
    int64_t bucket;

    if (p->value_next) {
        p->value_next = 0;
        if (p->keep) {
            char num[32];
            long long v;
            struct sums *x;
            snprintf(num, sizeof(num), "%.*s", (int)(len < 31 ? len : 31), str);
            v = strtoll(num, NULL, 10);
            r->fleet.v[p->counter][p->at] += v;
            if (r->per_instance && (x = instance(r, p->id)) != NULL)
                x->v[p->counter][p->at] += v;
        }
        return;
    }
    p->value_next = 1;
    p->keep = fleet_parse_field(str, len, &bucket, p->id, &p->counter) == PERMITD_OK &&
              bucket >= r->first && (bucket - r->first) % r->step == 0 &&
              (size_t)((bucket - r->first) / r->step) < r->n;
    if (p->keep)
        p->at = (size_t)((bucket - r->first) / r->step);
}

/* Prepares the reading of policy's buckets of resolution res from first (a
 * bucket start) for n buckets into r (whose call, per_instance are set):
 * an HGETALL per slab covering them, appended at calls[*nc] (keys, args
 * and replies alongside; room for FLEETSVC_KEYS_MAX more). */
static int range_calls(struct fleetsvc *s, const char *policy, int res, int64_t first, size_t n,
                       struct reading *r, char (*keys)[FLEET_KEY_MAX], struct redis_str (*args)[2],
                       struct redis_command_call *calls, struct reply *replies, size_t *nc,
                       struct permitd_error *err)
{
    const struct fleet_resolution *fr = &fleet_resolutions[res];
    int64_t last = first + (int64_t)(n - 1) * fr->step_s;
    size_t added = 0;

    r->first = first;
    r->step = fr->step_s;
    r->n = n;
    if (sums_init(r->call, &r->fleet, n) != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (int64_t slab = first - first % fr->slab_s; slab <= last && added < FLEETSVC_KEYS_MAX;
         slab += fr->slab_s, added++) {
        size_t k = *nc + added;
        fleet_counts_key(keys[k], s->cfg->redis_prefix, res, policy, slab);
        args[k][0] = (struct redis_str){"HGETALL", 7};
        args[k][1] = (struct redis_str){keys[k], strlen(keys[k])};
        memset(&replies[k], 0, sizeof(replies[k]));
        replies[k].r = r;
        calls[k] = (struct redis_command_call){.args = args[k], .nargs = 2,
                                               .each = each_string, .ud = &replies[k]};
    }
    *nc += added;
    return PERMITD_OK;
}

/* Sends calls[0..nc) in one pipeline (one round trip per master) and says
 * which failed, naming its key. */
static int run_calls(struct fleetsvc *s, char (*keys)[FLEET_KEY_MAX],
                     struct redis_command_call *calls, size_t nc, struct permitd_error *err)
{
    int rc;

    if ((rc = redis_command_pipeline(s->redis, calls, nc, deadline(), err)) != PERMITD_OK)
        return rc;
    for (size_t i = 0; i < nc; i++)
        if (calls[i].rc != PERMITD_OK)
            return permitd_error_set(err, calls[i].rc, "the fleet's counts could not be read "
                                     "from redis (key %s)", keys[i]);
    return PERMITD_OK;
}

/* Reads one policy's range into r: the slabs in one pipeline. */
static int read_range(struct fleetsvc *s, const char *policy, int res, int64_t first, size_t n,
                      struct reading *r, struct permitd_error *err)
{
    char keys[FLEETSVC_KEYS_MAX][FLEET_KEY_MAX];
    struct redis_str args[FLEETSVC_KEYS_MAX][2];
    struct redis_command_call calls[FLEETSVC_KEYS_MAX];
    struct reply replies[FLEETSVC_KEYS_MAX];
    size_t nc = 0;
    int rc;

    if ((rc = range_calls(s, policy, res, first, n, r, keys, args, calls, replies, &nc, err)) !=
        PERMITD_OK)
        return rc;
    return run_calls(s, keys, calls, nc, err);
}

static Permit__V1__FleetSeries *series_proto(struct connect_call *call, const struct sums *x,
                                             size_t n)
{
    Permit__V1__FleetSeries *m = connect_call_alloc(call, sizeof(*m));

    if (m == NULL)
        return NULL;
    permit__v1__fleet_series__init(m);
    /* x may live on the caller's stack: the reply is encoded later. */
    if ((m->instance = connect_call_strdup(call, x->id)) == NULL)
        return NULL;
    m->allowed = x->v[STATS_ALLOWED];
    m->n_allowed = n;
    m->denied = x->v[STATS_DENIED];
    m->n_denied = n;
    m->errors = x->v[STATS_ERRORS];
    m->n_errors = n;
    m->passes = x->v[STATS_PASSES];
    m->n_passes = n;
    return m;
}

static int get_fleet_stats(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                           ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct fleetsvc *s = ud;
    const Permit__V1__GetFleetStatsRequest *rq = (const void *)in_;
    Permit__V1__GetFleetStatsResponse *rs = (void *)out_;
    struct reading r = {0};
    char user[128];
    int res, rc;
    size_t n;
    int64_t now = (int64_t)time(NULL), end;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 0, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = policy_check_name("policy", rq->policy, err)) != PERMITD_OK)
        return rc;
    if (rq->range[0] == '\0' || strcmp(rq->range, "5m") == 0)
        res = FLEET_RES_1S, n = 300;
    else if (strcmp(rq->range, "1h") == 0)
        res = FLEET_RES_10S, n = 360;
    else if (strcmp(rq->range, "1d") == 0)
        res = FLEET_RES_1M, n = 1440;
    else
        return permitd_error_set(err, PERMITD_EINVAL, "range: \"%.40s\" is not 5m, 1h or 1d",
                                 rq->range);
    /* The last bucket: the one holding the last whole second. */
    end = (now - 1) - (now - 1) % fleet_resolutions[res].step_s;
    r.call = call;
    r.per_instance = rq->per_instance;
    rc = read_range(s, rq->policy, res, end - (int64_t)(n - 1) * fleet_resolutions[res].step_s,
                    n, &r, err);
    if (rc == PERMITD_OK) {
        rs->end_unix = end;
        rs->step_seconds = fleet_resolutions[res].step_s;
        if ((rs->fleet = series_proto(call, &r.fleet, n)) == NULL ||
            (r.ninst > 0 &&
             (rs->instances = connect_call_alloc(call, r.ninst * sizeof(*rs->instances))) == NULL))
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    /* By id, so a chart's colours stay put from one refresh to the next. */
    for (size_t i = 1; rc == PERMITD_OK && i < r.ninst; i++)
        for (size_t j = i; j > 0 && strcmp(r.inst[j - 1]->id, r.inst[j]->id) > 0; j--) {
            struct sums *t = r.inst[j];
            r.inst[j] = r.inst[j - 1];
            r.inst[j - 1] = t;
        }
    for (size_t i = 0; rc == PERMITD_OK && i < r.ninst; i++) {
        if ((rs->instances[i] = series_proto(call, r.inst[i], n)) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        else
            rs->n_instances++;
    }
    free(r.inst);
    return rc;
}

static int get_fleet_traffic(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                             ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct fleetsvc *s = ud;
    const Permit__V1__GetFleetTrafficRequest *rq = (const void *)in_;
    Permit__V1__GetFleetTrafficResponse *rs = (void *)out_;
    const int n = FLEETSVC_TRAFFIC_SECONDS;
    int64_t first = (int64_t)time(NULL) - n;
    char user[128];
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 0, user, sizeof(user), err)) != PERMITD_OK)
        return rc;
    if (rq->n_policies > FLEETSVC_TRAFFIC_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "policies: %zu asked for; at most %d",
                                 rq->n_policies, FLEETSVC_TRAFFIC_MAX);
    rs->seconds = n;
    if (rq->n_policies > 0 &&
        (rs->traffic = connect_call_alloc(call, rq->n_policies * sizeof(*rs->traffic))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    /* Every policy's slabs (one or two each) in one pipeline: one round
     * trip per master for the page. */
    {
        size_t cap = rq->n_policies * 2 + FLEETSVC_KEYS_MAX, nc = 0;
        char (*keys)[FLEET_KEY_MAX] = calloc(cap, sizeof(*keys));
        struct redis_str (*args)[2] = calloc(cap, sizeof(*args));
        struct redis_command_call *calls = calloc(cap, sizeof(*calls));
        struct reply *replies = calloc(cap, sizeof(*replies));
        struct reading *r = calloc(rq->n_policies + 1, sizeof(*r));

        rc = keys && args && calls && replies && r
             ? PERMITD_OK : permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        for (size_t i = 0; rc == PERMITD_OK && i < rq->n_policies; i++) {
            struct permitd_error why = {0, ""};
            Permit__V1__PolicyTraffic *t;
            /* A row of MySQL whose name is not valid (the list shows it,
             * the sync skips it) has no traffic: left out, not an error of
             * all. */
            if (policy_check_name("policies", rq->policies[i], &why) != PERMITD_OK)
                continue;
            if ((t = connect_call_alloc(call, sizeof(*t))) == NULL) {
                rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
                break;
            }
            permit__v1__policy_traffic__init(t);
            t->policy = rq->policies[i];
            r[rs->n_traffic].call = call;
            rc = range_calls(s, rq->policies[i], FLEET_RES_1S, first, (size_t)n, &r[rs->n_traffic],
                             keys, args, calls, replies, &nc, err);
            rs->traffic[rs->n_traffic++] = t;
        }
        if (rc == PERMITD_OK)
            rc = run_calls(s, keys, calls, nc, err);
        for (size_t j = 0; rc == PERMITD_OK && j < rs->n_traffic; j++) {
            Permit__V1__PolicyTraffic *t = rs->traffic[j];
            for (int k = 0; k < n; k++) {
                t->allowed += r[j].fleet.v[STATS_ALLOWED][k];
                t->denied += r[j].fleet.v[STATS_DENIED][k];
                t->errors += r[j].fleet.v[STATS_ERRORS][k];
                t->passes += r[j].fleet.v[STATS_PASSES][k];
            }
        }
        free(keys);
        free(args);
        free(calls);
        free(replies);
        free(r);
    }
    return rc;
}

/* ---- instances ---- */

struct ids {
    char **v;
    size_t n;
    struct connect_call *call;
    int oom;
};

static void each_id(void *ud, const char *str, size_t len)
{
    struct ids *x = ud;
    char *id;

    if (x->n >= FLEETSVC_INSTANCES_MAX || len >= FLEET_ID_MAX)
        return;
    if ((id = connect_call_alloc(x->call, len + 1)) == NULL) {
        x->oom = 1;
        return;
    }
    memcpy(id, str, len);
    x->v[x->n++] = id;
}

/* One heartbeat's HGETALL reply, read into its Instance. */
struct beat {
    struct connect_call *call;
    Permit__V1__Instance *m;
    char field[32];
    int value_next;
    int fields;
};

static void each_beat(void *ud, const char *str, size_t len)
{
    struct beat *b = ud;
    Permit__V1__Instance *m = b->m;
    char v[512];
    const char *f = b->field;

    if (!b->value_next) {
        snprintf(b->field, sizeof(b->field), "%.*s", (int)(len < 31 ? len : 31), str);
        b->value_next = 1;
        return;
    }
    b->value_next = 0;
    b->fields++;
    snprintf(v, sizeof(v), "%.*s", (int)(len < 511 ? len : 511), str);
    if (strcmp(f, "id") == 0)
        m->id = connect_call_strdup(b->call, v);
    else if (strcmp(f, "address") == 0)
        m->address = connect_call_strdup(b->call, v);
    else if (strcmp(f, "admin_address") == 0)
        m->admin_address = connect_call_strdup(b->call, v);
    else if (strcmp(f, "version") == 0)
        m->version = connect_call_strdup(b->call, v);
    else if (strcmp(f, "redis") == 0)
        m->redis = connect_call_strdup(b->call, v);
    else if (strcmp(f, "mysql") == 0)
        m->mysql = connect_call_strdup(b->call, v);
    else if (strcmp(f, "started") == 0)
        m->started_unix = strtoll(v, NULL, 10);
    else if (strcmp(f, "threads") == 0)
        m->threads = (int32_t)strtol(v, NULL, 10);
    else if (strcmp(f, "requests_per_second") == 0)
        m->requests_per_second = strtod(v, NULL);
    else if (strcmp(f, "sync_lag_ms") == 0)
        m->sync_lag_ms = strtoll(v, NULL, 10);
    else if (strcmp(f, "connections") == 0)
        m->connections = (int32_t)strtol(v, NULL, 10);
    else if (strcmp(f, "connections_max") == 0)
        m->connections_max = (int32_t)strtol(v, NULL, 10);
    else if (strcmp(f, "seen") == 0)
        m->seen_unix = strtoll(v, NULL, 10);
    /* A string the strdup could not copy reads "" rather than NULL. */
    if (m->id == NULL || m->address == NULL || m->admin_address == NULL || m->version == NULL ||
        m->redis == NULL || m->mysql == NULL) {
        m->id = m->id ? m->id : "";
        m->address = m->address ? m->address : "";
        m->admin_address = m->admin_address ? m->admin_address : "";
        m->version = m->version ? m->version : "";
        m->redis = m->redis ? m->redis : "";
        m->mysql = m->mysql ? m->mysql : "";
    }
}

static int list_instances(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                          ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct fleetsvc *s = ud;
    Permit__V1__ListInstancesResponse *rs = (void *)out_;
    char set[FLEET_KEY_MAX], user[128];
    struct ids ids = {NULL, 0, call, 0};
    struct redis_str zr[4];
    char (*keys)[FLEET_KEY_MAX] = NULL;
    struct redis_str (*args)[2] = NULL;
    struct redis_command_call *calls = NULL;
    struct beat *beats = NULL;
    int rc;

    (void)in_;
    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 0, user, sizeof(user), err)) != PERMITD_OK)
        return rc;
    rs->heartbeat_ttl_seconds = s->cfg->fleet_heartbeat_ttl_s;
    rs->self_id = connect_call_strdup(call, fleet_instance_id(s->fleet));
    fleet_instances_key(set, s->cfg->redis_prefix);
    zr[0] = (struct redis_str){"ZRANGE", 6};
    zr[1] = (struct redis_str){set, strlen(set)};
    zr[2] = (struct redis_str){"0", 1};
    zr[3] = (struct redis_str){"-1", 2};
    if ((ids.v = connect_call_alloc(call, FLEETSVC_INSTANCES_MAX * sizeof(char *))) == NULL ||
        rs->self_id == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if ((rc = redis_command(s->redis, zr, 4, deadline(), NULL, each_id, &ids, err)) != PERMITD_OK)
        return rc;
    if (ids.oom)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (ids.n == 0)
        return PERMITD_OK;
    keys = calloc(ids.n, sizeof(*keys));
    args = calloc(ids.n, sizeof(*args));
    calls = calloc(ids.n, sizeof(*calls));
    beats = calloc(ids.n, sizeof(*beats));
    rs->instances = connect_call_alloc(call, ids.n * sizeof(*rs->instances));
    if (keys == NULL || args == NULL || calls == NULL || beats == NULL || rs->instances == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ids.n; i++) {
        fleet_instance_key(keys[i], s->cfg->redis_prefix, ids.v[i]);
        args[i][0] = (struct redis_str){"HGETALL", 7};
        args[i][1] = (struct redis_str){keys[i], strlen(keys[i])};
        beats[i].call = call;
        if ((beats[i].m = connect_call_alloc(call, sizeof(*beats[i].m))) == NULL) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            goto out;
        }
        permit__v1__instance__init(beats[i].m);
        calls[i] = (struct redis_command_call){.args = args[i], .nargs = 2, .each = each_beat,
                                               .ud = &beats[i]};
    }
    if ((rc = redis_command_pipeline(s->redis, calls, ids.n, deadline(), err)) != PERMITD_OK)
        goto out;
    /* A heartbeat that expired (its instance stopped answering) is gone:
     * only the sorted set still names it. */
    for (size_t i = 0; i < ids.n; i++) {
        Permit__V1__Instance *m = beats[i].m;
        if (calls[i].rc != PERMITD_OK) {
            rc = permitd_error_set(err, calls[i].rc, "the heartbeat of %s could not be read "
                                   "from redis", ids.v[i]);
            goto out;
        }
        if (beats[i].fields == 0 || m->id == NULL || m->id[0] == '\0')
            continue;
        m->self = strcmp(m->id, rs->self_id) == 0;
        rs->instances[rs->n_instances++] = m;
    }
    for (size_t i = 1; i < rs->n_instances; i++)
        for (size_t j = i; j > 0 && strcmp(rs->instances[j - 1]->id, rs->instances[j]->id) > 0;
             j--) {
            Permit__V1__Instance *t = rs->instances[j];
            rs->instances[j] = rs->instances[j - 1];
            rs->instances[j - 1] = t;
        }
out:
    free(keys);
    free(args);
    free(calls);
    free(beats);
    return rc;
}

const struct connect_method fleetsvc_methods[] = {
    ADMIN_METHOD("FleetService", "GetFleetStats", get_fleet_stats, 1, get_fleet_stats),
    ADMIN_METHOD("FleetService", "GetFleetTraffic", get_fleet_traffic, 1, get_fleet_traffic),
    ADMIN_METHOD("FleetService", "ListInstances", list_instances, 1, list_instances),
    {NULL, NULL, NULL, 0, NULL},
};
