/*
 * migrate_run.h - running one migration file against the database: the
 * step of `permitd migrate up` and `down` that sends SQL.
 */
#ifndef PERMITD_MIGRATE_RUN_H
#define PERMITD_MIGRATE_RUN_H

#include "stores/migrate_files.h"
#include "stores/migrate_history.h"

/* Applies m's up file (up) or reverts it with its down file (!up), the
 * file statement by statement on a fresh connection of its own, recorded
 * in h's history: dirty before the first statement, applied (or removed,
 * for down) after the last. On a failure the statement's number, line and
 * the server's message are recorded and printed, with the text of the
 * statement and how to repair. A file's opening check (permitd_check_*
 * procedures, see migrate_run.c) runs before anything is marked: when it
 * refuses, nothing is recorded and the message is printed. h must hold
 * the run's lock; files names
 * the source in messages. Progress goes to stdout. Returns PERMITD_OK, or
 * PERMITD_EINTERNAL after printing why. */
int migrate_run_one(struct migrate_history *h, const struct migrate_files *files,
                    const struct migrate_file *m, int up);

#endif
