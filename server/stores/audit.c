/*
 * audit.c - the audit tables read as one list (see audit.h).
 *
 * One UNION ALL of a SELECT per table, each filtered and cut to the page's size
 * on its own (each table is indexed by changed_at, migration 0009), then
 * merged newest first by (changed_at, source, id): a total order, so a
 * cursor names exactly one place in it.
 */
#define _GNU_SOURCE                 /* vasprintf */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "stores/audit.h"
#include "stores/dbconn.h"

struct audit_db {
    struct dbconn_kept conn;        /* (dbconn.h) */
};

int audit_db_new(const struct config *cfg, struct audit_db **out, struct permitd_error *err)
{
    struct audit_db *d = calloc(1, sizeof(*d));

    *out = NULL;
    if (d == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    dbconn_kept_init(&d->conn, cfg, NULL);
    *out = d;
    return PERMITD_OK;
}

void audit_db_free(struct audit_db *d)
{
    if (d == NULL)
        return;
    dbconn_kept_close(&d->conn);
    free(d);
}

void audit_list_free(struct audit_entry *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++) {
        free(v[i].old_value);
        free(v[i].new_value);
    }
    free(v);
}

/* Appends printf text to *buf (a growing string); -1 when out of memory. */
__attribute__((format(printf, 2, 3)))
static int add(char **buf, const char *fmt, ...)
{
    va_list ap;
    char *more = NULL, *grown = NULL;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&more, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if (asprintf(&grown, "%s%s", *buf ? *buf : "", more) < 0) {
        free(more);
        return -1;
    }
    free(more);
    free(*buf);
    *buf = grown;
    return 0;
}

/* The filters shared by every table's SELECT: " AND ..." text. The values
 * come quoted (q*: NULL for no filter). */
static int common_where(char **sql, int source, const char *qactor, const char *qsince,
                        const char *quntil, const struct audit_filter *f, const char *qcur)
{
    int rc = 0;

    if (qactor != NULL)
        rc |= add(sql, " AND actor = %s", qactor);
    if (qsince != NULL)
        rc |= add(sql, " AND changed_at >= %s", qsince);
    if (quntil != NULL)
        rc |= add(sql, " AND changed_at < %s", quntil);
    if (f->after != NULL) {
        /* (changed_at, source, id) < the cursor's, with source fixed here. */
        if (source < f->after->source)
            rc |= add(sql, " AND changed_at <= %s", qcur);
        else if (source > f->after->source)
            rc |= add(sql, " AND changed_at < %s", qcur);
        else
            rc |= add(sql, " AND (changed_at < %s OR (changed_at = %s AND id < %" PRIu64 "))",
                      qcur, qcur, f->after->id);
    }
    return rc;
}

/* DATE_FORMAT patterns, inside add()'s printf format (hence %%). */
#define TIME_FMT "'%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'"
#define RAW_FMT "'%%Y-%%m-%%d %%H:%%i:%%s.%%f'"
#define COLUMNS(subject, prefix) \
    "id, " subject " COLLATE utf8mb4_bin AS subject, " prefix " AS kp, action, actor, " \
    "changed_at, IFNULL(old_value, '') AS ov, IFNULL(new_value, '') AS nv"

/* One field of an audit row's JSON (after, else before), as text of one
 * collation (the UNION's kp column mixes tables). */
#define JSON_TEXT(field) \
    "CONVERT(IFNULL(JSON_UNQUOTE(JSON_EXTRACT(IFNULL(new_value, old_value), '$." field \
    "')), '') USING utf8mb4) COLLATE utf8mb4_bin"

