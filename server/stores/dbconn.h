/*
 * dbconn.h - opening a MySQL (or MariaDB) connection the one way permitd
 * does: the policy store (store.c) and `permitd migrate` (migrate_*.c) both
 * get theirs here, so the URL means the same thing, the session speaks
 * utf8mb4 in UTC, and a failure reads the same, wherever a connection is
 * made.
 *
 * The libmariadb handle is forward-declared (libmariadb's MYSQL is struct
 * st_mysql): callers that run statements include mysql.h themselves, and
 * only store.c, dbconn.c and the migrate_*.c files do.
 */
#ifndef PERMITD_DBCONN_H
#define PERMITD_DBCONN_H

#include <stddef.h>

#include "core/config.h"
#include "core/status.h"

struct st_mysql;

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
 *   - libmariadb's automatic reconnect off (it silently loses session
 *     state: the caller reconnects on its own terms);
 *   - LOAD DATA LOCAL INFILE refused (no statement of permitd needs it);
 *   - character set utf8mb4, time_zone '+00:00' (DATETIME values are UTC),
 *     then o->session in order.
 * On success *out is the new connection (free with mysql_close()). On
 * failure *out is NULL and err says what failed, naming the masked URL and
 * the server's or client's message as the mysql client prints it ("ERROR
 * 2002 (HY000): ..."), never the password: PERMITD_EUNAVAILABLE when the
 * server could not be reached, refused the login or was lost while the
 * session was set up; PERMITD_EINTERNAL when it refused a session
 * statement, or memory ran out. */
int dbconn_open(const struct config_mysql *db, const struct dbconn_options *o,
                struct st_mysql **out, struct permitd_error *err);

/* The last error on conn the way the stock mysql client prints it:
 * "ERROR 1064 (42000): You have an error ...". */
void dbconn_error(struct st_mysql *conn, char *buf, size_t len);

/* Frees libmariadb's process-wide state; for a process that is done with
 * MySQL (`permitd migrate` before it exits), with no connection open. */
void dbconn_end(void);

#endif
