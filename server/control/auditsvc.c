/*
 * auditsvc.c - AuditService (see auditsvc.h).
 *
 * The request's times are RFC 3339 in UTC and its cursor is the text this
 * module made for the page before ("<time>~<source>~<id>"); both are
 * checked here, character by character, and refused with the bad value
 * named, before anything reaches SQL.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/admin.h"
#include "control/auditsvc.h"
#include "permit/v1/audit.pb-c.h"
#include "stores/audit.h"
#include "stores/policy.h"
#include "transport/connect.h"

#define AUDIT_PAGE_DEFAULT 50

struct auditsvc {
    struct admin *admin;
    struct audit_db *db;
    pthread_mutex_t lock;
};

int auditsvc_new(const struct config *cfg, struct admin *admin, struct auditsvc **out,
                 struct permitd_error *err)
{
    struct auditsvc *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->admin = admin;
    if ((rc = audit_db_new(cfg, &s->db, err)) != PERMITD_OK) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return PERMITD_OK;
}

void auditsvc_free(struct auditsvc *s)
{
    if (s == NULL)
        return;
    audit_db_free(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static int digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* "2026-11-25T10:00Z", "...T10:00:00Z" or "...T10:00:00.123Z" (up to 6
 * fraction digits; a lower-case t or z too) into MySQL's
 * "2026-11-25 10:00:00.123000". Returns 0, or -1 when in is no such time. */
static int parse_time(const char *in, char *out, size_t len)
{
    char frac[7] = "000000";
    size_t n = strlen(in), f = 0;
    int sec = 0;

    if (n < 17 || !digits(in, 4) || in[4] != '-' || !digits(in + 5, 2) || in[7] != '-' ||
        !digits(in + 8, 2) || (in[10] != 'T' && in[10] != 't') || !digits(in + 11, 2) ||
        in[13] != ':' || !digits(in + 14, 2) || (in[n - 1] != 'Z' && in[n - 1] != 'z'))
        return -1;
    if (n > 17) {
        if (n < 20 || in[16] != ':' || !digits(in + 17, 2))
            return -1;
        sec = 1;
        if (n > 20) {
            f = n - 21;
            if (in[19] != '.' || f < 1 || f > 6 || !digits(in + 20, f))
                return -1;
            memcpy(frac, in + 20, f);
        }
    }
    if (atoi(in + 5) < 1 || atoi(in + 5) > 12 || atoi(in + 8) < 1 || atoi(in + 8) > 31 ||
        atoi(in + 11) > 23 || atoi(in + 14) > 59 || (sec && atoi(in + 17) > 59))
        return -1;
    snprintf(out, len, "%.10s %.5s:%.2s.%s", in, in + 11, sec ? in + 17 : "00", frac);
    return 0;
}

/* A cursor as next_cursor makes it: "2026-11-25 10:00:00.123456~3~42". */
static int parse_cursor(const char *in, struct audit_cursor *c)
{
    const char *t1 = strchr(in, '~'), *t2 = t1 ? strchr(t1 + 1, '~') : NULL;
    size_t tlen = t1 ? (size_t)(t1 - in) : 0;

    if (t2 == NULL || tlen != 26 || !digits(in, 4) || in[4] != '-' || !digits(in + 5, 2) ||
        in[7] != '-' || !digits(in + 8, 2) || in[10] != ' ' || !digits(in + 11, 2) ||
        in[13] != ':' || !digits(in + 14, 2) || in[16] != ':' || !digits(in + 17, 2) ||
        in[19] != '.' || !digits(in + 20, 6) || t2 - t1 != 2 || t1[1] < '1' || t1[1] > '0' + AUDIT_SOURCE_MAX ||
        t2[1] == '\0' || strlen(t2 + 1) > 20 || !digits(t2 + 1, strlen(t2 + 1)))
        return -1;
    snprintf(c->time, sizeof(c->time), "%.26s", in);
    c->source = t1[1] - '0';
    c->id = strtoull(t2 + 1, NULL, 10);
    return 0;
}

/* The request's filters, checked, into *f (its strings point into rq,
 * times and cursor into the caller's buffers). */
