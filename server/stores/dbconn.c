/*
 * dbconn.c - opens and configures a MySQL connection for the store and the
 * migrations (dbconn.h says what every connection gets, and why).
 *
 * Everything a connection is set up with is here, so the two users cannot
 * drift apart: they once did, and a URL with host "localhost" and a port
 * reached the server over TCP from `permitd migrate` but libmariadb's
 * default unix socket from the daemon. The options are all set before the
 * connect; the session statements run after it, so a failure among them is
 * told apart from a failure to reach the server. TLS too is set here, from
 * the URL's ssl-mode (tls_options()), and a refused connect is explained in
 * words where the server's own are cryptic (explain()).
 */
#define _GNU_SOURCE                 /* vasprintf */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mysql.h>

#include "core/log.h"
#include "stores/dbconn.h"

void dbconn_error(MYSQL *conn, char *buf, size_t len)
{
    snprintf(buf, len, "ERROR %u (%s): %s", mysql_errno(conn), mysql_sqlstate(conn),
             mysql_error(conn));
}

/* Sets conn's TLS options for db's ssl-mode (README "MySQL over TLS").
 * libmariadb 3.3 has no modes, only switches: MYSQL_OPT_SSL_ENFORCE asks
 * for TLS but goes on in plaintext when the server offers none (PREFERRED;
 * REQUIRED and VERIFY_CA are checked after the connect: tls_check());
 * ssl-ca makes the handshake verify the chain (VERIFY_CA);
 * MYSQL_OPT_SSL_VERIFY_SERVER_CERT verifies the chain (against the system's
 * store without ssl-ca) and the URL's host against the certificate's names,
 * and refuses a server without TLS before the login (VERIFY_IDENTITY).
 * Both switches are set either way: a libmariadb whose default differs
 * (3.4 verifies by default) behaves the same. */
