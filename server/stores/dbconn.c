/*
 * dbconn.c - opens and configures a MySQL connection for the store and the
 * migrations (dbconn.h says what every connection gets, and why).
 *
 * Everything a connection is set up with is here, so the two users cannot
 * drift apart: they once did, and a URL with host "localhost" and a port
 * reached the server over TCP from `permitd migrate` but libmariadb's
 * default unix socket from the daemon. The options are all set before the
 * connect; the session statements run after it, so a failure among them is
 * told apart from a failure to reach the server.
 */
#define _GNU_SOURCE                 /* vasprintf */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "stores/dbconn.h"

void dbconn_error(MYSQL *conn, char *buf, size_t len)
{
    snprintf(buf, len, "ERROR %u (%s): %s", mysql_errno(conn), mysql_sqlstate(conn),
             mysql_error(conn));
}

int dbconn_open(const struct config_mysql *db, const struct dbconn_options *o, MYSQL **out,
                struct permitd_error *err)
{
    MYSQL *conn;
    my_bool reconnect = 0;
    unsigned int timeout_s = o->timeout_ms > 0 ? (unsigned int)((o->timeout_ms + 999) / 1000) : 1;
    unsigned int read_timeout_s = o->read_timeout_s;
    unsigned int protocol = db->socket[0] ? MYSQL_PROTOCOL_SOCKET : MYSQL_PROTOCOL_TCP;
    unsigned int local_infile = 0;
    char where[1400], msg[600];
    int code;

