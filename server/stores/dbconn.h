/*
 * dbconn.h - opening a MySQL (or MariaDB) connection the one way permitd
 * does: the policy store (store.c) and `permitd migrate` (migrate_*.c) both
 * get theirs here, so the URL means the same thing, the session speaks
 * utf8mb4 in UTC, and a failure reads the same, wherever a connection is
 * made.
 *
 * A connection kept between statements (the policy store's, store.c, and
 * each other store's: apps.c, users.c, audit.c, gateway_rules.c,
 * envoymap.c) is a struct dbconn_kept: made on first use, checked
 * and made again after MySQL was lost, its failures classified and worded
 * alike.
 *
 * The libmariadb handle is forward-declared (libmariadb's MYSQL is struct
 * st_mysql): callers that run statements include mysql.h themselves, and
 * only the stores above, dbconn.c and the migrate_*.c files do.
 */
#ifndef PERMITD_DBCONN_H
#define PERMITD_DBCONN_H

#include <stddef.h>

#include "core/config.h"
#include "core/status.h"

struct st_mysql;
struct st_mysql_res;

/* What differs between the connections permitd opens. */
struct dbconn_options {
    int timeout_ms;                 /* connect and write timeout, in whole seconds
                                     * rounded up (at least 1 s) */
    unsigned int read_timeout_s;    /* 0: none (a migration's ALTER may run for
                                     * hours, and giving up on the client side
                                     * would not stop it on the server) */
    unsigned long client_flags;     /* CLIENT_* flags, e.g. CLIENT_MULTI_RESULTS */
    const char *const *session;     /* NULL, or a NULL-terminated list of statements
                                     * run once connected, after the time zone is
                                     * set (e.g. "SET SESSION wait_timeout = ...") */
};

/* Connects to db and configures the session:
 *   - TCP to host:port, or the unix socket when the URL has ?socket=
 *     (never libmariadb's guess that "localhost" means its default socket);
 *   - TLS as db's ssl-mode says (README "MySQL over TLS"): a connection
 *     that mode requires TLS of is never returned without it, and the
 *     files the URL names are checked readable first;
 *   - libmariadb's automatic reconnect off (it silently loses session
 *     state: the caller reconnects on its own terms);
 *   - LOAD DATA LOCAL INFILE refused (no statement of permitd needs it);
 *   - character set utf8mb4, time_zone '+00:00' (DATETIME values are UTC),
 *     then o->session in order.
 * On success *out is the new connection (free with mysql_close()). On
 * failure *out is NULL and err says what failed, naming the masked URL and
 * the server's or client's message as the mysql client prints it ("ERROR
 * 2002 (HY000): ..."), after what it means where MySQL words it cryptically
 * (a server requiring TLS, a certificate for another name or from another
 * CA, a user requiring a client certificate), never the password:
 * PERMITD_EUNAVAILABLE when the server could not be reached (or not over
 * TLS as asked), refused the login or was lost while the session was set
 * up; PERMITD_EINTERNAL when it refused a session statement, or memory ran
 * out. */
int dbconn_open(const struct config_mysql *db, const struct dbconn_options *o,
                struct st_mysql **out, struct permitd_error *err);

/* The last error on conn the way the stock mysql client prints it:
 * "ERROR 1064 (42000): You have an error ...". */
void dbconn_error(struct st_mysql *conn, char *buf, size_t len);

/* A connection kept between statements, and what it is reopened with. */
struct dbconn_kept {
    const struct config *cfg;
    const char *const *session;     /* as dbconn_options.session */
    struct st_mysql *db;            /* NULL while disconnected */
    char where[300];                /* the masked URL, for messages */
};

/* Sets k up, disconnected, for cfg's --mysql-url; session: see
 * dbconn_options. cfg and session must outlive k. */
void dbconn_kept_init(struct dbconn_kept *k, const struct config *cfg,
                      const char *const *session);

/* Closes k's connection, if any (k may be used again: it reconnects). */
void dbconn_kept_close(struct dbconn_kept *k);

/* Makes sure k is connected: a connection kept from before may have been
 * closed by the server meanwhile (wait_timeout, a restart, a failover), so
 * it is pinged and made again rather than failing the next statement.
 * Errors as dbconn_open(). */
int dbconn_kept_ensure(struct dbconn_kept *k, struct permitd_error *err);

/* For a read that must see every commit so far (a session's check after
 * its user was disabled): when k is inside a transaction nobody ended, its
 * reads would see the snapshot that transaction began with. Such a
 * transaction is logged (level=warn, naming the connection) and rolled
 * back: a writer that leaves one open is a bug this makes visible. */
void dbconn_kept_no_transaction(struct dbconn_kept *k);

/* The error of statement sql that just failed on k: a client error
 * (2000-2999: unreachable, gone, lost, timed out) is PERMITD_EUNAVAILABLE
 * and closes the connection (the next dbconn_kept_ensure() makes it
 * again); anything else, the server refusing, PERMITD_EINTERNAL. The
 * statement is named by its first word only: its text may hold what must
 * reach no client or log (a session's hash, a key's). */
int dbconn_kept_failed(struct dbconn_kept *k, const char *sql, struct permitd_error *err);

/* Runs sql on k (connected); *res (when res is not NULL) is its buffered
 * result (mysql_free_result()). Errors as dbconn_kept_failed(). */
int dbconn_kept_query(struct dbconn_kept *k, const char *sql, struct st_mysql_res **res,
                      struct permitd_error *err);

/* dbconn_kept_query() of a statement made by printf from fmt (values in
 * it quoted by the caller: dbconn_kept_quote()). */
__attribute__((format(printf, 4, 5)))
int dbconn_kept_queryf(struct dbconn_kept *k, struct st_mysql_res **res,
                       struct permitd_error *err, const char *fmt, ...);

/* An audited write on k: connects when it must, sets @permitd_actor (which
 * the audit triggers name; permitd's own writes write their own audit
 * rows) and starts a transaction. End it with dbconn_kept_finish(). */
int dbconn_kept_begin(struct dbconn_kept *k, const char *actor, struct permitd_error *err);

/* Ends the transaction begun on k: COMMIT when rc is PERMITD_OK (its
 * failure is returned), else ROLLBACK; clears @permitd_actor either way.
 * Returns rc, or COMMIT's error. */
int dbconn_kept_finish(struct dbconn_kept *k, int rc, struct permitd_error *err);

/* str escaped and quoted for SQL on k's connection ('like this'): a new
 * string (free()), or NULL when memory ran out. */
char *dbconn_kept_quote(struct dbconn_kept *k, const char *str);

/* Copies a field of a fetched row (MYSQL_ROW: NULL for SQL NULL) into dst
 * (size bytes, cut short to fit, always terminated): "" for NULL. */
void dbconn_field_copy(char *dst, size_t size, const char *field);

/* Frees libmariadb's process-wide state; for a process that is done with
 * MySQL (`permitd migrate` before it exits), with no connection open. */
void dbconn_end(void);

#endif
