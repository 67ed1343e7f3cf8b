/*
 * overridesvc.c - OverrideService: a policy's overrides listed, read,
 * written, imported and exported (see overridesvc.h).
 *
 * Every field a client sends is checked here before MySQL is asked
 * (check_row()), with errors that start with the field's name, so the
 * admin UI shows each at its field, and a CSV import names the line and
 * column of the first bad one; nothing of an import is written unless all
 * of it passes. The limits are checked against the policy's algorithm as
 * MySQL has it now.
 *
 * Traffic is what the hot keys (decisions/hotkeys.h, GetHotKeys) counted
 * for the policy over the last minute or two: an exact key's count, the
 * sum under a prefix. Only the policy's hundred most allowed and hundred
 * most denied keys are known, so a quiet key's traffic is 0; sorting by
 * traffic puts the busy ones first, which is what an editor looks for.
 *
 * A CSV file larger than one request body (--max-body-bytes) arrives in
 * pieces: the first answer names an upload, the next pieces append to it,
 * the last applies it. Uploads are held in memory per editor, at most
 * OVERRIDESVC_UPLOADS at once of OVERRIDESVC_UPLOAD_MAX bytes, and one
 * left unfinished is dropped after OVERRIDESVC_UPLOAD_TTL_S.
 *
 * The MySQL connection is this module's own, used under one mutex: admin
 * traffic is light.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/admin.h"
#include "control/auth.h"
#include "control/overridesvc.h"
#include "core/clock.h"
#include "core/csv.h"
#include "core/log.h"
#include "core/utf8.h"
#include "decisions/hotkeys.h"
#include "permit/v1/overrides.pb-c.h"
#include "stores/override_edits.h"
#include "transport/connect.h"

#define OVERRIDESVC_PAGE 100                    /* rows per page when none is asked for */
#define OVERRIDESVC_PAGE_MAX 1000
#define OVERRIDESVC_HOTKEYS 100                 /* hot keys read per list (GetHotKeys' most) */
#define OVERRIDESVC_UPLOADS 8                   /* CSV uploads held at once */
#define OVERRIDESVC_UPLOAD_MAX (16 * 1024 * 1024)   /* bytes of one CSV file */
#define OVERRIDESVC_UPLOAD_TTL_S 600
#define OVERRIDESVC_DEADLINE_MS 1000            /* the change notice's PUBLISH */

/* The CSV's columns, in the order an export writes them. */
enum col { C_KIND, C_VALUE, C_ACTION, C_MAX, C_RATE, C_WINDOW, C_EXPIRES, C_DESCRIPTION, C_N };
static const char *const col_names[C_N] = {
    "match_kind", "match_value", "action", "max_permits", "rate", "window", "expires_at",
    "description",
};

struct upload {
    char id[AUTH_TOKEN_LEN + 1];                /* "" = free */
    char user[POLICY_NAME_MAX + 1];
    char policy[POLICY_NAME_MAX + 1];
    char *data;
    size_t len;
    int64_t touched_us;
};

struct overridesvc {
    const struct config *cfg;
    struct admin *admin;
    struct redis *redis;
    struct override_edits_db *db;
    pthread_mutex_t lock;                       /* db and uploads */
    struct upload uploads[OVERRIDESVC_UPLOADS];
};

int overridesvc_new(const struct config *cfg, struct admin *admin, struct redis *redis,
                    struct overridesvc **out, struct permitd_error *err)
{
    struct overridesvc *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->cfg = cfg;
    s->admin = admin;
    s->redis = redis;
    if ((rc = override_edits_db_new(cfg, &s->db, err)) != PERMITD_OK) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return PERMITD_OK;
}

