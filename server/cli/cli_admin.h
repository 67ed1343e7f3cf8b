/*
 * cli_admin.h - `permitd admin VERB ...`: the administrators' command
 * line, which works on MySQL directly (PERMITD_MYSQL_URL) with no running
 * permitd needed.
 */
#ifndef PERMITD_CLI_ADMIN_H
#define PERMITD_CLI_ADMIN_H

#include "core/config.h"

/* `permitd admin VERB ...` (argv[0] is "admin"); returns the exit status. */
int cli_admin_main(const struct config *cfg, int argc, char **argv);

#endif
