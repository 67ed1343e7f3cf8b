/*
 * override_edits.c - a policy's overrides in MySQL, as the admin RPCs
 * write and read them (see override_edits.h).
 *
 * Values reach SQL quoted by the connection (dbconn_kept_quote()), never
 * pasted: a key is any bytes but control characters. A search is a LIKE
 * pattern whose own wildcards are escaped, so "50%" finds "50%". An
 * import's rows go in a few hundred to a statement
 * (INSERT ... ON DUPLICATE KEY UPDATE), inside the one transaction, so
 * 10,000 rows are a few dozen round trips.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mysql.h>

#include "stores/dbconn.h"
#include "stores/override_edits.h"
#include "stores/policyrefs.h"

#define TIME_FMT "'%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'"
#define IMPORT_BATCH 200                /* rows per INSERT of an import */
#define DUPLICATE_KEY 1062              /* ER_DUP_ENTRY */

#define COLUMNS "id, policy, match_kind, match_value, action, max_permits, rate, window_ms, " \
    "NULL, description, version, " \
    "created_by, updated_by, DATE_FORMAT(created_at, " TIME_FMT "), DATE_FORMAT(updated_at, " \
    TIME_FMT "), IFNULL(DATE_FORMAT(expires_at, " TIME_FMT "), ''), " \
    "expires_at IS NOT NULL AND expires_at <= UTC_TIMESTAMP(6)"

struct override_edits_db {
    struct dbconn_kept conn;        /* (dbconn.h) */
};

int override_edits_db_new(const struct config *cfg, struct override_edits_db **out,
                          struct permitd_error *err)
{
    struct override_edits_db *d = calloc(1, sizeof(*d));

    *out = NULL;
    if (d == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    dbconn_kept_init(&d->conn, cfg, NULL);
    *out = d;
    return PERMITD_OK;
}

void override_edits_db_free(struct override_edits_db *d)
{
    if (d == NULL)
        return;
    dbconn_kept_close(&d->conn);
    free(d);
}

/* A growing statement (a multi-row INSERT, an IN list). */
struct sql {
    char *s;
    size_t len, cap;
    int oom;
};

__attribute__((format(printf, 2, 3)))
static void put(struct sql *q, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (q->oom)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(q->s ? q->s + q->len : NULL, q->s ? q->cap - q->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            q->oom = 1;
            return;
        }
        if (q->s != NULL && (size_t)n < q->cap - q->len) {
            q->len += (size_t)n;
            return;
        }
        size_t cap = q->cap ? q->cap * 2 : 4096;
        while (cap < q->len + (size_t)n + 1)
            cap *= 2;
        char *s = realloc(q->s, cap);
        if (s == NULL) {
            q->oom = 1;
            return;
        }
        q->s = s;
        q->cap = cap;
    }
}

/* Runs q (then empties it): out of memory when building it failed. */
static int run(struct override_edits_db *d, struct sql *q, MYSQL_RES **res,
               struct permitd_error *err)
{
    int rc = q->oom ? permitd_error_set(err, PERMITD_EINTERNAL, "out of memory")
                    : dbconn_kept_query(&d->conn, q->s, res, err);
    q->len = 0;
    q->oom = 0;
    if (q->s != NULL)
        q->s[0] = '\0';
    return rc;
}

/* Appends str quoted for SQL. */
static void put_quoted(struct override_edits_db *d, struct sql *q, const char *str)
{
    char *s = dbconn_kept_quote(&d->conn, str);

    if (s == NULL) {
        q->oom = 1;
        return;
    }
    put(q, "%s", s);
    free(s);
}