void overridesvc_free(struct overridesvc *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < OVERRIDESVC_UPLOADS; i++)
        free(s->uploads[i].data);
    override_edits_db_free(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* After a write of policy's overrides: every instance, this one too,
 * reloads them on the notice; a lost notice costs at most one sync
 * interval (each pass reloads them all). */
static void changed(struct overridesvc *s, const char *policy)
{
    struct permitd_error err = {0, ""};
    char channel[160];
    struct redis_str pub[3] = {{"PUBLISH", 7}, {channel, 0}, {policy, strlen(policy)}};

    pub[1].len = (size_t)snprintf(channel, sizeof(channel), "%soverride-changes",
                                  s->cfg->redis_prefix);
    if (redis_command(s->redis, pub, 3, clock_now_us() + OVERRIDESVC_DEADLINE_MS * 1000LL, NULL,
                      NULL, NULL, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "override change notice not sent; instances see the change at "
                "their next sync pass", "policy=%s error=%s", policy, log_q(err.message));
}

/* ---- checking what a client sends ---- */

/* Reads an RFC 3339 time ("2026-11-28T18:00:00Z", "...:00.5+01:00") into
 * Unix microseconds. */
static int parse_time(const char *s, int64_t *us, struct permitd_error *err)
{
    struct tm tm;
    int y, mo, d, h, mi, sec, n = 0, off = 0;
    int64_t frac = 0, scale = 1000000;
    const char *p;

    memset(&tm, 0, sizeof(tm));
    if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3 || n != 10 ||
        (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        sscanf(s + 11, "%2d:%2d:%2d%n", &h, &mi, &sec, &n) != 3 || n != 8)
        goto bad;
    p = s + 19;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            goto bad;
        for (; isdigit((unsigned char)*p); p++)
            if (scale > 1) {
                scale /= 10;
                frac += (*p - '0') * scale;
            }
    }
    if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
        off = 0;
    } else if ((*p == '+' || *p == '-') && isdigit((unsigned char)p[1]) &&
               isdigit((unsigned char)p[2]) && p[3] == ':' && isdigit((unsigned char)p[4]) &&
               isdigit((unsigned char)p[5]) && p[6] == '\0') {
        off = ((p[1] - '0') * 10 + (p[2] - '0')) * 60 + (p[4] - '0') * 10 + (p[5] - '0');
        if (off > 24 * 60)
            goto bad;
        off = *p == '-' ? -off : off;
    } else {
        goto bad;
    }
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
        sec > 59)
        goto bad;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    {
        time_t t = timegm(&tm);
        struct tm back;
        gmtime_r(&t, &back);
        if (back.tm_mday != d)      /* February 30th */
            goto bad;
        *us = ((int64_t)t - (int64_t)off * 60) * 1000000 + frac;
    }
    return PERMITD_OK;
bad:
    return permitd_error_set(err, PERMITD_EINVAL, "expires_at: \"%.60s\" is not a time as RFC "
                             "3339 writes it (2026-11-28T18:00:00Z, or with an offset: "
                             "+01:00)", s);
}

static int64_t wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Characters of UTF-8 s, or -1 when it is not well-formed. */
static long chars(const char *s)
{
    long n = 0;
    size_t len;

    for (; *s; s += len, n++)
        if ((len = utf8_char_len((const unsigned char *)s)) == 0)
            return -1;
    return n;
}

/* What a client gives of one override, as text. */
struct given {
    const char *policy, *kind, *value, *action, *rate, *window, *expires_at, *description;
    int64_t max_permits;
};

/* Checks g against the policy's algorithm and fills *r (id and version
 * left to the caller). Errors start with the field's name. */
static int check_row(const struct given *g, enum policy_algorithm alg, struct override_row *r,
                     struct permitd_error *err)
{
    long n;
    int rc;

