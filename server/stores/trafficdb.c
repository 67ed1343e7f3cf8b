/*
 * trafficdb.c - traffic_minutes written and read (see trafficdb.h).
 *
 * Writes are multi-row INSERT ... ON DUPLICATE KEY UPDATE col = col +
 * VALUES(col) statements (TRAFFICDB_ROWS_PER_INSERT rows each) inside one
 * transaction: the fleet's instances add into the same rows, and InnoDB's
 * row locks make each addition whole. VALUES() in that clause is
 * deprecated on MySQL 8.0.20+ but still works there, and is the one form
 * MariaDB 10.11 knows too. Names went through the policy-name rule before
 * they reach the text (policy_check_name()), so they are written as they
 * are; a filter of a read comes from a client and is quoted.
 *
 * Reads sum the rows into buckets in SQL (GROUP BY the bucket's start), so
 * 30 days at an hour a bucket is 720 rows on the wire, whatever the
 * minutes and apps below them.
 */
#define _GNU_SOURCE                 /* vasprintf */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "stores/dbconn.h"
#include "stores/policy.h"
#include "stores/trafficdb.h"

static const char *const columns[TRAFFICDB_COUNTERS] = {
    "allowed", "denied", "shadow_denied", "errors", "passes"};

struct trafficdb {
    struct dbconn_kept conn;
};

int trafficdb_new(const struct config *cfg, struct trafficdb **out, struct permitd_error *err)
{
    struct trafficdb *d = calloc(1, sizeof(*d));

    *out = NULL;
    if (d == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    dbconn_kept_init(&d->conn, cfg, NULL);
    *out = d;
    return PERMITD_OK;
}

void trafficdb_free(struct trafficdb *d)
{
    if (d == NULL)
        return;
    dbconn_kept_close(&d->conn);
    free(d);
}

/* A growing string. */
struct text {
    char *s;
    size_t len, cap;
    int oom;
};

__attribute__((format(printf, 2, 3)))
static void add(struct text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->oom)
        return;
    for (;;) {
        size_t room = t->cap - t->len;
        va_start(ap, fmt);
        n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->oom = 1;
            return;
        }
        if (t->s != NULL && (size_t)n < room) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 4096;
        while (cap < t->len + (size_t)n + 1)
            cap *= 2;
        char *grown = realloc(t->s, cap);
        if (grown == NULL) {
            t->oom = 1;
            return;
        }
        t->s = grown;
        t->cap = cap;
    }
}

static int check_row(const struct trafficdb_row *r, struct permitd_error *err)
{
    if (policy_check_name("policy", r->policy, err) != PERMITD_OK ||
        (r->app[0] != '\0' && policy_check_name("app", r->app, err) != PERMITD_OK))
        return PERMITD_EINVAL;
    if (r->minute < 0 || r->minute % 60 != 0 || r->minute > (int64_t)UINT32_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "traffic: minute %" PRId64 " is not a "
                                 "minute's start", r->minute);
    return PERMITD_OK;
}

int trafficdb_add(struct trafficdb *d, const struct trafficdb_row *rows, size_t n,
                  struct permitd_error *err)
{
    struct text sql = {0};
    int rc = PERMITD_OK;

    for (size_t i = 0; i < n; i++)
        if ((rc = check_row(&rows[i], err)) != PERMITD_OK)
            return rc;
    if (n == 0)
        return PERMITD_OK;
    if ((rc = dbconn_kept_begin(&d->conn, "permitd", err)) != PERMITD_OK)
        return rc;
    for (size_t i = 0; i < n && rc == PERMITD_OK; i += TRAFFICDB_ROWS_PER_INSERT) {
        size_t end = i + TRAFFICDB_ROWS_PER_INSERT < n ? i + TRAFFICDB_ROWS_PER_INSERT : n;
        sql.len = 0;
        add(&sql, "INSERT INTO traffic_minutes (policy, minute_unix, app, allowed, denied, "
                  "shadow_denied, errors, passes) VALUES ");
        for (size_t k = i; k < end; k++) {
            const struct trafficdb_row *r = &rows[k];
            add(&sql, "%s('%s', %" PRId64 ", '%s', %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %"
                PRIu64 ", %" PRIu64 ")", k > i ? ", " : "", r->policy, r->minute, r->app,
                r->v[0], r->v[1], r->v[2], r->v[3], r->v[4]);
        }
        add(&sql, " ON DUPLICATE KEY UPDATE allowed = allowed + VALUES(allowed), "
                  "denied = denied + VALUES(denied), "
                  "shadow_denied = shadow_denied + VALUES(shadow_denied), "
                  "errors = errors + VALUES(errors), passes = passes + VALUES(passes)");
        if (sql.oom)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "traffic: out of memory");
        else
            rc = dbconn_kept_query(&d->conn, sql.s, NULL, err);
    }
    free(sql.s);
    return dbconn_kept_finish(&d->conn, rc, err);
}

int trafficdb_prune(struct trafficdb *d, int64_t before, int limit, uint64_t *deleted,
                    struct permitd_error *err)
{
    int rc;

    *deleted = 0;
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    if ((rc = dbconn_kept_queryf(&d->conn, NULL, err, "DELETE FROM traffic_minutes WHERE "
                                 "minute_unix < %" PRId64 " LIMIT %d", before < 0 ? 0 : before,
                                 limit)) != PERMITD_OK)
        return rc;
    *deleted = mysql_affected_rows(d->conn.db);
    return PERMITD_OK;
}

