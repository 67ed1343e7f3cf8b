/*
 * overrides.c - reading policy_overrides and policy_override_changes
 * (see overrides.h).
 *
 * The read runs in a read-only transaction WITH CONSISTENT SNAPSHOT: the
 * change counts and the rows are one moment's, so the version stamp the
 * engine derives from a count is never paired with rows of another
 * moment. The rows are streamed (mysql_use_result()): at 100,000 rows the
 * result is never held whole by the client.
 */
#define _GNU_SOURCE     /* asprintf */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "stores/dbconn.h"
#include "stores/overrides.h"
#include "stores/policy.h"

struct overrides_db {
    struct dbconn_kept conn;        /* (dbconn.h) */
};

static const char *const kind_names[] = {"key", "prefix", "app"};
static const char *const action_names[] = {"none", "limit", "block", "exempt"};

int overrides_kind_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (s != NULL && strcmp(s, kind_names[i]) == 0)
            return i;
    return -1;
}

int overrides_action_parse(const char *s)
{
    for (int i = 1; i < 4; i++)
        if (s != NULL && strcmp(s, action_names[i]) == 0)
            return i;
    return -1;
}

const char *overrides_kind_name(enum overrides_kind k)
{
    return (unsigned)k < 3 ? kind_names[k] : "key";
}

const char *overrides_action_name(enum overrides_action a)
{
    return (unsigned)a < 4 ? action_names[a] : "none";
}

int overrides_db_new(const struct config *cfg, struct overrides_db **out,
                     struct permitd_error *err)
{
    struct overrides_db *d = calloc(1, sizeof(*d));

    *out = NULL;
    if (d == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    dbconn_kept_init(&d->conn, cfg, NULL);
    *out = d;
    return PERMITD_OK;
}

void overrides_db_free(struct overrides_db *d)
{
    if (d == NULL)
        return;
    dbconn_kept_close(&d->conn);
    free(d);
}

/* A whole number field (NULL: 0); -1 when it is not one. */
static int64_t whole(const char *s)
{
    char *end;
    long long v;

    if (s == NULL)
        return 0;
    v = strtoll(s, &end, 10);
    return end == s || *end != '\0' ? -1 : (int64_t)v;
}

/* Row `row` (lengths: its fields' bytes) into r; 0, or -1 for a row the
 * schema's CHECKs would have refused. Columns as the SELECT below. */
static int parse_row(MYSQL_ROW row, const unsigned long *len, struct overrides_row *r)
{
    struct permitd_error ignored;
    int kind = overrides_kind_parse(row[2]), action = overrides_action_parse(row[4]);
    char *end = NULL;

    memset(r, 0, sizeof(*r));
    r->id = whole(row[0]);
    r->policy = row[1];
    r->value = row[3];
    r->value_len = row[3] != NULL ? len[3] : 0;
    r->max_permits = whole(row[5]);
    r->rate = row[6] != NULL ? strtod(row[6], &end) : 0;
    r->window_ms = whole(row[7]);
    r->expires_us = whole(row[8]);
    r->since_us = whole(row[9]);
    r->version = whole(row[10]);
    if (kind < 0 || action < 0 || r->id <= 0 || r->policy == NULL ||
        policy_check_name("policy", r->policy, &ignored) != PERMITD_OK || r->value == NULL ||
        r->value_len == 0 || r->value_len > OVERRIDES_VALUE_MAX ||
        memchr(r->value, '\0', r->value_len) != NULL)
        return -1;
    r->kind = (enum overrides_kind)kind;
    r->action = (enum overrides_action)action;
    if (r->max_permits < 0 || r->max_permits > POLICY_MAX_PERMITS_MAX ||
        r->window_ms < 0 || r->window_ms > POLICY_DURATION_MAX_MS ||
        (row[6] != NULL && (end == row[6] || *end != '\0' || !isfinite(r->rate) ||
                            r->rate <= 0 || r->rate > 1e12)) ||
        r->expires_us < 0 || r->since_us < 0 || r->version < 0)
        return -1;
    if (r->action == OVERRIDES_LIMIT && r->max_permits == 0 && r->rate == 0 && r->window_ms == 0)
        return -1;      /* a limit that changes nothing: the CHECK refuses it */
    if (r->action != OVERRIDES_LIMIT)
        r->max_permits = 0, r->rate = 0, r->window_ms = 0;
    return 0;
}

/* The SELECTs, for one policy (its name quoted) or all. */
#define ROWS_SQL "SELECT id, policy, match_kind, match_value, action, max_permits, rate, " \
    "window_ms, CAST(ROUND(UNIX_TIMESTAMP(expires_at) * 1000000) AS SIGNED), " \
    "CAST(ROUND(UNIX_TIMESTAMP(updated_at) * 1000000) AS SIGNED), version " \
    "FROM policy_overrides"
#define CHANGES_SQL "SELECT policy, changes FROM policy_override_changes"

static int read_changes(struct overrides_db *d, const char *where, overrides_changes_fn changes,
                        void *ud, struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc = dbconn_kept_queryf(&d->conn, &res, err, "%s%s", CHANGES_SQL, where);

    if (rc != PERMITD_OK)
        return rc;
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct permitd_error ignored;
        int64_t n = whole(row[1]);
        if (row[0] == NULL || n < 0 ||
            policy_check_name("policy", row[0], &ignored) != PERMITD_OK)
            continue;
        if ((rc = changes(ud, row[0], (uint64_t)n)) != PERMITD_OK)
            break;
    }
    mysql_free_result(res);
    if (rc != PERMITD_OK)
        permitd_error_set(err, rc, "overrides: the load was stopped");
    return rc;
}