/* The whole statement into *sql. */
static int statement(struct audit_db *d, const struct audit_filter *f, char **sql)
{
    char *qp = NULL, *qa = NULL, *qs = NULL, *qu = NULL, *qc = NULL;
    const char *kind = f->kind && f->kind[0] ? f->kind : NULL;
    int rc = 0, branches = 0;
    int policy = !kind || strcmp(kind, "policy") == 0;
    int apps = !(f->policy && f->policy[0]) &&
               (!kind || strcmp(kind, "app") == 0 || strcmp(kind, "key") == 0);
    int users = !(f->policy && f->policy[0]) && (!kind || strcmp(kind, "user") == 0);
    int buckets = !kind || strcmp(kind, "bucket") == 0;
    int overrides = !kind || strcmp(kind, "override") == 0;
    int envoy = !kind || strcmp(kind, "envoy") == 0;
    int gateway = !kind || strcmp(kind, "gateway") == 0;

    if ((f->policy && f->policy[0] && (qp = dbconn_kept_quote(&d->conn, f->policy)) == NULL) ||
        (f->actor && f->actor[0] && (qa = dbconn_kept_quote(&d->conn, f->actor)) == NULL) ||
        (f->since && f->since[0] && (qs = dbconn_kept_quote(&d->conn, f->since)) == NULL) ||
        (f->until && f->until[0] && (qu = dbconn_kept_quote(&d->conn, f->until)) == NULL) ||
        (f->after && (qc = dbconn_kept_quote(&d->conn, f->after->time)) == NULL))
        rc = -1;
    rc |= add(sql, "SELECT src, id, subject, kp, action, actor, DATE_FORMAT(changed_at, " TIME_FMT
                   "), ov, nv, DATE_FORMAT(changed_at, " RAW_FMT ") FROM (");
    if (policy) {
        rc |= add(sql, "(SELECT %d AS src, " COLUMNS("name", "''") " FROM policy_audit WHERE 1",
                  AUDIT_POLICY);
        if (qp != NULL)
            rc |= add(sql, " AND name = %s", qp);
        rc |= common_where(sql, AUDIT_POLICY, qa, qs, qu, f, qc);
        rc |= add(sql, " ORDER BY changed_at DESC, id DESC LIMIT %d)", f->limit);
        branches++;
    }
    if (apps) {
        rc |= add(sql, "%s(SELECT %d AS src, " COLUMNS("app", "IFNULL(key_prefix, '')")
                       " FROM app_audit WHERE 1", branches ? " UNION ALL " : "", AUDIT_APP);
        if (kind != NULL)
            rc |= add(sql, " AND key_prefix IS %s", strcmp(kind, "key") == 0 ? "NOT NULL" : "NULL");
        rc |= common_where(sql, AUDIT_APP, qa, qs, qu, f, qc);
        rc |= add(sql, " ORDER BY changed_at DESC, id DESC LIMIT %d)", f->limit);
        branches++;
    }
    if (users) {
        rc |= add(sql, "%s(SELECT %d AS src, " COLUMNS("username", "''") " FROM user_audit WHERE 1",
                  branches ? " UNION ALL " : "", AUDIT_USER);
        rc |= common_where(sql, AUDIT_USER, qa, qs, qu, f, qc);
        rc |= add(sql, " ORDER BY changed_at DESC, id DESC LIMIT %d)", f->limit);
        branches++;
    }
    if (buckets) {
        rc |= add(sql, "%s(SELECT %d AS src, " COLUMNS("policy", "bucket_key")
                       " FROM bucket_audit WHERE 1", branches ? " UNION ALL " : "", AUDIT_BUCKET);
        if (qp != NULL)
            rc |= add(sql, " AND policy = %s", qp);
        rc |= common_where(sql, AUDIT_BUCKET, qa, qs, qu, f, qc);
        rc |= add(sql, " ORDER BY changed_at DESC, id DESC LIMIT %d)", f->limit);
        branches++;
    }
    if (overrides) {
        /* The match ("key alice", "prefix premium_", "app billing") from the
         * row as it was or became: an override's match never changes. */
        rc |= add(sql, "%s(SELECT %d AS src, " COLUMNS("policy", "CONCAT(" JSON_TEXT("match_kind") ", ' ', "
                                                         JSON_TEXT("match_value") ")")
                       " FROM override_audit WHERE 1", branches ? " UNION ALL " : "",
                  AUDIT_OVERRIDE);
        if (qp != NULL)
            rc |= add(sql, " AND policy = %s", qp);
        rc |= common_where(sql, AUDIT_OVERRIDE, qa, qs, qu, f, qc);
        rc |= add(sql, " ORDER BY changed_at DESC, id DESC LIMIT %d)", f->limit);
        branches++;
    }
    if (envoy) {
        rc |= add(sql, "%s(SELECT %d AS src, " COLUMNS("domain", "descriptor")
                       " FROM envoy_descriptor_audit WHERE 1", branches ? " UNION ALL " : "",
                  AUDIT_ENVOY);
        /* A descriptor is a policy's when it named it before or after. */
        if (qp != NULL)
            rc |= add(sql, " AND %s IN (JSON_UNQUOTE(JSON_EXTRACT(old_value, '$.policy')), "
                           "JSON_UNQUOTE(JSON_EXTRACT(new_value, '$.policy')))", qp);
        rc |= common_where(sql, AUDIT_ENVOY, qa, qs, qu, f, qc);
        rc |= add(sql, " ORDER BY changed_at DESC, id DESC LIMIT %d)", f->limit);
        branches++;
    }
    if (gateway) {
        /* Subject "rule 7"; the policy it named (after, else before) as kp. */
        rc |= add(sql, "%s(SELECT %d AS src, " COLUMNS("CONVERT(CONCAT('rule ', rule_id) USING utf8mb4)",
                                                         JSON_TEXT("policy"))
                       " FROM gateway_rule_audit WHERE 1", branches ? " UNION ALL " : "",
                  AUDIT_GATEWAY);
        if (qp != NULL)
            rc |= add(sql, " AND %s IN (JSON_UNQUOTE(JSON_EXTRACT(old_value, '$.policy')), "
                           "JSON_UNQUOTE(JSON_EXTRACT(new_value, '$.policy')))", qp);
        rc |= common_where(sql, AUDIT_GATEWAY, qa, qs, qu, f, qc);
        rc |= add(sql, " ORDER BY changed_at DESC, id DESC LIMIT %d)", f->limit);
        branches++;
    }
    if (branches == 0)      /* a policy filter with kind app: nothing */
        rc |= add(sql, "SELECT 0 AS src, 0 AS id, '' AS subject, '' AS kp, '' AS action, "
                       "'' AS actor, NOW(6) AS changed_at, '' AS ov, '' AS nv FROM DUAL WHERE 0");
    rc |= add(sql, ") x ORDER BY changed_at DESC, src DESC, id DESC LIMIT %d", f->limit);
    free(qp);
    free(qa);
    free(qs);
    free(qu);
    free(qc);
    return rc;
}