    *out = NULL;
    conn = mysql_init(NULL);
    if (conn == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    config_mysql_url_masked(db, where, sizeof(where));
    mysql_options(conn, MYSQL_OPT_RECONNECT, &reconnect);
    mysql_options(conn, MYSQL_OPT_CONNECT_TIMEOUT, &timeout_s);
    mysql_options(conn, MYSQL_OPT_WRITE_TIMEOUT, &timeout_s);
    if (read_timeout_s > 0)
        mysql_options(conn, MYSQL_OPT_READ_TIMEOUT, &read_timeout_s);
    mysql_options(conn, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_options(conn, MYSQL_OPT_PROTOCOL, &protocol);
    mysql_options(conn, MYSQL_OPT_LOCAL_INFILE, &local_infile);
    if (mysql_real_connect(conn, db->socket[0] ? "localhost" : db->host, db->user, db->password,
                           db->database, (unsigned int)db->port,
                           db->socket[0] ? db->socket : NULL, o->client_flags) == NULL) {
        dbconn_error(conn, msg, sizeof(msg));
        mysql_close(conn);
        return permitd_error_set(err, PERMITD_EUNAVAILABLE, "cannot connect to %s: %s",
                                 where, msg);
    }
    if (mysql_query(conn, "SET time_zone = '+00:00'") != 0)
        goto session_failed;
    for (const char *const *s = o->session; s != NULL && *s != NULL; s++)
        if (mysql_query(conn, *s) != 0)
            goto session_failed;
    *out = conn;
    return PERMITD_OK;

session_failed:
    /* A client error (2000-2999: gone, lost, timed out) is the server out of
     * reach; anything else is the server refusing a setting. */
    code = mysql_errno(conn) >= 2000 && mysql_errno(conn) < 3000 ? PERMITD_EUNAVAILABLE
                                                                  : PERMITD_EINTERNAL;
    dbconn_error(conn, msg, sizeof(msg));
    mysql_close(conn);
    return permitd_error_set(err, code, "setting up the session on %s: %s", where, msg);
}

void dbconn_end(void)
{
    mysql_library_end();
}

void dbconn_kept_init(struct dbconn_kept *k, const struct config *cfg,
                      const char *const *session)
{
    memset(k, 0, sizeof(*k));
    k->cfg = cfg;
    k->session = session;
    config_mysql_url_masked(&cfg->mysql, k->where, sizeof(k->where));
}

void dbconn_kept_close(struct dbconn_kept *k)
{
    if (k->db != NULL) {
        mysql_close(k->db);
        k->db = NULL;
    }
}

int dbconn_kept_ensure(struct dbconn_kept *k, struct permitd_error *err)
{
    struct dbconn_options o = {
        .timeout_ms = k->cfg->mysql_timeout_ms,
        .read_timeout_s = (unsigned int)((k->cfg->mysql_timeout_ms + 999) / 1000),
        .session = k->session,
    };

    if (k->db != NULL && mysql_ping(k->db) == 0)
        return PERMITD_OK;
    dbconn_kept_close(k);
    return dbconn_open(&k->cfg->mysql, &o, &k->db, err);
}

int dbconn_kept_failed(struct dbconn_kept *k, const char *sql, struct permitd_error *err)
{
    unsigned int no = mysql_errno(k->db);
    int verb = (int)strcspn(sql, " \n"), lost = no >= 2000 && no < 3000, rc;

    if (verb > 16)
        verb = 16;
    rc = permitd_error_set(err, lost ? PERMITD_EUNAVAILABLE : PERMITD_EINTERNAL,
                           "mysql at %s: %.*s: %s (%u)", k->where, verb, sql, mysql_error(k->db),
                           no);
    if (lost)
        dbconn_kept_close(k);
    return rc;
}

int dbconn_kept_query(struct dbconn_kept *k, const char *sql, MYSQL_RES **res,
                      struct permitd_error *err)
{
    if (res != NULL)
        *res = NULL;
    if (k->db == NULL)
        return permitd_error_set(err, PERMITD_EUNAVAILABLE, "mysql at %s: not connected",
                                 k->where);
    if (mysql_real_query(k->db, sql, strlen(sql)) != 0)
        return dbconn_kept_failed(k, sql, err);
    if (res != NULL && (*res = mysql_store_result(k->db)) == NULL)
        return dbconn_kept_failed(k, sql, err);
    return PERMITD_OK;
}

int dbconn_kept_queryf(struct dbconn_kept *k, MYSQL_RES **res, struct permitd_error *err,
                       const char *fmt, ...)
{
    va_list ap;
    char *q = NULL;
    int rc;

    if (res != NULL)
        *res = NULL;
    va_start(ap, fmt);
    if (vasprintf(&q, fmt, ap) < 0)
        q = NULL;
    va_end(ap);
    if (q == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = dbconn_kept_query(k, q, res, err);
    free(q);
    return rc;
}

int dbconn_kept_begin(struct dbconn_kept *k, const char *actor, struct permitd_error *err)
{
    char *q;
    int rc;

    if ((rc = dbconn_kept_ensure(k, err)) != PERMITD_OK)
        return rc;
    if ((q = dbconn_kept_quote(k, actor)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = dbconn_kept_queryf(k, NULL, err, "SET @permitd_actor = %s", q);
    free(q);
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(k, NULL, err, "START TRANSACTION");
    return rc;
}

int dbconn_kept_finish(struct dbconn_kept *k, int rc, struct permitd_error *err)
{
    if (k->db == NULL)
        return rc;
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(k, NULL, err, "COMMIT");
    else
        mysql_real_query(k->db, "ROLLBACK", 8);
    if (k->db != NULL)
        mysql_real_query(k->db, "SET @permitd_actor = NULL", 25);
    return rc;
}

void dbconn_field_copy(char *dst, size_t size, const char *field)
{
    snprintf(dst, size, "%s", field != NULL ? field : "");
}

char *dbconn_kept_quote(struct dbconn_kept *k, const char *str)
{
    size_t n = strlen(str);
    char *out = malloc(n * 2 + 3);

    if (out == NULL)
        return NULL;
    out[0] = '\'';
    n = mysql_real_escape_string(k->db, out + 1, str, (unsigned long)n);
    out[n + 1] = '\'';
    out[n + 2] = '\0';
    return out;
}
