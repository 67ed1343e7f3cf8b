/*
 * users.c - the admin UI's users in MySQL (see users.h).
 *
 * Every write is one transaction that first locks every row of
 * admin_users (SELECT ... ORDER BY id FOR UPDATE: a handful of rows, and
 * one lock order for every writer, so two writes wait for each other
 * rather than deadlock): then the last-admin rule is checked on rows
 * nobody else can change until the commit. @permitd_actor names who asks,
 * for migration 0009's audit triggers, and is cleared after each write.
 *
 * Its own connection, as apps.c has: the store's (store.c) serves
 * sessions and policies, and this keeps the two apart.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <mysql.h>
#include <mysqld_error.h>

#include "stores/dbconn.h"
#include "stores/users.h"

#define TIME_FMT "'%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'"

struct users_db {
    struct dbconn_kept conn;        /* (dbconn.h) */
};

/* What a write's lock found: the target's row and how many enabled
 * admins there are. */
struct locked {
    int found;
    char role[8];
    int enabled;
    int admins;                     /* enabled admins, the target included */
};

int users_db_new(const struct config *cfg, struct users_db **out, struct permitd_error *err)
{
    struct users_db *d = calloc(1, sizeof(*d));

    *out = NULL;
    if (d == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    dbconn_kept_init(&d->conn, cfg, NULL);
    *out = d;
    return PERMITD_OK;
}

void users_db_free(struct users_db *d)
{
    if (d == NULL)
        return;
    dbconn_kept_close(&d->conn);
    free(d);
}

int users_role_valid(const char *role)
{
    return strcmp(role, "viewer") == 0 || strcmp(role, "editor") == 0 ||
           strcmp(role, "admin") == 0;
}

/* SET @permitd_actor, START TRANSACTION, and lock every user's row; fills
 * *l for username (*qu: username quoted, free()). */
static int begin(struct users_db *d, const char *username, const char *actor, char **qu,
                 struct locked *l, struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    char *qa;
    int rc;

    memset(l, 0, sizeof(*l));
    *qu = NULL;
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    if ((qa = dbconn_kept_quote(&d->conn, actor)) == NULL ||
        (*qu = dbconn_kept_quote(&d->conn, username)) == NULL) {
        free(qa);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    rc = dbconn_kept_queryf(&d->conn, NULL, err, "SET @permitd_actor = %s", qa);
    free(qa);
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, NULL, err, "START TRANSACTION");
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, &res, err, "SELECT username, role, enabled FROM admin_users "
                               "ORDER BY id FOR UPDATE");
    while (rc == PERMITD_OK && (row = mysql_fetch_row(res)) != NULL) {
        int enabled = row[2] != NULL && atoi(row[2]) != 0;
        if (strcmp(row[1], "admin") == 0 && enabled)
            l->admins++;
        /* The column's collation compares without case, as the login does. */
        if (strcasecmp(row[0], username) == 0) {
            l->found = 1;
            dbconn_field_copy(l->role, sizeof(l->role), row[1]);
            l->enabled = enabled;
        }
    }
    if (res != NULL)
        mysql_free_result(res);
    return rc;
}

/* COMMIT on success, else ROLLBACK; the actor mark is cleared either way. */
static int finish(struct users_db *d, int rc, struct permitd_error *err)
{
    return dbconn_kept_finish(&d->conn, rc, err);
}

static int need_user(const struct locked *l, const char *username, struct permitd_error *err)
{
    if (!l->found)
        return permitd_error_set(err, PERMITD_ENOTFOUND, "username: no user named \"%s\"",
                                 username);
    return PERMITD_OK;
}

/* The last-admin rule: refuses when the change (leaves_admin: the user is
 * no admin, or not enabled, afterwards) would leave no enabled admin. */
static int keep_an_admin(const struct locked *l, const char *username, int leaves_admin,
                         const char *what, struct permitd_error *err)
{
    if (l->found && strcmp(l->role, "admin") == 0 && l->enabled && leaves_admin && l->admins <= 1)
        return permitd_error_set(err, PERMITD_EPRECONDITION,
                                 "cannot %s \"%s\": it is the last enabled admin, and then "
                                 "nobody could manage users; make another user an admin first",
                                 what, username);
    return PERMITD_OK;
}

/* Ends the sessions of the user quoted qu; *ended counts them. */
static int end_sessions(struct users_db *d, const char *qu, int *ended, struct permitd_error *err)
{
    int rc = dbconn_kept_queryf(&d->conn, NULL, err, "DELETE s FROM admin_sessions s JOIN admin_users u "
                               "ON u.id = s.user_id WHERE u.username = %s", qu);

    if (ended != NULL)
        *ended = rc == PERMITD_OK ? (int)mysql_affected_rows(d->conn.db) : 0;
    return rc;
}

