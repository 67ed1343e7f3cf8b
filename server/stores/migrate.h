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

/* Runs `permitd migrate <verb> ...`; argv[0] is "migrate". The connection
 * comes from cfg->mysql (PERMITD_MYSQL_URL). Progress and reports go to
 * stdout, errors to stderr; the password is never printed. Returns the
 * process exit status (MIGRATE_EXIT_*). */
int migrate_main(const struct config *cfg, int argc, char **argv);

#endif