static int filters(const Permit__V1__ListAuditRequest *rq, struct audit_filter *f, char *since,
                   char *until, size_t len, struct audit_cursor *after, struct permitd_error *err)
{
    int rc;

    memset(f, 0, sizeof(*f));
    if (rq->policy[0] && (rc = policy_check_name("policy", rq->policy, err)) != PERMITD_OK)
        return rc;
    if (strlen(rq->user) > 128)
        return permitd_error_set(err, PERMITD_EINVAL, "user: %zu characters, the limit is 128",
                                 strlen(rq->user));
    if (rq->kind[0] && strcmp(rq->kind, "policy") != 0 && strcmp(rq->kind, "app") != 0 &&
        strcmp(rq->kind, "key") != 0 && strcmp(rq->kind, "user") != 0 &&
        strcmp(rq->kind, "bucket") != 0 && strcmp(rq->kind, "override") != 0 &&
        strcmp(rq->kind, "envoy") != 0 && strcmp(rq->kind, "gateway") != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "kind: \"%.20s\" is not policy, app, key, "
                                 "user, bucket, override, envoy or gateway", rq->kind);
    if (rq->since[0] && parse_time(rq->since, since, len) != 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "since: \"%.40s\" is not an RFC 3339 time in UTC "
                                 "(2026-11-25T10:00:00Z)", rq->since);
    if (rq->until[0] && parse_time(rq->until, until, len) != 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "until: \"%.40s\" is not an RFC 3339 time in UTC "
                                 "(2026-11-25T10:00:00Z)", rq->until);
    if (rq->page_size < 0 || rq->page_size > AUDIT_PAGE_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "page_size: %d is not 1 to %d (0: %d)",
                                 rq->page_size, AUDIT_PAGE_MAX, AUDIT_PAGE_DEFAULT);
    if (rq->cursor[0] && parse_cursor(rq->cursor, after) != 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "cursor: \"%.60s\" is not a next_cursor of ListAudit", rq->cursor);
    f->policy = rq->policy;
    f->actor = rq->user;
    f->kind = rq->kind;
    f->since = rq->since[0] ? since : NULL;
    f->until = rq->until[0] ? until : NULL;
    f->after = rq->cursor[0] ? after : NULL;
    f->limit = rq->page_size ? rq->page_size : AUDIT_PAGE_DEFAULT;
    return PERMITD_OK;
}

static Permit__V1__AuditEntry *entry_proto(struct connect_call *call, const struct audit_entry *e)
{
    Permit__V1__AuditEntry *m = connect_call_alloc(call, sizeof(*m));

    if (m == NULL)
        return NULL;
    permit__v1__audit_entry__init(m);
    m->kind = connect_call_strdup(call, e->kind);
    m->subject = connect_call_strdup(call, e->subject);
    m->key_prefix = connect_call_strdup(call, e->key_prefix);
    m->action = connect_call_strdup(call, e->action);
    m->actor = connect_call_strdup(call, e->actor);
    m->changed_at = connect_call_strdup(call, e->changed_at);
    m->old_value = connect_call_strdup(call, e->old_value);
    m->new_value = connect_call_strdup(call, e->new_value);
    if (!m->kind || !m->subject || !m->key_prefix || !m->action || !m->actor || !m->changed_at ||
        !m->old_value || !m->new_value)
        return NULL;
    return m;
}

static int list_audit(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct auditsvc *s = ud;
    const Permit__V1__ListAuditRequest *rq = (const void *)in_;
    Permit__V1__ListAuditResponse *rs = (void *)out_;
    char me[129], since[AUDIT_TIME_MAX], until[AUDIT_TIME_MAX];
    struct audit_cursor after;
    struct audit_filter f;
    struct audit_entry *v = NULL;
    size_t n = 0, shown;
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, ADMIN_VIEWER, me, sizeof(me), err)) != PERMITD_OK ||
        (rc = filters(rq, &f, since, until, sizeof(since), &after, err)) != PERMITD_OK)
        return rc;
    f.limit++;                      /* one more: is there a next page? */
    pthread_mutex_lock(&s->lock);
    rc = audit_list(s->db, &f, &v, &n, err);
    pthread_mutex_unlock(&s->lock);
    shown = n < (size_t)(f.limit - 1) ? n : (size_t)(f.limit - 1);
    if (rc == PERMITD_OK &&
        (rs->entries = connect_call_alloc(call, (shown + 1) * sizeof(*rs->entries))) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; rc == PERMITD_OK && i < shown; i++)
        if ((rs->entries[rs->n_entries++] = entry_proto(call, &v[i])) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK && n > shown) {
        char cursor[AUDIT_TIME_MAX + 32];
        const struct audit_cursor *c = &v[shown - 1].at;
        snprintf(cursor, sizeof(cursor), "%s~%d~%" PRIu64, c->time, c->source, c->id);
        if ((rs->next_cursor = connect_call_strdup(call, cursor)) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    audit_list_free(v, n);
    return rc;
}

const struct connect_method auditsvc_methods[] = {
    ADMIN_METHOD("AuditService", "ListAudit", list_audit, 1, list_audit),
    {NULL, NULL, NULL, 0, NULL},
};
