/*
 * migrate_sql.h - splitting a migration file into the statements the
 * server is sent, the way the stock mysql client splits its input.
 */
#ifndef PERMITD_MIGRATE_SQL_H
#define PERMITD_MIGRATE_SQL_H

#include <stddef.h>

#include "core/status.h"

/* One statement of a migration file: text[0..len) is the statement without
 * its delimiter (leading comments dropped, inner ones kept), and line is the
 * file line it starts on (1-based). */
struct migrate_sql_statement {
    const char *text;
    size_t len;
    int line;
};

/* The statements of one file; text points into the split input. */
struct migrate_sql_script {
    struct migrate_sql_statement *v;
    size_t n;
};

/* Splits sql[0..len) into statements the way the mysql client does:
 * delimiters inside '...', "..." and `...` and inside -- , # and slash-star
 * comments do not count; a line "DELIMITER xx" between statements changes
 * the delimiter (for triggers and procedures); empty statements are
 * dropped. The statements point into sql, which must outlive out. Returns
 * PERMITD_OK, or PERMITD_EINVAL for an unterminated quote or comment (with
 * the line it starts on) or a bad DELIMITER line. Free with
 * migrate_sql_free(). */
int migrate_sql_split(const char *sql, size_t len, struct migrate_sql_script *out,
                      struct permitd_error *err);

/* Frees the statement array of s (not the text); NULL is a no-op. */
void migrate_sql_free(struct migrate_sql_script *s);

#endif