    memset(r, 0, sizeof(*r));
    if ((rc = policy_check_name("policy", g->policy, err)) != PERMITD_OK)
        return rc;
    snprintf(r->policy, sizeof(r->policy), "%s", g->policy);
    if (strcmp(g->kind, "key") != 0 && strcmp(g->kind, "prefix") != 0 &&
        strcmp(g->kind, "app") != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "match_kind: \"%.20s\" is not key, prefix "
                                 "or app", g->kind);
    snprintf(r->kind, sizeof(r->kind), "%s", g->kind);
    if (g->value[0] == '\0')
        return permitd_error_set(err, PERMITD_EINVAL, "match_value: empty (the %s to match)",
                                 strcmp(g->kind, "app") == 0 ? "app's name" : g->kind);
    if ((rc = strcmp(g->kind, "app") == 0 ? policy_check_name("match_value", g->value, err)
                                          : policy_check_key("match_value", g->value, err)) !=
        PERMITD_OK)
        return rc;
    snprintf(r->value, sizeof(r->value), "%s", g->value);
    snprintf(r->action, sizeof(r->action), "%s", g->action[0] ? g->action : "limit");
    if (strcmp(r->action, "limit") == 0) {
        if (g->max_permits < 1 || g->max_permits > POLICY_MAX_PERMITS_MAX)
            return permitd_error_set(err, PERMITD_EINVAL, "max_permits: %" PRId64 " is not "
                                     "1..%lld (action limit sets the policy's limits)",
                                     g->max_permits, POLICY_MAX_PERMITS_MAX);
        if (alg == POLICY_SLIDING_LOG && g->max_permits > POLICY_LOG_MAX_PERMITS)
            return permitd_error_set(err, PERMITD_EINVAL, "max_permits: %" PRId64 " is more "
                                     "than a sliding_log policy allows (%d)", g->max_permits,
                                     POLICY_LOG_MAX_PERMITS);
        r->max_permits = g->max_permits;
        if (alg == POLICY_TOKEN_BUCKET) {
            if (g->rate[0] == '\0')
                return permitd_error_set(err, PERMITD_EINVAL, "rate: required: the policy is "
                                         "a token_bucket (permits per second, e.g. 10 or 0.5)");
            if ((rc = policy_check_rate("rate", g->rate, err)) != PERMITD_OK)
                return rc;
            if (g->window[0] != '\0')
                return permitd_error_set(err, PERMITD_EINVAL, "window: a token_bucket policy "
                                         "has none (give rate)");
            snprintf(r->rate, sizeof(r->rate), "%s", g->rate);
        } else {
            if (g->rate[0] != '\0')
                return permitd_error_set(err, PERMITD_EINVAL, "rate: a %s policy has none "
                                         "(give window, or leave it for the policy's)",
                                         policy_algorithm_name(alg));
            if (g->window[0] != '\0' &&
                (rc = policy_parse_duration("window", g->window, &r->window_ms, err)) !=
                    PERMITD_OK)
                return rc;
        }
    } else if (strcmp(r->action, "block") == 0 || strcmp(r->action, "exempt") == 0) {
        const char *f = g->max_permits ? "max_permits" : g->rate[0] ? "rate"
                                                       : g->window[0] ? "window" : NULL;
        if (f != NULL)
            return permitd_error_set(err, PERMITD_EINVAL, "%s: action %s sets no limits "
                                     "(leave it empty)", f, r->action);
    } else {
        return permitd_error_set(err, PERMITD_EINVAL, "action: \"%.20s\" is not limit, block "
                                 "or exempt", g->action);
    }
    if (g->expires_at[0] != '\0') {
        if ((rc = parse_time(g->expires_at, &r->expires_us, err)) != PERMITD_OK)
            return rc;
        if (r->expires_us <= wall_us())
            return permitd_error_set(err, PERMITD_EINVAL, "expires_at: %.60s has passed "
                                     "(an expiry is in the future; empty for never)",
                                     g->expires_at);
    }
    if ((n = chars(g->description)) < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "description: is not valid UTF-8 text");
    if (n > OVERRIDE_DESCRIPTION_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "description: %ld characters, the limit "
                                 "is %d", n, OVERRIDE_DESCRIPTION_MAX);
    snprintf(r->description, sizeof(r->description), "%s", g->description);
    return PERMITD_OK;
}

