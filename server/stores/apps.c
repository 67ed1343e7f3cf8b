/*
 * apps.c - apps and API keys in MySQL (see apps.h).
 *
 * Every write runs as one transaction with @permitd_actor set to whoever
 * asked (an admin's user name, or "permitd admin" and the OS user for the
 * command line): the triggers of migration 0007 write the audit rows and
 * read the actor from there, so a change made here and one made with plain
 * SQL are audited by the same code. The session mark is cleared after
 * each write, whatever happened.
 *
 * Its own connection rather than the policy store's: the two are used by
 * different threads (the sync's, the admin listener's), and this keeps the
 * policy store's code as it was.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>
#include <mysqld_error.h>

#include "stores/apps.h"
#include "stores/dbconn.h"

#define TIME_FMT "'%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'"

struct apps_db {
    struct dbconn_kept conn;        /* (dbconn.h) */
};

int apps_db_new(const struct config *cfg, struct apps_db **out, struct permitd_error *err)
{
    struct apps_db *d = calloc(1, sizeof(*d));

    *out = NULL;
    if (d == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    dbconn_kept_init(&d->conn, cfg, NULL);
    *out = d;
    return PERMITD_OK;
}

void apps_db_free(struct apps_db *d)
{
    if (d == NULL)
        return;
    dbconn_kept_close(&d->conn);
    free(d);
}

/* str quoted for SQL: a new string 'like this' (free()), or NULL. */
static char *quoted(struct apps_db *d, const char *str)
{
    return dbconn_kept_quote(&d->conn, str);
}

static int connect_db(struct apps_db *d, struct permitd_error *err)
{
    return dbconn_kept_ensure(&d->conn, err);
}

static int begin(struct apps_db *d, const char *actor, struct permitd_error *err)
{
    return dbconn_kept_begin(&d->conn, actor, err);
}

static int finish(struct apps_db *d, int rc, struct permitd_error *err)
{
    return dbconn_kept_finish(&d->conn, rc, err);
}

void apps_list_free(struct apps_app *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++) {
        free(v[i].description);
        free(v[i].policies);
        free(v[i].keys);
    }
    free(v);
}

static struct apps_app *find(struct apps_app *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return &v[i];
    return NULL;
}