static void read_row(MYSQL_ROW row, struct override_row *r)
{
    memset(r, 0, sizeof(*r));
    r->id = strtoll(row[0], NULL, 10);
    dbconn_field_copy(r->policy, sizeof(r->policy), row[1]);
    dbconn_field_copy(r->kind, sizeof(r->kind), row[2]);
    dbconn_field_copy(r->value, sizeof(r->value), row[3]);
    dbconn_field_copy(r->action, sizeof(r->action), row[4]);
    r->max_permits = row[5] ? strtoll(row[5], NULL, 10) : 0;
    dbconn_field_copy(r->rate, sizeof(r->rate), row[6]);
    if (strchr(r->rate, '.') != NULL) {     /* DECIMAL(24,12): "2.500000000000" -> "2.5" */
        size_t n = strlen(r->rate);
        while (n > 0 && r->rate[n - 1] == '0')
            r->rate[--n] = '\0';
        if (n > 0 && r->rate[n - 1] == '.')
            r->rate[--n] = '\0';
    }
    r->window_ms = row[7] ? strtoll(row[7], NULL, 10) : 0;
    dbconn_field_copy(r->description, sizeof(r->description), row[9]);
    r->version = row[10] ? strtoll(row[10], NULL, 10) : 1;
    dbconn_field_copy(r->created_by, sizeof(r->created_by), row[11]);
    dbconn_field_copy(r->updated_by, sizeof(r->updated_by), row[12]);
    dbconn_field_copy(r->created_at, sizeof(r->created_at), row[13]);
    dbconn_field_copy(r->updated_at, sizeof(r->updated_at), row[14]);
    dbconn_field_copy(r->expires_at, sizeof(r->expires_at), row[15]);
    r->expired = row[16] != NULL && row[16][0] == '1';
}

/* The rows of res into *out (a new array of *n). */
static int read_rows(MYSQL_RES *res, struct override_row **out, size_t *n,
                     struct permitd_error *err)
{
    struct override_row *v = calloc(mysql_num_rows(res) + 1, sizeof(*v));
    MYSQL_ROW row;