/* The request's override, checked against its policy (which must exist). */
static int row_from(struct overridesvc *s, const Permit__V1__Override *m, struct override_row *r,
                    struct permitd_error *err)
{
    struct given g;
    enum policy_algorithm alg = POLICY_TOKEN_BUCKET;
    int rc;

    if (m == NULL)
        return permitd_error_set(err, PERMITD_EINVAL, "override: missing");
    g = (struct given){m->policy, m->match_kind, m->match_value, m->action, m->rate, m->window,
                       m->expires_at, m->description, m->max_permits};
    if ((rc = policy_check_name("policy", m->policy, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = override_edits_policy(s->db, "policy", m->policy, &alg, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK)
        rc = check_row(&g, alg, r, err);
    r->id = m->id;
    r->version = m->version;
    return rc;
}

/* ---- traffic (the hot keys) ---- */

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

/* ---- answers ---- */

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

/* ---- the procedures ---- */

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
    if (rc == PERMITD_OK)
        rc = page_proto(s, call, rows, n, t, rs, err);
    if (rc == PERMITD_OK)
        rc = next_token(call, q.offset, n, total, &rs->next_page_token, err);
    rs->total = total;
    free(rows);
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
    if (rc == PERMITD_OK)
        rc = page_proto(s, call, rows, n, NULL, rs, err);
    if (rc == PERMITD_OK)
        rc = next_token(call, q.offset, n, total, &rs->next_page_token, err);
    rs->total = total;
    free(rows);
    return rc;
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

/* ---- CSV ---- */

/* An import being read: the header's columns, then the rows. */
struct import {
    const char *policy;
    enum policy_algorithm alg;
    int col[C_N];                               /* the file's column of each; -1 absent */
    size_t ncols;
    struct override_row *rows;
    size_t *lines;                              /* each row's first line */
    size_t n, cap;
    int header_read;
};

static int import_header(struct import *im, size_t line, char **f, size_t n,
                         struct permitd_error *err)
{
    for (size_t c = 0; c < C_N; c++)
        im->col[c] = -1;
    for (size_t i = 0; i < n; i++) {
        size_t c = 0;
        while (c < C_N && strcmp(f[i], col_names[c]) != 0)
            c++;
        if (c == C_N)
            return permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %zu: \"%.40s\" is "
                                     "not a column (the header names some of match_kind, "
                                     "match_value, action, max_permits, rate, window, "
                                     "expires_at, description)", line, i + 1, f[i]);
        if (im->col[c] >= 0)
            return permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %zu: \"%s\" is "
                                     "named twice", line, i + 1, f[i]);
        im->col[c] = (int)i;
    }
    if (im->col[C_KIND] < 0 || im->col[C_VALUE] < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "line %zu: the header must name "
                                 "match_kind and match_value (the first line is the header, as "
                                 "ExportOverridesCsv writes it)", line);
    im->ncols = n;
    im->header_read = 1;
    return PERMITD_OK;
}

/* The field of column c in f, or "" when the file has no such column. */
static const char *cell(const struct import *im, char **f, enum col c)
{
    return im->col[c] >= 0 ? f[im->col[c]] : "";
}

static int import_record(void *ud, size_t line, char **f, size_t n, struct permitd_error *err)
{
    struct import *im = ud;
    struct given g;
    struct permitd_error why = {0, ""};
    const char *max = NULL;
    char *end;
    int rc = PERMITD_OK;

    if (!im->header_read)
        return import_header(im, line, f, n, err);
    if (n != im->ncols)
        return permitd_error_set(err, PERMITD_EINVAL, "line %zu: %zu columns, the header has "
                                 "%zu", line, n, im->ncols);
    if (im->n == OVERRIDES_PER_POLICY_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "line %zu: more than %d rows, the most "
                                 "one policy may have", line, OVERRIDES_PER_POLICY_MAX);
    for (size_t i = 0; i < n; i++)
        if (utf8_check_string("x", f[i], &why) != PERMITD_OK)
            return permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %zu: not valid "
                                     "UTF-8", line, i + 1);
    if (im->n == im->cap) {
        size_t cap = im->cap ? im->cap * 2 : 64;
        struct override_row *rows = realloc(im->rows, cap * sizeof(*rows));
        size_t *lines = rows ? realloc(im->lines, cap * sizeof(*lines)) : NULL;
        if (rows != NULL)
            im->rows = rows;
        if (lines != NULL)
            im->lines = lines;
        if (rows == NULL || lines == NULL)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        im->cap = cap;
    }
    g = (struct given){im->policy, cell(im, f, C_KIND), cell(im, f, C_VALUE),
                       cell(im, f, C_ACTION), cell(im, f, C_RATE), cell(im, f, C_WINDOW),
                       cell(im, f, C_EXPIRES), cell(im, f, C_DESCRIPTION), 0};
    max = cell(im, f, C_MAX);
    if (max[0] != '\0') {
        g.max_permits = strtoll(max, &end, 10);
        if (!isdigit((unsigned char)max[0]) || *end != '\0')
            rc = permitd_error_set(&why, PERMITD_EINVAL, "max_permits: \"%.40s\" is not a "
                                   "whole number", max);
    }
    if (rc == PERMITD_OK)
        rc = check_row(&g, im->alg, &im->rows[im->n], &why);
    if (rc != PERMITD_OK) {
        /* why starts with the field's name: the column it came from. */
        size_t c = 0, flen = strcspn(why.message, ": ");
        const char *rest = why.message[flen] == ':' ? why.message + flen + 1 : why.message;
        while (*rest == ' ')
            rest++;
        while (c < C_N && !(strlen(col_names[c]) == flen &&
                            strncmp(why.message, col_names[c], flen) == 0))
            c++;
        if (c < C_N && im->col[c] >= 0)
            return permitd_error_set(err, rc, "line %zu, column %d (%s): %s", line,
                                     im->col[c] + 1, col_names[c], rest);
        return permitd_error_set(err, rc, "line %zu: %s", line, why.message);
    }
    im->lines[im->n++] = line;
    return PERMITD_OK;
}

