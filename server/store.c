/*
 * store.c - policies in MySQL, read through libmariadb.
 *
 * The connection is made on first use and dropped on any client-side error
 * (server gone, lost, timed out), so the next call reconnects: libmariadb's
 * own MYSQL_OPT_RECONNECT stays off because it silently loses session state.
 * Every session runs in UTC, so DATETIME(6) values are UTC throughout.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "log.h"
#include "policy.h"
#include "store.h"

struct store {
    const struct config *cfg;
    MYSQL *db;                  /* NULL while disconnected */
    char where[300];            /* masked URL, for messages */
};

int store_new(const struct config *cfg, struct store **out, struct permitd_error *err)
{
    struct store *s = calloc(1, sizeof(*s));

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->cfg = cfg;
    config_mysql_url_masked(&cfg->mysql, s->where, sizeof(s->where));
    *out = s;
    return PERMITD_OK;
}

static void disconnect(struct store *s)
{
    if (s->db != NULL) {
        mysql_close(s->db);
        s->db = NULL;
    }
}

void store_free(struct store *s)
{
    if (s == NULL)
        return;
    disconnect(s);
    free(s);
}

/* Client errors (2000-2999: cannot connect, server gone, lost, timeout)
 * mean MySQL is unreachable; anything else is the server refusing. */
static int failed(struct store *s, const char *what, struct permitd_error *err)
{
    unsigned int no = mysql_errno(s->db);
    int rc;

    if (no >= 2000 && no < 3000) {
        rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "mysql at %s: %s: %s (%u)",
                               s->where, what, mysql_error(s->db), no);
        disconnect(s);
    } else {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "mysql at %s: %s: %s (%u)",
                               s->where, what, mysql_error(s->db), no);
    }
    return rc;
}

static int connect_db(struct store *s, struct permitd_error *err)
{
    const struct config_mysql *m = &s->cfg->mysql;
    unsigned int timeout = (unsigned int)((s->cfg->mysql_timeout_ms + 999) / 1000);
    my_bool off = 0;

    if (s->db != NULL)
        return PERMITD_OK;
    s->db = mysql_init(NULL);
    if (s->db == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    mysql_options(s->db, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(s->db, MYSQL_OPT_READ_TIMEOUT, &timeout);
    mysql_options(s->db, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
    mysql_options(s->db, MYSQL_OPT_RECONNECT, &off);
    mysql_options(s->db, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_options(s->db, MYSQL_INIT_COMMAND, "SET time_zone = '+00:00'");
    if (mysql_real_connect(s->db, m->socket[0] ? NULL : m->host, m->user, m->password,
                           m->database, m->socket[0] ? 0 : (unsigned int)m->port,
                           m->socket[0] ? m->socket : NULL, 0) == NULL) {
        int rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "mysql at %s: cannot connect: %s (%u)",
                                   s->where, mysql_error(s->db), mysql_errno(s->db));
        disconnect(s);
        return rc;
    }
    return PERMITD_OK;
}

/* Runs a statement that returns no rows. */
static int exec(struct store *s, const char *sql, struct permitd_error *err)
{
    if (mysql_real_query(s->db, sql, strlen(sql)) != 0)
        return failed(s, sql, err);
    return PERMITD_OK;
}

/* Runs a query; *res is the buffered result (mysql_free_result()). */
static int query(struct store *s, const char *sql, MYSQL_RES **res, struct permitd_error *err)
{
    *res = NULL;
    if (mysql_real_query(s->db, sql, strlen(sql)) != 0)
        return failed(s, sql, err);
    *res = mysql_store_result(s->db);
    if (*res == NULL)
        return failed(s, sql, err);
    return PERMITD_OK;
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

static int read_policies(struct store *s, struct store_snapshot *snap, struct permitd_error *err)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc;

    rc = query(s,
               "SELECT id, name, max_permits, rate, enabled, failure_mode, version, "
               "CAST(UNIX_TIMESTAMP(updated_at) * 1000000 AS SIGNED) "
               "FROM policies ORDER BY id", &res, err);
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
        /* A name the API could never ask for (a DBA's typo) is skipped
         * loudly rather than written under a key nobody can reach. */
        if (policy_check_name("name", row[1], &why) != PERMITD_OK) {
            log_msg(LOG_WARN, "policy skipped: invalid name", "id=%" PRIu64 " error=\"%s\"",
                    p->id, why.message);
            continue;
        }
        snprintf(p->name, sizeof(p->name), "%s", row[1]);
        p->max_permits = strtoll(row[2], NULL, 10);
        snprintf(p->rate, sizeof(p->rate), "%s", row[3]);
        p->enabled = atoi(row[4]) != 0;
        snprintf(p->failure_mode, sizeof(p->failure_mode), "%s", row[5]);
        p->version = strtoull(row[6], NULL, 10);
        p->updated_us = row[7] ? strtoll(row[7], NULL, 10) : 0;
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
            log_msg(LOG_WARN, "app skipped: invalid name", "policy=%s error=\"%s\"",
                    p->name, why.message);
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
        (rc = read_apps(s, snap, err)) != PERMITD_OK) {
        if (s->db != NULL)
            mysql_real_query(s->db, "ROLLBACK", 8);
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