    *n = 0;
    if (v == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    while ((row = mysql_fetch_row(res)) != NULL)
        read_row(row, &v[(*n)++]);
    *out = v;
    return PERMITD_OK;
}

int override_edits_policy(struct override_edits_db *d, const char *field, const char *policy,
                          enum policy_algorithm *algorithm, struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    char *q;
    int rc;

    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    if ((q = dbconn_kept_quote(&d->conn, policy)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = dbconn_kept_queryf(&d->conn, &res, err, "SELECT algorithm FROM policies WHERE name = %s",
                            q);
    free(q);
    if (rc != PERMITD_OK)
        return rc;
    if ((row = mysql_fetch_row(res)) == NULL) {
        rc = permitd_error_set(err, PERMITD_EPRECONDITION, "%s: policy \"%s\" does not exist "
                               "(create it first, or pick one ListPolicies shows)", field, policy);
    } else {
        struct permitd_error ignored;
        if (policy_algorithm_parse("algorithm", row[0] ? row[0] : "", algorithm, &ignored) !=
            PERMITD_OK)
            *algorithm = POLICY_TOKEN_BUCKET;   /* the CHECK constraint keeps this away */
    }
    mysql_free_result(res);
    return rc;
}

/* The WHERE clause of q. */
static void put_where(struct override_edits_db *d, struct sql *s, const struct override_query *q)
{
    if (q->policy != NULL) {
        put(s, " WHERE policy = ");
        put_quoted(d, s, q->policy);
    } else {
        put(s, " WHERE match_kind = 'app' AND match_value = ");
        put_quoted(d, s, q->app ? q->app : "");
    }
    if (q->search != NULL && q->search[0] != '\0') {
        size_t n = strlen(q->search);
        char *pat = malloc(2 * n + 3), *p = pat;
        if (pat == NULL) {
            s->oom = 1;
            return;
        }
        *p++ = '%';
        for (const char *c = q->search; *c; c++) {
            if (*c == '%' || *c == '_' || *c == '\\')
                *p++ = '\\';
            *p++ = *c;
        }
        *p++ = '%';
        *p = '\0';
        put(s, " AND match_value LIKE ");
        put_quoted(d, s, pat);
        free(pat);
    }
}

int override_edits_list(struct override_edits_db *d, const struct override_query *q,
                        struct override_row **out, size_t *n, int64_t *total,
                        struct permitd_error *err)
{
    static const char *const orders[] = {
        [OVERRIDE_SORT_MATCH] = "match_kind, match_value, id",
        [OVERRIDE_SORT_UPDATED] = "updated_at DESC, id DESC",
        [OVERRIDE_SORT_EXPIRES] = "expires_at IS NULL, expires_at, id",
    };
    struct sql s = {0};
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc;

    *out = NULL;
    *n = 0;
    *total = 0;
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    put(&s, "SELECT COUNT(*) FROM policy_overrides");
    put_where(d, &s, q);
    if ((rc = run(d, &s, &res, err)) == PERMITD_OK) {
        if ((row = mysql_fetch_row(res)) != NULL && row[0] != NULL)
            *total = strtoll(row[0], NULL, 10);
        mysql_free_result(res);
        res = NULL;
        put(&s, "SELECT " COLUMNS " FROM policy_overrides");
        put_where(d, &s, q);
        put(&s, " ORDER BY %s%s LIMIT %zu OFFSET %zu",
            q->policy == NULL && q->sort == OVERRIDE_SORT_MATCH ? "policy, " : "",
            orders[q->sort], q->limit, q->offset);
        rc = run(d, &s, &res, err);
    }
    if (rc == PERMITD_OK)
        rc = read_rows(res, out, n, err);
    if (res != NULL)
        mysql_free_result(res);
    free(s.s);
    return rc;
}

int override_edits_matches(struct override_edits_db *d, const struct override_query *q,
                           struct override_match **out, size_t *n, struct permitd_error *err)
{
    struct sql s = {0};
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    struct override_match *v = NULL;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    put(&s, "SELECT id, match_kind, match_value FROM policy_overrides");
    put_where(d, &s, q);
    put(&s, " ORDER BY match_kind, match_value, id");
    if ((rc = run(d, &s, &res, err)) == PERMITD_OK &&
        (v = calloc(mysql_num_rows(res) + 1, sizeof(*v))) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    while (rc == PERMITD_OK && (row = mysql_fetch_row(res)) != NULL) {
        v[*n].id = strtoll(row[0], NULL, 10);
        dbconn_field_copy(v[*n].kind, sizeof(v[*n].kind), row[1]);
        dbconn_field_copy(v[*n].value, sizeof(v[*n].value), row[2]);
        (*n)++;
    }
    if (res != NULL)
        mysql_free_result(res);
    free(s.s);
    if (rc != PERMITD_OK) {
        free(v);
        *n = 0;
        return rc;
    }
    *out = v;
    return PERMITD_OK;
}

int override_edits_by_ids(struct override_edits_db *d, const int64_t *ids, size_t n,
                          struct override_row **out, size_t *nout, struct permitd_error *err)
{
    struct sql s = {0};
    MYSQL_RES *res = NULL;
    struct override_row *got = NULL, *v = NULL;
    size_t ngot = 0;
    int rc;

    *out = NULL;
    *nout = 0;
    if ((v = calloc(n + 1, sizeof(*v))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (n == 0) {
        *out = v;
        return PERMITD_OK;
    }
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        goto out;
    put(&s, "SELECT " COLUMNS " FROM policy_overrides WHERE id IN (");
    for (size_t i = 0; i < n; i++)
        put(&s, "%s%" PRId64, i ? "," : "", ids[i]);
    put(&s, ")");
    if ((rc = run(d, &s, &res, err)) != PERMITD_OK ||
        (rc = read_rows(res, &got, &ngot, err)) != PERMITD_OK)
        goto out;
    /* In the order asked (n and ngot are a page: at most a thousand). */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < ngot; j++)
            if (got[j].id == ids[i]) {
                v[(*nout)++] = got[j];
                break;
            }
out:
    if (res != NULL)
        mysql_free_result(res);
    free(got);
    free(s.s);
    if (rc != PERMITD_OK) {
        free(v);
        *nout = 0;
        return rc;
    }
    *out = v;
    return PERMITD_OK;
}

int override_edits_get(struct override_edits_db *d, int64_t id, struct override_row *out,
                       struct permitd_error *err)
{
    struct override_row *v = NULL;
    size_t n = 0;
    int rc = override_edits_by_ids(d, &id, 1, &v, &n, err);

    if (rc == PERMITD_OK && n == 0)
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "id: no override %" PRId64, id);
    if (rc == PERMITD_OK)
        *out = v[0];
    free(v);
    return rc;
}

/* Appends Unix microseconds us as a DATETIME(6) literal in UTC (the
 * session's zone), or NULL for 0. (FROM_UNIXTIME() stops at 2038 on
 * MariaDB before 11.5.) */
static void put_time(struct sql *s, int64_t us)
{
    time_t t = (time_t)(us / 1000000);
    struct tm tm;

    if (us <= 0 || gmtime_r(&t, &tm) == NULL) {
        put(s, "NULL");
        return;
    }
    put(s, "'%04d-%02d-%02d %02d:%02d:%02d.%06" PRId64 "'", tm.tm_year + 1900, tm.tm_mon + 1,
        tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us % 1000000);
}

/* The values of r for an INSERT: (policy, match_kind, ..., updated_by). */
static void put_values(struct override_edits_db *d, struct sql *s, const struct override_row *r,
                       const char *actor)
{
    put(s, "(");
    put_quoted(d, s, r->policy);
    put(s, ", '%s', ", r->kind);
    put_quoted(d, s, r->value);
    put(s, ", '%s', ", r->action);
    if (r->max_permits > 0)
        put(s, "%" PRId64 ", ", r->max_permits);
    else
        put(s, "NULL, ");
    if (r->rate[0] != '\0')
        put_quoted(d, s, r->rate);
    else
        put(s, "NULL");
    if (r->window_ms > 0)
        put(s, ", %" PRId64, r->window_ms);
    else
        put(s, ", NULL");
    put(s, ", ");
    put_time(s, r->expires_us);
    put(s, ", ");
    put_quoted(d, s, r->description);
    put(s, ", ");
    put_quoted(d, s, actor);
    put(s, ", ");
    put_quoted(d, s, actor);
    put(s, ")");
}

#define INSERT_COLUMNS "INSERT INTO policy_overrides (policy, match_kind, match_value, action, " \
    "max_permits, rate, window_ms, expires_at, description, created_by, updated_by) VALUES "

/* After a failed write: a duplicate (policy, match) is already_exists. */
static int duplicate(struct override_edits_db *d, int rc, const struct override_row *r,
                     struct permitd_error *err)
{
    if (rc == PERMITD_EINTERNAL && d->conn.db != NULL && mysql_errno(d->conn.db) == DUPLICATE_KEY)
        return permitd_error_set(err, PERMITD_EEXIST, "match_value: policy \"%s\" has an "
                                 "override of %s \"%.256s\" already (edit that one)", r->policy,
                                 r->kind, r->value);
    return rc;
}

/* The count of policy's overrides (its rows locked against a concurrent
 * create past the bound), into *n. */
static int count_locked(struct override_edits_db *d, const char *policy, int64_t *n,
                        struct permitd_error *err)
{
    struct sql s = {0};
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc;

    put(&s, "SELECT COUNT(*) FROM policy_overrides WHERE policy = ");
    put_quoted(d, &s, policy);
    put(&s, " FOR UPDATE");
    rc = run(d, &s, &res, err);
    free(s.s);
    if (rc != PERMITD_OK)
        return rc;
    row = mysql_fetch_row(res);
    *n = row != NULL && row[0] != NULL ? strtoll(row[0], NULL, 10) : 0;
    mysql_free_result(res);
    return PERMITD_OK;
}

static int room_for(struct override_edits_db *d, const char *policy, int64_t more,
                    struct permitd_error *err)
{
    int64_t n = 0;
    int rc = count_locked(d, policy, &n, err);

    if (rc == PERMITD_OK && n + more > OVERRIDES_PER_POLICY_MAX)
        rc = permitd_error_set(err, PERMITD_EEXHAUSTED, "policy \"%s\" has %" PRId64
                               " overrides; %d is the most one policy may have", policy, n,
                               OVERRIDES_PER_POLICY_MAX);
    return rc;
}

int override_edits_create(struct override_edits_db *d, const struct override_row *r,
                          const char *actor, int64_t *id, struct permitd_error *err)
{
    struct sql s = {0};
    int rc = dbconn_kept_begin(&d->conn, actor, err);

    if (rc == PERMITD_OK)
        rc = policyrefs_require(&d->conn, "policy", r->policy, err);
    if (rc == PERMITD_OK)
        rc = room_for(d, r->policy, 1, err);
    if (rc == PERMITD_OK) {
        put(&s, INSERT_COLUMNS);
        put_values(d, &s, r, actor);
        rc = duplicate(d, run(d, &s, NULL, err), r, err);
    }
    if (rc == PERMITD_OK)
        *id = (int64_t)mysql_insert_id(d->conn.db);
    free(s.s);
    return dbconn_kept_finish(&d->conn, rc, err);
}

/* Locks override id and compares its version with version (0: any); its
 * policy into policy. */
static int lock_one(struct override_edits_db *d, int64_t id, int64_t version, char *policy,
                    struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc = dbconn_kept_queryf(&d->conn, &res, err, "SELECT version, policy FROM "
                                "policy_overrides WHERE id = %" PRId64 " FOR UPDATE", id);

    if (rc != PERMITD_OK)
        return rc;
    row = mysql_fetch_row(res);
    if (row == NULL)
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "id: no override %" PRId64, id);
    else if (version != 0 && strtoll(row[0], NULL, 10) != version)
        rc = permitd_error_set(err, PERMITD_EABORTED, "version: override %" PRId64 " was "
                               "changed meanwhile (you started from version %" PRId64 ", it is "
                               "at %s now): reload it and edit again", id, version, row[0]);
    if (row != NULL)
        dbconn_field_copy(policy, POLICY_NAME_MAX + 1, row[1]);
    mysql_free_result(res);
    return rc;
}

int override_edits_update(struct override_edits_db *d, const struct override_row *r,
                          const char *actor, char *old_policy, struct permitd_error *err)
{
    struct sql s = {0};
    int rc = dbconn_kept_begin(&d->conn, actor, err);

    old_policy[0] = '\0';
    if (rc == PERMITD_OK)
        rc = lock_one(d, r->id, r->version, old_policy, err);
    if (rc == PERMITD_OK)
        rc = policyrefs_require(&d->conn, "policy", r->policy, err);
    if (rc == PERMITD_OK && strcmp(old_policy, r->policy) != 0)
        rc = room_for(d, r->policy, 1, err);
    if (rc == PERMITD_OK) {
        put(&s, "UPDATE policy_overrides SET policy = ");
        put_quoted(d, &s, r->policy);
        put(&s, ", match_kind = '%s', match_value = ", r->kind);
        put_quoted(d, &s, r->value);
        put(&s, ", action = '%s', max_permits = ", r->action);
        if (r->max_permits > 0)
            put(&s, "%" PRId64, r->max_permits);
        else
            put(&s, "NULL");
        put(&s, ", rate = ");
        if (r->rate[0] != '\0')
            put_quoted(d, &s, r->rate);
        else
            put(&s, "NULL");
        if (r->window_ms > 0)
            put(&s, ", window_ms = %" PRId64, r->window_ms);
        else
            put(&s, ", window_ms = NULL");
        put(&s, ", expires_at = ");
        put_time(&s, r->expires_us);
        put(&s, ", description = ");
        put_quoted(d, &s, r->description);
        put(&s, ", updated_by = ");
        put_quoted(d, &s, actor);
        put(&s, " WHERE id = %" PRId64, r->id);
        rc = duplicate(d, run(d, &s, NULL, err), r, err);
    }
    free(s.s);
    return dbconn_kept_finish(&d->conn, rc, err);
}

int override_edits_delete(struct override_edits_db *d, int64_t id, int64_t version,
                          const char *actor, char *policy, struct permitd_error *err)
{
    int rc = dbconn_kept_begin(&d->conn, actor, err);

    policy[0] = '\0';
    if (rc == PERMITD_OK)
        rc = lock_one(d, id, version, policy, err);
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, NULL, err, "DELETE FROM policy_overrides WHERE id = %"
                                PRId64, id);
    return dbconn_kept_finish(&d->conn, rc, err);
}

static int match_cmp(const void *a, const void *b)
{
    const struct override_match *x = a, *y = b;
    int c = strcmp(x->kind, y->kind);

    return c != 0 ? c : strcmp(x->value, y->value);
}

int override_edits_import(struct override_edits_db *d, const char *policy,
                          const struct override_row *rows, size_t n, int replace,
                          const char *actor, struct override_import_counts *counts,
                          struct permitd_error *err)
{
    struct override_query q = {.policy = policy};
    struct override_match *have = NULL, *file = NULL;
    size_t nhave = 0;
    int64_t now_count = 0;
    struct sql s = {0};
    int rc = dbconn_kept_begin(&d->conn, actor, err);

    memset(counts, 0, sizeof(*counts));
    if (rc == PERMITD_OK)
        rc = policyrefs_require(&d->conn, "policy", policy, err);
    if (rc == PERMITD_OK)
        rc = count_locked(d, policy, &now_count, err);
    if (rc == PERMITD_OK)
        rc = override_edits_matches(d, &q, &have, &nhave, err);   /* sorted by match */
    if (rc == PERMITD_OK && (file = calloc(n + 1, sizeof(*file))) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc != PERMITD_OK)
        goto out;
    for (size_t i = 0; i < n; i++) {
        snprintf(file[i].kind, sizeof(file[i].kind), "%s", rows[i].kind);
        snprintf(file[i].value, sizeof(file[i].value), "%s", rows[i].value);
        if (bsearch(&file[i], have, nhave, sizeof(*have), match_cmp) != NULL)
            counts->updated++;
        else
            counts->created++;
    }
    qsort(file, n, sizeof(*file), match_cmp);
    if (replace) {
        for (size_t i = 0; i < nhave; i++) {
            if (bsearch(&have[i], file, n, sizeof(*file), match_cmp) != NULL)
                continue;
            put(&s, "%s%" PRId64, counts->deleted++ ? "," : "DELETE FROM policy_overrides "
                "WHERE id IN (", have[i].id);
        }
        if (counts->deleted > 0) {
            put(&s, ")");
            if ((rc = run(d, &s, NULL, err)) != PERMITD_OK)
                goto out;
        }
    }
    if (now_count - counts->deleted + counts->created > OVERRIDES_PER_POLICY_MAX) {
        rc = permitd_error_set(err, PERMITD_EEXHAUSTED, "policy \"%s\" would have %" PRId64
                               " overrides; %d is the most one policy may have (import with "
                               "replace to drop those not in the file)", policy,
                               now_count - counts->deleted + counts->created,
                               OVERRIDES_PER_POLICY_MAX);
        goto out;
    }
    for (size_t i = 0; i < n; i += IMPORT_BATCH) {
        put(&s, INSERT_COLUMNS);
        for (size_t j = i; j < n && j < i + IMPORT_BATCH; j++) {
            if (j > i)
                put(&s, ", ");
            put_values(d, &s, &rows[j], actor);
        }
        put(&s, " ON DUPLICATE KEY UPDATE action = VALUES(action), max_permits = "
            "VALUES(max_permits), rate = VALUES(rate), window_ms = VALUES(window_ms), "
            "expires_at = VALUES(expires_at), description = VALUES(description), updated_by = "
            "IF(action <=> VALUES(action) AND max_permits <=> VALUES(max_permits) AND rate <=> "
            "VALUES(rate) AND window_ms <=> VALUES(window_ms) AND expires_at <=> "
            "VALUES(expires_at) AND description <=> VALUES(description), updated_by, "
            "VALUES(updated_by))");
        if ((rc = run(d, &s, NULL, err)) != PERMITD_OK)
            goto out;
    }
out:
    free(have);
    free(file);
    free(s.s);
    if (rc != PERMITD_OK)
        memset(counts, 0, sizeof(*counts));
    return dbconn_kept_finish(&d->conn, rc, err);
}