static int line_cmp(const void *a, const void *b, void *ud)
{
    const struct import *im = ud;
    const struct override_row *x = &im->rows[*(const size_t *)a], *y = &im->rows[*(const size_t *)b];
    int c = strcmp(x->kind, y->kind);

    if (c == 0)
        c = strcmp(x->value, y->value);
    return c != 0 ? c : *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* Two rows of one match would leave the result up to their order: the
 * second is refused, naming both lines. */
static int import_unique(struct import *im, struct permitd_error *err)
{
    size_t *order = malloc((im->n + 1) * sizeof(*order));
    int rc = PERMITD_OK;

    if (order == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; i < im->n; i++)
        order[i] = i;
    qsort_r(order, im->n, sizeof(*order), line_cmp, im);
    for (size_t i = 1; i < im->n && rc == PERMITD_OK; i++) {
        const struct override_row *a = &im->rows[order[i - 1]], *b = &im->rows[order[i]];
        if (strcmp(a->kind, b->kind) == 0 && strcmp(a->value, b->value) == 0)
            rc = permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %d (match_value): "
                                   "%s \"%.256s\" is on line %zu already", im->lines[order[i]],
                                   im->col[C_VALUE] + 1, b->kind, b->value,
                                   im->lines[order[i - 1]]);
    }
    free(order);
    return rc;
}

/* Reads a whole CSV file of policy's overrides and writes them, all or
 * nothing, as user. */
static int import_apply(struct overridesvc *s, const char *policy, const char *data, size_t len,
                        int replace, const char *user, Permit__V1__ImportOverridesCsvResponse *rs,
                        struct permitd_error *err)
{
    struct import im;
    struct override_import_counts counts;
    int rc;

