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
 * Every row goes into traffic_minutes and, in the same transaction, into
 * its hour's row of traffic_hours; the writer adds one row more, policy
 * TRAFFICDB_ALL, the sum of its rows, for the fleet's series. Reads sum
 * rows into buckets in SQL (GROUP BY the bucket's start), from the hours
 * when a bucket is a whole number of them (7 and 30 days; the totals,
 * which read many policies), else from the minutes.
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
    "allowed", "denied", "shadow_denied", "errors", "passes", "keyed"};

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
    int all = strcmp(r->policy, TRAFFICDB_ALL) == 0;

    if ((!all && policy_check_name("policy", r->policy, err) != PERMITD_OK) ||
        (r->app[0] != '\0' && (all || policy_check_name("app", r->app, err) != PERMITD_OK)))
        return all ? permitd_error_set(err, PERMITD_EINVAL, "traffic: the sum of every policy "
                                       "has no app") : PERMITD_EINVAL;
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
    /* The rows into their minutes, then into their hours. */
    for (int hours = 0; hours < 2 && rc == PERMITD_OK; hours++) {
        for (size_t i = 0; i < n && rc == PERMITD_OK; i += TRAFFICDB_ROWS_PER_INSERT) {
            size_t end = i + TRAFFICDB_ROWS_PER_INSERT < n ? i + TRAFFICDB_ROWS_PER_INSERT : n;
            sql.len = 0;
            add(&sql, "INSERT INTO %s (policy, %s, app, allowed, denied, shadow_denied, errors, "
                      "passes, keyed) VALUES ", hours ? "traffic_hours" : "traffic_minutes",
                hours ? "hour_unix" : "minute_unix");
            for (size_t k = i; k < end; k++) {
                const struct trafficdb_row *r = &rows[k];
                add(&sql, "%s('%s', %" PRId64 ", '%s', %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %"
                    PRIu64 ", %" PRIu64 ", %" PRIu64 ")", k > i ? ", " : "", r->policy,
                    hours ? r->minute - r->minute % 3600 : r->minute, r->app,
                    r->v[0], r->v[1], r->v[2], r->v[3], r->v[4], r->v[5]);
            }
            add(&sql, " ON DUPLICATE KEY UPDATE allowed = allowed + VALUES(allowed), "
                      "denied = denied + VALUES(denied), "
                      "shadow_denied = shadow_denied + VALUES(shadow_denied), "
                      "errors = errors + VALUES(errors), passes = passes + VALUES(passes), "
                      "keyed = keyed + VALUES(keyed)");
            if (sql.oom)
                rc = permitd_error_set(err, PERMITD_EINTERNAL, "traffic: out of memory");
            else
                rc = dbconn_kept_query(&d->conn, sql.s, NULL, err);
        }
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
    if (before < 0)
        before = 0;
    if ((rc = dbconn_kept_queryf(&d->conn, NULL, err, "DELETE FROM traffic_minutes WHERE "
                                 "minute_unix < %" PRId64 " LIMIT %d", before, limit)) != PERMITD_OK)
        return rc;
    *deleted = mysql_affected_rows(d->conn.db);
    /* An hour is kept while any of its minutes is. */
    if ((rc = dbconn_kept_queryf(&d->conn, NULL, err, "DELETE FROM traffic_hours WHERE "
                                 "hour_unix < %" PRId64 " LIMIT %d", before - before % 3600,
                                 limit)) != PERMITD_OK)
        return rc;
    *deleted += mysql_affected_rows(d->conn.db);
    return PERMITD_OK;
}

/* " FROM <table> [FORCE INDEX (...)] WHERE <time> >= from AND <time> < to"
 * and the filters, quoted, for the rows of policy (NULL: every policy's,
 * without the sum of all of them) and app (NULL: every app). hours: from
 * traffic_hours. The index a filter needs is forced: the planner, seeing a
 * range of time, may otherwise walk the primary key over every policy's
 * rows of the range (30 days of 10,000 policies) for one policy's. -1 when
 * memory ran out. */
