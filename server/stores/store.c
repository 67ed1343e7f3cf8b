/*
 * store.c - policies in MySQL, read through libmariadb.
 *
 * The connection is made on first use (dbconn.c: the same settings as the
 * migrations' connections) and dropped on any client-side error (server
 * gone, lost, timed out), so the next call reconnects: libmariadb's own
 * MYSQL_OPT_RECONNECT stays off because it silently loses session state.
 * Every session runs in UTC, so DATETIME(6) values are UTC throughout.
 *
 * A write is one transaction begun and ended as every audited write is
 * (dbconn_kept_begin() / dbconn_kept_finish()): @permitd_actor is set for
 * it, which keeps the plain-SQL audit triggers quiet (the audit rows
 * written here say more), and cleared after it, whatever happened.
 */
#define _GNU_SOURCE   /* vasprintf */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "stores/dbconn.h"
#include "core/log.h"
#include "stores/policy.h"
#include "stores/policyrefs.h"
#include "core/sha256.h"
#include "stores/store.h"

/* A policy's version, for SELECT ... FROM policies p: the row's own plus
 * the changes of its apps made with plain SQL, which triggers count in
 * policy_app_changes (migrations/0004_app_versions.up.sql says why they
 * cannot bump policies.version). Both terms only grow. */
#define POLICY_VERSION \
    "(p.version + IFNULL((SELECT c.changes FROM policy_app_changes c " \
    "WHERE c.policy_id = p.id), 0))"

struct store {
    struct dbconn_kept conn;        /* (dbconn.h) */
};

/* The store's sessions: UTC (dbconn.c) and GROUP_CONCAT long enough for a
 * policy's whole apps list. */
static const char *const store_session[] = {"SET group_concat_max_len = 1048576", NULL};

int store_new(const struct config *cfg, struct store **out, struct permitd_error *err)
{
    struct store *s = calloc(1, sizeof(*s));

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    dbconn_kept_init(&s->conn, cfg, store_session);
    *out = s;
    return PERMITD_OK;
}

void store_free(struct store *s)
{
    if (s == NULL)
        return;
    dbconn_kept_close(&s->conn);
    free(s);
}

/* str quoted for SQL: a new string 'like this' (free()), or NULL. */
static char *quoted(struct store *s, const char *str)
{
    return dbconn_kept_quote(&s->conn, str);
}

static int connect_db(struct store *s, struct permitd_error *err)
{
    return dbconn_kept_ensure(&s->conn, err);
}

/* Runs a statement that returns no rows. */
static int exec(struct store *s, const char *sql, struct permitd_error *err)
{
    return dbconn_kept_query(&s->conn, sql, NULL, err);
}

/* Runs a query; *res is the buffered result (mysql_free_result()). */
static int query(struct store *s, const char *sql, MYSQL_RES **res, struct permitd_error *err)
{
    return dbconn_kept_query(&s->conn, sql, res, err);
}

int store_ping(struct store *s, struct permitd_error *err)
{
    MYSQL_RES *res;
    int rc;

    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    if ((rc = query(s, "SELECT 1", &res, err)) != PERMITD_OK)
        return rc;
    mysql_free_result(res);
    return PERMITD_OK;
}

void store_snapshot_free(struct store_snapshot *snap)
{
    if (snap == NULL)
        return;
    for (size_t i = 0; i < snap->count; i++)
        free(snap->policies[i].apps);
    for (size_t i = 0; i < snap->nskipped; i++)
        free(snap->skipped[i]);
    free(snap->skipped);
    free(snap->policies);
    free(snap);
}