static const char *kind_of(int source, const char *prefix)
{
    switch (source) {
    case AUDIT_POLICY:
        return "policy";
    case AUDIT_APP:
        return prefix[0] ? "key" : "app";
    case AUDIT_BUCKET:
        return "bucket";
    case AUDIT_OVERRIDE:
        return "override";
    case AUDIT_ENVOY:
        return "envoy";
    case AUDIT_GATEWAY:
        return "gateway";
    default:
        return "user";
    }
}

int audit_list(struct audit_db *d, const struct audit_filter *f, struct audit_entry **out,
               size_t *n, struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    struct audit_entry *v;
    char *sql = NULL;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    if (statement(d, f, &sql) != 0) {
        free(sql);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    rc = dbconn_kept_query(&d->conn, sql, &res, err);
    free(sql);
    if (rc != PERMITD_OK)
        return rc;
    if ((v = calloc(mysql_num_rows(res) + 1, sizeof(*v))) == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct audit_entry *e = &v[*n];
        e->at.source = atoi(row[0]);
        e->at.id = strtoull(row[1], NULL, 10);
        snprintf(e->subject, sizeof(e->subject), "%s", row[2] ? row[2] : "");
        snprintf(e->key_prefix, sizeof(e->key_prefix), "%s", row[3] ? row[3] : "");
        snprintf(e->kind, sizeof(e->kind), "%s", kind_of(e->at.source, e->key_prefix));
        snprintf(e->action, sizeof(e->action), "%s", row[4] ? row[4] : "");
        snprintf(e->actor, sizeof(e->actor), "%s", row[5] ? row[5] : "");
        snprintf(e->changed_at, sizeof(e->changed_at), "%s", row[6] ? row[6] : "");
        snprintf(e->at.time, sizeof(e->at.time), "%s", row[9] ? row[9] : "");
        e->old_value = strdup(row[7] ? row[7] : "");
        e->new_value = strdup(row[8] ? row[8] : "");
        (*n)++;
        if (e->old_value == NULL || e->new_value == NULL) {
            audit_list_free(v, *n);
            mysql_free_result(res);
            *n = 0;
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
    }
    mysql_free_result(res);
    *out = v;
    return PERMITD_OK;
}