static int read_rows(struct overrides_db *d, const char *where, overrides_row_fn fn, void *ud,
                     size_t *skipped, struct permitd_error *err)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    char *sql = NULL;
    int rc = PERMITD_OK, stopped = 0;

    if (asprintf(&sql, "%s%s", ROWS_SQL, where) < 0)   /* any order: the build indexes by name */
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (mysql_real_query(d->conn.db, sql, strlen(sql)) != 0 ||
        (res = mysql_use_result(d->conn.db)) == NULL) {
        rc = dbconn_kept_failed(&d->conn, sql, err);
        free(sql);
        return rc;
    }
    /* every row is fetched, even after a callback stopped: an unread
     * streamed result would leave the connection out of step */
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct overrides_row r;
        if (stopped)
            continue;
        if (parse_row(row, mysql_fetch_lengths(res), &r) != 0) {
            if (skipped != NULL)
                (*skipped)++;
            continue;
        }
        if ((rc = fn(ud, &r)) != PERMITD_OK)
            stopped = 1;
    }
    if (!stopped && mysql_errno(d->conn.db) != 0)
        rc = dbconn_kept_failed(&d->conn, sql, err);
    else if (stopped)
        permitd_error_set(err, rc, "overrides: the load was stopped");
    mysql_free_result(res);
    free(sql);
    return rc;
}

int overrides_db_load(struct overrides_db *d, const char *policy, overrides_changes_fn changes,
                      overrides_row_fn row, void *ud, size_t *skipped, struct permitd_error *err)
{
    char *q = NULL, *where = NULL;
    int rc;

    if (skipped != NULL)
        *skipped = 0;
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    if (policy != NULL) {
        if ((q = dbconn_kept_quote(&d->conn, policy)) == NULL ||
            asprintf(&where, " WHERE policy = %s", q) < 0) {
            free(q);
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
        free(q);
    }
    rc = dbconn_kept_query(&d->conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
                           NULL, err);
    if (rc == PERMITD_OK)
        rc = read_changes(d, where ? where : "", changes, ud, err);
    if (rc == PERMITD_OK)
        rc = read_rows(d, where ? where : "", row, ud, skipped, err);
    if (d->conn.db != NULL) {
        struct permitd_error ignored;
        if (dbconn_kept_query(&d->conn, rc == PERMITD_OK ? "COMMIT" : "ROLLBACK", NULL,
                              &ignored) != PERMITD_OK && rc == PERMITD_OK)
            rc = permitd_error_set(err, ignored.code, "%s", ignored.message);
    }
    free(where);
    return rc;
}

int overrides_db_fingerprint(struct overrides_db *d, uint64_t *sum, uint64_t *count,
                             struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc;

    *sum = *count = 0;
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK ||
        (rc = dbconn_kept_query(&d->conn, "SELECT CAST(COALESCE(SUM(changes), 0) AS UNSIGNED), "
                                "COUNT(*) FROM policy_override_changes", &res, err)) != PERMITD_OK)
        return rc;
    if ((row = mysql_fetch_row(res)) != NULL) {
        *sum = row[0] != NULL ? strtoull(row[0], NULL, 10) : 0;
        *count = row[1] != NULL ? strtoull(row[1], NULL, 10) : 0;
    }
    mysql_free_result(res);
    return PERMITD_OK;
}
