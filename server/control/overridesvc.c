/*
 * overridesvc.c - OverrideService: a policy's overrides listed, read,
 * written, imported and exported (see overridesvc.h).
 *
 * Every field a client sends is checked before MySQL is asked
 * (overridecheck.h), against the policy's algorithm as MySQL has it now,
 * with errors that start with the field's name, so the admin UI shows
 * each at its field. The CSV import and export are overridecsv.c's.
 *
 * Traffic is what the hot keys (decisions/hotkeys.h, GetHotKeys) counted
 * for the policy over the last minute or two: an exact key's count, the
 * sum under a prefix. Only the policy's hundred most allowed and hundred
 * most denied keys are known, so a quiet key's traffic is 0; sorting by
 * traffic puts the busy ones first, which is what an editor looks for.
 *
 * The MySQL connection is this module's own, used under one mutex: admin
 * traffic is light.
 */
#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/admin.h"
#include "control/overridecheck.h"
#include "control/overridecsv.h"
#include "control/overridesvc.h"
#include "core/log.h"
#include "decisions/hotkeys.h"
#include "permit/v1/overrides.pb-c.h"
#include "stores/override_edits.h"
#include "transport/connect.h"

#define OVERRIDESVC_PAGE 100                    /* rows per page when none is asked for */
#define OVERRIDESVC_PAGE_MAX 1000
#define OVERRIDESVC_HOTKEYS 100                 /* hot keys read per list (GetHotKeys' most) */

struct overridesvc {
    const struct config *cfg;
    struct admin *admin;
    struct redis *redis;
    struct overridesync *sync;
    struct override_edits_db *db;
    pthread_mutex_t lock;                       /* around every use of db */
    struct overridecsv *csv;
};

int overridesvc_new(const struct config *cfg, struct admin *admin, struct redis *redis,
                    struct overridesync *sync, struct overridesvc **out,
                    struct permitd_error *err)
{
    struct overridesvc *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->cfg = cfg;
    s->admin = admin;
    s->redis = redis;
    s->sync = sync;
    pthread_mutex_init(&s->lock, NULL);
    if ((rc = override_edits_db_new(cfg, &s->db, err)) != PERMITD_OK ||
        (rc = overridecsv_new(s->db, &s->lock, &s->csv, err)) != PERMITD_OK) {
        overridesvc_free(s);
        return rc;
    }
    *out = s;
    return PERMITD_OK;
}