static int where(struct trafficdb *d, struct text *sql, int hours, const char *policy,
                 const char *app, int64_t from, int64_t to)
{
    const char *t = hours ? "traffic_hours" : "traffic_minutes";
    const char *col = hours ? "hour_unix" : "minute_unix";
    char *q;

    if (policy != NULL)
        add(sql, " FROM %s FORCE INDEX (ix_%s_policy)", t, t);
    else if (app != NULL)
        add(sql, " FROM %s FORCE INDEX (ix_%s_app)", t, t);
    else
        add(sql, " FROM %s", t);
    add(sql, " WHERE %s >= %" PRId64 " AND %s < %" PRId64, col, from, col, to);
    if (policy != NULL) {
        if ((q = dbconn_kept_quote(&d->conn, policy)) == NULL)
            return -1;
        add(sql, " AND policy = %s", q);
        free(q);
    } else {
        add(sql, " AND policy <> '" TRAFFICDB_ALL "'");
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
    int hours, rc;

    *out = NULL;
    *n = 0;
    if (step < 60 || step % 60 != 0 || from % step != 0 || to % step != 0 || to <= from ||
        (to - from) / step > 100000)
        return permitd_error_set(err, PERMITD_EINVAL, "traffic: range [%" PRId64 ", %" PRId64
                                 ") in steps of %d s", from, to, step);
    count = (size_t)((to - from) / step);
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    if (policy == NULL && app == NULL)
        policy = TRAFFICDB_ALL;     /* the fleet: the rows that sum every policy */
    hours = step % 3600 == 0;
    add(&sql, "SELECT %s - %s %% %d AS b", hours ? "hour_unix" : "minute_unix",
        hours ? "hour_unix" : "minute_unix", step);
    sums(&sql);
    if (where(d, &sql, hours, policy, app, from, to) != 0) {
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

/* The index of name in the n policies, or -1 (n is small: a page). */
static long index_of(const char *const *policies, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(policies[i], name) == 0)
            return (long)i;
    return -1;
}

int trafficdb_trends(struct trafficdb *d, const char *const *policies, size_t n, int64_t from,
                     int64_t to, int step, uint64_t *allowed, uint64_t *denied, uint64_t *keyed,
                     struct permitd_error *err)
{
    struct text sql = {0};
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    size_t nb;
    const char *table = step % 3600 == 0 ? "traffic_hours" : "traffic_minutes";
    const char *col = step % 3600 == 0 ? "hour_unix" : "minute_unix";
    int rc;

    if (step < 60 || step % 60 != 0 || from % (step % 3600 == 0 ? 3600 : 60) != 0 ||
        (to - from) % step != 0 || to <= from || (to - from) / step > 1000 ||
        n > TRAFFICDB_TRENDS_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "traffic: %zu trends of [%" PRId64 ", %"
                                 PRId64 ") in steps of %d s", n, from, to, step);
    nb = (size_t)((to - from) / step);
    memset(allowed, 0, n * nb * sizeof(*allowed));
    memset(denied, 0, n * nb * sizeof(*denied));
    if (keyed != NULL)
        memset(keyed, 0, n * nb * sizeof(*keyed));
    for (size_t i = 0; i < n; i++)
        if (policy_check_name("policies", policies[i], err) != PERMITD_OK)
            return PERMITD_EINVAL;
    if (n == 0)
        return PERMITD_OK;
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    /* Names by the rule hold no quote nor backslash: written as they are. */
    add(&sql, "SELECT policy, %s - (%s - %" PRId64 ") %% %d AS b, CAST(SUM(allowed) AS UNSIGNED), "
              "CAST(SUM(denied) AS UNSIGNED), CAST(SUM(keyed) AS UNSIGNED) FROM %s FORCE INDEX "
              "(ix_%s_policy) WHERE policy IN (",
        col, col, from, step, table, table);
    for (size_t i = 0; i < n; i++)
        add(&sql, "%s'%s'", i ? ", " : "", policies[i]);
    add(&sql, ") AND %s >= %" PRId64 " AND %s < %" PRId64 " GROUP BY policy, b", col, from, col,
        to);
    rc = sql.oom ? permitd_error_set(err, PERMITD_EINTERNAL, "out of memory")
                 : dbconn_kept_query(&d->conn, sql.s, &res, err);
    free(sql.s);
    if (rc != PERMITD_OK)
        return rc;
    while ((row = mysql_fetch_row(res)) != NULL) {
        long i = row[0] ? index_of(policies, n, row[0]) : -1;
        int64_t b = row[1] ? strtoll(row[1], NULL, 10) : -1;
        if (i < 0 || b < from || b >= to)
            continue;
        allowed[(size_t)i * nb + (size_t)((b - from) / step)] = row[2] ? strtoull(row[2], NULL, 10) : 0;
        denied[(size_t)i * nb + (size_t)((b - from) / step)] = row[3] ? strtoull(row[3], NULL, 10) : 0;
        if (keyed != NULL)
            keyed[(size_t)i * nb + (size_t)((b - from) / step)] = row[4] ? strtoull(row[4], NULL, 10) : 0;
    }
    mysql_free_result(res);
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
        order > TRAFFICDB_ORDER_DENIED_SHARE || limit < 1 || from % 3600 != 0 || to % 3600 != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "traffic: totals by %d ordered by %d "
                                 "over [%" PRId64 ", %" PRId64 ")", (int)group, order, from, to);
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    add(&sql, "SELECT %s", by[group]);
    sums(&sql);
    if (where(d, &sql, 1, policy, app, from, to) != 0) {
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
