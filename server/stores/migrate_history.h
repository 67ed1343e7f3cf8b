/*
 * migrate_history.h - the database side of a `permitd migrate` run: its
 * control connection, the run's lock, and the history table
 * (permitd_schema_history) that records what is applied, dirty or failed.
 * Every statement that reads or writes the history is in migrate_history.c.
 */
#ifndef PERMITD_MIGRATE_HISTORY_H
#define PERMITD_MIGRATE_HISTORY_H

#include <stddef.h>

#include "core/config.h"
#include "stores/migrate_files.h"
#include "core/status.h"

#define MIGRATE_HISTORY_TABLE "permitd_schema_history"
#define MIGRATE_HISTORY_LOCK_PREFIX "permitd_migrate"

struct st_mysql;   /* libmariadb's MYSQL */

/* One row of the history, as text (NULL = SQL NULL). */
struct migrate_history_row {
    unsigned long long version;
    char *title, *checksum, *state, *direction, *applied_at, *applied_by;
    char *execution_ms, *statements, *failed_statement, *failed_line, *error;
};

/* A run's database. Fill with migrate_history_init(); the rows are those of
 * the last migrate_history_load(), in version order. */
struct migrate_history {
    const struct config_mysql *db;    /* borrowed */
    int timeout_ms;                   /* connect, write and short-read timeout */
    int lock_timeout_s;               /* how long to wait for another run */
    char url[1400];                   /* masked, for messages */
    char lock_name[65];               /* GET_LOCK name, per database */
    char os_user[128];                /* for applied_by */
    struct st_mysql *ctl;             /* control connection: lock + history */
    int locked;
    int have_table;                   /* the table existed at the last load */
    struct migrate_history_row *rows;
    size_t n;
};

/* Every function below that can fail prints why on stderr (prefixed
 * "permitd migrate: ") and returns PERMITD_EINTERNAL; PERMITD_OK otherwise. */

/* Fills h for db (borrowed: it must outlive h) without connecting: the
 * masked URL, the lock's name and the OS user. */
void migrate_history_init(struct migrate_history *h, const struct config_mysql *db,
                          int timeout_ms, int lock_timeout_s);

/* Opens the control connection. Its read timeout covers the wait for the
 * lock; the server must not close it for being idle while a long migration
 * runs on another connection, since it holds the lock and writes the result. */
int migrate_history_connect(struct migrate_history *h);

/* Opens a new connection to h's database with the run's session settings
 * (UTC, utf8mb4_unicode_ci, a long wait_timeout) for running a file:
 * read_timeout_s 0 means none. Returns it (mysql_close()), or NULL after
 * printing why. */
struct st_mysql *migrate_history_connect_work(const struct migrate_history *h,
                                              unsigned int read_timeout_s,
                                              unsigned long client_flags);

/* Releases the lock, closes the control connection and frees the rows;
 * h can then be initialised again. */
void migrate_history_close(struct migrate_history *h);

/* Takes the run's lock, waiting up to h->lock_timeout_s for another run,
 * and says so on stdout while it waits. */
int migrate_history_lock(struct migrate_history *h);

/* The id of the connection that holds the run's lock, as a new string
 * (free()), or NULL in *holder when nobody holds it. */
int migrate_history_lock_holder(struct migrate_history *h, char **holder);

/* Creates the history table when it is missing. */
int migrate_history_create(struct migrate_history *h);

/* Reads the history into h->rows. A missing table is an empty history
 * (h->have_table = 0). */
int migrate_history_load(struct migrate_history *h);

/* The row of version v, or NULL. */
struct migrate_history_row *migrate_history_find(const struct migrate_history *h,
                                                 unsigned long long v);

/* The highest version in the history (0 when none). */
unsigned long long migrate_history_top(const struct migrate_history *h);

/* Tells the DBA on stderr how to get out of a dirty version v. */
void migrate_history_print_hint(const struct migrate_history *h, unsigned long long v);

/* The steps of applying (up) or reverting (!up) m: started marks its row
 * dirty before the first of its nstatements runs; finished marks it
 * applied (up) or deletes it (down), with the time taken; failed records
 * which statement failed (1-based; 0 = none ran, line then unused) and the
 * server's message, leaving the row dirty. */
int migrate_history_started(struct migrate_history *h, const struct migrate_file *m, int up,
                            size_t nstatements);
int migrate_history_finished(struct migrate_history *h, const struct migrate_file *m, int up,
                             long long ms);
int migrate_history_failed(struct migrate_history *h, const struct migrate_file *m,
                           long long ms, size_t failed, int line, const char *msg);

/* What `force` writes, without running any SQL of the files: forget
 * removes the row of version v; mark_applied records m as applied with
 * its current checksum, updating its row (exists) or inserting one. */
int migrate_history_forget(struct migrate_history *h, unsigned long long v);
int migrate_history_mark_applied(struct migrate_history *h, const struct migrate_file *m,
                                 int exists);

#endif
