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
 * has repaired it and run `force`. libmariadb stays inside migrate.c.
 */
#ifndef PERMITD_MIGRATE_H
#define PERMITD_MIGRATE_H

#include <stddef.h>

#include "config.h"
#include "status.h"

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

/* One statement of a migration file: text[0..len) is the statement without
 * its delimiter (leading comments dropped, inner ones kept), and line is the
 * file line it starts on (1-based). */
struct migrate_statement {
    const char *text;
    size_t len;
    int line;
};

/* The statements of one file; text points into the split input. */
struct migrate_script {
    struct migrate_statement *v;
    size_t n;
};

/* Splits sql[0..len) into statements the way the mysql client does:
 * delimiters inside '...', "..." and `...` and inside -- , # and slash-star
 * comments do not count; a line "DELIMITER xx" between statements changes
 * the delimiter (for triggers and procedures); empty statements are
 * dropped. The statements point into sql, which must outlive out. Returns
 * PERMITD_OK, or PERMITD_EINVAL for an unterminated quote or comment (with
 * the line it starts on) or a bad DELIMITER line. Free with
 * migrate_script_free(). */
int migrate_split(const char *sql, size_t len, struct migrate_script *out,
                  struct permitd_error *err);

/* Frees the statement array of s (not the text); NULL is a no-op. */
void migrate_script_free(struct migrate_script *s);

/* Writes the SHA-256 of data[0..len) as 64 lower-case hex digits and a NUL
 * into hex (65 bytes): the checksum the history table records per file. */
void migrate_sha256_hex(const void *data, size_t len, char hex[65]);

#endif
