/*
 * cli_users.h - `permitd admin add-user`.
 */
#ifndef PERMITD_CLI_USERS_H
#define PERMITD_CLI_USERS_H

#include <stdio.h>

#include "core/config.h"

/* `permitd admin add-user ...` (argv[0] is "admin", argv[1] "add-user"),
 * audited as actor: the exit status. */
int cli_users_main(const struct config *cfg, const char *actor, int argc, char **argv);

/* The user verbs' part of `permitd admin --help`. */
void cli_users_usage(FILE *out);

#endif