/* " AND policy = '...' AND app = '...'" for the filters given, quoted;
 * -1 when memory ran out. */
static int filters(struct trafficdb *d, struct text *sql, const char *policy, const char *app)
{
    char *q;

    if (policy != NULL) {
        if ((q = dbconn_kept_quote(&d->conn, policy)) == NULL)
            return -1;
        add(sql, " AND policy = %s", q);
        free(q);
    }
    if (app != NULL) {
        if ((q = dbconn_kept_quote(&d->conn, app)) == NULL)
            return -1;
        add(sql, " AND app = %s", q);
        free(q);
    }
    return sql->oom ? -1 : 0;
}

static void sums(struct text *sql)
{
    for (int k = 0; k < TRAFFICDB_COUNTERS; k++)
        add(sql, ", CAST(SUM(%s) AS UNSIGNED)", columns[k]);
}

int trafficdb_series(struct trafficdb *d, const char *policy, const char *app, int64_t from,
                     int64_t to, int step, struct trafficdb_point **out, size_t *n,
                     struct permitd_error *err)
{
    struct text sql = {0};
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    struct trafficdb_point *v;
    size_t count;
    int rc;

    *out = NULL;
    *n = 0;
    if (step < 60 || step % 60 != 0 || from % step != 0 || to % step != 0 || to <= from ||
        (to - from) / step > 100000)
        return permitd_error_set(err, PERMITD_EINVAL, "traffic: range [%" PRId64 ", %" PRId64
                                 ") in steps of %d s", from, to, step);
    count = (size_t)((to - from) / step);
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    add(&sql, "SELECT minute_unix - minute_unix %% %d AS b", step);
    sums(&sql);
    add(&sql, " FROM traffic_minutes WHERE minute_unix >= %" PRId64 " AND minute_unix < %"
        PRId64, from, to);
    if (filters(d, &sql, policy, app) != 0 || sql.oom) {
        free(sql.s);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    add(&sql, " GROUP BY b");
    rc = sql.oom ? permitd_error_set(err, PERMITD_EINTERNAL, "out of memory")
                 : dbconn_kept_query(&d->conn, sql.s, &res, err);
    free(sql.s);
    if (rc != PERMITD_OK)
        return rc;
    if ((v = calloc(count, sizeof(*v))) == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    for (size_t i = 0; i < count; i++)
        v[i].start = from + (int64_t)i * step;
    while ((row = mysql_fetch_row(res)) != NULL) {
        int64_t b = row[0] ? strtoll(row[0], NULL, 10) : -1;
        if (b < from || b >= to)
            continue;
        for (int k = 0; k < TRAFFICDB_COUNTERS; k++)
            v[(b - from) / step].v[k] = row[k + 1] ? strtoull(row[k + 1], NULL, 10) : 0;
    }
    mysql_free_result(res);
    *out = v;
    *n = count;
    return PERMITD_OK;
}

int trafficdb_totals(struct trafficdb *d, enum trafficdb_group group, const char *policy,
                     const char *app, int64_t from, int64_t to, int order, int limit,
                     struct trafficdb_total **out, size_t *n, struct permitd_error *err)
{
    static const char *const by[] = {"policy, ''", "'', app", "policy, app"};
    static const char *const group_by[] = {"policy", "app", "policy, app"};
    struct text sql = {0};
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    struct trafficdb_total *v;
    int rc;

    *out = NULL;
    *n = 0;
    if ((unsigned)group > TRAFFICDB_BY_POLICY_APP || order < 0 ||
        order > TRAFFICDB_ORDER_DENIED_SHARE || limit < 1)
        return permitd_error_set(err, PERMITD_EINVAL, "traffic: totals by %d ordered by %d",
                                 (int)group, order);
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    add(&sql, "SELECT %s", by[group]);
    sums(&sql);
    add(&sql, " FROM traffic_minutes WHERE minute_unix >= %" PRId64 " AND minute_unix < %"
        PRId64, from, to);
    if (filters(d, &sql, policy, app) != 0) {
        free(sql.s);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    add(&sql, " GROUP BY %s HAVING SUM(allowed + denied + shadow_denied + errors + passes) > 0",
        group_by[group]);
    if (order < TRAFFICDB_COUNTERS)
        add(&sql, " ORDER BY SUM(%s) DESC", columns[order]);
    else if (order == TRAFFICDB_ORDER_DECIDED)
        add(&sql, " ORDER BY SUM(allowed + denied) DESC");
    else
        add(&sql, " ORDER BY SUM(denied) / GREATEST(SUM(allowed + denied), 1) DESC, "
                  "SUM(denied) DESC");
    add(&sql, ", %s LIMIT %d", group_by[group], limit);
    rc = sql.oom ? permitd_error_set(err, PERMITD_EINTERNAL, "out of memory")
                 : dbconn_kept_query(&d->conn, sql.s, &res, err);
    free(sql.s);
    if (rc != PERMITD_OK)
        return rc;
    if ((v = calloc(mysql_num_rows(res) + 1, sizeof(*v))) == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct trafficdb_total *e = &v[*n];
        dbconn_field_copy(e->policy, sizeof(e->policy), row[0]);
        dbconn_field_copy(e->app, sizeof(e->app), row[1]);
        for (int k = 0; k < TRAFFICDB_COUNTERS; k++)
            e->v[k] = row[k + 2] ? strtoull(row[k + 2], NULL, 10) : 0;
        (*n)++;
    }
    mysql_free_result(res);
    *out = v;
    return PERMITD_OK;
}