int apps_list(struct apps_db *d, struct apps_app **out, size_t *n, struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    struct apps_app *v = NULL;
    size_t count = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = connect_db(d, err)) != PERMITD_OK)
        return rc;
    rc = dbconn_kept_queryf(&d->conn, &res, err,
             "SELECT a.name, a.description, a.enabled, a.created_by, "
             /* last changed by: its newest audit row's actor (a key's too),
              * the name the audit shows (issue 23) */
             "IFNULL((SELECT x.actor FROM app_audit x WHERE x.app = a.name "
             "ORDER BY x.changed_at DESC, x.id DESC LIMIT 1), a.updated_by), "
             "DATE_FORMAT(a.created_at, " TIME_FMT "), DATE_FORMAT(a.updated_at, " TIME_FMT "), "
             "IFNULL((SELECT GROUP_CONCAT(p.name ORDER BY p.name SEPARATOR ',') "
             "FROM policy_apps pa JOIN policies p ON p.id = pa.policy_id WHERE pa.app = a.name), '') "
             "FROM apps a WHERE a.name <> '*' ORDER BY a.name");
    if (rc != PERMITD_OK)
        return rc;
    v = calloc(mysql_num_rows(res) + 1, sizeof(*v));
    if (v == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct apps_app *a = &v[count++];
        dbconn_field_copy(a->name, sizeof(a->name), row[0]);
        a->description = strdup(row[1] ? row[1] : "");
        a->enabled = row[2] != NULL && atoi(row[2]) != 0;
        dbconn_field_copy(a->created_by, sizeof(a->created_by), row[3]);
        dbconn_field_copy(a->updated_by, sizeof(a->updated_by), row[4]);
        dbconn_field_copy(a->created_at, sizeof(a->created_at), row[5]);
        dbconn_field_copy(a->updated_at, sizeof(a->updated_at), row[6]);
        a->policies = strdup(row[7] ? row[7] : "");
        if (a->description == NULL || a->policies == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    mysql_free_result(res);
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, &res, err,
                 "SELECT app, prefix, created_by, DATE_FORMAT(created_at, " TIME_FMT "), "
                 "IFNULL(DATE_FORMAT(expires_at, " TIME_FMT "), ''), "
                 "IFNULL(DATE_FORMAT(revoked_at, " TIME_FMT "), ''), IFNULL(revoked_by, ''), "
                 "IFNULL(DATE_FORMAT(last_used_at, " TIME_FMT "), ''), "
                 "IFNULL(expires_at <= NOW(6), 0) FROM app_keys ORDER BY app, id DESC");
    while (rc == PERMITD_OK && (row = mysql_fetch_row(res)) != NULL) {
        struct apps_app *a = find(v, count, row[0]);
        struct apps_key *k, *grown;
        if (a == NULL)
            continue;
        grown = realloc(a->keys, (a->nkeys + 1) * sizeof(*a->keys));
        if (grown == NULL) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            break;
        }
        a->keys = grown;
        k = &a->keys[a->nkeys++];
        memset(k, 0, sizeof(*k));
        dbconn_field_copy(k->prefix, sizeof(k->prefix), row[1]);
        dbconn_field_copy(k->created_by, sizeof(k->created_by), row[2]);
        dbconn_field_copy(k->created_at, sizeof(k->created_at), row[3]);
        dbconn_field_copy(k->expires_at, sizeof(k->expires_at), row[4]);
        dbconn_field_copy(k->revoked_at, sizeof(k->revoked_at), row[5]);
        dbconn_field_copy(k->revoked_by, sizeof(k->revoked_by), row[6]);
        dbconn_field_copy(k->last_used_at, sizeof(k->last_used_at), row[7]);
        k->expired = row[8] != NULL && atoi(row[8]) != 0;
    }
    if (res != NULL)
        mysql_free_result(res);
    if (rc != PERMITD_OK) {
        apps_list_free(v, count);
        return rc;
    }
    *out = v;
    *n = count;
    return PERMITD_OK;
}

/* Whether app qn's last change (its audit rows but its keys') is its
 * creation by actor, with this description, at most retry_s seconds ago
 * by MySQL's clock: what a retried create finds of its first try. */
static int created_just_now(struct apps_db *d, const char *qn, const char *description,
                            const char *actor, int retry_s)
{
    struct permitd_error why = {0, ""};
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int yes;

    if (retry_s <= 0 ||
        dbconn_kept_queryf(&d->conn, &res, &why, "SELECT action, actor, "
                           "IFNULL(JSON_UNQUOTE(JSON_EXTRACT(new_value, '$.description')), ''), "
                           "changed_at >= NOW(6) - INTERVAL %d SECOND FROM app_audit "
                           "WHERE app = %s AND key_prefix IS NULL "
                           "ORDER BY changed_at DESC, id DESC LIMIT 1", retry_s, qn) != PERMITD_OK)
        return 0;
    row = mysql_fetch_row(res);
    yes = row != NULL && row[0] && strcmp(row[0], "create") == 0 && row[1] &&
          strcmp(row[1], actor) == 0 && row[2] && strcmp(row[2], description) == 0 && row[3] &&
          strcmp(row[3], "1") == 0;
    mysql_free_result(res);
    return yes;
}