void overridesvc_free(struct overridesvc *s)
{
    if (s == NULL)
        return;
    overridecsv_free(s->csv);
    override_edits_db_free(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* After a write of policy's overrides: this instance at once, the others
 * by the notice (a lost one costs them at most one sync interval: each
 * pass reloads what changed). */
static void changed(struct overridesvc *s, const char *policy)
{
    struct permitd_error err = {0, ""};

    if (overridesync_load_policy(s->sync, policy, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "overrides not reloaded after a change; the next sync pass "
                "loads them", "policy=%s error=%s", policy, log_q(err.message));
    if (overridesync_publish(s->cfg, s->redis, policy, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "override change notice not sent; instances see the change at "
                "their next sync pass", "policy=%s error=%s", policy, log_q(err.message));
}

/* The request's override, checked against its policy (which must exist). */
static int row_from(struct overridesvc *s, const Permit__V1__Override *m, struct override_row *r,
                    struct permitd_error *err)
{
    struct overridecheck_given g;
    enum policy_algorithm alg = POLICY_TOKEN_BUCKET;
    int rc;

    if (m == NULL)
        return permitd_error_set(err, PERMITD_EINVAL, "override: missing");
    g = (struct overridecheck_given){m->policy, m->match_kind, m->match_value, m->action,
                                     m->rate, m->window, m->expires_at, m->description,
                                     m->max_permits};
    if ((rc = policy_check_name("policy", m->policy, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = override_edits_policy(s->db, "policy", m->policy, &alg, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK)
        rc = overridecheck_row(&g, alg, r, err);
    r->id = m->id;
    r->version = m->version;
    return rc;
}

/* The policy's hot keys and their counts, that an override's traffic is
 * read from. */
struct traffic {
    struct hotkeys_count v[2 * OVERRIDESVC_HOTKEYS];
    size_t n;
};

/* The policy's hot keys, allowed and denied together; none when Redis
 * cannot say (the list still answers, with traffic 0). */
static void traffic_read(struct overridesvc *s, const char *policy, struct traffic *t)
{
    struct permitd_error err;
    size_t na = 0, nd = 0, instances = 0;

    t->n = 0;
    if (hotkeys_read(s->cfg, s->redis, policy, t->v, &na, t->v + OVERRIDESVC_HOTKEYS, &nd,
                     OVERRIDESVC_HOTKEYS, &instances, &err) != PERMITD_OK)
        return;
    memmove(t->v + na, t->v + OVERRIDESVC_HOTKEYS, nd * sizeof(t->v[0]));
    t->n = na + nd;
}

static int64_t traffic_of(const struct traffic *t, const char *kind, const char *value)
{
    size_t len = strlen(value);
    int prefix = strcmp(kind, "prefix") == 0;
    int64_t sum = 0;

    if (strcmp(kind, "app") == 0)
        return 0;
    for (size_t i = 0; i < t->n; i++)
        if (prefix ? strncmp(t->v[i].key, value, len) == 0 : strcmp(t->v[i].key, value) == 0)
            sum += (int64_t)t->v[i].count;
    return sum;
}

static Permit__V1__Override *row_proto(struct connect_call *call, const struct override_row *r,
                                       int64_t traffic)
{
    Permit__V1__Override *m = connect_call_alloc(call, sizeof(*m));
    char window[POLICY_DURATION_TEXT] = "";

    if (m == NULL)
        return NULL;
    permit__v1__override__init(m);
    if (r->window_ms > 0)
        policy_format_duration(window, r->window_ms);
    m->id = r->id;
    m->max_permits = r->max_permits;
    m->version = r->version;
    m->expired = r->expired != 0;
    m->traffic = traffic;
    m->policy = connect_call_strdup(call, r->policy);
    m->match_kind = connect_call_strdup(call, r->kind);
    m->match_value = connect_call_strdup(call, r->value);
    m->action = connect_call_strdup(call, r->action);
    m->rate = connect_call_strdup(call, r->rate);
    m->window = connect_call_strdup(call, window);
    m->expires_at = connect_call_strdup(call, r->expires_at);
    m->description = connect_call_strdup(call, r->description);
    m->created_by = connect_call_strdup(call, r->created_by);
    m->updated_by = connect_call_strdup(call, r->updated_by);
    m->created_at = connect_call_strdup(call, r->created_at);
    m->updated_at = connect_call_strdup(call, r->updated_at);
    if (!m->policy || !m->match_kind || !m->match_value || !m->action || !m->rate ||
        !m->window || !m->expires_at || !m->description || !m->created_by || !m->updated_by ||
        !m->created_at || !m->updated_at)
        return NULL;
    return m;
}

/* rows[0..n) into rs, each with its traffic. */
static int page_proto(struct overridesvc *s, struct connect_call *call,
                      const struct override_row *rows, size_t n, const struct traffic *known,
                      Permit__V1__ListOverridesResponse *rs, struct permitd_error *err)
{
    struct traffic *t = NULL;
    const char *read_for = NULL;

    if ((rs->overrides = connect_call_alloc(call, (n + 1) * sizeof(*rs->overrides))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const struct traffic *use = known;
        if (use == NULL) {
            /* One read of the hot keys per policy met (an app's list spans
             * policies; in its order, a policy's rows come together). */
            if (t == NULL && (t = malloc(sizeof(*t))) == NULL)
                return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            if (read_for == NULL || strcmp(read_for, rows[i].policy) != 0) {
                traffic_read(s, rows[i].policy, t);
                read_for = rows[i].policy;
            }
            use = t;
        }
        if ((rs->overrides[rs->n_overrides++] =
                 row_proto(call, &rows[i], traffic_of(use, rows[i].kind, rows[i].value))) ==
            NULL) {
            free(t);
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
    }
    free(t);
    return PERMITD_OK;
}

/* Reads a page request: *offset from token, *limit from size. */
static int paging(int32_t size, const char *token, size_t *offset, size_t *limit,
                  struct permitd_error *err)
{
    char *end;
    unsigned long long v;

    *limit = size <= 0 ? OVERRIDESVC_PAGE : size > OVERRIDESVC_PAGE_MAX ? OVERRIDESVC_PAGE_MAX
                                                                          : (size_t)size;
    *offset = 0;
    if (token[0] == '\0')
        return PERMITD_OK;
    v = strtoull(token, &end, 10);
    if (!isdigit((unsigned char)token[0]) || *end != '\0' || v > 100000000ULL)
        return permitd_error_set(err, PERMITD_EINVAL, "page_token: \"%.40s\" is not one a "
                                 "previous page gave", token);
    *offset = (size_t)v;
    return PERMITD_OK;
}

static int next_token(struct connect_call *call, size_t offset, size_t n, int64_t total,
                      char **out, struct permitd_error *err)
{
    char buf[32] = "";

    if ((int64_t)(offset + n) < total && n > 0)
        snprintf(buf, sizeof(buf), "%zu", offset + n);
    if ((*out = connect_call_strdup(call, buf)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    return PERMITD_OK;
}

/* A list's answer, after the read that returned rc: rows[0..n) (freed
 * here) with their traffic, the next page's token and the total. */
static int answer_page(struct overridesvc *s, struct connect_call *call, int rc,
                       const struct override_query *q, struct override_row *rows, size_t n,
                       int64_t total, const struct traffic *known,
                       Permit__V1__ListOverridesResponse *rs, struct permitd_error *err)
{
    if (rc == PERMITD_OK)
        rc = page_proto(s, call, rows, n, known, rs, err);
    if (rc == PERMITD_OK)
        rc = next_token(call, q->offset, n, total, &rs->next_page_token, err);
    rs->total = total;
    free(rows);
    return rc;
}

struct by_traffic {
    int64_t id, traffic;
    size_t order;                               /* the match order, for ties */
};

static int traffic_cmp(const void *a, const void *b)
{
    const struct by_traffic *x = a, *y = b;

    if (x->traffic != y->traffic)
        return x->traffic > y->traffic ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* A page by traffic: every match's traffic, sorted in memory (a policy
 * has at most OVERRIDES_PER_POLICY_MAX), then the page's rows read. */
static int list_by_traffic(struct overridesvc *s, const struct override_query *q,
                           const struct traffic *t, struct override_row **rows, size_t *n,
                           int64_t *total, struct permitd_error *err)
{
    struct override_match *m = NULL;
    struct by_traffic *v = NULL;
    int64_t *ids = NULL;
    size_t nm = 0, k = 0;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = override_edits_matches(s->db, q, &m, &nm, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK && ((v = calloc(nm + 1, sizeof(*v))) == NULL ||
                             (ids = calloc(q->limit + 1, sizeof(*ids))) == NULL))
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK) {
        for (size_t i = 0; i < nm; i++)
            v[i] = (struct by_traffic){m[i].id, traffic_of(t, m[i].kind, m[i].value), i};
        qsort(v, nm, sizeof(*v), traffic_cmp);
        for (size_t i = q->offset; i < nm && k < q->limit; i++)
            ids[k++] = v[i].id;
        *total = (int64_t)nm;
        pthread_mutex_lock(&s->lock);
        rc = override_edits_by_ids(s->db, ids, k, rows, n, err);
        pthread_mutex_unlock(&s->lock);
    }
    free(m);
    free(v);
    free(ids);
    return rc;
}

static int list_overrides(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                          ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct overridesvc *s = ud;
    const Permit__V1__ListOverridesRequest *rq = (const void *)in_;
    Permit__V1__ListOverridesResponse *rs = (void *)out_;
    struct override_query q = {.policy = rq->policy, .search = rq->search};
    struct override_row *rows = NULL;
    struct traffic *t = NULL;
    char user[POLICY_NAME_MAX + 1];
    size_t n = 0;
    int64_t total = 0;
    int by_traffic = strcmp(rq->sort, "traffic") == 0, rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 0, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = policy_check_name("policy", rq->policy, err)) != PERMITD_OK ||
        (rc = paging(rq->page_size, rq->page_token, &q.offset, &q.limit, err)) != PERMITD_OK)
        return rc;
    if (strlen(rq->search) > OVERRIDE_VALUE_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "search: %zu bytes, the limit is %d (a "
                                 "match_value is no longer)", strlen(rq->search),
                                 OVERRIDE_VALUE_MAX);
    if (rq->sort[0] == '\0' || strcmp(rq->sort, "match") == 0)
        q.sort = OVERRIDE_SORT_MATCH;
    else if (strcmp(rq->sort, "updated") == 0)
        q.sort = OVERRIDE_SORT_UPDATED;
    else if (strcmp(rq->sort, "expires") == 0)
        q.sort = OVERRIDE_SORT_EXPIRES;
    else if (!by_traffic)
        return permitd_error_set(err, PERMITD_EINVAL, "sort: \"%.20s\" is not match, traffic, "
                                 "updated or expires", rq->sort);
    if ((t = malloc(sizeof(*t))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    traffic_read(s, rq->policy, t);
    if (by_traffic) {
        rc = list_by_traffic(s, &q, t, &rows, &n, &total, err);
    } else {
        pthread_mutex_lock(&s->lock);
        rc = override_edits_list(s->db, &q, &rows, &n, &total, err);
        pthread_mutex_unlock(&s->lock);
    }
    rc = answer_page(s, call, rc, &q, rows, n, total, t, rs, err);
    free(t);
    return rc;
}

static int list_app_overrides(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                              ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct overridesvc *s = ud;
    const Permit__V1__ListAppOverridesRequest *rq = (const void *)in_;
    Permit__V1__ListOverridesResponse *rs = (void *)out_;
    struct override_query q = {.app = rq->app};
    struct override_row *rows = NULL;
    char user[POLICY_NAME_MAX + 1];
    size_t n = 0;
    int64_t total = 0;
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 0, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = policy_check_name("app", rq->app, err)) != PERMITD_OK ||
        (rc = paging(rq->page_size, rq->page_token, &q.offset, &q.limit, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = override_edits_list(s->db, &q, &rows, &n, &total, err);
    pthread_mutex_unlock(&s->lock);
    return answer_page(s, call, rc, &q, rows, n, total, NULL, rs, err);
}

/* Override id as a list shows it, into *out. */
static int one(struct overridesvc *s, struct connect_call *call, int64_t id,
               Permit__V1__Override **out, struct permitd_error *err)
{
    struct override_row *r = malloc(sizeof(*r));
    struct traffic *t = malloc(sizeof(*t));
    int rc;

    *out = NULL;
    if (r == NULL || t == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto out;
    }
    pthread_mutex_lock(&s->lock);
    rc = override_edits_get(s->db, id, r, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        goto out;
    traffic_read(s, r->policy, t);
    if ((*out = row_proto(call, r, traffic_of(t, r->kind, r->value))) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
out:
    free(r);
    free(t);
    return rc;
}

static int get_override(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                        ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct overridesvc *s = ud;
    const Permit__V1__GetOverrideRequest *rq = (const void *)in_;
    Permit__V1__GetOverrideResponse *rs = (void *)out_;
    char user[POLICY_NAME_MAX + 1];
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 0, user, sizeof(user), err)) != PERMITD_OK)
        return rc;
    return one(s, call, rq->id, &rs->override, err);
}

static int create_override(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                           ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct overridesvc *s = ud;
    const Permit__V1__CreateOverrideRequest *rq = (const void *)in_;
    Permit__V1__CreateOverrideResponse *rs = (void *)out_;
    struct override_row *r = malloc(sizeof(*r));
    char user[POLICY_NAME_MAX + 1];
    int64_t id = 0;
    int rc;

    (void)scratch;
    if (r == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = row_from(s, rq->override, r, err)) != PERMITD_OK)
        goto out;
    pthread_mutex_lock(&s->lock);
    rc = override_edits_create(s->db, r, user, &id, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        goto out;
    log_msg(LOG_LEVEL_INFO, "override created", "id=%" PRId64 " policy=%s kind=%s by=%s", id,
            r->policy, r->kind, user);
    changed(s, r->policy);
    rc = one(s, call, id, &rs->override, err);
out:
    free(r);
    return rc;
}

static int update_override(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                           ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct overridesvc *s = ud;
    const Permit__V1__UpdateOverrideRequest *rq = (const void *)in_;
    Permit__V1__UpdateOverrideResponse *rs = (void *)out_;
    struct override_row *r = malloc(sizeof(*r));
    char user[POLICY_NAME_MAX + 1], before[POLICY_NAME_MAX + 1];
    int rc;

    (void)scratch;
    if (r == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = row_from(s, rq->override, r, err)) != PERMITD_OK)
        goto out;
    if (r->id <= 0) {
        rc = permitd_error_set(err, PERMITD_EINVAL, "id: %" PRId64 " names no override (ids "
                               "start at 1; ListOverrides shows them)", r->id);
        goto out;
    }
    pthread_mutex_lock(&s->lock);
    rc = override_edits_update(s->db, r, user, before, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        goto out;
    log_msg(LOG_LEVEL_INFO, "override updated", "id=%" PRId64 " policy=%s by=%s", r->id,
            r->policy, user);
    changed(s, r->policy);
    if (strcmp(before, r->policy) != 0)
        changed(s, before);
    rc = one(s, call, r->id, &rs->override, err);
out:
    free(r);
    return rc;
}

static int delete_override(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                           ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct overridesvc *s = ud;
    const Permit__V1__DeleteOverrideRequest *rq = (const void *)in_;
    char user[POLICY_NAME_MAX + 1], policy[POLICY_NAME_MAX + 1];
    int rc;

    (void)out_;
    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = override_edits_delete(s->db, rq->id, rq->version, user, policy, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        return rc;
    log_msg(LOG_LEVEL_INFO, "override deleted", "id=%" PRId64 " policy=%s by=%s", rq->id,
            policy, user);
    changed(s, policy);
    return PERMITD_OK;
}


static int import_csv(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct overridesvc *s = ud;
    const Permit__V1__ImportOverridesCsvRequest *rq = (const void *)in_;
    Permit__V1__ImportOverridesCsvResponse *rs = (void *)out_;
    struct override_import_counts counts;
    char user[POLICY_NAME_MAX + 1], next[OVERRIDECSV_ID_LEN + 1];
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = policy_check_name("policy", rq->policy, err)) != PERMITD_OK ||
        (rc = overridecsv_import(s->csv, user, rq->policy, rq->csv.data, rq->csv.len,
                                 rq->upload_id, rq->last, rq->replace, next, &counts,
                                 err)) != PERMITD_OK)
        return rc;
    if (!rq->last) {
        if ((rs->upload_id = connect_call_strdup(call, next)) == NULL)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        return PERMITD_OK;
    }
    rs->created = counts.created;
    rs->updated = counts.updated;
    rs->deleted = counts.deleted;
    log_msg(LOG_LEVEL_INFO, "overrides imported", "policy=%s created=%" PRId64 " updated=%"
            PRId64 " deleted=%" PRId64 " by=%s", rq->policy, counts.created, counts.updated,
            counts.deleted, user);
    changed(s, rq->policy);
    return PERMITD_OK;
}

static int export_csv(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct overridesvc *s = ud;
    const Permit__V1__ExportOverridesCsvRequest *rq = (const void *)in_;
    Permit__V1__ExportOverridesCsvResponse *rs = (void *)out_;
    char user[POLICY_NAME_MAX + 1], *csv = NULL;
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 0, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = policy_check_name("policy", rq->policy, err)) != PERMITD_OK ||
        (rc = overridecsv_export(s->csv, rq->policy, &csv, &rs->count, err)) != PERMITD_OK)
        return rc;
    if ((rs->csv = connect_call_strdup(call, csv)) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    free(csv);
    return rc;
}

const struct connect_method overridesvc_methods[] = {
    ADMIN_METHOD("OverrideService", "ListOverrides", list_overrides, 1, list_overrides),
    /* (answered with ListOverridesResponse: not ADMIN_METHOD's pair) */
    {"/permit.v1.OverrideService/ListAppOverrides",
     &permit__v1__list_app_overrides_request__descriptor,
     &permit__v1__list_overrides_response__descriptor, 1, list_app_overrides},
    ADMIN_METHOD("OverrideService", "GetOverride", get_override, 1, get_override),
    ADMIN_METHOD("OverrideService", "CreateOverride", create_override, 0, create_override),
    ADMIN_METHOD("OverrideService", "UpdateOverride", update_override, 0, update_override),
    ADMIN_METHOD("OverrideService", "DeleteOverride", delete_override, 0, delete_override),
    ADMIN_METHOD("OverrideService", "ImportOverridesCsv", import_overrides_csv, 0, import_csv),
    ADMIN_METHOD("OverrideService", "ExportOverridesCsv", export_overrides_csv, 1, export_csv),
    {NULL, NULL, NULL, 0, NULL},
};