    memset(&im, 0, sizeof(im));
    im.policy = policy;
    pthread_mutex_lock(&s->lock);
    rc = override_edits_policy(s->db, "policy", policy, &im.alg, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK)
        rc = csv_read(data, len, C_N, import_record, &im, err);
    if (rc == PERMITD_OK && !im.header_read)
        rc = permitd_error_set(err, PERMITD_EINVAL, "line 1: the file is empty (its first line "
                               "is the header: match_kind,match_value,...)");
    if (rc == PERMITD_OK)
        rc = import_unique(&im, err);
    if (rc == PERMITD_OK) {
        pthread_mutex_lock(&s->lock);
        rc = override_edits_import(s->db, policy, im.rows, im.n, replace, user, &counts, err);
        pthread_mutex_unlock(&s->lock);
    }
    if (rc == PERMITD_OK) {
        rs->created = counts.created;
        rs->updated = counts.updated;
        rs->deleted = counts.deleted;
        log_msg(LOG_LEVEL_INFO, "overrides imported", "policy=%s created=%" PRId64 " updated=%"
                PRId64 " deleted=%" PRId64 " by=%s", policy, counts.created, counts.updated,
                counts.deleted, user);
        changed(s, policy);
    }
    free(im.rows);
    free(im.lines);
    return rc;
}

static void upload_drop(struct upload *u)
{
    free(u->data);
    memset(u, 0, sizeof(*u));
}

/* Appends piece to upload u: the file's bound is resource_exhausted (the
 * upload dropped). */
static int upload_append(struct upload *u, const ProtobufCBinaryData *piece,
                         struct permitd_error *err)
{
    char *p;

    if (u->len + piece->len > OVERRIDESVC_UPLOAD_MAX) {
        upload_drop(u);
        return permitd_error_set(err, PERMITD_EEXHAUSTED, "csv: the file is over %d bytes; "
                                 "split it", OVERRIDESVC_UPLOAD_MAX);
    }
    if ((p = realloc(u->data, u->len + piece->len + 1)) == NULL) {
        upload_drop(u);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    u->data = p;
    if (piece->len > 0)
        memcpy(u->data + u->len, piece->data, piece->len);
    u->len += piece->len;
    u->data[u->len] = '\0';
    u->touched_us = clock_now_us();
    return PERMITD_OK;
}

/* A piece of an upload: the first one starts it (*u the slot). Under
 * s->lock. */
static int upload_piece(struct overridesvc *s, const char *user,
                        const Permit__V1__ImportOverridesCsvRequest *rq, struct upload **out,
                        struct permitd_error *err)
{
    int64_t now = clock_now_us();
    struct upload *u = NULL;
    int rc;