int apps_create(struct apps_db *d, const char *name, const char *description,
                const char *actor, int retry_s, int *applied, struct permitd_error *err)
{
    char *qn = NULL, *qd = NULL, *qa = NULL;
    int rc = begin(d, actor, err);

    *applied = 0;
    if (rc == PERMITD_OK && ((qn = quoted(d, name)) == NULL || (qd = quoted(d, description)) == NULL ||
                             (qa = quoted(d, actor)) == NULL))
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK &&
        (rc = dbconn_kept_queryf(&d->conn, NULL, err, "INSERT INTO apps (name, description, created_by, updated_by) "
                                "VALUES (%s, %s, %s, %s)", qn, qd, qa, qa)) != PERMITD_OK &&
        d->conn.db != NULL && mysql_errno(d->conn.db) == ER_DUP_ENTRY) {
        *applied = created_just_now(d, qn, description, actor, retry_s);
        rc = *applied ? PERMITD_OK
                      : permitd_error_set(err, PERMITD_EEXIST,
                                          "name: an app named \"%s\" already exists", name);
    }
    free(qn);
    free(qd);
    free(qa);
    return finish(d, rc, err);
}

int apps_update(struct apps_db *d, const char *name, const char *description, int enabled,
                const char *actor, struct permitd_error *err)
{
    char *qn = NULL, *qd = NULL, *qa = NULL, en[32] = "enabled";
    MYSQL_RES *res = NULL;
    int rc = begin(d, actor, err);

    if (rc == PERMITD_OK && ((qn = quoted(d, name)) == NULL || (qa = quoted(d, actor)) == NULL ||
                             (description != NULL && (qd = quoted(d, description)) == NULL)))
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, &res, err, "SELECT 1 FROM apps WHERE name = %s AND name <> '*' FOR UPDATE", qn);
    if (rc == PERMITD_OK && mysql_num_rows(res) == 0)
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "name: no app named \"%s\"", name);
    if (res != NULL)
        mysql_free_result(res);
    if (enabled >= 0)
        snprintf(en, sizeof(en), "%d", enabled ? 1 : 0);
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, NULL, err, "UPDATE apps SET description = %s, enabled = %s, updated_by = %s "
                               "WHERE name = %s", qd ? qd : "description", en, qa, qn);
    free(qn);
    free(qd);
    free(qa);
    return finish(d, rc, err);
}

int apps_key_insert(struct apps_db *d, const char *app, const char *prefix,
                    const char *hash_hex, int64_t expires_in_s, const char *actor,
                    struct permitd_error *err)
{
    char *qapp = NULL, *qp = NULL, *qh = NULL, *qa = NULL, expires[64] = "NULL";
    MYSQL_RES *res = NULL;
    int rc;

    if (strcmp(app, "*") == 0)
        return permitd_error_set(err, PERMITD_EPRECONDITION,
                                 "app: \"*\" stands for any app in a policy; it holds no keys");
    if ((rc = begin(d, actor, err)) == PERMITD_OK &&
        ((qapp = quoted(d, app)) == NULL || (qp = quoted(d, prefix)) == NULL ||
         (qh = quoted(d, hash_hex)) == NULL || (qa = quoted(d, actor)) == NULL))
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, &res, err, "SELECT 1 FROM apps WHERE name = %s LOCK IN SHARE MODE", qapp);
    if (rc == PERMITD_OK && mysql_num_rows(res) == 0)
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "app: no app named \"%s\" "
                               "(create it first: permitd admin add-app %s)", app, app);
    if (res != NULL)
        mysql_free_result(res);
    if (expires_in_s > 0)
        snprintf(expires, sizeof(expires), "NOW(6) + INTERVAL %" PRId64 " SECOND", expires_in_s);
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, NULL, err, "INSERT INTO app_keys (app, prefix, hash, created_by, expires_at) "
                               "VALUES (%s, %s, %s, %s, %s)", qapp, qp, qh, qa, expires);
    free(qapp);
    free(qp);
    free(qh);
    free(qa);
    return finish(d, rc, err);
}