static struct store_policy *by_id(struct store_snapshot *snap, uint64_t id)
{
    size_t lo = 0, hi = snap->count;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (snap->policies[mid].id == id)
            return &snap->policies[mid];
        if (snap->policies[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Appends app to p->apps ("a,b,c"). */
static int add_app(struct store_policy *p, const char *app)
{
    size_t old = p->apps ? strlen(p->apps) : 0, n = strlen(app);
    char *a = realloc(p->apps, old + n + 2);

    if (a == NULL)
        return -1;
    if (old > 0)
        a[old++] = ',';
    memcpy(a + old, app, n + 1);
    p->apps = a;
    return 0;
}

/* Records a skipped row in snap->skipped: a line made from a printf
 * format. -1 when out of memory. */
__attribute__((format(printf, 2, 3)))
static int skip(struct store_snapshot *snap, const char *fmt, ...)
{
    char **v = realloc(snap->skipped, (snap->nskipped + 1) * sizeof(*v));
    va_list ap;
    int n;

    if (v == NULL)
        return -1;
    snap->skipped = v;
    va_start(ap, fmt);
    n = vasprintf(&v[snap->nskipped], fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    snap->nskipped++;
    return 0;
}

/* Reads a policy's algorithm columns (algorithm, window_ms, calendar,
 * lease_ms: NULL when not the algorithm's) and its rate (NULL but for a
 * token bucket) into p, and checks them as the admin API would: a row a
 * DBA wrote that the API would refuse fails with why (the schema's CHECK
 * constraints hold the same rules; this is for a MySQL that ignores them,
 * or a schema edited by hand). */
static int read_limits(struct store_policy *p, const char *rate, char *const *cols,
                       struct permitd_error *why)
{
    char window[POLICY_DURATION_TEXT] = "", lease[POLICY_DURATION_TEXT] = "";
    struct policy_limits l;
    int rc;

    snprintf(p->rate, sizeof(p->rate), "%s", rate ? rate : "");
    if ((rc = policy_algorithm_parse("algorithm:", cols[0] ? cols[0] : "", &p->algorithm,
                                     why)) != PERMITD_OK)
        return rc;
    p->window_ms = cols[1] ? strtoll(cols[1], NULL, 10) : 0;
    p->calendar = POLICY_CALENDAR_NONE;
    p->lease_ms = cols[3] ? strtoll(cols[3], NULL, 10) : 0;
    if (cols[2] != NULL && cols[2][0] != '\0' &&
        policy_calendar_parse(cols[2], &p->calendar) != PERMITD_OK)
        return permitd_error_set(why, PERMITD_EINVAL, "calendar: \"%.16s\" is no calendar "
                                 "unit: minute, hour, day or month", cols[2]);
    if (cols[1] != NULL && cols[2] != NULL)
        return permitd_error_set(why, PERMITD_EINVAL, "window_ms and calendar: a policy has "
                                 "one window, not both");
    if (cols[1] != NULL && p->window_ms > 0)
        policy_format_duration(window, p->window_ms);
    else if (cols[1] != NULL)
        snprintf(window, sizeof(window), "%sms", cols[1]);      /* refused below */
    else
        policy_format_window(window, 0, p->calendar);
    if (cols[3] != NULL && p->lease_ms > 0)
        policy_format_duration(lease, p->lease_ms);
    else if (cols[3] != NULL)
        snprintf(lease, sizeof(lease), "%sms", cols[3]);
    if ((rc = policy_check_limits(cols[0] ? cols[0] : "", p->max_permits, p->rate, window,
                                  lease, &l, why)) != PERMITD_OK)
        return rc;
    return PERMITD_OK;
}

static int read_policies(struct store *s, struct store_snapshot *snap, struct permitd_error *err)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc;

    rc = query(s,
               "SELECT p.id, p.name, p.max_permits, p.rate, p.enabled, p.failure_mode, "
               POLICY_VERSION ", CAST(UNIX_TIMESTAMP(p.updated_at) * 1000000 AS SIGNED), "
               "p.colocate, p.algorithm, p.window_ms, p.calendar, p.lease_ms, p.shadow, "
               "p.local_lease, p.local_lease_permits, p.reserve_ttl_ms, p.debt_floor, p.reserve_expiry "
               "FROM policies p ORDER BY p.id", &res, err);
    if (rc != PERMITD_OK)
        return rc;
    snap->policies = calloc(mysql_num_rows(res) + 1, sizeof(*snap->policies));
    if (snap->policies == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct store_policy *p = &snap->policies[snap->count];
        struct permitd_error why;

        p->id = strtoull(row[0], NULL, 10);
        if (p->id > snap->max_id)
            snap->max_id = p->id;
        /* A name the API could never ask for (a DBA's typo) is skipped,
         * and reported (sync.c), rather than written under a key nobody
         * can reach. Its apps go with it. */
        if (policy_check_name("name", row[1], &why) != PERMITD_OK) {
            if (skip(snap, "policy id %" PRIu64 ": %s", p->id, why.message) != 0) {
                mysql_free_result(res);
                return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            }
            continue;
        }
        snprintf(p->name, sizeof(p->name), "%s", row[1]);
        p->max_permits = strtoll(row[2], NULL, 10);
        /* Limits the API would refuse: skipped and reported, as a bad
         * name is, rather than copied into Redis for every decision to
         * refuse. */
        if (read_limits(p, row[3], &row[9], &why) != PERMITD_OK) {
            if (skip(snap, "policy %s (id %" PRIu64 "): %s", p->name, p->id, why.message) != 0) {
                mysql_free_result(res);
                return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            }
            memset(p, 0, sizeof(*p));
            continue;
        }
        p->enabled = atoi(row[4]) != 0;
        snprintf(p->failure_mode, sizeof(p->failure_mode), "%s", row[5]);
        p->version = strtoull(row[6], NULL, 10);
        p->updated_us = row[7] ? strtoll(row[7], NULL, 10) : 0;
        p->colocate = row[8] != NULL && atoi(row[8]) != 0;
        p->shadow = row[13] != NULL && atoi(row[13]) != 0;
        snprintf(p->local_lease, sizeof(p->local_lease), "%s", row[14] ? row[14] : "");
        p->local_lease_permits = row[15] ? strtoll(row[15], NULL, 10) : 0;
        p->reserve_ttl_ms = row[16] ? strtoll(row[16], NULL, 10) : 0;
        p->debt_floor = row[17] ? strtoll(row[17], NULL, 10) : 0;
        p->expiry_refund = row[18] != NULL && strcmp(row[18], "refund") == 0;
        snap->count++;
    }
    mysql_free_result(res);
    return PERMITD_OK;
}

static int read_apps(struct store *s, struct store_snapshot *snap, struct permitd_error *err)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc;

    rc = query(s, "SELECT policy_id, app FROM policy_apps ORDER BY policy_id, app", &res, err);
    if (rc != PERMITD_OK)
        return rc;
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct store_policy *p = by_id(snap, strtoull(row[0], NULL, 10));
        struct permitd_error why;

        if (p == NULL)
            continue;
        if (strcmp(row[1], "*") != 0 && policy_check_name("app", row[1], &why) != PERMITD_OK) {
            if (skip(snap, "an app of policy %s (id %" PRIu64 "): %s", p->name, p->id,
                     why.message) != 0) {
                mysql_free_result(res);
                return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            }
            continue;
        }
        if (add_app(p, row[1]) != 0) {
            mysql_free_result(res);
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
    }
    mysql_free_result(res);
    return PERMITD_OK;
}

/* Raises max_id to the highest policy id the audit names (every create
 * and delete is audited, by the API or by the triggers): sync.lua removes
 * from Redis a policy the snapshot lacks only when its id is not above
 * max_id (a row made after the snapshot is not), so a deleted row with
 * the highest id, or every row deleted, must count too. */
static int read_audited_id(struct store *s, struct store_snapshot *snap,
                           struct permitd_error *err)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc;

    if ((rc = query(s, "SELECT MAX(policy_id) FROM policy_audit", &res, err)) != PERMITD_OK)
        return rc;
    row = mysql_fetch_row(res);
    if (row != NULL && row[0] != NULL && strtoull(row[0], NULL, 10) > snap->max_id)
        snap->max_id = strtoull(row[0], NULL, 10);
    mysql_free_result(res);
    return PERMITD_OK;
}

int store_snapshot(struct store *s, struct store_snapshot **out, struct permitd_error *err)
{
    struct store_snapshot *snap = NULL;
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc;

    *out = NULL;
    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    snap = calloc(1, sizeof(*snap));
    if (snap == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");

    /* The time is read before the snapshot starts: anything changed after
     * it is either in the snapshot or newer than taken_us (see sync.lua). */
    if ((rc = query(s, "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)", &res, err)) != PERMITD_OK)
        goto fail;
    row = mysql_fetch_row(res);
    snap->taken_us = row && row[0] ? strtoll(row[0], NULL, 10) : 0;
    mysql_free_result(res);

    if ((rc = exec(s, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY", err)) != PERMITD_OK)
        goto fail;
    if ((rc = read_policies(s, snap, err)) != PERMITD_OK ||
        (rc = read_apps(s, snap, err)) != PERMITD_OK ||
        (rc = read_audited_id(s, snap, err)) != PERMITD_OK) {
        if (s->conn.db != NULL)
            mysql_real_query(s->conn.db, "ROLLBACK", 8);
        goto fail;
    }
    if ((rc = exec(s, "COMMIT", err)) != PERMITD_OK)
        goto fail;
    for (size_t i = 0; i < snap->count; i++)
        if (snap->policies[i].apps == NULL && add_app(&snap->policies[i], "") != 0) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            goto fail;
        }
    *out = snap;
    return PERMITD_OK;

fail:
    store_snapshot_free(snap);
    return rc;
}

/* ---- policies, one at a time, for administrators ---- */

/* "Last changed by" (issue 23): the actor of the policy's newest audit row,
 * the name the audit shows, whichever way the change came (a plain-SQL
 * change of its apps cannot set policies.updated_by: error 1442). */
#define POLICY_CHANGED_BY \
    "IFNULL((SELECT a.actor FROM policy_audit a WHERE a.policy_id = p.id " \
    "ORDER BY a.changed_at DESC, a.id DESC LIMIT 1), p.updated_by)"

/* Every column of a policy, for SELECT ... FROM policies p. Used as a
 * printf format fragment, hence the doubled %. */
#define POLICY_COLUMNS \
    "p.id, p.name, p.max_permits, p.rate, p.enabled, p.failure_mode, " POLICY_VERSION ", " \
    "CAST(UNIX_TIMESTAMP(p.updated_at) * 1000000 AS SIGNED), p.description, " \
    "p.created_by, " POLICY_CHANGED_BY ", " \
    "DATE_FORMAT(p.created_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), " \
    "DATE_FORMAT(p.updated_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), " \
    "IFNULL((SELECT GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ',') " \
    "FROM policy_apps a WHERE a.policy_id = p.id), ''), p.colocate, " \
    "p.algorithm, p.window_ms, p.calendar, p.lease_ms, p.shadow, " \
    "p.reserve_ttl_ms, p.debt_floor, p.reserve_expiry"

/* The policy as JSON text, for audit rows (JSON_OBJECT exists in MySQL 8
 * and MariaDB alike): every column, in the order the plain-SQL triggers
 * write them (migrations/0019_audit_every_column.up.sql). */
#define POLICY_JSON \
    "JSON_OBJECT('name', p.name, 'apps', IFNULL((SELECT GROUP_CONCAT(a.app ORDER BY a.app " \
    "SEPARATOR ',') FROM policy_apps a WHERE a.policy_id = p.id), ''), " \
    "'max_permits', p.max_permits, 'rate', p.rate, 'description', p.description, " \
    "'enabled', p.enabled, 'failure_mode', p.failure_mode, 'colocate', p.colocate, " \
    "'algorithm', p.algorithm, 'window_ms', p.window_ms, 'calendar', p.calendar, " \
    "'lease_ms', p.lease_ms, 'shadow', p.shadow, 'reserve_ttl_ms', p.reserve_ttl_ms, " \
    "'debt_floor', p.debt_floor, 'reserve_expiry', p.reserve_expiry, " \
    "'local_lease', p.local_lease, 'local_lease_permits', p.local_lease_permits, " \
    "'version', " POLICY_VERSION ")"

/* MySQL's and MariaDB's error numbers for what an editor can cause. */
#define ER_DUP_ENTRY 1062
#define ER_CHECK_CONSTRAINT_VIOLATED 3819     /* MySQL 8 */
#define ER_CONSTRAINT_FAILED 4025             /* MariaDB */

/* A new SQL text from a printf format; NULL when out of memory. */
__attribute__((format(printf, 1, 2)))
static char *sqlf(const char *fmt, ...)
{
    va_list ap;
    char *out = NULL;

    va_start(ap, fmt);
    if (vasprintf(&out, fmt, ap) < 0)
        out = NULL;
    va_end(ap);
    return out;
}

/* Runs an SQL text made by sqlf() and frees it. */
static int run(struct store *s, char *sql, struct permitd_error *err)
{
    int rc;

    if (sql == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = exec(s, sql, err);
    free(sql);
    return rc;
}

static int run_query(struct store *s, char *sql, MYSQL_RES **res, struct permitd_error *err)
{
    int rc;

    if (sql == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = query(s, sql, res, err);
    free(sql);
    return rc;
}

void store_policy_clear(struct store_policy *p)
{
    if (p == NULL)
        return;
    free(p->apps);
    free(p->description);
    p->apps = p->description = NULL;
}

void store_policies_free(struct store_policy *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        store_policy_clear(&v[i]);
    free(v);
}

static int fill(struct store_policy *p, MYSQL_ROW row)
{
    struct permitd_error why;

    memset(p, 0, sizeof(*p));
    p->id = strtoull(row[0], NULL, 10);
    snprintf(p->name, sizeof(p->name), "%s", row[1]);
    p->max_permits = strtoll(row[2], NULL, 10);
    p->enabled = atoi(row[4]) != 0;
    snprintf(p->failure_mode, sizeof(p->failure_mode), "%s", row[5]);
    p->version = strtoull(row[6], NULL, 10);
    p->updated_us = row[7] ? strtoll(row[7], NULL, 10) : 0;
    /* A row the sync skips is still shown to the editor, as MySQL holds
     * it (read_limits() fills what it can before it fails). */
    read_limits(p, row[3], &row[15], &why);
    p->description = strdup(row[8] ? row[8] : "");
    snprintf(p->created_by, sizeof(p->created_by), "%s", row[9] ? row[9] : "");
    snprintf(p->updated_by, sizeof(p->updated_by), "%s", row[10] ? row[10] : "");
    snprintf(p->created_at, sizeof(p->created_at), "%s", row[11] ? row[11] : "");
    snprintf(p->updated_at, sizeof(p->updated_at), "%s", row[12] ? row[12] : "");
    p->apps = strdup(row[13] ? row[13] : "");
    p->colocate = row[14] != NULL && atoi(row[14]) != 0;
    p->shadow = row[19] != NULL && atoi(row[19]) != 0;
    p->reserve_ttl_ms = row[20] ? strtoll(row[20], NULL, 10) : 0;
    p->debt_floor = row[21] ? strtoll(row[21], NULL, 10) : 0;
    p->expiry_refund = row[22] != NULL && strcmp(row[22], "refund") == 0;
    return p->description != NULL && p->apps != NULL ? 0 : -1;
}

/* The rows of a SELECT POLICY_COLUMNS (sql: taken) into *out (free with
 * store_policies_free()) and *n. */
static int policy_rows(struct store *s, char *sql, struct store_policy **out, size_t *n,
                       struct permitd_error *err)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    struct store_policy *v;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = run_query(s, sql, &res, err)) != PERMITD_OK)
        return rc;
    v = calloc(mysql_num_rows(res) + 1, sizeof(*v));
    if (v == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        if (fill(&v[*n], row) != 0) {
            store_policies_free(v, *n + 1);
            mysql_free_result(res);
            *n = 0;
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
        (*n)++;
    }
    mysql_free_result(res);
    *out = v;
    return PERMITD_OK;
}

/* The WHERE condition of a filter (a new string, free(); NULL when out of
 * memory): "1" for none, else the name, the description or one of the
 * apps holds it, without regard to case. LIKE's own characters (% _ \) in
 * the filter are escaped, so they match themselves. */
static char *filter_sql(struct store *s, const char *filter)
{
    size_t n = strlen(filter), k = 0;
    char *pat, *q, *out;

    if (n == 0)
        return strdup("1");
    if ((pat = malloc(2 * n + 3)) == NULL)
        return NULL;
    pat[k++] = '%';
    for (const char *c = filter; *c; c++) {
        if (*c == '%' || *c == '_' || *c == '\\')
            pat[k++] = '\\';
        pat[k++] = (char)((*c >= 'A' && *c <= 'Z') ? *c + 32 : *c);
    }
    pat[k++] = '%';
    pat[k] = '\0';
    q = quoted(s, pat);
    free(pat);
    if (q == NULL)
        return NULL;
    out = sqlf("(LOWER(p.name) LIKE %s OR LOWER(p.description) LIKE %s OR EXISTS (SELECT 1 "
               "FROM policy_apps fa WHERE fa.policy_id = p.id AND LOWER(fa.app) LIKE %s))",
               q, q, q);
    free(q);
    return out;
}

int store_policy_page(struct store *s, const struct store_page_query *pq,
                      struct store_policy **out, size_t *n, size_t *total,
                      struct permitd_error *err)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    char *where = NULL, *after = NULL;
    int rc;

    *out = NULL;
    *n = 0;
    *total = 0;
    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    if ((where = filter_sql(s, pq->filter)) == NULL ||
        (after = pq->after[0] ? quoted(s, pq->after) : strdup("''")) == NULL) {
        free(where);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    rc = run_query(s, sqlf("SELECT COUNT(*) FROM policies p WHERE %s", where), &res, err);
    if (rc == PERMITD_OK) {
        row = mysql_fetch_row(res);
        *total = row && row[0] ? strtoull(row[0], NULL, 10) : 0;
        mysql_free_result(res);
        /* keyset: after the last name of the page before, in the order */
        rc = policy_rows(s, sqlf("SELECT " POLICY_COLUMNS " FROM policies p WHERE %s%s%s%s "
                                 "ORDER BY p.name %s LIMIT %zu", where,
                                 pq->after[0] ? " AND p.name " : "",
                                 pq->after[0] ? (pq->descending ? "< " : "> ") : "",
                                 pq->after[0] ? after : "", pq->descending ? "DESC" : "ASC",
                                 pq->limit), out, n, err);
    }
    free(where);
    free(after);
    return rc;
}

void store_names_free(char **names, size_t n)
{
    for (size_t i = 0; names != NULL && i < n; i++)
        free(names[i]);
    free(names);
}

int store_policy_names(struct store *s, const char *filter, char ***names, size_t *n,
                       struct permitd_error *err)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    char *where, **v;
    int rc;

    *names = NULL;
    *n = 0;
    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    if ((where = filter_sql(s, filter)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = run_query(s, sqlf("SELECT p.name FROM policies p WHERE %s ORDER BY p.name", where),
                   &res, err);
    free(where);
    if (rc != PERMITD_OK)
        return rc;
    if ((v = calloc(mysql_num_rows(res) + 1, sizeof(*v))) == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        if ((v[*n] = strdup(row[0] ? row[0] : "")) == NULL) {
            store_names_free(v, *n);
            mysql_free_result(res);
            *n = 0;
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
        (*n)++;
    }
    mysql_free_result(res);
    *names = v;
    return PERMITD_OK;
}

int store_policy_named(struct store *s, const char *const *names, size_t n,
                       struct store_policy **out, size_t *nout, struct permitd_error *err)
{
    char *list = NULL;
    size_t len = 0, cap = 64;
    int rc;

    *out = NULL;
    *nout = 0;
    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    if (n == 0)
        return (*out = calloc(1, sizeof(**out))) ? PERMITD_OK
                                                 : permitd_error_set(err, PERMITD_EINTERNAL,
                                                                     "out of memory");
    for (size_t i = 0; i < n; i++)
        cap += 2 * strlen(names[i]) + 4;
    if ((list = malloc(cap)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char *q = quoted(s, names[i]);
        if (q == NULL) {
            free(list);
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
        len += (size_t)snprintf(list + len, cap - len, "%s%s", i ? "," : "", q);
        free(q);
    }
    rc = policy_rows(s, sqlf("SELECT " POLICY_COLUMNS " FROM policies p WHERE p.name IN (%s)",
                             list), out, nout, err);
    free(list);
    return rc;
}

int store_policy_get(struct store *s, const char *name, struct store_policy *out,
                     struct permitd_error *err)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    char *q;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    if ((q = quoted(s, name)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = run_query(s, sqlf("SELECT " POLICY_COLUMNS " FROM policies p WHERE p.name = %s", q),
                   &res, err);
    free(q);
    if (rc != PERMITD_OK)
        return rc;
    row = mysql_fetch_row(res);
    if (row == NULL)
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "name: no policy named \"%s\"", name);
    else if (fill(out, row) != 0)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    mysql_free_result(res);
    return rc;
}

/* Maps a failed write to what the editor did wrong, when that is what it
 * was (the CHECK constraints back up the validation done before). */
static int write_failed(struct store *s, const char *name, int rc, struct permitd_error *err)
{
    unsigned int no = s->conn.db ? mysql_errno(s->conn.db) : 0;

    if (no == ER_DUP_ENTRY)
        return permitd_error_set(err, PERMITD_EEXIST, "name: a policy named \"%s\" already exists",
                                 name);
    if (no == ER_CHECK_CONSTRAINT_VIOLATED || no == ER_CONSTRAINT_FAILED)
        return permitd_error_set(err, PERMITD_EINVAL, "policy \"%s\" breaks a rule of the schema: %s",
                                 name, mysql_error(s->conn.db));
    return rc;
}

/* The SQL values of a policy's limits, "rate, algorithm, window_ms,
 * calendar, lease_ms": NULL where the algorithm has none. A new string
 * (free()), or NULL when out of memory. */
static char *limits_sql(struct store *s, const struct policy_limits *l, int assign)
{
    char window[24] = "NULL", lease[24] = "NULL", calendar[16] = "NULL", *rate, *out = NULL;

    rate = l->rate[0] ? quoted(s, l->rate) : strdup("NULL");
    if (rate == NULL)
        return NULL;
    if (l->window_ms > 0)
        snprintf(window, sizeof(window), "%" PRId64, l->window_ms);
    if (l->calendar != POLICY_CALENDAR_NONE)
        snprintf(calendar, sizeof(calendar), "'%s'", policy_calendar_name(l->calendar));
    if (l->lease_ms > 0)
        snprintf(lease, sizeof(lease), "%" PRId64, l->lease_ms);
    if (assign)
        out = sqlf("rate = %s, algorithm = '%s', window_ms = %s, calendar = %s, lease_ms = %s",
                   rate, policy_algorithm_name(l->algorithm), window, calendar, lease);
    else
        out = sqlf("%s, '%s', %s, %s, %s", rate, policy_algorithm_name(l->algorithm), window,
                   calendar, lease);
    free(rate);
    return out;
}

/* Replaces the app list of policy id. */
static int put_apps(struct store *s, uint64_t id, const struct store_policy_input *in,
                    struct permitd_error *err)
{
    int rc = run(s, sqlf("DELETE FROM policy_apps WHERE policy_id = %" PRIu64, id), err);

    for (size_t i = 0; i < in->napps && rc == PERMITD_OK; i++) {
        char *q = quoted(s, in->apps[i]);
        if (q == NULL)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        rc = run(s, sqlf("INSERT IGNORE INTO policy_apps (policy_id, app) VALUES (%" PRIu64 ", %s)",
                         id, q), err);
        free(q);
    }
    return rc;
}

static int audit(struct store *s, uint64_t id, const char *action, const char *actor,
                 const char *old_json, int with_new, struct permitd_error *err)
{
    char *qa = quoted(s, actor), *qo = old_json ? quoted(s, old_json) : strdup("NULL");
    int rc;

    if (qa == NULL || qo == NULL) {
        free(qa);
        free(qo);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    rc = run(s, sqlf("INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value) "
                     "SELECT p.id, p.name, '%s', %s, %s, %s FROM policies p WHERE p.id = %" PRIu64,
                     action, qa, qo, with_new ? POLICY_JSON : "NULL", id), err);
    free(qa);
    free(qo);
    return rc;
}

int store_bucket_audit(struct store *s, const char *policy, const char *key,
                       const char *actor, const char *old_json, struct permitd_error *err)
{
    char *qp = quoted(s, policy), *qk = quoted(s, key), *qa = quoted(s, actor),
         *qo = quoted(s, old_json);
    int rc;

    if (qp == NULL || qk == NULL || qa == NULL || qo == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    else
        rc = run(s, sqlf("INSERT INTO bucket_audit (policy, bucket_key, action, actor, old_value) "
                         "VALUES (%s, %s, 'reset', %s, %s)", qp, qk, qa, qo), err);
    free(qp);
    free(qk);
    free(qa);
    free(qo);
    return rc;
}

int store_policy_create(struct store *s, const struct store_policy_input *in,
                        const char *actor, struct store_policy *out,
                        struct permitd_error *err)
{
    char *qn = NULL, *qr = NULL, *qd = NULL, *qf = NULL, *qa = NULL;
    uint64_t id = 0;
    int rc;

    if ((rc = dbconn_kept_begin(&s->conn, actor, err)) != PERMITD_OK)
        return rc;
    qn = quoted(s, in->name);
    qr = limits_sql(s, &in->limits, 0);
    qd = quoted(s, in->description);
    qf = quoted(s, in->failure_mode);
    qa = quoted(s, actor);
    if (!qn || !qr || !qd || !qf || !qa) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    rc = run(s, sqlf("INSERT INTO policies (name, max_permits, rate, algorithm, window_ms, "
                     "calendar, lease_ms, description, enabled, failure_mode, colocate, "
                     "shadow, reserve_ttl_ms, debt_floor, reserve_expiry, created_by, "
                     "updated_by) VALUES (%s, %lld, %s, %s, %d, %s, %d, %d, %lld, %lld, '%s', "
                     "%s, %s)",
                     qn, in->limits.max_permits, qr, qd, in->enabled ? 1 : 0, qf,
                     in->colocate ? 1 : 0, in->shadow ? 1 : 0,
                     (long long)(in->reserve_ttl_ms > 0 ? in->reserve_ttl_ms : 300000),
                     (long long)in->debt_floor, in->expiry_refund ? "refund" : "keep", qa, qa),
             err);
    if (rc != PERMITD_OK) {
        rc = write_failed(s, in->name, rc, err);
        goto done;
    }
    id = mysql_insert_id(s->conn.db);
    if ((rc = put_apps(s, id, in, err)) == PERMITD_OK)
        rc = audit(s, id, "create", actor, NULL, 1, err);
done:
    rc = dbconn_kept_finish(&s->conn, rc, err);
    free(qn); free(qr); free(qd); free(qf); free(qa);
    if (rc == PERMITD_OK && out != NULL)
        rc = store_policy_get(s, in->name, out, err);
    return rc;
}

/* Locks the policy's row and checks its version. *id and *old_json (the
 * policy before the change, free()) are set on success. */
static int lock_policy(struct store *s, const char *name, uint64_t version, uint64_t *id,
                       char **old_json, struct permitd_error *err)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    char *q = quoted(s, name);
    int rc;

    *old_json = NULL;
    if (q == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = run_query(s, sqlf("SELECT p.id, " POLICY_VERSION ", " POLICY_JSON " FROM policies p "
                           "WHERE p.name = %s FOR UPDATE", q), &res, err);
    free(q);
    if (rc != PERMITD_OK)
        return rc;
    row = mysql_fetch_row(res);
    if (row == NULL) {
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "name: no policy named \"%s\"", name);
    } else if (version != 0 && strtoull(row[1], NULL, 10) != version) {
        rc = permitd_error_set(err, PERMITD_EABORTED,
                               "version: policy \"%s\" was changed by someone else since you "
                               "loaded it (your version %" PRIu64 ", now %s); reload it and "
                               "make your change again", name, version, row[1]);
    } else {
        *id = strtoull(row[0], NULL, 10);
        *old_json = strdup(row[2] ? row[2] : "");
        if (*old_json == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    mysql_free_result(res);
    return rc;
}

int store_policy_update(struct store *s, const struct store_policy_input *in,
                        uint64_t version, const char *actor, struct store_policy *out,
                        struct permitd_error *err)
{
    char *old = NULL, *qr = NULL, *qd = NULL, *qf = NULL, *qa = NULL;
    uint64_t id = 0;
    int rc;

    if ((rc = dbconn_kept_begin(&s->conn, actor, err)) != PERMITD_OK)
        return rc;
    if ((rc = lock_policy(s, in->name, version, &id, &old, err)) != PERMITD_OK)
        goto done;
    qr = limits_sql(s, &in->limits, 1);
    qd = quoted(s, in->description);
    qf = quoted(s, in->failure_mode);
    qa = quoted(s, actor);
    if (!qr || !qd || !qf || !qa) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    rc = run(s, sqlf("UPDATE policies SET max_permits = %lld, %s, description = %s, "
                     "enabled = %d, failure_mode = %s, colocate = %d, shadow = %d, "
                     "reserve_ttl_ms = %lld, debt_floor = %lld, reserve_expiry = '%s', "
                     "updated_by = %s, version = version + 1 WHERE id = %" PRIu64,
                     in->limits.max_permits, qr, qd, in->enabled ? 1 : 0, qf,
                     in->colocate ? 1 : 0, in->shadow ? 1 : 0,
                     (long long)(in->reserve_ttl_ms > 0 ? in->reserve_ttl_ms : 300000),
                     (long long)in->debt_floor, in->expiry_refund ? "refund" : "keep", qa, id),
             err);
    if (rc != PERMITD_OK)
        rc = write_failed(s, in->name, rc, err);
    if (rc == PERMITD_OK)
        rc = put_apps(s, id, in, err);
    if (rc == PERMITD_OK)
        rc = audit(s, id, "update", actor, old, 1, err);
done:
    rc = dbconn_kept_finish(&s->conn, rc, err);
    free(old); free(qr); free(qd); free(qf); free(qa);
    if (rc == PERMITD_OK && out != NULL)
        rc = store_policy_get(s, in->name, out, err);
    return rc;
}

/* old (a policy's JSON object, as lock_policy() read it) with the Envoy
 * descriptors deleted with it, "removed_envoy_descriptors": removed, for
 * its delete's audit row; a new string (free()), NULL on out of memory. */
static char *with_removed(const char *old, const char *removed)
{
    size_t n = strlen(old);
    char *out;

    while (n > 0 && old[n - 1] != '}')
        n--;
    if (n == 0)
        return strdup(old);         /* not an object: kept as it is */
    if (asprintf(&out, "%.*s%s\"removed_envoy_descriptors\": %s}", (int)(n - 1), old,
                 n > 2 ? ", " : "", removed) < 0)
        return NULL;
    return out;
}

int store_policy_delete(struct store *s, const char *name, uint64_t version, int remove_refs,
                        const char *actor, struct permitd_error *err)
{
    char *old = NULL, *removed = NULL, refs[1024];
    uint64_t id = 0;
    int rc, count = 0;

    if ((rc = dbconn_kept_begin(&s->conn, actor, err)) != PERMITD_OK)
        return rc;
    if ((rc = lock_policy(s, name, version, &id, &old, err)) == PERMITD_OK)
        rc = policyrefs_list(&s->conn, name, refs, sizeof(refs), &count, err);
    if (rc == PERMITD_OK && count > 0 && !remove_refs)
        rc = permitd_error_set(err, PERMITD_EPRECONDITION, "name: policy \"%s\" is named by %d "
                               "reference(s): %s; delete or repoint them first, or send "
                               "remove_references to delete them with it", name, count, refs);
    else if (rc == PERMITD_OK && count > 0)
        rc = policyrefs_remove(&s->conn, name, &removed, err);
    /* The descriptors removed are also recorded whole in the policy's delete
     * row (its old_value), so the policy's history says what went with it;
     * envoy_descriptor_audit (0018) has a row for each as well. */
    if (rc == PERMITD_OK && old != NULL && removed != NULL && strcmp(removed, "[]") != 0) {
        char *both = with_removed(old, removed);
        if (both == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        free(old);
        old = both;
    }
    if (rc == PERMITD_OK && (rc = audit(s, id, "delete", actor, old, 0, err)) == PERMITD_OK)
        rc = run(s, sqlf("DELETE FROM policies WHERE id = %" PRIu64, id), err);
    rc = dbconn_kept_finish(&s->conn, rc, err);
    free(old);
    free(removed);
    return rc;
}

int store_policy_refs(struct store *s, const char *name, char *buf, size_t size, int *count,
                      struct permitd_error *err)
{
    int rc;

    *count = 0;
    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    return policyrefs_list(&s->conn, name, buf, size, count, err);
}

int store_policy_deleted(struct store *s, const char *name, uint64_t version,
                         const char *actor, int within_s, struct permitd_error *err)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    char *q;
    int rc;

    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    if ((q = quoted(s, name)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    /* The newest row of the name (ix_policy_audit_name), and whether it
     * is young enough, by MySQL's clock (the one that wrote it). */
    rc = run_query(s, sqlf("SELECT action, actor, "
                           "IFNULL(JSON_UNQUOTE(JSON_EXTRACT(old_value, '$.version')), ''), "
                           "changed_at >= NOW(6) - INTERVAL %d SECOND FROM policy_audit "
                           "WHERE name = %s ORDER BY changed_at DESC, id DESC LIMIT 1",
                           within_s, q), &res, err);
    free(q);
    if (rc != PERMITD_OK)
        return rc;
    row = mysql_fetch_row(res);
    rc = row != NULL && row[0] && strcmp(row[0], "delete") == 0 && row[1] &&
         strcmp(row[1], actor) == 0 && row[3] && strcmp(row[3], "1") == 0 &&
         (version == 0 || (row[2] && strtoull(row[2], NULL, 10) == version))
             ? PERMITD_OK : PERMITD_ENOTFOUND;
    mysql_free_result(res);
    return rc;
}

void store_history_free(struct store_change *v, size_t n)
{
    for (size_t i = 0; i < n && v != NULL; i++) {
        free(v[i].old_value);
        free(v[i].new_value);
    }
    free(v);
}

int store_history(struct store *s, const char *name, int limit, struct store_change **out,
                  size_t *n, struct permitd_error *err)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    struct store_change *v;
    char *q;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    if ((q = quoted(s, name)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = run_query(s, sqlf("SELECT action, actor, DATE_FORMAT(changed_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), "
                           "IFNULL(old_value, ''), IFNULL(new_value, '') FROM policy_audit "
                           "WHERE name = %s ORDER BY changed_at DESC, id DESC LIMIT %d",
                           q, limit), &res, err);
    free(q);
    if (rc != PERMITD_OK)
        return rc;
    v = calloc(mysql_num_rows(res) + 1, sizeof(*v));
    if (v == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct store_change *c = &v[*n];
        snprintf(c->action, sizeof(c->action), "%s", row[0]);
        snprintf(c->actor, sizeof(c->actor), "%s", row[1]);
        snprintf(c->changed_at, sizeof(c->changed_at), "%s", row[2]);
        c->old_value = strdup(row[3]);
        c->new_value = strdup(row[4]);
        (*n)++;
        if (c->old_value == NULL || c->new_value == NULL) {
            store_history_free(v, *n);
            mysql_free_result(res);
            *n = 0;
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
    }
    mysql_free_result(res);
    *out = v;
    return PERMITD_OK;
}

/* ---- admin accounts and sessions ---- */

static int user_row(MYSQL_RES *res, struct store_user *out)
{
    MYSQL_ROW row = mysql_fetch_row(res);

    if (row == NULL)
        return -1;
    out->id = strtoull(row[0], NULL, 10);
    snprintf(out->username, sizeof(out->username), "%s", row[1]);
    snprintf(out->role, sizeof(out->role), "%s", row[2]);
    snprintf(out->password_hash, sizeof(out->password_hash), "%s", row[3] ? row[3] : "");
    return 0;
}

int store_user_get(struct store *s, const char *username, struct store_user *out,
                   struct permitd_error *err)
{
    MYSQL_RES *res;
    char *q;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    if ((q = quoted(s, username)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = run_query(s, sqlf("SELECT id, username, role, password_hash FROM admin_users "
                           "WHERE username = %s AND enabled = 1", q), &res, err);
    free(q);
    if (rc != PERMITD_OK)
        return rc;
    if (user_row(res, out) != 0)
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "no admin user \"%s\"", username);
    mysql_free_result(res);
    return rc;
}

/* Session tokens are hex; anything else never reaches SQL. */
static int hex_token(const char *token)
{
    size_t n = strlen(token);

    if (n < 32 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((token[i] >= '0' && token[i] <= '9') || (token[i] >= 'a' && token[i] <= 'f')))
            return 0;
    return 1;
}

int store_session_create(struct store *s, const char *token, uint64_t user_id, int ttl_s,
                         struct permitd_error *err)
{
    char id_hash[SHA256_HEX_LEN + 1];
    int rc;

    if (!hex_token(token))
        return permitd_error_set(err, PERMITD_EINTERNAL, "malformed session token");
    sha256_hex(token, strlen(token), id_hash);
    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    /* Expired sessions go whenever a new one comes. */
    if ((rc = exec(s, "DELETE FROM admin_sessions WHERE expires_at < NOW(6)", err)) != PERMITD_OK)
        return rc;
    return run(s, sqlf("INSERT INTO admin_sessions (id_hash, user_id, expires_at) VALUES "
                       "('%s', %" PRIu64 ", NOW(6) + INTERVAL %d SECOND)",
                       id_hash, user_id, ttl_s), err);
}

int store_session_user(struct store *s, const char *token, struct store_user *out,
                       struct permitd_error *err)
{
    char id_hash[SHA256_HEX_LEN + 1];
    MYSQL_RES *res;
    int rc;

    memset(out, 0, sizeof(*out));
    if (!hex_token(token))
        return permitd_error_set(err, PERMITD_EUNAUTHENTICATED, "not logged in");
    sha256_hex(token, strlen(token), id_hash);
    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    /* A disabled user's or an ended session is refused at once: the read
     * must not run in a snapshot older than that commit. */
    dbconn_kept_no_transaction(&s->conn);
    rc = run_query(s, sqlf("SELECT u.id, u.username, u.role, '' FROM admin_sessions s "
                           "JOIN admin_users u ON u.id = s.user_id "
                           "WHERE s.id_hash = '%s' AND s.expires_at > NOW(6) AND u.enabled = 1",
                           id_hash),
                   &res, err);
    if (rc != PERMITD_OK)
        return rc;
    if (user_row(res, out) != 0)
        rc = permitd_error_set(err, PERMITD_EUNAUTHENTICATED,
                               "not logged in (the session has expired or ended)");
    mysql_free_result(res);
    return rc;
}

int store_session_delete(struct store *s, const char *token, struct permitd_error *err)
{
    char id_hash[SHA256_HEX_LEN + 1];
    int rc;

    if (!hex_token(token))
        return PERMITD_OK;
    sha256_hex(token, strlen(token), id_hash);
    if ((rc = connect_db(s, err)) != PERMITD_OK)
        return rc;
    return run(s, sqlf("DELETE FROM admin_sessions WHERE id_hash = '%s'", id_hash), err);
}