int users_list(struct users_db *d, struct users_user **out, size_t *n, struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    struct users_user *v;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK)
        return rc;
    rc = dbconn_kept_queryf(&d->conn, &res, err,
             "SELECT u.username, u.role, u.enabled, "
             "(SELECT COUNT(*) FROM admin_sessions s WHERE s.user_id = u.id "
             "AND s.expires_at > NOW(6)), "
             "DATE_FORMAT(u.created_at, " TIME_FMT "), DATE_FORMAT(u.updated_at, " TIME_FMT "), "
             "IFNULL((SELECT a.actor FROM user_audit a WHERE a.username = u.username "
             "AND a.action <> 'sessions' ORDER BY a.id DESC LIMIT 1), '') "
             "FROM admin_users u ORDER BY u.username");
    if (rc != PERMITD_OK)
        return rc;
    if ((v = calloc(mysql_num_rows(res) + 1, sizeof(*v))) == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct users_user *u = &v[(*n)++];
        dbconn_field_copy(u->username, sizeof(u->username), row[0]);
        dbconn_field_copy(u->role, sizeof(u->role), row[1]);
        u->enabled = row[2] != NULL && atoi(row[2]) != 0;
        u->sessions = row[3] != NULL ? atoi(row[3]) : 0;
        dbconn_field_copy(u->created_at, sizeof(u->created_at), row[4]);
        dbconn_field_copy(u->updated_at, sizeof(u->updated_at), row[5]);
        dbconn_field_copy(u->changed_by, sizeof(u->changed_by), row[6]);
    }
    mysql_free_result(res);
    *out = v;
    return PERMITD_OK;
}

int users_count(struct users_db *d, size_t *n, struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc;

    *n = 0;
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK ||
        (rc = dbconn_kept_queryf(&d->conn, &res, err, "SELECT COUNT(*) FROM admin_users")) != PERMITD_OK)
        return rc;
    if ((row = mysql_fetch_row(res)) != NULL && row[0] != NULL)
        *n = (size_t)strtoull(row[0], NULL, 10);
    mysql_free_result(res);
    return PERMITD_OK;
}

/* Inserts a new user (the caller holds the lock). */
static int insert(struct users_db *d, const char *username, const char *qu,
                  const char *password_hash, const char *role, struct permitd_error *err)
{
    char *qh = dbconn_kept_quote(&d->conn, password_hash);
    int rc;

    if (qh == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = dbconn_kept_queryf(&d->conn, NULL, err, "INSERT INTO admin_users (username, password_hash, role) "
                           "VALUES (%s, %s, '%s')", qu, qh, role);
    free(qh);
    if (rc != PERMITD_OK && d->conn.db != NULL && mysql_errno(d->conn.db) == ER_DUP_ENTRY)
        rc = permitd_error_set(err, PERMITD_EEXIST, "username: a user named \"%s\" already exists",
                               username);
    return rc;
}

int users_add(struct users_db *d, const char *username, const char *password_hash,
              const char *role, const char *actor, struct permitd_error *err)
{
    struct locked l;
    char *qu = NULL;
    int rc;

    if (!users_role_valid(role))
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "role: \"%s\" is not viewer, editor or admin", role);
    rc = begin(d, username, actor, &qu, &l, err);
    if (rc == PERMITD_OK && l.found)
        rc = permitd_error_set(err, PERMITD_EEXIST, "username: a user named \"%s\" already exists",
                               username);
    if (rc == PERMITD_OK)
        rc = insert(d, username, qu, password_hash, role, err);
    rc = finish(d, rc, err);
    free(qu);
    return rc;
}

int users_put(struct users_db *d, const char *username, const char *password_hash,
              const char *role, const char *actor, int *created, struct permitd_error *err)
{
    struct locked l;
    char *qu = NULL, *qh = NULL;
    int rc;

    *created = 0;
    if (!users_role_valid(role))
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "role: \"%s\" is not viewer, editor or admin", role);
    rc = begin(d, username, actor, &qu, &l, err);
    if (rc == PERMITD_OK && !l.found) {
        rc = insert(d, username, qu, password_hash, role, err);
        *created = rc == PERMITD_OK;
    } else if (rc == PERMITD_OK &&
               (rc = keep_an_admin(&l, username, strcmp(role, "admin") != 0, "demote",
                                   err)) == PERMITD_OK) {
        if ((qh = dbconn_kept_quote(&d->conn, password_hash)) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        /* A user set again from the command line can log in: enabled. */
        if (rc == PERMITD_OK)
            rc = dbconn_kept_queryf(&d->conn, NULL, err, "UPDATE admin_users SET password_hash = %s, role = '%s', "
                                   "enabled = 1 WHERE username = %s", qh, role, qu);
        if (rc == PERMITD_OK)
            rc = end_sessions(d, qu, NULL, err);
    }
    rc = finish(d, rc, err);
    free(qu);
    free(qh);
    return rc;
}