    *out = NULL;
    for (size_t i = 0; i < OVERRIDESVC_UPLOADS; i++)
        if (s->uploads[i].id[0] != '\0' &&
            now - s->uploads[i].touched_us > OVERRIDESVC_UPLOAD_TTL_S * 1000000LL)
            upload_drop(&s->uploads[i]);
    if (rq->upload_id[0] == '\0') {
        for (size_t i = 0; u == NULL && i < OVERRIDESVC_UPLOADS; i++)
            if (s->uploads[i].id[0] == '\0')
                u = &s->uploads[i];
        if (u == NULL)
            return permitd_error_set(err, PERMITD_EEXHAUSTED, "upload_id: %d CSV uploads are "
                                     "under way; try again when one is done",
                                     OVERRIDESVC_UPLOADS);
        if ((rc = auth_new_token(u->id, err)) != PERMITD_OK)
            return rc;
        snprintf(u->user, sizeof(u->user), "%s", user);
        snprintf(u->policy, sizeof(u->policy), "%s", rq->policy);
    } else {
        for (size_t i = 0; u == NULL && i < OVERRIDESVC_UPLOADS; i++)
            if (s->uploads[i].id[0] != '\0' && strcmp(s->uploads[i].id, rq->upload_id) == 0 &&
                strcmp(s->uploads[i].user, user) == 0)
                u = &s->uploads[i];
        if (u == NULL)
            return permitd_error_set(err, PERMITD_ENOTFOUND, "upload_id: no upload of yours "
                                     "has that id (one left %d s without a piece is dropped): "
                                     "send the file again from its first piece",
                                     OVERRIDESVC_UPLOAD_TTL_S);
        if (strcmp(u->policy, rq->policy) != 0)
            return permitd_error_set(err, PERMITD_EINVAL, "policy: the upload is of policy "
                                     "\"%s\"", u->policy);
    }
    if ((rc = upload_append(u, &rq->csv, err)) != PERMITD_OK)
        return rc;
    *out = u;
    return PERMITD_OK;
}

static int import_csv(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct overridesvc *s = ud;
    const Permit__V1__ImportOverridesCsvRequest *rq = (const void *)in_;
    Permit__V1__ImportOverridesCsvResponse *rs = (void *)out_;
    char user[POLICY_NAME_MAX + 1];
    struct upload *u = NULL;
    char *data = NULL;
    size_t len = 0;
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = policy_check_name("policy", rq->policy, err)) != PERMITD_OK)
        return rc;
    if (rq->upload_id[0] == '\0' && rq->last) {
        /* A file sent whole (a NUL inside it is csv_read()'s to refuse). */
        if ((data = malloc(rq->csv.len + 1)) == NULL)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        if (rq->csv.len > 0)
            memcpy(data, rq->csv.data, rq->csv.len);
        len = rq->csv.len;
    } else {
        pthread_mutex_lock(&s->lock);
        rc = upload_piece(s, user, rq, &u, err);
        if (rc == PERMITD_OK && !rq->last &&
            (rs->upload_id = connect_call_strdup(call, u->id)) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        if (rc == PERMITD_OK && rq->last) {
            data = u->data;             /* taken: the slot is free again */
            len = u->len;
            u->data = NULL;
            upload_drop(u);
        }
        pthread_mutex_unlock(&s->lock);
        if (rc != PERMITD_OK || !rq->last)
            return rc;
    }
    rc = import_apply(s, rq->policy, data, len, rq->replace, user, rs, err);
    free(data);
    return rc;
}

static int export_csv(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct overridesvc *s = ud;
    const Permit__V1__ExportOverridesCsvRequest *rq = (const void *)in_;
    Permit__V1__ExportOverridesCsvResponse *rs = (void *)out_;
    struct override_query q = {.policy = rq->policy, .limit = OVERRIDESVC_PAGE_MAX};
    struct csv_out o = {0};
    char user[POLICY_NAME_MAX + 1];
    int64_t total = 0;
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 0, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = policy_check_name("policy", rq->policy, err)) != PERMITD_OK)
        return rc;
    for (size_t c = 0; c < C_N; c++)
        csv_put(&o, col_names[c], c == C_N - 1);
    for (;;) {
        struct override_row *rows = NULL;
        size_t n = 0;
        pthread_mutex_lock(&s->lock);
        rc = override_edits_list(s->db, &q, &rows, &n, &total, err);
        pthread_mutex_unlock(&s->lock);
        if (rc != PERMITD_OK)
            break;
        for (size_t i = 0; i < n; i++) {
            const struct override_row *r = &rows[i];
            char max[32] = "", window[POLICY_DURATION_TEXT] = "";
            if (r->expired)             /* an import refuses a past expiry */
                continue;
            if (r->max_permits > 0)
                snprintf(max, sizeof(max), "%" PRId64, r->max_permits);
            if (r->window_ms > 0)
                policy_format_duration(window, r->window_ms);
            csv_put(&o, r->kind, 0);
            csv_put(&o, r->value, 0);
            csv_put(&o, r->action, 0);
            csv_put(&o, max, 0);
            csv_put(&o, r->rate, 0);
            csv_put(&o, window, 0);
            csv_put(&o, r->expires_at, 0);
            csv_put(&o, r->description, 1);
            rs->count++;
        }
        free(rows);
        if (n < q.limit)
            break;
        q.offset += n;
    }
    if (rc == PERMITD_OK && o.oom)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK && (rs->csv = connect_call_strdup(call, o.s)) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    free(o.s);
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