static void tls_options(MYSQL *conn, const struct config_mysql *db, int mode)
{
    my_bool use = mode != CONFIG_MYSQL_SSL_DISABLED;
    my_bool verify = mode == CONFIG_MYSQL_SSL_VERIFY_IDENTITY;

    mysql_options(conn, MYSQL_OPT_SSL_ENFORCE, &use);
    mysql_options(conn, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
    if (mode == CONFIG_MYSQL_SSL_DISABLED)
        return;
    if (db->ssl_ca[0] != '\0')
        mysql_options(conn, MYSQL_OPT_SSL_CA, db->ssl_ca);
    if (db->ssl_cert[0] != '\0') {
        mysql_options(conn, MYSQL_OPT_SSL_CERT, db->ssl_cert);
        mysql_options(conn, MYSQL_OPT_SSL_KEY, db->ssl_key);
    }
}

/* A new handle for db with o's options and TLS as mode, not connected
 * (NULL when memory ran out). */
static MYSQL *handle(const struct config_mysql *db, const struct dbconn_options *o, int mode)
{
    MYSQL *conn = mysql_init(NULL);
    my_bool reconnect = 0;
    unsigned int timeout_s = o->timeout_ms > 0 ? (unsigned int)((o->timeout_ms + 999) / 1000) : 1;
    unsigned int read_timeout_s = o->read_timeout_s;
    unsigned int protocol = db->socket[0] ? MYSQL_PROTOCOL_SOCKET : MYSQL_PROTOCOL_TCP;
    unsigned int local_infile = 0;

    if (conn == NULL)
        return NULL;
    mysql_options(conn, MYSQL_OPT_RECONNECT, &reconnect);
    mysql_options(conn, MYSQL_OPT_CONNECT_TIMEOUT, &timeout_s);
    mysql_options(conn, MYSQL_OPT_WRITE_TIMEOUT, &timeout_s);
    if (read_timeout_s > 0)
        mysql_options(conn, MYSQL_OPT_READ_TIMEOUT, &read_timeout_s);
    mysql_options(conn, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_options(conn, MYSQL_OPT_PROTOCOL, &protocol);
    mysql_options(conn, MYSQL_OPT_LOCAL_INFILE, &local_infile);
    tls_options(conn, db, mode);
    return conn;
}

static int connect_to(MYSQL *conn, const struct config_mysql *db, unsigned long flags)
{
    return mysql_real_connect(conn, db->socket[0] ? "localhost" : db->host, db->user,
                              db->password, db->database, (unsigned int)db->port,
                              db->socket[0] ? db->socket : NULL, flags) != NULL;
}

/* "127.0.0.1:3306" or "the socket /run/mysqld/mysqld.sock", for messages. */
static void server_name(const struct config_mysql *db, char *buf, size_t len)
{
    if (db->socket[0] != '\0')
        snprintf(buf, len, "the socket %s", db->socket);
    else
        snprintf(buf, len, strchr(db->host, ':') ? "[%s]:%d" : "%s:%d", db->host, db->port);
}

/* A file the URL names (ssl-ca, ssl-cert, ssl-key) that cannot be read:
 * libmariadb says "No such file or directory" without saying which. */
static int unreadable(const char *what, const char *path, char *buf, size_t len)
{
    if (path[0] == '\0' || access(path, R_OK) == 0)
        return 0;
    snprintf(buf, len, "%s %s: %s", what, path, strerror(errno));
    return 1;
}

/* Whether db's login works over TLS (unverified) where it was just refused
 * over plaintext (ssl-mode=DISABLED, ERROR 1045): MariaDB refuses every
 * plaintext login under require_secure_transport=ON (and a user created
 * REQUIRE SSL) with the words of a wrong password, so the only way to tell
 * the two apart is to try. The same credentials went to the same server in
 * plaintext a moment ago: TLS shows them to no one new. The connection is
 * closed at once. */
static int tls_login_works(const struct config_mysql *db, const struct dbconn_options *o)
{
    MYSQL *conn = handle(db, o, CONFIG_MYSQL_SSL_REQUIRED);
    int ok = conn != NULL && connect_to(conn, db, o->client_flags) &&
             mysql_get_ssl_cipher(conn) != NULL;

    mysql_close(conn);
    return ok;
}

/* What a failed connect means, in words, when the server's message hides
 * it (hint: "" when it does not). conn is the failed handle. */
static void explain(MYSQL *conn, const struct config_mysql *db, const struct dbconn_options *o,
                    int mode, char *hint, size_t len)
{
    unsigned int no = mysql_errno(conn);
    const char *text = mysql_error(conn), *ca = db->ssl_ca[0] ? db->ssl_ca : NULL;
    unsigned long caps = 0;
    char at[300];

    hint[0] = '\0';
    server_name(db, at, sizeof(at));
    mariadb_get_infov(conn, MARIADB_CONNECTION_SERVER_CAPABILITIES, &caps);
    if (no == 3159 || (no == 1045 && mode == CONFIG_MYSQL_SSL_DISABLED &&
                       (caps & CLIENT_SSL) && tls_login_works(db, o))) {
        /* 3159 is MySQL's ER_SECURE_TRANSPORT_REQUIRED; MariaDB says 1045 */
        snprintf(hint, len, "MySQL at %s requires TLS (require_secure_transport, or a user "
                 "created REQUIRE SSL) and this login was plaintext (ssl-mode=%s); set "
                 "ssl-mode=VERIFY_IDENTITY (or REQUIRED) in the URL: ", at,
                 config_mysql_ssl_mode_name(mode));
    } else if (no == 1045 && mode != CONFIG_MYSQL_SSL_DISABLED && (caps & CLIENT_SSL) &&
               db->ssl_cert[0] == '\0') {
        snprintf(hint, len, "login refused over TLS without a client certificate (a user "
                 "created REQUIRE X509 or REQUIRE SUBJECT needs ssl-cert and ssl-key; "
                 "else the user or password is wrong): ");
    } else if (no == 2026 && strstr(text, "Validation of SSL server certificate failed")) {
        /* libmariadb 3.3's words for a name check that failed */
        snprintf(hint, len, "TLS: the certificate of MySQL at %s does not name %s "
                 "(ssl-mode=VERIFY_IDENTITY checks the URL's host against it): ", at,
                 db->socket[0] ? "localhost" : db->host);
    } else if (no == 2026 && strstr(text, "server does not support it")) {
        snprintf(hint, len, "TLS: MySQL at %s offers no TLS, and ssl-mode=%s requires it: ",
                 at, config_mysql_ssl_mode_name(mode));
    } else if (no == 2026 && (strstr(text, "certificate") || strstr(text, "verify"))) {
        snprintf(hint, len, "TLS: the certificate of MySQL at %s was not verified against %s%s: ",
                 at, ca ? "ssl-ca " : "the system's trust store", ca ? ca : "");
    } else if (no == 2026) {
        snprintf(hint, len, "TLS with MySQL at %s failed: ", at);
    }
}

int dbconn_open(const struct config_mysql *db, const struct dbconn_options *o, MYSQL **out,
                struct permitd_error *err)
{
    MYSQL *conn;
    int mode = (int)db->ssl_mode;
    char where[1400], msg[600], hint[1600];
    int code;

    *out = NULL;
    config_mysql_url_masked(db, where, sizeof(where));
    if (unreadable("ssl-ca", db->ssl_ca, msg, sizeof(msg)) ||
        unreadable("ssl-cert", db->ssl_cert, msg, sizeof(msg)) ||
        unreadable("ssl-key", db->ssl_key, msg, sizeof(msg)))
        return permitd_error_set(err, PERMITD_EUNAVAILABLE, "cannot connect to %s: %s", where,
                                 msg);
    conn = handle(db, o, mode);
    if (conn == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (!connect_to(conn, db, o->client_flags)) {
        dbconn_error(conn, msg, sizeof(msg));
        explain(conn, db, o, mode, hint, sizeof(hint));
        mysql_close(conn);
        return permitd_error_set(err, PERMITD_EUNAVAILABLE, "cannot connect to %s: %s%s",
                                 where, hint, msg);
    }
    if (mysql_get_ssl_cipher(conn) == NULL &&
        (mode == CONFIG_MYSQL_SSL_REQUIRED || mode == CONFIG_MYSQL_SSL_VERIFY_CA)) {
        /* libmariadb went on in plaintext (see tls_options()): nothing is
         * sent on this connection, and the login already was */
        server_name(db, hint, sizeof(hint));
        mysql_close(conn);
        return permitd_error_set(err, PERMITD_EUNAVAILABLE, "cannot connect to %s: TLS: MySQL "
                                 "at %s offers no TLS, and ssl-mode=%s requires it", where, hint,
                                 config_mysql_ssl_mode_name(mode));
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

void dbconn_kept_no_transaction(struct dbconn_kept *k)
{
    if (k->db == NULL || !(k->db->server_status & SERVER_STATUS_IN_TRANS))
        return;
    log_msg(LOG_LEVEL_WARN, "mysql: a transaction left open on a kept connection: rolled back",
            "mysql=%s", k->where);
    mysql_real_query(k->db, "ROLLBACK", 8);
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