int users_set_role(struct users_db *d, const char *username, const char *role,
                   const char *actor, struct permitd_error *err)
{
    struct locked l;
    char *qu = NULL;
    int rc;

    if (!users_role_valid(role))
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "role: \"%s\" is not viewer, editor or admin", role);
    if ((rc = begin(d, username, actor, &qu, &l, err)) == PERMITD_OK &&
        (rc = need_user(&l, username, err)) == PERMITD_OK &&
        (rc = keep_an_admin(&l, username, strcmp(role, "admin") != 0, "demote", err)) == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, NULL, err, "UPDATE admin_users SET role = '%s' WHERE username = %s", role, qu);
    rc = finish(d, rc, err);
    free(qu);
    return rc;
}

int users_set_password(struct users_db *d, const char *username, const char *password_hash,
                       const char *actor, struct permitd_error *err)
{
    struct locked l;
    char *qu = NULL, *qh = NULL;
    int rc;

    if ((rc = begin(d, username, actor, &qu, &l, err)) == PERMITD_OK &&
        (rc = need_user(&l, username, err)) == PERMITD_OK &&
        (qh = dbconn_kept_quote(&d->conn, password_hash)) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, NULL, err, "UPDATE admin_users SET password_hash = %s WHERE username = %s",
                 qh, qu);
    /* A new password ends the sessions made with the old one. */
    if (rc == PERMITD_OK)
        rc = end_sessions(d, qu, NULL, err);
    rc = finish(d, rc, err);
    free(qu);
    free(qh);
    return rc;
}

int users_set_enabled(struct users_db *d, const char *username, int enabled, const char *actor,
                      struct permitd_error *err)
{
    struct locked l;
    char *qu = NULL;
    int rc;

    if ((rc = begin(d, username, actor, &qu, &l, err)) == PERMITD_OK &&
        (rc = need_user(&l, username, err)) == PERMITD_OK &&
        (rc = keep_an_admin(&l, username, !enabled, "disable", err)) == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, NULL, err, "UPDATE admin_users SET enabled = %d WHERE username = %s",
                 enabled ? 1 : 0, qu);
    if (rc == PERMITD_OK && !enabled)
        rc = end_sessions(d, qu, NULL, err);
    rc = finish(d, rc, err);
    free(qu);
    return rc;
}

int users_end_sessions(struct users_db *d, const char *username, const char *actor, int *ended,
                       struct permitd_error *err)
{
    struct locked l;
    char *qu = NULL, *qa = NULL;
    int rc, n = 0;

    if ((rc = begin(d, username, actor, &qu, &l, err)) == PERMITD_OK &&
        (rc = need_user(&l, username, err)) == PERMITD_OK &&
        (rc = end_sessions(d, qu, &n, err)) == PERMITD_OK) {
        if ((qa = dbconn_kept_quote(&d->conn, actor)) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        else
            rc = dbconn_kept_queryf(&d->conn, NULL, err, "INSERT INTO user_audit (username, action, actor, new_value) "
                                   "SELECT username, 'sessions', %s, JSON_OBJECT('ended', %d) "
                                   "FROM admin_users WHERE username = %s", qa, n, qu);
    }
    rc = finish(d, rc, err);
    if (ended != NULL)
        *ended = rc == PERMITD_OK ? n : 0;
    free(qu);
    free(qa);
    return rc;
}

int users_delete(struct users_db *d, const char *username, const char *actor,
                 struct permitd_error *err)
{
    struct locked l;
    char *qu = NULL;
    int rc;

    if ((rc = begin(d, username, actor, &qu, &l, err)) == PERMITD_OK &&
        (rc = need_user(&l, username, err)) == PERMITD_OK &&
        (rc = keep_an_admin(&l, username, 1, "delete", err)) == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, NULL, err, "DELETE FROM admin_users WHERE username = %s", qu);
    rc = finish(d, rc, err);
    free(qu);
    return rc;
}
