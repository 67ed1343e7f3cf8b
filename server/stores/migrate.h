/*
 * migrate.h - `permitd migrate`: the schema migration runner DBAs use.
 *
 * Migrations are plain SQL files, migrations/NNNN_title.up.sql and
 * NNNN_title.down.sql (the golang-migrate convention; the stock mysql
 * client runs them too). They are compiled into the binary, or read from
 * --dir. The runner keeps a history table (permitd_schema_history) in the
 * target database, holds a GET_LOCK for the whole run so concurrent runs
 * cannot apply anything twice, runs each file statement by statement and
 * records a failure as a "dirty" version that blocks later runs until a DBA
 * has repaired it and run `force`. libmariadb stays inside the migrate_*.c
 * files and dbconn.c.
 */
#ifndef PERMITD_MIGRATE_H
#define PERMITD_MIGRATE_H

#include <stddef.h>

#include "core/config.h"
#include "core/status.h"

/* Exit statuses of `permitd migrate`. */
enum {
    MIGRATE_EXIT_OK = 0,
    MIGRATE_EXIT_FAILURE = 1,   /* a check, a connection or a migration failed */
    MIGRATE_EXIT_USAGE = 2,     /* bad arguments or missing settings */
};

/* One run of a verb that works on the database, its arguments checked
 * (cli/cli_migrate.c reads them from `permitd migrate`'s command line). */
struct migrate_job {
    const struct config_mysql *db;  /* the database; must outlive the run */
    int timeout_ms;                 /* connect and read timeout */
    int lock_timeout_s;             /* how long to wait for another run's lock */
    const char *dir;                /* the migrations' folder; NULL: the embedded ones */
    const char *verb;               /* "up", "down", "status", "validate" or "force" */
    long count;                     /* up, down: how many; -1: all */
    unsigned long long force_to;    /* force: the version */
};

/* Runs job: loads the migrations, connects, holds the run's lock, runs
 * the verb. Progress and reports go to stdout, errors to stderr; the
 * password is never printed. Returns the process exit status
 * (MIGRATE_EXIT_*). */
int migrate_do(const struct migrate_job *job);

/* `new TITLE...`: creates the next NNNN_title.up.sql / .down.sql pair in
 * dir, the title made of the words of argv (argc of them) reduced to
 * [a-z0-9_]. Returns the process exit status (MIGRATE_EXIT_*). */
int migrate_create(const char *dir, int argc, char **argv);

#endif
