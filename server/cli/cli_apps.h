/*
 * cli_apps.h - the app verbs of `permitd admin`: add-app, update-app,
 * issue-key, revoke-key, list-apps.
 */
#ifndef PERMITD_CLI_APPS_H
#define PERMITD_CLI_APPS_H

#include <stdio.h>

#include "core/config.h"

/* 1 when verb is one of the command line's app verbs. */
int cli_apps_verb(const char *verb);

/* `permitd admin VERB ...` for an app verb (argv[0] is "admin"), audited
 * as actor; returns the exit status. */
int cli_apps_main(const struct config *cfg, const char *actor, int argc, char **argv);

/* The app verbs' part of `permitd admin --help`. */
void cli_apps_usage(FILE *out);

#endif