int apps_key_revoke(struct apps_db *d, const char *prefix, const char *actor, int retry_s,
                    char *app, int *applied, struct permitd_error *err)
{
    char *qp = NULL, *qa = NULL;
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc;

    app[0] = '\0';
    *applied = 0;
    if ((rc = begin(d, actor, err)) == PERMITD_OK &&
        ((qp = quoted(d, prefix)) == NULL || (qa = quoted(d, actor)) == NULL))
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, &res, err, "SELECT app, IFNULL(DATE_FORMAT(revoked_at, " TIME_FMT "), ''), "
                               "IFNULL(revoked_by, ''), "
                               "IFNULL(revoked_at >= NOW(6) - INTERVAL %d SECOND, 0) "
                               "FROM app_keys WHERE prefix = %s FOR UPDATE",
                 retry_s, qp);
    if (rc == PERMITD_OK) {
        row = mysql_fetch_row(res);
        if (row == NULL)
            rc = permitd_error_set(err, PERMITD_ENOTFOUND, "prefix: no key \"%s\"", prefix);
        else if (retry_s > 0 && row[1] != NULL && row[1][0] != '\0' && row[2] &&
                 strcmp(row[2], actor) == 0 &&
                 row[3] && strcmp(row[3], "1") == 0) {
            *applied = 1;           /* this revoke's retry: nothing left to do */
            dbconn_field_copy(app, APPS_NAME_MAX + 1, row[0]);
        }
        else if (row[1] != NULL && row[1][0] != '\0')
            rc = permitd_error_set(err, PERMITD_EPRECONDITION,
                                   "prefix: key \"%s\" was revoked already, at %s by %s", prefix,
                                   row[1], row[2] ? row[2] : "");
        else
            dbconn_field_copy(app, APPS_NAME_MAX + 1, row[0]);
    }
    if (res != NULL)
        mysql_free_result(res);
    if (rc == PERMITD_OK && !*applied)
        rc = dbconn_kept_queryf(&d->conn, NULL, err, "UPDATE app_keys SET revoked_at = NOW(6), revoked_by = %s "
                               "WHERE prefix = %s", qa, qp);
    free(qp);
    free(qa);
    return finish(d, rc, err);
}

int apps_keys_load(struct apps_db *d, struct apps_key_row **out, size_t *n,
                   struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    struct apps_key_row *v;
    size_t count = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = connect_db(d, err)) != PERMITD_OK)
        return rc;
    rc = dbconn_kept_queryf(&d->conn, &res, err,
             "SELECT k.prefix, k.app, k.hash, IFNULL(UNIX_TIMESTAMP(k.expires_at), 0), "
             "k.revoked_at IS NOT NULL, a.enabled FROM app_keys k JOIN apps a ON a.name = k.app");
    if (rc != PERMITD_OK)
        return rc;
    v = calloc(mysql_num_rows(res) + 1, sizeof(*v));
    if (v == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct apps_key_row *k = &v[count++];
        dbconn_field_copy(k->prefix, sizeof(k->prefix), row[0]);
        dbconn_field_copy(k->app, sizeof(k->app), row[1]);
        dbconn_field_copy(k->hash, sizeof(k->hash), row[2]);
        k->expires_s = row[3] ? (int64_t)strtod(row[3], NULL) : 0;
        k->revoked = row[4] != NULL && atoi(row[4]) != 0;
        k->app_enabled = row[5] != NULL && atoi(row[5]) != 0;
    }
    mysql_free_result(res);
    *out = v;
    *n = count;
    return PERMITD_OK;
}

int apps_keys_touch(struct apps_db *d, const char *const *prefixes, size_t n,
                    struct permitd_error *err)
{
    char *list = NULL;
    size_t len = 0;
    int rc;

    if (n == 0)
        return PERMITD_OK;
    if ((rc = connect_db(d, err)) != PERMITD_OK)
        return rc;
    for (size_t i = 0; i < n; i++)
        len += strlen(prefixes[i]) * 2 + 4;
    if ((list = malloc(len + 1)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    len = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            list[len++] = ',';
        list[len++] = '\'';
        len += mysql_real_escape_string(d->conn.db, list + len, prefixes[i],
                                        (unsigned long)strlen(prefixes[i]));
        list[len++] = '\'';
    }
    list[len] = '\0';
    rc = dbconn_kept_queryf(&d->conn, NULL, err, "UPDATE app_keys SET last_used_at = NOW(6) WHERE prefix IN (%s)", list);
    free(list);
    return rc;
}
