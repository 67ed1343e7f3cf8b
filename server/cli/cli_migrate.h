/*
 * cli_migrate.h - `permitd migrate`: the schema migration runner DBAs use
 * (stores/migrate.h says what a run does and how it stays safe).
 */
#ifndef PERMITD_CLI_MIGRATE_H
#define PERMITD_CLI_MIGRATE_H

#include "core/config.h"

/* Runs `permitd migrate <verb> ...`; argv[0] is "migrate". The connection
 * comes from cfg->mysql (PERMITD_MYSQL_URL) unless --mysql-url names
 * another. Progress and reports go to stdout, errors to stderr; the
 * password is never printed. Returns the process exit status
 * (MIGRATE_EXIT_* of stores/migrate.h). */
int cli_migrate_main(const struct config *cfg, int argc, char **argv);

#endif
